//! An in-process provider that answers at once, for agent tests and benchmarks.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;
use cairn_core::chat::ToolCall;

use crate::error::LlmError;
use crate::provider::LlmProvider;
use crate::types::{ChatRequest, ChatResponse, FinishReason, Usage};

/// Answers from a queue, then with a default answer; no I/O, no timers.
#[derive(Debug)]
pub struct InstantProvider {
    queue: Mutex<VecDeque<Result<ChatResponse, LlmError>>>,
    default: ChatResponse,
    requests: Mutex<Vec<ChatRequest>>,
    record: bool,
    calls: AtomicU64,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Default for InstantProvider {
    fn default() -> Self {
        Self::new()
    }
}

impl InstantProvider {
    /// A provider answering "ok" once its queue is empty, recording requests.
    pub fn new() -> Self {
        Self::always(Self::text_response("ok"))
    }

    /// A provider answering `response` once its queue is empty.
    pub fn always(response: ChatResponse) -> Self {
        Self {
            queue: Mutex::new(VecDeque::new()),
            default: response,
            requests: Mutex::new(Vec::new()),
            record: true,
            calls: AtomicU64::new(0),
        }
    }

    /// Stops recording requests (for benchmarks: no clone per call).
    #[must_use]
    pub fn without_recording(mut self) -> Self {
        self.record = false;
        self
    }

    /// A text response with small fixed usage.
    pub fn text_response(text: impl Into<String>) -> ChatResponse {
        ChatResponse {
            text: text.into(),
            finish_reason: FinishReason::Stop,
            usage: Usage {
                input_tokens: 10,
                output_tokens: 5,
                estimated: false,
            },
            model: "instant".into(),
            provider: "instant".into(),
            ..ChatResponse::default()
        }
    }

    /// A response calling one tool.
    pub fn tool_call_response(id: &str, name: &str, arguments: serde_json::Value) -> ChatResponse {
        ChatResponse {
            tool_calls: vec![ToolCall {
                id: id.into(),
                name: name.into(),
                arguments,
            }],
            finish_reason: FinishReason::ToolCalls,
            ..Self::text_response("")
        }
    }

    /// Queues a response.
    pub fn push(&self, response: ChatResponse) -> &Self {
        lock(&self.queue).push_back(Ok(response));
        self
    }

    /// Queues a text response.
    pub fn push_text(&self, text: impl Into<String>) -> &Self {
        self.push(Self::text_response(text))
    }

    /// Queues an error.
    pub fn push_error(&self, error: LlmError) -> &Self {
        lock(&self.queue).push_back(Err(error));
        self
    }

    /// Requests received (empty when recording is off).
    pub fn requests(&self) -> Vec<ChatRequest> {
        lock(&self.requests).clone()
    }

    /// Number of calls answered.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }
}

#[async_trait]
impl LlmProvider for InstantProvider {
    fn name(&self) -> &str {
        "instant"
    }

    fn model(&self) -> &str {
        "instant"
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        if self.record {
            lock(&self.requests).push(request.clone());
        }
        let next = lock(&self.queue).pop_front();
        next.unwrap_or_else(|| Ok(self.default.clone()))
    }
}
