//! [`GuardedProvider`]: any provider behind the cost guard.

use std::sync::Arc;

use async_trait::async_trait;
use cairn_llm::{ChatRequest, ChatResponse, LlmError, LlmProvider, ResponseStream, StreamEvent};
use futures::StreamExt;

use super::CostGuard;

/// An [`LlmProvider`] that asks the [`CostGuard`] before every call and
/// records each call's cost after it; a refusal is
/// [`LlmError::CostLimit`] and the inner provider is not called.
///
/// Wrap the outermost provider (after retries and failover), so one logical
/// call counts once however many attempts it took inside.
#[derive(Debug, Clone)]
pub struct GuardedProvider {
    inner: Arc<dyn LlmProvider>,
    guard: Arc<CostGuard>,
}

impl GuardedProvider {
    /// `inner` behind `guard`.
    pub fn new(inner: Arc<dyn LlmProvider>, guard: Arc<CostGuard>) -> Self {
        Self { inner, guard }
    }

    /// The guard (for status displays).
    pub fn guard(&self) -> &Arc<CostGuard> {
        &self.guard
    }

    /// The wrapped provider.
    pub fn inner(&self) -> &Arc<dyn LlmProvider> {
        &self.inner
    }
}

/// Counts a call (and, when it answered, its tokens and cost) in the
/// process's metrics; a no-op until the gateway installs a recorder.
fn observe(model: &str, response: Option<&ChatResponse>) {
    let outcome = if response.is_some() { "ok" } else { "error" };
    metrics::counter!("cairn_llm_calls_total", "model" => model.to_string(), "outcome" => outcome)
        .increment(1);
    if let Some(r) = response {
        metrics::counter!("cairn_llm_tokens_total", "model" => model.to_string(), "kind" => "input")
            .increment(r.usage.input_tokens);
        metrics::counter!("cairn_llm_tokens_total", "model" => model.to_string(), "kind" => "output")
            .increment(r.usage.output_tokens);
        metrics::counter!("cairn_llm_cost_microdollars_total", "model" => model.to_string())
            .increment(r.cost_micros);
    }
}

#[async_trait]
impl LlmProvider for GuardedProvider {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn model(&self) -> &str {
        self.inner.model()
    }

    fn context_window(&self) -> Option<u32> {
        self.inner.context_window()
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        self.guard.admit()?;
        let result = self.inner.complete(request).await;
        observe(self.inner.model(), result.as_ref().ok());
        let cost = result.as_ref().map_or(0, |response| response.cost_micros);
        self.guard.record(cost).await;
        result
    }

    async fn stream(&self, request: &ChatRequest) -> Result<ResponseStream, LlmError> {
        self.guard.admit()?;
        let stream = match self.inner.stream(request).await {
            Ok(stream) => stream,
            Err(error) => {
                observe(self.inner.model(), None);
                self.guard.record(0).await;
                return Err(error);
            }
        };
        let guard = Arc::clone(&self.guard);
        // Recorded (and saved) before `Done` reaches the caller. A stream
        // that fails or is dropped midway records no cost: its admission
        // already counts, and is saved with the next recorded call.
        Ok(ResponseStream::new(stream.then(move |event| {
            let guard = Arc::clone(&guard);
            async move {
                if let Ok(StreamEvent::Done(response)) = &event {
                    observe(&response.model, Some(response));
                    guard.record(response.cost_micros).await;
                }
                event
            }
        })))
    }
}
