//! `cairn init`: the first run. Asks (or takes from flags) the LLM provider,
//! model and where its key comes from, the time zone, a first notification
//! channel and whether to install the service; tests the LLM and the
//! channel with the configuration it is about to write; writes config.toml
//! (0600); the key goes into the vault (`${secret:LLM_API_KEY}`) unless
//! `--api-key-env VAR` names a variable to read it from (`${VAR}`); then
//! runs `doctor`.

mod ask;
mod plan;

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use cairn_core::chat::ChatMessage;
use cairn_core::config::Config;
use cairn_core::notification::{NewNotification, Notification};
use cairn_llm::ChatRequest;
use chrono::Utc;
use clap::Args;

use self::plan::{Channel, Key, Plan, TELEGRAM_TOKEN_ENV};
use crate::exit::BadInput;
use crate::{home, settings, wiring};

/// How long the LLM test may take.
const LLM_TEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Arguments of `cairn init`.
#[derive(Debug, Args)]
pub struct InitArgs {
    /// Ask nothing: take every answer from the flags and the defaults.
    #[arg(long)]
    pub yes: bool,
    /// openai, anthropic, openrouter, ollama, or compatible (any
    /// OpenAI-compatible server, with --base-url).
    #[arg(long)]
    pub provider: Option<String>,
    /// The API's base URL (required for compatible; default: the provider's own).
    #[arg(long)]
    pub base_url: Option<String>,
    /// The model (default: a small one of the provider's).
    #[arg(long)]
    pub model: Option<String>,
    /// The environment variable holding the API key (default:
    /// OPENAI_API_KEY, ANTHROPIC_API_KEY or OPENROUTER_API_KEY).
    #[arg(long, value_name = "VAR")]
    pub api_key_env: Option<String>,
    /// Store the key in the vault even with --api-key-env (the default without it).
    #[arg(long)]
    pub store_key: bool,
    /// Your IANA time zone (default: this machine's).
    #[arg(long)]
    pub timezone: Option<String>,
    /// The first notification channel: inbox, webhook:URL, ntfy:URL,
    /// slack:VAR, discord:VAR or telegram:CHAT_ID (token in TELEGRAM_BOT_TOKEN).
    #[arg(long)]
    pub channel: Option<String>,
    /// Install the systemd user service afterwards.
    #[arg(long)]
    pub service: bool,
    /// Write without testing the LLM and the channel first.
    #[arg(long)]
    pub skip_checks: bool,
    /// Replace an existing config.toml.
    #[arg(long)]
    pub force: bool,
}

/// Runs `cairn init`.
pub fn run(args: &InitArgs, as_json: bool) -> anyhow::Result<ExitCode> {
    let mut input = settings::gather_input()?;
    let path = settings::config_path(&input.home);
    if !args.force && input.file.is_some() {
        return Err(BadInput(format!(
            "{} exists; `cairn config show` prints it, and `cairn init --force` replaces it",
            path.display()
        ))
        .into());
    }
    // Progress goes where it does not mix with doctor's JSON.
    let say = |line: &str| {
        if as_json {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
    };
    let rt = super::runtime()?;
    let reader = (!args.yes).then(|| super::chat::LineReader::new(None));
    let asker = ask::Asker {
        reader: reader.as_ref(),
    };
    let plan = rt.block_on(ask::plan(
        args,
        &asker,
        &input.env,
        input.system_zone.as_deref(),
    ))?;
    let text = plan::render(&plan, &Utc::now().format("%Y-%m-%d").to_string());
    if args.skip_checks {
        // Check the text alone: variables that are not set yet stand in.
        for var in referenced_vars(&plan) {
            input.env.entry(var).or_insert_with(|| "unset".to_string());
        }
    }
    input.file = Some((path.clone(), text.clone()));
    if let Key::Stored { value, .. } = &plan.key {
        input
            .secrets
            .insert(plan::LLM_KEY_SECRET.to_string(), value.clone());
    }
    let config = Config::load(&input).map_err(|errors| {
        BadInput(format!(
            "the configuration would not load, nothing written:\n{errors}"
        ))
    })?;
    if !args.skip_checks {
        let (llm, channel) = rt.block_on(async {
            let llm = check_llm(&config).await;
            let channel = check_channel(&config, &plan.channel).await;
            (llm, channel)
        });
        say(&format!("llm      {}", outcome(&llm)));
        say(&format!("channel  {}", outcome(&channel)));
        if llm.is_err() || channel.is_err() {
            let write_anyway = match &reader {
                Some(reader) if reader.interactive() => rt.block_on(confirm(reader))?,
                _ => false,
            };
            if !write_anyway {
                anyhow::bail!(
                    "a check failed, so {} was not written (fix it and run cairn init again, or add --skip-checks)",
                    path.display()
                );
            }
        }
    }
    home::create_dir(&input.home)?;
    home::write(&path, text.as_bytes(), args.force)?;
    say(&format!("wrote {} (mode 0600)", path.display()));
    if let Key::Stored { value, .. } = &plan.key {
        rt.block_on(store_key(&config, value))?;
        say(&format!(
            "stored the key in the vault as {} (`cairn secret list`)",
            plan::LLM_KEY_SECRET
        ));
    }
    let mut code = ExitCode::SUCCESS;
    if plan.service {
        // The real environment: `input.env` may hold stand-ins (--skip-checks).
        match rt.block_on(crate::daemon::service::install(
            &input.home,
            &crate::environment::get(),
            config.daemon.shutdown_deadline,
            args.force,
        )) {
            Ok(message) => say(&message),
            Err(e) => {
                eprintln!("service: {e:#}");
                code = ExitCode::from(1);
            }
        }
    }
    drop(rt);
    let doctor = super::doctor::run(as_json)?;
    if !as_json {
        println!(
            "\nNext: `cairn daemon` runs it in the foreground{}; `cairn chat` talks to it.",
            if plan.service {
                ", or `systemctl --user enable --now cairn`"
            } else {
                " (`cairn service install` makes it a systemd user service)"
            }
        );
    }
    Ok(if doctor == ExitCode::SUCCESS {
        code
    } else {
        doctor
    })
}

/// Stores the LLM's key in the vault of `config`'s database.
async fn store_key(config: &Config, value: &secrecy::SecretString) -> anyhow::Result<()> {
    use secrecy::ExposeSecret;
    let (store, _) = cairn_store::Store::open(config.database_url.expose_secret())
        .await
        .context("cannot open the database to store the key in the vault")?;
    let source = crate::vault::KeySource::of(config);
    let stored = async {
        let key = crate::vault::open_key(&source, &store, true)
            .await?
            .context("no vault key could be made")?;
        store
            .vault_set(&key, plan::LLM_KEY_SECRET, value, Utc::now())
            .await?;
        anyhow::Ok(())
    }
    .await;
    store.close().await;
    stored
}

/// The variables the written file will read.
fn referenced_vars(plan: &Plan) -> Vec<String> {
    let mut vars = Vec::new();
    if let Key::Env(var) = &plan.key {
        vars.push(var.clone());
    }
    match &plan.channel {
        Channel::Slack(var) | Channel::Discord(var) => vars.push(var.clone()),
        Channel::Telegram(_) => vars.push(TELEGRAM_TOKEN_ENV.to_string()),
        _ => {}
    }
    vars
}

fn outcome(result: &Result<String, String>) -> String {
    match result {
        Ok(message) => format!("ok    {message}"),
        Err(message) => format!("FAIL  {message}"),
    }
}

/// Asks whether to write a configuration whose check failed.
async fn confirm(reader: &super::chat::LineReader) -> anyhow::Result<bool> {
    match reader.read("write config.toml anyway? [y/N]: ").await {
        super::chat::Line::Text(t) => Ok(matches!(t.trim(), "y" | "Y" | "yes")),
        _ => Ok(false),
    }
}

/// One short completion through the configured provider.
async fn check_llm(config: &Config) -> Result<String, String> {
    let providers = wiring::providers(config).map_err(|e| format!("{e:#}"))?;
    let mut request = ChatRequest::new(vec![ChatMessage::user(
        "This is a connection test. Reply with the single word: ok",
    )]);
    request.max_tokens = Some(16);
    let answer = tokio::time::timeout(LLM_TEST_TIMEOUT, providers.main.complete(&request))
        .await
        .map_err(|_| format!("no answer within {}s", LLM_TEST_TIMEOUT.as_secs()))?
        .map_err(|e| e.to_string())?;
    let reply: String = answer.text.trim().chars().take(40).collect();
    Ok(format!("{} answered \"{reply}\"", answer.model))
}

/// A test notification straight through the channel (nothing is recorded:
/// the database is not touched before the file is written).
async fn check_channel(config: &Config, channel: &Channel) -> Result<String, String> {
    if *channel == Channel::Inbox {
        return Ok("inbox: notifications wait in `cairn inbox` and your chats".to_string());
    }
    let set = wiring::channel_set(config).map_err(|e| format!("{e:#}"))?;
    let name = channel.name();
    let target = set
        .get(name)
        .with_context(|| format!("no channel named {name}"))
        .map_err(|e| e.to_string())?;
    let test = Notification::pending(
        NewNotification {
            user_id: config.user.id.clone(),
            channel: Some(name.to_string()),
            title: "cairn is set up".to_string(),
            body: "This test notification comes from `cairn init`.".to_string(),
            priority: Default::default(),
            tags: vec!["test".to_string()],
            data: None,
            source: "cli:init".to_string(),
        },
        uuid::Uuid::new_v4(),
        name.to_string(),
        Utc::now(),
    );
    target
        .deliver(&test)
        .await
        .map(|receipt| format!("{name}: delivered ({})", receipt.detail))
        .map_err(|e| format!("{name}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checked_text_knows_the_variables_it_reads() {
        let plan = Plan {
            provider: plan::Provider::OpenAi,
            base_url: None,
            model: "m".into(),
            key: Key::Env("K".into()),
            timezone: "UTC".into(),
            channel: Channel::Slack("S".into()),
            service: false,
        };
        assert_eq!(referenced_vars(&plan), ["K", "S"]);
    }
}
