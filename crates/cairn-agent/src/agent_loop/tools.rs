//! Running one response's tool calls: hooks, de-duplication and approvals
//! first (in call order), then the permitted calls in parallel, then results
//! in call order.

use std::collections::HashMap;

use cairn_core::chat::ToolCall;
use tokio::task::JoinSet;

use super::{AgentLoop, LoopDelegate, LoopEvent, ToolCallRecord, call_signature};
use crate::hooks::HookFlow;
use crate::runner::{Gate, Permit, ToolResult, ToolStatus};
use crate::safety::scrub;
use crate::tools::ToolContext;

/// What to do for one call of a batch.
enum Slot {
    /// The result is known already (refused, or reused from earlier in the turn).
    Ready { result: ToolResult, reused: bool },
    /// Run it.
    Run(Permit),
    /// Same call as an earlier one in this batch: copy its result.
    SameAs(usize),
}

/// The calls already made this turn, by signature, so identical calls run once.
#[derive(Default)]
pub(super) struct TurnCalls {
    done: HashMap<String, ToolResult>,
}

impl TurnCalls {
    /// Runs a batch and returns one result per call, in call order.
    pub(super) async fn run(
        &mut self,
        agent: &AgentLoop,
        delegate: &dyn LoopDelegate,
        calls: &[ToolCall],
        ctx: &ToolContext,
        records: &mut Vec<ToolCallRecord>,
    ) -> Vec<ToolResult> {
        let runner = agent.runner();
        let mut calls: Vec<ToolCall> = calls.to_vec();
        let mut slots = Vec::with_capacity(calls.len());
        let mut signatures = Vec::with_capacity(calls.len());
        let mut in_batch: HashMap<String, usize> = HashMap::new();

        // Phase 1, in order: hooks, de-duplication, policy and approval.
        for (index, call) in calls.iter_mut().enumerate() {
            if let HookFlow::Cancel(reason) = agent.hooks().before_tool_call(call).await {
                let text = format!("refused by a hook: {reason}");
                signatures.push(None);
                slots.push(Slot::Ready {
                    result: runner.refused(call, ToolStatus::Denied, &text, ctx),
                    reused: false,
                });
                continue;
            }
            let name = runner
                .registry()
                .resolve(&call.name)
                .unwrap_or(&call.name)
                .to_string();
            let signature = call_signature(&name, &call.arguments);
            if let Some(earlier) = self.done.get(&signature) {
                let mut result = earlier.clone();
                result.call_id.clone_from(&call.id);
                slots.push(Slot::Ready {
                    result,
                    reused: true,
                });
                signatures.push(None);
                continue;
            }
            if let Some(&first) = in_batch.get(&signature) {
                slots.push(Slot::SameAs(first));
                signatures.push(None);
                continue;
            }
            in_batch.insert(signature.clone(), index);
            signatures.push(Some(signature));
            slots.push(
                match runner.authorize(call, ctx, delegate.approver()).await {
                    Gate::Permit(permit) => Slot::Run(permit),
                    Gate::Refused(result) => Slot::Ready {
                        result,
                        reused: false,
                    },
                },
            );
        }

        // Phase 2: every permitted call at once.
        let count = calls.len();
        let mut results: Vec<Option<(ToolResult, bool)>> = vec![None; count];
        let mut copy_of: Vec<Option<usize>> = vec![None; count];
        let mut running = JoinSet::new();
        for (index, slot) in slots.into_iter().enumerate() {
            match slot {
                Slot::Run(permit) => {
                    delegate.on_event(LoopEvent::ToolStarted {
                        call_id: calls[index].id.clone(),
                        tool: permit.tool_name().to_string(),
                    });
                    let runner = runner.clone();
                    let ctx = ctx.clone();
                    running.spawn(async move { (index, runner.execute(permit, &ctx).await) });
                }
                Slot::Ready { result, reused } => results[index] = Some((result, reused)),
                Slot::SameAs(first) => copy_of[index] = Some(first),
            }
        }
        while let Some(joined) = running.join_next().await {
            match joined {
                Ok((index, result)) => {
                    delegate.on_event(LoopEvent::ToolFinished {
                        call_id: result.call_id.clone(),
                        tool: result.tool.clone(),
                        status: result.status,
                    });
                    results[index] = Some((result, false));
                }
                // The runner catches tool panics; a join error means the task
                // itself was aborted. Its slot is filled as cancelled below.
                Err(error) => tracing::error!(%error, "tool task ended abnormally"),
            }
        }

        // Phase 3, in order: copies, records, after-call hooks.
        let mut out: Vec<ToolResult> = Vec::with_capacity(count);
        for (index, call) in calls.iter().enumerate() {
            let (result, reused) = match (copy_of[index], results[index].take()) {
                (Some(first), _) => {
                    let mut copy = out[first].clone();
                    copy.call_id.clone_from(&call.id);
                    (copy, true)
                }
                (None, Some(pair)) => pair,
                (None, None) => (
                    runner.refused(
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
            if let Some(signature) = &signatures[index]
                && result.status != ToolStatus::Cancelled
            {
                self.done.insert(signature.clone(), result.clone());
            }
            agent.hooks().after_tool_call(call, &result).await;
            records.push(ToolCallRecord {
                call_id: call.id.clone(),
                tool: result.tool.clone(),
                arguments: scrubbed(&call.arguments),
                status: result.status,
                duration_ms: u64::try_from(result.duration.as_millis()).unwrap_or(u64::MAX),
                reused,
            });
            out.push(result);
        }
        out
    }
}

fn scrubbed(arguments: &serde_json::Value) -> serde_json::Value {
    let text = arguments.to_string();
    let clean = scrub(&text);
    serde_json::from_str(&clean).unwrap_or(serde_json::Value::String(clean.into_owned()))
}
