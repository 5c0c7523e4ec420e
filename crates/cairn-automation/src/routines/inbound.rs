//! Offers every inbound chat message to the event routines: a hook the
//! binary registers on the agent loop, attached to the engine once it exists
//! (the engine's executor needs the agent's tools, so the hook comes first).

use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use cairn_agent::{Hook, HookFlow};

use super::engine::RoutineEngine;

/// The `before_inbound` hook that feeds the event matcher.
#[derive(Debug, Default)]
pub struct EventHook {
    engine: OnceLock<RoutineEngine>,
}

impl EventHook {
    /// A hook that offers nothing until [`attach`](EventHook::attach)ed.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Connects the engine; later calls are ignored.
    pub fn attach(&self, engine: RoutineEngine) {
        let _ = self.engine.set(engine);
    }
}

#[async_trait]
impl Hook for EventHook {
    fn name(&self) -> &str {
        "routine-events"
    }

    async fn before_inbound(&self, channel: &str, text: &mut String) -> HookFlow {
        if let Some(engine) = self.engine.get() {
            // Matching and recording the fires must not delay the answer.
            let (engine, channel, text) = (engine.clone(), channel.to_string(), text.clone());
            tokio::spawn(async move {
                let fired = engine.offer_message(&channel, &text).await;
                if !fired.is_empty() {
                    tracing::info!(routines = fired.len(), "chat message fired event routines");
                }
            });
        }
        HookFlow::Continue
    }
}
