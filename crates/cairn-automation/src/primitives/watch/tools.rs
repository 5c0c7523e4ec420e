//! The agent's watcher tools: `watch_start`, `watch_stop`, `watch_pause`,
//! `watch_resume`, `watch_status`, `watch_list`, `watch_history`, over
//! [`Watchers`].

use cairn_agent::tools::{
    CallOutcome, Family, RiskLevel, ToolContext, ToolOutput, ToolSpec, members, schema,
};

use super::*;

/// Which watcher tool a call is for.
#[derive(Debug, Clone, Copy)]
enum Op {
    Start,
    Stop,
    Pause,
    Resume,
    Status,
    List,
    History,
}

/// The family the watcher tools make: the person's watchers.
struct WatchTools(Arc<Watchers>);

/// The seven tools over `watchers`.
pub(super) fn tools(watchers: &Arc<Watchers>) -> Vec<Arc<dyn Tool>> {
    use RiskLevel::{ReadOnly, Write};
    // Starting, stopping, pausing or resuming changes what runs on the
    // person's behalf: a write they approve, and only where they can (the
    // watched tool is judged by the policy too).
    let change = |name, description| ToolSpec::new(name, Write, description).needs_person();
    let id = || schema::object(json!({"watcher_id": {"type": "string"}}), &["watcher_id"]);
    members(&Arc::new(WatchTools(Arc::clone(watchers))), WATCH_FAMILY, [
        (
            Op::Start,
            change("watch_start", "Watch a tool: call it every `interval` s (5-3600) with no LLM; you are told only \
                 per notify_when (on_change, on_error, on_threshold + notify_config.expression, \
                 summary + notify_config.batch_size, always).")
                .params(schema::object(
                    json!({
                        "name": {"type": "string", "description": "tool to call"},
                        "params": {"type": "object"},
                        "interval": {"type": "number"},
                        "label": {"type": "string"},
                        "notify_when": {"type": "string", "enum": ["on_change", "on_error", "on_threshold", "summary", "always"]},
                        "notify_config": {"type": "object"},
                        "output_channel": {"type": "string"}
                    }),
                    &["name"],
                )),
        ),
        (Op::Stop, change("watch_stop", "Stop and delete a watcher and its history.").params(id())),
        (Op::Pause, change("watch_pause", "Pause a watcher (checks skipped; counts and history kept).").params(id())),
        (Op::Resume, change("watch_resume", "Resume a paused watcher.").params(id())),
        (
            Op::Status,
            ToolSpec::new("watch_status", ReadOnly, "A watcher's settings, counts, last result and recent checks.")
                .params(id()),
        ),
        (
            Op::List,
            ToolSpec::new("watch_list", ReadOnly, "List watchers (running first) with check and notification counts.")
                .params(schema::object(json!({}), &[])),
        ),
        (
            Op::History,
            ToolSpec::new("watch_history", ReadOnly, "A watcher's last N checks (1-100, default 10), oldest first.")
                .params(schema::object(
                    json!({"watcher_id": {"type": "string"}, "last_n": {"type": "integer"}}),
                    &["watcher_id"],
                )),
        ),
    ])
}

#[async_trait]
impl Family for WatchTools {
    type Op = Op;

    async fn call(&self, op: Op, args: Value, ctx: &ToolContext, _: &Authorized) -> CallOutcome {
        let w = &self.0;
        let id = || nonblank(&args, "watcher_id");
        let value = match op {
            Op::Start => {
                let request = WatchRequest::from_args(&args)?;
                let w = w.start(request, Some(&ctx.session_id)).await?;
                let shown = if w.label.is_empty() {
                    w.tool_name.clone()
                } else {
                    w.label.clone()
                };
                let mut view = summary(&w);
                view["hint"] = json!(format!(
                    "Watcher '{shown}' started. Checking {} every {}s. You'll be notified via '{}' strategy.",
                    w.tool_name, w.interval, w.notify_when
                ));
                view
            }
            Op::Stop => {
                let v = w.stop(id()?).await?;
                json!({"watcher_id": v.watcher_id, "status": "stopped", "check_count": v.check_count, "notification_count": v.notification_count})
            }
            Op::Pause => {
                let v = w.pause(id()?).await?;
                json!({"watcher_id": v.watcher_id, "status": v.status, "check_count": v.check_count})
            }
            Op::Resume => {
                let v = w.resume(id()?).await?;
                json!({"watcher_id": v.watcher_id, "status": v.status, "check_count": v.check_count, "next_check_at": v.next_check_at})
            }
            Op::Status => self.status(id()?).await?,
            Op::List => self.list().await?,
            Op::History => self.history(id()?, &args).await?,
        };
        ToolOutput::json(&value)
    }
}

/// What `watch_start` and `watch_list` show of every watcher.
fn summary(w: &WatcherView) -> Value {
    json!({
        "watcher_id": w.watcher_id,
        "tool_name": w.tool_name,
        "label": w.label,
        "status": w.status,
        "interval": w.interval,
        "notify_when": w.notify_when,
    })
}

impl WatchTools {
    /// `watch_status`.
    async fn status(&self, id: &str) -> Result<Value, ToolError> {
        let v = self.0.get(id).await?;
        let recent = self.0.history(id, 5).await?;
        let mut value = serde_json::to_value(&v).map_err(|e| ToolError::Failed(e.to_string()))?;
        if let Some(map) = value.as_object_mut() {
            map.insert(
                "last_result".into(),
                json!(recent.last().map(|e| e.result.clone())),
            );
            map.insert("recent_history".into(), json!(recent));
        }
        Ok(value)
    }

    /// `watch_list`.
    async fn list(&self) -> Result<Value, ToolError> {
        let all = self.0.list().await?;
        let watchers: Vec<Value> = all
            .iter()
            .map(|w| {
                let mut view = summary(w);
                view["check_count"] = json!(w.check_count);
                view["notification_count"] = json!(w.notification_count);
                view
            })
            .collect();
        Ok(json!({"total": watchers.len(), "watchers": watchers}))
    }

    /// `watch_history`.
    async fn history(&self, id: &str, args: &Value) -> Result<Value, ToolError> {
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
        Ok(json!({
            "watcher_id": w.watcher_id,
            "total_checks": w.check_count,
            "returned": entries.len(),
            "history": entries,
        }))
    }
}
