//! Upkeep: stuck detection, and the background task that polls for
//! cross-process cancellations, renews leases, flushes activity, retries
//! unrecorded endings and reaps other processes' orphans.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use cairn_core::job::JobOutcome;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::scheduler::{Inner, lock};
use super::worker::{JobShared, StopReason};
use super::{JobError, JobScheduler, StuckJob};

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

    /// Marks `stuck` every job running here with no activity for
    /// [`stuck_after`](super::JobsConfig::stuck_after) (and back to
    /// `in_progress` any that moved again); returns the stuck ones. Parents
    /// waiting for their subtasks are not stuck.
    pub async fn detect_stuck(&self, now: DateTime<Utc>) -> Result<Vec<StuckJob>, JobError> {
        let watched: Vec<(Uuid, Arc<JobShared>)> = lock(&self.inner.slots)
            .running
            .iter()
            .filter(|(_, r)| !r.lending)
            .map(|(id, r)| (*id, r.shared.clone()))
            .collect();
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

/// Background upkeep until shutdown: cancel polling every `poll_interval`;
/// lease renewal, activity flushing, retried finishes and reaping every third of a lease.
pub(super) async fn maintain(inner: Arc<Inner>) {
    let renew_every = inner.config.lease / 3;
    let mut last_renewal = tokio::time::Instant::now();
    loop {
        tokio::select! {
            biased;
            () = inner.shutdown.cancelled() => return,
            () = tokio::time::sleep(inner.config.poll_interval) => {}
        }
        if let Err(error) = poll_cancellations(&inner).await {
            tracing::warn!(%error, "could not check for job cancellations");
        }
        if last_renewal.elapsed() >= renew_every {
            last_renewal = tokio::time::Instant::now();
            if let Err(error) = renew(&inner).await {
                tracing::warn!(%error, "job lease renewal failed");
            }
        }
    }
}

async fn poll_cancellations(inner: &Inner) -> Result<(), JobError> {
    if lock(&inner.slots).running.is_empty() {
        return Ok(());
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
        slots
            .running
            .iter()
            .map(|(id, r)| (*id, r.shared.clone()))
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
