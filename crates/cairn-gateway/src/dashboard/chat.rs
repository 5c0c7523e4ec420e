//! What the dashboard's chat needs beside `/ws/chat`: the history of a
//! conversation's active thread (paged, newest last, answers' Markdown
//! rendered as [`super::markdown`] nodes), the thread controls (new
//! thread, undo, switch) as actions of their own rather than chat
//! messages, and the rendering of a streamed answer once it is complete.
//!
//! A conversation is named as `/ws/chat` names it (`agent`,
//! `conversation`), so its session is the one the socket talks to; the
//! controls run through that agent's chat service, as `/new`, `/undo` and
//! `/thread` typed in a chat would, and post nothing into the thread.

use axum::Json;
use axum::extract::State;
use cairn_agent::chat::{ChatSink, Inbound, Reply};
use cairn_store::SessionRow;
use serde::Deserialize;
use serde_json::{Value, json};
use uuid::Uuid;

use super::markdown;
use crate::auth::Authed;
use crate::error::ApiError;
use crate::extract::{ApiJson, ApiQuery};
use crate::routes::sessions::turn_view;
use crate::routes::ws::{channel_of, valid_conversation};
use crate::state::{AppState, Gateway};

/// Turns a page shows without `limit`.
const PAGE: usize = 30;

/// Turns a page shows at most.
const MAX_PAGE: usize = 200;

/// Names a conversation, as `/ws/chat`'s query does.
#[derive(Debug, Deserialize)]
pub struct Conversation {
    /// The agent (`main` without it).
    pub agent: Option<String>,
    /// The conversation id the socket's `ready` frame announced.
    pub conversation: String,
}

impl Conversation {
    /// The session's channel, after checking the agent and the id.
    fn channel(&self, state: &Gateway) -> Result<String, ApiError> {
        if !valid_conversation(&self.conversation) {
            return Err(ApiError::bad_request(
                "conversation must be 1 to 64 letters, digits, '-' or '_'",
            ));
        }
        state.chat_of(self.agent.as_deref())?;
        Ok(channel_of(self.agent.as_deref(), &self.conversation))
    }
}

/// Query of `GET /ui/api/chat/history`.
#[derive(Debug, Deserialize)]
pub struct HistoryQuery {
    /// The agent (`main` without it).
    pub agent: Option<String>,
    /// The conversation id the socket's `ready` frame announced.
    pub conversation: String,
    /// Only turns numbered below this (the page before the one shown).
    pub before: Option<u32>,
    /// At most this many turns (30 without it, at most 200).
    pub limit: Option<usize>,
}

/// The person's session on `channel`, if it has one yet.
async fn session_on(state: &Gateway, channel: &str) -> Result<Option<SessionRow>, ApiError> {
    Ok(state
        .store()
        .list_sessions()
        .await?
        .into_iter()
        .find(|s| s.user_id == state.user_id() && s.channel == channel))
}

/// `GET /ui/api/chat/history?agent=&conversation=&before=&limit=`: the
/// conversation's threads (most recent first, the active one marked) and
/// the last turns of its active thread, oldest first, each answer with its
/// Markdown as nodes; `more` says whether older turns remain.
pub async fn history(
    State(state): State<AppState>,
    _auth: Authed,
    ApiQuery(q): ApiQuery<HistoryQuery>,
) -> Result<Json<Value>, ApiError> {
    let channel = Conversation {
        agent: q.agent,
        conversation: q.conversation,
    }
    .channel(&state)?;
    let empty = json!({"thread": null, "threads": [], "turns": [], "more": false});
    let Some(session) = session_on(&state, &channel).await? else {
        return Ok(Json(empty));
    };
    let threads: Vec<Value> = state
        .store()
        .list_threads(session.id)
        .await?
        .into_iter()
        .map(|t| {
            json!({
                "id": t.id, "title": t.title, "updated_at": t.updated_at,
                "active": Some(t.id) == session.active_thread_id,
            })
        })
        .collect();
    let thread = match session.active_thread_id {
        Some(id) => state.store().get_thread(id).await?,
        None => None,
    };
    let Some(thread) = thread else {
        return Ok(Json(
            json!({"thread": null, "threads": threads, "turns": [], "more": false}),
        ));
    };
    let mut turns = state
        .store()
        .load_turns(thread.id, &thread.view)
        .await?
        .into_iter()
        .map(|s| turn_view(thread.id, s))
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(before) = q.before {
        turns.retain(|t| t.number < before);
    }
    let limit = q.limit.unwrap_or(PAGE).clamp(1, MAX_PAGE);
    let more = turns.len() > limit;
    let shown = turns.split_off(turns.len().saturating_sub(limit));
    let turns: Vec<Value> = shown
        .into_iter()
        .map(|turn| {
            let nodes = turn.response.as_deref().map(markdown::nodes);
            let mut value = serde_json::to_value(&turn).unwrap_or(Value::Null);
            if let Some(map) = value.as_object_mut() {
                map.insert("nodes".into(), nodes.unwrap_or(Value::Null));
            }
            value
        })
        .collect();
    Ok(Json(json!({
        "thread": {
            "id": thread.id, "title": thread.title,
            "created_at": thread.created_at, "updated_at": thread.updated_at,
        },
        "threads": threads,
        "turns": turns,
        "more": more,
    })))
}

/// Body of `POST /ui/api/chat/thread`.
#[derive(Debug, Deserialize)]
pub struct ThreadAction {
    /// The conversation.
    #[serde(flatten)]
    pub conversation: Conversation,
    /// `new`, `undo` or `switch`.
    pub action: String,
    /// The thread to switch to (`switch` only).
    pub thread: Option<String>,
}

/// A chat sink that shows nothing: the controls answer with a notice.
struct Quiet;

impl ChatSink for Quiet {}

/// `POST /ui/api/chat/thread`: starts a new thread, undoes the active
/// thread's last turn, or switches to another thread, as the chat commands
/// do, without a message in any thread. Answers with what the chat would
/// have said (`notice`); the page then reads the history again.
pub async fn thread_action(
    State(state): State<AppState>,
    _auth: Authed,
    ApiJson(body): ApiJson<ThreadAction>,
) -> Result<Json<Value>, ApiError> {
    let channel = body.conversation.channel(&state)?;
    let text = match (body.action.as_str(), body.thread.as_deref()) {
        ("new", _) => "/new".to_string(),
        ("undo", _) => "/undo".to_string(),
        ("switch", Some(id)) => {
            let id = Uuid::parse_str(id.trim()).map_err(|_| {
                ApiError::unprocessable(format!("thread: {id:?} is not a thread id"))
            })?;
            format!("/thread {id}")
        }
        ("switch", None) => {
            return Err(ApiError::unprocessable(
                "thread: switch needs the thread's id",
            ));
        }
        (other, _) => {
            return Err(ApiError::unprocessable(format!(
                "action: unknown {other:?}; use new, undo or switch"
            )));
        }
    };
    let chat = state.chat_of(body.conversation.agent.as_deref())?;
    let inbound = Inbound {
        user_id: state.user_id().to_string(),
        channel,
        thread: None,
        text,
        images: Vec::new(),
    };
    match chat.handle(inbound, &Quiet).await {
        Reply::Notice { text } => Ok(Json(json!({ "notice": text }))),
        Reply::Error { text } | Reply::Dropped { reason: text } => Err(ApiError::conflict(text)),
        other => Err(ApiError::internal(
            "a thread control did not answer with a notice",
            &format!("{other:?}"),
        )),
    }
}

/// Body of `POST /ui/api/markdown`.
#[derive(Debug, Deserialize)]
pub struct MarkdownBody {
    /// The Markdown text (an answer).
    pub text: String,
}

/// `POST /ui/api/markdown`: `text` as [`super::markdown`] nodes, for an
/// answer streamed as plain text, drawn again as it grows and once complete.
pub async fn render_markdown(_auth: Authed, ApiJson(body): ApiJson<MarkdownBody>) -> Json<Value> {
    Json(json!({ "nodes": markdown::nodes(&body.text) }))
}
