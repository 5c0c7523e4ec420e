//! The late-bound link from the agent to the routine engine. The engine's
//! executor needs the agent's tools, and the agent needs to reach the engine
//! (chat messages fire event routines; `routine_fire` fires routines), so the
//! binary registers an [`EngineLink`] first and attaches the engine once it
//! exists.

use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use cairn_agent::{Hook, HookFlow};
use cairn_core::routine::Routine;
use cairn_store::Admitted;
use serde_json::Value;
use uuid::Uuid;

use super::engine::RoutineEngine;
use super::tools::RoutineFirer;

/// A `before_inbound` hook feeding the event matcher, and the firer behind
/// the `routine_fire` tool.
#[derive(Debug, Default)]
pub struct EngineLink {
    engine: OnceLock<RoutineEngine>,
}

impl EngineLink {
    /// A link with no engine yet: messages fire nothing, fires are refused.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Connects the engine; later calls are ignored.
    pub fn attach(&self, engine: RoutineEngine) {
        let _ = self.engine.set(engine);
    }

    /// The engine, once attached.
    pub fn engine(&self) -> Option<&RoutineEngine> {
        self.engine.get()
    }
}

#[async_trait]
impl Hook for EngineLink {
    fn name(&self) -> &str {
        "routine-events"
    }

    async fn before_inbound(&self, channel: &str, text: &mut String) -> HookFlow {
        if let Some(engine) = self.engine.get() {
            engine.offer_in_background(channel, text);
        }
        HookFlow::Continue
    }
}

#[async_trait]
impl RoutineFirer for EngineLink {
    async fn fire(&self, routine: &Routine, payload: Option<Value>) -> Result<Uuid, String> {
        let engine = self
            .engine
            .get()
            .ok_or_else(|| "the routine engine is not running in this process".to_string())?;
        let fired = engine
            .fire_manual(routine, payload, None)
            .await
            .map_err(|e| e.to_string())?;
        match fired.admitted {
            // A queued fire is recorded and starts when a place frees.
            Admitted::Started | Admitted::Waiting(_) => Ok(fired.run_id),
            Admitted::Skipped(reason) => Err(format!(
                "not fired: {reason} (run {} records it)",
                fired.run_id
            )),
            Admitted::Refused(reason) => Err(format!("not fired: {reason}")),
            Admitted::Taken => Err(format!(
                "routine \"{}\" no longer exists",
                routine.spec.name
            )),
        }
    }
}
