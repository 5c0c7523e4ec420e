//! The health of the daemon's components, as `/readyz` and `/api/status`
//! report it. The daemon's supervisor marks its components; the gateway only
//! reads. The same records go into `daemon_state.json`, so `cairn status`
//! reports what the endpoints do.

use std::collections::BTreeMap;
use std::sync::Mutex;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// What one component is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ComponentState {
    /// Starting, not yet serving.
    Starting,
    /// Working.
    Running,
    /// It stopped or panicked; waiting before it is restarted.
    BackingOff,
    /// Turned off by configuration.
    Disabled,
    /// Stopped after a failure.
    Failed,
    /// Stopped on purpose (shutdown).
    Stopped,
}

/// One component's health.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ComponentHealth {
    /// Its state.
    pub state: ComponentState,
    /// Since when.
    pub since: DateTime<Utc>,
    /// The last error (a panic's message), kept after a restart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// How many times it was restarted after exiting or panicking.
    #[serde(default)]
    pub restarts: u32,
    /// When its current (or last) run started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<DateTime<Utc>>,
    /// The last time it had run for a healthy period without failing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_success: Option<DateTime<Utc>>,
    /// When it is restarted next (while backing off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_at: Option<DateTime<Utc>>,
}

impl ComponentHealth {
    /// A fresh record: `state` since `now`, never restarted.
    pub fn new(state: ComponentState, now: DateTime<Utc>) -> Self {
        Self {
            state,
            since: now,
            last_error: None,
            restarts: 0,
            started_at: None,
            last_success: None,
            retry_at: None,
        }
    }
}

/// The components of one daemon, by name.
#[derive(Debug, Default)]
pub struct Components {
    map: Mutex<BTreeMap<String, ComponentHealth>>,
    /// Woken on every change (the daemon's state file is rewritten then).
    changed: tokio::sync::Notify,
}

impl Components {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records `name`'s state (and error), keeping its restart count and times.
    pub fn set(
        &self,
        name: &str,
        state: ComponentState,
        now: DateTime<Utc>,
        error: Option<String>,
    ) {
        self.update(name, now, |h| {
            h.state = state;
            h.since = now;
            h.last_error = error;
        });
    }

    /// Changes `name`'s record in place (a fresh one, `starting` since
    /// `now`, if it had none) and wakes whoever waits for a change.
    pub fn update(
        &self,
        name: &str,
        now: DateTime<Utc>,
        change: impl FnOnce(&mut ComponentHealth),
    ) {
        {
            let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
            let health = map
                .entry(name.to_string())
                .or_insert_with(|| ComponentHealth::new(ComponentState::Starting, now));
            change(health);
            // Errors may quote URLs or command lines with their credentials.
            if let Some(error) = &mut health.last_error {
                *error = cairn_core::config::redact_text(error);
            }
        }
        self.changed.notify_waiters();
    }

    /// `name`'s full record, if it was ever recorded.
    pub fn get(&self, name: &str) -> Option<ComponentHealth> {
        let map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        map.get(name).cloned()
    }

    /// Completes at the next change after it is enabled (or first polled).
    pub fn changed(&self) -> tokio::sync::futures::Notified<'_> {
        self.changed.notified()
    }

    /// Every component's health, by name.
    pub fn snapshot(&self) -> BTreeMap<String, ComponentHealth> {
        self.map.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// `name`'s state, if it was ever recorded.
    pub fn state(&self, name: &str) -> Option<ComponentState> {
        let map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        map.get(name).map(|h| h.state)
    }
}
