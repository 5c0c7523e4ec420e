//! The answers of `cairn init`: from the flags, and (without `--yes`) from
//! questions, each defaulting to its flag's value. On a terminal a bad
//! answer is asked again; from piped lines it is an error.

use std::collections::BTreeMap;

use anyhow::bail;

use super::InitArgs;
use super::plan::{Channel, Key, LLM_KEY_SECRET, Plan, Provider, is_var_name};
use crate::commands::chat::{Line, LineReader};
use crate::exit::BadInput;

/// Asks the questions, or takes the flags alone when `reader` is `None`.
pub struct Asker<'a> {
    /// Where answers come from; `None` with `--yes`.
    pub reader: Option<&'a LineReader>,
}

impl Asker<'_> {
    /// Whether a bad answer can be asked again (a person at a terminal).
    fn interactive(&self) -> bool {
        self.reader.is_some_and(LineReader::interactive)
    }

    /// One answer: the typed text (an empty line takes `default`), parsed.
    async fn ask<T>(
        &self,
        question: &str,
        default: Option<&str>,
        parse: impl Fn(&str) -> Result<T, String>,
    ) -> anyhow::Result<T> {
        let Some(reader) = self.reader else {
            return parse(default.unwrap_or_default()).map_err(|e| BadInput(e).into());
        };
        let prompt = match default {
            Some(d) if !d.is_empty() => format!("{question} [{d}]: "),
            _ => format!("{question}: "),
        };
        loop {
            let typed = match reader.read(&prompt).await {
                Line::Text(text) => text,
                Line::Cancelled | Line::End => {
                    bail!(BadInput(
                        "cairn init stopped before every question was answered; nothing written"
                            .to_string()
                    ))
                }
            };
            let text = match typed.trim() {
                "" => default.unwrap_or_default(),
                t => t,
            };
            match parse(text) {
                Ok(value) => return Ok(value),
                Err(e) if reader.interactive() => eprintln!("  {e}"),
                Err(e) => bail!(BadInput(e)),
            }
        }
    }
}

fn required(what: &'static str) -> impl Fn(&str) -> Result<String, String> {
    move |text: &str| {
        if text.trim().is_empty() {
            Err(format!("{what} is required"))
        } else {
            Ok(text.trim().to_string())
        }
    }
}

fn url(text: &str) -> Result<String, String> {
    let text = text.trim();
    if text.starts_with("http://") || text.starts_with("https://") {
        Ok(text.trim_end_matches('/').to_string())
    } else {
        Err(format!("\"{text}\" is not an http(s) URL"))
    }
}

fn var_name(text: &str) -> Result<String, String> {
    if is_var_name(text.trim()) {
        Ok(text.trim().to_string())
    } else {
        Err(format!(
            "\"{text}\" is not an environment variable name (letters, digits, _)"
        ))
    }
}

fn zone(text: &str) -> Result<String, String> {
    text.trim()
        .parse::<chrono_tz::Tz>()
        .map(|z| z.name().to_string())
        .map_err(|_| {
            format!("unknown time zone \"{text}\"; give an IANA name such as Europe/Paris")
        })
}

fn yes_no(text: &str) -> Result<bool, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" | "true" => Ok(true),
        "n" | "no" | "false" | "" => Ok(false),
        other => Err(format!("answer y or n, not \"{other}\"")),
    }
}

/// Every answer, checked.
pub async fn plan(
    args: &InitArgs,
    asker: &Asker<'_>,
    env: &BTreeMap<String, String>,
    system_zone: Option<&str>,
) -> anyhow::Result<Plan> {
    let provider = asker
        .ask(
            &format!("LLM provider ({})", Provider::NAMES),
            Some(args.provider.as_deref().unwrap_or("openai")),
            Provider::parse,
        )
        .await?;
    let base_url = match provider {
        Provider::Compatible => Some(
            asker
                .ask(
                    "Base URL of the OpenAI-compatible API (up to /v1)",
                    args.base_url.as_deref(),
                    url,
                )
                .await?,
        ),
        Provider::Ollama => {
            let default = args
                .base_url
                .as_deref()
                .unwrap_or("http://localhost:11434/v1");
            Some(asker.ask("Ollama's URL", Some(default), url).await?)
        }
        _ => args
            .base_url
            .as_deref()
            .map(url)
            .transpose()
            .map_err(BadInput)?,
    };
    let model_default = args.model.as_deref().or(provider.default_model());
    let model = asker
        .ask("Model", model_default, required("a model name"))
        .await?;
    let key = key(args, asker, provider, env).await?;
    let zone_default = args.timezone.as_deref().or(system_zone).unwrap_or("UTC");
    let timezone = asker
        .ask("Your time zone", Some(zone_default), zone)
        .await?;
    let channel = asker
        .ask(
            &format!("First notification channel ({})", Channel::FORMS),
            Some(args.channel.as_deref().unwrap_or("inbox")),
            Channel::parse,
        )
        .await?;
    let service = asker
        .ask(
            "Install the systemd user service (starts `cairn daemon` at login)? y/n",
            Some(if args.service { "y" } else { "n" }),
            yes_no,
        )
        .await?;
    Ok(Plan {
        provider,
        base_url,
        model,
        key,
        timezone,
        channel,
        service,
    })
}

/// Where the key comes from: a variable (`${VAR}` in the file) or, asked
/// for, the variable's value stored in the file.
async fn key(
    args: &InitArgs,
    asker: &Asker<'_>,
    provider: Provider,
    env: &BTreeMap<String, String>,
) -> anyhow::Result<Key> {
    let default_var = args.api_key_env.as_deref().or(provider.default_key_env());
    // The vault by default: the CLI then works without the variable
    // exported. `--api-key-env VAR` (without --store-key) keeps `${VAR}`.
    let default = if args.api_key_env.is_some() && !args.store_key {
        "env"
    } else {
        "vault"
    };
    let set = |var: &str| env.get(var).filter(|v| !v.is_empty()).cloned();
    loop {
        let var = match (provider, default_var) {
            (Provider::Ollama, None) => return Ok(Key::None),
            (Provider::Compatible, _) => {
                let var = asker
                    .ask(
                        "Environment variable holding the API key (empty: no key)",
                        default_var,
                        |t| {
                            if t.trim().is_empty() {
                                Ok(None)
                            } else {
                                var_name(t).map(Some)
                            }
                        },
                    )
                    .await?;
                match var {
                    Some(var) => var,
                    None => return Ok(Key::None),
                }
            }
            _ => {
                asker
                    .ask(
                        "Environment variable holding the API key",
                        default_var,
                        var_name,
                    )
                    .await?
            }
        };
        let in_vault = asker
            .ask(
                &format!(
                    "Store the key in cairn's vault (encrypted; config.toml says ${{secret:{LLM_KEY_SECRET}}}), \
                     or read it from {var} at every start (config.toml says ${{{var}}})? vault/env"
                ),
                Some(default),
                |t| match t.trim() {
                    "vault" | "store" | "" => Ok(true),
                    "env" => Ok(false),
                    other => Err(format!("answer vault or env, not \"{other}\"")),
                },
            )
            .await?;
        match (in_vault, set(&var)) {
            (true, Some(value)) => {
                return Ok(Key::Stored {
                    var,
                    value: value.into(),
                });
            }
            (false, Some(_)) => return Ok(Key::Env(var)),
            // Written as a reference, checked later (--skip-checks).
            (false, None) if args.skip_checks => return Ok(Key::Env(var)),
            (_, None) => {
                let why = unset(&var, in_vault);
                if !asker.interactive() {
                    bail!(BadInput(why));
                }
                // Every answer so far is kept: the variable is asked again
                // (another name, or this one once exported elsewhere).
                eprintln!("  {why}");
            }
        }
    }
}

/// Why a key variable that is not set stops `cairn init`, and what to do.
fn unset(var: &str, in_vault: bool) -> String {
    let what = if in_vault {
        "so there is no key to store"
    } else {
        "so cairn could not read the key"
    };
    format!(
        "{var} is not set in this shell, {what}: export it (`export {var}=…` in the shell that \
         runs cairn init, and in the one that runs cairn, or store it in the vault), then answer again"
    )
}
