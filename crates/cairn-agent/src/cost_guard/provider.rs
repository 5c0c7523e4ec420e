//! [`GuardedProvider`]: any provider behind the cost guard.

use std::sync::Arc;

use async_trait::async_trait;
use cairn_llm::{
    ChatRequest, ChatResponse, LlmError, LlmProvider, ModelInfo, ResponseStream, StreamEvent,
};
use futures::StreamExt;

use super::{CallTicket, CostGuard};

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

    fn vision(&self) -> bool {
        self.inner.vision()
    }

    /// Listing costs nothing, so it is not guarded.
    async fn list_models(&self) -> Result<Vec<ModelInfo>, LlmError> {
        self.inner.list_models().await
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let redacted = self.guard.redact(request, self.inner.model()).await;
        let request = redacted.as_ref().unwrap_or(request);
        let ticket = self.guard.admit().await?;
        let result = self.inner.complete(request).await;
        // Counted under the model that answered (a route's, when routed).
        let asked = request.model.as_deref().unwrap_or(self.inner.model());
        let model = result.as_ref().map_or(asked, |r| r.model.as_str());
        observe(model, result.as_ref().ok());
        let cost = result.as_ref().map_or(0, |response| response.cost_micros);
        let answered = result.is_ok().then_some(model);
        self.guard.finish(ticket, cost, answered).await;
        result
    }

    async fn stream(&self, request: &ChatRequest) -> Result<ResponseStream, LlmError> {
        let redacted = self.guard.redact(request, self.inner.model()).await;
        let request = redacted.as_ref().unwrap_or(request);
        let ticket = self.guard.admit().await?;
        let stream = match self.inner.stream(request).await {
            Ok(stream) => stream,
            Err(error) => {
                observe(request.model.as_deref().unwrap_or(self.inner.model()), None);
                self.guard.finish(ticket, 0, None).await;
                return Err(error);
            }
        };
        // Exactly one of three ends records the call: `Done` reaching the
        // caller, the driver's report of a stream cut short (dropped, or
        // failed midway: the tokens received are paid for), or, for a
        // stream that cannot report, its drop before `Done` (0, which
        // releases the reservation).
        let settle = Arc::new(Settle {
            guard: Arc::clone(&self.guard),
            ticket: std::sync::Mutex::new(Some(ticket)),
        });
        let reports = {
            let settle = Arc::clone(&settle);
            let model = request
                .model
                .clone()
                .unwrap_or_else(|| self.inner.model().to_string());
            stream.on_partial(move |partial| {
                metrics::counter!("cairn_llm_cost_microdollars_total", "model" => model)
                    .increment(partial.cost_micros);
                settle.spawn(partial.cost_micros);
            })
        };
        let on_drop = DropSettle {
            settle: (!reports).then(|| Arc::clone(&settle)),
        };
        Ok(ResponseStream::new(stream.then(move |event| {
            let settle = Arc::clone(&settle);
            // Moved into every step so it lives (and drops) with the stream.
            let _keep = &on_drop;
            let done = match &event {
                Ok(StreamEvent::Done(response)) => {
                    observe(&response.model, Some(response));
                    settle
                        .take()
                        .map(|ticket| (ticket, response.cost_micros, response.model.clone()))
                }
                _ => None,
            };
            async move {
                if let Some((ticket, cost, model)) = done {
                    // Recorded (and saved) before `Done` reaches the caller;
                    // in a task of its own, so a caller dropping the stream
                    // meanwhile cannot cut the write short.
                    let guard = Arc::clone(&settle.guard);
                    let _ = tokio::spawn(async move {
                        guard.finish(ticket, cost, Some(&model)).await;
                    })
                    .await;
                }
                event
            }
        })))
    }
}

/// The ticket of one streamed call, finished once by whichever end comes first.
struct Settle {
    guard: Arc<CostGuard>,
    ticket: std::sync::Mutex<Option<CallTicket>>,
}

impl Settle {
    fn take(&self) -> Option<CallTicket> {
        self.ticket
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }

    /// Finishes the call in a task (called from drops, which cannot wait).
    fn spawn(&self, cost_micros: u64) {
        let Some(ticket) = self.take() else {
            return;
        };
        let guard = Arc::clone(&self.guard);
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                handle.spawn(async move { guard.finish(ticket, cost_micros, None).await });
            }
            Err(_) => tracing::warn!(
                cost_micros,
                "a streamed LLM call ended outside a runtime; its cost is not recorded"
            ),
        }
    }
}

/// Finishes an unreported stream's call with 0 when the stream is dropped
/// before `Done`.
struct DropSettle {
    settle: Option<Arc<Settle>>,
}

impl Drop for DropSettle {
    fn drop(&mut self) {
        if let Some(settle) = &self.settle {
            settle.spawn(0);
        }
    }
}
