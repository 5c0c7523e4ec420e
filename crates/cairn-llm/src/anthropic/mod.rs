//! Client for Anthropic's Messages API (`POST {base}/v1/messages`): native
//! tool use, the system prompt as a top-level field, `tool_result` blocks.

mod stream;
mod wire;

use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::Value;

use crate::client::{ClientCore, RawResponse};
use crate::error::LlmError;
use crate::http::Wire;
use crate::http_provider::{HttpProvider, ParseProblem, Protocol};
use crate::models::{ModelPage, models_in};
use crate::types::ChatRequest;
use stream::AnthropicDecoder;
use wire::{DEFAULT_MAX_TOKENS, parse_message, request_body};

/// The `anthropic-version` header value sent with every request.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// An Anthropic Messages client (no retries; see `build_provider`).
pub type AnthropicClient = HttpProvider<AnthropicProtocol>;

/// The Anthropic Messages wire protocol, as used by [`AnthropicClient`].
#[derive(Debug, Clone)]
pub struct AnthropicProtocol;

/// `{base}/v1/{path}`, accepting both `https://api.anthropic.com` and
/// `https://api.anthropic.com/v1` as the base.
fn endpoint(base: &str, path: &str) -> String {
    if base.ends_with("/v1") {
        format!("{base}/{path}")
    } else {
        format!("{base}/v1/{path}")
    }
}

/// Models per page asked for (the API's maximum).
const MODELS_PAGE: &str = "1000";

impl Protocol for AnthropicProtocol {
    type Decoder = AnthropicDecoder;

    fn endpoint(base: &str) -> String {
        endpoint(base, "messages")
    }

    fn models_endpoint(base: &str) -> String {
        endpoint(base, "models")
    }

    fn models_page_url(models_url: &str, after: Option<&str>) -> String {
        let Ok(mut url) = reqwest::Url::parse(models_url) else {
            return models_url.to_owned();
        };
        url.query_pairs_mut().append_pair("limit", MODELS_PAGE);
        if let Some(after) = after {
            url.query_pairs_mut().append_pair("after_id", after);
        }
        url.into()
    }

    /// `{"data": [{"id", "display_name"}, …], "has_more", "last_id"}`.
    fn parse_models(value: &Value) -> Result<ModelPage, &'static str> {
        let models = models_in(value, Some("display_name"))?;
        let more = value.get("has_more").and_then(Value::as_bool) == Some(true);
        let next = value
            .get("last_id")
            .and_then(Value::as_str)
            .filter(|_| more)
            .map(str::to_owned);
        Ok(ModelPage { models, next })
    }

    fn new(_core: &ClientCore) -> Self {
        Self
    }

    fn headers(&self, core: &ClientCore) -> Result<HeaderMap, LlmError> {
        let mut headers = HeaderMap::new();
        headers.insert(
            "anthropic-version",
            HeaderValue::from_static(ANTHROPIC_VERSION),
        );
        if let Some(key) = core.api_key() {
            headers.insert("x-api-key", core.secret_header(key)?);
        }
        Ok(headers)
    }

    fn body(&self, core: &ClientCore, request: &ChatRequest, stream: bool) -> Value {
        let max_tokens = request
            .max_tokens
            .or(core.max_tokens)
            .unwrap_or(DEFAULT_MAX_TOKENS);
        request_body(request, core.model_for(request), max_tokens, stream)
    }

    fn parse(value: &Value) -> Result<RawResponse, ParseProblem> {
        parse_message(value).map_err(|error| match error {
            Some(error) => ParseProblem::Embedded(error),
            None => ParseProblem::Malformed("no content in the response"),
        })
    }

    fn decoder(wire: Wire) -> AnthropicDecoder {
        AnthropicDecoder::new(wire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn model_pages_carry_the_next_cursor_only_when_there_is_more() {
        let page = AnthropicProtocol::parse_models(&json!({
            "data": [{"id": "claude-x", "display_name": "Claude X"}],
            "has_more": true, "last_id": "claude-x"
        }))
        .unwrap();
        assert_eq!(page.models[0].display_name.as_deref(), Some("Claude X"));
        assert_eq!(page.next.as_deref(), Some("claude-x"));
        let last = AnthropicProtocol::parse_models(
            &json!({"data": [], "has_more": false, "last_id": "z"}),
        );
        assert_eq!(last.unwrap().next, None);
        assert!(AnthropicProtocol::parse_models(&json!({"error": {}})).is_err());
        assert_eq!(
            AnthropicProtocol::models_page_url("https://a.b/v1/models", Some("m 1")),
            "https://a.b/v1/models?limit=1000&after_id=m+1"
        );
    }

    #[test]
    fn endpoint_accepts_base_with_or_without_v1() {
        assert_eq!(
            super::endpoint("https://a.b", "messages"),
            "https://a.b/v1/messages"
        );
        assert_eq!(
            super::endpoint("https://a.b/v1", "models"),
            "https://a.b/v1/models"
        );
    }
}
