//! `job_subtasks`: a job's agent runs several tasks in parallel on its
//! behalf and gets their results back in the order given. Each subtask is
//! a sub-agent ([`Delegator::delegate`]) with all its job's tools, recorded
//! as a job whose parent is that job; its approvals are the job's
//! approver's to answer, so it may do what its job may, no more and no
//! less. One level only: a subtask cannot start subtasks (it may still
//! delegate, within `agent.max_delegation_depth`).

use std::fmt::Write as _;
use std::sync::{Arc, LazyLock};

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{Delegation, Delegator};
use crate::jobs::job_id_from_session;
use crate::runner::Authorized;
use crate::tools::{
    CallOutcome, RiskLevel, Tool, ToolContext, ToolError, ToolOutput, ToolSpec, schema,
};

/// Most subtasks one call may start.
pub const MAX_SUBTASKS: usize = 8;

/// The `job_subtasks` tool.
pub struct SubtasksTool {
    delegator: Arc<Delegator>,
}

impl SubtasksTool {
    /// The tool over `delegator`, which runs its subtasks.
    pub fn new(delegator: Arc<Delegator>) -> Self {
        Self { delegator }
    }
}

/// One task of a call: its title (when given) and its description.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Task {
    title: Option<String>,
    description: String,
}

/// The tasks of a call: strings, or `{title, description}` objects.
fn tasks(args: &Value) -> Result<Vec<Task>, ToolError> {
    let bad = |why: String| ToolError::InvalidArguments(why);
    let Some(tasks) = args.get("tasks").and_then(Value::as_array) else {
        return Err(bad("`tasks` must be an array of task descriptions".into()));
    };
    if tasks.is_empty() || tasks.len() > MAX_SUBTASKS {
        return Err(bad(format!(
            "`tasks` must hold 1 to {MAX_SUBTASKS} tasks, not {}",
            tasks.len()
        )));
    }
    tasks
        .iter()
        .enumerate()
        .map(|(i, task)| match task {
            Value::String(description) => Ok(Task {
                title: None,
                description: description.clone(),
            }),
            Value::Object(fields) => {
                let description = fields.get("description").and_then(Value::as_str);
                let Some(description) = description else {
                    return Err(bad(format!("tasks[{i}].description must be a string")));
                };
                Ok(Task {
                    title: fields
                        .get("title")
                        .and_then(Value::as_str)
                        .map(String::from),
                    description: description.to_string(),
                })
            }
            _ => Err(bad(format!(
                "tasks[{i}] must be a description or {{\"title\", \"description\"}}"
            ))),
        })
        .collect()
}

/// Read-only: starting subtasks changes nothing by itself; each of their
/// tool calls passes the gate on its own.
static SUBTASKS: LazyLock<ToolSpec> = LazyLock::new(|| {
    let task = json!({
        "anyOf": [
            {"type": "string"},
            schema::object(
                json!({"title": {"type": "string"}, "description": {"type": "string"}}),
                &["description"],
            )
        ]
    });
    ToolSpec::new(
        "job_subtasks",
        RiskLevel::ReadOnly,
        "Inside a background job only: run up to 8 independent tasks as jobs in parallel and wait for their results, returned in the order given. Each task is a self-contained description (or {title, description}); subtasks use the same tools under the same rules.",
    )
    .not_reusable()
    .time_limit(super::tool::CALL_LIMIT)
    .params(schema::object(
        json!({
            "tasks": {"type": "array", "minItems": 1, "maxItems": MAX_SUBTASKS, "items": task}
        }),
        &["tasks"],
    ))
});

#[async_trait]
impl Tool for SubtasksTool {
    fn spec(&self) -> &ToolSpec {
        &SUBTASKS
    }

    async fn execute(&self, args: Value, ctx: &ToolContext, _: &Authorized) -> CallOutcome {
        let Some(job) = job_id_from_session(&ctx.session_id) else {
            return Err(ToolError::NotPermitted(
                "job_subtasks runs only inside a background job; start one with /job".into(),
            ));
        };
        let parent = self.delegator.parent_of(ctx)?;
        let record = self
            .delegator
            .scheduler()?
            .get(job)
            .await
            .map_err(|e| ToolError::Failed(e.to_string()))?
            .ok_or_else(|| ToolError::Failed(format!("job {job} is not recorded")))?;
        // One level: a subtask's own subtasks would multiply without bound.
        if record.parent_id.is_some() {
            return Err(ToolError::NotPermitted(
                "a subtask cannot start subtasks of its own; do the work here".into(),
            ));
        }
        let tasks = tasks(&args)?;
        // As many model calls as the job itself may make.
        let iterations = parent.agent().config().max_iterations;
        let runs = tasks.iter().map(|task| {
            let mut delegation = Delegation::new(task.description.clone());
            delegation.max_iterations = iterations;
            delegation.title.clone_from(&task.title);
            self.delegator.delegate(delegation, ctx)
        });
        let ended = futures::future::join_all(runs).await;
        let mut text = String::new();
        for (i, done) in ended.into_iter().enumerate() {
            let job = done?.end.record;
            let outcome = job
                .result
                .as_deref()
                .or(job.error.as_deref())
                .unwrap_or("(no output)");
            let _ = writeln!(
                text,
                "## {}. {} ({}, job {})\n{outcome}\n",
                i + 1,
                job.title,
                job.state,
                job.id
            );
        }
        Ok(ToolOutput::ok(text.trim_end()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_are_descriptions_or_titled_objects_within_the_limit() {
        let tasks = tasks(
            &json!({"tasks": ["look up a\nin detail", {"title": "B", "description": "do b"}]}),
        )
        .unwrap();
        assert_eq!(
            tasks,
            [
                Task {
                    title: None,
                    description: "look up a\nin detail".into()
                },
                Task {
                    title: Some("B".into()),
                    description: "do b".into()
                }
            ]
        );
        let many: Vec<String> = (0..=MAX_SUBTASKS).map(|i| format!("t{i}")).collect();
        for bad in [
            json!({}),
            json!({"tasks": []}),
            json!({"tasks": many}),
            json!({"tasks": [3]}),
        ] {
            assert!(
                matches!(super::tasks(&bad), Err(ToolError::InvalidArguments(_))),
                "{bad}"
            );
        }
    }

    #[tokio::test]
    async fn outside_a_job_it_says_where_it_runs() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ToolContext::new(dir.path(), "chat-session");
        let delegator = Arc::new(Delegator::new(super::super::DelegationConfig::from_agent(
            &cairn_core::config::AgentConfig {
                name: "cairn".into(),
                max_iterations: 5,
                max_parallel_jobs: 1,
                max_delegation_depth: 2,
                max_parallel_delegations: 4,
                undo_depth: 1,
                session_idle: std::time::Duration::from_secs(60),
                approval_timeout: std::time::Duration::from_secs(60),
                approval_channel: None,
            },
            "ada",
        )));
        let error = SubtasksTool::new(delegator)
            .execute(json!({"tasks": ["a"]}), &ctx, &Authorized::for_tests())
            .await
            .unwrap_err();
        assert!(
            error.to_string().contains("only inside a background job"),
            "{error}"
        );
    }
}
