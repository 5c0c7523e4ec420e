//! [`MemoryJobStore`]: the job store's semantics over a map, for tests on
//! tokio's paused clock and for running without a database.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;
use cairn_core::job::{CancelOutcome, JobOutcome, JobRecord, JobState};
use cairn_store::{INTERRUPTED_PENDING, INTERRUPTED_RUNNING, JobFilter, StoreError};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::JobStore;

/// Jobs in a map, with the same compare-and-set rules as the database store.
#[derive(Debug, Default)]
pub struct MemoryJobStore {
    jobs: Mutex<HashMap<Uuid, JobRecord>>,
}

impl MemoryJobStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every job, most recently created first.
    pub fn all(&self) -> Vec<JobRecord> {
        let mut jobs: Vec<JobRecord> = self.lock().values().cloned().collect();
        jobs.sort_by_key(|j| std::cmp::Reverse((j.created_at, j.id)));
        jobs
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Uuid, JobRecord>> {
        // A poisoned map still holds consistent records (every update is one assignment).
        self.jobs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Applies `change` to the job if `expect` holds; returns whether it did.
    fn update_if(
        &self,
        id: Uuid,
        expect: impl FnOnce(&JobRecord) -> bool,
        change: impl FnOnce(&mut JobRecord),
    ) -> bool {
        match self.lock().get_mut(&id) {
            Some(job) if expect(job) => {
                change(job);
                true
            }
            _ => false,
        }
    }
}

fn running(state: JobState) -> bool {
    matches!(state, JobState::InProgress | JobState::Stuck)
}

#[async_trait]
impl JobStore for MemoryJobStore {
    async fn create_job(&self, job: &JobRecord) -> Result<(), StoreError> {
        let mut jobs = self.lock();
        if jobs.contains_key(&job.id) {
            return Err(StoreError::Conflict(format!(
                "a job with id {} already exists",
                job.id
            )));
        }
        jobs.insert(job.id, job.clone());
        Ok(())
    }

    async fn get_job(&self, id: Uuid) -> Result<Option<JobRecord>, StoreError> {
        Ok(self.lock().get(&id).cloned())
    }

    async fn list_jobs(&self, filter: &JobFilter) -> Result<Vec<JobRecord>, StoreError> {
        let limit = usize::try_from(filter.limit).unwrap_or(usize::MAX);
        Ok(self
            .all()
            .into_iter()
            .filter(|j| filter.state.is_none_or(|s| j.state == s))
            .filter(|j| filter.owner.as_ref().is_none_or(|o| &j.owner == o))
            .filter(|j| filter.parent_id.is_none_or(|p| j.parent_id == Some(p)))
            .take(limit)
            .collect())
    }

    async fn start_job(
        &self,
        id: Uuid,
        lease_owner: &str,
        lease_until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        Ok(self.update_if(
            id,
            |j| j.state == JobState::Pending && !j.cancel_requested,
            |j| {
                j.state = JobState::InProgress;
                j.started_at = Some(now);
                j.last_activity_at = Some(now);
                j.lease_owner = Some(lease_owner.to_string());
                j.lease_until = Some(lease_until);
            },
        ))
    }

    async fn finish_job(&self, id: Uuid, outcome: &JobOutcome) -> Result<bool, StoreError> {
        outcome
            .ensure_terminal(id)
            .map_err(|e| StoreError::Conflict(e.to_string()))?;
        Ok(self.update_if(id, |j| j.state.is_active(), |j| j.apply_outcome(outcome)))
    }

    async fn request_job_cancel(
        &self,
        id: Uuid,
        now: DateTime<Utc>,
    ) -> Result<CancelOutcome, StoreError> {
        let mut jobs = self.lock();
        let Some(job) = jobs.get_mut(&id) else {
            return Err(StoreError::NotFound {
                what: "job",
                id: id.to_string(),
            });
        };
        Ok(match job.state {
            JobState::Pending => {
                job.state = JobState::Cancelled;
                job.cancel_requested = true;
                job.completed_at = Some(now);
                job.error = Some("cancelled before it started".to_string());
                job.lease_owner = None;
                job.lease_until = None;
                CancelOutcome::Cancelled
            }
            state if running(state) => {
                job.cancel_requested = true;
                CancelOutcome::Requested
            }
            state => CancelOutcome::AlreadyEnded(state),
        })
    }

    async fn cancel_requested_jobs(&self, lease_owner: &str) -> Result<Vec<Uuid>, StoreError> {
        Ok(self
            .lock()
            .values()
            .filter(|j| {
                j.cancel_requested
                    && j.state.is_active()
                    && j.lease_owner.as_deref() == Some(lease_owner)
            })
            .map(|j| j.id)
            .collect())
    }

    async fn renew_job_leases(
        &self,
        lease_owner: &str,
        until: DateTime<Utc>,
    ) -> Result<u64, StoreError> {
        let mut renewed = 0;
        for job in self.lock().values_mut() {
            if job.state.is_active() && job.lease_owner.as_deref() == Some(lease_owner) {
                job.lease_until = Some(until);
                renewed += 1;
            }
        }
        Ok(renewed)
    }

    async fn touch_job(&self, id: Uuid, at: DateTime<Utc>) -> Result<bool, StoreError> {
        Ok(self.update_if(id, |j| running(j.state), |j| j.last_activity_at = Some(at)))
    }

    async fn set_job_stuck(
        &self,
        id: Uuid,
        stuck: bool,
        last_activity_at: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let (from, to) = if stuck {
            (JobState::InProgress, JobState::Stuck)
        } else {
            (JobState::Stuck, JobState::InProgress)
        };
        Ok(self.update_if(
            id,
            |j| j.state == from,
            |j| {
                j.state = to;
                j.last_activity_at = Some(last_activity_at);
            },
        ))
    }

    async fn reap_orphan_jobs(&self, now: DateTime<Utc>) -> Result<Vec<Uuid>, StoreError> {
        let mut reaped = Vec::new();
        for job in self.lock().values_mut() {
            if job.state.is_active() && job.lease_until.is_none_or(|until| until < now) {
                job.error = Some(
                    if job.state == JobState::Pending {
                        INTERRUPTED_PENDING
                    } else {
                        INTERRUPTED_RUNNING
                    }
                    .to_string(),
                );
                job.state = JobState::Failed;
                job.completed_at = Some(now);
                job.lease_owner = None;
                job.lease_until = None;
                reaped.push(job.id);
            }
        }
        Ok(reaped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_790_000_000 + secs, 0).unwrap()
    }

    fn job(lease_owner: &str) -> JobRecord {
        let mut job = JobRecord::new(Uuid::now_v7(), "t", "d", "ada", at(0));
        job.lease_owner = Some(lease_owner.into());
        job.lease_until = Some(at(30));
        job
    }

    fn outcome(state: JobState) -> JobOutcome {
        JobOutcome {
            state,
            result: None,
            error: None,
            iterations: 1,
            input_tokens: 2,
            output_tokens: 3,
            cost_micros: 4,
            completed_at: at(9),
        }
    }

    #[tokio::test]
    async fn transitions_are_compare_and_set_like_the_database() {
        let store = MemoryJobStore::new();
        let (a, b) = (job("p"), job("p"));
        store.create_job(&a).await.unwrap();
        store.create_job(&b).await.unwrap();
        assert!(store.create_job(&a).await.is_err());
        assert!(store.start_job(a.id, "p", at(30), at(1)).await.unwrap());
        assert!(!store.start_job(a.id, "p", at(30), at(1)).await.unwrap());
        assert_eq!(
            store.request_job_cancel(b.id, at(2)).await.unwrap(),
            CancelOutcome::Cancelled
        );
        assert!(!store.start_job(b.id, "p", at(30), at(3)).await.unwrap());
        assert!(
            !store
                .finish_job(b.id, &outcome(JobState::Completed))
                .await
                .unwrap()
        );
        assert_eq!(
            store.request_job_cancel(a.id, at(2)).await.unwrap(),
            CancelOutcome::Requested
        );
        assert_eq!(store.cancel_requested_jobs("p").await.unwrap(), vec![a.id]);
        assert!(store.set_job_stuck(a.id, true, at(4)).await.unwrap());
        assert!(
            store
                .finish_job(a.id, &outcome(JobState::Cancelled))
                .await
                .unwrap()
        );
        assert!(
            store
                .finish_job(a.id, &outcome(JobState::Stuck))
                .await
                .is_err()
        );
        assert_eq!(
            store.request_job_cancel(a.id, at(10)).await.unwrap(),
            CancelOutcome::AlreadyEnded(JobState::Cancelled)
        );
        assert!(
            store
                .request_job_cancel(Uuid::now_v7(), at(10))
                .await
                .is_err()
        );
        assert_eq!(store.all().len(), 2);
        let cancelled = JobFilter {
            state: Some(JobState::Cancelled),
            ..JobFilter::default()
        };
        assert_eq!(store.list_jobs(&cancelled).await.unwrap().len(), 2);
        let one = JobFilter {
            limit: 1,
            ..JobFilter::default()
        };
        assert_eq!(
            store.list_jobs(&one).await.unwrap()[0].id,
            b.id,
            "newest first"
        );
    }

    #[tokio::test]
    async fn lapsed_leases_are_reaped() {
        let store = MemoryJobStore::new();
        let (dead, alive) = (job("dead"), job("alive"));
        store.create_job(&dead).await.unwrap();
        store.create_job(&alive).await.unwrap();
        store
            .start_job(dead.id, "dead", at(30), at(1))
            .await
            .unwrap();
        assert_eq!(store.renew_job_leases("alive", at(90)).await.unwrap(), 1);
        assert_eq!(store.reap_orphan_jobs(at(60)).await.unwrap(), vec![dead.id]);
        let got = store.get_job(dead.id).await.unwrap().unwrap();
        assert_eq!(got.state, JobState::Failed);
        assert_eq!(got.error.as_deref(), Some(INTERRUPTED_RUNNING));
        assert!(!store.touch_job(dead.id, at(61)).await.unwrap());
    }
}
