//! A chain of providers tried in order when one fails transiently.

use std::sync::Arc;

use async_trait::async_trait;

use crate::error::LlmError;
use crate::models::ModelInfo;
use crate::provider::LlmProvider;
use crate::types::{ChatRequest, ChatResponse, ResponseStream};

/// Tries each provider in turn, moving on only when the failure is one another
/// provider may not share (see [`LlmError::should_fail_over`]): transient
/// errors that outlived the provider's own retries, or unusable responses.
/// Auth, bad-request and context-length errors are returned at once.
///
/// A request's model override is meant for the first provider; fallbacks use
/// their own configured models.
#[derive(Debug, Clone)]
pub struct FailoverProvider {
    chain: Vec<Arc<dyn LlmProvider>>,
}

impl FailoverProvider {
    /// A chain of `providers`, first is primary; errors if the list is empty.
    pub fn new(providers: Vec<Arc<dyn LlmProvider>>) -> Result<Self, LlmError> {
        if providers.is_empty() {
            return Err(LlmError::config(
                "a failover chain needs at least one provider",
            ));
        }
        Ok(Self { chain: providers })
    }

    /// The providers in the order they are tried.
    pub fn providers(&self) -> &[Arc<dyn LlmProvider>] {
        &self.chain
    }

    fn primary(&self) -> &Arc<dyn LlmProvider> {
        // `new` guarantees a non-empty chain.
        &self.chain[0]
    }

    /// Runs `call` along the chain; `call` gets each provider and the request to send it.
    async fn run<T, F>(&self, request: &ChatRequest, call: F) -> Result<T, LlmError>
    where
        F: for<'b> Fn(
                &'b dyn LlmProvider,
                &'b ChatRequest,
            ) -> futures::future::BoxFuture<'b, Result<T, LlmError>>
            + Send
            + Sync,
    {
        let fallback_request = request.model.is_some().then(|| ChatRequest {
            model: None,
            ..request.clone()
        });
        let mut last_error = None;
        for (position, provider) in self.chain.iter().enumerate() {
            let req = match &fallback_request {
                Some(fallback) if position > 0 => fallback,
                _ => request,
            };
            match call(provider.as_ref(), req).await {
                Ok(value) => return Ok(value),
                Err(error) if error.should_fail_over() && position + 1 < self.chain.len() => {
                    tracing::warn!(
                        failed = provider.name(),
                        next = self.chain[position + 1].name(),
                        %error,
                        "LLM provider failed; failing over"
                    );
                    last_error = Some(error);
                }
                Err(error) => return Err(error),
            }
        }
        Err(last_error.unwrap_or_else(|| LlmError::config("empty failover chain")))
    }
}

#[async_trait]
impl LlmProvider for FailoverProvider {
    fn name(&self) -> &str {
        self.primary().name()
    }

    fn model(&self) -> &str {
        self.primary().model()
    }

    /// The smallest known window in the chain, so context budgeting holds
    /// whichever provider ends up answering.
    fn context_window(&self) -> Option<u32> {
        self.chain.iter().filter_map(|p| p.context_window()).min()
    }

    fn vision(&self) -> bool {
        self.primary().vision()
    }

    /// The primary's models: a model named in a request is meant for it.
    async fn list_models(&self) -> Result<Vec<ModelInfo>, LlmError> {
        self.primary().list_models().await
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        self.run(request, |provider, req| provider.complete(req))
            .await
    }

    async fn stream(&self, request: &ChatRequest) -> Result<ResponseStream, LlmError> {
        self.run(request, |provider, req| provider.stream(req))
            .await
    }
}
