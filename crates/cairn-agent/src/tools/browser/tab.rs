//! A tab as the tools act on it ([`At`]): calls on its session (one that
//! does not answer in time means the page hung), waiting for the loads an
//! action causes, and the actions themselves ([`act`]) by ref.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio::time::Instant;

use super::cdp::{CdpError, Event};
use super::instance::{Running, Tab, text_at};
use crate::tools::ToolError;

/// The least time a page has to answer a call (not a load): a short
/// `timeout_secs` bounds loads, not a busy machine's answers.
const MIN_CALL: Duration = Duration::from_secs(10);

/// How long a click or a key waits for a navigation to start.
const SETTLE: Duration = Duration::from_millis(700);

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
pub(super) enum Loaded {
    Done,
    TimedOut,
    Failed(String),
}

/// The tab a call acts on, in a running browser.
pub(super) struct At<'a> {
    pub running: &'a Running,
    pub tab: Tab,
    pub limit: Duration,
}

impl At<'_> {
    /// A call on the tab's session; a page that does not answer in time hung.
    pub(super) async fn call(&self, method: &str, params: Value) -> Result<Value, CdpError> {
        self.running
            .cdp
            .call(
                method,
                params,
                Some(&self.tab.session),
                self.limit.max(MIN_CALL),
            )
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
        // The load event; or the main frame stopping without one (a
        // navigation that became a download, or was refused).
        self.wait_for(events, deadline, |event| {
            (event.method == "Page.loadEventFired" && self.ours(event))
                || (event.method == "Page.frameStoppedLoading"
                    && self.ours(event)
                    && event.params["frameId"] == self.tab.target.as_str())
                || event.method == "Browser.downloadWillBegin"
        })
        .await
    }

    /// Whether `event` came from this tab.
    fn ours(&self, event: &Event) -> bool {
        event.session.as_deref() == Some(&self.tab.session)
    }

    async fn wait_for(
        &self,
        events: &mut broadcast::Receiver<Event>,
        deadline: Instant,
        wanted: impl Fn(&Event) -> bool,
    ) -> Loaded {
        loop {
            match tokio::time::timeout_at(deadline, events.recv()).await {
                Err(_) => return Loaded::TimedOut,
                Ok(Err(broadcast::error::RecvError::Lagged(_))) => {}
                Ok(Err(broadcast::error::RecvError::Closed)) => {
                    return Loaded::Failed("the browser is gone".into());
                }
                Ok(Ok(event)) if wanted(&event) => return Loaded::Done,
                Ok(Ok(_)) => {}
            }
        }
    }

    /// Loads `url` in the tab, waiting up to the limit for its load event.
    async fn navigate(&self, url: &str) -> Result<Loaded, CdpError> {
        let mut events = self.subscribe();
        let deadline = Instant::now() + self.limit;
        // A server that never answers holds `Page.navigate` itself.
        let navigated = self.call("Page.navigate", json!({"url": url}));
        let answer = match tokio::time::timeout_at(deadline, navigated).await {
            Ok(Ok(answer)) => answer,
            Err(_) | Ok(Err(CdpError::Timeout { .. })) => return Ok(self.stop().await),
            Ok(Err(e)) => return Err(e),
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
        let navigation =
            |event: &Event| self.ours(event) && started.contains(&event.method.as_str());
        match self
            .wait_for(events, Instant::now() + SETTLE, navigation)
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

/// What a call does in the tab before it is read.
pub(super) enum Action<'s> {
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
pub(super) enum Fail {
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
pub(super) async fn act(at: &At<'_>, action: Action<'_>) -> Result<Option<String>, Fail> {
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
pub(super) async fn title_and_url(at: &At<'_>) -> Result<(String, String), CdpError> {
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
