//! `[routing]` in config.toml: rules that classify the person's message and
//! the model (and optionally the provider) each class is routed to. Checked
//! the same way by `cairn doctor` and at start-up; a route's provider must
//! be one that is configured (`llm.provider` or a `[[llm.fallbacks]]` entry),
//! whose address and key it borrows.

use std::sync::Arc;

use cairn_agent::routing::{ModelRouter, Route};
use cairn_agent::{CostGuard, GuardedProvider};
use cairn_core::config::Config;
use cairn_core::routing::{Classifier, RoutingConfig};
use cairn_llm::{LlmProvider, LlmSettings, ProviderSettings, build_provider};

use crate::exit::BadInput;

/// What `[routing]` says, checked.
#[derive(Debug, Default)]
pub struct Checked {
    /// The table as written (empty when absent).
    pub config: RoutingConfig,
    /// Problems that stop routing (bad pattern, unknown provider, …).
    pub errors: Vec<String>,
    /// Hints no route serves (their messages go to the default model).
    pub warnings: Vec<String>,
}

/// Reads and checks `[routing]` against the configured providers.
pub fn check(config: &Config, llm: &LlmSettings) -> anyhow::Result<Checked> {
    let Some(section) = &config.routing else {
        return Ok(Checked::default());
    };
    let routing: RoutingConfig = crate::wiring::section(config, "routing", section)?;
    let mut errors = routing.classifier().err().unwrap_or_default();
    for (hint, route) in &routing.models {
        if let Some(name) = &route.provider
            && provider_settings(llm, name).is_none()
        {
            errors.push(format!(
                "routing.models.{hint}.provider: \"{name}\" is not configured; name llm.provider ({}) or the provider of a [[llm.fallbacks]] entry",
                llm.primary.effective_name()
            ));
        }
    }
    let warnings = routing
        .unrouted_hints()
        .into_iter()
        .map(|hint| {
            format!(
                "routing.rules: hint \"{hint}\" has no [routing.models.{hint}]; its messages go to the default model"
            )
        })
        .collect();
    Ok(Checked {
        config: routing,
        errors,
        warnings,
    })
}

/// The configured settings of the provider called `name` (the main one
/// first, then the fallbacks), compared by preset name so `claude` finds
/// `anthropic`.
fn provider_settings<'a>(llm: &'a LlmSettings, name: &str) -> Option<&'a ProviderSettings> {
    let wanted = ProviderSettings::preset(name, "m")
        .map(|s| s.effective_name())
        .unwrap_or_else(|_| name.trim().to_ascii_lowercase());
    std::iter::once(&llm.primary)
        .chain(&llm.fallbacks)
        .find(|s| s.effective_name() == wanted)
}

/// The router for chat turns, `None` without rules. A route on the main
/// provider shares it (failover included); one on another configured
/// provider gets a client of its own behind the same cost guard.
pub fn router(
    config: &Config,
    llm: &LlmSettings,
    main: &Arc<dyn LlmProvider>,
    guard: &Arc<CostGuard>,
) -> anyhow::Result<Option<ModelRouter>> {
    let checked = check(config, llm)?;
    if !checked.errors.is_empty() {
        return Err(BadInput(checked.errors.join("\n")).into());
    }
    for warning in &checked.warnings {
        tracing::warn!("{warning}");
    }
    let classifier: Classifier = match checked.config.classifier() {
        Ok(c) if !c.is_empty() => c,
        _ => return Ok(None),
    };
    let mut routes = Vec::new();
    for (hint, spec) in &checked.config.models {
        let other = spec
            .provider
            .as_deref()
            .and_then(|name| provider_settings(llm, name))
            .filter(|s| s.effective_name() != llm.primary.effective_name());
        let provider = match other {
            None => Arc::clone(main),
            Some(settings) => {
                let mut settings = settings.clone();
                settings.model = spec.model.clone();
                let built = build_provider(&settings)
                    .map_err(|e| BadInput(format!("routing.models.{hint}: {e}")))?;
                Arc::new(GuardedProvider::new(built, Arc::clone(guard))) as Arc<dyn LlmProvider>
            }
        };
        routes.push(Route {
            hint: hint.clone(),
            provider,
            model: spec.model.clone(),
        });
    }
    Ok(Some(ModelRouter::new(classifier, routes)))
}
