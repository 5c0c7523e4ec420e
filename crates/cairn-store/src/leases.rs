//! When a lease can next lapse: reapers sleep until then instead of
//! checking on a timer (a lease renewed meanwhile just moves the time on).

use chrono::{DateTime, Utc};

use crate::codec::Cols;
use crate::{Store, StoreError};

/// The earliest lease end among running routine runs (any process's);
/// `None` when nothing runs.
pub(crate) async fn earliest_run_lease<'c>(
    conn: impl sqlx::Executor<'c, Database = sqlx::Any>,
) -> Result<Option<DateTime<Utc>>, StoreError> {
    let row =
        sqlx::query("SELECT MIN(lease_until) AS at FROM routine_runs WHERE status = 'running'")
            .fetch_one(conn)
            .await?;
    Cols(&row).time_opt("at")
}

#[cairn_store_macros::on_store_runtime]
impl Store {
    /// The earliest lease end among running routine runs (any process's):
    /// no run can be an orphan before then. `None` when nothing runs.
    pub async fn earliest_run_lease_end(&self) -> Result<Option<DateTime<Utc>>, StoreError> {
        earliest_run_lease(self.pool()).await
    }

    /// The earliest lease end among active jobs (any process's); `None`
    /// when no job is active.
    pub async fn earliest_job_lease_end(&self) -> Result<Option<DateTime<Utc>>, StoreError> {
        let row = sqlx::query(
            "SELECT MIN(lease_until) AS at FROM jobs \
                 WHERE state IN ('pending', 'in_progress', 'stuck')",
        )
        .fetch_one(self.pool())
        .await?;
        Cols(&row).time_opt("at")
    }
}
