//! The one error type every provider returns.

use std::time::Duration;

/// Why an LLM call failed.
///
/// Messages are built from the provider's error body (trimmed and with the API
/// key scrubbed) and never contain credentials.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LlmError {
    /// HTTP 429: the provider asks us to slow down.
    #[error("{provider} rate limited the request{}: {message}", fmt_retry_after(*retry_after))]
    RateLimited {
        /// Provider name.
        provider: String,
        /// How long the provider asked us to wait, from `Retry-After`.
        retry_after: Option<Duration>,
        /// The provider's explanation.
        message: String,
    },
    /// HTTP 5xx (or an overload/server error event inside a stream).
    #[error("{provider} server error (HTTP {status}): {message}")]
    Server {
        /// Provider name.
        provider: String,
        /// The HTTP status (500 when reported inside a stream).
        status: u16,
        /// The provider's explanation.
        message: String,
    },
    /// No answer (or no next stream chunk) within the configured timeout,
    /// or the server answered HTTP 408.
    #[error("{provider} timed out{}", fmt_after(*after))]
    Timeout {
        /// Provider name.
        provider: String,
        /// The client timeout that elapsed (`None` when the server reported it).
        after: Option<Duration>,
    },
    /// HTTP 401/403: the key is missing, wrong or lacks permission.
    #[error("{provider} rejected the credentials (HTTP {status}): {message}")]
    Auth {
        /// Provider name.
        provider: String,
        /// 401 or 403.
        status: u16,
        /// The provider's explanation.
        message: String,
    },
    /// The conversation does not fit in the model's context window.
    #[error("{provider}: context length exceeded: {message}")]
    ContextLengthExceeded {
        /// Provider name.
        provider: String,
        /// The provider's explanation.
        message: String,
    },
    /// Any other 4xx: the request itself is wrong (unknown model, bad schema, ...).
    #[error("{provider} rejected the request (HTTP {status}): {message}")]
    BadRequest {
        /// Provider name.
        provider: String,
        /// The HTTP status.
        status: u16,
        /// The provider's explanation.
        message: String,
    },
    /// The provider answered 2xx with something we cannot understand.
    #[error("{provider} sent an unusable response: {message}")]
    BadResponse {
        /// Provider name.
        provider: String,
        /// What was wrong with it.
        message: String,
    },
    /// Connecting, sending or receiving failed below HTTP.
    #[error("could not reach {provider}: {message}")]
    Transport {
        /// Provider name.
        provider: String,
        /// The underlying error (without URL).
        message: String,
    },
    /// The provider settings are unusable (bad URL, missing key, empty model).
    #[error("invalid LLM provider settings: {message}")]
    Config {
        /// What is wrong, naming the field.
        message: String,
    },
    /// The provider cannot do what was asked (list its models, …).
    #[error("{provider} cannot {what}")]
    Unsupported {
        /// Provider name.
        provider: String,
        /// What it cannot do.
        what: String,
    },
    /// A spending or rate limit of cairn's own (the cost guard) refused the
    /// call before it reached any provider. Neither retried nor failed over:
    /// another provider would spend the same budget.
    #[error("{message}")]
    CostLimit {
        /// Which limit, the amounts, and what to do about it.
        message: String,
    },
}

fn fmt_retry_after(retry_after: Option<Duration>) -> String {
    match retry_after {
        Some(d) => format!(" (retry after {}s)", d.as_secs_f64()),
        None => String::new(),
    }
}

fn fmt_after(after: Option<Duration>) -> String {
    match after {
        Some(d) => format!(" after {}s", d.as_secs_f64()),
        None => " (HTTP 408)".to_owned(),
    }
}

/// A coarse classification of [`LlmError`], handy for metrics and matching.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LlmErrorKind {
    /// [`LlmError::RateLimited`].
    RateLimited,
    /// [`LlmError::Server`].
    Server,
    /// [`LlmError::Timeout`].
    Timeout,
    /// [`LlmError::Auth`].
    Auth,
    /// [`LlmError::ContextLengthExceeded`].
    ContextLengthExceeded,
    /// [`LlmError::BadRequest`].
    BadRequest,
    /// [`LlmError::BadResponse`].
    BadResponse,
    /// [`LlmError::Transport`].
    Transport,
    /// [`LlmError::Config`].
    Config,
    /// [`LlmError::Unsupported`].
    Unsupported,
    /// [`LlmError::CostLimit`].
    CostLimit,
}

impl LlmError {
    /// The coarse kind of this error.
    pub fn kind(&self) -> LlmErrorKind {
        match self {
            Self::RateLimited { .. } => LlmErrorKind::RateLimited,
            Self::Server { .. } => LlmErrorKind::Server,
            Self::Timeout { .. } => LlmErrorKind::Timeout,
            Self::Auth { .. } => LlmErrorKind::Auth,
            Self::ContextLengthExceeded { .. } => LlmErrorKind::ContextLengthExceeded,
            Self::BadRequest { .. } => LlmErrorKind::BadRequest,
            Self::BadResponse { .. } => LlmErrorKind::BadResponse,
            Self::Transport { .. } => LlmErrorKind::Transport,
            Self::Config { .. } => LlmErrorKind::Config,
            Self::Unsupported { .. } => LlmErrorKind::Unsupported,
            Self::CostLimit { .. } => LlmErrorKind::CostLimit,
        }
    }

    /// Whether trying the same request again later may succeed
    /// (rate limit, 5xx, timeout, transport).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Self::RateLimited { .. }
                | Self::Server { .. }
                | Self::Timeout { .. }
                | Self::Transport { .. }
        )
    }

    /// Whether another provider may succeed where this one failed.
    ///
    /// Transient failures and unusable responses fail over; auth, bad request,
    /// context length, config, unsupported and cost-limit errors do not, because they would
    /// repeat (or hide a mistake the person must fix, or spend the same budget).
    pub fn should_fail_over(&self) -> bool {
        self.is_retryable() || matches!(self, Self::BadResponse { .. })
    }

    /// The wait the provider asked for, if any.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::RateLimited { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// The provider that produced this error (empty for config and cost-limit errors).
    pub fn provider(&self) -> &str {
        match self {
            Self::RateLimited { provider, .. }
            | Self::Server { provider, .. }
            | Self::Timeout { provider, .. }
            | Self::Auth { provider, .. }
            | Self::ContextLengthExceeded { provider, .. }
            | Self::BadRequest { provider, .. }
            | Self::BadResponse { provider, .. }
            | Self::Transport { provider, .. }
            | Self::Unsupported { provider, .. } => provider,
            Self::Config { .. } | Self::CostLimit { .. } => "",
        }
    }

    /// Shorthand for a [`LlmError::BadResponse`].
    pub fn bad_response(provider: &str, message: impl Into<String>) -> Self {
        Self::BadResponse {
            provider: provider.to_owned(),
            message: message.into(),
        }
    }

    /// Shorthand for a [`LlmError::Unsupported`].
    pub fn unsupported(provider: &str, what: impl Into<String>) -> Self {
        Self::Unsupported {
            provider: provider.to_owned(),
            what: what.into(),
        }
    }

    /// Shorthand for a [`LlmError::CostLimit`].
    pub fn cost_limit(message: impl Into<String>) -> Self {
        Self::CostLimit {
            message: message.into(),
        }
    }

    /// Shorthand for a [`LlmError::Config`].
    pub fn config(message: impl Into<String>) -> Self {
        Self::Config {
            message: message.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retryable_and_failover_classes() {
        let p = String::from("p");
        let m = String::from("m");
        let rate = LlmError::RateLimited {
            provider: p.clone(),
            retry_after: Some(Duration::from_secs(3)),
            message: m.clone(),
        };
        assert!(rate.is_retryable());
        assert_eq!(rate.retry_after(), Some(Duration::from_secs(3)));
        assert!(rate.to_string().contains("retry after 3s"));
        let auth = LlmError::Auth {
            provider: p.clone(),
            status: 401,
            message: m.clone(),
        };
        assert!(!auth.is_retryable() && !auth.should_fail_over());
        let ctx = LlmError::ContextLengthExceeded {
            provider: p.clone(),
            message: m,
        };
        assert!(!ctx.should_fail_over());
        assert!(LlmError::bad_response("p", "x").should_fail_over());
        assert_eq!(ctx.kind(), LlmErrorKind::ContextLengthExceeded);
        assert_eq!(ctx.provider(), "p");
        let unsupported = LlmError::unsupported("p", "list its models");
        assert!(!unsupported.is_retryable() && !unsupported.should_fail_over());
        assert_eq!(unsupported.to_string(), "p cannot list its models");
        assert_eq!(unsupported.provider(), "p");
    }

    #[test]
    fn cost_limit_is_final_and_shows_its_message() {
        let err = LlmError::cost_limit("daily LLM budget of $5.00 reached");
        assert!(!err.is_retryable() && !err.should_fail_over());
        assert_eq!(err.kind(), LlmErrorKind::CostLimit);
        assert_eq!(err.provider(), "");
        assert_eq!(err.retry_after(), None);
        assert_eq!(err.to_string(), "daily LLM budget of $5.00 reached");
        let policy = crate::retry::RetryPolicy::default();
        assert_eq!(policy.delay_for(&err, 0), None);
    }

    /// A chain whose primary is over budget must not spend on the fallback.
    #[cfg(feature = "testing")]
    #[tokio::test]
    async fn failover_stops_at_a_cost_limit() {
        use std::sync::Arc;

        use crate::testing::InstantProvider;
        use crate::{ChatRequest, FailoverProvider, LlmProvider};

        let primary = Arc::new(InstantProvider::new());
        primary.push_error(LlmError::cost_limit("over budget"));
        let fallback = Arc::new(InstantProvider::new());
        let chain = FailoverProvider::new(vec![
            Arc::clone(&primary) as Arc<dyn LlmProvider>,
            Arc::clone(&fallback) as Arc<dyn LlmProvider>,
        ])
        .unwrap();
        let err = chain.complete(&ChatRequest::default()).await.unwrap_err();
        assert_eq!(err.kind(), LlmErrorKind::CostLimit);
        assert_eq!((primary.calls(), fallback.calls()), (1, 0));
    }
}
