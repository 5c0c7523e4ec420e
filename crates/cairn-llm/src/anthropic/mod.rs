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

fn endpoint(base: &str) -> String {
    // Accept both `https://api.anthropic.com` and `https://api.anthropic.com/v1`.
    if base.ends_with("/v1") {
        format!("{base}/messages")
    } else {
        format!("{base}/v1/messages")
    }
}

impl Protocol for AnthropicProtocol {
    type Decoder = AnthropicDecoder;

    fn endpoint(base: &str) -> String {
        endpoint(base)
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
    #[test]
    fn endpoint_accepts_base_with_or_without_v1() {
        assert_eq!(super::endpoint("https://a.b"), "https://a.b/v1/messages");
        assert_eq!(super::endpoint("https://a.b/v1"), "https://a.b/v1/messages");
    }
}
