//! Limits on how often and how much a routine runs, and whom it tells.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::duration::{serde_compact, serde_compact_opt};

/// Keeps a routine from running away. Durations are written `300s`, `5m`, `1h`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoutineGuardrails {
    /// Minimum time between two fires.
    #[serde(default = "default_cooldown", with = "serde_compact")]
    pub cooldown: Duration,
    /// Runs of this routine allowed at once.
    #[serde(default = "default_max_concurrent")]
    pub max_concurrent: u32,
    /// Identical event content within this window fires once.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "serde_compact_opt"
    )]
    pub dedup_window: Option<Duration>,
    /// A run taking longer than this is stopped and marked failed.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "serde_compact_opt"
    )]
    pub timeout: Option<Duration>,
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
        }
    }
}

/// Whom a routine tells about its runs, and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
    pub on_attention: bool,
    /// Tell when the run failed.
    #[serde(default = "yes")]
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
