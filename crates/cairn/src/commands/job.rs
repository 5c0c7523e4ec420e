//! `cairn job list|show|cancel`: background jobs as the database has them,
//! sub-agents among them (`agent_delegate`, `job_subtasks`: a job each,
//! marked `↳` in the list, with the turn that started it in `show`).
//!
//! These commands talk to the store only, so they work whether or not a
//! daemon is running. Cancelling a running job sets a flag that the process
//! running it notices within a few seconds.

use std::process::ExitCode;

use anyhow::{Context, bail};
use cairn_agent::cost_guard::format_dollars;
use cairn_core::job::{CancelOutcome, JobRecord};
use cairn_store::{JobFilter, Store};
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use secrecy::ExposeSecret;
use uuid::Uuid;

use crate::cli::{JobCommand, JobListArgs};
use crate::exit::BadInput;
use crate::settings;

/// Runs one `cairn job` subcommand.
pub fn run(command: &JobCommand, as_json: bool) -> anyhow::Result<ExitCode> {
    let config = settings::load()?;
    let zone = config.user.timezone;
    crate::commands::runtime()?.block_on(async {
        let (store, _) = Store::open(config.database_url.expose_secret())
            .await
            .context("cannot open the database")?;
        let result = match command {
            JobCommand::List(args) => list(&store, args, as_json).await,
            JobCommand::Show { id } => match resolve(&store, id).await {
                Ok(id) => show(&store, id, as_json, zone).await,
                Err(e) => Err(e),
            },
            JobCommand::Cancel { id } => match resolve(&store, id).await {
                Ok(id) => cancel(&store, id, as_json).await,
                Err(e) => Err(e),
            },
        };
        store.close().await;
        result
    })?;
    Ok(ExitCode::SUCCESS)
}

/// The job `text` names: its whole id, the start of it, or the short form
/// chat prints (its end); a text naming several is refused.
async fn resolve(store: &Store, text: &str) -> anyhow::Result<Uuid> {
    if let Ok(id) = Uuid::parse_str(text.trim()) {
        return Ok(id);
    }
    let digits = cairn_core::job::id_digits(text).map_err(BadInput)?;
    match store.job_ids_like(&digits, None).await?.as_slice() {
        [id] => Ok(*id),
        [] => bail!("job {} not found", text.trim()),
        _ => Err(BadInput(format!(
            "\"{}\" matches several jobs; give more of the id (`cairn job list` shows them)",
            text.trim()
        ))
        .into()),
    }
}

async fn find(store: &Store, id: Uuid) -> anyhow::Result<JobRecord> {
    store
        .get_job(id)
        .await?
        .with_context(|| format!("job {id} not found"))
}

async fn list(store: &Store, args: &JobListArgs, as_json: bool) -> anyhow::Result<()> {
    let filter = JobFilter {
        state: args.state,
        limit: args.limit,
        ..JobFilter::default()
    };
    let jobs = store.list_jobs(&filter).await?;
    if as_json {
        println!("{}", serde_json::to_string_pretty(&jobs)?);
        return Ok(());
    }
    if jobs.is_empty() {
        println!("no jobs");
        return Ok(());
    }
    let now = Utc::now();
    println!("{:<36}  {:<11}  {:>5}  TITLE", "ID", "STATE", "AGE");
    for job in &jobs {
        let marker = if delegated_by(job).is_some() {
            "↳ "
        } else {
            ""
        };
        println!(
            "{:<36}  {:<11}  {:>5}  {marker}{}",
            job.id,
            state_label(job),
            cairn_core::duration::age(now, job.created_at),
            job.title
        );
    }
    Ok(())
}

async fn show(store: &Store, id: Uuid, as_json: bool, zone: Tz) -> anyhow::Result<()> {
    let job = find(store, id).await?;
    if as_json {
        println!("{}", serde_json::to_string_pretty(&job)?);
    } else {
        print!("{}", render(&job, zone, Utc::now()));
    }
    Ok(())
}

async fn cancel(store: &Store, id: Uuid, as_json: bool) -> anyhow::Result<()> {
    let outcome = match store.request_job_cancel(id, Utc::now()).await {
        Err(cairn_store::StoreError::NotFound { .. }) => bail!("job {id} not found"),
        other => other?,
    };
    if let CancelOutcome::AlreadyEnded(state) = outcome {
        bail!("job {id} already ended ({state}); nothing to cancel");
    }
    if as_json {
        let state = find(store, id).await?.state;
        let out = serde_json::json!({ "id": id, "outcome": outcome, "state": state });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else if outcome == CancelOutcome::Cancelled {
        println!("cancelled job {id} (it had not started)");
    } else {
        println!(
            "asked the process running job {id} to stop it; `cairn job show {id}` shows when it has"
        );
    }
    Ok(())
}

/// Whose sub-agent a job is: the session of the turn that started it
/// (`job:<id>` when that turn is a job's), from its origin `delegate:…`.
fn delegated_by(job: &JobRecord) -> Option<&str> {
    job.origin.as_deref()?.strip_prefix("delegate:")
}

fn state_label(job: &JobRecord) -> String {
    if job.needs_attention {
        format!("{} (needs attention)", job.state)
    } else if job.cancel_requested && job.state.is_active() {
        format!("{}*", job.state)
    } else {
        job.state.to_string()
    }
}

fn when(at: Option<DateTime<Utc>>, zone: Tz, now: DateTime<Utc>) -> String {
    match at {
        Some(at) => format!(
            "{} ({} ago)",
            at.with_timezone(&zone).format("%Y-%m-%d %H:%M:%S %Z"),
            cairn_core::duration::age(now, at)
        ),
        None => "-".to_string(),
    }
}

fn render(job: &JobRecord, zone: Tz, now: DateTime<Utc>) -> String {
    let mut state = job.state.to_string();
    if job.cancel_requested && job.state.is_active() {
        state.push_str(" (cancel requested)");
    }
    if job.needs_attention {
        state.push_str(" (needs attention: self-repair gave up)");
    }
    let optional = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".to_string());
    let lease = match (&job.lease_owner, job.lease_until) {
        (Some(owner), Some(until)) => format!("{owner} until {}", when(Some(until), zone, now)),
        _ => "-".to_string(),
    };
    let mut out = String::new();
    let mut line = |label: &str, value: String| out.push_str(&format!("{label:<14} {value}\n"));
    line("id:", job.id.to_string());
    line("title:", job.title.clone());
    line("state:", state);
    line("owner:", job.owner.clone());
    line("origin:", optional(&job.origin));
    line(
        "parent:",
        job.parent_id.map(|p| p.to_string()).unwrap_or("-".into()),
    );
    if let Some(session) = delegated_by(job) {
        line("sub-agent of:", format!("the turn of session {session}"));
    }
    line("created:", when(Some(job.created_at), zone, now));
    line("started:", when(job.started_at, zone, now));
    line("last activity:", when(job.last_activity_at, zone, now));
    line("completed:", when(job.completed_at, zone, now));
    line(
        "iterations:",
        format!("{} of {}", job.iterations, job.max_iterations),
    );
    line(
        "tokens:",
        format!("{} in, {} out", job.input_tokens, job.output_tokens),
    );
    line("cost:", format_dollars(job.cost_micros));
    line("timeout:", cairn_core::duration::format(job.timeout));
    line(
        "planning:",
        if job.use_planning { "yes" } else { "no" }.into(),
    );
    line("lease:", lease);
    if job.repair_attempts > 0 {
        line(
            "restarts:",
            format!("{} (self-repair)", job.repair_attempts),
        );
    }
    out.push_str(&format!("\ndescription:\n{}\n", indent(&job.description)));
    if let Some(result) = &job.result {
        out.push_str(&format!("\nresult:\n{}\n", indent(result)));
    }
    if let Some(error) = &job.error {
        out.push_str(&format!("\nerror:\n{}\n", indent(error)));
    }
    out
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("  {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}
