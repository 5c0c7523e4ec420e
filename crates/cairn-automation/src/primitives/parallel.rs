//! `run_parallel`: 1-50 tool calls at once, results in input order.
//!
//! Each action passes the policy gate on its own ([`ToolRunner::check`]):
//! an allowed one runs, one that would ask the person is not run and is
//! reported `requires_approval` (the model can call it directly, where the
//! person is asked), a denied one is reported `denied`. One failure cancels
//! nothing. At most [`MAX_SAME_TOOL`] calls of one tool run at a time.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use async_trait::async_trait;
use cairn_agent::runner::{Authorized, Check, DenyAll, ToolStatus};
use cairn_agent::tools::{
    CallOutcome, RiskLevel, Tool, ToolContext, ToolError, ToolOutput, ToolSpec, schema,
};
use cairn_core::chat::ToolCall;
use serde_json::{Value, json};
use tokio::sync::Semaphore;

use super::{RunnerLink, is_primitive};

/// The tool's name.
pub const RUN_PARALLEL: &str = "run_parallel";
/// Most actions in one call.
pub const MAX_ACTIONS: usize = 50;
/// Most calls of the same tool running at once within one `run_parallel`.
pub const MAX_SAME_TOOL: usize = 8;

/// `run_parallel`.
pub struct RunParallelTool {
    link: Arc<RunnerLink>,
}

impl RunParallelTool {
    /// The tool, running calls through the runner behind `link`.
    pub fn new(link: Arc<RunnerLink>) -> Self {
        Self { link }
    }
}

/// One action's outcome, before it is numbered.
enum Outcome {
    Ran(cairn_agent::ToolResult),
    NotRun(&'static str, String),
}

fn parse_actions(args: &Value) -> Result<Vec<(String, Value)>, ToolError> {
    let Some(actions) = args.get("actions").and_then(Value::as_array) else {
        return Err(ToolError::InvalidArguments(
            "`actions` must be an array of {name, params}".into(),
        ));
    };
    if actions.is_empty() || actions.len() > MAX_ACTIONS {
        return Err(ToolError::InvalidArguments(format!(
            "`actions` must hold 1 to {MAX_ACTIONS} actions, got {}",
            actions.len()
        )));
    }
    actions
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let name = a
                .get("name")
                .and_then(Value::as_str)
                .filter(|n| !n.trim().is_empty())
                .ok_or_else(|| {
                    ToolError::InvalidArguments(format!("actions[{i}]: missing string `name`"))
                })?;
            let params = match a.get("params") {
                None | Some(Value::Null) => json!({}),
                Some(p @ Value::Object(_)) => p.clone(),
                Some(_) => {
                    return Err(ToolError::InvalidArguments(format!(
                        "actions[{i}].params must be an object"
                    )));
                }
            };
            Ok((name.to_string(), params))
        })
        .collect()
}

/// Read-only for the gate: each action is judged by the gate itself.
static RUN_PARALLEL_SPEC: LazyLock<ToolSpec> = LazyLock::new(|| {
    let action = schema::object(
        json!({"name": {"type": "string"}, "params": {"type": "object"}}),
        &["name"],
    );
    ToolSpec::new(
        RUN_PARALLEL,
        RiskLevel::ReadOnly,
        "Run 1-50 tool calls at once; results in input order, one failure stops nothing. \
         Calls needing approval are not run (requires_approval).",
    )
    .params(schema::object(
        json!({"actions": {"type": "array", "items": action}}),
        &["actions"],
    ))
    .not_reusable()
});

#[async_trait]
impl Tool for RunParallelTool {
    fn spec(&self) -> &ToolSpec {
        &RUN_PARALLEL_SPEC
    }

    async fn execute(&self, args: Value, ctx: &ToolContext, _: &Authorized) -> CallOutcome {
        let actions = parse_actions(&args)?;
        let runner = self.link.get()?;
        let mut limits: HashMap<String, Arc<Semaphore>> = HashMap::new();
        let mut work = Vec::with_capacity(actions.len());
        for (index, (name, params)) in actions.iter().enumerate() {
            let check = if is_primitive(name) {
                Err(format!("`{name}` cannot run inside run_parallel"))
            } else {
                Ok(runner.check(name, params, &ctx.session_id))
            };
            let runner = Arc::clone(&runner);
            let call = ToolCall {
                id: format!("parallel-{index}"),
                name: name.clone(),
                arguments: params.clone(),
            };
            let slot = match &check {
                Ok(Check::Allowed(canonical)) => Some(Arc::clone(
                    limits
                        .entry(canonical.clone())
                        .or_insert_with(|| Arc::new(Semaphore::new(MAX_SAME_TOOL))),
                )),
                _ => None,
            };
            work.push(async move {
                match check {
                    Err(text) => Outcome::NotRun("invalid", text),
                    Ok(Check::Unknown(text)) => Outcome::NotRun("unknown_tool", text),
                    Ok(Check::Denied(_, reason)) => {
                        Outcome::NotRun("denied", format!("denied by policy: {reason}"))
                    }
                    Ok(Check::NeedsApproval(canonical)) => Outcome::NotRun(
                        "requires_approval",
                        format!("`{canonical}` needs the person's approval and was not run; call it directly to ask"),
                    ),
                    Ok(Check::Allowed(_)) => {
                        let _permit = match &slot {
                            Some(s) => s.acquire().await.ok(),
                            None => None,
                        };
                        // DenyAll: the check said no question is needed; if the
                        // policy changed since, "ask" must mean "not run".
                        Outcome::Ran(runner.run(&call, ctx, &DenyAll).await)
                    }
                }
            });
        }
        let outcomes = futures::future::join_all(work).await;
        let mut results = Vec::with_capacity(outcomes.len());
        let mut succeeded = 0;
        for (index, ((name, _), outcome)) in actions.iter().zip(outcomes).enumerate() {
            let entry = match outcome {
                Outcome::Ran(r) if r.status == ToolStatus::Success => {
                    succeeded += 1;
                    json!({"index": index, "name": name, "success": true, "data": r.content})
                }
                Outcome::Ran(r) => json!({
                    "index": index, "name": name, "success": false,
                    "status": r.status.as_str(), "error": r.content,
                }),
                Outcome::NotRun(status, text) => json!({
                    "index": index, "name": name, "success": false,
                    "status": status, "error": text,
                }),
            };
            results.push(entry);
        }
        ToolOutput::json(&json!({
            "total": actions.len(),
            "succeeded": succeeded,
            "failed": actions.len() - succeeded,
            "results": results,
        }))
    }
}
