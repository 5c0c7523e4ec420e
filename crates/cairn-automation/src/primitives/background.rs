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
//! [`Tool::delegated_call`]): a tool that asks is asked about then, a denied
//! one is never launched. The task itself then runs unattended.
//!
//! Tasks are scoped to the session that launched them: the status, result,
//! cancel, list and wait tools only see the calling session's tasks.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use cairn_agent::runner::{Authorized, AutoApprove, ToolStatus};
use cairn_agent::tools::{RiskLevel, Tool, ToolContext, ToolError, ToolOutput};
use cairn_core::chat::ToolCall;
use cairn_core::clock::Clock;
use cairn_store::{BackgroundTask, Store, TaskStatus};
use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::{RunnerLink, is_primitive, json_output, rfc3339, store_error, string_arg};

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
    #[allow(clippy::cast_precision_loss)]
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
        vec![
            Arc::new(RunTool(Arc::clone(self))),
            Arc::new(StatusTool(Arc::clone(self))),
            Arc::new(ResultTool(Arc::clone(self))),
            Arc::new(CancelTool(Arc::clone(self))),
            Arc::new(ListTool(Arc::clone(self))),
            Arc::new(WaitTool(Arc::clone(self))),
        ]
    }

    /// Launches `name(params)` for the session in `ctx`; the gate has
    /// judged the call already (see [`Tool::delegated_call`]).
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
        let name = tool.name().to_string();
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

fn task_id_schema(extra: Value) -> Value {
    let mut properties = json!({"task_id": {"type": "string"}});
    if let (Some(p), Value::Object(more)) = (properties.as_object_mut(), extra) {
        p.extend(more);
    }
    json!({"type": "object", "properties": properties, "required": ["task_id"]})
}

/// `background_run`.
struct RunTool(Arc<BackgroundTasks>);

#[async_trait]
impl Tool for RunTool {
    fn name(&self) -> &str {
        "background_run"
    }
    fn family(&self) -> Option<&str> {
        Some(BACKGROUND_FAMILY)
    }
    fn description(&self) -> &str {
        "Run a tool call in the background; returns a task_id at once. You are notified when it ends."
    }
    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {"name": {"type": "string"}, "params": {"type": "object"}},
            "required": ["name"]
        })
    }
    /// Read-only for the gate: the launched call is judged itself.
    fn risk(&self) -> RiskLevel {
        RiskLevel::ReadOnly
    }
    fn reusable(&self) -> bool {
        false
    }
    fn delegated_call(&self, args: &Value) -> Option<(String, Value)> {
        let name = args.get("name")?.as_str()?;
        Some((
            name.to_string(),
            args.get("params").cloned().unwrap_or(Value::Null),
        ))
    }
    async fn execute(
        &self,
        args: Value,
        ctx: &ToolContext,
        _: &Authorized,
    ) -> Result<ToolOutput, ToolError> {
        let name = string_arg(&args, "name")?;
        let params = match args.get("params") {
            None | Some(Value::Null) => json!({}),
            Some(p @ Value::Object(_)) => p.clone(),
            Some(_) => {
                return Err(ToolError::InvalidArguments(
                    "`params` must be an object".into(),
                ));
            }
        };
        let task = self.0.launch(name, params, ctx).await?;
        json_output(&json!({
            "task_id": task.id,
            "tool_name": task.tool,
            "status": "running",
            "started_at": rfc3339(task.started_at),
        }))
    }
}

/// `background_status`.
struct StatusTool(Arc<BackgroundTasks>);

#[async_trait]
impl Tool for StatusTool {
    fn name(&self) -> &str {
        "background_status"
    }
    fn family(&self) -> Option<&str> {
        Some(BACKGROUND_FAMILY)
    }
    fn description(&self) -> &str {
        "Status of a background task."
    }
    fn parameters(&self) -> Value {
        task_id_schema(json!({}))
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::ReadOnly
    }
    fn reusable(&self) -> bool {
        false
    }
    async fn execute(
        &self,
        args: Value,
        ctx: &ToolContext,
        _: &Authorized,
    ) -> Result<ToolOutput, ToolError> {
        let task = self.0.find(string_arg(&args, "task_id")?, ctx).await?;
        let mut view = json!({
            "task_id": task.id,
            "tool_name": task.tool,
            "status": task.status.as_str(),
            "elapsed_seconds": elapsed(&task, self.0.clock.now()),
        });
        if let (Some(error), Some(map)) = (&task.error, view.as_object_mut()) {
            map.insert("error".into(), json!(error));
        }
        json_output(&view)
    }
}

/// `background_result`.
struct ResultTool(Arc<BackgroundTasks>);

#[async_trait]
impl Tool for ResultTool {
    fn name(&self) -> &str {
        "background_result"
    }
    fn family(&self) -> Option<&str> {
        Some(BACKGROUND_FAMILY)
    }
    fn description(&self) -> &str {
        "Full result of a background task."
    }
    fn parameters(&self) -> Value {
        task_id_schema(json!({}))
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::ReadOnly
    }
    fn reusable(&self) -> bool {
        false
    }
    async fn execute(
        &self,
        args: Value,
        ctx: &ToolContext,
        _: &Authorized,
    ) -> Result<ToolOutput, ToolError> {
        let task = self.0.find(string_arg(&args, "task_id")?, ctx).await?;
        json_output(&result_view(
            &task,
            "Task is still running. Use background_wait or check back later.",
        ))
    }
}

/// `background_cancel`.
struct CancelTool(Arc<BackgroundTasks>);

#[async_trait]
impl Tool for CancelTool {
    fn name(&self) -> &str {
        "background_cancel"
    }
    fn family(&self) -> Option<&str> {
        Some(BACKGROUND_FAMILY)
    }
    fn description(&self) -> &str {
        "Cancel a running background task."
    }
    fn parameters(&self) -> Value {
        task_id_schema(json!({}))
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::ReadOnly
    }
    async fn execute(
        &self,
        args: Value,
        ctx: &ToolContext,
        _: &Authorized,
    ) -> Result<ToolOutput, ToolError> {
        let task = self.0.find(string_arg(&args, "task_id")?, ctx).await?;
        if task.status != TaskStatus::Running {
            return json_output(&json!({
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
        json_output(&view)
    }
}

/// `background_list`.
struct ListTool(Arc<BackgroundTasks>);

#[async_trait]
impl Tool for ListTool {
    fn name(&self) -> &str {
        "background_list"
    }
    fn family(&self) -> Option<&str> {
        Some(BACKGROUND_FAMILY)
    }
    fn description(&self) -> &str {
        "List this conversation's background tasks."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {}})
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::ReadOnly
    }
    fn reusable(&self) -> bool {
        false
    }
    async fn execute(
        &self,
        _: Value,
        ctx: &ToolContext,
        _: &Authorized,
    ) -> Result<ToolOutput, ToolError> {
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
        json_output(&json!({
            "tasks": rows,
            "total": tasks.len(),
            "running": count(TaskStatus::Running),
            "completed": count(TaskStatus::Completed),
            "failed": count(TaskStatus::Failed),
            "cancelled": count(TaskStatus::Cancelled),
        }))
    }
}

/// `background_wait`.
struct WaitTool(Arc<BackgroundTasks>);

#[async_trait]
impl Tool for WaitTool {
    fn name(&self) -> &str {
        "background_wait"
    }
    fn family(&self) -> Option<&str> {
        Some(BACKGROUND_FAMILY)
    }
    fn description(&self) -> &str {
        "Wait for a background task to end (timeout in s, default 60, max 3600)."
    }
    fn parameters(&self) -> Value {
        task_id_schema(json!({"timeout": {"type": "number"}}))
    }
    /// Longer than the longest wait, so the wait itself decides when to stop.
    fn time_limit(&self, _: &Value) -> Option<Duration> {
        Some(WAIT_MAX + Duration::from_secs(5))
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::ReadOnly
    }
    fn reusable(&self) -> bool {
        false
    }
    async fn execute(
        &self,
        args: Value,
        ctx: &ToolContext,
        _: &Authorized,
    ) -> Result<ToolOutput, ToolError> {
        let id = string_arg(&args, "task_id")?;
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
        json_output(&result_view(
            &task,
            "Timeout reached. Task is still running.",
        ))
    }
}
