//! Background tasks: `background_run`, `background_status`,
//! `background_result`, `background_cancel`, `background_list`,
//! `background_wait`.
//!
//! A task is a row in the store from launch to end, with its full result;
//! the conversation that launched it is told when it ends (the notice is
//! taken from the store, so it waits there while the session is busy or the
//! process restarts). The owning process renews a lease on its running
//! tasks; a task whose process died is reaped as failed, `interrupted`, by
//! [`BackgroundTasks::start`] or the renewal loop of any later process.
//!
//! The policy gate judges the launched call in the launching turn (through
//! [`CallPlan::delegated`]): a tool that asks is asked about then, a denied
//! one is never launched. The task itself then runs unattended.
//!
//! Tasks are scoped to the session that launched them: the status, result,
//! cancel, list and wait tools only see the calling session's tasks.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use cairn_agent::runner::{Authorized, AutoApprove, ToolStatus};
use cairn_agent::tools::args::{nonblank, object_or_empty};
use cairn_agent::tools::{
    CallOutcome, CallPlan, DelegatedCall, Family, RiskLevel, Tool, ToolContext, ToolError,
    ToolOutput, ToolSpec, members, schema,
};
use cairn_core::chat::ToolCall;
use cairn_core::clock::Clock;
use cairn_store::{BackgroundTask, Store, TaskStatus};
use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::{RunnerLink, is_primitive, rfc3339, store_error};

/// The one line naming these tools when schemas load on demand.
const BACKGROUND_FAMILY: &str = "run tool calls in the background; you are told when they end";

/// How long a process's claim on its running tasks lasts without renewal.
pub const LEASE: Duration = Duration::from_secs(60);
/// How often the claim is renewed (and dead processes' tasks reaped).
pub const RENEW_EVERY: Duration = Duration::from_secs(20);
/// Time limit of one background call (foreground calls keep their own, shorter one).
pub const TASK_TIMEOUT: Duration = Duration::from_secs(3600);
/// `background_wait`'s default and longest wait.
pub const WAIT_DEFAULT: Duration = Duration::from_secs(60);
/// See [`WAIT_DEFAULT`].
pub const WAIT_MAX: Duration = Duration::from_secs(3600);

/// A task this process runs.
struct Live {
    cancel: CancellationToken,
    done: watch::Receiver<bool>,
}

/// The background tasks of this process, and their tools.
pub struct BackgroundTasks {
    store: Store,
    link: Arc<RunnerLink>,
    clock: Arc<dyn Clock>,
    owner: String,
    live: Arc<Mutex<HashMap<String, Live>>>,
    shutdown: CancellationToken,
}

impl std::fmt::Debug for BackgroundTasks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackgroundTasks")
            .field("owner", &self.owner)
            .finish_non_exhaustive()
    }
}

fn lease_until(now: DateTime<Utc>) -> DateTime<Utc> {
    now + chrono::Duration::from_std(LEASE).unwrap_or(chrono::Duration::seconds(60))
}

/// Seconds between start and end (or now), to a tenth.
fn elapsed(task: &BackgroundTask, now: DateTime<Utc>) -> f64 {
    let end = task.finished_at.unwrap_or(now);
    let ms = (end - task.started_at).num_milliseconds().max(0);
    // Whole tenths, so the JSON shows 45.2 rather than 45.199999.
    #[expect(
        clippy::cast_precision_loss,
        reason = "a duration in tenths of a second is far below 2^52"
    )]
    let tenths = ((ms + 50) / 100) as f64;
    tenths / 10.0
}

/// The `result` / `background_wait` answer for a task.
fn result_view(task: &BackgroundTask, note: &str) -> Value {
    match task.status {
        TaskStatus::Completed => json!({
            "task_id": task.id, "status": "completed", "result": task.result,
        }),
        TaskStatus::Failed => json!({
            "task_id": task.id, "status": "failed", "error": task.error, "result": task.result,
        }),
        TaskStatus::Cancelled => json!({"task_id": task.id, "status": "cancelled"}),
        TaskStatus::Running => json!({"task_id": task.id, "status": "running", "note": note}),
    }
}

impl BackgroundTasks {
    /// Tasks recorded in `store` under `owner` (this process's id), running
    /// their calls through the runner behind `link`.
    pub fn new(
        store: Store,
        link: Arc<RunnerLink>,
        clock: Arc<dyn Clock>,
        owner: impl Into<String>,
    ) -> Arc<Self> {
        Arc::new(Self {
            store,
            link,
            clock,
            owner: owner.into(),
            live: Arc::new(Mutex::new(HashMap::new())),
            shutdown: CancellationToken::new(),
        })
    }

    /// Reaps the tasks of dead processes (failed, `interrupted`; their
    /// sessions are told) and starts renewing this process's lease.
    pub async fn start(self: &Arc<Self>) -> Result<Vec<String>, cairn_store::StoreError> {
        let reaped = self.store.reap_background_tasks(self.clock.now()).await?;
        let this = Arc::clone(self);
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = this.shutdown.cancelled() => return,
                    () = tokio::time::sleep(RENEW_EVERY) => {}
                }
                let now = this.clock.now();
                if let Err(e) = this
                    .store
                    .renew_background_leases(&this.owner, lease_until(now))
                    .await
                {
                    tracing::warn!(error = %e, "renewing background task leases failed");
                }
                if let Err(e) = this.store.reap_background_tasks(now).await {
                    tracing::warn!(error = %e, "reaping background tasks failed");
                }
            }
        });
        Ok(reaped)
    }

    /// Stops this process's running tasks at exit: each is recorded failed
    /// ([`cairn_store::TASK_INTERRUPTED`]), so its conversation is told on
    /// its next turn rather than losing it, then its call is stopped; the
    /// lease renewal ends.
    pub async fn shutdown(&self) {
        self.shutdown.cancel();
        let live: Vec<(String, CancellationToken)> = self
            .lock()
            .iter()
            .map(|(id, l)| (id.clone(), l.cancel.clone()))
            .collect();
        for (id, token) in live {
            if let Err(e) = self
                .store
                .finish_background_task(
                    &id,
                    TaskStatus::Failed,
                    None,
                    Some(cairn_store::TASK_INTERRUPTED),
                    self.clock.now(),
                )
                .await
            {
                tracing::warn!(task = %id, error = %e, "could not record an interrupted background task");
            }
            token.cancel();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Live>> {
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The six tools over these tasks.
    pub fn tools(self: &Arc<Self>) -> Vec<Arc<dyn Tool>> {
        tools(self)
    }

    /// Launches `name(params)` for the session in `ctx`; the gate has
    /// judged the call already (see [`CallPlan::delegated`]).
    async fn launch(
        &self,
        name: &str,
        params: Value,
        ctx: &ToolContext,
    ) -> Result<BackgroundTask, ToolError> {
        let runner = self.link.get()?;
        let tool = runner
            .registry()
            .get(name)
            .ok_or_else(|| ToolError::InvalidArguments(format!("unknown tool `{name}`")))?;
        let name = tool.spec().name().to_string();
        if is_primitive(&name) {
            return Err(ToolError::InvalidArguments(format!(
                "`{name}` cannot run as a background task"
            )));
        }
        let now = self.clock.now();
        let hex = uuid::Uuid::new_v4().simple().to_string();
        let task = BackgroundTask {
            id: format!("bg-{}", &hex[..8]),
            owner: self.owner.clone(),
            lease_until: Some(lease_until(now)),
            session_id: ctx.session_id.clone(),
            thread_id: ctx.thread_id.clone(),
            tool: name.clone(),
            params: params.clone(),
            status: TaskStatus::Running,
            result: None,
            error: None,
            started_at: now,
            finished_at: None,
            delivered_at: None,
        };
        self.store
            .create_background_task(&task)
            .await
            .map_err(store_error)?;

        // Its own token: the task outlives the launching turn.
        let cancel = CancellationToken::new();
        let mut limits = ctx.limits.clone();
        limits.timeout = limits.timeout.max(TASK_TIMEOUT);
        let mut task_ctx = ctx.clone().with_cancel(cancel.clone()).with_limits(limits);
        task_ctx.thread_id = ctx.thread_id.clone();
        let (done_tx, done_rx) = watch::channel(false);
        self.lock().insert(
            task.id.clone(),
            Live {
                cancel,
                done: done_rx,
            },
        );
        let call = ToolCall {
            id: task.id.clone(),
            name,
            arguments: params,
        };
        let store = self.store.clone();
        let clock = Arc::clone(&self.clock);
        let id = task.id.clone();
        let live = Arc::clone(&self.live);
        tokio::spawn(async move {
            // AutoApprove: the person was asked (if the policy says so) when
            // the task was launched; denial is still enforced by the runner.
            let result = runner.run(&call, &task_ctx, &AutoApprove).await;
            let (status, value, error) = match result.status {
                ToolStatus::Success => (
                    TaskStatus::Completed,
                    Some(json!({"success": true, "data": result.content})),
                    None,
                ),
                ToolStatus::Cancelled => (TaskStatus::Cancelled, None, None),
                other => (
                    TaskStatus::Failed,
                    Some(json!({"success": false, "status": other.as_str()})),
                    Some(result.content),
                ),
            };
            if let Err(e) = store
                .finish_background_task(&id, status, value.as_ref(), error.as_deref(), clock.now())
                .await
            {
                tracing::error!(task = %id, error = %e, "could not record the end of a background task");
            }
            live.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
            let _ = done_tx.send(true);
        });
        Ok(task)
    }

    /// The calling session's task `id`.
    async fn find(&self, id: &str, ctx: &ToolContext) -> Result<BackgroundTask, ToolError> {
        match self
            .store
            .get_background_task(id)
            .await
            .map_err(store_error)?
        {
            Some(task) if task.session_id == ctx.session_id => Ok(task),
            _ => Err(ToolError::InvalidArguments(format!(
                "no background task `{id}` in this conversation; background_list shows them"
            ))),
        }
    }

    /// Cancels a running task of this process: recorded first (so its end is
    /// not reported as a failure), then its call is cancelled. `false` when it
    /// was not running here.
    pub async fn cancel(&self, id: &str) -> Result<bool, cairn_store::StoreError> {
        let token = self.lock().get(id).map(|l| l.cancel.clone());
        let Some(token) = token else {
            return Ok(false);
        };
        let recorded = self
            .store
            .finish_background_task(id, TaskStatus::Cancelled, None, None, self.clock.now())
            .await?;
        token.cancel();
        Ok(recorded)
    }

    /// Waits up to `timeout` for task `id` of this process to end (at once
    /// when it is not running here); whether it ended.
    pub async fn wait(&self, id: &str, timeout: Duration) -> bool {
        let done = self.lock().get(id).map(|l| l.done.clone());
        let Some(mut done) = done else {
            // Not running here: ended, or another process runs it.
            return true;
        };
        tokio::time::timeout(timeout, done.wait_for(|d| *d))
            .await
            .is_ok()
    }
}

/// Which background tool a call is for.
#[derive(Debug, Clone, Copy)]
enum Op {
    Run,
    Status,
    Result,
    Cancel,
    List,
    Wait,
}

/// The family the background tools make: this process's tasks.
struct Tasks(Arc<BackgroundTasks>);

/// The six tools over `tasks`: read-only for the gate, since
/// `background_run`'s launched call is judged itself ([`CallPlan::delegated`]).
fn tools(tasks: &Arc<BackgroundTasks>) -> Vec<Arc<dyn Tool>> {
    let spec = |name, description| ToolSpec::new(name, RiskLevel::ReadOnly, description);
    let task_id = || task_id_schema(json!({}));
    let family = Arc::new(Tasks(Arc::clone(tasks)));
    // Answers change as tasks run, so none is reused, but a cancel's.
    members(&family, BACKGROUND_FAMILY, [
        (
            Op::Run,
            spec("background_run", "Run a tool call in the background; returns a task_id at once. You are notified when it ends.")
                .params(schema::object(
                    json!({"name": {"type": "string"}, "params": {"type": "object"}}),
                    &["name"],
                ))
                .not_reusable(),
        ),
        (
            Op::Status,
            spec("background_status", "Status of a background task.")
                .params(task_id())
                .not_reusable(),
        ),
        (
            Op::Result,
            spec("background_result", "Full result of a background task.")
                .params(task_id())
                .not_reusable(),
        ),
        (
            Op::Cancel,
            spec("background_cancel", "Cancel a running background task.").params(task_id()),
        ),
        (
            Op::List,
            spec("background_list", "List this conversation's background tasks.")
                .params(schema::object(json!({}), &[]))
                .not_reusable(),
        ),
        (
            Op::Wait,
            spec("background_wait", "Wait for a background task to end (timeout in s, default 60, max 3600).")
                .params(task_id_schema(json!({"timeout": {"type": "number"}})))
                // Longer than the longest wait, so the wait itself decides when to stop.
                .time_limit(WAIT_MAX + Duration::from_secs(5))
                .not_reusable(),
        ),
    ])
}

fn task_id_schema(extra: Value) -> Value {
    schema::object(
        schema::with(json!({"task_id": {"type": "string"}}), extra),
        &["task_id"],
    )
}

#[async_trait]
impl Family for Tasks {
    type Op = Op;

    fn plan(&self, op: Op, spec: &ToolSpec, args: &Value) -> CallPlan {
        let delegated = match op {
            Op::Run => args
                .get("name")
                .and_then(Value::as_str)
                .map(|name| DelegatedCall {
                    name: name.to_string(),
                    arguments: args.get("params").cloned().unwrap_or(Value::Null),
                }),
            _ => None,
        };
        CallPlan {
            delegated,
            ..spec.plan()
        }
    }

    async fn call(&self, op: Op, args: Value, ctx: &ToolContext, _: &Authorized) -> CallOutcome {
        let tasks = &self.0;
        let view = match op {
            Op::Run => {
                let name = nonblank(&args, "name")?;
                let params = object_or_empty(&args, "params")?;
                let task = tasks.launch(name, params, ctx).await?;
                json!({
                    "task_id": task.id,
                    "tool_name": task.tool,
                    "status": "running",
                    "started_at": rfc3339(task.started_at),
                })
            }
            Op::Status => {
                let task = tasks.find(nonblank(&args, "task_id")?, ctx).await?;
                let mut view = json!({
                    "task_id": task.id,
                    "tool_name": task.tool,
                    "status": task.status.as_str(),
                    "elapsed_seconds": elapsed(&task, tasks.clock.now()),
                });
                if let (Some(error), Some(map)) = (&task.error, view.as_object_mut()) {
                    map.insert("error".into(), json!(error));
                }
                view
            }
            Op::Result => result_view(
                &tasks.find(nonblank(&args, "task_id")?, ctx).await?,
                "Task is still running. Use background_wait or check back later.",
            ),
            Op::Cancel => self.cancel(&args, ctx).await?,
            Op::List => self.list(ctx).await?,
            Op::Wait => self.wait(&args, ctx).await?,
        };
        ToolOutput::json(&view)
    }
}

impl Tasks {
    /// `background_cancel`.
    async fn cancel(&self, args: &Value, ctx: &ToolContext) -> Result<Value, ToolError> {
        let task = self.0.find(nonblank(args, "task_id")?, ctx).await?;
        if task.status != TaskStatus::Running {
            return Ok(json!({
                "task_id": task.id, "cancelled": false,
                "note": format!("the task is already {}", task.status.as_str()),
            }));
        }
        let cancelled = self.0.cancel(&task.id).await.map_err(store_error)?;
        let mut view = json!({"task_id": task.id, "cancelled": cancelled});
        if !cancelled && let Some(map) = view.as_object_mut() {
            map.insert(
                "note".into(),
                json!("the task runs in another cairn process"),
            );
        }
        Ok(view)
    }

    /// `background_list`.
    async fn list(&self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let tasks = self
            .0
            .store
            .list_background_tasks(&ctx.session_id)
            .await
            .map_err(store_error)?;
        let now = self.0.clock.now();
        let count = |s: TaskStatus| tasks.iter().filter(|t| t.status == s).count();
        let rows: Vec<Value> = tasks
            .iter()
            .map(|t| {
                json!({
                    "task_id": t.id, "tool_name": t.tool,
                    "status": t.status.as_str(), "elapsed_seconds": elapsed(t, now),
                })
            })
            .collect();
        Ok(json!({
            "tasks": rows,
            "total": tasks.len(),
            "running": count(TaskStatus::Running),
            "completed": count(TaskStatus::Completed),
            "failed": count(TaskStatus::Failed),
            "cancelled": count(TaskStatus::Cancelled),
        }))
    }

    /// `background_wait`.
    async fn wait(&self, args: &Value, ctx: &ToolContext) -> Result<Value, ToolError> {
        let id = nonblank(args, "task_id")?;
        let timeout = match args.get("timeout") {
            None | Some(Value::Null) => WAIT_DEFAULT,
            Some(v) => match v.as_f64() {
                Some(secs) if secs.is_finite() && secs >= 0.0 => {
                    Duration::from_secs_f64(secs).min(WAIT_MAX)
                }
                _ => {
                    return Err(ToolError::InvalidArguments(
                        "`timeout` must be a number of seconds (max 3600)".into(),
                    ));
                }
            },
        };
        self.0.find(id, ctx).await?;
        self.0.wait(id, timeout).await;
        let task = self.0.find(id, ctx).await?;
        Ok(result_view(
            &task,
            "Timeout reached. Task is still running.",
        ))
    }
}
