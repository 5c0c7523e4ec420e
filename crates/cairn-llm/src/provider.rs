//! The `LlmProvider` trait: what the agent loop calls.

use async_trait::async_trait;

use crate::error::LlmError;
use crate::models::ModelInfo;
use crate::types::{ChatRequest, ChatResponse, ResponseStream};

/// A chat model behind some API.
///
/// Object-safe so wrappers (retry, failover, cost guard) compose as
/// `Arc<dyn LlmProvider>`. Implementations must be cheap to share across tasks.
#[async_trait]
pub trait LlmProvider: Send + Sync + std::fmt::Debug {
    /// A short provider name for logs and errors (`openai`, `anthropic`, ...).
    fn name(&self) -> &str;

    /// The model used when a request does not override it.
    fn model(&self) -> &str;

    /// The model's context window in tokens, when known.
    fn context_window(&self) -> Option<u32> {
        None
    }

    /// Whether the model accepts images in user messages (`llm.vision`).
    /// Wrappers answer for what they wrap.
    fn vision(&self) -> bool {
        true
    }

    /// The provider answering now, for a caller that keeps one for a whole
    /// turn: a [`ReloadableProvider`](crate::ReloadableProvider)'s current
    /// one; `None` for a provider that never changes (see [`crate::pin`]).
    fn current(&self) -> Option<std::sync::Arc<dyn LlmProvider>> {
        None
    }

    /// The models the provider serves, as it lists them.
    ///
    /// The default, for providers that cannot list, is
    /// [`LlmError::Unsupported`].
    async fn list_models(&self) -> Result<Vec<ModelInfo>, LlmError> {
        Err(LlmError::unsupported(self.name(), "list its models"))
    }

    /// Answers the request in one piece.
    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError>;

    /// Answers the request as a stream of deltas ending with the whole response.
    ///
    /// The default replays [`LlmProvider::complete`] as a single-delta stream,
    /// for providers without real streaming.
    async fn stream(&self, request: &ChatRequest) -> Result<ResponseStream, LlmError> {
        Ok(ResponseStream::from_response(self.complete(request).await?))
    }
}
