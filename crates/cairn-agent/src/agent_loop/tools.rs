//! Running one response's tool calls: hooks, de-duplication and approvals
//! first (in call order), then the permitted calls in parallel (answering
//! the approval requests of the sub-agents they start), then results in
//! call order.

use std::collections::HashMap;

use cairn_core::chat::ToolCall;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::child::Ask;
use super::{AgentLoop, LoopDelegate, LoopEvent, ToolCallRecord, call_signature};
use crate::hooks::HookFlow;
use crate::runner::{Gate, Permit, ToolResult, ToolStatus};
use crate::safety::scrub;
use crate::tools::{RiskLevel, ToolContext, ToolRegistry};

/// What to do for one call of a batch.
enum Slot {
    /// The result is known already (refused, or reused from an earlier response).
    Ready { result: ToolResult, reused: bool },
    /// Run it; `keep` says whether its result may be reused later in the turn.
    Run {
        permit: Permit,
        keep: Option<String>,
    },
    /// Same call as an earlier one in this batch: copy its result.
    SameAs(usize),
}

/// Results of earlier responses in this turn that identical calls may reuse.
///
/// Within one response identical calls always run once (they would run in
/// parallel anyway). Across responses only results of reusable tools (read-only,
/// and not e.g. `time_now`) are kept, and only until a write or dangerous call:
/// a response that makes one forgets them all, so a `file_read` after a
/// `file_write` reads the file again, and a retried request is sent again.
pub(super) struct TurnCalls {
    reusable: HashMap<String, ToolResult>,
    /// Approval requests of the sub-agents the turn's calls start.
    asks: mpsc::UnboundedReceiver<Ask>,
}

impl TurnCalls {
    pub(super) fn new(asks: mpsc::UnboundedReceiver<Ask>) -> Self {
        Self {
            reusable: HashMap::new(),
            asks,
        }
    }

    /// Runs a batch and returns one result per call, in call order.
    pub(super) async fn run(
        &mut self,
        agent: &AgentLoop,
        delegate: &dyn LoopDelegate,
        calls: &[ToolCall],
        ctx: &ToolContext,
        records: &mut Vec<ToolCallRecord>,
        first_index: usize,
    ) -> Vec<ToolResult> {
        let registry = agent.runner().registry();
        let mut calls: Vec<ToolCall> = calls.to_vec();
        // Hooks first, in order: they may rewrite a call, which changes what it does.
        let hook_refusals = before_hooks(agent, &mut calls).await;
        let mutates = mutates(&registry, &calls, &hook_refusals);
        if mutates {
            self.reusable.clear();
        }
        let slots = self
            .plan(
                agent,
                delegate,
                &registry,
                &calls,
                hook_refusals,
                mutates,
                ctx,
            )
            .await;
        let ran = run_permitted(
            agent,
            delegate,
            &calls,
            slots,
            ctx,
            first_index,
            &mut self.asks,
        )
        .await;
        self.finish(agent, delegate, &calls, ran, ctx, records)
            .await
    }

    /// In order: de-duplication, policy and approval.
    #[expect(
        clippy::too_many_arguments,
        reason = "one step of `run`, handed what that step reads"
    )]
    async fn plan(
        &self,
        agent: &AgentLoop,
        delegate: &dyn LoopDelegate,
        registry: &ToolRegistry,
        calls: &[ToolCall],
        hook_refusals: Vec<Option<String>>,
        mutates: bool,
        ctx: &ToolContext,
    ) -> Vec<Slot> {
        let runner = agent.runner();
        let mut slots = Vec::with_capacity(calls.len());
        let mut in_batch: HashMap<String, usize> = HashMap::new();
        for (index, (call, refusal)) in calls.iter().zip(hook_refusals).enumerate() {
            if let Some(text) = refusal {
                slots.push(Slot::Ready {
                    result: runner.refused(call, ToolStatus::Denied, &text, ctx),
                    reused: false,
                });
                continue;
            }
            let tool = registry.get(&call.name);
            let name = tool
                .as_ref()
                .map_or(call.name.as_str(), |t| t.spec().name());
            let signature = call_signature(name, &call.arguments);
            if let Some(earlier) = self.reusable.get(&signature) {
                let mut result = earlier.clone();
                result.call_id.clone_from(&call.id);
                slots.push(Slot::Ready {
                    result,
                    reused: true,
                });
                continue;
            }
            if let Some(&first) = in_batch.get(&signature) {
                slots.push(Slot::SameAs(first));
                continue;
            }
            in_batch.insert(signature.clone(), index);
            // Results of a batch that also writes are not kept: they ran alongside the write.
            let keep = (!mutates && tool.is_some_and(|t| t.spec().reusable())).then_some(signature);
            slots.push(
                match runner.authorize(call, ctx, delegate.approver()).await {
                    Gate::Permit(permit) => Slot::Run { permit, keep },
                    Gate::Refused(result) => Slot::Ready {
                        result,
                        reused: false,
                    },
                },
            );
        }
        slots
    }

    /// In order: copies, records, after-call hooks.
    async fn finish(
        &mut self,
        agent: &AgentLoop,
        delegate: &dyn LoopDelegate,
        calls: &[ToolCall],
        mut ran: Ran,
        ctx: &ToolContext,
        records: &mut Vec<ToolCallRecord>,
    ) -> Vec<ToolResult> {
        let mut out: Vec<ToolResult> = Vec::with_capacity(calls.len());
        for (index, call) in calls.iter().enumerate() {
            let (result, reused) = match (ran.copy_of[index], ran.results[index].take()) {
                (Some(first), _) => {
                    let mut copy = out[first].clone();
                    copy.call_id.clone_from(&call.id);
                    (copy, true)
                }
                (None, Some(pair)) => pair,
                (None, None) => (
                    agent.runner().refused(
                        call,
                        ToolStatus::Cancelled,
                        "the tool task was aborted",
                        ctx,
                    ),
                    false,
                ),
            };
            if reused {
                delegate.on_event(LoopEvent::ToolFinished {
                    call_id: result.call_id.clone(),
                    tool: result.tool.clone(),
                    status: result.status,
                });
            }
            // Only answers of a tool that ran are worth reusing, not timeouts or cancellations.
            if let Some(signature) = ran.keep[index].take()
                && matches!(result.status, ToolStatus::Success | ToolStatus::Failed)
            {
                self.reusable.insert(signature, result.clone());
            }
            agent.hooks().after_tool_call(call, &result).await;
            records.push(ToolCallRecord {
                call_id: call.id.clone(),
                tool: result.tool.clone(),
                arguments: scrubbed(&agent.clean_args(&call.arguments)),
                status: result.status,
                duration_ms: u64::try_from(result.duration.as_millis()).unwrap_or(u64::MAX),
                reused,
            });
            out.push(result);
        }
        out
    }
}

/// Runs the before-call hooks in order; a refusal per call, or none.
async fn before_hooks(agent: &AgentLoop, calls: &mut [ToolCall]) -> Vec<Option<String>> {
    let mut hook_refusals = Vec::with_capacity(calls.len());
    for call in calls {
        hook_refusals.push(match agent.hooks().before_tool_call(call).await {
            HookFlow::Cancel(reason) => Some(format!("refused by a hook: {reason}")),
            HookFlow::Continue => None,
        });
    }
    hook_refusals
}

/// Whether the batch makes a write or dangerous call, which may change what
/// any earlier read saw.
fn mutates(registry: &ToolRegistry, calls: &[ToolCall], hook_refusals: &[Option<String>]) -> bool {
    calls.iter().zip(hook_refusals).any(|(call, refused)| {
        refused.is_none()
            && registry
                .get(&call.name)
                .is_some_and(|tool| tool.spec().risk() != RiskLevel::ReadOnly)
    })
}

/// Each call's state once the permitted ones ran, by call index.
struct Ran {
    /// The result, and whether it was reused.
    results: Vec<Option<(ToolResult, bool)>>,
    /// The earlier call of the batch whose result this one copies.
    copy_of: Vec<Option<usize>>,
    /// The key to keep the result under for reuse.
    keep: Vec<Option<String>>,
}

/// Runs every permitted call at once, keeping each result as it arrives
/// and answering, one at a time, the approval requests of the sub-agents
/// they start.
async fn run_permitted(
    agent: &AgentLoop,
    delegate: &dyn LoopDelegate,
    calls: &[ToolCall],
    slots: Vec<Slot>,
    ctx: &ToolContext,
    first_index: usize,
    asks: &mut mpsc::UnboundedReceiver<Ask>,
) -> Ran {
    let count = calls.len();
    let mut ran = Ran {
        results: vec![None; count],
        copy_of: vec![None; count],
        keep: vec![None; count],
    };
    let mut running = JoinSet::new();
    for (index, slot) in slots.into_iter().enumerate() {
        match slot {
            Slot::Run { permit, keep: key } => {
                ran.keep[index] = key;
                delegate.on_event(LoopEvent::ToolStarted {
                    call_id: calls[index].id.clone(),
                    tool: permit.tool_name().to_string(),
                });
                let runner = agent.runner().clone();
                let ctx = ctx.clone();
                running.spawn(async move { (index, runner.execute(permit, &ctx).await) });
            }
            Slot::Ready { result, reused } => ran.results[index] = Some((result, reused)),
            Slot::SameAs(first) => ran.copy_of[index] = Some(first),
        }
    }
    loop {
        let joined = tokio::select! {
            joined = running.join_next() => joined,
            Some(ask) = asks.recv() => {
                answer(delegate, ask, ctx).await;
                continue;
            }
        };
        let Some(joined) = joined else { break };
        match joined {
            Ok((index, result)) => {
                delegate.on_event(LoopEvent::ToolFinished {
                    call_id: result.call_id.clone(),
                    tool: result.tool.clone(),
                    status: result.status,
                });
                // Kept as soon as it exists (at its final place), so a
                // crash while slower calls still run does not lose it.
                delegate
                    .on_message(first_index + index, &result.to_message())
                    .await;
                ran.results[index] = Some((result, false));
            }
            // The runner catches tool panics; a join error means the task
            // itself was aborted. Its slot is filled as cancelled in `finish`.
            Err(error) => tracing::error!(%error, "tool task ended abnormally"),
        }
    }
    ran
}

/// Asks this turn's approver a sub-agent's question; a cancelled turn
/// answers nothing (the sub-agent, cancelled too, stops waiting).
async fn answer(delegate: &dyn LoopDelegate, ask: Ask, ctx: &ToolContext) {
    let answer = tokio::select! {
        biased;
        () = ctx.cancel.cancelled() => return,
        answer = delegate.approver().approve(&ask.request) => answer,
    };
    // The sub-agent may have stopped waiting meanwhile.
    let _ = ask.reply.send(answer);
}

fn scrubbed(arguments: &serde_json::Value) -> serde_json::Value {
    let text = arguments.to_string();
    let clean = scrub(&text);
    serde_json::from_str(&clean).unwrap_or(serde_json::Value::String(clean.into_owned()))
}
