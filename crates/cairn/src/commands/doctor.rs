//! `cairn doctor`: can cairn run here? Each check is ok, warn or fail; any fail exits 1.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use secrecy::ExposeSecret;
use serde::Serialize;

use cairn_agent::nofollow::Tree;
use cairn_core::config::Config;
use cairn_store::Store;

use crate::settings;

pub mod llm;
mod vault;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Warn,
    Fail,
}

#[derive(Debug, Serialize)]
struct Check {
    name: &'static str,
    status: Status,
    message: String,
}

/// One check's result; its message is redacted here, once for every check
/// and both outputs (a URL's query, a password after a flag, …).
fn check(name: &'static str, status: Status, message: impl Into<String>) -> Check {
    Check {
        name,
        status,
        message: cairn_core::config::redact_text(&message.into()),
    }
}

/// Runs every check, prints the results, and exits 1 if any failed; the
/// LLM is not contacted again: this is `init`'s, which has just made a
/// real call to it.
pub fn run(as_json: bool) -> anyhow::Result<ExitCode> {
    run_with(as_json, true)
}

/// [`run`]; `offline` leaves out what needs the network (contacting the LLM).
pub fn run_with(as_json: bool, offline: bool) -> anyhow::Result<ExitCode> {
    let mut checks = Vec::new();
    let config = match settings::load() {
        Ok(config) => {
            let origin = match &config.settings.file {
                Some(path) => format!("{} parsed", path.display()),
                None => "no config file; using defaults and environment".to_string(),
            };
            checks.push(check("config", Status::Ok, origin));
            Some(config)
        }
        Err(err) => {
            checks.push(check("config", Status::Fail, format!("{err:#}")));
            // The vault's key may be why: its check runs on what loads without it.
            checks.push(match settings::load_without_vault() {
                Ok(bare) => crate::commands::runtime()?.block_on(vault::check_vault(&bare)),
                Err(_) => check(
                    "vault",
                    Status::Warn,
                    "not checked: fix the configuration first",
                ),
            });
            None
        }
    };
    match &config {
        Some(config) => {
            checks.push(check_home(config.home()));
            checks.push(check_workspace(&config.workspace));
            let (database, signal) = crate::commands::runtime()?.block_on(check_database(config));
            checks.push(database);
            checks.push(signal);
            checks.push(check_permissions(config));
            checks.push(crate::commands::runtime()?.block_on(vault::check_vault(config)));
            checks.push(check_zone(config));
            checks.push(check_environment(config));
            checks.push(crate::commands::runtime()?.block_on(llm::check_llm(config, offline)));
            checks.push(check_routing(config));
            checks.push(check_tools(config));
            checks.push(check_browser(config));
            checks.push(crate::commands::runtime()?.block_on(check_hooks(config)));
            checks.push(crate::commands::runtime()?.block_on(check_skills(config)));
            checks.push(check_sandbox(config));
            checks.push(check_channels(config));
            checks.push(crate::commands::runtime()?.block_on(check_agents(config, offline)));
            checks.extend(crate::commands::runtime()?.block_on(check_chat_apps(config)));
            checks.push(crate::commands::runtime()?.block_on(check_mcp(config)));
        }
        None => {
            for name in [
                "home",
                "workspace",
                "database",
                "permissions",
                "signal",
                "timezone",
                "environment",
                "llm",
                "routing",
                "tools",
                "browser",
                "hooks",
                "skills",
                "sandbox",
                "channels",
                "telegram",
                "slack",
                "discord",
                "mcp",
            ] {
                checks.push(check(
                    name,
                    Status::Warn,
                    "not checked: fix the configuration first",
                ));
            }
        }
    }
    let failed = checks.iter().any(|c| c.status == Status::Fail);
    if as_json {
        let out = serde_json::json!({ "ok": !failed, "checks": checks });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        for c in &checks {
            let tag = match c.status {
                Status::Ok => "ok  ",
                Status::Warn => "warn",
                Status::Fail => "FAIL",
            };
            let mut lines = c.message.lines();
            println!("{tag}  {:<10} {}", c.name, lines.next().unwrap_or_default());
            for line in lines {
                println!("      {:<10} {line}", "");
            }
        }
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Creates the directory if needed (0700, as the home is) and proves it
/// writable with a scratch file, made new (`O_EXCL`, so a link planted at
/// its name is never written through) and removed.
fn writable_dir(dir: &Path) -> Result<(), String> {
    crate::home::create(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let probe = PathBuf::from(format!(".cairn-doctor-{}", uuid::Uuid::new_v4().simple()));
    let tree = Tree::new(dir);
    tree.create_new(&probe, b"ok")
        .map_err(|e| format!("{} is not writable: {e}", dir.display()))?;
    tree.remove(&probe)
        .map_err(|e| format!("cannot remove {}: {e}", dir.join(&probe).display()))
}

fn check_home(home: &Path) -> Check {
    match writable_dir(home) {
        Ok(()) => check(
            "home",
            Status::Ok,
            format!("{} is writable", home.display()),
        ),
        Err(e) => check("home", Status::Fail, e),
    }
}

fn check_workspace(workspace: &Path) -> Check {
    match writable_dir(workspace) {
        Ok(()) => check(
            "workspace",
            Status::Ok,
            format!("{} is writable", workspace.display()),
        ),
        Err(e) => check("workspace", Status::Fail, e),
    }
}

/// The database, then the change signal on it.
async fn check_database(config: &Config) -> (Check, Check) {
    let url = config.database_url.expose_secret();
    match Store::open(url).await {
        Ok((store, report)) => {
            let message = if report.applied.is_empty() {
                format!(
                    "{} reachable; schema up to date ({} migrations)",
                    store.display_url(),
                    report.already_applied
                )
            } else {
                format!(
                    "{} reachable; applied migrations {:?}",
                    store.display_url(),
                    report.applied
                )
            };
            let signal = check_signal(&store).await;
            store.close().await;
            (check("database", Status::Ok, message), signal)
        }
        Err(err) => (
            check("database", Status::Fail, err.to_string()),
            check("signal", Status::Warn, "not checked: no database"),
        ),
    }
}

/// How a process hears other processes' changes on this database: by push
/// (PostgreSQL LISTEN, file events on SQLite's WAL), or, warned, by polling.
async fn check_signal(store: &Store) -> Check {
    let mode = store.signal_ready(std::time::Duration::from_secs(5)).await;
    if mode.is_push() {
        check(
            "signal",
            Status::Ok,
            format!("changes from other processes arrive by {mode}"),
        )
    } else {
        check(
            "signal",
            Status::Warn,
            format!(
                "changes from other processes arrive by {mode}; they take up to that long to be seen"
            ),
        )
    }
}

/// The home and the database are the owner's alone; the fix when they are not.
fn check_permissions(config: &Config) -> Check {
    let exposed = crate::home::exposed(config.home(), config.database_url.expose_secret());
    if exposed.is_empty() {
        return check(
            "permissions",
            Status::Ok,
            format!(
                "{} and the database are private to their owner",
                config.home().display()
            ),
        );
    }
    let listed: Vec<String> = exposed
        .iter()
        .map(|e| format!("{} is {:04o}", e.path.display(), e.mode))
        .collect();
    check(
        "permissions",
        Status::Warn,
        format!(
            "readable by other users: {}; fix with:\n{}\n(`cairn daemon` also does this when it starts)",
            listed.join(", "),
            crate::home::fix_commands(&exposed).join("\n")
        ),
    )
}

fn check_zone(config: &Config) -> Check {
    let zone = config.user.timezone.name();
    let source = config
        .settings
        .get("user.timezone")
        .map(|r| r.source.to_string())
        .unwrap_or_default();
    if source == "default" && !config.settings.system_zone_detected {
        check(
            "timezone",
            Status::Warn,
            "could not detect this machine's time zone, so schedules use UTC; set user.timezone in config.toml or CAIRN_TIMEZONE",
        )
    } else if source == "default" {
        check(
            "timezone",
            Status::Ok,
            format!("{zone} (this machine's zone)"),
        )
    } else {
        check("timezone", Status::Ok, format!("{zone} [{source}]"))
    }
}

/// Every `${VAR}` the configuration names is set here. One that is not is
/// a warning, not a failure: the daemon may run with its own environment
/// (`cairn service install`'s file), and only what needs the value fails.
fn check_environment(config: &Config) -> Check {
    let unavailable = config.unavailable();
    if unavailable.is_empty() {
        return check(
            "environment",
            Status::Ok,
            "every ${VAR} the configuration names is set",
        );
    }
    let mut lines = vec![format!(
        "{} value(s) unavailable in this environment; what needs one fails saying so:",
        unavailable.len()
    )];
    lines.extend(unavailable.iter().map(ToString::to_string));
    check("environment", Status::Warn, lines.join("\n"))
}

/// Every rule's hint has a route, every route's provider is configured,
/// every pattern compiles.
fn check_routing(config: &Config) -> Check {
    if config.routing.is_none() {
        return check(
            "routing",
            Status::Ok,
            "no [routing]: every turn uses the default model",
        );
    }
    if crate::wiring::llm_unavailable(config).is_some() {
        return check(
            "routing",
            Status::Warn,
            "not checked: the LLM settings are unavailable here (see llm)",
        );
    }
    let checked =
        crate::wiring::llm_settings(config).and_then(|llm| crate::routing::check(config, &llm));
    match checked {
        Err(e) => check("routing", Status::Fail, format!("{e:#}")),
        Ok(c) if !c.errors.is_empty() => check("routing", Status::Fail, c.errors.join("\n")),
        Ok(c) if !c.warnings.is_empty() => check("routing", Status::Warn, c.warnings.join("\n")),
        Ok(c) => check(
            "routing",
            Status::Ok,
            format!(
                "{} rule(s), {} route(s)",
                c.config.rules.len(),
                c.config.models.len()
            ),
        ),
    }
}

fn check_tools(config: &Config) -> Check {
    let tools = crate::wiring::tools_config(config).and_then(|t| {
        cairn_agent::tools::builtin_registry(&t)
            .map(|r| (t, r))
            .map_err(anyhow::Error::from)
    });
    match tools {
        Ok((tools, registry)) => check(
            "tools",
            Status::Ok,
            format!(
                "{} tools, autonomy {:?}",
                registry.names().len(),
                tools.policy.autonomy
            )
            .to_lowercase(),
        ),
        Err(e) => check("tools", Status::Fail, format!("{e:#}")),
    }
}

/// The browser of the `browser_*` tools: which one, or why they are not
/// offered and how to install one (a warning: the browser is optional).
fn check_browser(config: &Config) -> Check {
    let tools = match crate::wiring::parse_tools(config) {
        Ok(tools) => tools,
        Err(e) => return check("browser", Status::Fail, format!("{e:#}")),
    };
    match crate::wiring::browser_executable(config, &tools) {
        Ok(exe) => check(
            "browser",
            Status::Ok,
            format!("{}: the browser_* tools are offered", exe.display()),
        ),
        Err(why) => check(
            "browser",
            Status::Warn,
            format!("the browser_* tools are not offered: {why}"),
        ),
    }
}

/// Whether every `[[hooks]]` entry is usable.
/// Each hook started once on a sample event marked `"dry_run": true`: ok
/// when it ran and answered as its event allows; a blocking hook
/// (`before_tool`, `on_message`, `on_message_sending`, `before_llm_call`)
/// that cannot answer stops everything it matches, so its failure fails the check.
async fn check_hooks(config: &Config) -> Check {
    let hooks = match cairn_agent::hooks::command::parse_hooks(config.hooks.as_ref()) {
        Ok(hooks) if hooks.is_empty() => return check("hooks", Status::Ok, "none configured"),
        Ok(hooks) => hooks,
        Err(errors) => {
            let lines: Vec<String> = errors.iter().map(ToString::to_string).collect();
            return check("hooks", Status::Fail, lines.join("\n"));
        }
    };
    let runner = match crate::wiring::parse_tools(config)
        .and_then(|tools| crate::wiring::user_hooks(config, &tools))
    {
        Ok(runner) => runner,
        Err(e) => return check("hooks", Status::Warn, format!("not run: {e:#}")),
    };
    let mut status = Status::Ok;
    let mut lines = vec![format!(
        "{} configured, each started once on a sample event with \"dry_run\": true:",
        hooks.len()
    )];
    for hook in &hooks {
        let what = format!(
            "{} ({}, `{}`)",
            hook.label,
            hook.event.as_str(),
            hook.command
        );
        match runner.dry_run(hook).await {
            Ok(how) => lines.push(format!("{what}: ok, {how}")),
            Err(why) => {
                let blocking = hook.event.blocks();
                status = match (status, blocking) {
                    (_, true) | (Status::Fail, _) => Status::Fail,
                    _ => Status::Warn,
                };
                let effect = if blocking {
                    format!("; {}", hook.event.blocked())
                } else {
                    String::new()
                };
                lines.push(format!("{what}: failed, {why}{effect}"));
            }
        }
    }
    check("hooks", status, lines.join("\n"))
}

/// The skills found; a skipped `SKILL.md` (bad front matter, duplicate name)
/// is a warning naming its file and line.
async fn check_skills(config: &Config) -> Check {
    let dirs = cairn_agent::skills::skill_dirs(&config.workspace, &config.skills.paths);
    let set = cairn_agent::skills::discover(&dirs).await;
    let found = format!("{} skills", set.skills.len());
    if set.problems.is_empty() {
        check("skills", Status::Ok, found)
    } else {
        let mut lines = vec![format!("{found}; skipped:")];
        lines.extend(set.problems.iter().map(ToString::to_string));
        check("skills", Status::Warn, lines.join("\n"))
    }
}

/// Whether the agent's commands are confined (Landlock), and what that means.
fn check_sandbox(config: &Config) -> Check {
    use cairn_agent::sandbox::{Confinement, Sandbox};
    let tools = match crate::wiring::parse_tools(config) {
        Ok(tools) => tools,
        Err(e) => return check("sandbox", Status::Warn, format!("not checked: {e:#}")),
    };
    let sandbox = Sandbox::new(tools.shell.sandbox_settings());
    match sandbox.confinement() {
        Confinement::Landlock { abi } => check(
            "sandbox",
            Status::Ok,
            format!(
                "Landlock (ABI {abi}): shell commands are confined to the workspace and a private temporary directory"
            ),
        ),
        Confinement::Unavailable { reason } if tools.shell.allow_unconfined => check(
            "sandbox",
            Status::Warn,
            format!(
                "Landlock {reason}: shell commands run unconfined, unapproved ones too (tools.shell.allow_unconfined = true)"
            ),
        ),
        Confinement::Unavailable { reason } => check(
            "sandbox",
            Status::Warn,
            format!(
                "Landlock {reason}: shell commands run unconfined; autonomy full and routines whose allowed_tools list shell are refused unless tools.shell.allow_unconfined = true"
            ),
        ),
    }
}

/// The `[channels]` tables are well-formed and the default channel exists
/// (no network: sending is `cairn notify test`).
fn check_channels(config: &Config) -> Check {
    match crate::wiring::channel_set(config) {
        Ok(channels) => check(
            "channels",
            Status::Ok,
            format!(
                "{}; notifications without a channel go to {}",
                channels.names().join(", "),
                config.notify.default_channel
            ),
        ),
        Err(e) => check("channels", Status::Fail, format!("{e:#}")),
    }
}

/// The `[[agents]]`: each readable, its workspace writable (created if
/// need be, as the main one is), every binding naming a configured
/// channel, and (unless `offline`) each agent's own model served by the
/// LLM.
async fn check_agents(config: &Config, offline: bool) -> Check {
    let agents = match crate::wiring::agents(config) {
        Ok(agents) => agents,
        Err(e) => return check("agents", Status::Fail, format!("{e:#}")),
    };
    if agents.all().len() == 1 {
        return check("agents", Status::Ok, "main alone (no [[agents]])");
    }
    let channels = match crate::wiring::parsed_channels(config) {
        Ok(parsed) => parsed,
        Err(e) => return check("agents", Status::Fail, format!("{e:#}")),
    };
    let mut status = Status::Ok;
    let mut lines = Vec::new();
    for agent in agents.all() {
        for binding in &agent.bindings {
            let known = channels.specs.contains_key(&binding.channel)
                || channels.unavailable.contains_key(&binding.channel);
            if !known {
                status = Status::Fail;
                lines.push(format!(
                    "agent {}: bound to channel {}, which [channels] does not have",
                    agent.id, binding.channel
                ));
            }
        }
        let place = agent.workspace.as_deref().unwrap_or(&config.workspace);
        match writable_dir(place) {
            Ok(()) => lines.push(format!(
                "agent {}: {} binding(s); its workspace {} is writable",
                agent.id,
                agent.bindings.len(),
                place.display()
            )),
            Err(e) => {
                status = Status::Fail;
                lines.push(format!("agent {}: {e}", agent.id));
            }
        }
        if let (Some(model), false) = (&agent.model, offline) {
            match llm::contact_model(config, model, &format!("agent {}", agent.id)).await {
                Some(contact) => {
                    status = status.max(contact.status);
                    lines.push(contact.line);
                }
                None => lines.push(format!(
                    "agent {}: model {model} not checked (no usable LLM settings; see the llm check)",
                    agent.id
                )),
            }
        }
    }
    check("agents", status, lines.join("\n"))
}

/// Each chat app's credentials work, one check per app (`telegram`,
/// `slack`, `discord`, `whatsapp`), as `cairn channel test` checks them:
/// the bot named, each token tried. A token the app refuses fails,
/// without showing it; the app out of reach is a warning.
async fn check_chat_apps(config: &Config) -> Vec<Check> {
    const APPS: [(&str, &str); 4] = [
        ("telegram", "Telegram channels"),
        ("slack", "Slack apps"),
        ("discord", "Discord bots"),
        ("whatsapp", "WhatsApp numbers"),
    ];
    let parsed = match crate::wiring::parsed_channels(config) {
        Ok(parsed) => parsed,
        Err(e) => {
            return APPS
                .iter()
                .map(|(app, _)| check(app, Status::Fail, format!("{e:#}")))
                .collect();
        }
    };
    let mut out = Vec::new();
    for (app, what) in APPS {
        let mut status = Status::Ok;
        let mut lines = Vec::new();
        for (name, spec) in parsed.specs.iter().filter(|(_, s)| s.kind() == app) {
            let steps = match super::channel::probe::credentials(name, spec).await {
                Ok(steps) => steps,
                Err(e) => {
                    status = Status::Fail;
                    lines.push(format!("channels.{name}: {e:#}"));
                    continue;
                }
            };
            for step in steps {
                let this = match (step.ok, step.refused) {
                    (true, _) => Status::Ok,
                    (false, true) => Status::Fail,
                    (false, false) => Status::Warn,
                };
                if this == Status::Fail || (this == Status::Warn && status == Status::Ok) {
                    status = this;
                }
                lines.push(format!("channels.{name}: {}", step.detail));
            }
        }
        out.push(if lines.is_empty() {
            check(app, Status::Ok, format!("no {what} to check"))
        } else {
            check(app, status, lines.join("\n"))
        });
    }
    out
}

/// Each MCP server answers: connected from here, with its tool count and
/// timing, or why not (a server that does not answer is a warning: cairn
/// runs without it; a configuration problem fails).
async fn check_mcp(config: &Config) -> Check {
    // Servers with `sandbox = true` start in it: the one place doctor
    // starts processes, so installed here, once.
    if let Err(e) = crate::wiring::install_host_sandbox(config) {
        return check("mcp", Status::Fail, format!("{e:#}"));
    }
    let clients = match crate::wiring::mcp_clients(config, None).await {
        Ok(clients) if clients.is_empty() => {
            return check("mcp", Status::Ok, "no MCP servers configured");
        }
        Ok(clients) => clients,
        Err(e) => return check("mcp", Status::Fail, format!("{e:#}")),
    };
    if let Err(e) = tokio::fs::create_dir_all(&config.workspace).await {
        return check(
            "mcp",
            Status::Warn,
            format!("not checked: the workspace: {e}"),
        );
    }
    clients.connect_all().await;
    let mut lines = Vec::new();
    let mut status = Status::Ok;
    for s in clients.statuses() {
        lines.push(match s.state {
            cairn_mcp::State::Ready => format!(
                "{}: ready, {} tools ({} ms)",
                s.name,
                s.tools,
                s.connect_ms.unwrap_or_default() + s.list_ms.unwrap_or_default()
            ),
            cairn_mcp::State::Disabled => format!("{}: disabled", s.name),
            cairn_mcp::State::Unavailable => {
                status = Status::Warn;
                format!(
                    "{}: unavailable: {}",
                    s.name,
                    s.last_error.as_deref().unwrap_or_default()
                )
            }
            _ => {
                status = Status::Warn;
                format!(
                    "{}: not answering: {}",
                    s.name,
                    s.last_error.as_deref().unwrap_or("still starting")
                )
            }
        });
    }
    clients.shutdown().await;
    check("mcp", status, lines.join("\n"))
}
