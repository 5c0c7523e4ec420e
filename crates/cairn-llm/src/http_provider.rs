//! The one [`LlmProvider`] implementation over HTTP: posting, whole answers,
//! the "server ignored `stream: true`" fallback and SSE streaming are written
//! once here; a [`Protocol`] supplies only what differs on the wire.

use std::fmt::Debug;
use std::sync::Arc;

use async_trait::async_trait;
use reqwest::header::HeaderMap;
use serde_json::Value;

use crate::client::{ClientCore, Decoder, RawResponse, drive_stream, is_json_response};
use crate::error::LlmError;
use crate::http::Wire;
use crate::models::{MAX_MODEL_PAGES, ModelInfo, ModelPage};
use crate::provider::LlmProvider;
use crate::settings::ProviderSettings;
use crate::types::{ChatRequest, ChatResponse, ResponseStream};

/// Why a 2xx body is not a usable answer.
#[derive(Debug)]
pub(crate) enum ParseProblem {
    /// The body carries an error object instead of an answer.
    Embedded(Value),
    /// The body is JSON but not an answer.
    Malformed(&'static str),
}

/// What one wire protocol (OpenAI chat completions, Anthropic Messages) adds
/// to the shared client: URL, headers, request body and response parsing.
pub(crate) trait Protocol: Clone + Debug + Send + Sync + 'static {
    /// Assembles a streamed answer from SSE events.
    type Decoder: Decoder;

    /// Maps the configured base URL to the call URL.
    fn endpoint(base: &str) -> String;

    /// Maps the configured base URL to the model list's URL.
    fn models_endpoint(base: &str) -> String;

    /// The URL of the model-list page after cursor `after` (the first page without).
    fn models_page_url(models_url: &str, after: Option<&str>) -> String;

    /// Parses one page of the model list; `Err` says what is missing.
    fn parse_models(value: &Value) -> Result<ModelPage, &'static str>;

    /// Per-client protocol state, derived from the validated settings.
    fn new(core: &ClientCore) -> Self;

    /// Headers for every request (authentication, API version).
    fn headers(&self, core: &ClientCore) -> Result<HeaderMap, LlmError>;

    /// The JSON request body.
    fn body(&self, core: &ClientCore, request: &ChatRequest, stream: bool) -> Value;

    /// Parses a whole (non-streamed) JSON answer.
    fn parse(value: &Value) -> Result<RawResponse, ParseProblem>;

    /// A fresh stream decoder.
    fn decoder(wire: Wire) -> Self::Decoder;
}

/// An LLM client speaking the wire protocol `P` (no retries; see `build_provider`).
#[derive(Debug, Clone)]
pub struct HttpProvider<P> {
    core: Arc<ClientCore>,
    protocol: P,
}

#[expect(
    private_bounds,
    reason = "`Protocol` stays crate-private on purpose (it names `ClientCore`); callers only ever see the concrete `OpenAiClient` and `AnthropicClient`"
)]
impl<P: Protocol> HttpProvider<P> {
    /// A client from settings (the kind is not checked).
    pub fn new(settings: &ProviderSettings) -> Result<Self, LlmError> {
        let core = ClientCore::new(settings, P::endpoint, P::models_endpoint)?;
        Ok(Self {
            protocol: P::new(&core),
            core: Arc::new(core),
        })
    }

    /// Refuses images the model cannot take before anything is sent.
    fn admit_images(&self, request: &ChatRequest) -> Result<(), LlmError> {
        crate::images::admit(
            request,
            self.core.provider(),
            self.core.model_for(request),
            self.core.vision,
        )
    }

    async fn post(
        &self,
        request: &ChatRequest,
        stream: bool,
    ) -> Result<reqwest::Response, LlmError> {
        let body = self.protocol.body(&self.core, request, stream);
        self.core
            .post(&body, self.protocol.headers(&self.core)?)
            .await
    }

    async fn parse_whole(
        &self,
        request: &ChatRequest,
        response: reqwest::Response,
    ) -> Result<ChatResponse, LlmError> {
        let value = self.core.read_json(response).await?;
        match P::parse(&value) {
            Ok(raw) => Ok(self.core.finish(request, raw)),
            Err(ParseProblem::Embedded(error)) => Err(self.core.wire.classify_embedded(&error)),
            Err(ParseProblem::Malformed(what)) => {
                Err(LlmError::bad_response(self.core.provider(), what))
            }
        }
    }
}

#[async_trait]
impl<P: Protocol> LlmProvider for HttpProvider<P> {
    fn name(&self) -> &str {
        self.core.provider()
    }

    fn model(&self) -> &str {
        &self.core.model
    }

    fn context_window(&self) -> Option<u32> {
        self.core.context_window
    }

    fn vision(&self) -> bool {
        self.core.vision
    }

    /// Follows the list's pages (at most [`MAX_MODEL_PAGES`]).
    async fn list_models(&self) -> Result<Vec<ModelInfo>, LlmError> {
        let headers = self.protocol.headers(&self.core)?;
        let mut models = Vec::new();
        let mut after: Option<String> = None;
        for _ in 0..MAX_MODEL_PAGES {
            let url = P::models_page_url(&self.core.models_url, after.as_deref());
            let value = self.core.get_json(&url, headers.clone()).await?;
            let page = P::parse_models(&value).map_err(|what| {
                // The path only: a base URL may carry credentials.
                let path = reqwest::Url::parse(&url)
                    .map(|u| u.path().to_owned())
                    .unwrap_or_default();
                LlmError::bad_response(
                    self.core.provider(),
                    format!("the model list (GET {path}) {what}"),
                )
            })?;
            models.extend(page.models);
            match page.next {
                Some(next) if after.as_deref() != Some(next.as_str()) => after = Some(next),
                _ => break,
            }
        }
        Ok(models)
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        self.admit_images(request)?;
        let response = self.post(request, false).await?;
        self.parse_whole(request, response).await
    }

    async fn stream(&self, request: &ChatRequest) -> Result<ResponseStream, LlmError> {
        self.admit_images(request)?;
        let response = self.post(request, true).await?;
        if is_json_response(&response) {
            // The server ignored `"stream": true`; replay its whole answer.
            let whole = self.parse_whole(request, response).await?;
            return Ok(ResponseStream::from_response(whole));
        }
        let decoder = P::decoder(self.core.wire.clone());
        Ok(drive_stream(
            Arc::clone(&self.core),
            request.clone(),
            response,
            decoder,
        ))
    }
}
