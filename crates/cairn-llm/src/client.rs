//! What both HTTP clients share: settings validation, posting, response
//! finalisation (text tool calls, ids, usage, cost) and the SSE stream driver.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;

use bytes::Bytes;
use cairn_core::chat::ToolCall;
use futures::StreamExt;
use futures::stream::BoxStream;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderValue};
use secrecy::{ExposeSecret, SecretString};

use crate::cost::PriceTable;
use crate::error::LlmError;
use crate::http::Wire;
use crate::settings::ProviderSettings;
use crate::sse::{SseEvent, SseParser};
use crate::text_tools::{extract_tool_calls, new_call_id};
use crate::types::{
    ChatRequest, ChatResponse, FinishReason, PartialMeter, PartialUsage, ResponseStream,
    StreamEvent, Usage,
};

/// Hosts that always need a key, so a missing one fails at start-up.
const KEYED_HOSTS: [&str; 3] = ["api.openai.com", "api.anthropic.com", "openrouter.ai"];

/// A response as parsed from the wire, before finalisation.
#[derive(Debug, Default)]
pub(crate) struct RawResponse {
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    pub finish_reason: Option<String>,
    pub usage: Option<Usage>,
    pub model: Option<String>,
}

/// Per-client state shared by requests and streams.
#[derive(Debug)]
pub(crate) struct ClientCore {
    pub wire: Wire,
    pub http: reqwest::Client,
    pub endpoint: String,
    /// Where the model list is (`GET`).
    pub models_url: String,
    pub base_url: String,
    pub model: String,
    pub context_window: Option<u32>,
    pub max_tokens: Option<u32>,
    pub vision: bool,
    prices: PriceTable,
    text_tool_calls: bool,
}

impl ClientCore {
    /// Validates `settings` and prepares the HTTP client; `endpoint` and
    /// `models` map the base URL to the call URL and the model-list URL.
    pub fn new(
        settings: &ProviderSettings,
        endpoint: fn(&str) -> String,
        models: fn(&str) -> String,
    ) -> Result<Self, LlmError> {
        let model = settings.model.trim();
        if model.is_empty() {
            return Err(LlmError::config("model must not be empty"));
        }
        let base_url = settings.effective_base_url();
        let url = reqwest::Url::parse(&base_url)
            .map_err(|e| LlmError::config(format!("base_url is not a valid URL: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(LlmError::config(format!(
                "base_url must use http or https, not {:?}",
                url.scheme()
            )));
        }
        let api_key = settings
            .api_key
            .as_ref()
            .filter(|k| !k.expose_secret().trim().is_empty())
            .map(|k| SecretString::from(k.expose_secret().trim()));
        let host = url.host_str().unwrap_or_default();
        if api_key.is_none() && KEYED_HOSTS.contains(&host) {
            return Err(LlmError::config(format!("api_key is required for {host}")));
        }
        let mut builder =
            crate::tls::client_builder().user_agent(concat!("cairn/", env!("CARGO_PKG_VERSION")));
        builder = match settings.timeout {
            Some(timeout) => builder.connect_timeout(timeout),
            // No timers at all, so tests under a paused clock do not jump.
            None => builder.pool_idle_timeout(None),
        };
        let http = builder
            .build()
            .map_err(|e| LlmError::config(format!("cannot build the HTTP client: {e}")))?;
        Ok(Self {
            wire: Wire {
                provider: settings.effective_name(),
                timeout: settings.timeout,
                api_key,
            },
            http,
            endpoint: endpoint(&base_url),
            models_url: models(&base_url),
            base_url,
            model: model.to_owned(),
            context_window: settings.context_window,
            max_tokens: settings.max_tokens,
            vision: settings.vision,
            prices: settings.prices.clone(),
            text_tool_calls: settings.text_tool_calls,
        })
    }

    /// The provider name.
    pub fn provider(&self) -> &str {
        &self.wire.provider
    }

    /// The API key, if any (for auth headers only).
    pub fn api_key(&self) -> Option<&str> {
        self.wire.api_key.as_ref().map(|k| k.expose_secret())
    }

    /// A header value marked sensitive so it is never logged by the HTTP stack.
    pub fn secret_header(&self, value: &str) -> Result<HeaderValue, LlmError> {
        let mut header = HeaderValue::from_str(value)
            .map_err(|_| LlmError::config("api_key contains characters not allowed in a header"))?;
        header.set_sensitive(true);
        Ok(header)
    }

    /// The model for this request.
    pub fn model_for<'a>(&'a self, request: &'a ChatRequest) -> &'a str {
        request
            .model
            .as_deref()
            .map(str::trim)
            .filter(|m| !m.is_empty())
            .unwrap_or(&self.model)
    }

    /// POSTs a JSON body; a non-2xx answer becomes the matching typed error.
    pub async fn post(
        &self,
        body: &serde_json::Value,
        headers: HeaderMap,
    ) -> Result<reqwest::Response, LlmError> {
        let request = self.http.post(&self.endpoint).headers(headers).json(body);
        let response = self.wire.send(request).await?;
        if response.status().is_success() {
            Ok(response)
        } else {
            Err(self.wire.error_from_response(response).await)
        }
    }

    /// GETs `url` and reads its JSON body; a non-2xx answer becomes the
    /// matching typed error.
    pub async fn get_json(
        &self,
        url: &str,
        headers: HeaderMap,
    ) -> Result<serde_json::Value, LlmError> {
        let response = self.wire.send(self.http.get(url).headers(headers)).await?;
        if !response.status().is_success() {
            return Err(self.wire.error_from_response(response).await);
        }
        self.read_json(response).await
    }

    /// Reads a whole JSON body.
    pub async fn read_json(
        &self,
        response: reqwest::Response,
    ) -> Result<serde_json::Value, LlmError> {
        let body = self.wire.read_body(response).await?;
        serde_json::from_slice(&body).map_err(|e| {
            LlmError::bad_response(
                self.provider(),
                format!("the body is not JSON ({e}): {}", preview(&body)),
            )
        })
    }

    /// The cost of `usage` for `request` (answered by `model` when known).
    pub fn price(&self, request: &ChatRequest, model: Option<&str>, usage: &Usage) -> u64 {
        let requested = self.model_for(request);
        // The configured name is priced first: servers often report a file path or a dated alias.
        match self.prices.lookup(requested) {
            Some(price) => price.cost_micros(usage),
            None => self.prices.cost_micros(model.unwrap_or(requested), usage),
        }
    }

    /// Turns a parsed wire response into the final [`ChatResponse`].
    pub fn finish(&self, request: &ChatRequest, raw: RawResponse) -> ChatResponse {
        let mut text = raw.text;
        let mut tool_calls = raw.tool_calls;
        let mut finish_reason = FinishReason::from_wire(raw.finish_reason.as_deref());
        // An emulated `response_format`: the stand-in tool's input is the answer.
        if request.options.response_format.is_some()
            && let Some(at) = tool_calls
                .iter()
                .position(|c| c.name == crate::types::STRUCTURED_OUTPUT_TOOL)
        {
            let call = tool_calls.remove(at);
            text = match call.arguments {
                serde_json::Value::String(raw) => raw,
                other => other.to_string(),
            };
            tool_calls.clear();
            finish_reason = FinishReason::Stop;
        }
        if tool_calls.is_empty() && self.text_tool_calls && !request.tools.is_empty() {
            let recovered = extract_tool_calls(&text, &request.tools);
            if !recovered.calls.is_empty() {
                tracing::debug!(
                    provider = self.provider(),
                    calls = recovered.calls.len(),
                    "recovered tool calls from text"
                );
                text = recovered.text;
                tool_calls = recovered.calls;
            }
        }
        // Some local servers send empty or repeated ids; replies must match one call each.
        let mut seen = HashSet::new();
        for call in &mut tool_calls {
            if call.id.trim().is_empty() || !seen.insert(call.id.clone()) {
                call.id = new_call_id();
                seen.insert(call.id.clone());
            }
        }
        if !tool_calls.is_empty()
            && matches!(finish_reason, FinishReason::Stop | FinishReason::Unknown)
        {
            finish_reason = FinishReason::ToolCalls;
        }
        let usage = raw.usage.unwrap_or_else(|| {
            let output = text.len()
                + tool_calls
                    .iter()
                    .map(|c| c.name.len() + c.arguments.to_string().len())
                    .sum::<usize>();
            Usage::estimate(request.char_len(), output)
        });
        let requested = self.model_for(request).to_owned();
        let model = raw
            .model
            .filter(|m| !m.trim().is_empty())
            .unwrap_or_else(|| requested.clone());
        let cost_micros = self.price(request, Some(&model), &usage);
        ChatResponse {
            text,
            tool_calls,
            finish_reason,
            usage,
            cost_micros,
            model,
            provider: self.provider().to_owned(),
        }
    }
}

/// The start of a body, for error messages.
pub(crate) fn preview(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let mut short: String = text.chars().take(200).collect();
    if short.len() < text.len() {
        short.push('…');
    }
    short
}

/// Whether a streaming request got a plain JSON answer instead of SSE
/// (servers that ignore `"stream": true`).
pub(crate) fn is_json_response(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.to_ascii_lowercase().contains("json"))
}

/// Protocol-specific handling of SSE events.
pub(crate) trait Decoder: Send + 'static {
    /// Handles one event, queueing deltas; returns true when the answer is complete.
    fn on_event(&mut self, event: &SseEvent, out: &mut Vec<StreamEvent>) -> Result<bool, LlmError>;
    /// Whether any answer data arrived (an empty stream is an error).
    fn received_anything(&self) -> bool;
    /// The assembled response.
    fn into_raw(self) -> RawResponse;
    /// The usage the server reported so far, for a stream cut short.
    fn usage_so_far(&self) -> Option<Usage> {
        None
    }
}

struct Driver<D: Decoder> {
    core: Arc<ClientCore>,
    request: ChatRequest,
    body: BoxStream<'static, reqwest::Result<Bytes>>,
    parser: SseParser,
    decoder: Option<D>,
    pending: VecDeque<Result<StreamEvent, LlmError>>,
    finished: bool,
    /// Characters of answer text and tool-call arguments received so far.
    received_chars: usize,
    /// The assembled response, once complete (its usage is the real one).
    done: Option<(Usage, u64)>,
    /// Whether `Done` reached the caller (then the caller records the cost).
    delivered: bool,
    meter: Arc<PartialMeter>,
}

impl<D: Decoder> Drop for Driver<D> {
    /// A stream dropped (or failed) before its `Done` reached the caller
    /// still cost what the server produced: report it through the meter.
    fn drop(&mut self) {
        if self.delivered {
            return;
        }
        let (usage, cost_micros) = match self.done.take() {
            Some(done) => done,
            None => {
                let estimate = Usage::estimate(self.request.char_len(), self.received_chars);
                let usage = match self.decoder.as_ref().and_then(Decoder::usage_so_far) {
                    Some(reported) => Usage {
                        input_tokens: reported.input_tokens.max(estimate.input_tokens),
                        output_tokens: reported.output_tokens.max(estimate.output_tokens),
                        estimated: true,
                    },
                    None => estimate,
                };
                let cost = self.core.price(&self.request, None, &usage);
                (usage, cost)
            }
        };
        self.meter.report(PartialUsage { usage, cost_micros });
    }
}

impl<D: Decoder> Driver<D> {
    async fn step(&mut self) {
        let body = &mut self.body;
        let next = self
            .core
            .wire
            .with_timeout(async { Ok(body.next().await) })
            .await;
        match next {
            Err(error) => self.fail(error),
            Ok(Some(Err(error))) => {
                let error = self.core.wire.transport_error(error);
                self.fail(error);
            }
            Ok(Some(Ok(bytes))) => match self.parser.push(&bytes) {
                Ok(events) => self.handle(events),
                Err(overflow) => {
                    let error = LlmError::bad_response(self.core.provider(), overflow.to_string());
                    self.fail(error);
                }
            },
            Ok(None) => {
                let tail: Vec<_> = self.parser.finish().into_iter().collect();
                self.handle(tail);
                if !self.finished {
                    self.complete();
                }
            }
        }
    }

    fn handle(&mut self, events: Vec<SseEvent>) {
        let mut out = Vec::new();
        for event in events {
            if self.finished {
                return;
            }
            let Some(decoder) = self.decoder.as_mut() else {
                return;
            };
            let result = decoder.on_event(&event, &mut out);
            for delta in &out {
                self.received_chars += match delta {
                    StreamEvent::TextDelta(text) => text.len(),
                    StreamEvent::ToolCallStart { name, .. } => name.len(),
                    StreamEvent::ToolCallDelta { arguments, .. } => arguments.len(),
                    StreamEvent::Done(_) => 0,
                };
            }
            self.pending.extend(out.drain(..).map(Ok));
            match result {
                Ok(false) => {}
                Ok(true) => self.complete(),
                Err(error) => self.fail(error),
            }
        }
    }

    fn complete(&mut self) {
        self.finished = true;
        let Some(decoder) = self.decoder.take() else {
            return;
        };
        if !decoder.received_anything() {
            self.pending.push_back(Err(LlmError::bad_response(
                self.core.provider(),
                "the stream ended before any answer arrived",
            )));
            return;
        }
        let response = self.core.finish(&self.request, decoder.into_raw());
        self.done = Some((response.usage, response.cost_micros));
        self.pending.push_back(Ok(StreamEvent::Done(response)));
    }

    fn fail(&mut self, error: LlmError) {
        self.finished = true;
        // The decoder is kept: its usage so far prices the partial answer.
        self.pending.push_back(Err(error));
    }
}

/// Turns an SSE HTTP response into a [`ResponseStream`] using `decoder`.
pub(crate) fn drive_stream<D: Decoder>(
    core: Arc<ClientCore>,
    request: ChatRequest,
    response: reqwest::Response,
    decoder: D,
) -> ResponseStream {
    let meter = Arc::new(PartialMeter::default());
    let driver = Driver {
        core,
        request,
        body: response.bytes_stream().boxed(),
        parser: SseParser::new(),
        decoder: Some(decoder),
        pending: VecDeque::new(),
        finished: false,
        received_chars: 0,
        done: None,
        delivered: false,
        meter: Arc::clone(&meter),
    };
    let events = futures::stream::unfold(driver, |mut driver| async move {
        loop {
            if let Some(item) = driver.pending.pop_front() {
                if matches!(item, Ok(StreamEvent::Done(_))) {
                    driver.delivered = true;
                }
                return Some((item, driver));
            }
            if driver.finished {
                return None;
            }
            driver.step().await;
        }
    });
    ResponseStream::new(events).with_meter(meter)
}
