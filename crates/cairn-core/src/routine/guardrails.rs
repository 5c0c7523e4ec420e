//! Limits on how often and how much a routine runs, and whom it tells.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::Overlap;
#[cfg(feature = "openapi")]
use crate::duration::CompactDuration;
use crate::duration::{serde_compact, serde_compact_opt};

/// Keeps a routine from running away. Durations are written `300s`, `5m`, `1h`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RoutineGuardrails {
    /// Minimum time between two fires.
    #[serde(default = "default_cooldown", with = "serde_compact")]
    #[cfg_attr(
        feature = "openapi",
        schema(value_type = CompactDuration, default = json!(crate::duration::format(default_cooldown())))
    )]
    pub cooldown: Duration,
    /// Runs of this routine allowed at once.
    #[serde(default = "default_max_concurrent")]
    #[cfg_attr(feature = "openapi", schema(default = default_max_concurrent))]
    pub max_concurrent: u32,
    /// Identical event content within this window fires once.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "serde_compact_opt"
    )]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<CompactDuration>))]
    pub dedup_window: Option<Duration>,
    /// A run taking longer than this is stopped and marked failed.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "serde_compact_opt"
    )]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<CompactDuration>))]
    pub timeout: Option<Duration>,
    /// What to do about slots missed while nothing was running (`once`, `skip`, `all`).
    #[serde(default, skip_serializing_if = "CatchUp::is_default")]
    #[cfg_attr(feature = "openapi", schema(default = json!(CatchUp::default())))]
    pub catch_up: CatchUp,
    /// With `catch_up: all`, at most this many missed slots are run.
    #[serde(
        default = "default_catch_up_limit",
        skip_serializing_if = "is_default_catch_up_limit"
    )]
    #[cfg_attr(feature = "openapi", schema(default = default_catch_up_limit))]
    pub catch_up_limit: u32,
    /// The routine is disabled after this many runs (never when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_runs: Option<u64>,
    /// How many of its latest runs are kept.
    #[serde(
        default = "default_retention",
        skip_serializing_if = "is_default_retention"
    )]
    #[cfg_attr(feature = "openapi", schema(default = default_retention))]
    pub retention: u32,
    /// What to do about a slot whose run a crash cut short (`rerun`, `skip`);
    /// absent: [`RoutineSpec::on_interrupt`](super::RoutineSpec::on_interrupt) decides from the action.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_interrupt: Option<OnInterrupt>,
    /// The action is safe to repeat, so an interrupted `tool_call` or
    /// `full_job` slot is re-run by default too.
    #[serde(default, skip_serializing_if = "is_false")]
    pub idempotent: bool,
    /// What a slot that comes due while a run of the routine is still going
    /// does; absent: [`RoutineSpec::overlap`](super::RoutineSpec::overlap) decides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlap: Option<Overlap>,
    /// Every scheduled slot fires this routine's own fixed offset (a hash of
    /// its id) later, within this bound; the slot keeps its unjittered time.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "serde_compact_opt"
    )]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<CompactDuration>))]
    pub jitter: Option<Duration>,
    /// After this many failed runs in a row the routine pauses itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_after_failures: Option<u32>,
    /// A failed action is tried again within the same run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<Retry>,
}

/// Tries of a failed action within one run: `retry: { max_attempts: 3, backoff: 30s }`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Retry {
    /// Tries in all, the first included.
    pub max_attempts: u32,
    /// The wait before the second try; it doubles before each later one.
    #[serde(default = "default_backoff", with = "serde_compact")]
    #[cfg_attr(
        feature = "openapi",
        schema(value_type = CompactDuration, default = json!(crate::duration::format(default_backoff())))
    )]
    pub backoff: Duration,
}

impl Retry {
    /// The wait before try `next` (2 or more): `backoff` doubled `next - 2` times.
    pub fn wait_before(&self, next: u32) -> Duration {
        let doublings = next.saturating_sub(2).min(20);
        self.backoff.saturating_mul(1 << doublings)
    }
}

fn default_backoff() -> Duration {
    Duration::from_secs(30)
}

/// What happens to a scheduled slot whose run was interrupted by a crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum OnInterrupt {
    /// Run the slot once more (its second attempt), at once.
    Rerun,
    /// Leave it: the interrupted run is the slot's record.
    Skip,
}

impl OnInterrupt {
    /// The name as written in files.
    pub fn as_str(self) -> &'static str {
        match self {
            OnInterrupt::Rerun => "rerun",
            OnInterrupt::Skip => "skip",
        }
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// What a timed routine does about slots it missed (the daemon was down, the machine slept).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum CatchUp {
    /// Run once for all the missed slots together.
    #[default]
    Once,
    /// Run none of them; wait for the next slot.
    Skip,
    /// Run each missed slot, up to `catch_up_limit`.
    All,
}

impl CatchUp {
    fn is_default(&self) -> bool {
        *self == CatchUp::Once
    }

    /// The name as written in files.
    pub fn as_str(self) -> &'static str {
        match self {
            CatchUp::Once => "once",
            CatchUp::Skip => "skip",
            CatchUp::All => "all",
        }
    }
}

/// Default bound on missed slots run with `catch_up: all`.
pub const DEFAULT_CATCH_UP_LIMIT: u32 = 10;
/// Default number of runs kept per routine.
pub const DEFAULT_RETENTION: u32 = 200;

fn default_catch_up_limit() -> u32 {
    DEFAULT_CATCH_UP_LIMIT
}

fn is_default_catch_up_limit(n: &u32) -> bool {
    *n == DEFAULT_CATCH_UP_LIMIT
}

fn default_retention() -> u32 {
    DEFAULT_RETENTION
}

fn is_default_retention(n: &u32) -> bool {
    *n == DEFAULT_RETENTION
}

fn default_cooldown() -> Duration {
    Duration::from_secs(300)
}

fn default_max_concurrent() -> u32 {
    1
}

impl Default for RoutineGuardrails {
    fn default() -> Self {
        Self {
            cooldown: default_cooldown(),
            max_concurrent: default_max_concurrent(),
            dedup_window: None,
            timeout: None,
            catch_up: CatchUp::Once,
            catch_up_limit: DEFAULT_CATCH_UP_LIMIT,
            max_runs: None,
            retention: DEFAULT_RETENTION,
            on_interrupt: None,
            idempotent: false,
            overlap: None,
            jitter: None,
            pause_after_failures: None,
            retry: None,
        }
    }
}

/// Whom a routine tells about its runs, and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NotifyConfig {
    /// Output channel (the user's default channel when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    /// Recipient (the routine's owner when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Tell when the run found something.
    #[serde(default = "yes")]
    #[cfg_attr(feature = "openapi", schema(default = yes))]
    pub on_attention: bool,
    /// Tell when the run failed.
    #[serde(default = "yes")]
    #[cfg_attr(feature = "openapi", schema(default = yes))]
    pub on_failure: bool,
    /// Tell when the run found nothing to report.
    #[serde(default)]
    pub on_success: bool,
}

fn yes() -> bool {
    true
}

impl Default for NotifyConfig {
    fn default() -> Self {
        Self {
            channel: None,
            user: None,
            on_attention: true,
            on_failure: true,
            on_success: false,
        }
    }
}
