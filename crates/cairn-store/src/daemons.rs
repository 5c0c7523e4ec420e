//! Daemons on this database: who will deliver what a command records.
//!
//! A daemon records itself at start ([`Store::announce_daemon`]) and
//! removes itself at stop. A row alone proves nothing (a killed daemon
//! leaves one), so [`Store::daemons`] also says, on PostgreSQL, whether the
//! daemon's listening connection (`application_name` `cairn-daemon <id>`)
//! is open right now: the server closes it the moment the process dies. On
//! SQLite (one machine) the caller checks the pid on this host.

use chrono::{DateTime, Utc};

use crate::codec::{Cols, micros};
use crate::connect::Backend;
use crate::{Store, StoreError};

/// A daemon as recorded on the database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DaemonRecord {
    /// Its store's signal id.
    pub id: String,
    /// Its process id (on `host`).
    pub pid: u32,
    /// The machine it runs on.
    pub host: String,
    /// Its `CAIRN_HOME`.
    pub home: String,
    /// When it started.
    pub started_at: DateTime<Utc>,
    /// PostgreSQL: whether its listening connection is open now. `None` on
    /// SQLite, where the caller checks the pid.
    pub connected: Option<bool>,
}

/// The `application_name` of a daemon's listening connection.
fn daemon_label(id: &str) -> String {
    format!("cairn-daemon {id}")
}

#[cairn_store_macros::on_store_runtime]
impl Store {
    /// Records this process as a daemon on the database (under this
    /// store's [`signal_id`](Store::signal_id)) and, on PostgreSQL, names
    /// its listening connection after it and starts it.
    pub async fn announce_daemon(
        &self,
        pid: u32,
        host: &str,
        home: &str,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let id = self.signal_id().to_string();
        sqlx::query(
            "INSERT INTO daemons (id, pid, host, home, started_at) VALUES ($1, $2, $3, $4, $5) \
                 ON CONFLICT (id) DO UPDATE SET pid = excluded.pid, host = excluded.host, \
                 home = excluded.home, started_at = excluded.started_at",
        )
        .bind(&id)
        .bind(i64::from(pid))
        .bind(host)
        .bind(home)
        .bind(micros(now))
        .execute(self.pool())
        .await?;
        if self.backend() == Backend::Postgres {
            self.label_listener(daemon_label(&id));
        }
        Ok(())
    }

    /// Removes a daemon's record (its own at stop, or one found dead).
    pub async fn withdraw_daemon(&self, id: &str) -> Result<bool, StoreError> {
        let done = sqlx::query("DELETE FROM daemons WHERE id = $1")
            .bind(id)
            .execute(self.pool())
            .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Every daemon recorded, oldest first, with (on PostgreSQL) whether its
    /// listening connection is open.
    pub async fn daemons(&self) -> Result<Vec<DaemonRecord>, StoreError> {
        let sql = match self.backend() {
            Backend::Sqlite => {
                "SELECT id, pid, host, home, started_at, NULL AS connected FROM daemons"
            }
            Backend::Postgres => {
                "SELECT id, pid, host, home, started_at, CAST(CASE WHEN EXISTS (SELECT 1 FROM pg_stat_activity a \
                     WHERE a.datname = current_database() AND a.application_name = 'cairn-daemon ' || d.id) \
                     THEN 1 ELSE 0 END AS BIGINT) AS connected FROM daemons d"
            }
        };
        let rows = sqlx::query(sql).fetch_all(self.pool()).await?;
        let mut out = Vec::with_capacity(rows.len());
        for row in &rows {
            let c = Cols(row);
            out.push(DaemonRecord {
                id: c.text("id")?,
                pid: u32::try_from(c.int("pid")?).unwrap_or(0),
                host: c.text("host")?,
                home: c.text("home")?,
                started_at: c.time("started_at")?,
                connected: c.int_opt("connected")?.map(|n| n != 0),
            });
        }
        out.sort_by_key(|d| d.started_at);
        Ok(out)
    }
}
