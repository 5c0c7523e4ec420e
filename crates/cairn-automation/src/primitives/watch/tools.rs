//! The agent's watcher tools: `watch_start`, `watch_stop`, `watch_pause`,
//! `watch_resume`, `watch_status`, `watch_list`, `watch_history`, over
//! [`Watchers`].

use super::*;

fn id_arg(args: &Value) -> Result<&str, ToolError> {
    string_arg(args, "watcher_id")
}

fn id_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"watcher_id": {"type": "string"}},
        "required": ["watcher_id"]
    })
}

/// `watch_start`.
pub(super) struct StartTool(pub(super) Arc<Watchers>);

#[async_trait]
impl Tool for StartTool {
    fn name(&self) -> &str {
        "watch_start"
    }
    fn family(&self) -> Option<&str> {
        Some(WATCH_FAMILY)
    }
    fn description(&self) -> &str {
        "Watch a tool: call it every `interval` s (5-3600) with no LLM; you are told only \
         per notify_when (on_change, on_error, on_threshold + notify_config.expression, \
         summary + notify_config.batch_size, always)."
    }
    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "tool to call"},
                "params": {"type": "object"},
                "interval": {"type": "number"},
                "label": {"type": "string"},
                "notify_when": {"type": "string", "enum": ["on_change", "on_error", "on_threshold", "summary", "always"]},
                "notify_config": {"type": "object"},
                "output_channel": {"type": "string"}
            },
            "required": ["name"]
        })
    }
    /// Recurring work on the person's behalf: a write they approve, and only
    /// where they can (the watched tool is judged by the policy too).
    fn risk(&self) -> RiskLevel {
        RiskLevel::Write
    }
    fn needs_person(&self, _: &Value) -> bool {
        true
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
        let request = WatchRequest::from_args(&args)?;
        let w = self.0.start(request, Some(&ctx.session_id)).await?;
        let shown = if w.label.is_empty() {
            w.tool_name.clone()
        } else {
            w.label.clone()
        };
        json_output(&json!({
            "watcher_id": w.watcher_id,
            "tool_name": w.tool_name,
            "label": w.label,
            "status": w.status,
            "interval": w.interval,
            "notify_when": w.notify_when,
            "hint": format!(
                "Watcher '{shown}' started. Checking {} every {}s. You'll be notified via '{}' strategy.",
                w.tool_name, w.interval, w.notify_when
            ),
        }))
    }
}

#[derive(Clone, Copy)]
pub(super) enum Op {
    Stop,
    Pause,
    Resume,
    Status,
}

/// `watch_stop`, `watch_pause`, `watch_resume`, `watch_status`.
pub(super) struct IdTool {
    watchers: Arc<Watchers>,
    op: Op,
}

impl IdTool {
    pub(super) fn new(watchers: &Arc<Watchers>, op: Op) -> Self {
        Self {
            watchers: Arc::clone(watchers),
            op,
        }
    }
}

#[async_trait]
impl Tool for IdTool {
    fn name(&self) -> &str {
        match self.op {
            Op::Stop => "watch_stop",
            Op::Pause => "watch_pause",
            Op::Resume => "watch_resume",
            Op::Status => "watch_status",
        }
    }
    fn family(&self) -> Option<&str> {
        Some(WATCH_FAMILY)
    }
    fn description(&self) -> &str {
        match self.op {
            Op::Stop => "Stop and delete a watcher and its history.",
            Op::Pause => "Pause a watcher (checks skipped; counts and history kept).",
            Op::Resume => "Resume a paused watcher.",
            Op::Status => "A watcher's settings, counts, last result and recent checks.",
        }
    }
    fn parameters(&self) -> Value {
        id_schema()
    }
    /// Stopping, pausing or resuming changes what runs on the person's
    /// behalf: a write they approve, and only where they can.
    fn risk(&self) -> RiskLevel {
        match self.op {
            Op::Status => RiskLevel::ReadOnly,
            Op::Stop | Op::Pause | Op::Resume => RiskLevel::Write,
        }
    }
    fn needs_person(&self, _: &Value) -> bool {
        !matches!(self.op, Op::Status)
    }
    fn reusable(&self) -> bool {
        matches!(self.op, Op::Status)
    }
    async fn execute(
        &self,
        args: Value,
        _: &ToolContext,
        _: &Authorized,
    ) -> Result<ToolOutput, ToolError> {
        let id = id_arg(&args)?;
        let w = &self.watchers;
        let value = match self.op {
            Op::Stop => {
                let v = w.stop(id).await?;
                json!({"watcher_id": v.watcher_id, "status": "stopped", "check_count": v.check_count, "notification_count": v.notification_count})
            }
            Op::Pause => {
                let v = w.pause(id).await?;
                json!({"watcher_id": v.watcher_id, "status": v.status, "check_count": v.check_count})
            }
            Op::Resume => {
                let v = w.resume(id).await?;
                json!({"watcher_id": v.watcher_id, "status": v.status, "check_count": v.check_count, "next_check_at": v.next_check_at})
            }
            Op::Status => {
                let v = w.get(id).await?;
                let recent = w.history(id, 5).await?;
                let mut value =
                    serde_json::to_value(&v).map_err(|e| ToolError::Failed(e.to_string()))?;
                if let Some(map) = value.as_object_mut() {
                    map.insert(
                        "last_result".into(),
                        json!(recent.last().map(|e| e.result.clone())),
                    );
                    map.insert("recent_history".into(), json!(recent));
                }
                value
            }
        };
        json_output(&value)
    }
}

/// `watch_list`.
pub(super) struct ListTool(pub(super) Arc<Watchers>);

#[async_trait]
impl Tool for ListTool {
    fn name(&self) -> &str {
        "watch_list"
    }
    fn family(&self) -> Option<&str> {
        Some(WATCH_FAMILY)
    }
    fn description(&self) -> &str {
        "List watchers (running first) with check and notification counts."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {}})
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::ReadOnly
    }
    async fn execute(
        &self,
        _: Value,
        _: &ToolContext,
        _: &Authorized,
    ) -> Result<ToolOutput, ToolError> {
        let all = self.0.list().await?;
        let watchers: Vec<Value> = all
            .iter()
            .map(|w| {
                json!({
                    "watcher_id": w.watcher_id,
                    "tool_name": w.tool_name,
                    "label": w.label,
                    "status": w.status,
                    "interval": w.interval,
                    "notify_when": w.notify_when,
                    "check_count": w.check_count,
                    "notification_count": w.notification_count,
                })
            })
            .collect();
        json_output(&json!({"total": watchers.len(), "watchers": watchers}))
    }
}

/// `watch_history`.
pub(super) struct HistoryTool(pub(super) Arc<Watchers>);

#[async_trait]
impl Tool for HistoryTool {
    fn name(&self) -> &str {
        "watch_history"
    }
    fn family(&self) -> Option<&str> {
        Some(WATCH_FAMILY)
    }
    fn description(&self) -> &str {
        "A watcher's last N checks (1-100, default 10), oldest first."
    }
    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {"watcher_id": {"type": "string"}, "last_n": {"type": "integer"}},
            "required": ["watcher_id"]
        })
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::ReadOnly
    }
    async fn execute(
        &self,
        args: Value,
        _: &ToolContext,
        _: &Authorized,
    ) -> Result<ToolOutput, ToolError> {
        let id = id_arg(&args)?;
        let last_n = match args.get("last_n") {
            None | Some(Value::Null) => DEFAULT_HISTORY,
            Some(v) => v
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| {
                    ToolError::InvalidArguments(format!("`last_n` must be from 1 to {HISTORY}"))
                })?,
        };
        let w = self.0.get(id).await?;
        let entries = self.0.history(id, last_n).await?;
        json_output(&json!({
            "watcher_id": w.watcher_id,
            "total_checks": w.check_count,
            "returned": entries.len(),
            "history": entries,
        }))
    }
}
