//! `cairn routine apply|validate|create|list|show|enable|disable|delete|fire|runs`:
//! routine definitions as the database keeps them (the schedule operations
//! are in `routine_ops`). Works without a daemon; routines fire once `cairn
//! daemon` runs the engine.

use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;

use anyhow::Context;
use cairn_automation::routines::service::{Actor, Applied, RoutineService, ServiceError};
use cairn_core::routine::{MAIN_AGENT, Routine, RoutineRun, RunStatus, Trigger};
use cairn_store::Store;
use chrono::{DateTime, SecondsFormat, Utc};
use chrono_tz::Tz;
use secrecy::ExposeSecret;

use super::routine_files::{self, AgentChoice, zone_of};
use super::routine_ops;
use crate::cli::{RoutineCommand, RoutineFileArgs, RoutineFireArgs};
use crate::exit::BadInput;
use crate::{settings, wiring};

/// Fire times `show` lists.
const SHOWN_FIRE_TIMES: usize = 5;

/// Who and where the commands act for.
pub(super) struct Ctx {
    pub(super) store: Store,
    pub(super) service: RoutineService,
    pub(super) user: String,
    pub(super) zone: Tz,
    pub(super) json: bool,
}

/// Runs one `cairn routine` subcommand.
pub fn run(command: &RoutineCommand, as_json: bool) -> anyhow::Result<ExitCode> {
    let config = settings::load()?;
    // Routine checks (a `shell` in allowed_tools) judge by this configuration.
    crate::wiring::install_host_sandbox(&config)?;
    let now = Utc::now();
    let agents = routine_files::configured_agents(&config)?;
    let choice = |args: &RoutineFileArgs| AgentChoice {
        known: &agents,
        default: args.agent.clone(),
    };
    if let RoutineCommand::Validate(args) = command {
        let checked = routine_files::check(&args.path, config.user.timezone, now, &choice(args))?;
        for c in &checked {
            println!("ok       {} ({})", c.spec.name, c.file.display());
        }
        return Ok(ExitCode::SUCCESS);
    }
    // Check the input before opening the database: bad input never touches it.
    let created = match command {
        RoutineCommand::Create(args) => {
            let channels = match args.channel {
                Some(_) => wiring::channel_set(&config)?.names(),
                None => Vec::new(),
            };
            Some(super::routine_create::spec(
                args,
                config.user.timezone,
                &channels,
            )?)
        }
        _ => None,
    };
    let checked = match command {
        RoutineCommand::Apply(args) => Some(routine_files::check(
            &args.path,
            config.user.timezone,
            now,
            &choice(args),
        )?),
        _ => None,
    };
    if let RoutineCommand::Delete { yes: false, name } = command {
        confirm_delete(name)?;
    }
    super::runtime()?.block_on(async {
        let ctx = Ctx::open(&config, as_json).await?;
        let result = match command {
            RoutineCommand::Apply(_) => done(apply(&ctx, checked.unwrap_or_default()).await),
            RoutineCommand::Create(_) => match created {
                Some(spec) => done(super::routine_create::create(&ctx, spec).await),
                None => Ok(ExitCode::SUCCESS),
            },
            RoutineCommand::List => done(list(&ctx).await),
            RoutineCommand::Show { name } => done(show(&ctx, name).await),
            RoutineCommand::Enable { name } => done(set_enabled(&ctx, name, true).await),
            RoutineCommand::Disable { name } => done(set_enabled(&ctx, name, false).await),
            RoutineCommand::Delete { name, .. } => done(delete(&ctx, name).await),
            RoutineCommand::Pause { name, note } => {
                done(routine_ops::pause(&ctx, name, note.as_deref()).await)
            }
            RoutineCommand::Resume { name } => done(routine_ops::resume(&ctx, name).await),
            RoutineCommand::Backfill(args) => routine_ops::backfill(&ctx, &config, args).await,
            RoutineCommand::Next { name, count } => {
                done(routine_ops::next(&ctx, name, *count).await)
            }
            RoutineCommand::Runs { name, limit } => runs(&ctx, name, *limit).await,
            RoutineCommand::Fire(args) => fire(&ctx, &config, args).await,
            RoutineCommand::Validate(_) => Ok(ExitCode::SUCCESS),
        };
        ctx.store.close().await;
        result
    })
}

impl Ctx {
    /// Opens the configured database for the configured person.
    pub(super) async fn open(
        config: &cairn_core::config::Config,
        json: bool,
    ) -> anyhow::Result<Ctx> {
        let (store, _) = Store::open(config.database_url.expose_secret())
            .await
            .context("cannot open the database")?;
        Ok(Ctx {
            service: routine_ops::service(config, &store),
            store,
            user: config.user.id.clone(),
            zone: config.user.timezone,
            json,
        })
    }
}

impl Ctx {
    /// The person, through the CLI (as pause records name them).
    pub(super) fn actor(&self) -> Actor {
        Actor::Person {
            user: self.user.clone(),
            via: "cli",
        }
    }
}

fn done(result: anyhow::Result<()>) -> anyhow::Result<ExitCode> {
    result.map(|()| ExitCode::SUCCESS)
}

/// Without `--yes`, asks on a terminal and refuses otherwise.
fn confirm_delete(name: &str) -> anyhow::Result<()> {
    if !std::io::stdin().is_terminal() {
        return Err(BadInput(format!(
            "refusing to delete routine \"{name}\" without confirmation: pass --yes"
        ))
        .into());
    }
    print!("delete routine \"{name}\" and all its runs? [y/N] ");
    std::io::stdout().flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    if matches!(answer.trim(), "y" | "Y" | "yes") {
        Ok(())
    } else {
        Err(BadInput(format!("not deleted: routine \"{name}\"")).into())
    }
}

/// Creates or updates the checked routines by name, all in one transaction.
pub(super) async fn apply(ctx: &Ctx, checked: Vec<routine_files::Checked>) -> anyhow::Result<()> {
    let specs = checked.iter().map(|c| c.spec.clone()).collect();
    let done = match ctx.service.apply(specs, &ctx.actor()).await {
        Ok(done) => done,
        // Each problem located in its file, as `validate` locates them.
        Err(ServiceError::Problems { name, problems }) => {
            let lines: Vec<String> = problems
                .iter()
                .map(|p| match checked.iter().find(|c| c.spec.name == name) {
                    Some(c) => format!("{}: routine \"{name}\": {p}", c.at(&p.path)),
                    None => format!("routine \"{name}\": {p}"),
                })
                .collect();
            return Err(routine_files::refusal(&lines).into());
        }
        Err(e) => return Err(routine_ops::cli_error(e)),
    };
    let report: Vec<(&str, &str, &std::path::Path)> = done
        .iter()
        .zip(&checked)
        .map(|((outcome, routine), c)| {
            (
                outcome.as_str(),
                routine.spec.name.as_str(),
                c.file.as_path(),
            )
        })
        .collect();
    if ctx.json {
        let out: Vec<_> = report
            .iter()
            .map(|(outcome, name, file)| {
                serde_json::json!({ "name": name, "outcome": outcome, "file": file })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    for (outcome, name, file) in &report {
        println!("{outcome:<9} {name} ({})", file.display());
    }
    if done
        .iter()
        .all(|(outcome, _)| *outcome == Applied::Unchanged)
    {
        println!("nothing changed");
    }
    Ok(())
}

/// The routine named `name`, or an error suggesting the closest name.
async fn find(ctx: &Ctx, name: &str) -> anyhow::Result<Routine> {
    ctx.service.find(name).await.map_err(routine_ops::cli_error)
}

pub(super) fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

pub(super) fn local(t: DateTime<Utc>, zone: Tz) -> String {
    t.with_timezone(&zone)
        .format("%a %Y-%m-%d %H:%M %Z")
        .to_string()
}

/// The trigger in a few words: `cron 0 9 * * *`, `event /deploy/`, `webhook`.
fn trigger_short(trigger: &Trigger) -> String {
    match trigger {
        Trigger::Cron { schedule } => format!("cron {schedule}"),
        Trigger::Once { at } => format!("once {at}"),
        Trigger::Event { pattern, .. } => format!("event /{pattern}/"),
        Trigger::SystemEvent { event, .. } => format!("system_event {event}"),
        other => other.kind().to_string(),
    }
}

async fn last_status(ctx: &Ctx, routine: &Routine) -> anyhow::Result<Option<RunStatus>> {
    let runs = ctx.store.list_runs(routine.id, 1).await?;
    Ok(runs.first().map(|r| r.status))
}

async fn list(ctx: &Ctx) -> anyhow::Result<()> {
    let routines = ctx.store.list_routines(Some(&ctx.user)).await?;
    let mut rows = Vec::new();
    for r in &routines {
        rows.push((r, zone_of(&r.spec, ctx.zone), last_status(ctx, r).await?));
    }
    if ctx.json {
        let out: Vec<_> = rows
            .iter()
            .map(|(r, zone, last)| {
                serde_json::json!({
                    "name": r.spec.name,
                    "enabled": r.spec.enabled,
                    "paused": routine_ops::pause_json(r.runtime.paused.as_ref()),
                    "trigger": trigger_short(&r.spec.trigger),
                    "agent": r.spec.agent_id(),
                    "timezone": zone.name(),
                    "next_fire_at": r.next_due().map(rfc3339),
                    "next_fire_local": r.next_due().map(|t| local(t, *zone)),
                    "next_slot": r.runtime.next_fire_at.map(rfc3339),
                    "last_status": last.map(|s| s.to_string()),
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    if rows.is_empty() {
        println!("no routines; `cairn routine apply -f FILE` adds one");
        return Ok(());
    }
    // The agent column only when a routine runs as another than main.
    let agents = rows.iter().any(|(r, _, _)| r.spec.agent_id() != MAIN_AGENT);
    let column = |text: &str| {
        if agents {
            format!("{text:<12}  ")
        } else {
            String::new()
        }
    };
    println!(
        "{:<24}  {:<7}  {}{:<28}  {:<26}  LAST",
        "NAME",
        "ENABLED",
        column("AGENT"),
        "TRIGGER",
        "NEXT FIRE"
    );
    for (r, zone, last) in &rows {
        let next = match (r.spec.enabled, r.next_due()) {
            (true, Some(t)) => local(t, *zone),
            _ => "-".to_string(),
        };
        let enabled = match (r.spec.enabled, &r.runtime.paused) {
            (false, _) => "no",
            (true, Some(_)) => "paused",
            (true, None) => "yes",
        };
        println!(
            "{:<24}  {:<7}  {}{:<28}  {:<26}  {}",
            r.spec.name,
            enabled,
            column(r.spec.agent_id()),
            trigger_short(&r.spec.trigger),
            next,
            last.map_or_else(|| "-".to_string(), |s| s.to_string())
        );
    }
    for (r, zone, _) in &rows {
        if let Some(p) = &r.runtime.paused {
            println!(
                "{} is paused {}",
                r.spec.name,
                routine_ops::pause_line(p, *zone)
            );
        }
    }
    Ok(())
}

pub(super) async fn show(ctx: &Ctx, name: &str) -> anyhow::Result<()> {
    // A literal webhook secret is never shown; applying this output keeps it.
    let routine = find(ctx, name).await?.redacted();
    let zone = zone_of(&routine.spec, ctx.zone);
    let next = ctx.service.next_of(&routine, SHOWN_FIRE_TIMES);
    let last = last_status(ctx, &routine).await?;
    let pause = routine.runtime.paused.as_ref();
    if ctx.json {
        let out = serde_json::json!({
            "routine": routine,
            "agent": routine.spec.agent_id(),
            "timezone": zone.name(),
            "last_status": last.map(|s| s.to_string()),
            "paused": routine_ops::pause_json(pause),
            "next": next.iter().map(|f| rfc3339(f.fires_at)).collect::<Vec<_>>(),
            "next_local": next.iter().map(|f| local(f.fires_at, zone)).collect::<Vec<_>>(),
            "next_fires": routine_ops::fires_json(&next, zone),
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    let rt = &routine.runtime;
    println!("id:           {}", routine.id);
    println!("name:         {}", routine.spec.name);
    println!(
        "enabled:      {}",
        if routine.spec.enabled { "yes" } else { "no" }
    );
    if let Some(p) = pause {
        println!("paused:       {}", routine_ops::pause_line(p, zone));
    }
    if routine.spec.agent_id() != MAIN_AGENT {
        println!("agent:        {}", routine.spec.agent_id());
    }
    println!("trigger:      {}", trigger_short(&routine.spec.trigger));
    println!("timezone:     {}", zone.name());
    println!("runs:         {}", rt.run_count);
    println!(
        "last run:     {}",
        rt.last_run_at
            .map_or_else(|| "-".into(), |t| local(t, zone))
    );
    println!(
        "last status:  {}",
        last.map_or_else(|| "-".into(), |s| s.to_string())
    );
    println!("created:      {}", local(routine.created_at, zone));
    println!(
        "next fires:{}",
        if pause.is_some() {
            " (once resumed)"
        } else {
            ""
        }
    );
    routine_ops::print_fires(&next, zone);
    println!("\nspec:");
    for line in routine.spec.to_yaml()?.lines() {
        println!("  {line}");
    }
    Ok(())
}

async fn set_enabled(ctx: &Ctx, name: &str, enabled: bool) -> anyhow::Result<()> {
    let done = ctx
        .service
        .set_enabled(name, enabled, &ctx.actor())
        .await
        .map_err(routine_ops::cli_error)?;
    let word = if enabled { "enabled" } else { "disabled" };
    if done.already {
        println!("routine \"{name}\" was already {word}");
    } else {
        println!("{word} routine \"{name}\"");
    }
    Ok(())
}

async fn delete(ctx: &Ctx, name: &str) -> anyhow::Result<()> {
    let routine = find(ctx, name).await?;
    ctx.service
        .delete(&routine, &ctx.actor())
        .await
        .map_err(routine_ops::cli_error)?;
    println!("deleted routine \"{name}\"");
    Ok(())
}

/// One line of text: the first line, clipped.
fn one_line(text: &str, max: usize) -> String {
    let first = text.lines().next().unwrap_or("");
    match first.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &first[..i]),
        None if text.lines().nth(1).is_some() => format!("{first} …"),
        None => first.to_string(),
    }
}

/// A run as `routine runs --json` and `routine fire --json` print it, with
/// its notification's delivery status.
async fn run_json(ctx: &Ctx, run: &RoutineRun) -> anyhow::Result<serde_json::Value> {
    let mut value = serde_json::to_value(run)?;
    let status = match run.notification_id {
        Some(id) => ctx
            .store
            .get_notification(id)
            .await?
            .map(|n| n.status.as_str()),
        None => None,
    };
    if let serde_json::Value::Object(map) = &mut value {
        map.insert("notification_status".into(), serde_json::json!(status));
    }
    Ok(value)
}

/// How long after its slot a scheduled run started (what it waited for a
/// place shows here); `-` for an unscheduled run or one that has not started.
fn lateness(routine: &Routine, run: &RoutineRun) -> String {
    match (run.scheduled_for, run.status) {
        (Some(slot), status) if !matches!(status, RunStatus::Waiting | RunStatus::Skipped) => {
            let fires_at = slot + routine.jitter();
            let late = (run.started_at - fires_at).to_std().unwrap_or_default();
            if late < std::time::Duration::from_secs(1) {
                format!("{}ms", late.as_millis())
            } else {
                cairn_core::duration::format(std::time::Duration::from_secs(late.as_secs()))
            }
        }
        _ => "-".to_string(),
    }
}

async fn runs(ctx: &Ctx, name: &str, limit: u32) -> anyhow::Result<ExitCode> {
    let routine = find(ctx, name).await?;
    let runs = ctx.store.list_runs(routine.id, limit).await?;
    if ctx.json {
        let mut out = Vec::with_capacity(runs.len());
        for run in &runs {
            out.push(run_json(ctx, run).await?);
        }
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(ExitCode::SUCCESS);
    }
    if runs.is_empty() {
        println!("routine \"{name}\" has not run yet");
        return Ok(ExitCode::SUCCESS);
    }
    let zone = zone_of(&routine.spec, ctx.zone);
    println!(
        "{:<25} {:<12} {:<11} {:<7} {:<7} {:<8} SUMMARY",
        "STARTED", "TRIGGER", "STATUS", "LATE", "ATTEMPT", "TOKENS"
    );
    for run in &runs {
        let summary = run
            .skip_reason
            .as_deref()
            .or(run.result_summary.as_deref())
            .unwrap_or("");
        println!(
            "{:<25} {:<12} {:<11} {:<7} {:<7} {:<8} {}",
            local(run.started_at, zone),
            run.trigger_type,
            run.status.to_string(),
            lateness(&routine, run),
            run.attempt,
            run.tokens_used
                .map_or_else(|| "-".into(), |t| t.to_string()),
            one_line(summary, 100)
        );
    }
    Ok(ExitCode::SUCCESS)
}

async fn fire(
    ctx: &Ctx,
    config: &cairn_core::config::Config,
    args: &RoutineFireArgs,
) -> anyhow::Result<ExitCode> {
    let routine = find(ctx, &args.name).await?;
    let payload = match &args.payload {
        Some(text) => Some(
            serde_json::from_str::<serde_json::Value>(text)
                .map_err(|e| BadInput(format!("--payload: not valid JSON: {e}")))?,
        ),
        None => None,
    };
    if !routine.spec.enabled {
        return Err(BadInput(format!(
            "routine \"{}\" is disabled; `cairn routine enable {}` first",
            args.name, args.name
        ))
        .into());
    }
    if let Some(pause) = &routine.runtime.paused {
        return Err(BadInput(format!(
            "routine \"{}\" is paused {}; `cairn routine resume {}` first",
            args.name,
            routine_ops::pause_line(pause, ctx.zone),
            args.name
        ))
        .into());
    }
    if args.no_wait {
        return fire_in_background(args, ctx.json);
    }
    let automation = wiring::automation(config, &ctx.store, None).await?;
    // What the run records for delivery is delivered (or handed to a daemon) before exit.
    automation.notifier.keep_recorded();
    let fired = automation
        .engine
        .fire_manual(&routine, payload, args.run_id)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    if !ctx.json {
        match &fired.admitted {
            cairn_store::Admitted::Waiting(reason) => println!(
                "run {} of \"{}\" waits for a place ({reason}); the daemon starts it when one frees",
                fired.run_id, args.name
            ),
            _ => println!("run {} of \"{}\" started", fired.run_id, args.name),
        }
    }
    automation.engine.shutdown().await;
    if let Some(rt) = &automation.runtime {
        rt.jobs.shutdown().await;
        rt.background.shutdown().await;
        rt.mcp.get().shutdown().await;
    }
    let settled = super::delivery::settle(&automation.notifier, config).await;
    let run = ctx
        .store
        .get_run(fired.run_id)
        .await?
        .with_context(|| format!("run {} disappeared", fired.run_id))?;
    if ctx.json {
        let mut out = run_json(ctx, &run).await?;
        if let serde_json::Value::Object(map) = &mut out {
            map.insert("delivery".into(), serde_json::to_value(&settled)?);
        }
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        let text = run
            .skip_reason
            .as_deref()
            .or(run.result_summary.as_deref())
            .unwrap_or("");
        println!("{}: {text}", run.status);
        for s in &settled {
            println!("{}", s.line);
        }
    }
    Ok(match run.status {
        // Queued behind the global limit: recorded, and it will run.
        RunStatus::Ok | RunStatus::Attention | RunStatus::Waiting => ExitCode::SUCCESS,
        _ => ExitCode::FAILURE,
    })
}

/// `--no-wait`: the run is made by a detached copy of this command given
/// the run's id, so the id can be printed now and the run outlives us.
fn fire_in_background(args: &RoutineFireArgs, json: bool) -> anyhow::Result<ExitCode> {
    let run_id = uuid::Uuid::now_v7();
    let exe = std::env::current_exe().context("cannot find the cairn executable")?;
    let mut command = std::process::Command::new(exe);
    command
        .args([
            "routine",
            "fire",
            &args.name,
            "--run-id",
            &run_id.to_string(),
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    if let Some(payload) = &args.payload {
        command.args(["--payload", payload]);
    }
    #[cfg(unix)]
    {
        // Its own process group: a Ctrl-C meant for the shell does not stop it.
        use std::os::unix::process::CommandExt;
        command.process_group(0);
    }
    command.spawn().context("cannot start the background run")?;
    if json {
        println!(
            "{}",
            serde_json::json!({ "run_id": run_id, "routine": args.name })
        );
    } else {
        println!(
            "run {run_id} of \"{}\" started in the background; `cairn routine runs {}` shows it",
            args.name, args.name
        );
    }
    Ok(ExitCode::SUCCESS)
}
