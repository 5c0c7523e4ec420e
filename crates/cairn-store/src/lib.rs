//! cairn-store: every byte cairn keeps, behind one async API.
//!
//! [`Store`] talks to SQLite (the default: one file, created on first use,
//! WAL journal) or PostgreSQL (when several instances share the work),
//! chosen by the URL. Both run the same SQL through sqlx's `Any` driver:
//! times are stored as integer microseconds since the epoch, ids and JSON as
//! text, so one query text serves both backends and one conformance suite
//! proves them equal. Migrations are embedded and applied at start-up.
//!
//! Architecture invariant: this crate knows nothing of LLMs, tools or
//! schedules' meaning; it stores what it is given and enforces the
//! uniqueness rules (one run per scheduled slot) that keep the engine honest
//! across processes.

mod admit;
mod ahead;
mod background;
mod batch;
mod channels;
mod codec;
mod connect;
mod cost;
mod cost_agents;
mod cost_history;
mod daemons;
mod direct;
mod error;
mod exec;
mod finish;
mod gateway;
mod idempotency;
pub mod install_key;
mod jobs;
mod leases;
mod memory;
mod migrate;
mod notifications;
mod pause;
mod pool_trim;
pub mod portable;
mod queue;
mod reap;
mod rounds;
mod routines;
mod runs;
mod runtime;
mod secret_leaks;
mod sessions;
mod settings;
pub mod signal;
mod tool_health;
mod tries;
mod turns;
pub mod vault;
mod waiting;
mod writer;

pub use admit::{Admission, Admitted, AsRead, OverlapRule, Round, SlotMove};
pub use background::{BackgroundTask, TASK_INTERRUPTED, TaskStatus};
pub use channels::{ChannelPairing, ChannelUser};
pub use connect::{Backend, Store, sqlite_file};
pub use daemons::DaemonRecord;
pub use error::StoreError;
pub use finish::{AutoPause, EncodedEnd, FAILING_READ_MOST, FinishRun, Finished};
pub use gateway::{ApiToken, NewApiToken, PairOutcome, PairingState};
pub use idempotency::IdempotencyClaim;
pub use jobs::{INTERRUPTED_PENDING, INTERRUPTED_RUNNING, JobFilter, JobRepair};
pub use memory::{
    KeywordHit, MAIN_AGENT, MemoryCategory, MemoryDoc, MemoryStats, NewMemory, content_hash,
};
pub use migrate::{BASELINE_VERSION, MIGRATIONS, MigrationInfo, MigrationReport};
pub use notifications::{AttemptOutcome, ChannelDeliveries, NotificationFilter};
pub use pause::paused_reason;
pub use queue::QUEUE_FULL;
pub use reap::{Reaped, Rerunner};
pub use routines::RoutineWrite;
pub use runs::RunOutcome;
pub use runtime::{as_store_call, on_thread_park, spawn_on_store_thread};
pub use secret_leaks::SecretLeak;
pub use sessions::{CheckpointRow, CheckpointStack, SessionRow, ThreadRow, ThreadSummary};
pub use signal::{SignalMode, Topic, Watch};
pub use vault::{VaultEntry, VaultKey};
pub use waiting::StartedSlot;
// Shared cost guard and tool health (issue 13).
pub use cost::{
    CostLimits, CostTotals, HOURLY_WINDOW, LEGACY_COST_KEY, LlmAdmission, RESERVATION_TTL,
};
pub use cost_agents::{AgentShare, AgentSpend, AgentTotals};
pub use cost_history::{CostHistory, ModelSpend};
pub use tool_health::{ToolFailure, ToolHealthRow};
pub use turns::{StoredTurn, TurnRange, positions_of, view_of};
