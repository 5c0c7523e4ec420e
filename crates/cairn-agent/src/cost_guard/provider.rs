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
        let cost = result.as_ref().map_or(0, |response| response.cost_micros);
        self.guard.record(cost).await;
        result
    }

    async fn stream(&self, request: &ChatRequest) -> Result<ResponseStream, LlmError> {
        self.guard.admit()?;
        let stream = match self.inner.stream(request).await {
            Ok(stream) => stream,
            Err(error) => {
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
                    guard.record(response.cost_micros).await;
                }
                event
            }
        })))
    }
}
