//! The `web_search` tool over the provider chosen in `[tools.web_search]`:
//! a SearXNG instance (its JSON API), Brave Search or Tavily. Results come
//! back as title, URL and snippet; a rejected key, a spent quota or a
//! SearXNG without its JSON format enabled is an error that says so.
//!
//! The provider's address is the owner's choice (a SearXNG instance often
//! lives on the home network), so these requests do not go through the
//! model's network rules; the model only chooses the query.

use std::sync::LazyLock;
use std::time::Duration;

use async_trait::async_trait;
use reqwest::StatusCode;
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::args::{opt_u64, req_str};
use super::{CallOutcome, RiskLevel, Tool, ToolContext, ToolError, ToolOutput, ToolSpec, schema};
use crate::runner::Authorized;

/// Most results one call may ask for.
pub const MAX_COUNT: u64 = 20;

/// Most bytes of a provider's answer read.
const MAX_ANSWER_BYTES: usize = 2 * 1024 * 1024;

/// Which search service answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SearchProvider {
    /// A SearXNG instance (`url`), through `/search?format=json`.
    Searxng,
    /// Brave Search's web search API (`api_key`).
    Brave,
    /// Tavily's search API (`api_key`).
    Tavily,
}

impl SearchProvider {
    fn name(self) -> &'static str {
        match self {
            Self::Searxng => "searxng",
            Self::Brave => "brave",
            Self::Tavily => "tavily",
        }
    }

    fn default_base(self) -> Option<&'static str> {
        match self {
            Self::Searxng => None,
            Self::Brave => Some("https://api.search.brave.com"),
            Self::Tavily => Some("https://api.tavily.com"),
        }
    }
}

/// `[tools.web_search]`.
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebSearchConfig {
    /// `searxng`, `brave` or `tavily`.
    pub provider: SearchProvider,
    /// The SearXNG instance's address (required for `searxng`).
    #[serde(default)]
    pub url: Option<String>,
    /// The API key (required for `brave` and `tavily`).
    #[serde(default, skip_serializing)]
    pub api_key: Option<SecretString>,
    /// Replaces Brave's or Tavily's API address (a proxy, or tests).
    #[serde(default)]
    pub base_url: Option<String>,
    /// Results when the call does not say (1-20).
    #[serde(default = "default_count")]
    pub count: u64,
    /// Limit of one search.
    #[serde(
        default = "default_timeout",
        with = "cairn_core::duration::serde_compact"
    )]
    pub timeout: Duration,
    /// Why the key cannot be read here (written `${VAR}` with `VAR` unset;
    /// set by whoever expands it): every search then fails saying so.
    #[serde(skip)]
    pub unavailable: Option<String>,
}

fn default_count() -> u64 {
    5
}

fn default_timeout() -> Duration {
    Duration::from_secs(20)
}

impl PartialEq for WebSearchConfig {
    fn eq(&self, other: &Self) -> bool {
        let key = |c: &Self| c.api_key.as_ref().map(|k| k.expose_secret().to_string());
        self.provider == other.provider
            && self.url == other.url
            && key(self) == key(other)
            && self.base_url == other.base_url
            && self.count == other.count
            && self.timeout == other.timeout
            && self.unavailable == other.unavailable
    }
}

/// Never shows the key.
impl std::fmt::Debug for WebSearchConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebSearchConfig")
            .field("provider", &self.provider)
            .field("url", &self.url)
            .field("api_key", &self.api_key.as_ref().map(|_| "***"))
            .field("base_url", &self.base_url)
            .field("count", &self.count)
            .finish_non_exhaustive()
    }
}

/// One result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchHit {
    /// The page's title.
    pub title: String,
    /// Its address.
    pub url: String,
    /// What the provider quotes from it.
    pub snippet: String,
}

/// `web_search`: results from the configured provider.
#[derive(Debug, Clone)]
pub struct WebSearchTool {
    config: WebSearchConfig,
    /// The provider's base address, checked at start.
    base: String,
    client: reqwest::Client,
}

impl WebSearchTool {
    /// Builds the tool; a provider missing its `url` or `api_key` is an
    /// error naming the setting.
    pub fn new(config: WebSearchConfig) -> Result<Self, ToolError> {
        let provider = config.provider;
        let base = match provider {
            SearchProvider::Searxng => config.url.clone().ok_or_else(|| {
                ToolError::InvalidArguments(
                    "tools.web_search.url: the SearXNG instance's address is required".into(),
                )
            })?,
            _ => config
                .base_url
                .clone()
                .or(provider.default_base().map(str::to_string))
                .unwrap_or_default(),
        };
        let base = base.trim().trim_end_matches('/').to_string();
        reqwest::Url::parse(&base).map_err(|e| {
            ToolError::InvalidArguments(format!("tools.web_search: bad address `{base}`: {e}"))
        })?;
        let keyed = matches!(provider, SearchProvider::Brave | SearchProvider::Tavily);
        if keyed
            && config.unavailable.is_none()
            && config
                .api_key
                .as_ref()
                .is_none_or(|k| k.expose_secret().trim().is_empty())
        {
            return Err(ToolError::InvalidArguments(format!(
                "tools.web_search.api_key: {} needs an API key",
                provider.name()
            )));
        }
        if !(1..=MAX_COUNT).contains(&config.count) {
            return Err(ToolError::InvalidArguments(format!(
                "tools.web_search.count: {} is not within 1-{MAX_COUNT}",
                config.count
            )));
        }
        let client = cairn_llm::tls::client_builder()
            .timeout(config.timeout)
            .user_agent(concat!("cairn/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ToolError::Http(format!("cannot build the HTTP client: {e}")))?;
        Ok(Self {
            config,
            base,
            client,
        })
    }

    /// Searches; errors say what the provider refused and why.
    pub async fn search(&self, query: &str, count: u64) -> Result<Vec<SearchHit>, ToolError> {
        if let Some(why) = &self.config.unavailable {
            return Err(ToolError::Unavailable(why.clone()));
        }
        let provider = self.config.provider;
        let key = self
            .config
            .api_key
            .as_ref()
            .map(|k| k.expose_secret().trim().to_string())
            .unwrap_or_default();
        let request = match provider {
            SearchProvider::Searxng => self
                .client
                .get(format!("{}/search", self.base))
                .query(&[("q", query), ("format", "json")]),
            SearchProvider::Brave => self
                .client
                .get(format!("{}/res/v1/web/search", self.base))
                .query(&[("q", query), ("count", &count.to_string())])
                .header("X-Subscription-Token", key)
                .header(reqwest::header::ACCEPT, "application/json"),
            SearchProvider::Tavily => self
                .client
                .post(format!("{}/search", self.base))
                .bearer_auth(key)
                .json(&json!({"query": query, "max_results": count})),
        };
        let response = request.send().await.map_err(|e| self.transport(e))?;
        let status = response.status();
        let body = read_bounded(response)
            .await
            .map_err(|e| self.transport(e))?;
        if !status.is_success() {
            return Err(self.refusal(status, &body));
        }
        let value: Value = serde_json::from_slice(&body).map_err(|e| {
            ToolError::Http(format!(
                "{} answered with something that is not JSON ({e})",
                provider.name()
            ))
        })?;
        let hits = match provider {
            SearchProvider::Searxng => hits(&value["results"], "content"),
            SearchProvider::Brave => hits(&value["web"]["results"], "description"),
            SearchProvider::Tavily => hits(&value["results"], "content"),
        };
        Ok(hits
            .into_iter()
            .take(usize::try_from(count).unwrap_or(usize::MAX))
            .collect())
    }

    /// A failed connection or a timeout; never carries the URL (a query may be private).
    fn transport(&self, e: reqwest::Error) -> ToolError {
        if e.is_timeout() {
            ToolError::Timeout(self.config.timeout)
        } else {
            ToolError::Http(format!(
                "{} could not be reached: {}",
                self.config.provider.name(),
                cairn_core::text::error_chain(&e.without_url())
            ))
        }
    }

    /// What a non-2xx answer means, in the person's terms.
    fn refusal(&self, status: StatusCode, body: &[u8]) -> ToolError {
        let provider = self.config.provider.name();
        let detail = detail_of(body);
        let why = match (self.config.provider, status.as_u16()) {
            (SearchProvider::Searxng, 403) => {
                "the instance refuses JSON: enable `json` under search.formats in its settings.yml"
                    .to_string()
            }
            (_, 401 | 403) => {
                "the API key was rejected: check tools.web_search.api_key".to_string()
            }
            (_, 429) => {
                "the rate limit or quota is reached: try again later, or raise the plan".to_string()
            }
            (SearchProvider::Tavily, 432 | 433) => "the plan's search quota is used up".to_string(),
            _ => "the search failed".to_string(),
        };
        ToolError::Http(match detail {
            Some(detail) => format!("{provider} answered HTTP {status}: {why} ({detail})"),
            None => format!("{provider} answered HTTP {status}: {why}"),
        })
    }
}

/// `error.detail`, `detail`, `message` or `error` from an error body, short.
fn detail_of(body: &[u8]) -> Option<String> {
    let value: Value = serde_json::from_slice(body).ok()?;
    let text = [
        &value["error"]["detail"],
        &value["detail"]["error"],
        &value["detail"],
        &value["message"],
        &value["error"],
    ]
    .into_iter()
    .find_map(Value::as_str)?;
    Some(text.chars().take(200).collect())
}

/// Title, URL and snippet (under `snippet_key`) of each result object.
fn hits(results: &Value, snippet_key: &str) -> Vec<SearchHit> {
    let text = |v: &Value, key: &str| v[key].as_str().unwrap_or("").trim().to_string();
    results
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|item| {
                    let url = text(item, "url");
                    (!url.is_empty()).then(|| SearchHit {
                        title: text(item, "title"),
                        snippet: strip_tags(&text(item, snippet_key)),
                        url,
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Brave marks matches with `<strong>`; the model needs the words only.
fn strip_tags(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_tag = false;
    for c in text.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out
}

async fn read_bounded(response: reqwest::Response) -> Result<Vec<u8>, reqwest::Error> {
    use futures::StreamExt;
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        let room = MAX_ANSWER_BYTES.saturating_sub(body.len());
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if chunk.len() > room {
            break;
        }
    }
    Ok(body)
}

/// The results as the model reads them.
fn render(query: &str, hits: &[SearchHit]) -> String {
    if hits.is_empty() {
        return format!("No results for \"{query}\".");
    }
    let mut out = format!("Results for \"{query}\":\n");
    for (i, hit) in hits.iter().enumerate() {
        out.push_str(&format!("\n{}. {}\n   {}\n", i + 1, hit.title, hit.url));
        if !hit.snippet.is_empty() {
            out.push_str(&format!("   {}\n", hit.snippet));
        }
    }
    out
}

/// Reads only: the query goes to the search service the owner configured.
static WEB_SEARCH: LazyLock<ToolSpec> = LazyLock::new(|| {
    ToolSpec::new(
        "web_search",
        RiskLevel::ReadOnly,
        "Search the web; returns title, URL and snippet of each result. Read a page with web_fetch.",
    )
    .params(schema::closed(
        json!({
            "query": {"type": "string"},
            "count": {"type": "integer", "minimum": 1, "maximum": MAX_COUNT}
        }),
        &["query"],
    ))
});

#[async_trait]
impl Tool for WebSearchTool {
    fn spec(&self) -> &ToolSpec {
        &WEB_SEARCH
    }

    async fn execute(&self, args: Value, ctx: &ToolContext, _: &Authorized) -> CallOutcome {
        let query = req_str(&args, "query")?.trim().to_string();
        if query.is_empty() {
            return Err(ToolError::InvalidArguments(
                "`query` must not be empty".into(),
            ));
        }
        let count = opt_u64(&args, "count")?
            .unwrap_or(self.config.count)
            .clamp(1, MAX_COUNT);
        let hits = ctx.until_cancelled(self.search(&query, count)).await?;
        Ok(ToolOutput::ok(render(&query, &hits)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(provider: SearchProvider) -> WebSearchConfig {
        WebSearchConfig {
            provider,
            url: None,
            api_key: None,
            base_url: None,
            count: 5,
            timeout: default_timeout(),
            unavailable: None,
        }
    }

    #[test]
    fn missing_settings_are_named() {
        let err = WebSearchTool::new(config(SearchProvider::Searxng)).unwrap_err();
        assert!(err.to_string().contains("tools.web_search.url"), "{err}");
        let err = WebSearchTool::new(config(SearchProvider::Brave)).unwrap_err();
        assert!(
            err.to_string().contains("tools.web_search.api_key"),
            "{err}"
        );
        let c = WebSearchConfig {
            api_key: Some("k".to_string().into()),
            count: 0,
            ..config(SearchProvider::Tavily)
        };
        assert!(
            WebSearchTool::new(c)
                .unwrap_err()
                .to_string()
                .contains("count")
        );
    }

    #[tokio::test]
    async fn an_unavailable_key_fails_each_search_saying_why() {
        let c = WebSearchConfig {
            unavailable: Some(
                "config.toml:3: tools.web_search.api_key: environment variable K is not set".into(),
            ),
            ..config(SearchProvider::Brave)
        };
        let tool = WebSearchTool::new(c).unwrap();
        let err = tool.search("rust", 1).await.unwrap_err();
        assert!(
            matches!(&err, ToolError::Unavailable(why) if why.ends_with("environment variable K is not set")),
            "{err}"
        );
    }

    #[test]
    fn the_key_never_shows() {
        let c: WebSearchConfig = serde_json::from_value(json!({
            "provider": "brave", "api_key": "BSA-secret-key"
        }))
        .unwrap();
        assert!(!format!("{c:?}").contains("BSA-secret"));
        assert!(!serde_json::to_string(&c).unwrap().contains("BSA-secret"));
        assert_eq!(c.count, 5);
    }

    #[test]
    fn results_and_errors_read_well() {
        let v = json!({"web": {"results": [
            {"title": "Rust", "url": "https://rust-lang.org", "description": "A <strong>language</strong>"},
            {"title": "no url"}
        ]}});
        let h = hits(&v["web"]["results"], "description");
        assert_eq!(h.len(), 1);
        assert_eq!(h[0].snippet, "A language");
        let text = render("rust", &h);
        assert!(
            text.contains("1. Rust\n   https://rust-lang.org\n   A language"),
            "{text}"
        );
        assert_eq!(render("x", &[]), "No results for \"x\".");
        assert_eq!(
            detail_of(br#"{"error":{"detail":"bad token","status":401}}"#).as_deref(),
            Some("bad token")
        );
        assert_eq!(
            detail_of(br#"{"detail":{"error":"Unauthorized"}}"#).as_deref(),
            Some("Unauthorized")
        );
    }
}
