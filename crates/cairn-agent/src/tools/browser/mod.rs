//! The browser tools (`browser_*`): pages that need JavaScript, forms and
//! screenshots, in the system's headless Chromium driven over the Chrome
//! DevTools Protocol ([`cdp`], a small client over the browser's pipe).
//!
//! One browser per agent ([`Browsers::browser`]), started on its first
//! call with its profile in `CAIRN_HOME/browser/<agent>` (cookies survive
//! restarts), closed after `tools.browser.idle_secs` without a call, killed
//! with its process group when closed, dropped or when the daemon dies
//! ([`launch`]). Every request a page makes is paused and judged by the
//! network rules of `[tools.http]` ([`guard`]), and every connection the
//! browser opens goes through a proxy that applies them again ([`proxy`]):
//! WebSockets, workers and redirects included. The page reads as text from
//! its accessibility tree ([`snapshot`]); elements are acted on by ref.
//!
//! Opening, reading, scrolling and screenshots are read-only; clicking,
//! typing and selecting are writes, which ask unless the page's host is in
//! `tools.browser.auto_approve_hosts`.

mod cdp;
mod guard;
mod instance;
mod launch;
mod page;
mod proxy;
mod snapshot;
mod tab;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use cairn_core::live::Live;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

pub use instance::Browser;
use instance::Settings;

use super::args::{opt_bool, req_str};
use super::net::NetClient;
use super::{
    CallOutcome, CallPlan, Family, RiskLevel, Tool, ToolContext, ToolSpec, members, schema,
};
use crate::runner::Authorized;
use crate::sandbox::Sandbox;

/// The executables looked for on `PATH` when `tools.browser.executable` is not set.
pub const CANDIDATES: &[&str] = &["chromium", "chromium-browser", "google-chrome"];

/// What to do when no browser is found: the `doctor` check's advice.
pub const INSTALL_HINT: &str = "install Chromium (Debian and Ubuntu: `apt-get install chromium`; \
    Fedora: `dnf install chromium`) or Google Chrome, or set tools.browser.executable to one";

/// `[tools.browser]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BrowserConfig {
    /// The Chromium or Chrome to run (a path, or a name on `PATH`); unset:
    /// the first of `chromium`, `chromium-browser`, `google-chrome` on `PATH`.
    pub executable: Option<String>,
    /// Seconds without a call after which an agent's browser is closed.
    pub idle_secs: u64,
    /// Most tabs open at once in one browser.
    pub max_tabs: usize,
    /// Seconds a page has to load (and to answer any call).
    pub timeout_secs: u64,
    /// Most characters of a page's text snapshot.
    pub max_chars: usize,
    /// Hosts (and their subdomains) on whose pages clicks, typing and
    /// selections run without asking.
    pub auto_approve_hosts: Vec<String>,
    /// Let pages download files (into the workspace's `inbox/`); refused otherwise.
    pub downloads: bool,
}

impl Default for BrowserConfig {
    fn default() -> Self {
        Self {
            executable: None,
            idle_secs: 300,
            max_tabs: 4,
            timeout_secs: 30,
            max_chars: 20_000,
            auto_approve_hosts: Vec::new(),
            downloads: false,
        }
    }
}

impl BrowserConfig {
    /// The browser to run, found through `path` (a `PATH` value); `Err`
    /// says what was looked for and how to get one.
    pub fn find_executable(&self, path: Option<&std::ffi::OsStr>) -> Result<PathBuf, String> {
        match &self.executable {
            Some(exe) => launch::find_on_path(&[exe.as_str()], path).ok_or_else(|| {
                format!("tools.browser.executable `{exe}` is not an executable file or on PATH; {INSTALL_HINT}")
            }),
            None => launch::find_on_path(CANDIDATES, path).ok_or_else(|| {
                format!(
                    "no browser found on PATH (looked for {}); {INSTALL_HINT}",
                    CANDIDATES.join(", ")
                )
            }),
        }
    }

    /// The time limit of one call: a start, a new tab, a load and the
    /// reading of the page fit in it, whatever `timeout_secs` is.
    fn call_limit(&self) -> std::time::Duration {
        let load = self.timeout_secs.max(10);
        std::time::Duration::from_secs((3 * load + 60).max(120))
    }

    /// Whether clicks and typing on pages of `url`'s host run without asking.
    fn auto_approved(&self, url: &str) -> bool {
        let Some(host) = reqwest::Url::parse(url).ok().and_then(|u| {
            u.host_str()
                .map(|h| h.trim_end_matches('.').to_ascii_lowercase())
        }) else {
            return false;
        };
        self.auto_approve_hosts.iter().any(|allowed| {
            let allowed = allowed.trim().trim_end_matches('.').to_ascii_lowercase();
            !allowed.is_empty() && (host == allowed || host.ends_with(&format!(".{allowed}")))
        })
    }
}

/// Every agent's browser, over one configuration.
#[derive(Debug)]
pub struct Browsers {
    settings: Arc<Settings>,
    by_agent: Mutex<BTreeMap<String, Arc<Browser>>>,
}

impl Browsers {
    /// The browsers of this configuration: `executable` (found), profiles
    /// below `root` (`CAIRN_HOME/browser`), requests under `net`'s rules,
    /// processes started in `sandbox`.
    pub fn new(
        config: BrowserConfig,
        executable: PathBuf,
        root: PathBuf,
        net: Arc<NetClient>,
        sandbox: Arc<Sandbox>,
    ) -> Self {
        Self {
            settings: Arc::new(Settings {
                config,
                executable,
                root,
                net: Live::new(net),
                sandbox,
            }),
            by_agent: Mutex::default(),
        }
    }

    /// Puts reloaded network rules in force for every request from now on.
    pub fn set_network(&self, net: NetClient) {
        self.settings.net.set(Arc::new(net));
    }

    /// The browser executable.
    pub fn executable(&self) -> &Path {
        &self.settings.executable
    }

    /// The browser of `agent` (made, not started, on first use), whose
    /// downloads go to `workspace`'s inbox.
    pub fn browser(&self, agent: &str, workspace: &Path) -> Arc<Browser> {
        let mut by_agent = Browser::lock(&self.by_agent);
        Arc::clone(by_agent.entry(agent.to_string()).or_insert_with(|| {
            Browser::new(agent, Arc::clone(&self.settings), workspace.to_path_buf())
        }))
    }

    /// The `browser_*` tools of `agent`'s browser. Those that load pages
    /// name the hosts cairn adds a credential for (never its value).
    pub fn tools(&self, agent: &str, workspace: &Path) -> Vec<Arc<dyn Tool>> {
        let net = self.settings.net.get();
        let specs = specs().into_iter().map(|(op, spec)| {
            let spec = spec.time_limit(self.settings.config.call_limit());
            let loads = matches!(op, Op::Open | Op::Click | Op::Type | Op::Select);
            let spec = if loads {
                super::http::with_credential_hosts(&spec, &net)
            } else {
                spec
            };
            (op, spec)
        });
        members(&self.browser(agent, workspace), FAMILY, specs)
    }

    /// The agents whose browser runs now.
    pub async fn open(&self) -> Vec<String> {
        let all: Vec<Arc<Browser>> = Browser::lock(&self.by_agent).values().cloned().collect();
        let mut open = Vec::new();
        for browser in all {
            if browser.is_open().await {
                open.push(browser.agent.clone());
            }
        }
        open
    }

    /// Closes every browser (profiles written, process groups killed).
    pub async fn shutdown(&self) {
        let all: Vec<Arc<Browser>> = Browser::lock(&self.by_agent).values().cloned().collect();
        futures::future::join_all(all.iter().map(|b| b.close())).await;
    }
}

/// The family's line in the prompt.
const FAMILY: &str = "browser_*: a real (headless) browser for pages that need JavaScript, \
    logins and forms, and screenshots";

/// Which `browser_*` tool a call is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `browser_open`.
    Open,
    /// `browser_snapshot`.
    Snapshot,
    /// `browser_click`.
    Click,
    /// `browser_type`.
    Type,
    /// `browser_select`.
    Select,
    /// `browser_scroll`.
    Scroll,
    /// `browser_back`.
    Back,
    /// `browser_screenshot`.
    Screenshot,
    /// `browser_close`.
    Close,
}

fn specs() -> Vec<(Op, ToolSpec)> {
    let reference = json!({"type": "string", "description": "an element's ref from the last snapshot, such as e12"});
    let read = |name: &'static str, text: &'static str, params: Value| {
        ToolSpec::new(name, RiskLevel::ReadOnly, text)
            .params(params)
            .not_reusable()
    };
    let write = |name: &'static str, text: &'static str, params: Value| {
        ToolSpec::new(name, RiskLevel::Write, text).params(params)
    };
    vec![
        (
            Op::Open,
            read(
                "browser_open",
                "Opens a web page in a new tab of a headless browser (its JavaScript runs) and \
                 answers its title, final URL and the page as text, each link, input and button \
                 with a ref (e12) for browser_click, browser_type and browser_select. Use it when \
                 web_fetch does not see the content or the page must be used.",
                schema::closed(
                    json!({"url": {"type": "string", "description": "http(s) URL"}}),
                    &["url"],
                ),
            ),
        ),
        (
            Op::Snapshot,
            read(
                "browser_snapshot",
                "The current tab as text: headings, text, links, inputs and buttons, each element with a ref.",
                schema::closed(json!({}), &[]),
            ),
        ),
        (
            Op::Click,
            write(
                "browser_click",
                "Clicks the element with this ref; answers the page after it.",
                schema::closed(json!({"ref": reference}), &["ref"]),
            ),
        ),
        (
            Op::Type,
            write(
                "browser_type",
                "Replaces the text of the input with this ref by `text`; `submit: true` presses Enter after it.",
                schema::closed(
                    json!({"ref": reference, "text": {"type": "string"}, "submit": {"type": "boolean"}}),
                    &["ref", "text"],
                ),
            ),
        ),
        (
            Op::Select,
            write(
                "browser_select",
                "Chooses the option (by its value or its text) of the select with this ref.",
                schema::closed(
                    json!({"ref": reference, "value": {"type": "string"}}),
                    &["ref", "value"],
                ),
            ),
        ),
        (
            Op::Scroll,
            read(
                "browser_scroll",
                "Scrolls the current tab: up, down, top or bottom.",
                schema::closed(
                    json!({"direction": {"type": "string", "enum": ["up", "down", "top", "bottom"]}}),
                    &["direction"],
                ),
            ),
        ),
        (
            Op::Back,
            read(
                "browser_back",
                "Goes back to the previous page of the current tab.",
                schema::closed(json!({}), &[]),
            ),
        ),
        (
            Op::Screenshot,
            read(
                "browser_screenshot",
                "A PNG of the current tab (what is visible, or the whole page), saved in the \
                 workspace's media/ folder and shown to you as an image.",
                schema::closed(json!({"full_page": {"type": "boolean"}}), &[]),
            ),
        ),
        (
            Op::Close,
            read(
                "browser_close",
                "Closes the current tab; the browser closes with its last tab.",
                schema::closed(json!({}), &[]),
            ),
        ),
    ]
}

#[async_trait]
impl Family for Browser {
    type Op = Op;

    /// Clicks, typing and selections are writes, unless the page's host
    /// is one the owner approved in advance.
    fn plan(&self, op: Op, spec: &ToolSpec, args: &Value) -> CallPlan {
        let _ = args;
        let mut plan = spec.plan();
        if matches!(op, Op::Click | Op::Type | Op::Select)
            && self
                .current_url()
                .is_some_and(|url| self.settings.config.auto_approved(&url))
        {
            plan.risk = RiskLevel::ReadOnly;
        }
        plan
    }

    async fn call(
        &self,
        op: Op,
        args: Value,
        ctx: &ToolContext,
        _authorized: &Authorized,
    ) -> CallOutcome {
        let work = async {
            match op {
                Op::Open => self.open(req_str(&args, "url")?).await,
                Op::Snapshot => self.snapshot().await,
                Op::Click => self.click(req_str(&args, "ref")?).await,
                Op::Type => {
                    let submit = opt_bool(&args, "submit")?.unwrap_or(false);
                    self.type_text(req_str(&args, "ref")?, req_str(&args, "text")?, submit)
                        .await
                }
                Op::Select => {
                    self.select(req_str(&args, "ref")?, req_str(&args, "value")?)
                        .await
                }
                Op::Scroll => self.scroll(req_str(&args, "direction")?).await,
                Op::Back => self.back().await,
                Op::Screenshot => {
                    self.screenshot(opt_bool(&args, "full_page")?.unwrap_or(false), ctx)
                        .await
                }
                Op::Close => self.close_tab().await,
            }
        };
        ctx.until_cancelled(work).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_approved_in_advance_include_their_subdomains_only() {
        let config = BrowserConfig {
            auto_approve_hosts: vec!["example.com".into(), " Intranet.Local. ".into()],
            ..BrowserConfig::default()
        };
        assert!(config.auto_approved("https://example.com/login"));
        assert!(config.auto_approved("https://www.example.com/"));
        assert!(config.auto_approved("http://intranet.local:8080/x"));
        assert!(!config.auto_approved("https://evil-example.com/"));
        assert!(!config.auto_approved("https://example.com.evil.net/"));
        assert!(!config.auto_approved("about:blank"));
        assert!(!BrowserConfig::default().auto_approved("https://example.com/"));
    }

    #[test]
    fn the_tools_are_named_by_the_contract_with_their_risks() {
        let names: Vec<(String, RiskLevel)> = specs()
            .into_iter()
            .map(|(_, s)| (s.name().to_string(), s.risk()))
            .collect();
        let expected = [
            ("browser_open", RiskLevel::ReadOnly),
            ("browser_snapshot", RiskLevel::ReadOnly),
            ("browser_click", RiskLevel::Write),
            ("browser_type", RiskLevel::Write),
            ("browser_select", RiskLevel::Write),
            ("browser_scroll", RiskLevel::ReadOnly),
            ("browser_back", RiskLevel::ReadOnly),
            ("browser_screenshot", RiskLevel::ReadOnly),
            ("browser_close", RiskLevel::ReadOnly),
        ];
        let expected: Vec<(String, RiskLevel)> = expected
            .iter()
            .map(|(n, r)| ((*n).to_string(), *r))
            .collect();
        assert_eq!(names, expected);
    }

    #[test]
    fn a_missing_browser_is_explained_with_how_to_install_one() {
        let empty = tempfile::tempdir().unwrap();
        let why = BrowserConfig::default()
            .find_executable(Some(empty.path().as_os_str()))
            .unwrap_err();
        assert!(
            why.contains("chromium, chromium-browser, google-chrome"),
            "{why}"
        );
        assert!(why.contains("apt-get install chromium"), "{why}");
        let named = BrowserConfig {
            executable: Some("/nowhere/chrome".into()),
            ..BrowserConfig::default()
        };
        let why = named.find_executable(None).unwrap_err();
        assert!(
            why.contains("tools.browser.executable `/nowhere/chrome`"),
            "{why}"
        );
    }
}
