//! Embedded schema migrations, applied in order, once, under a lock.

use chrono::{DateTime, Utc};
use sqlx::Row;

use crate::codec::micros;
use crate::connect::Backend;
use crate::exec::Conn;
use crate::{Store, StoreError};

/// One schema change.
#[derive(Debug)]
pub struct Migration {
    /// Position in the sequence, from 1.
    pub version: i64,
    /// Short name.
    pub name: &'static str,
    /// SQL for SQLite.
    pub sqlite: &'static str,
    /// SQL for PostgreSQL.
    pub postgres: &'static str,
}

/// Every migration this binary knows, in order. Portable migrations use one file for both.
pub static MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "init",
        sqlite: include_str!("../migrations/0001_init.sql"),
        postgres: include_str!("../migrations/0001_init.sql"),
    },
    Migration {
        version: 2,
        name: "sessions",
        sqlite: include_str!("../migrations/0002_sessions.sql"),
        postgres: include_str!("../migrations/0002_sessions.sql"),
    },
    Migration {
        version: 3,
        name: "jobs",
        sqlite: include_str!("../migrations/0003_jobs.sql"),
        postgres: include_str!("../migrations/0003_jobs.sql"),
    },
    Migration {
        version: 4,
        name: "turn_rows",
        sqlite: include_str!("../migrations/0004_turn_rows.sql"),
        postgres: include_str!("../migrations/0004_turn_rows.sql"),
    },
    Migration {
        version: 5,
        name: "notifications",
        sqlite: include_str!("../migrations/0005_notifications.sql"),
        postgres: include_str!("../migrations/0005_notifications.sql"),
    },
    Migration {
        version: 6,
        name: "run_details",
        sqlite: include_str!("../migrations/0006_run_details.sql"),
        postgres: include_str!("../migrations/0006_run_details.sql"),
    },
    Migration {
        version: 7,
        name: "gateway",
        sqlite: include_str!("../migrations/0007_gateway.sql"),
        postgres: include_str!("../migrations/0007_gateway.sql"),
    },
    Migration {
        version: 8,
        name: "background_tasks",
        sqlite: include_str!("../migrations/0008_background_tasks.sql"),
        postgres: include_str!("../migrations/0008_background_tasks.sql"),
    },
    Migration {
        version: 9,
        name: "conversation_notices",
        sqlite: include_str!("../migrations/0009_conversation_notices.sql"),
        postgres: include_str!("../migrations/0009_conversation_notices.sql"),
    },
    Migration {
        version: 10,
        name: "memory",
        sqlite: include_str!("../migrations/0010_memory.sql"),
        postgres: include_str!("../migrations/0010_memory.pg.sql"),
    },
    Migration {
        version: 11,
        name: "cost_tools",
        sqlite: include_str!("../migrations/0011_cost_tools.sql"),
        postgres: include_str!("../migrations/0011_cost_tools.sql"),
    },
    Migration {
        version: 12,
        name: "run_attempts",
        sqlite: include_str!("../migrations/0012_run_attempts.sql"),
        postgres: include_str!("../migrations/0012_run_attempts.pg.sql"),
    },
    Migration {
        version: 13,
        name: "signal",
        sqlite: include_str!("../migrations/0013_signal.sql"),
        postgres: include_str!("../migrations/0013_signal.sql"),
    },
    Migration {
        version: 14,
        name: "gateway_security",
        sqlite: include_str!("../migrations/0014_gateway_security.sql"),
        postgres: include_str!("../migrations/0014_gateway_security.sql"),
    },
    Migration {
        version: 15,
        name: "schedule_ops",
        sqlite: include_str!("../migrations/0015_schedule_ops.sql"),
        postgres: include_str!("../migrations/0015_schedule_ops.sql"),
    },
    Migration {
        version: 16,
        name: "channels",
        sqlite: include_str!("../migrations/0016_channels.sql"),
        postgres: include_str!("../migrations/0016_channels.sql"),
    },
    Migration {
        version: 17,
        name: "cost_models",
        sqlite: include_str!("../migrations/0017_cost_models.sql"),
        postgres: include_str!("../migrations/0017_cost_models.sql"),
    },
    Migration {
        version: 18,
        name: "signal_tokens",
        sqlite: include_str!("../migrations/0018_signal_tokens.sql"),
        postgres: include_str!("../migrations/0018_signal_tokens.sql"),
    },
    Migration {
        version: 19,
        name: "run_claims",
        sqlite: include_str!("../migrations/0019_run_claims.sql"),
        postgres: include_str!("../migrations/0019_run_claims.sql"),
    },
    Migration {
        version: 20,
        name: "llm_calls_open",
        sqlite: include_str!("../migrations/0020_llm_calls_open.sql"),
        postgres: include_str!("../migrations/0020_llm_calls_open.sql"),
    },
    Migration {
        version: 21,
        name: "run_queue",
        sqlite: include_str!("../migrations/0021_run_queue.sql"),
        postgres: include_str!("../migrations/0021_run_queue.sql"),
    },
    Migration {
        version: 22,
        name: "channel_messages",
        sqlite: include_str!("../migrations/0022_channel_messages.sql"),
        postgres: include_str!("../migrations/0022_channel_messages.sql"),
    },
    Migration {
        version: 23,
        name: "channel_deliveries",
        sqlite: include_str!("../migrations/0023_channel_deliveries.sql"),
        postgres: include_str!("../migrations/0023_channel_deliveries.sql"),
    },
    Migration {
        version: 24,
        name: "memory_agents",
        sqlite: include_str!("../migrations/0024_memory_agents.sql"),
        postgres: include_str!("../migrations/0024_memory_agents.sql"),
    },
    Migration {
        version: 25,
        name: "cost_agents",
        sqlite: include_str!("../migrations/0025_cost_agents.sql"),
        postgres: include_str!("../migrations/0025_cost_agents.sql"),
    },
    Migration {
        version: 26,
        name: "routine_agents",
        sqlite: include_str!("../migrations/0026_routine_agents.sql"),
        postgres: include_str!("../migrations/0026_routine_agents.sql"),
    },
    Migration {
        version: 27,
        name: "vault",
        sqlite: include_str!("../migrations/0027_vault.sql"),
        postgres: include_str!("../migrations/0027_vault.sql"),
    },
    Migration {
        version: 28,
        name: "secret_leaks",
        sqlite: include_str!("../migrations/0028_secret_leaks.sql"),
        postgres: include_str!("../migrations/0028_secret_leaks.sql"),
    },
    Migration {
        version: 29,
        name: "signal_vault",
        sqlite: include_str!("../migrations/0029_signal_vault.sql"),
        postgres: include_str!("../migrations/0029_signal_vault.sql"),
    },
    Migration {
        version: 30,
        name: "runs_running_by_routine",
        sqlite: include_str!("../migrations/0030_runs_running_by_routine.sql"),
        postgres: include_str!("../migrations/0030_runs_running_by_routine.sql"),
    },
    Migration {
        version: 31,
        name: "routines_failing",
        sqlite: include_str!("../migrations/0031_routines_failing.sql"),
        postgres: include_str!("../migrations/0031_routines_failing.sql"),
    },
];

/// The last version the baseline schema stands for: a fresh database is
/// created from `baseline/*.sql` (generated by `scripts/baseline-schema.sh`),
/// recorded as migrations 1..=BASELINE_VERSION applied, then the later ones
/// apply one by one. The `baseline` conformance test holds it equal to the
/// migrations applied step by step, whatever is added after it.
pub const BASELINE_VERSION: i64 = 26;

const BASELINE_SQLITE: &str = include_str!("../baseline/sqlite.sql");
const BASELINE_POSTGRES: &str = include_str!("../baseline/postgres.sql");

/// Data conversions that SQL alone cannot express portably, run right after
/// the migration of that version, in the same transaction.
async fn convert(version: i64, conn: &mut Conn) -> Result<(), StoreError> {
    match version {
        4 => crate::turns::convert_json_threads(conn).await,
        11 => crate::cost::convert_settings_blob(conn).await,
        _ => Ok(()),
    }
}

/// A migration and whether (and when) it was applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationInfo {
    /// Version number.
    pub version: i64,
    /// Name.
    pub name: String,
    /// When it was applied; `None` if pending.
    pub applied_at: Option<DateTime<Utc>>,
}

/// What `migrate` did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MigrationReport {
    /// Versions applied by this call.
    pub applied: Vec<i64>,
    /// Versions that were already in place.
    pub already_applied: usize,
    /// The baseline's last version, when this call created the schema from
    /// the baseline (its versions are in `applied` too).
    pub baseline: Option<i64>,
}

/// Arbitrary constant naming cairn's migration lock among PostgreSQL advisory locks.
const PG_MIGRATION_LOCK: i64 = 0x6361_6972_6e00_0001;

impl Migration {
    fn sql(&self, backend: Backend) -> &'static str {
        match backend {
            Backend::Sqlite => self.sqlite,
            Backend::Postgres => self.postgres,
        }
    }
}

/// FNV-1a of the SQL text: detects a migration edited after it was applied.
fn checksum(sql: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in sql.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

const CREATE_TABLE: &str = "CREATE TABLE IF NOT EXISTS schema_migrations (
    version    BIGINT PRIMARY KEY,
    name       TEXT NOT NULL,
    checksum   TEXT NOT NULL,
    applied_at BIGINT NOT NULL
)";

pub(crate) async fn apply(store: &Store) -> Result<MigrationReport, StoreError> {
    apply_up_to(store, i64::MAX, Start::Baseline).await
}

/// How a database with no migration applied is brought up.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Start {
    /// From the baseline schema, when the target includes it.
    Baseline,
    /// One migration at a time, as an older cairn did.
    Steps,
}

/// Applies the pending migrations up to version `last`.
async fn apply_up_to(
    store: &Store,
    last: i64,
    start: Start,
) -> Result<MigrationReport, StoreError> {
    let backend = store.backend();
    let mut tx = store.begin_write().await?;
    if backend == Backend::Postgres {
        // Serialises concurrent start-ups; released at commit.
        sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(PG_MIGRATION_LOCK)
            .execute(&mut *tx)
            .await?;
    }
    sqlx::query(CREATE_TABLE).execute(&mut *tx).await?;
    let rows =
        sqlx::query("SELECT version, name, checksum FROM schema_migrations ORDER BY version")
            .fetch_all(&mut *tx)
            .await?;
    let mut applied = Vec::with_capacity(rows.len());
    for row in &rows {
        applied.push((
            row.try_get::<i64, _>("version")?,
            row.try_get::<String, _>("name")?,
            row.try_get::<String, _>("checksum")?,
        ));
    }
    if let Some((version, name, _)) = applied
        .iter()
        .find(|(v, _, _)| !MIGRATIONS.iter().any(|m| m.version == *v))
    {
        return Err(StoreError::Migration {
            version: *version,
            name: name.clone(),
            message: "the database was migrated by a newer cairn; upgrade this binary".to_string(),
        });
    }
    let mut report = MigrationReport::default();
    if start == Start::Baseline && applied.is_empty() && last >= BASELINE_VERSION {
        let sql = match backend {
            Backend::Sqlite => BASELINE_SQLITE,
            Backend::Postgres => BASELINE_POSTGRES,
        };
        sqlx::raw_sql(sql)
            .execute(&mut *tx)
            .await
            .map_err(|e| StoreError::Migration {
                version: BASELINE_VERSION,
                name: "baseline".to_string(),
                message: e.to_string(),
            })?;
        let now = micros(Utc::now());
        for migration in MIGRATIONS.iter().filter(|m| m.version <= BASELINE_VERSION) {
            record(&mut *tx, migration, &checksum(migration.sql(backend)), now).await?;
            report.applied.push(migration.version);
        }
        report.baseline = Some(BASELINE_VERSION);
    }
    let after = report.baseline.unwrap_or(0);
    for migration in MIGRATIONS
        .iter()
        .filter(|m| m.version > after && m.version <= last)
    {
        let sql = migration.sql(backend);
        if let Some((_, _, sum)) = applied.iter().find(|(v, _, _)| *v == migration.version) {
            if *sum != checksum(sql) {
                return Err(StoreError::Migration {
                    version: migration.version,
                    name: migration.name.to_string(),
                    message: "was changed after it was applied; restore the original migration"
                        .to_string(),
                });
            }
            report.already_applied += 1;
            continue;
        }
        sqlx::raw_sql(sql)
            .execute(&mut *tx)
            .await
            .map_err(|e| StoreError::Migration {
                version: migration.version,
                name: migration.name.to_string(),
                message: e.to_string(),
            })?;
        convert(migration.version, &mut *tx)
            .await
            .map_err(|e| StoreError::Migration {
                version: migration.version,
                name: migration.name.to_string(),
                message: e.to_string(),
            })?;
        record(&mut *tx, migration, &checksum(sql), micros(Utc::now())).await?;
        report.applied.push(migration.version);
    }
    tx.commit().await?;
    if !report.applied.is_empty() {
        tracing::info!(applied = ?report.applied, "database migrated");
    }
    Ok(report)
}

/// Records `migration` as applied.
async fn record(
    conn: &mut Conn,
    migration: &Migration,
    sum: &str,
    at: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO schema_migrations (version, name, checksum, applied_at) VALUES ($1, $2, $3, $4)",
    )
    .bind(migration.version)
    .bind(migration.name)
    .bind(sum)
    .bind(at)
    .execute(conn)
    .await?;
    Ok(())
}

#[cairn_store_macros::on_store_runtime]
impl Store {
    /// Applies pending migrations up to version `last` only, one at a time,
    /// never from the baseline: how tests build a database as an older cairn
    /// left it, to check a conversion.
    pub async fn migrate_up_to(&self, last: i64) -> Result<MigrationReport, StoreError> {
        apply_up_to(self, last, Start::Steps).await
    }

    /// Every known migration with its applied time (`None` if pending).
    pub async fn migration_status(&self) -> Result<Vec<MigrationInfo>, StoreError> {
        let exists = match self.backend() {
            Backend::Sqlite => {
                "SELECT COUNT(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
            }
            Backend::Postgres => {
                "SELECT COUNT(*) AS n FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = 'schema_migrations'"
            }
        };
        let n: i64 = sqlx::query(exists)
            .fetch_one(self.pool())
            .await?
            .try_get("n")?;
        let mut applied = Vec::new();
        if n > 0 {
            for row in sqlx::query("SELECT version, applied_at FROM schema_migrations")
                .fetch_all(self.pool())
                .await?
            {
                applied.push((
                    row.try_get::<i64, _>("version")?,
                    row.try_get::<i64, _>("applied_at")?,
                ));
            }
        }
        Ok(MIGRATIONS
            .iter()
            .map(|m| MigrationInfo {
                version: m.version,
                name: m.name.to_string(),
                applied_at: applied
                    .iter()
                    .find(|(v, _)| *v == m.version)
                    .and_then(|(_, at)| DateTime::from_timestamp_micros(*at)),
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_consecutive_from_one() {
        for (i, m) in MIGRATIONS.iter().enumerate() {
            assert_eq!(m.version, i as i64 + 1);
        }
    }

    #[test]
    fn the_baseline_is_a_known_version() {
        assert!(MIGRATIONS.iter().any(|m| m.version == BASELINE_VERSION));
    }

    #[test]
    fn checksum_is_stable() {
        assert_eq!(checksum(""), "cbf29ce484222325");
        assert_ne!(checksum("a"), checksum("b"));
    }
}
