//! When self-repair runs between its idle slots: its routine's own cadence
//! is [`SELF_REPAIR_EVERY`](super::upkeep::SELF_REPAIR_EVERY) (hourly, so an
//! idle daemon records nothing), and [`watch_quiet_jobs`] fires it as soon
//! as there is something to repair. With no active job on the database it
//! sleeps until the store's signal says jobs changed ([`Topic::Jobs`]: a job
//! submitted or asked to stop anywhere); while jobs are active it looks
//! every [`REPAIR_CHECK_EVERY`] for one quiet past `stuck_after` (a read,
//! no write) and fires the routine only then. Tools need no watch: one is
//! disabled, and its person told, at the failure that reaches the limit.

use std::sync::Arc;
use std::time::Duration;

use cairn_core::clock::Clock;
use cairn_store::Topic;
use tokio_util::sync::CancellationToken;

use super::engine::RoutineEngine;
use super::upkeep::SELF_REPAIR;

/// How often active jobs are looked at for one that stopped making progress.
pub const REPAIR_CHECK_EVERY: Duration = Duration::from_secs(60);

/// Fires `user_id`'s self-repair routine whenever a job has been quiet for
/// `stuck_after`, until `cancel` (see the module doc).
pub async fn watch_quiet_jobs(
    engine: RoutineEngine,
    clock: Arc<dyn Clock>,
    user_id: String,
    stuck_after: Duration,
    cancel: CancellationToken,
) {
    let store = engine.store().clone();
    let mut jobs = store.watch(Topic::Jobs);
    let threshold =
        chrono::Duration::from_std(stuck_after).unwrap_or(chrono::Duration::minutes(10));
    let every = chrono::Duration::from_std(REPAIR_CHECK_EVERY).unwrap_or_default();
    loop {
        jobs.mark_seen();
        let now = clock.now();
        // An error counts as active: looking again in a minute is the safe side.
        let active = store
            .earliest_job_lease_end()
            .await
            .map_or(true, |end| end.is_some());
        if !active {
            tokio::select! {
                () = cancel.cancelled() => return,
                () = jobs.changed() => continue,
            }
        }
        match store.quiet_jobs(now - threshold, now).await {
            Ok(quiet) if quiet.is_empty() => {}
            Ok(quiet) => fire(&engine, &user_id, quiet.len()).await,
            Err(e) => tracing::warn!(error = %e, "self-repair watch: cannot list quiet jobs"),
        }
        tokio::select! {
            () = cancel.cancelled() => return,
            () = clock.sleep_until(now + every) => {}
        }
    }
}

async fn fire(engine: &RoutineEngine, user_id: &str, quiet: usize) {
    let routine = match engine.store().find_routine(user_id, SELF_REPAIR).await {
        Ok(Some(routine)) => routine,
        // Deleted (recreated at the next start) or unreadable: its hourly slot still runs.
        Ok(None) => return,
        Err(e) => {
            tracing::warn!(error = %e, "self-repair watch: cannot read the self-repair routine");
            return;
        }
    };
    let detail = format!("{quiet} job(s) without progress");
    match engine.fire_upkeep(&routine, detail).await {
        Ok(_) => {}
        // Turned off by its setting, or paused: nothing to do.
        Err(e) => tracing::debug!(error = %e, "self-repair watch: not fired"),
    }
}
