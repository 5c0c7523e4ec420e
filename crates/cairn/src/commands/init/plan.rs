//! What `cairn init` is going to write: the answers, checked, and the
//! config.toml text they make. Keys are written as `${VAR}` references
//! unless the person asked to store the key itself.

use std::fmt::Write as _;

/// The LLM providers init offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    /// OpenAI's API.
    OpenAi,
    /// Anthropic's API.
    Anthropic,
    /// OpenRouter.
    OpenRouter,
    /// A local Ollama.
    Ollama,
    /// Any OpenAI-compatible server (a base URL is required).
    Compatible,
}

impl Provider {
    /// The names a person may type.
    pub const NAMES: &str = "openai, anthropic, openrouter, ollama or compatible";

    /// Parses a typed name.
    pub fn parse(text: &str) -> Result<Provider, String> {
        match text.trim().to_ascii_lowercase().as_str() {
            "openai" => Ok(Provider::OpenAi),
            "anthropic" | "claude" => Ok(Provider::Anthropic),
            "openrouter" => Ok(Provider::OpenRouter),
            "ollama" => Ok(Provider::Ollama),
            "compatible" | "openai-compatible" | "custom" => Ok(Provider::Compatible),
            other => Err(format!(
                "unknown provider \"{other}\"; expected {}",
                Self::NAMES
            )),
        }
    }

    /// The name written as `llm.provider`.
    pub fn config_name(self) -> &'static str {
        match self {
            Provider::OpenAi | Provider::Compatible => "openai",
            Provider::Anthropic => "anthropic",
            Provider::OpenRouter => "openrouter",
            Provider::Ollama => "ollama",
        }
    }

    /// A small, cheap model to start with (none for an unknown server).
    pub fn default_model(self) -> Option<&'static str> {
        match self {
            Provider::OpenAi => Some("gpt-4o-mini"),
            Provider::Anthropic => Some("claude-3-5-haiku-latest"),
            Provider::OpenRouter => Some("openai/gpt-4o-mini"),
            Provider::Ollama => Some("llama3.1"),
            Provider::Compatible => None,
        }
    }

    /// The variable the key usually lives in (none: a local server needs no key).
    pub fn default_key_env(self) -> Option<&'static str> {
        match self {
            Provider::OpenAi => Some("OPENAI_API_KEY"),
            Provider::Anthropic => Some("ANTHROPIC_API_KEY"),
            Provider::OpenRouter => Some("OPENROUTER_API_KEY"),
            Provider::Ollama | Provider::Compatible => None,
        }
    }
}

/// The first notification channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Channel {
    /// Kept in the database for `cairn inbox` and chats (nothing to configure).
    Inbox,
    /// POST JSON to a URL.
    Webhook(String),
    /// An ntfy topic: server and topic.
    Ntfy(String, String),
    /// A Slack incoming webhook whose URL is in this variable.
    Slack(String),
    /// A Discord webhook whose URL is in this variable.
    Discord(String),
    /// A Telegram chat; the bot token is in `TELEGRAM_BOT_TOKEN`.
    Telegram(String),
}

/// Where a Telegram bot token is read from.
pub const TELEGRAM_TOKEN_ENV: &str = "TELEGRAM_BOT_TOKEN";

impl Channel {
    /// The forms a person may type.
    pub const FORMS: &str =
        "inbox, webhook:URL, ntfy:URL (server/topic), slack:VAR, discord:VAR or telegram:CHAT_ID";

    /// Parses `TYPE[:TARGET]`.
    pub fn parse(text: &str) -> Result<Channel, String> {
        let text = text.trim();
        let (kind, target) = text.split_once(':').unwrap_or((text, ""));
        let target = target.trim();
        let need = |what: &str| -> Result<String, String> {
            if target.is_empty() {
                Err(format!(
                    "{kind} needs {what}: {kind}:{}",
                    what.to_uppercase()
                ))
            } else {
                Ok(target.to_string())
            }
        };
        let url = |what: &str| -> Result<String, String> {
            let url = need(what)?;
            if url.starts_with("http://") || url.starts_with("https://") {
                Ok(url)
            } else {
                Err(format!("{kind}: \"{url}\" is not an http(s) URL"))
            }
        };
        let var = |what: &str| -> Result<String, String> {
            let name = need(what)?;
            if is_var_name(&name) {
                Ok(name)
            } else {
                Err(format!(
                    "{kind}: \"{name}\" is not a variable name; give the environment variable that holds the webhook URL"
                ))
            }
        };
        match kind.to_ascii_lowercase().as_str() {
            "inbox" | "" => Ok(Channel::Inbox),
            "webhook" => Ok(Channel::Webhook(url("url")?)),
            "ntfy" => {
                let full = url("url")?;
                let (server, topic) = full
                    .trim_end_matches('/')
                    .rsplit_once('/')
                    .filter(|(server, topic)| {
                        !topic.is_empty()
                            && server.contains("://")
                            && server.split("://").nth(1).is_some_and(|h| !h.is_empty())
                    })
                    .ok_or_else(|| {
                        format!("ntfy: \"{full}\" has no topic; write ntfy:https://ntfy.sh/TOPIC")
                    })?;
                Ok(Channel::Ntfy(server.to_string(), topic.to_string()))
            }
            "slack" => Ok(Channel::Slack(var("var")?)),
            "discord" => Ok(Channel::Discord(var("var")?)),
            "telegram" => Ok(Channel::Telegram(need("chat_id")?)),
            other => Err(format!(
                "unknown channel type \"{other}\"; expected {}",
                Self::FORMS
            )),
        }
    }

    /// The channel's name in config.toml (its type).
    pub fn name(&self) -> &'static str {
        match self {
            Channel::Inbox => "inbox",
            Channel::Webhook(_) => "webhook",
            Channel::Ntfy(..) => "ntfy",
            Channel::Slack(_) => "slack",
            Channel::Discord(_) => "discord",
            Channel::Telegram(_) => "telegram",
        }
    }
}

/// Whether `name` can be an environment variable's name.
pub fn is_var_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Where the API key comes from.
#[derive(Debug, Clone)]
pub enum Key {
    /// No key (a local server).
    None,
    /// Read at start-up from this variable (`api_key = "${VAR}"`).
    Env(String),
    /// Stored in the vault as [`LLM_KEY_SECRET`] (config.toml says
    /// `${secret:LLM_API_KEY}`), taken now from this variable or typed.
    Stored {
        /// The variable it was read from.
        var: String,
        /// The key.
        value: secrecy::SecretString,
    },
}

/// The vault secret `cairn init` stores the LLM's key as.
pub const LLM_KEY_SECRET: &str = "LLM_API_KEY";

/// Every answer.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The provider.
    pub provider: Provider,
    /// Its base URL, when not the provider's own.
    pub base_url: Option<String>,
    /// The model.
    pub model: String,
    /// The key.
    pub key: Key,
    /// The person's IANA zone.
    pub timezone: String,
    /// The first channel.
    pub channel: Channel,
    /// Whether to install the systemd user service.
    pub service: bool,
}

/// A TOML basic string.
fn quote(text: &str) -> String {
    toml::Value::String(text.to_string()).to_string()
}

/// The config.toml text of a plan.
pub fn render(plan: &Plan, written_on: &str) -> String {
    let mut out = format!(
        "# Written by `cairn init` on {written_on}. Every setting is described in\n\
         # docs/configuration.md (`cairn config reference`); `cairn config show` prints\n\
         # the values in force. This file is yours alone (mode 0600).\n\n\
         [user]\ntimezone = {}\n\n[llm]\nprovider = {}\n",
        quote(&plan.timezone),
        quote(plan.provider.config_name()),
    );
    if let Some(url) = &plan.base_url {
        let _ = writeln!(out, "base_url = {}", quote(url));
    }
    let _ = writeln!(out, "model = {}", quote(&plan.model));
    match &plan.key {
        Key::None => {}
        Key::Env(var) => {
            let _ = writeln!(
                out,
                "api_key = {}   # read from the environment at start-up",
                quote(&format!("${{{var}}}"))
            );
        }
        Key::Stored { var, .. } => {
            let _ = writeln!(
                out,
                "api_key = {}   # in the vault (`cairn secret list`), from {var} when cairn init ran",
                quote(&format!("${{secret:{LLM_KEY_SECRET}}}"))
            );
        }
    }
    if plan.channel == Channel::Inbox {
        out.push_str("\n[notify]\ndefault_channel = \"inbox\"   # `cairn inbox` shows them\n");
        return out;
    }
    let name = plan.channel.name();
    let _ = write!(
        out,
        "\n[notify]\ndefault_channel = {}\n\n[channels.{name}]\ntype = {}\n",
        quote(name),
        quote(name)
    );
    let env_ref = |var: &str| quote(&format!("${{{var}}}"));
    let _ = match &plan.channel {
        Channel::Inbox => Ok(()),
        Channel::Webhook(url) => writeln!(out, "url = {}", quote(url)),
        Channel::Ntfy(server, topic) => {
            writeln!(out, "server = {}\ntopic = {}", quote(server), quote(topic))
        }
        Channel::Slack(var) | Channel::Discord(var) => {
            writeln!(out, "webhook_url = {}", env_ref(var))
        }
        Channel::Telegram(chat) => writeln!(
            out,
            "bot_token = {}\nchat_id = {}",
            env_ref(TELEGRAM_TOKEN_ENV),
            quote(chat)
        ),
    };
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(key: Key, channel: Channel) -> Plan {
        Plan {
            provider: Provider::OpenAi,
            base_url: None,
            model: "gpt-4o-mini".into(),
            key,
            timezone: "Europe/Paris".into(),
            channel,
            service: false,
        }
    }

    #[test]
    fn channels_parse_from_their_short_forms() {
        assert_eq!(Channel::parse("inbox"), Ok(Channel::Inbox));
        assert_eq!(
            Channel::parse("ntfy:https://ntfy.sh/my-alerts"),
            Ok(Channel::Ntfy("https://ntfy.sh".into(), "my-alerts".into()))
        );
        assert_eq!(
            Channel::parse("slack:SLACK_HOOK"),
            Ok(Channel::Slack("SLACK_HOOK".into()))
        );
        assert!(Channel::parse("ntfy:https://ntfy.sh").is_err());
        assert!(Channel::parse("webhook:ftp://x").is_err());
        assert!(Channel::parse("slack:https://hooks.slack.com/x").is_err());
        assert!(Channel::parse("pager").is_err());
    }

    #[test]
    fn keys_are_written_as_references_to_the_environment_or_the_vault() {
        let text = render(&plan(Key::Env("MY_KEY".into()), Channel::Inbox), "today");
        assert!(text.contains("api_key = \"${MY_KEY}\""), "{text}");
        let stored = Key::Stored {
            var: "MY_KEY".into(),
            value: "sk-\"odd\"".to_string().into(),
        };
        let text = render(&plan(stored, Channel::Inbox), "today");
        assert!(
            !text.contains("odd"),
            "the value is never in the file: {text}"
        );
        let parsed: toml::Table = text.parse().unwrap();
        assert_eq!(
            parsed["llm"]["api_key"].as_str(),
            Some("${secret:LLM_API_KEY}")
        );
    }

    #[test]
    fn a_channel_becomes_the_default_one() {
        let text = render(&plan(Key::None, Channel::Telegram("12345".into())), "today");
        let parsed: toml::Table = text.parse().unwrap();
        assert_eq!(
            parsed["notify"]["default_channel"].as_str(),
            Some("telegram")
        );
        assert_eq!(
            parsed["channels"]["telegram"]["bot_token"].as_str(),
            Some("${TELEGRAM_BOT_TOKEN}")
        );
        assert!(parsed["llm"].get("api_key").is_none());
    }
}
