//! What the tools do in a tab: open a page, read it, act on its elements
//! by ref, go back, scroll, take a screenshot, close it. Calls to one
//! browser run one at a time; each waits for the page it causes to load,
//! up to `tools.browser.timeout_secs`, and answers with the page as text.

use std::time::Duration;

use base64::Engine;
use serde_json::json;
use tokio::sync::broadcast;
use tokio::time::Instant;

use super::cdp::CdpError;
use super::guard::{self, Verdict};
use super::instance::{Browser, Running, TAB_READY, Tab, no_page, text_at};
use super::snapshot;
use super::tab::{Action, At, Fail, act, title_and_url};
use crate::media::{MediaError, MediaStore};
use crate::tools::{CallOutcome, ToolContext, ToolError, ToolOutput};

/// The least time a new tab has to be made and set up.
const QUICK_TAB: Duration = Duration::from_secs(10);

/// Most pixels of a full-page screenshot, down and across.
const MAX_FULL_PAGE: (f64, f64) = (4096.0, 16_384.0);

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
                    self.limit().max(QUICK_TAB),
                )
                .await
                .map_err(|e| ToolError::Failed(format!("cannot open a tab: {e}")))?;
            let target = text_at(&created, "targetId");
            let deadline = Instant::now() + self.limit().max(QUICK_TAB);
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
