//! Provider settings and the builders that turn them into providers.
//!
//! This crate never reads the environment or files: the binary maps its
//! configuration onto these structs.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use secrecy::SecretString;

use crate::anthropic::AnthropicClient;
use crate::cost::PriceTable;
use crate::error::LlmError;
use crate::failover::FailoverProvider;
use crate::openai::OpenAiClient;
use crate::provider::LlmProvider;
use crate::retry::{RetryPolicy, RetryingProvider};

/// Which wire protocol a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProviderKind {
    /// `POST {base}/chat/completions`: OpenAI, OpenRouter, Ollama, vLLM,
    /// llama.cpp server, LM Studio and other compatible servers.
    OpenAiCompatible,
    /// `POST {base}/v1/messages`: Anthropic's Messages API.
    Anthropic,
}

impl ProviderKind {
    /// The base URL used when none is configured.
    pub fn default_base_url(self) -> &'static str {
        match self {
            Self::OpenAiCompatible => "https://api.openai.com/v1",
            Self::Anthropic => "https://api.anthropic.com",
        }
    }

    /// The provider name used in logs and errors when none is configured.
    pub fn default_name(self) -> &'static str {
        match self {
            Self::OpenAiCompatible => "openai",
            Self::Anthropic => "anthropic",
        }
    }
}

/// Known provider presets: name, protocol, base URL.
const PRESETS: &[(&str, ProviderKind, &str)] = &[
    (
        "openai",
        ProviderKind::OpenAiCompatible,
        "https://api.openai.com/v1",
    ),
    (
        "anthropic",
        ProviderKind::Anthropic,
        "https://api.anthropic.com",
    ),
    (
        "openrouter",
        ProviderKind::OpenAiCompatible,
        "https://openrouter.ai/api/v1",
    ),
    (
        "ollama",
        ProviderKind::OpenAiCompatible,
        "http://localhost:11434/v1",
    ),
    (
        "vllm",
        ProviderKind::OpenAiCompatible,
        "http://localhost:8000/v1",
    ),
    (
        "llamacpp",
        ProviderKind::OpenAiCompatible,
        "http://localhost:8080/v1",
    ),
    (
        "lmstudio",
        ProviderKind::OpenAiCompatible,
        "http://localhost:1234/v1",
    ),
];

fn normalize_preset_name(name: &str) -> String {
    let lower = name
        .trim()
        .to_ascii_lowercase()
        .replace(['-', '_', '.', ' '], "");
    match lower.as_str() {
        "claude" => "anthropic".into(),
        "openaicompatible" | "openaicompat" | "compatible" => "openai".into(),
        _ => lower,
    }
}

fn unknown_provider(name: &str) -> LlmError {
    LlmError::config(format!(
        "unknown provider {name:?}; expected one of openai, openai-compatible, anthropic, \
         openrouter, ollama, vllm, llamacpp, lmstudio"
    ))
}

impl FromStr for ProviderKind {
    type Err = LlmError;

    /// Parses a protocol or preset name (`openai`, `openai-compatible`,
    /// `ollama`, `vllm`, `llama.cpp`, `lmstudio`, `openrouter`, `anthropic`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let name = normalize_preset_name(s);
        PRESETS
            .iter()
            .find(|(preset, _, _)| *preset == name)
            .map(|(_, kind, _)| *kind)
            .ok_or_else(|| unknown_provider(s))
    }
}

/// Everything needed to build one provider.
///
/// `Debug` never shows the API key (`SecretString` redacts it).
#[derive(Debug, Clone)]
pub struct ProviderSettings {
    /// Wire protocol.
    pub kind: ProviderKind,
    /// Name for logs and errors; defaults per kind.
    pub name: Option<String>,
    /// API base URL; defaults per kind (see [`ProviderKind::default_base_url`]).
    pub base_url: Option<String>,
    /// API key; optional for local servers.
    pub api_key: Option<SecretString>,
    /// Default model.
    pub model: String,
    /// Limit for the response head, a whole body, and each gap between stream
    /// chunks. `None` disables every client-side timer (request timeout,
    /// connect timeout, idle-connection reaper), which tests under
    /// `tokio::time::pause` need: a paused clock jumps to the next pending
    /// timer while a real socket is being waited on.
    pub timeout: Option<Duration>,
    /// Retries of transient failures.
    pub retry: RetryPolicy,
    /// The model's context window in tokens, if known.
    pub context_window: Option<u32>,
    /// Output cap used when a request sets none (Anthropic requires one; 4096 if unset).
    pub max_tokens: Option<u32>,
    /// Prices for cost accounting.
    pub prices: PriceTable,
    /// Recover tool calls written as text when the model made no native call.
    pub text_tool_calls: bool,
    /// The model accepts images (`llm.vision`); without it a request
    /// carrying images is refused before it is sent.
    pub vision: bool,
}

impl ProviderSettings {
    /// Settings for `model` over `kind` with defaults: default base URL, no key,
    /// 120 s timeout, 3 retries, built-in prices, text tool-call recovery on.
    pub fn new(kind: ProviderKind, model: impl Into<String>) -> Self {
        Self {
            kind,
            name: None,
            base_url: None,
            api_key: None,
            model: model.into(),
            timeout: Some(Duration::from_secs(120)),
            retry: RetryPolicy::default(),
            context_window: None,
            max_tokens: None,
            prices: PriceTable::builtin(),
            text_tool_calls: true,
            vision: true,
        }
    }

    /// Settings from a preset name (`ollama`, `openrouter`, `anthropic`, ...):
    /// protocol, provider name and base URL filled in.
    pub fn preset(name: &str, model: impl Into<String>) -> Result<Self, LlmError> {
        let normalized = normalize_preset_name(name);
        let (preset, kind, base) = PRESETS
            .iter()
            .find(|(preset, _, _)| *preset == normalized)
            .ok_or_else(|| unknown_provider(name))?;
        Ok(Self {
            name: Some((*preset).to_owned()),
            base_url: Some((*base).to_owned()),
            ..Self::new(*kind, model)
        })
    }

    /// Sets the base URL.
    #[must_use]
    pub fn with_base_url(mut self, base_url: impl Into<String>) -> Self {
        self.base_url = Some(base_url.into());
        self
    }

    /// Sets the API key.
    #[must_use]
    pub fn with_api_key(mut self, api_key: impl Into<String>) -> Self {
        self.api_key = Some(SecretString::from(api_key.into()));
        self
    }

    /// Sets the provider name.
    #[must_use]
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Sets the timeout (`None`: no client-side timers; see the field docs).
    #[must_use]
    pub fn with_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets the retry policy.
    #[must_use]
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Sets how many times transient failures are retried.
    #[must_use]
    pub fn with_max_retries(mut self, max_retries: u32) -> Self {
        self.retry.max_retries = max_retries;
        self
    }

    /// Sets the context window.
    #[must_use]
    pub fn with_context_window(mut self, tokens: u32) -> Self {
        self.context_window = Some(tokens);
        self
    }

    /// Says whether the model accepts images.
    #[must_use]
    pub fn with_vision(mut self, vision: bool) -> Self {
        self.vision = vision;
        self
    }

    /// Replaces the price table.
    #[must_use]
    pub fn with_prices(mut self, prices: PriceTable) -> Self {
        self.prices = prices;
        self
    }

    /// The provider name in effect.
    pub fn effective_name(&self) -> String {
        self.name
            .clone()
            .filter(|n| !n.trim().is_empty())
            .unwrap_or_else(|| self.kind.default_name().to_owned())
    }

    /// The base URL in effect, without trailing slashes.
    pub fn effective_base_url(&self) -> String {
        self.base_url
            .as_deref()
            .map(str::trim)
            .filter(|u| !u.is_empty())
            .unwrap_or(self.kind.default_base_url())
            .trim_end_matches('/')
            .to_owned()
    }
}

/// Settings for the whole LLM layer: a primary provider, an optional cheap one
/// for light work, and fallbacks tried in order when the primary fails.
#[derive(Debug, Clone)]
pub struct LlmSettings {
    /// The main provider.
    pub primary: ProviderSettings,
    /// A cheaper provider/model for light work; the main one when `None`.
    pub cheap: Option<ProviderSettings>,
    /// Providers tried after the primary fails transiently.
    pub fallbacks: Vec<ProviderSettings>,
}

impl LlmSettings {
    /// Just a primary provider.
    pub fn new(primary: ProviderSettings) -> Self {
        Self {
            primary,
            cheap: None,
            fallbacks: Vec::new(),
        }
    }
}

/// The built providers.
#[derive(Debug, Clone)]
pub struct Providers {
    /// For agent turns: the primary, with failover when fallbacks are configured.
    pub main: Arc<dyn LlmProvider>,
    /// For light work (routine checks, summaries); the same as `main` unless configured.
    pub cheap: Arc<dyn LlmProvider>,
}

/// Builds one provider (HTTP client plus retries) from its settings.
pub fn build_provider(settings: &ProviderSettings) -> Result<Arc<dyn LlmProvider>, LlmError> {
    let client: Arc<dyn LlmProvider> = match settings.kind {
        ProviderKind::OpenAiCompatible => Arc::new(OpenAiClient::new(settings)?),
        ProviderKind::Anthropic => Arc::new(AnthropicClient::new(settings)?),
    };
    if settings.retry.max_retries == 0 {
        return Ok(client);
    }
    Ok(Arc::new(RetryingProvider::new(
        client,
        settings.retry.clone(),
    )))
}

/// Builds the main (with failover) and cheap providers.
pub fn build_providers(settings: &LlmSettings) -> Result<Providers, LlmError> {
    let primary = build_provider(&settings.primary)?;
    let main = if settings.fallbacks.is_empty() {
        primary
    } else {
        let mut chain = vec![primary];
        for fallback in &settings.fallbacks {
            chain.push(build_provider(fallback)?);
        }
        Arc::new(FailoverProvider::new(chain)?) as Arc<dyn LlmProvider>
    };
    let cheap = match &settings.cheap {
        Some(cheap) => build_provider(cheap)?,
        None => Arc::clone(&main),
    };
    Ok(Providers { main, cheap })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_and_presets_parse() {
        assert_eq!(
            "openai".parse::<ProviderKind>().unwrap(),
            ProviderKind::OpenAiCompatible
        );
        assert_eq!(
            "OpenAI-Compatible".parse::<ProviderKind>().unwrap(),
            ProviderKind::OpenAiCompatible
        );
        assert_eq!(
            "llama.cpp".parse::<ProviderKind>().unwrap(),
            ProviderKind::OpenAiCompatible
        );
        assert_eq!(
            "Claude".parse::<ProviderKind>().unwrap(),
            ProviderKind::Anthropic
        );
        let err = "gemini".parse::<ProviderKind>().unwrap_err();
        assert!(err.to_string().contains("gemini"));
        let ollama = ProviderSettings::preset("ollama", "llama3").unwrap();
        assert_eq!(ollama.effective_base_url(), "http://localhost:11434/v1");
        assert_eq!(ollama.effective_name(), "ollama");
        assert!(ProviderSettings::preset("nope", "m").is_err());
    }

    #[test]
    fn defaults_per_kind_and_trailing_slash() {
        let s = ProviderSettings::new(ProviderKind::Anthropic, "claude-sonnet-4");
        assert_eq!(s.effective_base_url(), "https://api.anthropic.com");
        let s = ProviderSettings::new(ProviderKind::OpenAiCompatible, "gpt-4o")
            .with_base_url("http://h:1/v1///");
        assert_eq!(s.effective_base_url(), "http://h:1/v1");
    }

    #[test]
    fn debug_redacts_the_key() {
        let s = ProviderSettings::new(ProviderKind::OpenAiCompatible, "gpt-4o")
            .with_api_key("sk-very-secret");
        assert!(!format!("{s:?}").contains("sk-very-secret"));
        let all = LlmSettings::new(s);
        assert!(!format!("{all:?}").contains("sk-very-secret"));
    }
}
