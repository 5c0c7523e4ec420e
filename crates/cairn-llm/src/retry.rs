//! Retries with exponential backoff and jitter for transient failures.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use rand::Rng;

use crate::error::LlmError;
use crate::models::ModelInfo;
use crate::provider::LlmProvider;
use crate::types::{ChatRequest, ChatResponse, ResponseStream};

/// When and how long to wait before trying a failed call again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (0 = try once).
    pub max_retries: u32,
    /// Backoff before the first retry; doubles each time.
    pub base_delay: Duration,
    /// Backoff never exceeds this.
    pub max_delay: Duration,
    /// A `Retry-After` longer than this is not waited out: the error is
    /// returned at once so a failover provider can take over.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 3,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// A policy that never retries.
    pub fn none() -> Self {
        Self {
            max_retries: 0,
            ..Self::default()
        }
    }

    /// Backoff before retry number `retry` (0-based): `base * 2^retry`, capped,
    /// with "equal jitter" (uniform in the upper half) so that many clients
    /// hit by the same outage do not retry in lockstep.
    pub fn backoff(&self, retry: u32) -> Duration {
        let factor = 1u32.checked_shl(retry.min(20)).unwrap_or(u32::MAX);
        let exp = self.base_delay.saturating_mul(factor).min(self.max_delay);
        let half = exp / 2;
        let jitter_nanos = u64::try_from(half.as_nanos()).unwrap_or(u64::MAX);
        let jitter = if jitter_nanos == 0 {
            0
        } else {
            rand::rng().random_range(0..=jitter_nanos)
        };
        half + Duration::from_nanos(jitter)
    }

    /// How long to wait before retry number `retry` after `error`, or `None`
    /// to give up and return the error.
    pub fn delay_for(&self, error: &LlmError, retry: u32) -> Option<Duration> {
        if retry >= self.max_retries || !error.is_retryable() {
            return None;
        }
        match error.retry_after() {
            Some(wait) if wait > self.max_retry_after => None,
            Some(wait) => Some(wait),
            None => Some(self.backoff(retry)),
        }
    }

    /// Runs `attempt` until it succeeds, fails for good, or retries run out.
    /// Sleeps with `tokio::time::sleep`, so paused-time tests run instantly.
    pub async fn run<T, F, Fut>(&self, provider: &str, mut attempt: F) -> Result<T, LlmError>
    where
        F: FnMut() -> Fut + Send,
        Fut: Future<Output = Result<T, LlmError>> + Send,
    {
        let mut retry = 0;
        loop {
            match attempt().await {
                Ok(value) => return Ok(value),
                Err(error) => {
                    let Some(wait) = self.delay_for(&error, retry) else {
                        return Err(error);
                    };
                    retry += 1;
                    tracing::warn!(
                        provider,
                        retry,
                        max_retries = self.max_retries,
                        wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
                        %error,
                        "LLM call failed; retrying"
                    );
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }
}

/// Wraps a provider so transient failures are retried per a [`RetryPolicy`].
///
/// For streams, only opening the stream is retried: once deltas have been
/// handed out, a failure mid-stream is returned to the caller.
#[derive(Debug, Clone)]
pub struct RetryingProvider {
    inner: Arc<dyn LlmProvider>,
    policy: RetryPolicy,
}

impl RetryingProvider {
    /// Wraps `inner` with `policy`.
    pub fn new(inner: Arc<dyn LlmProvider>, policy: RetryPolicy) -> Self {
        Self { inner, policy }
    }

    /// The retry policy in force.
    pub fn policy(&self) -> &RetryPolicy {
        &self.policy
    }
}

#[async_trait]
impl LlmProvider for RetryingProvider {
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

    async fn list_models(&self) -> Result<Vec<ModelInfo>, LlmError> {
        self.policy
            .run(self.inner.name(), || self.inner.list_models())
            .await
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        self.policy
            .run(self.inner.name(), || self.inner.complete(request))
            .await
    }

    async fn stream(&self, request: &ChatRequest) -> Result<ResponseStream, LlmError> {
        self.policy
            .run(self.inner.name(), || self.inner.stream(request))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server_error() -> LlmError {
        LlmError::Server {
            provider: "p".into(),
            status: 503,
            message: "busy".into(),
        }
    }

    #[test]
    fn backoff_grows_is_capped_and_jittered() {
        let policy = RetryPolicy::default();
        for retry in 0..40 {
            let d = policy.backoff(retry);
            let exp = policy
                .base_delay
                .saturating_mul(1u32.checked_shl(retry.min(20)).unwrap_or(u32::MAX))
                .min(policy.max_delay);
            assert!(d >= exp / 2 && d <= exp, "retry {retry}: {d:?}");
        }
        assert!(policy.backoff(100) <= policy.max_delay);
        let zero = RetryPolicy {
            base_delay: Duration::ZERO,
            ..RetryPolicy::default()
        };
        assert_eq!(zero.backoff(3), Duration::ZERO);
    }

    #[test]
    fn delay_rules() {
        let policy = RetryPolicy::default();
        assert!(policy.delay_for(&server_error(), 0).is_some());
        assert!(policy.delay_for(&server_error(), 3).is_none());
        let limited = |secs| LlmError::RateLimited {
            provider: "p".into(),
            retry_after: Some(Duration::from_secs(secs)),
            message: String::new(),
        };
        assert_eq!(
            policy.delay_for(&limited(7), 0),
            Some(Duration::from_secs(7))
        );
        assert_eq!(policy.delay_for(&limited(3600), 0), None);
        let auth = LlmError::Auth {
            provider: "p".into(),
            status: 401,
            message: String::new(),
        };
        assert_eq!(policy.delay_for(&auth, 0), None);
        assert_eq!(RetryPolicy::none().delay_for(&server_error(), 0), None);
    }

    #[tokio::test(start_paused = true)]
    async fn run_retries_then_gives_up() {
        let policy = RetryPolicy::default();
        let mut calls = 0;
        let result: Result<(), _> = policy
            .run("p", || {
                calls += 1;
                async { Err(server_error()) }
            })
            .await;
        assert!(matches!(result, Err(LlmError::Server { .. })));
        assert_eq!(calls, 4);
    }
}
