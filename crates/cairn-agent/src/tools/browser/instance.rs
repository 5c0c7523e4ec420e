//! One agent's browser: started on its first call, closed after
//! `tools.browser.idle_secs` without one, its process group killed when it
//! is closed or dropped. Its pump answers what the browser asks as it runs:
//! every paused request judged by the network rules, every new target
//! (tab, frame, worker) set up so its requests pause too, dialogs
//! dismissed, downloads refused or moved to the inbox.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use cairn_core::live::Live;
use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio::task::JoinHandle;

use super::BrowserConfig;
use super::cdp::{Cdp, CdpError, Event};
use super::guard::{self, Verdict};
use super::launch::{self, LaunchSpec, Process};
use super::proxy::Proxy;
use crate::sandbox::Sandbox;
use crate::tools::ToolError;
use crate::tools::net::NetClient;

/// The synthetic event the pump sends once a new tab is set up.
pub(super) const TAB_READY: &str = "cairn.tabReady";

/// Limit of the calls the pump and the start make (not the page's own).
const QUICK: Duration = Duration::from_secs(10);

/// How long the browser has to start and answer.
const START_LIMIT: Duration = Duration::from_secs(30);

/// What every agent's browser shares: the configuration and the means.
#[derive(Debug)]
pub(super) struct Settings {
    pub config: BrowserConfig,
    pub executable: PathBuf,
    /// `CAIRN_HOME/browser`.
    pub root: PathBuf,
    /// `[tools.http]`'s rules, replaced on a reload.
    pub net: Live<NetClient>,
    pub sandbox: Arc<Sandbox>,
}

/// One open tab.
#[derive(Debug, Clone)]
pub(super) struct Tab {
    pub target: String,
    pub session: String,
    pub url: String,
    /// The refs of its last snapshot.
    pub refs: HashMap<String, i64>,
    /// Its renderer crashed.
    pub crashed: bool,
}

/// What the pump and the tools both see.
#[derive(Debug, Default)]
pub(super) struct Shared {
    pub tabs: Vec<Tab>,
    /// The target the tools act on.
    pub current: Option<String>,
    /// Download names by id, until they finish.
    downloads: HashMap<String, String>,
}

impl Shared {
    pub fn tab(&self, target: &str) -> Option<&Tab> {
        self.tabs.iter().find(|t| t.target == target)
    }

    pub fn tab_mut(&mut self, target: &str) -> Option<&mut Tab> {
        self.tabs.iter_mut().find(|t| t.target == target)
    }

    pub fn current_tab(&self) -> Option<&Tab> {
        self.tab(self.current.as_deref()?)
    }
}

/// A started browser.
pub(super) struct Running {
    pub cdp: Arc<Cdp>,
    pub events: broadcast::Sender<Event>,
    process: Process,
    _proxy: Proxy,
    pump: JoinHandle<()>,
    idle: JoinHandle<()>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.pump.abort();
        self.idle.abort();
        self.process.kill();
    }
}

/// One agent's browser.
pub struct Browser {
    pub(super) agent: String,
    pub(super) settings: Arc<Settings>,
    pub(super) workspace: PathBuf,
    pub(super) running: tokio::sync::Mutex<Option<Running>>,
    pub(super) shared: Arc<Mutex<Shared>>,
    /// Refusals, dialogs, downloads and popups, for the next result.
    pub(super) notes: Arc<Mutex<Vec<String>>>,
    last_used: Mutex<Instant>,
    me: Weak<Browser>,
}

impl std::fmt::Debug for Browser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Browser")
            .field("agent", &self.agent)
            .finish_non_exhaustive()
    }
}

impl Browser {
    pub(super) fn new(agent: &str, settings: Arc<Settings>, workspace: PathBuf) -> Arc<Self> {
        Arc::new_cyclic(|me| Self {
            agent: agent.to_string(),
            settings,
            workspace,
            running: tokio::sync::Mutex::new(None),
            shared: Arc::default(),
            notes: Arc::default(),
            last_used: Mutex::new(Instant::now()),
            me: me.clone(),
        })
    }

    pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
        m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The page's URL the tools act on, for approvals by host.
    pub(super) fn current_url(&self) -> Option<String> {
        Self::lock(&self.shared)
            .current_tab()
            .map(|t| t.url.clone())
    }

    /// Marks the browser used now (the idle clock restarts).
    pub(super) fn touch(&self) {
        *Self::lock(&self.last_used) = Instant::now();
    }

    /// The notes gathered since the last result, taken.
    pub(super) fn take_notes(&self) -> Vec<String> {
        std::mem::take(&mut *Self::lock(&self.notes))
    }

    /// Whether its process runs.
    pub async fn is_open(&self) -> bool {
        self.running.lock().await.is_some()
    }

    /// The browser, started if it is not; a dead one is replaced.
    pub(super) async fn ensure<'a>(
        &self,
        running: &'a mut Option<Running>,
    ) -> Result<&'a mut Running, ToolError> {
        if let Some(r) = running.as_mut()
            && (r.cdp.closed().is_cancelled() || r.process.exited())
        {
            *running = None;
            *Self::lock(&self.shared) = Shared::default();
            Self::lock(&self.notes).push(
                "the browser had stopped (it crashed or was killed); it was started again".into(),
            );
        }
        if running.is_none() {
            *running = Some(self.start().await?);
        }
        running
            .as_mut()
            .ok_or_else(|| ToolError::Failed("the browser did not start".into()))
    }

    async fn start(&self) -> Result<Running, ToolError> {
        let failed = |why: String| ToolError::Failed(format!("cannot start the browser: {why}"));
        let settings = &self.settings;
        let proxy = Proxy::start(settings.net.clone())
            .await
            .map_err(|e| failed(format!("its proxy: {e}")))?;
        let spec = LaunchSpec {
            executable: settings.executable.clone(),
            dir: settings.root.join(&self.agent),
            proxy_port: proxy.port(),
            max_renderers: settings.config.max_tabs + 2,
        };
        // A Chromium that crashes as it starts (a segfault seen once in a
        // while on a busy machine) is started once more before giving up.
        let mut retried = false;
        let (process, cdp, tx, pump) = loop {
            let launched = launch::launch(&spec, &settings.sandbox)
                .await
                .map_err(failed)?;
            let mut process = launched.process;
            let (cdp, events) = Cdp::start(launched.reader, launched.writer);
            let (tx, _) = broadcast::channel(1024);
            *Self::lock(&self.shared) = Shared::default();
            let pump = tokio::spawn(pump(
                Pump {
                    cdp: Arc::clone(&cdp),
                    shared: Arc::clone(&self.shared),
                    notes: Arc::clone(&self.notes),
                    net: settings.net.clone(),
                    max_tabs: settings.config.max_tabs,
                    downloads: settings
                        .config
                        .downloads
                        .then(|| (spec.downloads(), self.workspace.join("inbox"))),
                    events: tx.clone(),
                },
                events,
            ));
            // The pipes stay open on this side, so an exit is watched for
            // itself: a crashed browser fails at once, not after the limit.
            let (version, exited) = tokio::select! {
                v = cdp.call("Browser.getVersion", json!({}), None, START_LIMIT) => (v, false),
                () = cdp.closed().cancelled() => (Err(CdpError::Closed), false),
                () = process.ended() => (Err(CdpError::Closed), true),
            };
            let Err(e) = version else {
                break (process, cdp, tx, pump);
            };
            pump.abort();
            // Give its last words a moment to arrive.
            let _ = process.wait_exit(Duration::from_millis(500)).await;
            let tail = process.stderr_tail();
            if exited && !retried {
                tracing::warn!(
                    agent = %self.agent,
                    output = %last_lines(&tail, 3),
                    "the browser exited as it started; starting it once more"
                );
                Self::lock(&self.notes)
                    .push("the browser exited as it started; it was started once more".into());
                retried = true;
                continue;
            }
            let hint = if tail.contains("No usable sandbox") {
                " (Chromium's own sandbox cannot start here)"
            } else {
                ""
            };
            let what = if exited {
                let again = if retried { ", twice" } else { "" };
                format!("exited before answering{again}")
            } else {
                format!("did not answer ({e})")
            };
            return Err(failed(format!(
                "{} {what}{hint}; its last output: {}",
                settings.executable.display(),
                last_lines(&tail, 6)
            )));
        };
        let setup = async {
            cdp.call(
                "Target.setAutoAttach",
                json!({"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true}),
                None,
                QUICK,
            )
            .await?;
            let downloads = if settings.config.downloads {
                json!({"behavior": "allowAndName", "downloadPath": spec.downloads(), "eventsEnabled": true})
            } else {
                json!({"behavior": "deny", "eventsEnabled": true})
            };
            cdp.call("Browser.setDownloadBehavior", downloads, None, QUICK)
                .await?;
            // The tab Chromium opens by itself: tabs are the tools' own.
            let targets = cdp
                .call("Target.getTargets", json!({}), None, QUICK)
                .await?;
            for info in targets["targetInfos"].as_array().into_iter().flatten() {
                if info["type"] == "page" {
                    cdp.call(
                        "Target.closeTarget",
                        json!({"targetId": info["targetId"]}),
                        None,
                        QUICK,
                    )
                    .await?;
                }
            }
            Ok::<_, CdpError>(())
        };
        if let Err(e) = setup.await {
            pump.abort();
            return Err(failed(format!("setting it up failed: {e}")));
        }
        tracing::info!(agent = %self.agent, "the browser started");
        self.touch();
        Ok(Running {
            cdp,
            events: tx,
            process,
            _proxy: proxy,
            pump,
            idle: self.idle_watch(),
        })
    }

    /// Closes the browser once `idle_secs` pass without a call.
    fn idle_watch(&self) -> JoinHandle<()> {
        let me = self.me.clone();
        let idle = Duration::from_secs(self.settings.config.idle_secs.max(1));
        tokio::spawn(async move {
            loop {
                let Some(browser) = me.upgrade() else { return };
                let since = Self::lock(&browser.last_used).elapsed();
                if since >= idle {
                    drop(browser);
                    // Not through `close`: that would abort this very task first.
                    if let Some(browser) = me.upgrade() {
                        let running = browser.running.lock().await.take();
                        if let Some(running) = running {
                            tracing::info!(agent = %browser.agent, "the browser was idle: closed");
                            graceful(running).await;
                        }
                        *Self::lock(&browser.shared) = Shared::default();
                    }
                    return;
                }
                drop(browser);
                tokio::time::sleep(idle - since).await;
            }
        })
    }

    /// Closes the browser (its profile written to disk first); true when it was open.
    pub async fn close(&self) -> bool {
        let running = self.running.lock().await.take();
        *Self::lock(&self.shared) = Shared::default();
        match running {
            Some(running) => {
                graceful(running).await;
                true
            }
            None => false,
        }
    }
}

/// Asks the browser to close (it writes cookies and storage), then kills
/// what is left of its group.
async fn graceful(mut running: Running) {
    let _ = running
        .cdp
        .call("Browser.close", json!({}), None, Duration::from_secs(3))
        .await;
    running.process.wait_exit(Duration::from_secs(3)).await;
    drop(running);
}

/// The last `n` lines of `text`, on one line.
fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join(" | ")
}

/// What the pump works with.
struct Pump {
    cdp: Arc<Cdp>,
    shared: Arc<Mutex<Shared>>,
    notes: Arc<Mutex<Vec<String>>>,
    net: Live<NetClient>,
    max_tabs: usize,
    /// With downloads allowed: where Chromium saves them and the inbox.
    downloads: Option<(PathBuf, PathBuf)>,
    events: broadcast::Sender<Event>,
}

/// Answers the browser's events in order, then passes each on to whoever
/// waits for one (a load, a navigation).
async fn pump(pump: Pump, mut events: tokio::sync::mpsc::UnboundedReceiver<Event>) {
    let pump = Arc::new(pump);
    while let Some(event) = events.recv().await {
        match event.method.as_str() {
            "Fetch.requestPaused" => {
                let pump = Arc::clone(&pump);
                let event = event.clone();
                tokio::spawn(async move { pump.judge(&event).await });
            }
            "Target.attachedToTarget" => pump.attached(&event),
            "Target.detachedFromTarget" => {
                let target = event.params["targetId"].as_str().unwrap_or_default();
                let mut shared = Browser::lock(&pump.shared);
                shared.tabs.retain(|t| t.target != target);
                if shared.current.as_deref() == Some(target) {
                    shared.current = shared.tabs.last().map(|t| t.target.clone());
                }
            }
            "Page.frameNavigated" if event.params["frame"]["parentId"].is_null() => {
                let url = event.params["frame"]["url"].as_str().unwrap_or_default();
                let mut shared = Browser::lock(&pump.shared);
                if let Some(tab) = shared
                    .tabs
                    .iter_mut()
                    .find(|t| Some(&t.session) == event.session.as_ref())
                {
                    tab.url = url.to_string();
                }
            }
            "Inspector.targetCrashed" => {
                let mut shared = Browser::lock(&pump.shared);
                if let Some(tab) = shared
                    .tabs
                    .iter_mut()
                    .find(|t| Some(&t.session) == event.session.as_ref())
                {
                    tab.crashed = true;
                }
            }
            "Page.javascriptDialogOpening" => {
                let message = event.params["message"].as_str().unwrap_or_default();
                pump.note(format!(
                    "the page opened a {} dialog (\"{message}\"); it was dismissed",
                    event.params["type"].as_str().unwrap_or("dialog")
                ));
                let cdp = Arc::clone(&pump.cdp);
                let session = event.session.clone();
                tokio::spawn(async move {
                    let _ = cdp
                        .call(
                            "Page.handleJavaScriptDialog",
                            json!({"accept": false}),
                            session.as_deref(),
                            QUICK,
                        )
                        .await;
                });
            }
            "Browser.downloadWillBegin" => pump.download_begins(&event),
            "Browser.downloadProgress" => {
                let pump = Arc::clone(&pump);
                let event = event.clone();
                tokio::spawn(async move { pump.download_progress(&event).await });
            }
            _ => {}
        }
        let _ = pump.events.send(event);
    }
}

/// Notes kept for the next tool result (the oldest dropped past this).
const MAX_NOTES: usize = 20;

impl Pump {
    /// Adds a note for the next result, keeping the newest.
    fn note(&self, text: String) {
        let mut notes = Browser::lock(&self.notes);
        if !notes.contains(&text) {
            notes.push(text);
        }
        let extra = notes.len().saturating_sub(MAX_NOTES);
        notes.drain(..extra);
    }

    /// Lets a paused request go, or fails it, by the network rules.
    async fn judge(&self, event: &Event) {
        let id = event.params["requestId"].clone();
        let url = event.params["request"]["url"].as_str().unwrap_or_default();
        let session = event.session.as_deref();
        let net = self.net.get();
        match guard::decide(&net, url).await {
            Verdict::Allow => {
                let mut params = json!({"requestId": id});
                guard::bind_credentials(&net, url, &event.params["request"], &mut params);
                let _ = self
                    .cdp
                    .call("Fetch.continueRequest", params, session, QUICK)
                    .await;
            }
            Verdict::Refuse(why) => {
                let shown: String = url.chars().take(200).collect();
                self.note(format!("refused a request to {shown}: {why}"));
                let _ = self
                    .cdp
                    .call(
                        "Fetch.failRequest",
                        json!({"requestId": id, "errorReason": "BlockedByClient"}),
                        session,
                        QUICK,
                    )
                    .await;
            }
        }
    }

    /// A new target: a tab (ours, or one a page opened), a frame or a
    /// worker. Its requests pause from its first; a tab is recorded at once
    /// (so a detach that follows finds it) and announced once set up.
    fn attached(self: &Arc<Self>, event: &Event) {
        let Some(session) = event.params["sessionId"].as_str().map(str::to_string) else {
            return;
        };
        let info = &event.params["targetInfo"];
        let target = info["targetId"].as_str().unwrap_or_default().to_string();
        let kind = info["type"].as_str().unwrap_or_default().to_string();
        let opened_by_page = info["openerId"].is_string();
        let mut refused = false;
        if kind == "page" {
            let mut shared = Browser::lock(&self.shared);
            if opened_by_page && shared.tabs.len() >= self.max_tabs {
                refused = true;
            } else {
                shared.tabs.push(Tab {
                    target: target.clone(),
                    session: session.clone(),
                    url: info["url"].as_str().unwrap_or_default().to_string(),
                    refs: HashMap::new(),
                    crashed: false,
                });
                if opened_by_page {
                    shared.current = Some(target.clone());
                }
            }
        }
        let url = info["url"].as_str().unwrap_or_default().to_string();
        if refused {
            self.note(format!(
                "the page tried to open a new tab ({url}) past tools.browser.max_tabs = {}; it was closed",
                self.max_tabs
            ));
        } else if opened_by_page && kind == "page" {
            self.note(format!(
                "the page opened a new tab ({url}); it is now the current tab"
            ));
        }
        let pump = Arc::clone(self);
        tokio::spawn(async move {
            let cdp = &pump.cdp;
            if refused {
                let _ = cdp
                    .call(
                        "Target.closeTarget",
                        json!({"targetId": target}),
                        None,
                        QUICK,
                    )
                    .await;
                return;
            }
            let on = Some(session.as_str());
            if matches!(
                kind.as_str(),
                "page" | "iframe" | "worker" | "shared_worker" | "service_worker"
            ) {
                let _ = cdp
                    .call(
                        "Fetch.enable",
                        json!({"patterns": [{"urlPattern": "*", "requestStage": "Request"}]}),
                        on,
                        QUICK,
                    )
                    .await;
            }
            if matches!(kind.as_str(), "page" | "iframe") {
                let _ = cdp.call("Page.enable", json!({}), on, QUICK).await;
                // Frames and workers of this page attach (and pause) too.
                let _ = cdp
                    .call(
                        "Target.setAutoAttach",
                        json!({"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true}),
                        on,
                        QUICK,
                    )
                    .await;
            }
            let _ = cdp
                .call("Runtime.runIfWaitingForDebugger", json!({}), on, QUICK)
                .await;
            if kind == "page" {
                let _ = pump.events.send(Event {
                    method: TAB_READY.into(),
                    params: json!({"targetId": target, "sessionId": session}),
                    session: None,
                });
            }
        });
    }

    fn download_begins(&self, event: &Event) {
        let guid = event.params["guid"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let name = event.params["suggestedFilename"]
            .as_str()
            .unwrap_or("download");
        let url = event.params["url"].as_str().unwrap_or_default();
        if self.downloads.is_none() {
            self.note(format!(
                "the page started a download ({name} from {url}); refused: tools.browser.downloads is off"
            ));
            return;
        }
        Browser::lock(&self.shared)
            .downloads
            .insert(guid, name.to_string());
    }

    /// Moves a finished download into the workspace's inbox.
    async fn download_progress(&self, event: &Event) {
        let Some((from, inbox)) = &self.downloads else {
            return;
        };
        let state = event.params["state"].as_str().unwrap_or_default();
        if state != "completed" && state != "canceled" {
            return;
        }
        let guid = event.params["guid"].as_str().unwrap_or_default();
        let Some(name) = Browser::lock(&self.shared).downloads.remove(guid) else {
            return;
        };
        if state == "canceled" {
            return;
        }
        let safe: String = name
            .chars()
            .map(|c| {
                if c == '/' || c == '\\' || c.is_control() {
                    '_'
                } else {
                    c
                }
            })
            .collect();
        let safe = safe.trim_start_matches('.');
        let safe = if safe.is_empty() { "download" } else { safe };
        let target = inbox.join(safe);
        let moved = async {
            tokio::fs::create_dir_all(inbox).await?;
            tokio::fs::copy(from.join(guid), &target).await?;
            tokio::fs::remove_file(from.join(guid)).await
        };
        match moved.await {
            Ok(()) => self.note(format!("downloaded {name} into inbox/{safe}")),
            Err(e) => self.note(format!(
                "the download {name} could not be moved into the inbox: {e}"
            )),
        }
    }
}

/// Reads `value` as the current tab's session, or says no page is open.
pub(super) fn no_page() -> ToolError {
    ToolError::Failed("no page is open; call browser_open first".into())
}

/// The value at `key` of a CDP result as text.
pub(super) fn text_at(value: &Value, key: &str) -> String {
    value[key].as_str().unwrap_or_default().to_string()
}
