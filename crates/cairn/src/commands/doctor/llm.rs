//! Contacting the LLM for `cairn doctor`: each configured provider is
//! asked for its model list (`GET {base_url}/models`, the cheapest call
//! both protocols have: no tokens spent), once, with a short timeout, and
//! what failed is said in a person's words (nothing listens at host:port,
//! the key was refused, no answer in time, …).

use std::time::Duration;

use cairn_core::config::Config;
use cairn_llm::{LlmError, LlmSettings, ProviderSettings};

use super::{Check, Status, check};

/// The `llm` check: the provider settings build as chat builds them, and,
/// unless `offline`, every provider answers.
pub(super) async fn check_llm(config: &Config, offline: bool) -> Check {
    if config.llm.provider.is_none() {
        return check(
            "llm",
            Status::Warn,
            "no LLM provider configured; chat and routines need one: set CAIRN_LLM_PROVIDER (openai, anthropic, ollama, …), CAIRN_LLM_MODEL and CAIRN_LLM_API_KEY (or OPENAI_API_KEY / ANTHROPIC_API_KEY)",
        );
    }
    if let Some(why) = crate::wiring::llm_unavailable(config) {
        return check(
            "llm",
            Status::Warn,
            format!("{why}: chat and the routines that need the LLM fail here until it is set"),
        );
    }
    // Builds the providers exactly as chat does, then contacts each.
    let settings = match crate::wiring::llm_settings(config).and_then(|s| {
        cairn_llm::build_providers(&s).map_err(anyhow::Error::from)?;
        Ok(s)
    }) {
        Ok(s) => s,
        Err(e) => return check("llm", Status::Fail, format!("{e:#}")),
    };
    let summary = format!(
        "{} at {}, model {}{}",
        settings.primary.effective_name(),
        settings.primary.effective_base_url(),
        settings.primary.model,
        if settings.fallbacks.is_empty() {
            String::new()
        } else {
            format!(", {} fallback(s)", settings.fallbacks.len())
        }
    );
    if offline {
        return check("llm", Status::Ok, format!("{summary} (not contacted)"));
    }
    let contacts = contact_all(&settings, CONTACT_TIMEOUT).await;
    let status = contacts
        .iter()
        .map(|c| c.status)
        .max_by_key(|s| match s {
            Status::Ok => 0,
            Status::Warn => 1,
            Status::Fail => 2,
        })
        .unwrap_or(Status::Ok);
    let mut lines = vec![summary];
    lines.extend(contacts.into_iter().map(|c| c.line));
    check("llm", status, lines.join("\n"))
}

/// Contacts the main provider about `model` (an agent's own model), as
/// `role`; `None` when the LLM settings are missing or unusable (the
/// `llm` check says why).
pub(super) async fn contact_model(config: &Config, model: &str, role: &str) -> Option<Contact> {
    if config.llm.provider.is_none() || crate::wiring::llm_unavailable(config).is_some() {
        return None;
    }
    let settings = crate::wiring::llm_settings(config).ok()?;
    let mut provider = settings.primary;
    provider.model = model.to_string();
    Some(contact(role, &provider, CONTACT_TIMEOUT).await)
}

/// How long one provider has to answer: enough for a distant API, short
/// enough that a black hole does not hold doctor for the LLM's own timeout.
pub const CONTACT_TIMEOUT: Duration = Duration::from_secs(8);

/// What contacting one provider found.
#[derive(Debug)]
pub struct Contact {
    /// Ok (it answered and serves the model), warn (it answered, but the
    /// model list says something is off) or fail (no usable answer).
    pub status: Status,
    /// `ROLE NAME at URL: what happened`.
    pub line: String,
}

/// Contacts every provider of `settings` (the primary, each fallback, the
/// cheap one) in turn; the lines say, one a provider, what each answered.
/// Built for one agent's settings at a time, so each `[[agents]]` entry
/// with its own model or provider is checked the same way.
pub async fn contact_all(settings: &LlmSettings, timeout: Duration) -> Vec<Contact> {
    let mut roles: Vec<(String, &ProviderSettings)> = vec![("primary".into(), &settings.primary)];
    for (i, fallback) in settings.fallbacks.iter().enumerate() {
        roles.push((format!("fallback {}", i + 1), fallback));
    }
    if let Some(cheap) = &settings.cheap {
        roles.push(("cheap".into(), cheap));
    }
    let mut out = Vec::new();
    for (role, provider) in roles {
        out.push(contact(&role, provider, timeout).await);
    }
    out
}

/// Asks one provider for its models, without retries, within `timeout`.
pub async fn contact(role: &str, provider: &ProviderSettings, timeout: Duration) -> Contact {
    let what = format!(
        "{role} {} at {}, model {}",
        provider.effective_name(),
        provider.effective_base_url(),
        provider.model
    );
    let probe = provider
        .clone()
        .with_timeout(Some(timeout))
        .with_max_retries(0);
    let listed = match cairn_llm::build_provider(&probe) {
        Ok(client) => client.list_models().await,
        Err(e) => Err(e),
    };
    let (status, said) = match listed {
        Ok(models) => answered(&models, &provider.model),
        Err(e) => (failure_status(&e), explain(&e, provider, timeout)),
    };
    Contact {
        status,
        line: format!("{what}: {said}"),
    }
}

/// It answered: the model is listed (ok), or not (warn: a name the server
/// does not know fails every turn, though some servers list only part).
fn answered(models: &[cairn_llm::ModelInfo], model: &str) -> (Status, String) {
    if models.is_empty() {
        return (Status::Ok, "answered (it lists no models)".into());
    }
    let known = models
        .iter()
        .any(|m| m.id == model || m.id == format!("{model}:latest"));
    if known {
        (
            Status::Ok,
            format!("answered; serves {model} ({} models listed)", models.len()),
        )
    } else {
        let some: Vec<&str> = models.iter().take(5).map(|m| m.id.as_str()).collect();
        (
            Status::Warn,
            format!(
                "answered, but {model} is not among the {} models it lists (e.g. {}): check llm.model",
                models.len(),
                some.join(", ")
            ),
        )
    }
}

/// A server that answered but has no model list still answered; anything
/// else is a failure.
fn failure_status(e: &LlmError) -> Status {
    match e {
        LlmError::BadRequest { status: 404, .. } | LlmError::BadResponse { .. } => Status::Warn,
        _ => Status::Fail,
    }
}

/// What went wrong, in a person's words, with the address (host and port
/// only: a base URL may carry credentials).
fn explain(e: &LlmError, provider: &ProviderSettings, timeout: Duration) -> String {
    let place = host_port(&provider.effective_base_url());
    match e {
        LlmError::Transport { message, .. } => {
            let lower = message.to_ascii_lowercase();
            if lower.contains("connection refused") {
                format!(
                    "connection refused at {place}: nothing listens there (is the server running? is llm.base_url right?)"
                )
            } else if lower.contains("dns") || lower.contains("lookup") {
                format!("cannot resolve the host of {place}: {message}")
            } else if lower.contains("certificate") || lower.contains("tls") {
                format!("TLS failed with {place}: {message}")
            } else {
                format!("cannot reach {place}: {message}")
            }
        }
        LlmError::Timeout { .. } => format!(
            "no answer from {place} within {} s (a firewall, or a server too busy?)",
            timeout.as_secs()
        ),
        LlmError::Auth {
            status, message, ..
        } => format!(
            "the API key was refused (HTTP {status}): {message}; check llm.api_key (or the variable it names)"
        ),
        LlmError::BadRequest {
            status: 404,
            message,
            ..
        } => format!(
            "{place} answered, but has no model list (HTTP 404: {message}); the key and model were not checked"
        ),
        LlmError::BadResponse { message, .. } => format!(
            "{place} answered, but not with a model list ({message}); is llm.base_url the API's root?"
        ),
        other => other.to_string(),
    }
}

/// `host:port` of a URL (its known default port when none is written).
fn host_port(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(u) => format!(
            "{}:{}",
            u.host_str().unwrap_or_default(),
            u.port_or_known_default().unwrap_or_default()
        ),
        Err(_) => "the configured address".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_address_shown_is_host_and_port_only() {
        assert_eq!(
            host_port("http://user:pw@127.0.0.1:9/v1?key=x"),
            "127.0.0.1:9"
        );
        assert_eq!(host_port("https://api.openai.com/v1"), "api.openai.com:443");
    }

    #[test]
    fn a_model_the_server_does_not_list_is_a_warning() {
        let models = [cairn_llm::ModelInfo::new("llama3:latest")];
        assert_eq!(answered(&models, "llama3").0, Status::Ok);
        let (status, said) = answered(&models, "gpt-4o");
        assert_eq!(status, Status::Warn);
        assert!(said.contains("gpt-4o is not among the 1 models"), "{said}");
    }
}
