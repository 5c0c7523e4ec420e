//! [`ToolRunner::run`]: the one path every tool call takes.
//!
//! Chat turns, jobs, routines, `run_parallel`, background tasks and watchers all call
//! it, so each call gets the same treatment: resolve the name (aliases included),
//! check the policy, ask the [`Approver`] when the policy says so, run with a time
//! limit and cancellation, then scrub, cap and frame the output. Every outcome —
//! including denial, a declined approval and an unknown tool — is a [`ToolResult`]
//! with text for the model; nothing is dropped silently.
//!
//! Running a tool any other way does not compile (guide invariant 4). Calling
//! a tool directly:
//!
//! ```compile_fail,E0061
//! # async fn bypass(ctx: &cairn_agent::tools::ToolContext) {
//! use cairn_agent::tools::{Tool, time::TimeNowTool};
//! let _ = TimeNowTool.execute(serde_json::json!({}), ctx).await;
//! # }
//! ```
//!
//! or one taken from the registry:
//!
//! ```compile_fail,E0061
//! # async fn bypass(ctx: &cairn_agent::tools::ToolContext) {
//! use cairn_agent::tools::{ToolsConfig, builtin_registry};
//! let registry = builtin_registry(&ToolsConfig::default()).unwrap();
//! let shell = registry.get("shell").unwrap();
//! let _ = shell.execute(serde_json::json!({"command": "rm -rf ~"}), ctx).await;
//! # }
//! ```
//!
//! and the proof `execute` asks for cannot be made outside this module:
//!
//! ```compile_fail,E0451
//! # async fn forge(ctx: &cairn_agent::tools::ToolContext) {
//! use cairn_agent::runner::Authorized;
//! use cairn_agent::tools::{Tool, time::TimeNowTool};
//! let forged = Authorized { _sealed: () };
//! let _ = TimeNowTool.execute(serde_json::json!({}), ctx, &forged).await;
//! # }
//! ```
//!
//! Other crates (the routine engine, watchers) still implement tools, and run
//! them through the runner like everyone else:
//!
//! ```no_run
//! use std::sync::Arc;
//! use cairn_agent::runner::{Authorized, AutoApprove, ToolRunner};
//! use cairn_agent::tools::{CallOutcome, RiskLevel, Tool, ToolContext, ToolOutput, ToolRegistry, ToolSpec};
//! use cairn_agent::{PolicyGate, ToolPolicyConfig};
//!
//! struct Ping(ToolSpec);
//!
//! #[async_trait::async_trait]
//! impl Tool for Ping {
//!     fn spec(&self) -> &ToolSpec { &self.0 }
//!     async fn execute(&self, _: serde_json::Value, _: &ToolContext, _: &Authorized) -> CallOutcome {
//!         Ok(ToolOutput::ok("pong"))
//!     }
//! }
//!
//! # async fn run(ctx: &ToolContext) -> Result<(), cairn_agent::tools::RegistryError> {
//! let mut registry = ToolRegistry::new();
//! let ping = ToolSpec::new("ping", RiskLevel::ReadOnly, "answers pong");
//! registry.register(Arc::new(Ping(ping)))?;
//! let policy = PolicyGate::new(&ToolPolicyConfig::default());
//! let runner = ToolRunner::new(Arc::new(registry), Arc::new(policy));
//! let call = cairn_core::chat::ToolCall {
//!     id: "1".into(),
//!     name: "ping".into(),
//!     arguments: serde_json::json!({}),
//! };
//! let result = runner.run(&call, ctx, &AutoApprove).await;
//! # Ok(())
//! # }
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn_core::chat::{ChatMessage, ToolCall};
use cairn_core::live::Live;
use futures::FutureExt;

pub use crate::approval::{ApprovalAnswer, ApprovalRequest, Approver, AutoApprove, DenyAll};
use crate::approval::{nobody_to_approve, not_approved};
use crate::policy::{PolicyDecision, PolicyGate};
use crate::repair::ToolHealth;
use crate::safety::leak::{self, LeakGuard};
use crate::safety::{sanitize_output, scrub};
pub use crate::tools::ToolStatus;
use crate::tools::{CallPlan, DelegatedCall, Tool, ToolContext, ToolError, ToolRegistry};

/// The outcome of one call, ready for the conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolResult {
    /// The provider's call id, echoed back.
    pub call_id: String,
    /// The canonical tool name, or the name as called when it is unknown.
    pub tool: String,
    /// How the call ended.
    pub status: ToolStatus,
    /// Scrubbed, capped and framed text for the model.
    pub content: String,
    /// Time from entering the runner to the result (approval wait included).
    pub duration: Duration,
    /// Images the tool gave beside its text ([`crate::tools::ToolOutput::images`]).
    pub images: Vec<cairn_core::image::ImagePart>,
}

impl ToolResult {
    /// True unless the tool ran and succeeded.
    pub fn is_error(&self) -> bool {
        self.status != ToolStatus::Success
    }

    /// The `tool` chat message answering the call.
    pub fn to_message(&self) -> ChatMessage {
        let mut message = ChatMessage::tool_result(&self.call_id, &self.tool, &self.content);
        message.images.clone_from(&self.images);
        message
    }
}

/// Proof, handed to [`Tool::execute`], that the call passed the policy gate.
///
/// Its field is private and only this module makes one — in
/// [`ToolRunner::execute`], which only takes a [`Permit`] — so other crates can
/// implement [`Tool`] but never call it. A tool gets it by reference for the
/// length of one call and cannot keep it.
pub struct Authorized {
    _sealed: (),
}

impl Authorized {
    /// A proof for this crate's own unit tests of single tools.
    #[cfg(test)]
    pub(crate) fn for_tests() -> Self {
        Self { _sealed: () }
    }
}

impl std::fmt::Debug for Authorized {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Authorized")
    }
}

/// A call that passed the policy gate (and the approver, when asked).
///
/// Only [`ToolRunner::authorize`] makes one, so nothing reaches
/// [`ToolRunner::execute`] without passing the gate.
pub struct Permit {
    call_id: String,
    name: String,
    tool: Arc<dyn Tool>,
    args: serde_json::Value,
    /// The call's own time limit, from its plan.
    time_limit: Option<Duration>,
    started: Instant,
}

impl Permit {
    /// The canonical name of the permitted tool.
    pub fn tool_name(&self) -> &str {
        &self.name
    }
}

impl std::fmt::Debug for Permit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Permit")
            .field("call_id", &self.call_id)
            .field("tool", &self.name)
            .finish_non_exhaustive()
    }
}

/// The gate's verdict on one call.
#[derive(Debug)]
pub enum Gate {
    /// The call may run.
    Permit(Permit),
    /// The call was refused (denied, declined, unknown, bad arguments, cancelled);
    /// the result says why, for the model.
    Refused(ToolResult),
}

/// What the gate would decide about a call ([`ToolRunner::check`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// It would run (canonical name).
    Allowed(String),
    /// The person would be asked (canonical name).
    NeedsApproval(String),
    /// The policy refuses it (canonical name, reason).
    Denied(String, String),
    /// No tool has that name; the text lists the available ones.
    Unknown(String),
}

/// The tools and the policy a runner uses, replaced together on a reload.
struct Parts {
    registry: Arc<ToolRegistry>,
    policy: Arc<PolicyGate>,
}

/// Runs tool calls through the registry, the policy gate and the safety layer.
///
/// Clones share the tools and the policy in force: [`ToolRunner::replace`]
/// reaches every holder, while a [`ToolRunner::pinned`] copy (a turn's)
/// keeps those it was made with.
#[derive(Clone)]
pub struct ToolRunner {
    parts: Live<Parts>,
    /// Tool health (self-repair), attached once at start-up.
    health: Arc<std::sync::OnceLock<Arc<ToolHealth>>>,
    /// Leak detection, attached once at start-up.
    leaks: Arc<std::sync::OnceLock<LeakGuard>>,
}

impl std::fmt::Debug for ToolRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts = self.parts.get();
        f.debug_struct("ToolRunner")
            .field("registry", &parts.registry)
            .field("policy", &parts.policy)
            .finish()
    }
}

impl ToolRunner {
    /// A runner over these tools and this policy.
    pub fn new(registry: Arc<ToolRegistry>, policy: Arc<PolicyGate>) -> Self {
        Self {
            parts: Live::new(Arc::new(Parts { registry, policy })),
            health: Arc::default(),
            leaks: Arc::default(),
        }
    }

    /// Puts other tools and another policy in force (a configuration
    /// reload) for every clone of this runner; calls already authorized,
    /// and pinned copies, keep the old ones.
    pub fn replace(&self, registry: Arc<ToolRegistry>, policy: Arc<PolicyGate>) {
        self.parts.set(Arc::new(Parts { registry, policy }));
    }

    /// A copy that keeps the tools and policy in force now, whatever is
    /// replaced later (a turn finishes on the settings it started with);
    /// tool health stays shared.
    pub fn pinned(&self) -> Self {
        Self {
            parts: self.parts.pinned(),
            health: Arc::clone(&self.health),
            leaks: Arc::clone(&self.leaks),
        }
    }

    /// Attaches tool health: from then on every call's outcome is counted,
    /// and disabled tools are left out of [`ToolRunner::definitions`] and
    /// refused. Only the first attachment counts.
    pub fn attach_health(&self, health: Arc<ToolHealth>) {
        let _ = self.health.set(health);
    }

    /// Attaches leak detection (calls holding a secret refused, results redacted); the first counts.
    pub fn attach_leaks(&self, leaks: LeakGuard) {
        let _ = self.leaks.set(leaks);
    }

    /// The attached leak detection, if any.
    pub fn leaks(&self) -> Option<&LeakGuard> {
        self.leaks.get()
    }

    /// The attached tool health, if any.
    pub fn health(&self) -> Option<&Arc<ToolHealth>> {
        self.health.get()
    }

    /// Reads which tools are disabled again (other processes may have
    /// changed it); a failed read keeps the last known state.
    pub async fn refresh_health(&self) {
        if let Some(health) = self.health.get()
            && let Err(error) = health.refresh().await
        {
            tracing::warn!(%error, "could not read tool health");
        }
    }

    /// The tools offered to the model: the registry's, without disabled ones.
    pub fn definitions(&self) -> Vec<cairn_core::chat::ToolDefinition> {
        let mut definitions = self.registry().definitions();
        if let Some(health) = self.health.get() {
            definitions.retain(|d| !health.is_disabled(&d.name));
        }
        definitions
    }

    /// The schemas a model request carries after `messages`
    /// ([`ToolRegistry::offered`]), without disabled tools.
    pub fn offered(
        &self,
        messages: &[cairn_core::chat::ChatMessage],
    ) -> Vec<cairn_core::chat::ToolDefinition> {
        let mut offered = self.registry().offered(messages);
        if let Some(health) = self.health.get() {
            offered.retain(|d| !health.is_disabled(&d.name));
        }
        offered
    }

    /// The prompt's lines naming the tools whose schemas load on demand
    /// ([`ToolRegistry::on_demand_listing`]), without disabled tools.
    pub fn on_demand_listing(&self) -> Vec<String> {
        let health = self.health.get();
        self.registry()
            .on_demand_listing(&|name| health.is_some_and(|h| h.is_disabled(name)))
    }

    /// The tools this runner can call now.
    pub fn registry(&self) -> Arc<ToolRegistry> {
        Arc::clone(&self.parts.get().registry)
    }

    /// The policy gate in force (e.g. to drop a session's allow-list).
    pub fn policy(&self) -> Arc<PolicyGate> {
        Arc::clone(&self.parts.get().policy)
    }

    /// Runs one call end to end: [`ToolRunner::authorize`], then [`ToolRunner::execute`].
    /// Never panics and never returns without a result.
    pub async fn run(
        &self,
        call: &ToolCall,
        ctx: &ToolContext,
        approver: &dyn Approver,
    ) -> ToolResult {
        match self.authorize(call, ctx, approver).await {
            Gate::Permit(permit) => self.execute(permit, ctx).await,
            Gate::Refused(result) => result,
        }
    }

    /// Passes one call through the gate: resolves its name, checks its
    /// arguments, asks the policy and, when the policy says so, the approver.
    ///
    /// The agent loop authorizes a response's calls one by one, in order, and
    /// then executes the permitted ones in parallel.
    pub async fn authorize(
        &self,
        call: &ToolCall,
        ctx: &ToolContext,
        approver: &dyn Approver,
    ) -> Gate {
        let started = Instant::now();
        let refuse = |name: String, status: ToolStatus, text: String| {
            Gate::Refused(finish(&call.id, name, status, &text, ctx, started))
        };
        // One call is judged by one set of tools and one policy.
        let parts = self.parts.get();
        let Some(tool) = parts.registry.get(&call.name) else {
            return refuse(
                call.name.clone(),
                ToolStatus::UnknownTool,
                self.unknown_tool_text(&call.name),
            );
        };
        let name = tool.spec().name().to_string();
        if self.health.get().is_some_and(|h| h.is_disabled(&name)) {
            let text = format!(
                "`{name}` is disabled after failing repeatedly; do not call it. A person can re-enable it with `cairn tool enable {name}`."
            );
            return refuse(name, ToolStatus::Denied, text);
        }
        let args = match &call.arguments {
            serde_json::Value::Object(_) => call.arguments.clone(),
            serde_json::Value::Null => serde_json::Value::Object(serde_json::Map::new()),
            other => {
                let text = format!(
                    "invalid arguments: expected a JSON object, got {}",
                    crate::tools::args::json_type(other)
                );
                return refuse(name, ToolStatus::InvalidArguments, text);
            }
        };
        if ctx.cancel.is_cancelled() {
            return refuse(
                name,
                ToolStatus::Cancelled,
                "cancelled before the tool ran".into(),
            );
        }
        // Before any person is asked: a leak is refused, never approved.
        if let Some(text) = leak::check_call(self.leaks.get(), &name, &args, &ctx.session_id).await
        {
            return refuse(name, ToolStatus::Denied, text);
        }

        let plan = tool.plan(&args);
        if let Err((status, text)) = self
            .gate(&parts.policy, call, &name, &plan, &args, ctx, approver)
            .await
        {
            return refuse(name, status, text);
        }
        // A call the tool will make later on the caller's behalf is judged now,
        // in this turn, with this approver.
        if let Some(delegated) = &plan.delegated
            && let Err((status, text)) = self
                .gate_delegated(&parts, call, delegated, ctx, approver)
                .await
        {
            return refuse(name, status, text);
        }
        Gate::Permit(Permit {
            call_id: call.id.clone(),
            name,
            tool,
            args,
            time_limit: plan.time_limit,
            started,
        })
    }

    /// The verdict on the call a tool will make later on the caller's
    /// behalf, judged now, in this turn, with this approver; `Err` says why
    /// the delegating call may not run.
    async fn gate_delegated(
        &self,
        parts: &Parts,
        call: &ToolCall,
        delegated: &DelegatedCall,
        ctx: &ToolContext,
        approver: &dyn Approver,
    ) -> Result<(), (ToolStatus, String)> {
        let Some(inner) = parts.registry.get(&delegated.name) else {
            return Err((
                ToolStatus::UnknownTool,
                self.unknown_tool_text(&delegated.name),
            ));
        };
        let inner_args = match &delegated.arguments {
            serde_json::Value::Null => serde_json::Value::Object(serde_json::Map::new()),
            v => v.clone(),
        };
        let inner_name = inner.spec().name().to_string();
        let inner_plan = inner.plan(&inner_args);
        // It will run unattended, where nobody can approve such a call.
        if inner_plan.needs_person {
            return Err((ToolStatus::Denied, nobody_to_approve(&inner_name)));
        }
        let inner_call = ToolCall {
            id: call.id.clone(),
            name: inner_name.clone(),
            arguments: inner_args.clone(),
        };
        self.gate(
            &parts.policy,
            &inner_call,
            &inner_name,
            &inner_plan,
            &inner_args,
            ctx,
            approver,
        )
        .await
        .map_err(|(status, text)| (status, format!("`{inner_name}`: {text}")))
    }

    /// The policy's verdict on one call (of canonical `name`, planned as
    /// `plan`), asking `approver` when the policy says so; `Err` says why it
    /// may not run.
    #[expect(clippy::too_many_arguments, reason = "one call's whole context")]
    async fn gate(
        &self,
        policy: &PolicyGate,
        call: &ToolCall,
        name: &str,
        plan: &CallPlan,
        args: &serde_json::Value,
        ctx: &ToolContext,
        approver: &dyn Approver,
    ) -> Result<(), (ToolStatus, String)> {
        let risk = plan.gate_risk();
        let decision = policy.decide(name, risk, &ctx.session_id);
        if let PolicyDecision::Deny { reason } = decision {
            return Err((ToolStatus::Denied, format!("denied by policy: {reason}")));
        }
        // Even where the policy would allow it (autonomy `full`), a change to
        // what runs on the person's behalf needs the person to be there.
        if plan.needs_person && !approver.person_present() {
            return Err((ToolStatus::Denied, nobody_to_approve(name)));
        }
        match decision {
            PolicyDecision::Allow | PolicyDecision::Deny { .. } => Ok(()),
            PolicyDecision::Ask => {
                let request = ApprovalRequest::for_call(call, name, risk, args, &ctx.session_id);
                let answer = tokio::select! {
                    biased;
                    () = ctx.cancel.cancelled() => {
                        return Err((ToolStatus::Cancelled, "cancelled while waiting for approval".into()));
                    }
                    answer = approver.approve(&request) => answer,
                };
                match answer {
                    ApprovalAnswer::Yes => Ok(()),
                    ApprovalAnswer::Always => {
                        policy.allow_for_session(&ctx.session_id, name);
                        Ok(())
                    }
                    no => Err((ToolStatus::Declined, not_approved(no, name))),
                }
            }
        }
    }

    /// What the gate would decide about a call, without asking anyone:
    /// `run_parallel` runs the allowed actions and reports the others. With
    /// nobody to ask, a call only a person may approve is denied.
    pub fn check(&self, name: &str, args: &serde_json::Value, session_id: &str) -> Check {
        let parts = self.parts.get();
        let Some(tool) = parts.registry.get(name) else {
            return Check::Unknown(self.unknown_tool_text(name));
        };
        let canonical = tool.spec().name().to_string();
        let plan = tool.plan(args);
        match parts
            .policy
            .decide(&canonical, plan.gate_risk(), session_id)
        {
            PolicyDecision::Deny { reason } => Check::Denied(canonical, reason),
            _ if plan.needs_person => {
                let reason = nobody_to_approve(&canonical);
                Check::Denied(canonical, reason)
            }
            PolicyDecision::Allow => Check::Allowed(canonical),
            PolicyDecision::Ask => Check::NeedsApproval(canonical),
        }
    }

    /// Runs a permitted call under its time limit and cancellation, then
    /// scrubs, caps and frames the output.
    pub async fn execute(&self, permit: Permit, ctx: &ToolContext) -> ToolResult {
        let Permit {
            call_id,
            name,
            tool,
            args,
            time_limit,
            started,
        } = permit;
        let limit = time_limit.unwrap_or(ctx.limits.timeout);
        // A panicking tool must not take the turn (or the daemon) down with it.
        let authorized = Authorized { _sealed: () };
        let execution =
            std::panic::AssertUnwindSafe(tool.execute(args, ctx, &authorized)).catch_unwind();
        let outcome = tokio::select! {
            biased;
            () = ctx.cancel.cancelled() => Ok(Err(ToolError::Cancelled)),
            r = tokio::time::timeout(limit, execution) => match r {
                Ok(result) => result.map_err(|_| ()),
                Err(_) => Ok(Err(ToolError::Timeout(limit))),
            },
        };
        // A refusal by the tool's own rules (a path outside the workspace, a
        // blocked address) is policy, an unavailable dependency (an MCP
        // server restarting) is not the tool's fault, and a failure the tool
        // only reports (a command's own exit status) is what it ran:
        // self-repair ignores all three.
        let not_the_tools = match &outcome {
            Ok(Err(ToolError::NotPermitted(_) | ToolError::Unavailable(_))) => true,
            Ok(Ok(output)) => !output.success && !output.counts_against_tool,
            _ => false,
        };
        let mut images = Vec::new();
        let (status, text) = match outcome {
            Ok(Ok(output)) if output.success => {
                images = output.images;
                (ToolStatus::Success, output.content)
            }
            Ok(Ok(output)) => (ToolStatus::Failed, output.content),
            Ok(Err(error)) => {
                let status = match error {
                    ToolError::Timeout(_) => ToolStatus::TimedOut,
                    ToolError::Cancelled => ToolStatus::Cancelled,
                    ToolError::InvalidArguments(_) => ToolStatus::InvalidArguments,
                    _ => ToolStatus::Failed,
                };
                (status, format!("error: {error}"))
            }
            Err(()) => {
                tracing::error!(tool = %name, "tool panicked");
                (
                    ToolStatus::Failed,
                    "error: the tool crashed (internal error)".into(),
                )
            }
        };
        // Stored and shown to the model: a secret the tool met is named, not shown.
        let text = leak::redacted(self.leaks.get(), &text);
        let mut result = finish(&call_id, name, status, &text, ctx, started);
        result.images = images;
        if let Some(health) = self.health.get() {
            // Scrubbed: the error is kept in the store and shown to people.
            let observed = if not_the_tools {
                ToolStatus::Denied
            } else {
                status
            };
            health.observe(&result.tool, observed, &scrub(&text)).await;
        }
        result
    }

    /// A result for a call that will not run (a hook refused it, its task was
    /// aborted), framed like every other result.
    pub fn refused(
        &self,
        call: &ToolCall,
        status: ToolStatus,
        text: &str,
        ctx: &ToolContext,
    ) -> ToolResult {
        let name = self
            .registry()
            .get(&call.name)
            .map_or_else(|| call.name.clone(), |tool| tool.spec().name().to_string());
        finish(&call.id, name, status, text, ctx, Instant::now())
    }

    fn unknown_tool_text(&self, called: &str) -> String {
        let registry = self.registry();
        let similar = registry.similar(called);
        let available = registry.names().join(", ");
        let shown: String = called.chars().take(64).collect();
        if similar.is_empty() {
            format!("unknown tool `{shown}`; available tools: {available}")
        } else {
            format!(
                "unknown tool `{shown}`; did you mean: {}? available tools: {available}",
                similar.join(", ")
            )
        }
    }
}

/// Scrubs, caps and frames the text, and logs the outcome.
fn finish(
    call_id: &str,
    tool: String,
    status: ToolStatus,
    text: &str,
    ctx: &ToolContext,
    started: Instant,
) -> ToolResult {
    let content = sanitize_output(
        &tool,
        (status != ToolStatus::Success).then(|| status.as_str()),
        text,
        ctx.limits.max_output_chars,
    );
    let duration = started.elapsed();
    // A name the model made up is not a tool: one label for all of them.
    let label = if status == ToolStatus::UnknownTool {
        "unknown".to_string()
    } else {
        tool.clone()
    };
    metrics::counter!("cairn_tool_calls_total", "tool" => label, "outcome" => status.as_str())
        .increment(1);
    tracing::debug!(
        tool = %tool,
        call_id = %call_id,
        session = %ctx.session_id,
        status = status.as_str(),
        duration_ms = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX),
        "tool call finished"
    );
    ToolResult {
        call_id: call_id.to_string(),
        tool,
        status,
        content,
        duration,
        images: Vec::new(),
    }
}
