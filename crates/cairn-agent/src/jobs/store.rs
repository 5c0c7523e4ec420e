//! What the scheduler needs from persistence, as a trait: the database
//! [`Store`] in production, [`MemoryJobStore`](super::MemoryJobStore) in
//! tests that run on tokio's paused clock (where a database driver's own
//! timers would fire early) or where nothing should be kept.

use async_trait::async_trait;
use cairn_core::job::{CancelOutcome, JobOutcome, JobRecord};
use cairn_store::{JobFilter, Store, StoreError};
use chrono::{DateTime, Utc};
use uuid::Uuid;

/// Job persistence; every state change is a compare-and-set (see `cairn_store::Store`).
#[async_trait]
pub trait JobStore: Send + Sync + std::fmt::Debug {
    /// Stores a new job.
    async fn create_job(&self, job: &JobRecord) -> Result<(), StoreError>;
    /// One job by id.
    async fn get_job(&self, id: Uuid) -> Result<Option<JobRecord>, StoreError>;
    /// Jobs matching the filter, most recently created first.
    async fn list_jobs(&self, filter: &JobFilter) -> Result<Vec<JobRecord>, StoreError>;
    /// pending → in_progress under a lease; `false` if no longer pending or cancel was asked.
    async fn start_job(
        &self,
        id: Uuid,
        lease_owner: &str,
        lease_until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError>;
    /// Active → terminal; `false` if it had already ended.
    async fn finish_job(&self, id: Uuid, outcome: &JobOutcome) -> Result<bool, StoreError>;
    /// Cancels a pending job or flags a running one.
    async fn request_job_cancel(
        &self,
        id: Uuid,
        now: DateTime<Utc>,
    ) -> Result<CancelOutcome, StoreError>;
    /// Active jobs held by `lease_owner` with a cancellation request.
    async fn cancel_requested_jobs(&self, lease_owner: &str) -> Result<Vec<Uuid>, StoreError>;
    /// Extends `lease_owner`'s leases.
    async fn renew_job_leases(
        &self,
        lease_owner: &str,
        until: DateTime<Utc>,
    ) -> Result<u64, StoreError>;
    /// Records a running job's last activity.
    async fn touch_job(&self, id: Uuid, at: DateTime<Utc>) -> Result<bool, StoreError>;
    /// in_progress ⇄ stuck.
    async fn set_job_stuck(
        &self,
        id: Uuid,
        stuck: bool,
        last_activity_at: DateTime<Utc>,
    ) -> Result<bool, StoreError>;
    /// Fails active jobs whose lease lapsed before `now`.
    async fn reap_orphan_jobs(&self, now: DateTime<Utc>) -> Result<Vec<Uuid>, StoreError>;
}

#[async_trait]
impl JobStore for Store {
    async fn create_job(&self, job: &JobRecord) -> Result<(), StoreError> {
        Store::create_job(self, job).await
    }

    async fn get_job(&self, id: Uuid) -> Result<Option<JobRecord>, StoreError> {
        Store::get_job(self, id).await
    }

    async fn list_jobs(&self, filter: &JobFilter) -> Result<Vec<JobRecord>, StoreError> {
        Store::list_jobs(self, filter).await
    }

    async fn start_job(
        &self,
        id: Uuid,
        lease_owner: &str,
        lease_until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        Store::start_job(self, id, lease_owner, lease_until, now).await
    }

    async fn finish_job(&self, id: Uuid, outcome: &JobOutcome) -> Result<bool, StoreError> {
        Store::finish_job(self, id, outcome).await
    }

    async fn request_job_cancel(
        &self,
        id: Uuid,
        now: DateTime<Utc>,
    ) -> Result<CancelOutcome, StoreError> {
        Store::request_job_cancel(self, id, now).await
    }

    async fn cancel_requested_jobs(&self, lease_owner: &str) -> Result<Vec<Uuid>, StoreError> {
        Store::cancel_requested_jobs(self, lease_owner).await
    }

    async fn renew_job_leases(
        &self,
        lease_owner: &str,
        until: DateTime<Utc>,
    ) -> Result<u64, StoreError> {
        Store::renew_job_leases(self, lease_owner, until).await
    }

    async fn touch_job(&self, id: Uuid, at: DateTime<Utc>) -> Result<bool, StoreError> {
        Store::touch_job(self, id, at).await
    }

    async fn set_job_stuck(
        &self,
        id: Uuid,
        stuck: bool,
        last_activity_at: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        Store::set_job_stuck(self, id, stuck, last_activity_at).await
    }

    async fn reap_orphan_jobs(&self, now: DateTime<Utc>) -> Result<Vec<Uuid>, StoreError> {
        Store::reap_orphan_jobs(self, now).await
    }
}
