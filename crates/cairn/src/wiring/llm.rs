//! The LLM providers, their fallbacks and the embeddings client, from the config.

use std::sync::Arc;

use cairn_core::config::{Config, Unavailable};
use cairn_llm::{ChatRequest, ChatResponse, LlmError, LlmProvider};
use cairn_llm::{EmbeddingsClient, EmbeddingsSettings};
use cairn_llm::{LlmSettings, PriceTable, ProviderSettings, Providers, build_providers};
use secrecy::SecretString;
use serde::Deserialize;

use super::section;
use super::tools::expand_secret;
use crate::exit::BadInput;

/// One `[[llm.fallbacks]]` entry.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Fallback {
    provider: String,
    model: String,
    #[serde(default)]
    base_url: Option<String>,
    /// A secret, so that `Debug` (and any log of this entry) never shows it.
    #[serde(default)]
    api_key: Option<SecretString>,
}

/// What to tell a person who has not configured an LLM.
fn no_provider_help(config: &Config) -> String {
    format!(
        "no LLM provider is configured. Set CAIRN_LLM_PROVIDER (openai, anthropic, openrouter, ollama, vllm, \
         llamacpp or lmstudio), CAIRN_LLM_MODEL and CAIRN_LLM_API_KEY (or OPENAI_API_KEY / ANTHROPIC_API_KEY); \
         local servers also take CAIRN_LLM_BASE_URL. The same settings go in the [llm] section of {}",
        crate::settings::config_path(config.home()).display()
    )
}

/// Why the configured LLM cannot be used in this process: its key, or a
/// fallback's, is written `${VAR}` and `VAR` is not set. `None` when
/// nothing is configured or everything it needs is there.
pub fn llm_unavailable(config: &Config) -> Option<Unavailable> {
    config.llm.provider.as_ref()?;
    if let Err(why) = config.llm.api_key.get() {
        return Some(why);
    }
    config
        .unavailable()
        .into_iter()
        .find(|u| u.key.starts_with("llm.fallbacks"))
}

/// The provider settings the configuration describes; an unavailable key
/// is an error naming the file, line, key and variable.
pub fn llm_settings(config: &Config) -> anyhow::Result<LlmSettings> {
    let llm = &config.llm;
    let Some(provider) = llm.provider.as_deref() else {
        return Err(BadInput(no_provider_help(config)).into());
    };
    let api_key = llm
        .api_key
        .get()
        .map_err(|why| BadInput(why.to_string()))?
        .cloned();
    let Some(model) = llm.model.as_deref().filter(|m| !m.trim().is_empty()) else {
        return Err(BadInput(format!(
            "llm.provider is {provider} but no model is set: set CAIRN_LLM_MODEL or llm.model"
        ))
        .into());
    };
    let mut prices = PriceTable::builtin();
    if let Some(sec) = &llm.prices {
        let extra: PriceTable = section(config, "llm.prices", sec)?;
        prices.merge(&extra);
    }
    let base = |name: &str, model: &str| -> anyhow::Result<ProviderSettings> {
        let settings = ProviderSettings::preset(name, model)
            .map_err(|e| BadInput(format!("llm.provider: {e}")))?;
        Ok(settings
            .with_timeout(Some(llm.timeout))
            .with_max_retries(llm.max_retries)
            .with_context_window(llm.context_limit)
            .with_vision(llm.vision)
            .with_prices(prices.clone()))
    };
    let mut primary = base(provider, model)?;
    if let Some(url) = &llm.base_url {
        primary = primary.with_base_url(url.clone());
    }
    primary.api_key = api_key;
    let cheap = match &llm.cheap_model {
        Some(cheap_model) => {
            let mut cheap = primary.clone();
            cheap.model = cheap_model.clone();
            Some(cheap)
        }
        None => None,
    };
    let mut fallbacks = Vec::new();
    if let Some(sec) = &llm.fallbacks {
        let entries: Vec<Fallback> = section(config, "llm.fallbacks", sec)?;
        for (i, f) in entries.into_iter().enumerate() {
            let mut settings = base(&f.provider, &f.model)?;
            if let Some(url) = f.base_url {
                settings = settings.with_base_url(url);
            }
            if let Some(key) = f.api_key {
                let field = format!("llm.fallbacks[{i}].api_key");
                settings.api_key = Some(expand_secret(config, &key, &field, sec.line)?);
            }
            fallbacks.push(settings);
        }
    }
    Ok(LlmSettings {
        primary,
        cheap,
        fallbacks,
    })
}

/// Stands in for a configured provider this process cannot use (its key's
/// variable is not set): every call fails saying why, so the parts that
/// need the LLM fail with that and the rest of the runtime runs.
#[derive(Debug)]
struct UnavailableProvider {
    name: String,
    model: String,
    why: String,
}

#[async_trait::async_trait]
impl LlmProvider for UnavailableProvider {
    fn name(&self) -> &str {
        &self.name
    }

    fn model(&self) -> &str {
        &self.model
    }

    async fn complete(&self, _request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        Err(LlmError::Config {
            message: self.why.clone(),
        })
    }
}

/// The main and cheap stand-ins for a provider that is unavailable for `why`.
pub fn unavailable_providers(config: &Config, why: &Unavailable) -> Providers {
    let provider = |model: Option<&String>| -> Arc<dyn LlmProvider> {
        Arc::new(UnavailableProvider {
            name: config.llm.provider.clone().unwrap_or_default(),
            model: model.cloned().unwrap_or_default(),
            why: why.to_string(),
        })
    };
    Providers {
        main: provider(config.llm.model.as_ref()),
        cheap: provider(
            config
                .llm
                .cheap_model
                .as_ref()
                .or(config.llm.model.as_ref()),
        ),
    }
}

/// The main and cheap providers.
pub fn providers(config: &Config) -> anyhow::Result<Providers> {
    let settings = llm_settings(config)?;
    build_providers(&settings).map_err(|e| BadInput(e.to_string()).into())
}

/// The embeddings client of `[memory]`, `None` when no provider is set
/// (recall is then keyword-only).
pub fn embeddings(config: &Config) -> anyhow::Result<Option<EmbeddingsClient>> {
    let m = &config.memory;
    let Some(provider) = m.embeddings_provider.as_deref() else {
        return Ok(None);
    };
    let (base_url, model) = match provider {
        "openai" => ("https://api.openai.com/v1", "text-embedding-3-small"),
        "ollama" => ("http://localhost:11434/v1", "nomic-embed-text"),
        "openai-compatible" | "openai_compatible" => ("", ""),
        other => {
            return Err(BadInput(format!(
                "memory.embeddings_provider: unknown provider {other:?}; use openai, ollama or openai-compatible"
            ))
            .into());
        }
    };
    let base_url = m
        .embeddings_base_url
        .clone()
        .unwrap_or(base_url.to_string());
    let model = m.embeddings_model.clone().unwrap_or(model.to_string());
    if base_url.is_empty() || model.is_empty() {
        return Err(BadInput(
            "memory.embeddings_provider = \"openai-compatible\" needs memory.embeddings_base_url and memory.embeddings_model".to_string(),
        )
        .into());
    }
    let api_key = m
        .embeddings_api_key
        .get()
        .map_err(|why| BadInput(why.to_string()))?
        .cloned();
    if provider == "openai" && api_key.is_none() {
        return Err(BadInput(
            "memory.embeddings_provider = \"openai\" needs memory.embeddings_api_key (or OPENAI_API_KEY)".to_string(),
        )
        .into());
    }
    let client = EmbeddingsClient::new(&EmbeddingsSettings {
        provider: provider.to_string(),
        base_url,
        model,
        dimensions: m.embeddings_dimensions,
        api_key,
        timeout: Some(config.llm.timeout),
    })
    .map_err(|e| BadInput(format!("memory embeddings: {e}")))?;
    Ok(Some(client))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fallback_api_key_never_shows_in_debug() {
        let f: Fallback = serde_json::from_value(serde_json::json!({
            "provider": "openai", "model": "m", "api_key": "sk-fallback-secret"
        }))
        .unwrap();
        let debug = format!("{f:?}");
        assert!(!debug.contains("sk-fallback-secret"), "{debug}");
    }
}
