//! The health of the daemon's components, as `/readyz` and `/api/status`
//! report it. The daemon marks its components; the gateway only reads.

use std::collections::BTreeMap;
use std::sync::Mutex;

use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;

/// What one component is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ComponentState {
    /// Starting, not yet serving.
    Starting,
    /// Working.
    Running,
    /// Turned off by configuration.
    Disabled,
    /// Stopped after a failure.
    Failed,
    /// Stopped on purpose (shutdown).
    Stopped,
}

/// One component's health.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct ComponentHealth {
    /// Its state.
    pub state: ComponentState,
    /// Since when.
    pub since: DateTime<Utc>,
    /// The last error, if it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// The components of one daemon, by name.
#[derive(Debug, Default)]
pub struct Components {
    map: Mutex<BTreeMap<String, ComponentHealth>>,
}

impl Components {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records `name`'s state.
    pub fn set(
        &self,
        name: &str,
        state: ComponentState,
        now: DateTime<Utc>,
        error: Option<String>,
    ) {
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        map.insert(
            name.to_string(),
            ComponentHealth {
                state,
                since: now,
                last_error: error,
            },
        );
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
