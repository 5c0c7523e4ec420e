//! The configuration reference (`docs/configuration.md`), written from the
//! registry so it cannot drift: `cairn config reference` prints it, and a
//! test fails when the committed file differs.

use std::fmt::Write as _;

use super::registry::{DefaultValue, Kind, SECTIONS, SETTINGS, SettingDef};
use super::reloadable::{RELOADABLE, RESTART_TABLES, reloadable};

/// What each free-form table holds (its shape belongs to the crate that reads it).
const SECTION_HELP: &[(&str, &str, &str)] = &[
    (
        "llm.prices",
        "[llm.prices.\"MODEL\"]",
        "prices of a model the built-in table lacks, in micro-dollars per million tokens: \
         `input_micros_per_mtok`, `output_micros_per_mtok`",
    ),
    (
        "llm.fallbacks",
        "[[llm.fallbacks]]",
        "providers tried in order when the main one fails: `provider`, `model`, and optionally \
         `base_url` and `api_key` (a secret; `\"${VAR}\"` reads it from the environment)",
    ),
    (
        "tools",
        "[tools] / [tools.policy]",
        "the agent's tools: `[tools.policy]` has `autonomy` (`readonly`, `supervised`, `full`), \
         `allow` and `deny` lists of tool names or globs; `[tools.http]` holds the network rules \
         of `http_request`, `web_fetch` and image URLs (`timeout`, `max_response_bytes`, \
         `max_request_bytes`, `block_private_networks`, `allowed_hosts`, \
         `allowed_private_networks` as ranges like `192.168.1.0/24`, `max_redirects`, \
         `user_agent`) and `[[tools.http.credentials]]`, credentials cairn adds to one host's \
         requests (`host`, a name or `name:port`; `header` or `query`, the name that carries it; \
         `value`, a secret, `\"${VAR}\"` read from the environment; see docs/leaks.md); \
         `[tools.web_search]` offers `web_search` through `provider` `searxng` \
         (`url` of the instance), `brave` or `tavily` (`api_key`, a secret; `\"${VAR}\"` reads it \
         from the environment), with `base_url`, `count` and `timeout`; `[tools.browser]` \
         drives the system's Chromium for the `browser_*` tools, offered when one is found \
         (`executable`, default the first of `chromium`, `chromium-browser`, `google-chrome` \
         on PATH; `idle_secs` 300, `max_tabs` 4, `timeout_secs` 30, `max_chars` 20000, \
         `auto_approve_hosts` whose pages are clicked and typed into without asking, \
         `downloads` false), its pages under `[tools.http]`'s rules; other tables configure \
         single tools",
    ),
    (
        "agents",
        "[[agents]]",
        "several agents in one daemon, each with `id` (letters, digits, `-`, `_`; `main` always \
         exists and takes every chat no binding names), `name`, `workspace` (relative to \
         $CAIRN_HOME; default `agents/ID`; never inside another agent's), `model` (on the main \
         provider), `autonomy` (never more than `tools.policy.autonomy`), `tools` (`allow`: \
         patterns that run without asking; `deny`: patterns it never has, besides the global \
         ones; the tools that act for main, such as routines, jobs and memory, stay main's), \
         `daily_budget_cents` (its share of the daily budget, a whole number of cents no more \
         than `cost.daily_budget_cents`: its calls are refused once its spend today reaches it; \
         every agent's spend is its own line in `cairn cost`) and `[[agents.bindings]]` \
         (`channel`, and optionally one `chat` or one `user` of it; the most specific binding \
         wins: a person, then a chat, then the channel)",
    ),
    (
        "routing",
        "[[routing.rules]] / [routing.models.HINT]",
        "model routing by the class of the person's message: rules are tried by descending \
         `priority`, each with a `hint`, `min_length`, `max_length`, `keywords` (whole words, any \
         case) and `patterns` (regular expressions, case-sensitive); the first match gives its \
         hint, and `[routing.models.HINT]` names the `model` that answers and optionally its \
         `provider` (`llm.provider` or a `[[llm.fallbacks]]` one)",
    ),
    (
        "channels",
        "[channels.NAME]",
        "an output channel for notifications, by `type`: `inbox`, `log`, `webhook` (`url`, \
         `secret`), `slack` (`webhook_url`; with `inbound = true`, `bot_token`, `app_token`, \
         `allowed_users` and `api_url`, it receives messages over Socket Mode), `discord` \
         (`webhook_url`; with `inbound = true`, `bot_token`, `allowed_users` and `api_url`, it \
         receives messages over the gateway), `telegram` (`bot_token`, `chat_id`, \
         `api_url`; with `inbound = true` it also receives messages, from the Telegram user ids in \
         `allowed_users` and those added by `cairn telegram allow` or `/pair`), \
         `ntfy` (`server`, `topic`), `email` (`host`, `from`, `to`, …), `whatsapp` (receives \
         only: `access_token`, `phone_number_id`, `verify_token`, `app_secret`, `inbound = true`, \
         `allowed_users`, `api_url`; Meta's webhooks come to the gateway's `/whatsapp`). Any \
         string may be `\"${VAR}\"`, read from the environment at start-up; a reload stops a \
         changed inbound channel and starts it with its new settings, keeping its polling lease \
         and the next update it asks for",
    ),
    (
        "mcp.servers",
        "[[mcp.servers]]",
        "an MCP server whose tools the agent gets as `mcp__NAME__TOOL`: `name` (letters, digits, \
         `-`, `_`; at most 24), then either `command` (a stdio server cairn starts and supervises) \
         with `args`, `env` (variables set for it on top of a clean environment), `cwd` (default: \
         its own folder `$CAIRN_HOME/mcp/NAME`; never inside the workspace) and `sandbox` (`false`; `true` confines it like the shell tool), or `url` \
         (streamable HTTP) with `headers`; `start` (`\"lazy\"`: at the first call of its tools, or \
         `\"startup\"`), `enabled` (`true`), `allow` and `deny` (its tool names or globs that run \
         without asking, or are never offered), `risk` of its tools (`\"write\"` by default, so \
         they ask; `\"readonly\"` or `\"dangerous\"`; a tool's `destructiveHint` raises it, no \
         hint lowers it), `timeout_secs` (`60`: a call with neither an answer nor progress for \
         this long is cancelled), `max_call_secs` (`600`), `connect_timeout_secs` (`30`), \
         `max_output_chars` (`30000`) and `max_message_bytes` (`8388608`). Any string may be \
         `\"${VAR}\"`; `config show` hides the values of `env` and `headers`",
    ),
    (
        "hooks",
        "[[hooks]]",
        "a command run at an agent event, with a JSON description of the event on stdin: \
         `event` (`before_tool`, `after_tool`, `on_message`, `on_message_sending`, \
         `before_llm_call`, `on_session_end`, `on_routine_run`), optional `matcher` (a regex on \
         the tool, channel, model or routine name; none for `on_message_sending`), `command` \
         (run by `/bin/sh -c` in the shell sandbox) and `timeout_secs` (default 10). A \
         `before_tool` hook exiting 2 blocks the call (its stderr is the result the model sees) \
         and may print a JSON object of replacement arguments when it exits 0. An `on_message` \
         (inbound) or `on_message_sending` (answer) hook exiting 2 drops the text, and may print \
         `{\"text\": \"…\"}` to replace it when it exits 0; with an `on_message_sending` hook \
         answers are not streamed. A `before_llm_call` hook exiting 2 stops the turn. These \
         hooks fail closed: one that cannot start, exits otherwise, is killed or times out \
         blocks or drops what it saw too. A hook whose command names a \
         file in the workspace never starts (the agent can write there)",
    ),
];

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Bool => "boolean",
        Kind::UInt => "integer",
        Kind::Text => "string",
        Kind::Zone => "time zone",
        Kind::List => "list of strings",
    }
}

fn default_text(def: &SettingDef) -> String {
    match def.default {
        DefaultValue::Unset => "unset".to_string(),
        DefaultValue::Bool(b) => format!("`{b}`"),
        DefaultValue::UInt(n) => format!("`{n}`"),
        DefaultValue::Text(s) => format!("`\"{s}\"`"),
        DefaultValue::UnderHome(rel) => format!("`$CAIRN_HOME/{rel}`"),
        DefaultValue::SqliteUnderHome(rel) => format!("`sqlite://$CAIRN_HOME/{rel}`"),
        DefaultValue::SystemZone => "this machine's zone (UTC if it cannot be told)".to_string(),
        DefaultValue::List(items) => {
            let quoted: Vec<String> = items.iter().map(|i| format!("\"{i}\"")).collect();
            format!("`[{}]`", quoted.join(", "))
        }
    }
}

/// Text safe inside a Markdown table cell.
fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

/// The whole reference, as Markdown.
pub fn markdown() -> String {
    let mut out = String::new();
    out.push_str(
        "# Configuration reference\n\n\
         <!-- Generated by `cairn config reference` from crates/cairn-core/src/config/registry.rs.\n     \
         Do not edit by hand: a test fails when this file differs from what the command prints. -->\n\n\
         cairn reads `$CAIRN_HOME/config.toml` (`~/.cairn/config.toml` by default), then the\n\
         environment: a value in the file replaces the default, and an environment variable\n\
         replaces both (the first variable listed wins). Unknown keys and wrong types are errors\n\
         that name the file, line and key. `cairn config show` prints every value in force and\n\
         where it came from; `cairn init` writes a first file.\n\n\
         A key `section.name` is written `name = …` under `[section]`. Secret settings are never\n\
         shown; in the file they may be written `\"${VAR}\"`, which reads the value from the\n\
         environment variable `VAR` once, when cairn starts.\n\n\
         A `${VAR}` whose variable is not set makes only the value that names it unavailable, not\n\
         the whole file: every command and component that does not need that value runs, and the\n\
         one that does fails with an error naming the file, line, key and variable (`cairn chat`\n\
         without its `llm.api_key`, a channel's deliveries without its token, which then wait in\n\
         the inbox with that reason, an MCP server without its `env`). `cairn doctor` and the\n\
         daemon's start-up log warn of each one; `cairn config show` marks it unavailable (a\n\
         `web_search` whose `api_key` is unavailable answers each search with that error). A\n\
         variable whose name or value is not valid UTF-8 is left out, with a warning naming it.\n",
    );
    // Sections in the order they first appear, each with all its settings.
    let section_of = |def: &SettingDef| def.key.split('.').next().unwrap_or(def.key);
    let mut sections: Vec<&str> = Vec::new();
    for def in SETTINGS {
        if !sections.contains(&section_of(def)) {
            sections.push(section_of(def));
        }
    }
    for head in sections {
        let _ = write!(
            out,
            "\n## `[{head}]`\n\n\
             | key | environment | type | default | secret | description |\n\
             |---|---|---|---|---|---|\n"
        );
        for def in SETTINGS.iter().filter(|d| section_of(d) == head) {
            let env: Vec<String> = def.env.iter().map(|v| format!("`{v}`")).collect();
            let _ = writeln!(
                out,
                "| `{}` | {} | {} | {} | {} | {} |",
                def.key,
                env.join(", "),
                kind_name(def.kind),
                default_text(def),
                if def.secret { "yes" } else { "no" },
                cell(def.help),
            );
        }
    }
    out.push_str(
        "\n## Free-form tables\n\n\
         These tables are passed whole to the part of cairn that reads them.\n\n",
    );
    for name in SECTIONS {
        if let Some((_, title, help)) = SECTION_HELP.iter().find(|(n, _, _)| n == name) {
            let _ = writeln!(out, "- `{title}`: {help}.");
        }
    }
    reload_section(&mut out);
    out
}

/// What a running daemon applies on a reload, and every key that needs a
/// restart, by name.
fn reload_section(out: &mut String) {
    let quoted = |keys: &[&str]| -> String {
        let keys: Vec<String> = keys.iter().map(|k| format!("`{k}`")).collect();
        keys.join(", ")
    };
    out.push_str(
        "\n## Reloading\n\n\
         A running daemon reads config.toml again on SIGHUP and when the file changes. A value\n\
         it cannot use (a bad channel, an unknown provider, a policy that would run `shell`\n\
         unconfined) is refused with its key and the reason in the log, and the old value stays.\n\
         Chat turns, jobs and routine runs in progress finish with the provider, model, tools and\n\
         policy they started with; cost limits apply to the next LLM call, even within a turn. A\n\
         daemon started without an LLM needs a restart to get one. An inbound channel (a Telegram\n\
         bot with `inbound = true`) whose table changed is stopped and started again with the new\n\
         values (its address, token, allowed users); turns it was answering are cut short. The log\n\
         says which keys are now in force and which need a restart; nothing that needs a restart\n\
         is reported in force.\n\n",
    );
    let _ = writeln!(
        out,
        "Applied at once (a table or prefix stands for everything under it): {}.\n",
        quoted(RELOADABLE)
    );
    let mut restart: Vec<&str> = SETTINGS
        .iter()
        .map(|d| d.key)
        .filter(|k| !reloadable(k))
        .collect();
    restart.extend(
        SECTIONS.iter().copied().filter(|s| {
            !reloadable(s) && !RELOADABLE.iter().any(|r| r.starts_with(&format!("{s}.")))
        }),
    );
    restart.extend(RESTART_TABLES);
    let _ = writeln!(out, "Need a restart of the daemon: {}.", quoted(&restart));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_free_form_table_is_described() {
        for name in SECTIONS {
            assert!(
                SECTION_HELP.iter().any(|(n, _, _)| n == name),
                "add a line for [{name}] to SECTION_HELP"
            );
        }
    }

    #[test]
    fn every_key_is_reloadable_or_named_as_needing_a_restart() {
        let text = markdown();
        let (_, restart) = text
            .split_once("Need a restart of the daemon:")
            .unwrap_or_default();
        for def in SETTINGS {
            let named = restart.contains(&format!("`{}`", def.key));
            assert_ne!(reloadable(def.key), named, "{}", def.key);
        }
        for key in [
            "database.url",
            "gateway.host",
            "gateway.port",
            "workspace.path",
            "tools.limits",
        ] {
            assert!(restart.contains(&format!("`{key}`")), "{key}");
        }
        assert!(!restart.contains("`tools.policy`"));
    }

    #[test]
    fn every_setting_has_its_row() {
        let text = markdown();
        for def in SETTINGS {
            assert!(text.contains(&format!("| `{}` |", def.key)), "{}", def.key);
        }
    }

    #[test]
    #[expect(clippy::disallowed_methods, reason = "a test reading a committed file")]
    fn the_committed_reference_is_current() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/configuration.md");
        let committed = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            committed == markdown(),
            "docs/configuration.md is out of date: run `cargo run -- config reference > docs/configuration.md`"
        );
    }
}
