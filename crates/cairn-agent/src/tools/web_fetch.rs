//! The `web_fetch` tool: read a web page as the model needs it.
//!
//! A GET through the network rules of `[tools.http]` ([`NetClient`]: private
//! networks refused unless allowed, allowed hosts, every redirect re-checked,
//! bounded time and size). HTML comes back as readable Markdown
//! ([`super::readable`]); plain text, Markdown, JSON, XML and other text as
//! they are; PDFs and other binary content as a one-line note (no PDF text
//! extraction: no small crate does it reliably). The result starts with the
//! final URL, status, content type and whether anything was cut.

use std::sync::Arc;
use std::sync::LazyLock;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::args::{opt_u64, req_str};
use super::net::{Fetched, NetClient};
use super::{CallOutcome, RiskLevel, Tool, ToolContext, ToolError, ToolOutput, ToolSpec, schema};
use crate::runner::Authorized;

/// Characters of content returned when the call does not say.
pub const DEFAULT_MAX_CHARS: usize = 20_000;

/// Fewest characters a call may ask for.
const MIN_MAX_CHARS: usize = 100;

/// What the request says it accepts (servers that negotiate send HTML or text).
const ACCEPT: &str =
    "text/html,application/xhtml+xml,text/plain;q=0.9,application/json;q=0.9,*/*;q=0.5";

/// `web_fetch`: a page as Markdown, or text as it is.
#[derive(Debug, Clone)]
pub struct WebFetchTool {
    net: Arc<NetClient>,
    /// The shared spec, or one naming the hosts with a credential.
    spec: ToolSpec,
}

impl WebFetchTool {
    /// The tool over a client holding the network rules.
    pub fn new(net: Arc<NetClient>) -> Self {
        let spec = super::http::with_credential_hosts(&WEB_FETCH, &net);
        Self { net, spec }
    }

    async fn fetch(&self, args: &serde_json::Value, ctx: &ToolContext) -> CallOutcome {
        let url = self.net.parse_url(req_str(args, "url")?)?;
        let cap = ctx.limits.max_output_chars.max(MIN_MAX_CHARS);
        let max_chars = match opt_u64(args, "max_chars")? {
            Some(n) => usize::try_from(n)
                .unwrap_or(usize::MAX)
                .clamp(MIN_MAX_CHARS, cap),
            None => DEFAULT_MAX_CHARS.min(cap),
        };
        let fetched = self.net.get(url, ACCEPT).await?;
        let max_bytes = self.net.config().max_response_bytes;
        let page = tokio::task::spawn_blocking(move || read(fetched))
            .await
            .map_err(|e| ToolError::Failed(format!("reading the page failed: {e}")))?;
        Ok(page.render(max_chars, max_bytes))
    }
}

/// A fetched page, read.
struct Page {
    fetched: Fetched,
    title: Option<String>,
    content: String,
}

/// Turns the body into text for the model (blocking: HTML parsing is CPU work).
fn read(fetched: Fetched) -> Page {
    let body = &fetched.body.bytes;
    let kind = Kind::of(&fetched.content_type, body);
    let (title, content) = match kind {
        Kind::Html => {
            let html = String::from_utf8_lossy(body);
            let readable = super::readable::to_markdown(&html, Some(&fetched.final_url));
            (readable.title, readable.markdown)
        }
        Kind::Text => (None, String::from_utf8_lossy(body).into_owned()),
        Kind::Pdf => (
            None,
            format!(
                "[PDF not supported: web_fetch does not extract text from PDF documents ({} bytes read)]",
                body.len()
            ),
        ),
        Kind::Binary => (
            None,
            format!(
                "[binary content ({}) not shown: {} bytes read]",
                if fetched.content_type.is_empty() {
                    "no content type"
                } else {
                    fetched.content_type.as_str()
                },
                body.len()
            ),
        ),
    };
    Page {
        fetched,
        title,
        content,
    }
}

impl Page {
    /// The result: a header (final URL, status, type, title, cut), a blank
    /// line, then the content cut at `max_chars`.
    fn render(self, max_chars: usize, max_bytes: usize) -> ToolOutput {
        let (content, chars_cut) = cut_chars(&self.content, max_chars);
        let mut cut = Vec::new();
        if self.fetched.body.cut {
            cut.push(format!(
                "the download stopped at {max_bytes} bytes (tools.http.max_response_bytes)"
            ));
        }
        if chars_cut {
            cut.push(format!(
                "the content was cut at {max_chars} characters (max_chars)"
            ));
        }
        let status = self.fetched.status;
        let mut text = format!(
            "url: {}\nstatus: {status}\ncontent-type: {}\n",
            self.fetched.final_url,
            if self.fetched.content_type.is_empty() {
                "(none)"
            } else {
                &self.fetched.content_type
            }
        );
        if let Some(title) = &self.title {
            text.push_str(&format!("title: {title}\n"));
        }
        match cut.is_empty() {
            true => text.push_str("cut: no\n"),
            false => text.push_str(&format!("cut: yes ({})\n", cut.join("; "))),
        }
        text.push('\n');
        text.push_str(content);
        if status.is_success() {
            ToolOutput::ok(text)
        } else {
            ToolOutput::failed(text)
        }
    }
}

/// At most `max` characters of `text`, and whether it was longer.
fn cut_chars(text: &str, max: usize) -> (&str, bool) {
    match text.char_indices().nth(max) {
        Some((at, _)) => (&text[..at], true),
        None => (text, false),
    }
}

/// How a body is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Html,
    Text,
    Pdf,
    Binary,
}

impl Kind {
    /// From the content type, else from the first bytes.
    fn of(content_type: &str, body: &[u8]) -> Kind {
        let essence = content_type.split(';').next().unwrap_or("").trim();
        if essence.contains("html") {
            return Kind::Html;
        }
        if essence == "application/pdf" || body.starts_with(b"%PDF-") {
            return Kind::Pdf;
        }
        let texty = essence.starts_with("text/")
            || ["json", "xml", "javascript", "yaml", "csv", "markdown"]
                .iter()
                .any(|t| essence.contains(t));
        let head = &body[..body.len().min(8192)];
        if head.contains(&0) {
            return Kind::Binary;
        }
        if texty {
            return Kind::Text;
        }
        if essence.is_empty() && std::str::from_utf8(head).is_ok() {
            let start = String::from_utf8_lossy(&head[..head.len().min(512)]).to_ascii_lowercase();
            let start = start.trim_start();
            return if start.starts_with("<!doctype html") || start.starts_with("<html") {
                Kind::Html
            } else {
                Kind::Text
            };
        }
        Kind::Binary
    }
}

/// Reads only: it sends a GET, changes nothing here, and is bound by the
/// same network rules as `http_request` (which can also write, hence
/// dangerous). A policy rule can still make it ask.
static WEB_FETCH: LazyLock<ToolSpec> = LazyLock::new(|| {
    ToolSpec::new(
        "web_fetch",
        RiskLevel::ReadOnly,
        "Read a web page: HTML as Markdown (navigation and scripts removed), text and JSON as they are. Private addresses are refused.",
    )
    .params(schema::closed(
        json!({
            "url": {"type": "string", "description": "http:// or https:// URL"},
            "max_chars": {"type": "integer", "minimum": MIN_MAX_CHARS, "description": "content characters returned (default 20000)"}
        }),
        &["url"],
    ))
});

#[async_trait]
impl Tool for WebFetchTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn execute(&self, args: Value, ctx: &ToolContext, _: &Authorized) -> CallOutcome {
        ctx.until_cancelled(self.fetch(&args, ctx)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_come_from_the_type_then_the_bytes() {
        assert_eq!(Kind::of("text/html; charset=utf-8", b"x"), Kind::Html);
        assert_eq!(Kind::of("application/xhtml+xml", b"x"), Kind::Html);
        assert_eq!(Kind::of("application/json", b"{}"), Kind::Text);
        assert_eq!(Kind::of("text/plain", b"hi"), Kind::Text);
        assert_eq!(Kind::of("application/pdf", b"%PDF-1.7"), Kind::Pdf);
        assert_eq!(Kind::of("application/octet-stream", b"%PDF-1.4"), Kind::Pdf);
        assert_eq!(Kind::of("image/png", b"\x89PNG\r\n"), Kind::Binary);
        assert_eq!(Kind::of("text/plain", b"a\0b"), Kind::Binary);
        assert_eq!(Kind::of("", b"<!DOCTYPE html><p>x"), Kind::Html);
        assert_eq!(Kind::of("", b"just words"), Kind::Text);
    }

    #[test]
    fn cuts_at_characters() {
        assert_eq!(cut_chars("héllo", 2), ("hé", true));
        assert_eq!(cut_chars("hé", 2), ("hé", false));
    }
}
