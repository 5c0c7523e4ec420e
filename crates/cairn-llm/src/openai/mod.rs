//! Client for OpenAI-compatible chat completions (`POST {base}/chat/completions`).
//!
//! Works with OpenAI, OpenRouter, Ollama, vLLM, llama.cpp server and LM Studio;
//! parsing tolerates their deviations (null content, missing usage or
//! finish reason, arguments as string or object, unknown fields).

mod stream;
mod wire;

use std::sync::Arc;

use async_trait::async_trait;
use reqwest::header::{AUTHORIZATION, HeaderMap};

use crate::client::{ClientCore, drive_stream, is_json_response};
use crate::error::LlmError;
use crate::provider::LlmProvider;
use crate::settings::ProviderSettings;
use crate::types::{ChatRequest, ChatResponse, ResponseStream};
use stream::OpenAiDecoder;
use wire::{MaxTokensField, ParseProblem, parse_completion, request_body};

/// An OpenAI-compatible chat-completions client (no retries; see `build_provider`).
#[derive(Debug, Clone)]
pub struct OpenAiClient {
    core: Arc<ClientCore>,
    max_tokens_field: MaxTokensField,
}

impl OpenAiClient {
    /// A client from settings (the kind is not checked).
    pub fn new(settings: &ProviderSettings) -> Result<Self, LlmError> {
        let core = ClientCore::new(settings, |base| format!("{base}/chat/completions"))?;
        let official = reqwest::Url::parse(&core.base_url)
            .ok()
            .and_then(|u| u.host_str().map(|h| h == "api.openai.com"))
            .unwrap_or(false);
        Ok(Self {
            core: Arc::new(core),
            max_tokens_field: if official {
                MaxTokensField::MaxCompletionTokens
            } else {
                MaxTokensField::MaxTokens
            },
        })
    }

    fn headers(&self) -> Result<HeaderMap, LlmError> {
        let mut headers = HeaderMap::new();
        if let Some(key) = self.core.api_key() {
            headers.insert(
                AUTHORIZATION,
                self.core.secret_header(&format!("Bearer {key}"))?,
            );
        }
        Ok(headers)
    }

    fn body(&self, request: &ChatRequest, stream: bool) -> serde_json::Value {
        request_body(
            request,
            self.core.model_for(request),
            self.core.max_tokens,
            self.max_tokens_field,
            stream,
        )
    }

    async fn parse_whole(
        &self,
        request: &ChatRequest,
        response: reqwest::Response,
    ) -> Result<ChatResponse, LlmError> {
        let value = self.core.read_json(response).await?;
        match parse_completion(&value) {
            Ok(raw) => Ok(self.core.finish(request, raw)),
            Err(ParseProblem::Embedded(error)) => Err(self.core.wire.classify_embedded(&error)),
            Err(ParseProblem::Malformed(what)) => {
                Err(LlmError::bad_response(self.core.provider(), what))
            }
        }
    }
}

#[async_trait]
impl LlmProvider for OpenAiClient {
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
            // The server ignored `"stream": true`; replay its whole answer.
            let whole = self.parse_whole(request, response).await?;
            return Ok(ResponseStream::from_response(whole));
        }
        let decoder = OpenAiDecoder::new(self.core.wire.clone());
        Ok(drive_stream(
            Arc::clone(&self.core),
            request.clone(),
            response,
            decoder,
        ))
    }
}
