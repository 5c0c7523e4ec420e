//! What the tools do in a tab: open a page, read it, act on its elements
//! by ref, go back, scroll, take a screenshot, close it. Calls to one
//! browser run one at a time; each waits for the page it causes to load,
//! up to `tools.browser.timeout_secs`, and answers with the page as text.

use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio::time::Instant;

use super::cdp::{CdpError, Event};
use super::guard::{self, Verdict};
use super::instance::{Browser, Running, TAB_READY, Tab, no_page, text_at};
use super::snapshot;
use crate::media::{MediaError, MediaStore};
use crate::tools::{CallOutcome, ToolContext, ToolError, ToolOutput};

/// How long a click or a key waits for a navigation to start.
const SETTLE: Duration = Duration::from_millis(700);

/// Most pixels of a full-page screenshot, down and across.
const MAX_FULL_PAGE: (f64, f64) = (4096.0, 16_384.0);

/// Selects what an element holds, so typed text replaces it.
const SELECT_ALL: &str = "function() { if (typeof this.select === 'function') { this.select(); } \
    else if (this.isContentEditable) { document.getSelection().selectAllChildren(this); } }";

/// Picks the option of a `<select>` whose value, label or text is `v`.
const SELECT_OPTION: &str = "function(v) { if (this.tagName !== 'SELECT') { return {error: 'not a select element'}; } \
    const all = Array.from(this.options); \
    const o = all.find(o => o.value === v || o.label === v || o.text.trim() === v); \
    if (!o) { return {error: 'no such option', options: all.map(o => o.text.trim())}; } \
    this.value = o.value; \
    this.dispatchEvent(new Event('input', {bubbles: true})); \
    this.dispatchEvent(new Event('change', {bubbles: true})); \
    return {chosen: o.text.trim()}; }";

/// How a navigation ended.
enum Loaded {
    Done,
    TimedOut,
    Failed(String),
}

/// The tab a call acts on, in a running browser.
struct At<'a> {
    running: &'a Running,
    tab: Tab,
    limit: Duration,
}

impl At<'_> {
    /// A call on the tab's session; a page that does not answer in time hung.
    async fn call(&self, method: &str, params: Value) -> Result<Value, CdpError> {
        self.running
            .cdp
            .call(method, params, Some(&self.tab.session), self.limit)
            .await
    }

    fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.running.events.subscribe()
    }

    /// Waits for the tab's load event until `deadline`.
    async fn wait_load(
        &self,
        events: &mut broadcast::Receiver<Event>,
        deadline: Instant,
    ) -> Loaded {
        self.wait_for(events, deadline, &["Page.loadEventFired"])
            .await
    }

    async fn wait_for(
        &self,
        events: &mut broadcast::Receiver<Event>,
        deadline: Instant,
        methods: &[&str],
    ) -> Loaded {
        loop {
            match tokio::time::timeout_at(deadline, events.recv()).await {
                Err(_) => return Loaded::TimedOut,
                Ok(Err(broadcast::error::RecvError::Lagged(_))) => {}
                Ok(Err(broadcast::error::RecvError::Closed)) => {
                    return Loaded::Failed("the browser is gone".into());
                }
                Ok(Ok(event)) => {
                    if event.session.as_deref() == Some(&self.tab.session)
                        && methods.contains(&event.method.as_str())
                    {
                        return Loaded::Done;
                    }
                }
            }
        }
    }

    /// Loads `url` in the tab, waiting up to the limit for its load event.
    async fn navigate(&self, url: &str) -> Result<Loaded, CdpError> {
        let mut events = self.subscribe();
        let deadline = Instant::now() + self.limit;
        let answer = match self.call("Page.navigate", json!({"url": url})).await {
            Ok(answer) => answer,
            Err(CdpError::Timeout { .. }) => return Ok(self.stop().await),
            Err(e) => return Err(e),
        };
        if let Some(error) = answer["errorText"].as_str().filter(|e| !e.is_empty()) {
            return Ok(Loaded::Failed(error.to_string()));
        }
        if answer["loaderId"].is_null() {
            return Ok(Loaded::Done);
        }
        Ok(match self.wait_load(&mut events, deadline).await {
            Loaded::TimedOut => self.stop().await,
            other => other,
        })
    }

    /// After an action: a navigation it started is waited for.
    async fn settle(&self, events: &mut broadcast::Receiver<Event>) -> Loaded {
        let started = [
            "Page.frameStartedNavigating",
            "Page.frameRequestedNavigation",
            "Page.frameStartedLoading",
        ];
        match self
            .wait_for(events, Instant::now() + SETTLE, &started)
            .await
        {
            Loaded::Done => {}
            _ => return Loaded::Done,
        }
        match self.wait_load(events, Instant::now() + self.limit).await {
            Loaded::TimedOut => self.stop().await,
            other => other,
        }
    }

    async fn stop(&self) -> Loaded {
        let _ = self
            .running
            .cdp
            .call(
                "Page.stopLoading",
                json!({}),
                Some(&self.tab.session),
                Duration::from_secs(5),
            )
            .await;
        Loaded::TimedOut
    }

    /// The backend node of `reference` in the tab's last snapshot.
    fn node(&self, reference: &str) -> Result<i64, ToolError> {
        self.tab.refs.get(reference.trim()).copied().ok_or_else(|| {
            ToolError::InvalidArguments(format!(
                "no element `{reference}` in the last snapshot of this page; take a browser_snapshot and use its refs"
            ))
        })
    }

    /// A JavaScript handle on the element `node`.
    async fn object(&self, node: i64) -> Result<String, CdpError> {
        let resolved = self
            .call("DOM.resolveNode", json!({"backendNodeId": node}))
            .await?;
        Ok(text_at(&resolved["object"], "objectId"))
    }
}

impl Browser {
    fn limit(&self) -> Duration {
        Duration::from_secs(self.settings.config.timeout_secs.max(1))
    }

    /// The current tab, or no page.
    fn current(&self) -> Result<Tab, ToolError> {
        let shared = Self::lock(&self.shared);
        let tab = shared.current_tab().cloned().ok_or_else(no_page)?;
        if tab.crashed {
            return Err(ToolError::Failed(
                "the page crashed (its renderer died); open it again with browser_open".into(),
            ));
        }
        Ok(tab)
    }

    /// A hung page's tab closed, and the error that says so.
    async fn hung(&self, running: &Running, tab: &Tab, error: CdpError) -> ToolError {
        match error {
            CdpError::Timeout { limit, .. } => {
                let closed = running
                    .cdp
                    .call(
                        "Target.closeTarget",
                        json!({"targetId": tab.target}),
                        None,
                        Duration::from_secs(5),
                    )
                    .await
                    .is_ok();
                let mut shared = Self::lock(&self.shared);
                shared.tabs.retain(|t| t.target != tab.target);
                shared.current = shared.tabs.last().map(|t| t.target.clone());
                let what = if closed {
                    "its tab was closed"
                } else {
                    "its tab could not be closed"
                };
                ToolError::Failed(format!(
                    "the page stopped responding for {}s (a hung renderer); {what}",
                    limit.as_secs()
                ))
            }
            CdpError::Closed => {
                ToolError::Failed("the browser is gone (it crashed or was closed)".into())
            }
            CdpError::Protocol(e) => ToolError::Failed(format!("the browser refused: {e}")),
        }
    }

    /// Does `action` on the current tab of the running browser (started
    /// when `start` says so), then answers with the page as text.
    async fn on_tab(&self, start: bool, action: Action<'_>) -> CallOutcome {
        self.touch();
        let mut guard = self.running.lock().await;
        let running = if start {
            self.ensure(&mut guard).await?
        } else {
            guard.as_mut().ok_or_else(no_page)?
        };
        let at = At {
            running,
            tab: self.current()?,
            limit: self.limit(),
        };
        let extra = match act(&at, action).await {
            Ok(extra) => extra,
            Err(Fail::Tool(e)) => return Err(e),
            Err(Fail::Hung(e)) => return Err(self.hung(running, &at.tab, e).await),
        };
        let page = self.page_text(&at).await;
        self.touch();
        match page {
            Ok(text) => Ok(ToolOutput::ok(match extra {
                Some(extra) => format!("{extra}\n{text}"),
                None => text,
            })),
            Err(e) => Err(self.hung(running, &at.tab, e).await),
        }
    }

    /// Title, URL, notes and snapshot of the tab; its refs kept.
    async fn page_text(&self, at: &At<'_>) -> Result<String, CdpError> {
        let (title, url) = title_and_url(at).await?;
        let tree = at.call("Accessibility.getFullAXTree", json!({})).await?;
        let nodes = tree["nodes"].as_array().cloned().unwrap_or_default();
        let snap = snapshot::render(&nodes, self.settings.config.max_chars);
        let (index, count) = {
            let mut shared = Self::lock(&self.shared);
            if let Some(tab) = shared.tab_mut(&at.tab.target) {
                tab.refs = snap.refs;
                tab.url.clone_from(&url);
            }
            let index = shared.tabs.iter().position(|t| t.target == at.tab.target);
            (index.map_or(0, |i| i + 1), shared.tabs.len())
        };
        let mut text = format!("Title: {title}\nURL: {url}\n");
        if count > 1 {
            text.push_str(&format!("Tab {index} of {count}\n"));
        }
        for note in self.take_notes() {
            text.push_str(&format!("Note: {note}\n"));
        }
        text.push('\n');
        text.push_str(&snap.text);
        Ok(text)
    }

    /// `browser_open`: a new tab with `url`.
    pub(super) async fn open(&self, url: &str) -> CallOutcome {
        if let Verdict::Refuse(why) = guard::decide(&self.settings.net.get(), url).await {
            return Err(ToolError::NotPermitted(why));
        }
        self.touch();
        let max = self.settings.config.max_tabs;
        {
            let mut guard = self.running.lock().await;
            let running = self.ensure(&mut guard).await?;
            let open = Self::lock(&self.shared).tabs.len();
            if open >= max {
                return Err(ToolError::NotPermitted(format!(
                    "{open} tabs are open, the most tools.browser.max_tabs allows; close one with browser_close first"
                )));
            }
            let mut events = running.events.subscribe();
            let created = running
                .cdp
                .call(
                    "Target.createTarget",
                    json!({"url": "about:blank"}),
                    None,
                    self.limit(),
                )
                .await
                .map_err(|e| ToolError::Failed(format!("cannot open a tab: {e}")))?;
            let target = text_at(&created, "targetId");
            let deadline = Instant::now() + self.limit();
            loop {
                match tokio::time::timeout_at(deadline, events.recv()).await {
                    Ok(Ok(event))
                        if event.method == TAB_READY && event.params["targetId"] == target =>
                    {
                        break;
                    }
                    Ok(Ok(_) | Err(broadcast::error::RecvError::Lagged(_))) => {}
                    _ => return Err(ToolError::Failed("the new tab never became ready".into())),
                }
            }
            Self::lock(&self.shared).current = Some(target);
        }
        self.on_tab(false, Action::Open(url.trim()))
            .await
            .map(failed_when_not_loaded)
    }

    /// `browser_snapshot`: the current tab as text.
    pub(super) async fn snapshot(&self) -> CallOutcome {
        self.on_tab(false, Action::Look).await
    }

    /// `browser_click`: a click at the centre of the element.
    pub(super) async fn click(&self, reference: &str) -> CallOutcome {
        self.on_tab(false, Action::Click(reference)).await
    }

    /// `browser_type`: `text` replaces what the element holds; Enter after
    /// it when `submit`.
    pub(super) async fn type_text(&self, reference: &str, text: &str, submit: bool) -> CallOutcome {
        let action = Action::Type {
            reference,
            text,
            submit,
        };
        self.on_tab(false, action).await
    }

    /// `browser_select`: the option `value` (its value, label or text) of a select.
    pub(super) async fn select(&self, reference: &str, value: &str) -> CallOutcome {
        self.on_tab(false, Action::Select { reference, value })
            .await
    }

    /// `browser_scroll`: by most of a screen, or to an end.
    pub(super) async fn scroll(&self, direction: &str) -> CallOutcome {
        let script = match direction.trim().to_ascii_lowercase().as_str() {
            "down" => "window.scrollBy(0, window.innerHeight * 0.9)",
            "up" => "window.scrollBy(0, -window.innerHeight * 0.9)",
            "top" => "window.scrollTo(0, 0)",
            "bottom" => "window.scrollTo(0, document.documentElement.scrollHeight)",
            other => {
                return Err(ToolError::InvalidArguments(format!(
                    "direction `{other}`: use up, down, top or bottom"
                )));
            }
        };
        self.on_tab(false, Action::Script(script)).await
    }

    /// `browser_back`: the tab's previous page.
    pub(super) async fn back(&self) -> CallOutcome {
        self.on_tab(false, Action::Back).await
    }

    /// `browser_screenshot`: a PNG of the tab in the workspace's media
    /// folder, for the model as an image.
    pub(super) async fn screenshot(&self, full_page: bool, ctx: &ToolContext) -> CallOutcome {
        self.touch();
        let guard = self.running.lock().await;
        let running = guard.as_ref().ok_or_else(no_page)?;
        let at = At {
            running,
            tab: self.current()?,
            limit: self.limit(),
        };
        let shot = async {
            let mut params = json!({"format": "png", "fromSurface": true});
            if full_page {
                let metrics = at.call("Page.getLayoutMetrics", json!({})).await?;
                let size = &metrics["cssContentSize"];
                let width = size["width"]
                    .as_f64()
                    .unwrap_or(1280.0)
                    .min(MAX_FULL_PAGE.0);
                let height = size["height"]
                    .as_f64()
                    .unwrap_or(800.0)
                    .min(MAX_FULL_PAGE.1);
                params["captureBeyondViewport"] = json!(true);
                params["clip"] =
                    json!({"x": 0, "y": 0, "width": width, "height": height, "scale": 1});
            }
            let answer = at.call("Page.captureScreenshot", params).await?;
            let (title, url) = title_and_url(&at).await?;
            Ok::<_, CdpError>((text_at(&answer, "data"), title, url))
        };
        let (data, title, url) = match shot.await {
            Ok(shot) => shot,
            Err(e) => return Err(self.hung(running, &at.tab, e).await),
        };
        drop(guard);
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data.as_bytes())
            .map_err(|e| ToolError::Failed(format!("the screenshot did not decode: {e}")))?;
        let part = match MediaStore::new(&ctx.workspace).store(bytes).await {
            Ok(part) => part,
            Err(MediaError::Image(e)) => {
                return Err(ToolError::Failed(format!(
                    "the screenshot cannot be kept ({e}); take it without full_page"
                )));
            }
            Err(e) => return Err(ToolError::Failed(e.to_string())),
        };
        let scope = if full_page {
            "the whole page"
        } else {
            "the visible part"
        };
        let mut text = format!(
            "Screenshot of {scope} of {title} ({url}), saved as {}/{}",
            crate::media::MEDIA_DIR,
            part.file_name()
        );
        for note in self.take_notes() {
            text.push_str(&format!("\nNote: {note}"));
        }
        Ok(ToolOutput::ok(text).with_image(part))
    }

    /// `browser_close`: the current tab; the browser with its last one.
    pub(super) async fn close_tab(&self) -> CallOutcome {
        let mut guard = self.running.lock().await;
        let Some(running) = guard.as_ref() else {
            return Ok(ToolOutput::ok("the browser is not open"));
        };
        let Some(tab) = Self::lock(&self.shared).current_tab().cloned() else {
            drop(guard);
            self.close().await;
            return Ok(ToolOutput::ok("no tab was open; the browser was closed"));
        };
        let _ = running
            .cdp
            .call(
                "Target.closeTarget",
                json!({"targetId": tab.target}),
                None,
                self.limit(),
            )
            .await;
        let next = {
            let mut shared = Self::lock(&self.shared);
            shared.tabs.retain(|t| t.target != tab.target);
            shared.current = shared.tabs.last().map(|t| t.target.clone());
            shared.current_tab().map(|t| t.url.clone())
        };
        match next {
            Some(url) => Ok(ToolOutput::ok(format!(
                "closed the tab of {}; the current tab is now {url}",
                tab.url
            ))),
            None => {
                let running = guard.take();
                drop(guard);
                drop(running);
                self.close().await;
                Ok(ToolOutput::ok(format!(
                    "closed the tab of {}; it was the last, so the browser was closed",
                    tab.url
                )))
            }
        }
    }
}

/// What a call does in the tab before it is read.
enum Action<'s> {
    Open(&'s str),
    Look,
    Click(&'s str),
    Type {
        reference: &'s str,
        text: &'s str,
        submit: bool,
    },
    Select {
        reference: &'s str,
        value: &'s str,
    },
    Script(&'static str),
    Back,
}

/// Why an action stopped: the tool's own error, or a page that hung.
enum Fail {
    Tool(ToolError),
    Hung(CdpError),
}

impl From<ToolError> for Fail {
    fn from(e: ToolError) -> Self {
        Self::Tool(e)
    }
}

/// A failed call on an element: it is gone, or the page hung.
fn gone(reference: &str) -> impl Fn(CdpError) -> Fail + '_ {
    move |error| match error {
        CdpError::Protocol(e) => Fail::Tool(ToolError::Failed(format!(
            "the element {reference} is no longer on the page ({e}); take a new browser_snapshot"
        ))),
        other => Fail::Hung(other),
    }
}

/// Does `action`; `Some` text goes before the page's.
async fn act(at: &At<'_>, action: Action<'_>) -> Result<Option<String>, Fail> {
    match action {
        Action::Look => Ok(None),
        Action::Open(url) => Ok(match at.navigate(url).await.map_err(Fail::Hung)? {
            Loaded::Done => None,
            Loaded::TimedOut => Some(not_loaded(at)),
            Loaded::Failed(error) => Some(format!("Could not open {url}: {error}")),
        }),
        Action::Click(reference) => {
            let node = at.node(reference)?;
            let _ = at
                .call("DOM.scrollIntoViewIfNeeded", json!({"backendNodeId": node}))
                .await;
            let model = at
                .call("DOM.getBoxModel", json!({"backendNodeId": node}))
                .await
                .map_err(gone(reference))?;
            let (x, y) = centre(&model["model"]["content"]).ok_or_else(|| {
                ToolError::Failed(format!("the element {reference} has no size on the page"))
            })?;
            let mut events = at.subscribe();
            for kind in ["mouseMoved", "mousePressed", "mouseReleased"] {
                at.call(
                    "Input.dispatchMouseEvent",
                    json!({"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1}),
                )
                .await
                .map_err(Fail::Hung)?;
            }
            Ok(settled(at.settle(&mut events).await, at))
        }
        Action::Type {
            reference,
            text,
            submit,
        } => {
            let node = at.node(reference)?;
            at.call("DOM.focus", json!({"backendNodeId": node}))
                .await
                .map_err(gone(reference))?;
            let object = at.object(node).await.map_err(gone(reference))?;
            at.call(
                "Runtime.callFunctionOn",
                json!({"objectId": object, "functionDeclaration": SELECT_ALL}),
            )
            .await
            .map_err(Fail::Hung)?;
            at.call("Input.insertText", json!({"text": text}))
                .await
                .map_err(Fail::Hung)?;
            if !submit {
                return Ok(None);
            }
            let mut events = at.subscribe();
            for kind in ["keyDown", "keyUp"] {
                let mut key = json!({"type": kind, "key": "Enter", "code": "Enter",
                    "windowsVirtualKeyCode": 13, "nativeVirtualKeyCode": 13});
                if kind == "keyDown" {
                    key["text"] = json!("\r");
                }
                at.call("Input.dispatchKeyEvent", key)
                    .await
                    .map_err(Fail::Hung)?;
            }
            Ok(settled(at.settle(&mut events).await, at))
        }
        Action::Select { reference, value } => {
            let node = at.node(reference)?;
            let object = at.object(node).await.map_err(gone(reference))?;
            let mut events = at.subscribe();
            let answer = at
                .call(
                    "Runtime.callFunctionOn",
                    json!({"objectId": object, "functionDeclaration": SELECT_OPTION,
                        "arguments": [{"value": value}], "returnByValue": true}),
                )
                .await
                .map_err(Fail::Hung)?;
            let result = &answer["result"]["value"];
            if let Some(error) = result["error"].as_str() {
                let options: Vec<&str> = result["options"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                let listed = if options.is_empty() {
                    String::new()
                } else {
                    format!("; its options: {}", options.join(" | "))
                };
                return Err(ToolError::InvalidArguments(format!(
                    "{reference}: {error} `{value}`{listed}"
                ))
                .into());
            }
            Ok(settled(at.settle(&mut events).await, at))
        }
        Action::Script(script) => {
            at.call("Runtime.evaluate", json!({"expression": script}))
                .await
                .map_err(Fail::Hung)?;
            Ok(None)
        }
        Action::Back => {
            let history = at
                .call("Page.getNavigationHistory", json!({}))
                .await
                .map_err(Fail::Hung)?;
            let index = history["currentIndex"].as_u64().unwrap_or(0);
            let entry = index
                .checked_sub(1)
                .and_then(|i| history["entries"].get(usize::try_from(i).ok()?))
                .ok_or_else(|| ToolError::Failed("there is no earlier page in this tab".into()))?;
            let mut events = at.subscribe();
            at.call(
                "Page.navigateToHistoryEntry",
                json!({"entryId": entry["id"]}),
            )
            .await
            .map_err(Fail::Hung)?;
            let loaded = match at.wait_load(&mut events, Instant::now() + at.limit).await {
                Loaded::TimedOut => at.stop().await,
                other => other,
            };
            Ok(settled(loaded, at))
        }
    }
}

/// Says a page did not load in time.
fn not_loaded(at: &At<'_>) -> String {
    format!(
        "The page did not finish loading within {}s (tools.browser.timeout_secs); it was stopped. What it shows so far:",
        at.limit.as_secs()
    )
}

/// The page's title and URL (a page that cannot answer this has hung).
async fn title_and_url(at: &At<'_>) -> Result<(String, String), CdpError> {
    let answer = at
        .call(
            "Runtime.evaluate",
            json!({"expression": "[document.title, location.href]", "returnByValue": true}),
        )
        .await?;
    let value = &answer["result"]["value"];
    Ok((
        value[0].as_str().unwrap_or_default().to_string(),
        value[1].as_str().unwrap_or_default().to_string(),
    ))
}

/// The centre of a box model's quad (`[x1, y1, …, x4, y4]`).
fn centre(quad: &Value) -> Option<(f64, f64)> {
    let points: Vec<f64> = quad.as_array()?.iter().filter_map(Value::as_f64).collect();
    if points.len() != 8 {
        return None;
    }
    let x = (points[0] + points[2] + points[4] + points[6]) / 4.0;
    let y = (points[1] + points[3] + points[5] + points[7]) / 4.0;
    Some((x, y))
}

/// What an action's navigation adds to its answer.
fn settled(loaded: Loaded, at: &At<'_>) -> Option<String> {
    match loaded {
        Loaded::Done => None,
        Loaded::TimedOut => Some(not_loaded(at)),
        Loaded::Failed(error) => Some(format!("The navigation failed: {error}")),
    }
}

/// An open that did not load is reported as failed (not the tool's fault).
fn failed_when_not_loaded(output: ToolOutput) -> ToolOutput {
    if output
        .content
        .starts_with("The page did not finish loading")
        || output.content.starts_with("Could not open")
    {
        ToolOutput::reported_failure(output.content)
    } else {
        output
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_click_lands_in_the_middle_of_the_box() {
        let quad = json!([10.0, 20.0, 110.0, 20.0, 110.0, 60.0, 10.0, 60.0]);
        assert_eq!(centre(&quad), Some((60.0, 40.0)));
        assert_eq!(centre(&json!([1.0, 2.0])), None);
        assert_eq!(centre(&json!(null)), None);
    }
}
