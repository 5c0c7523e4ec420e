//! `cairn routine pause|resume|backfill|next`: schedule operations, each a
//! call on the routine service (the one place they are decided); this
//! module parses the arguments and prints the answers. `backfill` then
//! runs the slots it recorded here, in order, through the engine, as
//! `routine fire` does, and waits for them.

use std::process::ExitCode;

use anyhow::Context;
use cairn_automation::routines::service::{
    Backfill, BackfillRequest, NextFire, RoutineService, ServiceError,
};
use cairn_core::routine::{Overlap, Pause, RoutineRun, RunStatus};
use chrono::{DateTime, NaiveDate, NaiveDateTime, TimeZone, Utc};
use chrono_tz::Tz;
use serde_json::json;

use super::delivery::Settled;
use super::routine::{Ctx, local, rfc3339};
use crate::cli::RoutineBackfillArgs;
use crate::exit::BadInput;
use crate::wiring;

/// A service error as the CLI reports it: bad input (exit 2) unless the store failed.
pub(super) fn cli_error(e: ServiceError) -> anyhow::Error {
    match e {
        ServiceError::NotFound {
            suggestion: None, ..
        } => BadInput(format!("{e}; `cairn routine list` shows them")).into(),
        ServiceError::TooMany {
            name,
            from,
            to,
            count,
            max,
        } => BadInput(format!(
            "a backfill of routine \"{name}\" from {from} to {to} covers {count} slots, more than routines.max_backfill ({max}); pass --yes to run them all"
        ))
        .into(),
        ServiceError::Store(e) => e.into(),
        other => BadInput(other.to_string()).into(),
    }
}

/// "by ada (cli) at 2026-03-07T12:00:00Z: the note".
pub(super) fn pause_line(pause: &Pause, zone: Tz) -> String {
    let mut line = format!("by {} at {}", pause.by, local(pause.at, zone));
    if let Some(note) = &pause.note {
        line.push_str(&format!(": {note}"));
    }
    line
}

/// A pause as JSON.
pub(super) fn pause_json(pause: Option<&Pause>) -> serde_json::Value {
    match pause {
        Some(p) => json!({"by": p.by, "at": rfc3339(p.at), "note": p.note}),
        None => serde_json::Value::Null,
    }
}

pub(super) async fn pause(ctx: &Ctx, name: &str, note: Option<&str>) -> anyhow::Result<()> {
    let done = ctx
        .service
        .pause(name, note, &ctx.actor())
        .await
        .map_err(cli_error)?;
    let pause = done.routine.runtime.paused.as_ref();
    if ctx.json {
        let out =
            json!({"name": name, "already_paused": done.already, "paused": pause_json(pause)});
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    let word = if done.already {
        "was already paused"
    } else {
        "paused"
    };
    match pause {
        Some(p) => println!("routine \"{name}\" {word} {}", pause_line(p, ctx.zone)),
        None => println!("routine \"{name}\" {word}"),
    }
    Ok(())
}

pub(super) async fn resume(ctx: &Ctx, name: &str) -> anyhow::Result<()> {
    let done = ctx
        .service
        .resume(name, &ctx.actor())
        .await
        .map_err(cli_error)?;
    if ctx.json {
        let out = json!({
            "name": name,
            "was_paused": pause_json(done.lifted.as_ref()),
            "catch_up": done.catch_up,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    match (&done.lifted, &done.catch_up) {
        (None, _) => println!("routine \"{name}\" was not paused"),
        (Some(_), Some(what)) => println!("resumed routine \"{name}\"; {what}"),
        (Some(_), None) => println!("resumed routine \"{name}\""),
    }
    Ok(())
}

/// An instant as the person writes it: RFC 3339, or a local date-time or
/// date in `zone` (a date is its first instant, or its last with `end`).
fn instant(text: &str, zone: Tz, end: bool, flag: &str) -> anyhow::Result<DateTime<Utc>> {
    let text = text.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Ok(t.with_timezone(&Utc));
    }
    let local = [
        "%Y-%m-%dT%H:%M:%S",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%d %H:%M",
    ]
    .iter()
    .find_map(|f| NaiveDateTime::parse_from_str(text, f).ok())
    .or_else(|| {
        NaiveDate::parse_from_str(text, "%Y-%m-%d")
            .ok()
            .and_then(|d| {
                if end {
                    d.and_hms_opt(23, 59, 59)
                } else {
                    d.and_hms_opt(0, 0, 0)
                }
            })
    });
    let resolved = local.and_then(|l| zone.from_local_datetime(&l).earliest());
    match resolved {
        Some(t) => Ok(t.with_timezone(&Utc)),
        None => Err(BadInput(format!(
            "{flag}: \"{text}\" is not a time; write RFC 3339 (2026-03-04T09:00:00Z), \
             a local time (2026-03-04T09:00) or a date (2026-03-04), in {}",
            zone.name()
        ))
        .into()),
    }
}

pub(super) async fn backfill(
    ctx: &Ctx,
    config: &cairn_core::config::Config,
    args: &RoutineBackfillArgs,
) -> anyhow::Result<ExitCode> {
    let request = backfill_request(ctx, args)?;
    let done = ctx
        .service
        .backfill(&args.name, &request, &ctx.actor())
        .await
        .map_err(cli_error)?;
    let zone = cairn_automation::routines::define::zone_of(&done.routine.spec, ctx.zone);
    if !ctx.json {
        print_backfill_plan(&done, zone);
    }
    let (ran, settled) = if done.queued.is_empty() {
        (Vec::new(), Vec::new())
    } else {
        run_backfill(ctx, config, &done).await?
    };
    let failed = ran.iter().any(|run| run.status == RunStatus::Failed);
    if ctx.json {
        let out = json!({
            "routine": done.routine.spec.name,
            "overlap": done.overlap.as_str(),
            "runs": ran.iter().map(|r| json!({
                "slot": r.scheduled_for.map(rfc3339),
                "run_id": r.id,
                "status": r.status,
                "summary": r.skip_reason.clone().or(r.result_summary.clone()),
            })).collect::<Vec<_>>(),
            "already_run": done.already.iter().map(|(slot, status)| json!({"slot": rfc3339(*slot), "status": status})).collect::<Vec<_>>(),
            "skipped": done.skipped.iter().map(|(slot, why)| json!({"slot": rfc3339(*slot), "reason": why})).collect::<Vec<_>>(),
            "delivery": settled,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print_backfill_runs(&done.routine.spec.name, &ran, &settled, zone);
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// The backfill the arguments ask for.
fn backfill_request(ctx: &Ctx, args: &RoutineBackfillArgs) -> anyhow::Result<BackfillRequest> {
    let overlap = match &args.overlap {
        Some(text) => Some(
            text.parse::<Overlap>()
                .map_err(|e| BadInput(format!("--overlap: {e}")))?,
        ),
        None => None,
    };
    Ok(BackfillRequest {
        from: instant(&args.from, ctx.zone, false, "--from")?,
        to: instant(&args.to, ctx.zone, true, "--to")?,
        overlap,
        confirmed: args.yes,
    })
}

/// What the backfill found: slots already run, slots skipped, what runs.
fn print_backfill_plan(done: &Backfill, zone: Tz) {
    for (slot, status) in &done.already {
        let status = status.map_or_else(|| "recorded meanwhile".to_string(), |s| s.to_string());
        println!(
            "slot {} already has a run ({status}); not run again",
            local(*slot, zone)
        );
    }
    for (slot, why) in &done.skipped {
        println!("slot {} skipped: {why}", local(*slot, zone));
    }
    if done.queued.is_empty() {
        println!("nothing to run");
    } else {
        println!(
            "running {} slot(s) of \"{}\" in order (overlap: {})",
            done.queued.len(),
            done.routine.spec.name,
            done.overlap.as_str()
        );
    }
}

/// Runs the queued slots in this process, then settles their deliveries;
/// the runs as they ended, and the deliveries.
async fn run_backfill(
    ctx: &Ctx,
    config: &cairn_core::config::Config,
    done: &Backfill,
) -> anyhow::Result<(Vec<RoutineRun>, Vec<Settled>)> {
    let automation = wiring::automation(config, &ctx.store, None).await?;
    // What the runs record for delivery is delivered (or handed to a daemon) before exit.
    automation.notifier.keep_recorded();
    automation.engine.start_waiting(Some(done.routine.id)).await;
    automation.engine.idle().await;
    automation.engine.shutdown().await;
    if let Some(rt) = &automation.runtime {
        rt.jobs.shutdown().await;
        rt.background.shutdown().await;
    }
    let settled = super::delivery::settle(&automation.notifier, config).await;
    let mut ran = Vec::new();
    for queued in &done.queued {
        let run = ctx
            .store
            .get_run(queued.id)
            .await?
            .with_context(|| format!("run {} disappeared", queued.id))?;
        ran.push(run);
    }
    Ok((ran, settled))
}

/// Each run's slot and outcome, then the deliveries.
fn print_backfill_runs(name: &str, ran: &[RoutineRun], settled: &[Settled], zone: Tz) {
    for run in ran {
        let text = run
            .skip_reason
            .as_deref()
            .or(run.result_summary.as_deref())
            .unwrap_or("");
        let slot = run
            .scheduled_for
            .map(|s| local(s, zone))
            .unwrap_or_default();
        match run.status {
            RunStatus::Waiting | RunStatus::Running => println!(
                "slot {slot}: {} (another process has it; `cairn routine runs {name}` shows it)",
                run.status
            ),
            status => println!("slot {slot}: {status}: {text}"),
        }
    }
    for s in settled {
        println!("{}", s.line);
    }
}

/// A fire time to the second when jitter moved it off the minute.
fn fire_text(fire: &NextFire, zone: Tz) -> String {
    if fire.fires_at == fire.slot {
        local(fire.fires_at, zone)
    } else {
        fire.fires_at
            .with_timezone(&zone)
            .format("%a %Y-%m-%d %H:%M:%S %Z")
            .to_string()
    }
}

/// The next fires, as `show` and `next` print them.
pub(super) fn print_fires(fires: &[NextFire], zone: Tz) {
    if fires.is_empty() {
        println!("  (none)");
    }
    for f in fires {
        let jitter = if f.fires_at == f.slot {
            String::new()
        } else {
            format!(", slot {}", rfc3339(f.slot))
        };
        println!(
            "  {}  ({}{jitter})",
            fire_text(f, zone),
            rfc3339(f.fires_at)
        );
    }
}

/// The next fires as JSON.
pub(super) fn fires_json(fires: &[NextFire], zone: Tz) -> serde_json::Value {
    json!(
        fires
            .iter()
            .map(|f| json!({
                "fires_at": rfc3339(f.fires_at),
                "fires_at_local": fire_text(f, zone),
                "slot": rfc3339(f.slot),
            }))
            .collect::<Vec<_>>()
    )
}

pub(super) async fn next(ctx: &Ctx, name: &str, count: usize) -> anyhow::Result<()> {
    let routine = ctx.service.find(name).await.map_err(cli_error)?;
    let zone = cairn_automation::routines::define::zone_of(&routine.spec, ctx.zone);
    let fires = ctx.service.next_of(&routine, count);
    let pause = routine.runtime.paused.as_ref();
    if ctx.json {
        let out =
            json!({"name": name, "paused": pause_json(pause), "next": fires_json(&fires, zone)});
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    if let Some(p) = pause {
        println!(
            "routine \"{name}\" is paused {}; these fire once it is resumed:",
            pause_line(p, zone)
        );
    } else if !routine.spec.enabled {
        println!("routine \"{name}\" is disabled; these fire once it is enabled:");
    }
    print_fires(&fires, zone);
    Ok(())
}

/// The service for the CLI: the configured user, `routines.max_backfill`,
/// the agents of `[[agents]]`.
pub(super) fn service(
    config: &cairn_core::config::Config,
    store: &cairn_store::Store,
) -> RoutineService {
    wiring::routine_service(
        config,
        store,
        std::sync::Arc::new(cairn_core::clock::SystemClock),
    )
}
