//! Request, response and stream types shared by every provider.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use cairn_core::chat::{ChatMessage, ToolCall, ToolDefinition};
use futures::{Stream, StreamExt};
use serde::{Deserialize, Serialize};

use crate::error::LlmError;

/// One chat completion request, provider-neutral.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    /// The conversation so far, oldest first (system messages included).
    pub messages: Vec<ChatMessage>,
    /// Tools the model may call; empty for a plain completion.
    #[serde(default)]
    pub tools: Vec<ToolDefinition>,
    /// Use this model instead of the provider's configured one.
    #[serde(default)]
    pub model: Option<String>,
    /// Sampling temperature; provider default when `None`.
    #[serde(default)]
    pub temperature: Option<f64>,
    /// Cap on generated tokens; provider default when `None`.
    #[serde(default)]
    pub max_tokens: Option<u32>,
    /// Further sampling and output settings of this call (an API client's).
    #[serde(default)]
    pub options: GenerationOptions,
}

/// Name of the tool that stands in for `response_format` on providers
/// without a native one (Anthropic): the model is made to call it, and its
/// input, the structured answer, becomes the response's text.
pub const STRUCTURED_OUTPUT_TOOL: &str = "cairn_structured_output";

/// Sampling and output settings beyond temperature and the token cap, as an
/// OpenAI-style client sets them; each is sent where the provider has it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GenerationOptions {
    /// Nucleus sampling mass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    /// Sequences that end the answer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop: Vec<String>,
    /// Seed for reproducible sampling (OpenAI-compatible servers only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
    /// Presence penalty (OpenAI-compatible servers only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub presence_penalty: Option<f64>,
    /// Frequency penalty (OpenAI-compatible servers only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frequency_penalty: Option<f64>,
    /// The shape the answer must have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_format: Option<ResponseFormat>,
    /// Whether and which tool the model must call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
    /// Whether the model may call several tools in one response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_tool_calls: Option<bool>,
}

/// The shape of the answer (OpenAI's `response_format`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ResponseFormat {
    /// Any JSON object.
    JsonObject,
    /// JSON matching a schema.
    JsonSchema {
        /// The schema's name.
        name: String,
        /// The JSON Schema.
        schema: serde_json::Value,
        /// Whether the provider must follow the schema exactly.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        strict: Option<bool>,
    },
}

impl ResponseFormat {
    /// The schema the answer follows (`{"type":"object"}` for any object).
    pub fn schema(&self) -> serde_json::Value {
        match self {
            Self::JsonObject => serde_json::json!({"type": "object"}),
            Self::JsonSchema { schema, .. } => schema.clone(),
        }
    }
}

/// Whether and which tool the model must call (OpenAI's `tool_choice`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides.
    Auto,
    /// No tool call.
    None,
    /// At least one tool call.
    Required,
    /// A call to this tool.
    Tool(String),
}

impl ChatRequest {
    /// A request for these messages with no tools and provider defaults.
    pub fn new(messages: Vec<ChatMessage>) -> Self {
        Self {
            messages,
            ..Self::default()
        }
    }

    /// Offers these tools to the model.
    #[must_use]
    pub fn with_tools(mut self, tools: Vec<ToolDefinition>) -> Self {
        self.tools = tools;
        self
    }

    /// Overrides the model for this call.
    #[must_use]
    pub fn with_model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// Sets the sampling temperature.
    #[must_use]
    pub fn with_temperature(mut self, temperature: f64) -> Self {
        self.temperature = Some(temperature);
        self
    }

    /// Caps the generated tokens.
    #[must_use]
    pub fn with_max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = Some(max_tokens);
        self
    }

    /// A rough size of the request in characters, for usage estimates.
    pub(crate) fn char_len(&self) -> usize {
        self.messages
            .iter()
            .map(|m| {
                m.content.len()
                    + m.images.len() * cairn_core::image::IMAGE_TOKENS * 4
                    + m.tool_calls
                        .iter()
                        .map(|c| c.name.len() + c.arguments.to_string().len())
                        .sum::<usize>()
            })
            .sum::<usize>()
            + self
                .tools
                .iter()
                .map(|t| t.name.len() + t.description.len() + t.parameters.to_string().len())
                .sum::<usize>()
    }
}

/// Tokens consumed by one call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens (including cached prompt tokens).
    pub input_tokens: u64,
    /// Generated tokens.
    pub output_tokens: u64,
    /// True when the provider reported no usage and these are estimates
    /// (about four characters per token), so budgets still see the call.
    #[serde(default)]
    pub estimated: bool,
}

impl Usage {
    /// Input plus output tokens.
    pub fn total(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }

    /// The counts a server reported; `None` when it reported neither, so the
    /// caller estimates instead of recording a zero-cost call.
    pub(crate) fn reported(input: Option<u64>, output: Option<u64>) -> Option<Self> {
        if input.is_none() && output.is_none() {
            return None;
        }
        Some(Self {
            input_tokens: input.unwrap_or(0),
            output_tokens: output.unwrap_or(0),
            estimated: false,
        })
    }

    /// An estimate from character counts, for providers that report nothing.
    pub fn estimate(input_chars: usize, output_chars: usize) -> Self {
        let tokens = |chars: usize| u64::try_from(chars.div_ceil(4)).unwrap_or(u64::MAX);
        Self {
            input_tokens: tokens(input_chars),
            output_tokens: tokens(output_chars),
            estimated: true,
        }
    }
}

/// Why the model stopped generating.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// A natural end of the answer.
    Stop,
    /// The model wants tools to run.
    ToolCalls,
    /// The token cap was hit; the answer is cut off.
    Length,
    /// The provider filtered the output.
    ContentFilter,
    /// Some other reason the provider named.
    Other(String),
    /// The provider did not say (off-spec servers).
    #[default]
    Unknown,
}

impl FinishReason {
    /// Maps a wire value from either protocol (`stop`, `end_turn`, `tool_use`, ...).
    pub fn from_wire(value: Option<&str>) -> Self {
        match value.map(str::trim) {
            None | Some("") => Self::Unknown,
            Some("stop" | "end_turn" | "stop_sequence" | "eos") => Self::Stop,
            Some("tool_calls" | "tool_use" | "function_call") => Self::ToolCalls,
            Some("length" | "max_tokens" | "model_length") => Self::Length,
            Some("content_filter" | "refusal") => Self::ContentFilter,
            Some(other) => Self::Other(other.to_owned()),
        }
    }
}

/// A complete answer from the model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    /// The answer text (tool-call markup recovered from it is removed).
    pub text: String,
    /// Tools the model asked to run, in order.
    pub tool_calls: Vec<ToolCall>,
    /// Why generation stopped.
    pub finish_reason: FinishReason,
    /// Tokens used by this call.
    pub usage: Usage,
    /// What this call cost, in micro-dollars (0 for models without a price).
    pub cost_micros: u64,
    /// The model that answered, as the provider reported it.
    pub model: String,
    /// The provider that answered (useful behind a failover chain).
    #[serde(default)]
    pub provider: String,
}

impl ChatResponse {
    /// Whether the model asked for tools (the agent loop must run them).
    pub fn has_tool_calls(&self) -> bool {
        !self.tool_calls.is_empty()
    }

    /// The assistant message to append to the conversation.
    pub fn to_message(&self) -> ChatMessage {
        if self.tool_calls.is_empty() {
            ChatMessage::assistant(self.text.clone())
        } else {
            ChatMessage::assistant_tool_calls(self.text.clone(), self.tool_calls.clone())
        }
    }
}

/// One item of a streamed answer.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// More answer text, in order. May include tool-call markup that the final
    /// [`StreamEvent::Done`] response has recovered and removed.
    TextDelta(String),
    /// The model started a tool call.
    ToolCallStart {
        /// Position of the call in the response.
        index: usize,
        /// The call id.
        id: String,
        /// The tool name.
        name: String,
    },
    /// More of a tool call's JSON arguments (progress only; not necessarily valid JSON).
    ToolCallDelta {
        /// Position of the call in the response.
        index: usize,
        /// The next piece of the arguments text.
        arguments: String,
    },
    /// The fully assembled response; always the last event of a good stream.
    Done(ChatResponse),
}

type BoxedEvents = Pin<Box<dyn Stream<Item = Result<StreamEvent, LlmError>> + Send>>;

/// A streamed answer: deltas, then [`StreamEvent::Done`] with the whole response.
///
/// Callers that do not care about deltas use [`ResponseStream::into_response`].
pub struct ResponseStream {
    inner: BoxedEvents,
    /// Reports what a stream that never delivered `Done` cost (see [`PartialUsage`]).
    meter: Option<Arc<PartialMeter>>,
}

/// What a streamed call used when it ended without its `Done` reaching the
/// caller (dropped midway, or failed after the answer began): the usage the
/// server reported so far, otherwise an estimate from the request and the
/// text received, priced like a whole answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartialUsage {
    /// Tokens used (or estimated: `usage.estimated`).
    pub usage: Usage,
    /// Their cost in micro-dollars.
    pub cost_micros: u64,
}

type PartialCallback = Box<dyn FnOnce(PartialUsage) + Send>;

/// The link between a stream's driver and whoever wants its partial usage:
/// the driver reports once, when it is dropped without delivering `Done`.
#[derive(Default)]
pub struct PartialMeter {
    callback: std::sync::Mutex<Option<PartialCallback>>,
}

impl std::fmt::Debug for PartialMeter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PartialMeter")
    }
}

impl PartialMeter {
    /// Hands `partial` to the registered callback, if any (at most once).
    pub fn report(&self, partial: PartialUsage) {
        let callback = self
            .callback
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(callback) = callback {
            callback(partial);
        }
    }
}

impl std::fmt::Debug for ResponseStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ResponseStream")
    }
}

impl ResponseStream {
    /// Wraps any stream of events (it should end with `Done` or an error).
    pub fn new(stream: impl Stream<Item = Result<StreamEvent, LlmError>> + Send + 'static) -> Self {
        Self {
            inner: Box::pin(stream),
            meter: None,
        }
    }

    /// Attaches the meter the stream's driver reports partial usage through.
    #[must_use]
    pub fn with_meter(mut self, meter: Arc<PartialMeter>) -> Self {
        self.meter = Some(meter);
        self
    }

    /// Calls `f` with the partial usage if this stream ends without
    /// delivering `Done` (dropped, or failed after it began); returns `false`
    /// (and never calls `f`) when the stream cannot tell, e.g. a replayed
    /// whole answer.
    pub fn on_partial(&self, f: impl FnOnce(PartialUsage) + Send + 'static) -> bool {
        match &self.meter {
            Some(meter) => {
                *meter
                    .callback
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Box::new(f));
                true
            }
            None => false,
        }
    }

    /// A stream replaying a finished response: its text, its tool calls, then `Done`.
    ///
    /// For providers (or wrappers) without real streaming.
    pub fn from_response(response: ChatResponse) -> Self {
        let mut events = Vec::new();
        if !response.text.is_empty() {
            events.push(Ok(StreamEvent::TextDelta(response.text.clone())));
        }
        for (index, call) in response.tool_calls.iter().enumerate() {
            events.push(Ok(StreamEvent::ToolCallStart {
                index,
                id: call.id.clone(),
                name: call.name.clone(),
            }));
            events.push(Ok(StreamEvent::ToolCallDelta {
                index,
                arguments: call.arguments.to_string(),
            }));
        }
        events.push(Ok(StreamEvent::Done(response)));
        Self::new(futures::stream::iter(events))
    }

    /// Drains the stream and returns the assembled response.
    pub async fn into_response(mut self) -> Result<ChatResponse, LlmError> {
        while let Some(event) = self.inner.next().await {
            if let StreamEvent::Done(response) = event? {
                return Ok(response);
            }
        }
        Err(LlmError::bad_response(
            "stream",
            "the stream ended without a final response",
        ))
    }

    /// Applies `f` to the final response (e.g. a wrapper adjusting cost).
    #[must_use]
    pub fn map_done(
        self,
        mut f: impl FnMut(ChatResponse) -> ChatResponse + Send + 'static,
    ) -> Self {
        let meter = self.meter.clone();
        let mut mapped = Self::new(self.inner.map(move |event| match event {
            Ok(StreamEvent::Done(response)) => Ok(StreamEvent::Done(f(response))),
            other => other,
        }));
        mapped.meter = meter;
        mapped
    }
}

impl Stream for ResponseStream {
    type Item = Result<StreamEvent, LlmError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finish_reasons_from_both_protocols() {
        assert_eq!(
            FinishReason::from_wire(Some("end_turn")),
            FinishReason::Stop
        );
        assert_eq!(
            FinishReason::from_wire(Some("tool_use")),
            FinishReason::ToolCalls
        );
        assert_eq!(FinishReason::from_wire(Some("")), FinishReason::Unknown);
        assert_eq!(FinishReason::from_wire(None), FinishReason::Unknown);
        assert_eq!(
            FinishReason::from_wire(Some("weird")),
            FinishReason::Other("weird".into())
        );
    }

    #[test]
    fn usage_estimate_rounds_up() {
        let u = Usage::estimate(9, 0);
        assert_eq!((u.input_tokens, u.output_tokens, u.estimated), (3, 0, true));
    }

    #[tokio::test]
    async fn replayed_stream_ends_with_the_response() {
        let response = ChatResponse {
            text: "hi".into(),
            ..ChatResponse::default()
        };
        let events: Vec<_> = ResponseStream::from_response(response.clone())
            .collect()
            .await;
        assert_eq!(events.len(), 2);
        let back = ResponseStream::from_response(response.clone())
            .map_done(|mut r| {
                r.cost_micros = 7;
                r
            })
            .into_response()
            .await
            .unwrap();
        assert_eq!(back.cost_micros, 7);
        let empty = ResponseStream::new(futures::stream::empty());
        assert!(empty.into_response().await.is_err());
    }
}
