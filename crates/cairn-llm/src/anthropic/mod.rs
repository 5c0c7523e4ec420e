//! Client for Anthropic's Messages API (`POST {base}/v1/messages`): native
//! tool use, the system prompt as a top-level field, `tool_result` blocks.

mod stream;
mod wire;

use std::sync::Arc;

use async_trait::async_trait;
use reqwest::header::{HeaderMap, HeaderValue};

use crate::client::{ClientCore, drive_stream, is_json_response};
use crate::error::LlmError;
use crate::provider::LlmProvider;
use crate::settings::ProviderSettings;
use crate::types::{ChatRequest, ChatResponse, ResponseStream};
use stream::AnthropicDecoder;
use wire::{DEFAULT_MAX_TOKENS, parse_message, request_body};

/// The `anthropic-version` header value sent with every request.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// An Anthropic Messages client (no retries; see `build_provider`).
#[derive(Debug, Clone)]
pub struct AnthropicClient {
    core: Arc<ClientCore>,
}

fn endpoint(base: &str) -> String {
    // Accept both `https://api.anthropic.com` and `https://api.anthropic.com/v1`.
    if base.ends_with("/v1") {
        format!("{base}/messages")
    } else {
        format!("{base}/v1/messages")
    }
}

impl AnthropicClient {
    /// A client from settings (the kind is not checked).
    pub fn new(settings: &ProviderSettings) -> Result<Self, LlmError> {
        Ok(Self {
            core: Arc::new(ClientCore::new(settings, endpoint)?),
        })
    }

    fn headers(&self) -> Result<HeaderMap, LlmError> {
        let mut headers = HeaderMap::new();
        headers.insert(
            "anthropic-version",
            HeaderValue::from_static(ANTHROPIC_VERSION),
        );
        if let Some(key) = self.core.api_key() {
            headers.insert("x-api-key", self.core.secret_header(key)?);
        }
        Ok(headers)
    }

    fn body(&self, request: &ChatRequest, stream: bool) -> serde_json::Value {
        let max_tokens = request
            .max_tokens
            .or(self.core.max_tokens)
            .unwrap_or(DEFAULT_MAX_TOKENS);
        request_body(request, self.core.model_for(request), max_tokens, stream)
    }

    async fn parse_whole(
        &self,
        request: &ChatRequest,
        response: reqwest::Response,
    ) -> Result<ChatResponse, LlmError> {
        let value = self.core.read_json(response).await?;
        match parse_message(&value) {
            Ok(raw) => Ok(self.core.finish(request, raw)),
            Err(Some(error)) => Err(self.core.wire.classify_embedded(&error)),
            Err(None) => Err(LlmError::bad_response(
                self.core.provider(),
                "no content in the response",
            )),
        }
    }
}

#[async_trait]
impl LlmProvider for AnthropicClient {
    fn name(&self) -> &str {
        self.core.provider()
    }

    fn model(&self) -> &str {
        &self.core.model
    }

    fn context_window(&self) -> Option<u32> {
        self.core.context_window
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let response = self
            .core
            .post(&self.body(request, false), self.headers()?)
            .await?;
        self.parse_whole(request, response).await
    }

    async fn stream(&self, request: &ChatRequest) -> Result<ResponseStream, LlmError> {
        let response = self
            .core
            .post(&self.body(request, true), self.headers()?)
            .await?;
        if is_json_response(&response) {
            let whole = self.parse_whole(request, response).await?;
            return Ok(ResponseStream::from_response(whole));
        }
        let decoder = AnthropicDecoder::new(self.core.wire.clone());
        Ok(drive_stream(
            Arc::clone(&self.core),
            request.clone(),
            response,
            decoder,
        ))
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
