//! cairn-agent: the agent runtime's tool half — tools, the policy gate and safety.
//!
//! - [`tools`]: the [`Tool`](tools::Tool) trait, the [`ToolRegistry`](tools::ToolRegistry)
//!   with case-insensitive aliases, the [`ToolContext`](tools::ToolContext) every call
//!   receives, and the built-in tools (`shell`, `file_read`, `file_write`, `list_dir`,
//!   `http_request`, `time_now`).
//! - [`policy`]: the deny / ask / allow gate (rules with globs, autonomy levels,
//!   per-session allow-lists).
//! - [`safety`]: credential scrubbing, output caps and framing of tool output.
//! - [`runner`]: [`ToolRunner::run`](runner::ToolRunner::run), the single entry
//!   point through which every tool call passes, wherever it comes from.
//! - [`sandbox`]: [`Sandbox::spawn`](sandbox::Sandbox::spawn), the one way a
//!   process is started for the agent, confined by Landlock to the workspace.
//! - [`nofollow`]: [`Tree`](nofollow::Tree), the one way files below the
//!   workspace are opened, by the file tools and the daemon's own reads and
//!   writes alike: no symbolic link followed, no hard link out, no special file.
//!
//! Module direction (a module uses only those below it): [`names`] (tool
//! names, aliases), [`nofollow`] and [`safety`] at the bottom; [`policy`] (with
//! [`RiskLevel`](policy::RiskLevel)), then [`approval`] and [`sandbox`]; then
//! [`tools`] (with [`ToolStatus`](tools::ToolStatus)); then [`repair`]; then
//! [`runner`]; then [`agent_loop`], [`jobs`] and [`chat`]; then
//! [`delegation`]. Two edges point up, on purpose: tools name
//! [`runner::Authorized`], the proof type of `Tool::execute`, whose
//! constructor is private to the runner module — moving it lower would let
//! more of the crate forge it; and a tool's context carries the turn it
//! runs in ([`agent_loop::ParentTurn`]), which only the loop makes, for the
//! tools that start sub-agents under it. Nothing else below the runner
//! refers to either.
//!
//! Architecture invariant: nothing executes a tool except the runner —
//! `Tool::execute` takes a `runner::Authorized` proof that only the runner can make,
//! after the policy gate — so the gate and the scrubber cannot be bypassed. This crate reads no environment
//! variables or files for its configuration; callers pass plain config structs.

#![cfg_attr(
    test,
    expect(
        clippy::disallowed_methods,
        reason = "unit tests may set up fixtures with blocking std::fs calls; library code may not"
    )
)]

pub mod agent_loop;
pub mod agents;
pub mod approval;
pub mod chat;
pub mod context;
pub mod cost_guard;
pub mod delegation;
pub mod hooks;
pub mod jobs;
pub mod media;
pub mod memory;
pub mod names;
pub mod nofollow;
pub mod policy;
pub mod prompt;
pub mod repair;
pub mod routing;
pub mod runner;
pub mod safety;
pub mod sandbox;
pub mod session;
pub mod skills;
pub mod tools;

pub use agent_loop::{
    AgentLoop, LoopConfig, LoopDelegate, LoopEvent, LoopOutcome, LoopStatus, ToolCallRecord,
};
pub use context::{
    CompactionResult, CompactionStrategy, Compactor, ContextBreakdown, ContextMonitor,
};
pub use cost_guard::{
    AgentProvider, CallTicket, CostGuard, CostGuardError, CostLimitError, CostStatus,
    GuardedProvider,
};
pub use hooks::{Hook, HookFlow, HookRegistry};
pub use jobs::{JobHandle, JobScheduler, JobSpec, JobsConfig};
pub use policy::{AutonomyLevel, PolicyDecision, PolicyGate, RuleAction, ToolPolicyConfig};
pub use runner::{
    ApprovalAnswer, ApprovalRequest, Approver, Authorized, AutoApprove, DenyAll, Gate, Permit,
    ToolResult, ToolRunner, ToolStatus,
};
pub use safety::scrub::scrub;
pub use tools::{
    RiskLevel, Tool, ToolContext, ToolError, ToolLimits, ToolOutput, ToolRegistry, ToolsConfig,
};
