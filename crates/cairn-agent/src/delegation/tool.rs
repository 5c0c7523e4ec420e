//! `agent_delegate { task, agent?, tools?, max_iterations?, budget_cents? }`:
//! hands a task to a sub-agent and returns its answer with a line of usage.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{DEFAULT_MAX_ITERATIONS, Delegation, Delegator};
use crate::runner::Authorized;
use crate::tools::{
    CallOutcome, RiskLevel, Tool, ToolContext, ToolError, ToolOutput, ToolSpec, args, schema,
};

/// Longest a call waits for its sub-agent: past the sub-agent's own time
/// limit (a job's), which ends it first with a record saying so.
pub(super) const CALL_LIMIT: Duration =
    Duration::from_secs(cairn_core::job::DEFAULT_TIMEOUT.as_secs() + 60);

/// Most model calls a call may give its sub-agent (its parent's own limit
/// applies too).
const MAX_ITERATIONS: u64 = 1_000;

/// Read-only: starting a sub-agent changes nothing by itself; each of its
/// calls passes the gate. Never reused: the same task asked twice runs twice.
static DELEGATE: LazyLock<ToolSpec> = LazyLock::new(|| {
    ToolSpec::new(
        "agent_delegate",
        RiskLevel::ReadOnly,
        "Hand a self-contained task to a sub-agent and get its final answer, with a line of usage. \
         The sub-agent starts from a fresh context holding only `task` (write everything it needs in it) \
         and, when `agent` names a configured agent, that agent's identity. It may use the `tools` you \
         list (names or globs such as \"file_*\"; all of yours when left out), never a tool you may not \
         use. Several calls in one step run in parallel. Its approvals are asked of the same person.",
    )
    .not_reusable()
    .time_limit(CALL_LIMIT)
    .params(schema::object(
        json!({
            "task": {"type": "string", "description": "the whole task: the sub-agent sees nothing else"},
            "agent": {"type": "string", "description": "a configured agent's id to act as (its identity and model)"},
            "tools": {"type": "array", "items": {"type": "string"}, "description": "tool names or globs it may use"},
            "max_iterations": {"type": "integer", "minimum": 1, "description": "model calls it may make (default 10)"},
            "budget_cents": {"type": "number", "exclusiveMinimum": 0, "description": "what it may spend, in US cents"}
        }),
        &["task"],
    ))
});

/// The `agent_delegate` tool.
pub struct DelegateTool {
    delegator: Arc<Delegator>,
}

impl DelegateTool {
    /// The tool over `delegator`.
    pub fn new(delegator: Arc<Delegator>) -> Self {
        Self { delegator }
    }
}

/// The call's arguments as a [`Delegation`].
fn delegation(args: &Value) -> Result<Delegation, ToolError> {
    let mut delegation = Delegation::new(args::nonblank(args, "task")?);
    delegation.agent = args::opt_str(args, "agent")?
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(String::from);
    delegation.tools = match args.get("tools") {
        None | Some(Value::Null) => None,
        Some(Value::Array(items)) => Some(
            items
                .iter()
                .map(|item| match item {
                    Value::String(name) if !name.trim().is_empty() => Ok(name.trim().to_string()),
                    _ => Err(ToolError::InvalidArguments(
                        "`tools` must be a list of tool names or globs".into(),
                    )),
                })
                .collect::<Result<_, _>>()?,
        ),
        Some(_) => {
            return Err(ToolError::InvalidArguments(
                "`tools` must be a list of tool names or globs".into(),
            ));
        }
    };
    let iterations = args::count(
        args,
        "max_iterations",
        u64::from(DEFAULT_MAX_ITERATIONS),
        MAX_ITERATIONS,
    )?;
    delegation.max_iterations = u32::try_from(iterations).unwrap_or(DEFAULT_MAX_ITERATIONS);
    delegation.budget_micros = match args.get("budget_cents") {
        None | Some(Value::Null) => None,
        Some(value) => {
            let cents = value.as_f64().ok_or_else(|| {
                ToolError::InvalidArguments("`budget_cents` must be a number above 0".into())
            })?;
            Some(Delegation::budget_from_cents(cents)?)
        }
    };
    Ok(delegation)
}

#[async_trait]
impl Tool for DelegateTool {
    fn spec(&self) -> &ToolSpec {
        &DELEGATE
    }

    async fn execute(&self, args: Value, ctx: &ToolContext, _: &Authorized) -> CallOutcome {
        let delegation = delegation(&args)?;
        let done = self.delegator.delegate(delegation, ctx).await?;
        let text = done.report();
        Ok(if done.answered() {
            ToolOutput::ok(text)
        } else {
            // The sub-agent's failure, not the tool's: self-repair leaves it alone.
            ToolOutput::reported_failure(text)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_read_with_defaults_and_named_mistakes() {
        let d = delegation(&json!({"task": "look it up"})).unwrap();
        assert_eq!(
            (
                d.task.as_str(),
                d.agent,
                d.tools,
                d.max_iterations,
                d.budget_micros
            ),
            ("look it up", None, None, 10, None)
        );
        let d = delegation(&json!({
            "task": "t", "agent": " family ", "tools": ["file_*", "web_search"],
            "max_iterations": 3, "budget_cents": 2.5
        }))
        .unwrap();
        assert_eq!(d.agent.as_deref(), Some("family"));
        assert_eq!(d.tools.unwrap(), ["file_*", "web_search"]);
        assert_eq!((d.max_iterations, d.budget_micros), (3, Some(25_000)));
        for (bad, key) in [
            (json!({}), "task"),
            (json!({"task": "  "}), "task"),
            (json!({"task": "t", "tools": "shell"}), "tools"),
            (json!({"task": "t", "tools": [1]}), "tools"),
            (json!({"task": "t", "max_iterations": 0}), "max_iterations"),
            (json!({"task": "t", "budget_cents": 0}), "budget_cents"),
            (json!({"task": "t", "budget_cents": "5"}), "budget_cents"),
        ] {
            match delegation(&bad) {
                Err(ToolError::InvalidArguments(why)) => assert!(why.contains(key), "{bad}: {why}"),
                other => panic!("{bad}: {other:?}"),
            }
        }
    }
}
