//! Upkeep: stuck detection and repair, and the background task that polls
//! for cross-process cancellations and restarts, renews leases, flushes
//! activity, retries unrecorded endings and reaps other processes' orphans.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use cairn_core::job::{JobOutcome, JobRecord};
use cairn_store::{JobRepair, Topic};
use chrono::{DateTime, Utc};
use serde::Serialize;
use uuid::Uuid;

use super::scheduler::{Inner, lock};
use super::worker::{JobShared, StopReason};
use super::{JobError, JobScheduler, StuckJob};

/// A job self-repair restarted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RepairedJob {
    /// The job.
    pub job_id: Uuid,
    /// Its title.
    pub title: String,
    /// This restart's number (from 1).
    pub attempt: u32,
    /// Restarted here, or asked of the process holding it.
    pub here: bool,
}

/// What one pass of [`JobScheduler::repair_stuck`] did (for the self-repair
/// routine's run summary).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RepairReport {
    /// Jobs restarted (or whose restart was asked of their holder).
    pub restarted: Vec<RepairedJob>,
    /// Jobs given up on: `failed` with `needs_attention`, one notification each.
    pub needs_attention: Vec<Uuid>,
    /// Problems met on the way (the pass goes on).
    pub errors: Vec<String>,
}

impl RepairReport {
    /// Whether the pass did nothing.
    pub fn is_empty(&self) -> bool {
        self.restarted.is_empty() && self.needs_attention.is_empty() && self.errors.is_empty()
    }

    /// One line per action, for a run summary.
    pub fn summary(&self) -> String {
        let mut lines: Vec<String> = self
            .restarted
            .iter()
            .map(|r| {
                format!(
                    "restarted job {} \"{}\" (attempt {}{})",
                    r.job_id,
                    r.title,
                    r.attempt,
                    if r.here { "" } else { ", asked of its process" }
                )
            })
            .collect();
        lines.extend(
            self.needs_attention
                .iter()
                .map(|id| format!("job {id} needs attention: no progress after repeated restarts")),
        );
        lines.extend(self.errors.iter().map(|e| format!("error: {e}")));
        lines.join("\n")
    }
}

impl JobScheduler {
    /// The upkeep [`start`](JobScheduler::start) spawned, run instead in
    /// the caller's task until shutdown, so a supervisor owns it (and runs
    /// it again if it panics). The spawned one is stopped first.
    pub async fn upkeep(&self) {
        let spawned = lock(&self.inner.maintenance).take();
        if let Some(spawned) = spawned {
            spawned.abort();
        }
        maintain(Arc::clone(&self.inner)).await;
    }

    /// Self-repair of jobs that stopped making progress, for every process
    /// on the database (the daemon's self-repair routine calls it each
    /// minute, on one instance). A running job quiet for
    /// [`stuck_after`](super::JobsConfig::stuck_after) is restarted from
    /// its instructions (jobs keep no checkpoint of their conversation): at
    /// once when it runs here, otherwise through a flag its process polls.
    /// After [`max_repair_attempts`](super::JobsConfig::max_repair_attempts)
    /// restarts it is ended `failed` with `needs_attention` and one
    /// notification to its owner. Jobs whose process died are left to the
    /// reaper; children, and jobs waiting for a child, are not stuck.
    pub async fn repair_stuck(&self, now: DateTime<Utc>) -> RepairReport {
        let inner = &self.inner;
        let mut report = RepairReport::default();
        let threshold = chrono::Duration::from_std(inner.config.stuck_after)
            .unwrap_or(chrono::Duration::minutes(10));
        // This process is alive: its own jobs' leases are current, whatever
        // the renewal timer's phase, so the query below sees them.
        if !lock(&inner.slots).running.is_empty()
            && let Err(error) = inner
                .store
                .renew_job_leases(&inner.config.lease_owner, inner.lease_until())
                .await
        {
            report
                .errors
                .push(format!("cannot renew job leases: {error}"));
        }
        let quiet = match inner.store.quiet_jobs(now - threshold, now).await {
            Ok(quiet) => quiet,
            Err(error) => {
                report
                    .errors
                    .push(format!("cannot list quiet jobs: {error}"));
                return report;
            }
        };
        for job in quiet {
            let local = {
                let slots = lock(&inner.slots);
                let waiting = slots.waiting().contains(&job.id);
                slots
                    .running
                    .get(&job.id)
                    .map(|r| (r.shared.clone(), waiting))
            };
            let here = match &local {
                // A child, or waiting for one: quiet by design.
                Some((_, true)) => continue,
                Some((shared, false)) => {
                    let last = shared.last_activity();
                    if now - last < threshold {
                        // It moved since the store last heard; tell the store.
                        let _ = inner.store.touch_job(job.id, last).await;
                        continue;
                    }
                    true
                }
                None => false,
            };
            let reason = format!(
                "needs attention: no progress for {} after {} restarts",
                cairn_core::duration::format(inner.config.stuck_after),
                inner.config.max_repair_attempts
            );
            let verdict = inner
                .store
                .repair_job(
                    job.id,
                    inner.config.max_repair_attempts,
                    !here,
                    &reason,
                    now,
                )
                .await;
            match verdict {
                Ok(JobRepair::Restarted { attempt }) => {
                    if let Some((shared, _)) = &local {
                        shared.request_restart();
                    }
                    tracing::warn!(job = %job.id, attempt, here, "restarting a job without progress");
                    report.restarted.push(RepairedJob {
                        job_id: job.id,
                        title: job.title.clone(),
                        attempt,
                        here,
                    });
                }
                Ok(JobRepair::GaveUp) => {
                    if let Some((shared, _)) = &local {
                        shared.stop(StopReason::Repair);
                    }
                    tracing::warn!(job = %job.id, "giving up on a job without progress");
                    self.announce_attention(&job, &reason).await;
                    report.needs_attention.push(job.id);
                }
                Ok(JobRepair::Unchanged) => {}
                Err(error) => report.errors.push(format!("job {}: {error}", job.id)),
            }
        }
        report
    }

    async fn announce_attention(&self, job: &JobRecord, reason: &str) {
        let title = format!("Job needs attention: {}", job.title);
        let body = format!(
            "Job {} (\"{}\") made no progress and was restarted {} times; it is now failed.\n{reason}\n\
             See `cairn job show {}`.",
            job.id, job.title, self.inner.config.max_repair_attempts, job.id
        );
        self.inner
            .notifier
            .notify(crate::repair::notice(
                &job.owner,
                title,
                body,
                "self-repair",
            ))
            .await;
    }

    /// Marks `stuck` every job running here with no activity for
    /// [`stuck_after`](super::JobsConfig::stuck_after) (and back to
    /// `in_progress` any that moved again); returns the stuck ones.
    /// Children, and jobs waiting for a child, are not stuck.
    pub async fn detect_stuck(&self, now: DateTime<Utc>) -> Result<Vec<StuckJob>, JobError> {
        let watched: Vec<(Uuid, Arc<JobShared>)> = {
            let slots = lock(&self.inner.slots);
            let waiting = slots.waiting();
            slots
                .running
                .iter()
                .filter(|(id, _)| !waiting.contains(id))
                .map(|(id, r)| (*id, r.shared.clone()))
                .collect()
        };
        let threshold = self.inner.config.stuck_after;
        let mut stuck = Vec::new();
        for (id, shared) in watched {
            let last = shared.last_activity();
            let quiet = (now - last).to_std().unwrap_or_default();
            let is_stuck = quiet >= threshold;
            if is_stuck != shared.stuck.load(Ordering::Relaxed)
                && self.inner.store.set_job_stuck(id, is_stuck, last).await?
            {
                shared.stuck.store(is_stuck, Ordering::Relaxed);
            }
            if is_stuck && shared.stuck.load(Ordering::Relaxed) {
                stuck.push(StuckJob {
                    job_id: id,
                    last_activity: last,
                    stuck_for: quiet,
                });
            }
        }
        Ok(stuck)
    }
}

/// Background upkeep until shutdown, asleep unless there is something to do:
/// a stop or restart asked from elsewhere arrives through the store's change
/// signal ([`Topic::Jobs`]); while this process holds jobs, lease renewal,
/// activity flushing, retried finishes and reaping every third of a lease;
/// otherwise it wakes only when some job's lease is due for renewal or
/// lapses (another process's jobs, to reap them if it died).
pub(super) async fn maintain(inner: Arc<Inner>) {
    let renew_every = inner.config.lease / 3;
    let mut changes = inner.store.watch(Topic::Jobs);
    let mut last_renewal = tokio::time::Instant::now();
    loop {
        let busy = {
            let slots = lock(&inner.slots);
            !slots.running.is_empty() || !slots.queue.is_empty()
        } || !lock(&inner.unfinished).is_empty();
        let at = if busy {
            Some(last_renewal + renew_every)
        } else {
            idle_wake(&inner, renew_every).await
        };
        let sleep = async {
            match at {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            () = inner.shutdown.cancelled() => return,
            () = changes.changed() => {
                if let Err(error) = poll_cancellations(&inner).await {
                    tracing::warn!(%error, "could not check for job cancellations");
                }
                continue;
            }
            () = sleep => {}
        }
        last_renewal = tokio::time::Instant::now();
        if let Err(error) = renew(&inner).await {
            tracing::warn!(%error, "job lease renewal failed");
        }
    }
}

/// With no job here: when the earliest active job's lease should have been
/// renewed (a job of ours just submitted is then held, so we start
/// renewing), or, past that, when it lapses (its process died: reap it).
async fn idle_wake(
    inner: &Inner,
    renew_every: std::time::Duration,
) -> Option<tokio::time::Instant> {
    let now = inner.clock.now();
    let end = match inner.store.earliest_job_lease_end().await {
        Ok(end) => end?,
        Err(error) => {
            tracing::warn!(%error, "could not read job leases");
            return Some(tokio::time::Instant::now() + renew_every);
        }
    };
    let renewal_due =
        end - chrono::Duration::from_std(inner.config.lease - renew_every).unwrap_or_default();
    let target = if renewal_due > now {
        renewal_due
    } else {
        end + chrono::Duration::milliseconds(1)
    };
    let wait = (target - now).to_std().unwrap_or_default();
    Some(tokio::time::Instant::now() + wait)
}

async fn poll_cancellations(inner: &Inner) -> Result<(), JobError> {
    if lock(&inner.slots).running.is_empty() {
        return Ok(());
    }
    // Restarts self-repair asked of this process (it may run elsewhere).
    let restarts = inner
        .store
        .restart_requested_jobs(&inner.config.lease_owner)
        .await?;
    for id in restarts {
        let shared = lock(&inner.slots)
            .running
            .get(&id)
            .map(|r| r.shared.clone());
        if let Some(shared) = shared
            && inner.store.take_job_restart(id).await?
        {
            let given_up = inner
                .store
                .get_job(id)
                .await?
                .is_some_and(|job| job.needs_attention);
            if given_up {
                tracing::warn!(job = %id, "self-repair gave up on a job running here; stopping it");
                shared.stop(StopReason::Repair);
            } else {
                tracing::info!(job = %id, "restart requested by self-repair");
                shared.request_restart();
            }
        }
    }
    let requested = inner
        .store
        .cancel_requested_jobs(&inner.config.lease_owner)
        .await?;
    let slots = lock(&inner.slots);
    for id in requested {
        if let Some(running) = slots.running.get(&id) {
            tracing::info!(job = %id, "cancellation requested from elsewhere");
            running.shared.stop(StopReason::User);
        }
    }
    Ok(())
}

async fn renew(inner: &Inner) -> Result<(), JobError> {
    let unfinished: Vec<(Uuid, JobOutcome)> = std::mem::take(&mut *lock(&inner.unfinished));
    for (id, outcome) in unfinished {
        if inner.store.finish_job(id, &outcome).await.is_err() {
            inner.retry_finish(id, outcome);
        }
    }
    let active: Vec<(Uuid, Arc<JobShared>)> = {
        let slots = lock(&inner.slots);
        let waiting = slots.waiting();
        slots
            .running
            .iter()
            .map(|(id, r)| {
                if waiting.contains(id) {
                    // A child or its waiting parent is not stuck: say so to
                    // self-repair running in another process.
                    r.shared.touch(inner.clock.now());
                }
                (*id, r.shared.clone())
            })
            .collect()
    };
    let held = !active.is_empty() || !lock(&inner.slots).queue.is_empty();
    if held {
        inner
            .store
            .renew_job_leases(&inner.config.lease_owner, inner.lease_until())
            .await?;
    }
    for (id, shared) in active {
        if let Some(at) = shared.unflushed_activity() {
            inner.store.touch_job(id, at).await?;
        }
    }
    let reaped = inner.store.reap_orphan_jobs(inner.clock.now()).await?;
    if !reaped.is_empty() {
        tracing::warn!(
            count = reaped.len(),
            "failed jobs left running by a stopped process"
        );
    }
    Ok(())
}
