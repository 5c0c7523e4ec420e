//! Hooks: points where extensions may watch, change or stop what the agent does.
//!
//! Every method has a do-nothing default, so a hook implements only what it
//! needs. Hooks run in registration order; the first `Cancel` wins. The
//! user's `[[hooks]]` commands are one such hook ([`command::UserHooks`]).

pub mod command;

use std::sync::Arc;

use async_trait::async_trait;
use cairn_core::chat::ToolCall;
use cairn_llm::ChatRequest;

use crate::runner::ToolResult;

/// What a hook decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookFlow {
    /// Go on (with whatever changes the hook made in place).
    Continue,
    /// Stop here, for this reason.
    Cancel(String),
}

/// An extension point of the agent.
#[async_trait]
pub trait Hook: Send + Sync {
    /// A short name for logs.
    fn name(&self) -> &str;

    /// A message arrived from `channel`; the hook may rewrite it or drop it.
    async fn before_inbound(&self, _channel: &str, _text: &mut String) -> HookFlow {
        HookFlow::Continue
    }

    /// The model is about to be called; the hook may change the request or stop the turn.
    async fn before_llm_call(&self, _request: &mut ChatRequest) -> HookFlow {
        HookFlow::Continue
    }

    /// A tool is about to be called; the hook may change the call or refuse it.
    /// Changes happen before the policy gate, so a hook cannot bypass it.
    async fn before_tool_call(&self, _call: &mut ToolCall) -> HookFlow {
        HookFlow::Continue
    }

    /// A tool call finished.
    async fn after_tool_call(&self, _call: &ToolCall, _result: &ToolResult) {}

    /// An answer is about to be sent; the hook may rewrite it or suppress it.
    async fn before_sending(&self, _text: &mut String) -> HookFlow {
        HookFlow::Continue
    }

    /// True when `before_sending` may rewrite answers: the loop then does
    /// not stream partial text, which would show the answer before the
    /// hook saw it.
    fn holds_answers(&self) -> bool {
        false
    }

    /// An idle session was closed.
    async fn on_session_end(&self, _user: &str, _channel: &str, _session_id: &str) {}

    /// A routine run finished (`run`: its id, status, summary).
    async fn on_routine_run(&self, _routine: &str, _run: &serde_json::Value) {}

    /// True when `on_routine_run` does something: a daemon whose hooks all
    /// leave it out does not build and queue each run's end for them.
    fn watches_routine_runs(&self) -> bool {
        false
    }
}

/// The hooks of one agent, in order.
#[derive(Clone, Default)]
pub struct HookRegistry {
    hooks: Vec<Arc<dyn Hook>>,
}

impl std::fmt::Debug for HookRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.hooks.iter().map(|h| h.name()))
            .finish()
    }
}

impl HookRegistry {
    /// No hooks.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a hook after the existing ones.
    pub fn register(&mut self, hook: Arc<dyn Hook>) {
        self.hooks.push(hook);
    }

    /// Runs `before_inbound` of every hook.
    pub async fn before_inbound(&self, channel: &str, text: &mut String) -> HookFlow {
        for hook in &self.hooks {
            if let HookFlow::Cancel(reason) = hook.before_inbound(channel, text).await {
                return cancelled(hook.as_ref(), "on_message", reason);
            }
        }
        HookFlow::Continue
    }

    /// Runs `before_llm_call` of every hook.
    pub async fn before_llm_call(&self, request: &mut ChatRequest) -> HookFlow {
        for hook in &self.hooks {
            if let HookFlow::Cancel(reason) = hook.before_llm_call(request).await {
                return cancelled(hook.as_ref(), "before_llm_call", reason);
            }
        }
        HookFlow::Continue
    }

    /// Runs `before_tool_call` of every hook.
    pub async fn before_tool_call(&self, call: &mut ToolCall) -> HookFlow {
        for hook in &self.hooks {
            if let HookFlow::Cancel(reason) = hook.before_tool_call(call).await {
                return cancelled(hook.as_ref(), "before_tool", reason);
            }
        }
        HookFlow::Continue
    }

    /// Runs `after_tool_call` of every hook.
    pub async fn after_tool_call(&self, call: &ToolCall, result: &ToolResult) {
        for hook in &self.hooks {
            hook.after_tool_call(call, result).await;
        }
    }

    /// Runs `on_session_end` of every hook.
    pub async fn on_session_end(&self, user: &str, channel: &str, session_id: &str) {
        for hook in &self.hooks {
            hook.on_session_end(user, channel, session_id).await;
        }
    }

    /// Runs `on_routine_run` of every hook.
    pub async fn on_routine_run(&self, routine: &str, run: &serde_json::Value) {
        for hook in &self.hooks {
            hook.on_routine_run(routine, run).await;
        }
    }

    /// True when some hook's `on_routine_run` does something.
    pub fn watches_routine_runs(&self) -> bool {
        self.hooks.iter().any(|h| h.watches_routine_runs())
    }

    /// True when some hook rewrites answers (no streaming then).
    pub fn holds_answers(&self) -> bool {
        self.hooks.iter().any(|h| h.holds_answers())
    }

    /// Runs `before_sending` of every hook.
    pub async fn before_sending(&self, text: &mut String) -> HookFlow {
        for hook in &self.hooks {
            if let HookFlow::Cancel(reason) = hook.before_sending(text).await {
                return cancelled(hook.as_ref(), "before_sending", reason);
            }
        }
        HookFlow::Continue
    }
}

/// A hook's refusal, naming the point by its `[[hooks]]` event name.
fn cancelled(hook: &dyn Hook, point: &str, reason: String) -> HookFlow {
    tracing::info!(hook = hook.name(), point, %reason, "hook cancelled");
    HookFlow::Cancel(format!("{} ({}): {reason}", hook.name(), point))
}
