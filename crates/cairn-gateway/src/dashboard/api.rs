//! The JSON endpoints only the dashboard needs, under `/ui/api/`: each
//! authenticates (bearer or session cookie, [`Authed`]) and is one call on
//! an existing service: the schedule parser `cairn schedule explain` uses,
//! the memory service the agent recalls from, the store's spend, the
//! notification dispatcher, the routine service's view of a spec.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use cairn_agent::memory::json::{doc_json, hit_json};
use cairn_agent::memory::{MemoryService, MemorySettings};
use cairn_automation::notify::dispatcher::Dispatcher;
use cairn_core::schedule::{Schedule, parse_zone};
use cairn_store::MemoryCategory;
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::auth::Authed;
use crate::error::ApiError;
use crate::extract::{ApiJson, ApiQuery};
use crate::state::{AppState, Gateway};

/// Fire times a preview lists at most.
const MAX_PREVIEW: usize = 20;

/// Query of `GET /ui/api/schedule`.
#[derive(Debug, Deserialize)]
pub struct ExplainQuery {
    /// A cron expression, a human phrase or a one-shot time.
    pub expr: String,
    /// IANA zone; the person's zone without it.
    pub tz: Option<String>,
    /// How many fire times (5 without it).
    pub count: Option<usize>,
}

/// One fire time, as an instant and as the zone's wall clock.
#[derive(Debug, Serialize)]
pub struct FireView {
    /// The instant (UTC).
    pub at: DateTime<Utc>,
    /// `Mon 2026-03-09 09:00` in the schedule's zone.
    pub local: String,
}

/// `GET /ui/api/schedule?expr=&tz=&count=`: what `cairn schedule explain`
/// says about `expr` (kind, normalized form, description, next fire
/// times), or a 422 naming the token at fault.
pub async fn explain(
    State(state): State<AppState>,
    _auth: Authed,
    ApiQuery(q): ApiQuery<ExplainQuery>,
) -> Result<Json<Value>, ApiError> {
    let zone = match q.tz.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
        Some(name) => parse_zone(name).map_err(|e| ApiError::unprocessable(format!("tz: {e}")))?,
        None => crate::routes::routines::user_zone(&state),
    };
    let now = state.clock().now();
    let schedule =
        Schedule::parse(&q.expr, zone, now).map_err(|e| ApiError::unprocessable(e.to_string()))?;
    let next: Vec<FireView> = schedule
        .fire_times(now)
        .take(q.count.unwrap_or(5).min(MAX_PREVIEW))
        .map(|at| FireView {
            at,
            local: at
                .with_timezone(&zone)
                .format("%a %Y-%m-%d %H:%M")
                .to_string(),
        })
        .collect();
    Ok(Json(json!({
        "kind": schedule.kind().as_str(),
        "normalized": schedule.normalized(),
        "description": schedule.describe(),
        "timezone": zone.name(),
        "next": next,
    })))
}

/// The memory the agent recalls from, or (no LLM configured) a keyword-only
/// service over the same store.
fn memory(state: &Gateway) -> Arc<MemoryService> {
    match state.chat().ok().and_then(|c| c.memory()) {
        Some(memory) => Arc::clone(memory),
        None => Arc::new(MemoryService::new(
            state.store().clone(),
            state.user_id(),
            Arc::clone(state.clock()),
            MemorySettings::default(),
        )),
    }
}

/// Query of `GET /ui/api/memory`.
#[derive(Debug, Deserialize)]
pub struct MemoryQuery {
    /// The search; without it, the latest memories.
    pub q: Option<String>,
    /// At most this many (20 without it, at most 100).
    pub limit: Option<usize>,
}

/// `GET /ui/api/memory?q=`: recall as `cairn memory search` does (mode,
/// and per hit its score and whether keyword, vector or both found it);
/// without `q`, the latest memories.
pub async fn memory_search(
    State(state): State<AppState>,
    _auth: Authed,
    ApiQuery(q): ApiQuery<MemoryQuery>,
) -> Result<Json<Value>, ApiError> {
    let memory = memory(&state);
    let limit = q.limit.unwrap_or(20).clamp(1, 100);
    let failed = |e: &dyn std::fmt::Display| ApiError::internal("memory search failed", e);
    match q.q.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
        Some(query) => {
            let recall = memory.recall(query, limit).await.map_err(|e| failed(&e))?;
            Ok(Json(json!({
                "mode": recall.mode.as_str(),
                "note": recall.note,
                "hits": recall.hits.iter().map(hit_json).collect::<Vec<_>>(),
            })))
        }
        None => {
            let docs = memory
                .list(None, u32::try_from(limit).unwrap_or(100))
                .await
                .map_err(|e| failed(&e))?;
            Ok(Json(json!({
                "mode": "list",
                "note": null,
                "hits": docs.iter().map(doc_json).collect::<Vec<_>>(),
            })))
        }
    }
}

/// Body of `POST /ui/api/memory`.
#[derive(Debug, Deserialize)]
pub struct NewMemory {
    /// What to remember.
    pub text: String,
    /// `core`, `daily`, `conversation` or `custom` (`core` without it).
    pub category: Option<String>,
    /// A key: the same key again replaces the text.
    pub key: Option<String>,
}

/// `POST /ui/api/memory`: remembers a text, as `cairn memory add` does.
pub async fn memory_add(
    State(state): State<AppState>,
    _auth: Authed,
    ApiJson(new): ApiJson<NewMemory>,
) -> Result<Json<Value>, ApiError> {
    let text = new.text.trim();
    if text.is_empty() {
        return Err(ApiError::unprocessable("text: the memory's text is empty"));
    }
    let category = match new.category.as_deref() {
        None | Some("") => MemoryCategory::Core,
        Some(name) => MemoryCategory::parse(name).ok_or_else(|| {
            ApiError::unprocessable(format!(
                "category: unknown {name:?}; use core, daily, conversation or custom"
            ))
        })?,
    };
    let key = new.key.as_deref().map(str::trim).filter(|k| !k.is_empty());
    let memory = memory(&state);
    let doc = memory
        .store_memory(key, text, category, "dashboard")
        .await
        .map_err(|e| ApiError::internal("the memory could not be stored", &e))?;
    Ok(Json(doc_json(&doc)))
}

/// `DELETE /ui/api/memory/{id}`: forgets one memory.
pub async fn memory_forget(
    State(state): State<AppState>,
    _auth: Authed,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let id = Uuid::parse_str(id.trim())
        .map_err(|_| ApiError::bad_request(format!("{id:?} is not a memory id")))?;
    let forgotten = memory(&state)
        .forget(id)
        .await
        .map_err(|e| ApiError::internal("the memory could not be forgotten", &e))?;
    if !forgotten {
        return Err(ApiError::not_found("no such memory"));
    }
    Ok(Json(json!({"forgotten": true})))
}

/// `GET /ui/api/costs`: the spend of each of the last 30 UTC days and of
/// each model and each agent on those days, today's totals and the limits
/// in force (with each agent's line of the day and its share).
pub async fn costs(State(state): State<AppState>, _auth: Authed) -> Result<Json<Value>, ApiError> {
    let now = state.clock().now();
    let from = (now - Duration::days(29)).date_naive();
    let history = state.store().cost_history(from).await?;
    let totals = state.store().cost_totals(now).await?;
    let limits = state.cost_status().await;
    let days: Vec<Value> = (0..30)
        .map(|i| from + Duration::days(i))
        .map(|day| {
            let spent = history
                .days
                .iter()
                .find(|(d, _)| *d == day)
                .map_or(0, |(_, s)| *s);
            json!({"day": day, "spent_micros": spent})
        })
        .collect();
    let models: Vec<Value> = history
        .models
        .iter()
        .map(|m| json!({"day": m.day, "model": m.model, "spent_micros": m.spent_micros, "calls": m.calls}))
        .collect();
    let agents: Vec<Value> = history
        .agents
        .iter()
        .map(|a| json!({"day": a.day, "agent": a.agent, "spent_micros": a.spent_micros, "calls": a.calls}))
        .collect();
    Ok(Json(json!({
        "today": {
            "day": totals.day,
            "spent_micros": totals.spent_micros,
            "hourly_calls": totals.hourly_calls,
        },
        "limits": limits,
        "days": days,
        "models": models,
        "agents": agents,
    })))
}

/// `POST /ui/api/notifications/{id}/retry`: one delivery attempt now,
/// whatever its backoff says (a pending notification only).
pub async fn retry_notification(
    State(state): State<AppState>,
    _auth: Authed,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let id = Uuid::parse_str(id.trim())
        .map_err(|_| ApiError::bad_request(format!("{id:?} is not a notification id")))?;
    let notifier = state.notifier()?.clone();
    let dispatcher = Dispatcher::new(notifier, state.instance());
    match dispatcher.deliver_now(id, state.clock().now()).await? {
        Some(report) => Ok(Json(json!({
            "id": report.id,
            "status": report.status.as_str(),
            "next_attempt_at": report.next_attempt_at,
            "detail": report.attempt.detail,
        }))),
        None => Err(ApiError::conflict(
            "only a pending notification can be retried (this one is delivered, given up, or being delivered by another process)",
        )),
    }
}

/// `GET /ui/api/routines/{id}/yaml`: the routine as a routine file (a
/// literal webhook secret as `"***"`, as every view shows it).
pub async fn routine_yaml(
    State(state): State<AppState>,
    _auth: Authed,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let routine = state
        .routines()
        .resolve(&id)
        .await
        .map_err(crate::routes::routine_ops::api_error)?;
    let yaml = routine
        .spec
        .redacted()
        .to_yaml()
        .map_err(|e| ApiError::internal("the routine could not be written as YAML", &e))?;
    Ok(([(CONTENT_TYPE, "text/yaml; charset=utf-8")], yaml).into_response())
}

/// `GET /ui/api/routines/agents`: the agents a routine may run as (those
/// the routine service accepts in `agent`), `main` first, each with the
/// name it answers to when this daemon runs it: the routine form's choice.
pub async fn routine_agents(State(state): State<AppState>, _auth: Authed) -> Json<Value> {
    let agents: Vec<Value> = state
        .routines()
        .agents()
        .iter()
        .map(|id| {
            let chat = match state.chat() {
                Ok(main) if id == cairn_core::routine::MAIN_AGENT => Some(Arc::clone(main)),
                _ => state.agent_chat(id),
            };
            let name = chat.map_or_else(|| id.clone(), |c| c.settings().agent_name.clone());
            json!({"id": id, "name": name})
        })
        .collect();
    Json(json!({ "agents": agents }))
}

/// `GET /ui/api/doctor`: the checks of `cairn doctor --json`, run as a
/// child process of the daemon (same binary, environment and home), so the
/// status page shows exactly what the command says.
pub async fn doctor(State(state): State<AppState>, _auth: Authed) -> Result<Json<Value>, ApiError> {
    let program = state.doctor().ok_or_else(|| {
        ApiError::unavailable(
            "the doctor checks are run by `cairn daemon`; run `cairn doctor` on the machine",
        )
    })?;
    let run = tokio::process::Command::new(program)
        .args(["doctor", "--json"])
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(DOCTOR_TIME, run)
        .await
        .map_err(|_| {
            ApiError::unavailable(format!(
                "`cairn doctor` took longer than {} s",
                DOCTOR_TIME.as_secs()
            ))
        })?
        .map_err(|e| ApiError::internal("`cairn doctor` could not be started", &e))?;
    // It exits 1 when a check fails; the JSON says which.
    // Redacted by the command already; again here, since this leaves the machine.
    serde_json::from_slice(&output.stdout)
        .map(|checks| Json(cairn_core::config::redact_json(&checks)))
        .map_err(|e| {
            ApiError::internal(
                "`cairn doctor --json` did not print JSON",
                &format!("{e}; stderr: {}", String::from_utf8_lossy(&output.stderr)),
            )
        })
}

/// How long the doctor's checks may take (they connect to the database, the
/// MCP servers and Telegram).
const DOCTOR_TIME: std::time::Duration = std::time::Duration::from_secs(25);

/// `GET /ui/api/setup`: what a first run has still to do, for Home: whether
/// an LLM is configured, how many devices are paired (live tokens a
/// pairing code bought), and how many routines the person made (built-in
/// ones, the heartbeat's `system` and watchers' `watch`, not counted).
pub async fn setup(State(state): State<AppState>, _auth: Authed) -> Result<Json<Value>, ApiError> {
    let now = state.clock().now();
    let paired = state
        .store()
        .list_api_tokens()
        .await?
        .iter()
        .filter(|t| t.origin == "pairing" && t.revoked_at.is_none())
        .filter(|t| t.expires_at.is_none_or(|at| at > now))
        .count();
    let routines = state
        .store()
        .list_routines(None)
        .await?
        .iter()
        .filter(|r| !matches!(r.spec.action.kind(), "system" | "watch"))
        .count();
    Ok(Json(json!({
        "llm": state.chat().is_ok(),
        "paired_devices": paired,
        "routines": routines,
    })))
}
