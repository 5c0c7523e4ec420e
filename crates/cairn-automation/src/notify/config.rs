//! `[channels.NAME]` tables: their types and fields, `${VAR}` expansion, and
//! errors that name the key at fault.

use std::collections::BTreeMap;
use std::fmt;

use cairn_core::config::expand::{UnsetVariable, expand_env};
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::Value;

use super::channels::discord::DiscordSpec;
use super::channels::email::EmailSpec;
use super::channels::ntfy::NtfySpec;
use super::channels::slack::SlackSpec;
use super::channels::telegram::TelegramSpec;
use super::channels::webhook::WebhookSpec;
use super::channels::whatsapp::WhatsAppSpec;

/// The channel every setup has: notifications kept in the store for the
/// person's sessions (`cairn inbox`, `cairn chat`).
pub const INBOX: &str = "inbox";

/// One output channel's settings, by `type`.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ChannelSpec {
    /// Kept in the store for the person's sessions.
    Inbox {},
    /// A structured log line, nothing else.
    Log {},
    /// POST JSON to a URL.
    Webhook(WebhookSpec),
    /// A Slack incoming webhook.
    Slack(SlackSpec),
    /// A Discord webhook, a Discord bot, or both.
    Discord(DiscordSpec),
    /// A Telegram bot.
    Telegram(TelegramSpec),
    /// An ntfy topic.
    Ntfy(NtfySpec),
    /// SMTP.
    Email(EmailSpec),
    /// The WhatsApp Cloud API (receives messages only).
    #[serde(rename = "whatsapp")]
    WhatsApp(WhatsAppSpec),
}

impl ChannelSpec {
    /// The `type` name.
    pub fn kind(&self) -> &'static str {
        match self {
            ChannelSpec::Inbox {} => "inbox",
            ChannelSpec::Log {} => "log",
            ChannelSpec::Webhook(_) => "webhook",
            ChannelSpec::Slack(_) => "slack",
            ChannelSpec::Discord(_) => "discord",
            ChannelSpec::Telegram(_) => "telegram",
            ChannelSpec::Ntfy(_) => "ntfy",
            ChannelSpec::Email(_) => "email",
            ChannelSpec::WhatsApp(_) => "whatsapp",
        }
    }

    /// Whether notifications can be posted to it: a Slack or Discord app
    /// without `webhook_url`, and WhatsApp, only answer chats.
    pub fn posts(&self) -> bool {
        match self {
            ChannelSpec::Slack(s) => s.webhook_url.is_some(),
            ChannelSpec::Discord(d) => d.webhook_url.is_some(),
            ChannelSpec::WhatsApp(_) => false,
            _ => true,
        }
    }

    /// Whether the channel receives messages (`inbound = true`).
    pub fn inbound(&self) -> bool {
        match self {
            ChannelSpec::Telegram(t) => t.inbound,
            ChannelSpec::Slack(s) => s.inbound,
            ChannelSpec::Discord(d) => d.inbound,
            ChannelSpec::WhatsApp(w) => w.inbound,
            _ => false,
        }
    }

    /// Checks what the types cannot: URLs, addresses, non-empty fields.
    /// Returns `(field, problem)` pairs.
    fn problems(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        let mut url = |field: &'static str, value: &str| {
            if let Err(e) = check_url(value) {
                out.push((field, e));
            }
        };
        match self {
            ChannelSpec::Inbox {} | ChannelSpec::Log {} => {}
            ChannelSpec::Webhook(w) => url("url", &w.url),
            ChannelSpec::Slack(s) => {
                if let Some(hook) = &s.webhook_url {
                    url("webhook_url", hook.expose_secret());
                }
                url("api_url", &s.api_url);
                bot_problems(&mut out, s.webhook_url.is_some(), s.inbound);
                if s.inbound {
                    needed(&mut out, "bot_token", s.bot_token.as_ref());
                    needed(&mut out, "app_token", s.app_token.as_ref());
                }
                ids(
                    &mut out,
                    &s.allowed_users,
                    "a Slack user id (U0123ABCD)",
                    |id| {
                        id.len() > 1
                            && id.starts_with(['U', 'W'])
                            && id
                                .chars()
                                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
                    },
                );
            }
            ChannelSpec::Discord(d) => {
                if let Some(hook) = &d.webhook_url {
                    url("webhook_url", hook.expose_secret());
                }
                url("api_url", &d.api_url);
                bot_problems(&mut out, d.webhook_url.is_some(), d.inbound);
                if d.inbound {
                    needed(&mut out, "bot_token", d.bot_token.as_ref());
                }
                ids(
                    &mut out,
                    &d.allowed_users,
                    "a Discord user id (a number)",
                    |id| id.parse::<u64>().is_ok(),
                );
            }
            ChannelSpec::WhatsApp(w) => {
                url("api_url", &w.api_url);
                if !w.inbound {
                    out.push((
                        "inbound",
                        "a whatsapp channel only answers chats: set inbound = true".into(),
                    ));
                }
                needed(&mut out, "access_token", Some(&w.access_token));
                needed(&mut out, "verify_token", w.verify_token.as_ref());
                needed(&mut out, "app_secret", w.app_secret.as_ref());
                if w.phone_number_id.is_empty()
                    || !w.phone_number_id.chars().all(|c| c.is_ascii_digit())
                {
                    out.push(("phone_number_id", "must be the number's id (digits)".into()));
                }
                ids(
                    &mut out,
                    &w.allowed_users,
                    "a phone number with its country code, digits only",
                    |id| !id.is_empty() && id.chars().all(|c| c.is_ascii_digit()),
                );
            }
            ChannelSpec::Telegram(t) => {
                url("api_url", &t.api_url);
                if t.chat_id.trim().is_empty() {
                    out.push(("chat_id", "must not be empty".into()));
                }
                if t.bot_token.expose_secret().trim().is_empty() {
                    out.push(("bot_token", "must not be empty".into()));
                }
                for id in &t.allowed_users {
                    if id.parse::<i64>().is_err() {
                        out.push((
                            "allowed_users",
                            format!("\"{id}\" is not a Telegram user id (a number)"),
                        ));
                    }
                }
            }
            ChannelSpec::Ntfy(n) => {
                url("server", &n.server);
                if n.topic.trim().is_empty() || n.topic.contains('/') {
                    out.push(("topic", "must be a non-empty name without '/'".into()));
                }
            }
            ChannelSpec::Email(e) => {
                if e.host.trim().is_empty() {
                    out.push(("host", "must not be empty".into()));
                }
                if !looks_like_address(&e.from) {
                    out.push(("from", format!("\"{}\" is not an email address", e.from)));
                }
                let to = e.to.list();
                if to.is_empty() {
                    out.push(("to", "needs at least one address".into()));
                }
                for bad in to.iter().filter(|a| !looks_like_address(a)) {
                    out.push(("to", format!("\"{bad}\" is not an email address")));
                }
                if e.password.is_some() && e.username.is_none() {
                    out.push(("username", "is needed with password".into()));
                }
            }
        }
        out
    }
}

/// A Slack or Discord channel needs its webhook, its bot, or both.
fn bot_problems(out: &mut Vec<(&'static str, String)>, webhook: bool, inbound: bool) {
    if !webhook && !inbound {
        out.push((
            "webhook_url",
            "needed to post notifications (or set inbound = true and the bot's tokens)".into(),
        ));
    }
}

/// A secret that must be set and not blank.
fn needed(
    out: &mut Vec<(&'static str, String)>,
    field: &'static str,
    value: Option<&SecretString>,
) {
    match value {
        None => out.push((field, "is needed with inbound = true".into())),
        Some(v) if v.expose_secret().trim().is_empty() => {
            out.push((field, "must not be empty".into()))
        }
        Some(_) => {}
    }
}

/// `allowed_users` entries that are not `what`.
fn ids(
    out: &mut Vec<(&'static str, String)>,
    users: &[String],
    what: &str,
    valid: impl Fn(&str) -> bool,
) {
    for id in users.iter().filter(|id| !valid(id)) {
        out.push(("allowed_users", format!("\"{id}\" is not {what}")));
    }
}

fn check_url(value: &str) -> Result<(), String> {
    match reqwest::Url::parse(value) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host_str().is_some() => Ok(()),
        Ok(u) => Err(format!(
            "expected an http(s) URL, got scheme \"{}\"",
            u.scheme()
        )),
        Err(e) => Err(format!("not a URL: {e}")),
    }
}

/// A plausible `local@domain` (optionally `Name <local@domain>`); the SMTP
/// library checks the rest when the message is built.
fn looks_like_address(text: &str) -> bool {
    let addr = match (text.find('<'), text.rfind('>')) {
        (Some(a), Some(b)) if a < b => &text[a + 1..b],
        _ => text,
    };
    let addr = addr.trim();
    match addr.split_once('@') {
        Some((local, domain)) => {
            !local.is_empty() && !domain.is_empty() && !addr.contains(char::is_whitespace)
        }
        None => false,
    }
}

/// A problem with one channel's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelConfigError {
    /// The dotted key at fault: `channels.ops.to`.
    pub key: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ChannelConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.key, self.message)
    }
}

impl std::error::Error for ChannelConfigError {}

/// A channel whose table names an unset `${VAR}`: kept, and failing only
/// when used (its deliveries, its inbound bot), saying which variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnavailableChannel {
    /// Its `type`.
    pub kind: &'static str,
    /// Whether it also receives messages (`inbound = true`).
    pub inbound: bool,
    /// The strings naming unset variables, by key.
    pub unset: Vec<UnsetVariable>,
}

/// The `[channels]` table, parsed.
#[derive(Debug, Default)]
pub struct ParsedChannels {
    /// The channels ready to build, by name.
    pub specs: BTreeMap<String, ChannelSpec>,
    /// The channels naming unset variables, by name.
    pub unavailable: BTreeMap<String, UnavailableChannel>,
}

/// Parses the `[channels]` table (as JSON), expanding `${VAR}` in string
/// values from `env`. Every problem of every channel is reported; a channel
/// whose only problem is an unset variable is [`UnavailableChannel`], not
/// an error (its table is still checked against its type).
pub fn parse_channels(
    table: Option<&Value>,
    env: &(impl cairn_core::text::Vars + ?Sized),
) -> Result<ParsedChannels, Vec<ChannelConfigError>> {
    let mut parsed = ParsedChannels::default();
    let mut errors = Vec::new();
    let Some(table) = table else {
        return Ok(parsed);
    };
    let Some(entries) = table.as_object() else {
        return Err(vec![ChannelConfigError {
            key: "channels".into(),
            message: "expected a table of [channels.NAME] tables".into(),
        }]);
    };
    for (name, value) in entries {
        let key = format!("channels.{name}");
        let mut value = value.clone();
        let mut unset = Vec::new();
        expand_env(&mut value, &key, env, &mut unset);
        if value.get("type").is_none() {
            errors.push(ChannelConfigError {
                key: format!("{key}.type"),
                message:
                    "missing; one of inbox, log, webhook, slack, discord, telegram, ntfy, email, whatsapp"
                        .into(),
            });
            continue;
        }
        match serde_json::from_value::<ChannelSpec>(value) {
            // The unset strings are left as written: the shape is checked,
            // their values are not.
            Ok(spec) if !unset.is_empty() => {
                let inbound = spec.inbound();
                parsed.unavailable.insert(
                    name.clone(),
                    UnavailableChannel {
                        kind: spec.kind(),
                        inbound,
                        unset,
                    },
                );
            }
            Ok(spec) => {
                for (field, message) in spec.problems() {
                    errors.push(ChannelConfigError {
                        key: format!("{key}.{field}"),
                        message,
                    });
                }
                parsed.specs.insert(name.clone(), spec);
            }
            // An unset `type` leaves nothing to check: its variable is the problem.
            Err(_) if unset.iter().any(|u| u.key == format!("{key}.type")) => {
                errors.extend(unset.into_iter().map(|u| ChannelConfigError {
                    message: format!("environment variable {} is not set", u.variable),
                    key: u.key,
                }));
            }
            Err(e) => errors.push(ChannelConfigError {
                key: field_of(&key, &e.to_string()),
                message: e.to_string(),
            }),
        }
    }
    if errors.is_empty() {
        Ok(parsed)
    } else {
        Err(errors)
    }
}

/// The key a serde message is about, when it names a field
/// (`missing field `to``, `unknown field `too``).
fn field_of(key: &str, message: &str) -> String {
    for marker in ["missing field `", "unknown field `"] {
        if let Some(rest) = message.split(marker).nth(1)
            && let Some(field) = rest.split('`').next()
        {
            return format!("{key}.{field}");
        }
    }
    key.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn errors(table: Value, env_pairs: &[(&str, &str)]) -> Vec<String> {
        parse_channels(Some(&table), &env(env_pairs))
            .unwrap_err()
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn debug_of_specs_and_channels_hides_topics_and_header_values() {
        use crate::notify::channels::ntfy::Ntfy;
        use crate::notify::channels::webhook::Webhook;
        let table = json!({
            "hook": {"type": "webhook", "url": "http://127.0.0.1:9/x",
                     "headers": {"X-Team": "team-S3CR", "Authorization": "Bearer S3CR"}},
            "push": {"type": "ntfy", "topic": "topic-S3CR"},
        });
        let specs = parse_channels(Some(&table), &env(&[])).unwrap().specs;
        let shown = format!("{specs:?}");
        assert!(!shown.contains("S3CR"), "{shown}");
        assert!(
            shown.contains("X-Team") && shown.contains("ntfy.sh"),
            "{shown}"
        );
        let http = cairn_llm::tls::client().unwrap();
        let built = [
            match &specs["push"] {
                ChannelSpec::Ntfy(s) => format!("{:?}", Ntfy::new(s, http.clone()).unwrap()),
                other => panic!("{other:?}"),
            },
            match &specs["hook"] {
                ChannelSpec::Webhook(s) => format!("{:?}", Webhook::new(s, http).unwrap()),
                other => panic!("{other:?}"),
            },
        ];
        for shown in built {
            assert!(!shown.contains("S3CR"), "{shown}");
        }
    }

    #[test]
    fn the_chat_apps_need_their_tokens_only_to_receive() {
        let table = json!({
            "team": {"type": "slack", "bot_token": "xoxb-1", "app_token": "xapp-1",
                     "inbound": true, "allowed_users": ["U0123ABCD"]},
            "guild": {"type": "discord", "webhook_url": "https://discord.example.org/api/webhooks/1/x",
                      "allowed_users": [123456789012345678_u64]},
            "bots": {"type": "discord", "bot_token": "B", "inbound": true,
                     "allowed_users": ["123456789012345678"]},
            "wa": {"type": "whatsapp", "access_token": "T", "phone_number_id": "109876",
                   "verify_token": "V", "app_secret": "S", "inbound": true,
                   "allowed_users": ["15551234567"]},
            "hook": {"type": "slack", "webhook_url": "https://hooks.example.org/T/B/x"},
        });
        let parsed = parse_channels(Some(&table), &env(&[])).unwrap();
        let inbound: Vec<&str> = parsed
            .specs
            .iter()
            .filter(|(_, s)| s.inbound())
            .map(|(n, _)| n.as_str())
            .collect();
        assert_eq!(inbound, ["bots", "team", "wa"]);
        match &parsed.specs["guild"] {
            ChannelSpec::Discord(d) => {
                assert_eq!(d.allowed_users, ["123456789012345678"]);
                assert_eq!(d.api_url, "https://discord.com/api/v10");
            }
            other => panic!("{other:?}"),
        }

        let bad = errors(
            json!({
                "team": {"type": "slack", "bot_token": "xoxb-1", "inbound": true,
                         "allowed_users": ["alice"]},
                "guild": {"type": "discord"},
                "bots": {"type": "discord", "webhook_url": "https://discord.example.org/api/webhooks/1/x",
                         "inbound": true, "allowed_users": ["alice"]},
                "wa": {"type": "whatsapp", "access_token": "T", "phone_number_id": "+1 555"},
            }),
            &[],
        );
        assert_eq!(
            bad,
            [
                "channels.bots.bot_token: is needed with inbound = true",
                "channels.bots.allowed_users: \"alice\" is not a Discord user id (a number)",
                "channels.guild.webhook_url: needed to post notifications (or set inbound = true and the bot's tokens)",
                "channels.team.app_token: is needed with inbound = true",
                "channels.team.allowed_users: \"alice\" is not a Slack user id (U0123ABCD)",
                "channels.wa.inbound: a whatsapp channel only answers chats: set inbound = true",
                "channels.wa.verify_token: is needed with inbound = true",
                "channels.wa.app_secret: is needed with inbound = true",
                "channels.wa.phone_number_id: must be the number's id (digits)",
            ]
        );
    }

    #[test]
    fn every_type_parses_and_variables_expand() {
        let table = json!({
            "box": {"type": "inbox"},
            "journal": {"type": "log"},
            "hook": {"type": "webhook", "url": "http://127.0.0.1:9/x", "secret": "${HOOK_SECRET}",
                     "headers": {"X-Team": "ops"}},
            "team": {"type": "slack", "webhook_url": "https://hooks.example.org/T/B/x"},
            "guild": {"type": "discord", "webhook_url": "https://discord.example.org/api/webhooks/1/x"},
            "phone": {"type": "telegram", "bot_token": "${TG_TOKEN}", "chat_id": "42"},
            "push": {"type": "ntfy", "topic": "cairn-alerts"},
            "mail": {"type": "email", "host": "smtp.example.org", "from": "cairn <c@example.org>",
                     "to": ["me@example.org"], "username": "c", "password": "${SMTP_PASSWORD}"},
        });
        let specs = parse_channels(
            Some(&table),
            &env(&[
                ("HOOK_SECRET", "s3"),
                ("TG_TOKEN", "123:abc"),
                ("SMTP_PASSWORD", "pw"),
            ]),
        )
        .unwrap()
        .specs;
        let kinds: Vec<&str> = specs.values().map(ChannelSpec::kind).collect();
        // By name: box, guild, hook, journal, mail, phone, push, team.
        assert_eq!(
            kinds,
            [
                "inbox", "discord", "webhook", "log", "email", "telegram", "ntfy", "slack"
            ]
        );
        match &specs["phone"] {
            ChannelSpec::Telegram(t) => {
                assert_eq!(t.bot_token.expose_secret(), "123:abc");
                assert_eq!(t.api_url, "https://api.telegram.org");
            }
            other => panic!("{other:?}"),
        }
        assert!(
            !format!("{:?}", specs["mail"]).contains("pw"),
            "secrets stay out of Debug"
        );
    }

    #[test]
    fn problems_name_the_key() {
        let table = json!({
            "mail": {"type": "email", "host": "smtp.example.org", "from": "c@example.org"},
            "phone": {"type": "telegram", "bot_token": "${TG_TOKEN}", "chat_id": "42"},
            "hook": {"type": "webhook", "url": "ftp://example.org"},
            "typo": {"type": "webhook", "url": "http://127.0.0.1/", "secrett": "x"},
            "what": {"url": "http://127.0.0.1/"},
            "odd": {"type": "pager"},
        });
        let mut got = errors(table, &[]);
        got.sort();
        let expected = [
            "channels.hook.url: expected an http(s) URL, got scheme \"ftp\"",
            "channels.mail.to: missing field `to`",
            "channels.odd: unknown variant `pager`, expected one of `inbox`, `log`, `webhook`, `slack`, `discord`, `telegram`, `ntfy`, `email`, `whatsapp`",
            "channels.typo.secrett: unknown field `secrett`, expected one of `url`, `headers`, `secret`",
            "channels.what.type: missing; one of inbox, log, webhook, slack, discord, telegram, ntfy, email, whatsapp",
        ];
        assert_eq!(got, expected);
    }

    #[test]
    fn a_channel_naming_an_unset_variable_is_unavailable_and_the_others_parse() {
        let table = json!({
            "phone": {"type": "telegram", "bot_token": "${TG_TOKEN}", "chat_id": "42", "inbound": true},
            "hook": {"type": "webhook", "url": "http://127.0.0.1/", "secret": "${NOPE}"},
            "box": {"type": "inbox"},
        });
        let parsed = parse_channels(Some(&table), &env(&[])).unwrap();
        assert_eq!(parsed.specs.keys().collect::<Vec<_>>(), ["box"]);
        let phone = &parsed.unavailable["phone"];
        assert_eq!((phone.kind, phone.inbound), ("telegram", true));
        assert_eq!(
            phone
                .unset
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            ["channels.phone.bot_token: environment variable TG_TOKEN is not set"]
        );
        assert!(!parsed.unavailable["hook"].inbound);
        // Its shape is still checked; an unset `type` leaves only the variable to name.
        let got = errors(
            json!({"phone": {"type": "telegram", "bot_token": "${T}", "chat_id": "1", "nope": 1},
                   "odd": {"type": "${KIND}"}}),
            &[],
        );
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(
            got[0].starts_with("channels.odd.type: environment variable KIND"),
            "{got:?}"
        );
        assert!(
            got[1].starts_with("channels.phone.nope: unknown field"),
            "{got:?}"
        );
    }

    #[test]
    fn addresses_are_recognised() {
        assert!(looks_like_address("Cairn <c@example.org>"));
        assert!(!looks_like_address("c at example.org"));
    }
}
