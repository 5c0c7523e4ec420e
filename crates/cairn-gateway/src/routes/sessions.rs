//! `/api/sessions`: the person's conversations (one session per channel,
//! each with its threads) and a thread's history, turn by turn.

use axum::Json;
use axum::extract::{Path, State};
use cairn_agent::session::{TurnKind, TurnState, turn_of};
use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use crate::auth::Authed;
use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;

/// The routes of this module.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_sessions))
        .routes(routes!(thread_history))
}

/// A session: one per channel the person talks on.
#[derive(Debug, Serialize, ToSchema)]
pub struct SessionView {
    /// Its id.
    pub id: Uuid,
    /// The channel (`terminal`, `ws`, `telegram`, …).
    pub channel: String,
    /// The thread new messages go to.
    pub active_thread_id: Option<Uuid>,
    /// Created.
    pub created_at: DateTime<Utc>,
    /// Last message.
    pub last_active_at: DateTime<Utc>,
    /// Its threads, most recently changed first.
    pub threads: Vec<ThreadView>,
}

/// A thread in a listing.
#[derive(Debug, Serialize, ToSchema)]
pub struct ThreadView {
    /// Its id.
    pub id: Uuid,
    /// The channel's own id for it.
    pub external_id: Option<String>,
    /// A short title.
    pub title: Option<String>,
    /// `idle`, `processing`, `awaiting_approval`, …
    pub state: String,
    /// Last change.
    pub updated_at: DateTime<Utc>,
}

/// The person's sessions, most recently active first, with their threads.
#[utoipa::path(get, path = "/api/sessions", tag = "sessions", security(("bearer" = [])),
    responses(
        (status = 200, description = "Most recently active first", body = [SessionView]),
        (status = 401, description = "No valid token", body = ErrorBody)))]
async fn list_sessions(
    _: Authed,
    State(state): State<AppState>,
) -> Result<Json<Vec<SessionView>>, ApiError> {
    let sessions = state.store().list_sessions().await?;
    let mut views = Vec::new();
    for s in sessions
        .into_iter()
        .filter(|s| s.user_id == state.user_id())
    {
        let threads = state.store().list_threads(s.id).await?;
        views.push(SessionView {
            id: s.id,
            channel: s.channel,
            active_thread_id: s.active_thread_id,
            created_at: s.created_at,
            last_active_at: s.last_active_at,
            threads: threads
                .into_iter()
                .map(|t| ThreadView {
                    id: t.id,
                    external_id: t.external_id,
                    title: t.title,
                    state: t.state,
                    updated_at: t.updated_at,
                })
                .collect(),
        });
    }
    Ok(Json(views))
}

/// A thread with its history.
#[derive(Debug, Serialize, ToSchema)]
pub struct ThreadHistory {
    /// The thread's id.
    pub id: Uuid,
    /// Its session.
    pub session_id: Uuid,
    /// A short title.
    pub title: Option<String>,
    /// Its state.
    pub state: String,
    /// Created.
    pub created_at: DateTime<Utc>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
    /// The turns it shows, oldest first (undone turns are not shown).
    pub turns: Vec<TurnView>,
}

/// One exchange: the person's message, what the agent did, its answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct TurnView {
    /// 1-based number in the thread.
    pub number: u32,
    /// `exchange`, or `summary` for compacted older turns.
    pub kind: String,
    /// What the person wrote.
    pub user_input: String,
    /// The agent's answer.
    pub response: Option<String>,
    /// `processing`, `completed`, `failed`, `interrupted`.
    pub state: String,
    /// Started.
    pub started_at: DateTime<Utc>,
    /// Ended.
    pub completed_at: Option<DateTime<Utc>>,
    /// Why it failed or stopped.
    pub error: Option<String>,
    /// The tool calls made, in order.
    pub tool_calls: Vec<ToolCallView>,
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Generated tokens.
    pub output_tokens: u64,
}

/// One tool call of a turn.
#[derive(Debug, Serialize, ToSchema)]
pub struct ToolCallView {
    /// The tool.
    pub tool: String,
    /// Its arguments (credentials scrubbed).
    #[schema(value_type = Object)]
    pub arguments: serde_json::Value,
    /// `success`, `failed`, `denied`, `declined`, …
    pub status: String,
    /// Milliseconds it took.
    pub duration_ms: u64,
}

fn name_of<T: Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        _ => String::new(),
    }
}

/// A thread's history. The thread must belong to the session, and the
/// session to the person.
#[utoipa::path(get, path = "/api/sessions/{session_id}/threads/{thread_id}", tag = "sessions",
    security(("bearer" = [])),
    params(
        ("session_id" = String, Path, description = "The session's id"),
        ("thread_id" = String, Path, description = "The thread's id")),
    responses(
        (status = 200, description = "The thread and its turns", body = ThreadHistory),
        (status = 401, description = "No valid token", body = ErrorBody),
        (status = 404, description = "No such thread in that session", body = ErrorBody)))]
async fn thread_history(
    _: Authed,
    State(state): State<AppState>,
    Path((session_id, thread_id)): Path<(String, String)>,
) -> Result<Json<ThreadHistory>, ApiError> {
    let not_found =
        || ApiError::not_found(format!("no thread {thread_id} in session {session_id}"));
    let (Ok(session), Ok(id)) = (Uuid::parse_str(&session_id), Uuid::parse_str(&thread_id)) else {
        return Err(not_found());
    };
    let Some(thread) = state
        .store()
        .get_thread(id)
        .await?
        .filter(|t| t.session_id == session)
    else {
        return Err(not_found());
    };
    // The thread's session must be the person's (tokens are the person's).
    let owned = state
        .store()
        .list_sessions()
        .await?
        .iter()
        .any(|s| s.id == session && s.user_id == state.user_id());
    if !owned {
        return Err(not_found());
    }
    let stored = state.store().load_turns(thread.id, &thread.view).await?;
    let turns = stored
        .into_iter()
        .map(|s| turn_view(thread.id, s))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Json(ThreadHistory {
        id: thread.id,
        session_id: thread.session_id,
        title: thread.title,
        state: thread.state,
        created_at: thread.created_at,
        updated_at: thread.updated_at,
        turns,
    }))
}

/// A stored turn of `thread` as the API shows it.
pub(crate) fn turn_view(
    thread: Uuid,
    stored: cairn_store::StoredTurn,
) -> Result<TurnView, ApiError> {
    let turn = turn_of(thread, stored)
        .map_err(|e| ApiError::internal("a stored turn could not be read", &e))?;
    Ok(TurnView {
        number: turn.number,
        kind: match turn.kind {
            TurnKind::Exchange => "exchange",
            TurnKind::Summary => "summary",
        }
        .to_string(),
        user_input: turn.user_input,
        response: turn.response,
        state: match turn.state {
            TurnState::Processing => "processing",
            TurnState::Completed => "completed",
            TurnState::Failed => "failed",
            TurnState::Interrupted => "interrupted",
        }
        .to_string(),
        started_at: turn.started_at,
        completed_at: turn.completed_at,
        error: turn.error,
        tool_calls: turn
            .tool_calls
            .into_iter()
            .map(|c| ToolCallView {
                status: name_of(&c.status),
                tool: c.tool,
                arguments: c.arguments,
                duration_ms: c.duration_ms,
            })
            .collect(),
        input_tokens: turn.usage.input_tokens,
        output_tokens: turn.usage.output_tokens,
    })
}
