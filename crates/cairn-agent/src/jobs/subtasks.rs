//! `job_subtasks`: a job's agent runs several tasks as jobs in parallel on
//! its behalf and gets their results back in the order given
//! ([`JobScheduler::spawn_batch`]). Each subtask is a job of its own under
//! the same scheduler, limits and policy gate (with its parent's allowed
//! tools); the parent lends its slot while it waits. One level only: a
//! subtask cannot start subtasks.
//!
//! The tool needs the scheduler, and the scheduler holds the tool runner
//! that holds this tool: the scheduler is attached once it is built
//! ([`SubtasksTool::attach`]).

use std::fmt::Write as _;
use std::sync::{LazyLock, OnceLock};

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{JobScheduler, JobSpec, job_id_from_session};
use crate::runner::Authorized;
use crate::tools::{
    CallOutcome, RiskLevel, Tool, ToolContext, ToolError, ToolOutput, ToolSpec, schema,
};

/// Most subtasks one call may start.
pub const MAX_SUBTASKS: usize = 8;

/// The `job_subtasks` tool.
#[derive(Default)]
pub struct SubtasksTool {
    scheduler: OnceLock<JobScheduler>,
}

impl SubtasksTool {
    /// A tool with no scheduler yet: calls fail as unavailable until
    /// [`SubtasksTool::attach`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Gives the tool the scheduler its subtasks run on; only the first counts.
    pub fn attach(&self, scheduler: JobScheduler) {
        let _ = self.scheduler.set(scheduler);
    }
}

/// The tasks of a call: strings, or `{title, description}` objects.
fn specs(args: &Value, owner: &str) -> Result<Vec<JobSpec>, ToolError> {
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
            Value::String(description) => Ok(JobSpec::from_description(description, owner)),
            Value::Object(fields) => {
                let description = fields.get("description").and_then(Value::as_str);
                let Some(description) = description else {
                    return Err(bad(format!("tasks[{i}].description must be a string")));
                };
                let mut spec = JobSpec::from_description(description, owner);
                if let Some(title) = fields.get("title").and_then(Value::as_str) {
                    spec.title = title.to_string();
                }
                Ok(spec)
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
        let Some(parent) = job_id_from_session(&ctx.session_id) else {
            return Err(ToolError::NotPermitted(
                "job_subtasks runs only inside a background job; start one with /job".into(),
            ));
        };
        let Some(scheduler) = self.scheduler.get() else {
            return Err(ToolError::Unavailable(
                "the job scheduler is not running in this process".into(),
            ));
        };
        let record = scheduler
            .get(parent)
            .await
            .map_err(|e| ToolError::Failed(e.to_string()))?
            .ok_or_else(|| ToolError::Failed(format!("job {parent} is not recorded")))?;
        // One level: a subtask's own subtasks would multiply without bound.
        if record.parent_id.is_some() {
            return Err(ToolError::NotPermitted(
                "a subtask cannot start subtasks of its own; do the work here".into(),
            ));
        }
        let specs = specs(&args, &record.owner)?;
        let results = scheduler
            .spawn_batch(parent, specs)
            .await
            .map_err(|e| ToolError::Failed(e.to_string()))?;
        let mut text = String::new();
        for (i, job) in results.iter().enumerate() {
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
        let specs = specs(
            &json!({"tasks": ["look up a\nin detail", {"title": "B", "description": "do b"}]}),
            "ada",
        )
        .unwrap();
        let titles: Vec<&str> = specs.iter().map(|s| s.title.as_str()).collect();
        assert_eq!(titles, ["look up a", "B"]);
        assert!(specs.iter().all(|s| s.owner == "ada"));
        let many: Vec<String> = (0..=MAX_SUBTASKS).map(|i| format!("t{i}")).collect();
        for bad in [
            json!({}),
            json!({"tasks": []}),
            json!({"tasks": many}),
            json!({"tasks": [3]}),
        ] {
            assert!(
                matches!(specs_err(&bad), ToolError::InvalidArguments(_)),
                "{bad}"
            );
        }
    }

    fn specs_err(args: &Value) -> ToolError {
        match specs(args, "ada") {
            Err(e) => e,
            Ok(_) => panic!("accepted {args}"),
        }
    }

    #[tokio::test]
    async fn outside_a_job_it_says_where_it_runs() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ToolContext::new(dir.path(), "chat-session");
        let error = SubtasksTool::new()
            .execute(json!({"tasks": ["a"]}), &ctx, &Authorized::for_tests())
            .await
            .unwrap_err();
        assert!(
            error.to_string().contains("only inside a background job"),
            "{error}"
        );
    }
}
