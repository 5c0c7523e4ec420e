//! `POST /v1/responses`, OpenAI's Responses API as newer clients and agent
//! SDKs use it by default: text in, text out, whole or as streaming events,
//! and `previous_response_id` continuing a conversation.
//!
//! A conversation is kept in memory (the last [`KEPT`] responses), not in
//! the store: a restart forgets them, and continuing one then is a 404
//! naming `previous_response_id`. Function calls, files and built-in tools
//! of the Responses API are not offered.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use cairn_agent::agent_loop::LoopOutcome;
use cairn_core::chat::{ChatMessage, Role};
use cairn_llm::GenerationOptions;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use utoipa::ToSchema;

use super::error::{OpenAiError, OpenAiErrorBody};
use super::stream::Piece;
use super::{MODEL_ALIAS, Prepared, answered_by, check_model, failure};
use crate::auth::Authed;
use crate::extract::ApiJson;
use crate::state::AppState;

/// Responses kept for `previous_response_id`.
pub const KEPT: usize = 1000;

/// The conversations of recent responses (without the system prompt).
#[derive(Debug, Default)]
pub struct ResponseMemory {
    inner: Mutex<Kept>,
}

/// The conversations by response id, and the ids oldest first.
#[derive(Debug, Default)]
struct Kept {
    by_id: HashMap<String, Arc<Vec<ChatMessage>>>,
    order: VecDeque<String>,
}

impl ResponseMemory {
    fn get(&self, id: &str) -> Option<Arc<Vec<ChatMessage>>> {
        let inner = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        inner.by_id.get(id).cloned()
    }

    fn keep(&self, id: String, conversation: Vec<ChatMessage>) {
        let mut inner = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        inner.by_id.insert(id.clone(), Arc::new(conversation));
        inner.order.push_back(id);
        while inner.order.len() > KEPT {
            if let Some(old) = inner.order.pop_front() {
                inner.by_id.remove(&old);
            }
        }
    }
}

/// A Responses API request (the fields cairn reads).
#[derive(Debug, Deserialize, ToSchema)]
pub struct ResponseRequest {
    /// As for chat completions.
    pub model: String,
    /// A string, or messages `{"role", "content"}` whose content is a
    /// string or `input_text` parts.
    pub input: ResponseInput,
    /// Instructions added to the agent's system prompt.
    #[serde(default)]
    pub instructions: Option<String>,
    /// The response this one continues.
    #[serde(default)]
    pub previous_response_id: Option<String>,
    /// Stream the answer as events.
    #[serde(default)]
    pub stream: bool,
    /// Sampling temperature.
    #[serde(default)]
    pub temperature: Option<f64>,
    /// Nucleus sampling mass.
    #[serde(default)]
    pub top_p: Option<f64>,
    /// Cap on the answer's tokens.
    #[serde(default)]
    pub max_output_tokens: Option<u32>,
}

/// The input: text, or messages.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum ResponseInput {
    /// One user message.
    Text(String),
    /// Messages.
    Items(Vec<InputItem>),
}

/// One input message.
#[derive(Debug, Deserialize, ToSchema)]
pub struct InputItem {
    /// `message` (or absent).
    #[serde(rename = "type", default)]
    pub kind: Option<String>,
    /// `user`, `assistant`, `system` or `developer`.
    #[serde(default)]
    pub role: Option<String>,
    /// A string or parts.
    #[serde(default)]
    pub content: Option<InputContent>,
}

/// Input content: a string or parts.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum InputContent {
    /// Plain text.
    Text(String),
    /// `input_text` / `output_text` parts.
    Parts(Vec<InputPart>),
}

/// One input part.
#[derive(Debug, Deserialize, ToSchema)]
pub struct InputPart {
    /// `input_text` or `output_text`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Its text.
    #[serde(default)]
    pub text: Option<String>,
}

/// The instructions and the new messages of a request.
fn translate(request: &ResponseRequest) -> Result<(String, Vec<ChatMessage>), OpenAiError> {
    let mut instructions: Vec<String> = request.instructions.iter().cloned().collect();
    let items = match &request.input {
        ResponseInput::Text(text) => {
            return Ok((instructions.concat(), vec![ChatMessage::user(text.clone())]));
        }
        ResponseInput::Items(items) => items,
    };
    let mut messages = Vec::new();
    for (i, item) in items.iter().enumerate() {
        if item.kind.as_deref().is_some_and(|k| k != "message") {
            return Err(OpenAiError::invalid(
                format!("input[{i}].type"),
                format!(
                    "input items of type `{}` are not supported (message)",
                    item.kind.as_deref().unwrap_or_default()
                ),
            ));
        }
        let text = match &item.content {
            None => String::new(),
            Some(InputContent::Text(t)) => t.clone(),
            Some(InputContent::Parts(parts)) => parts
                .iter()
                .map(|p| {
                    matches!(p.kind.as_str(), "input_text" | "output_text" | "text")
                        .then(|| p.text.clone().unwrap_or_default())
                })
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| {
                    OpenAiError::invalid(
                        format!("input[{i}].content"),
                        format!("input[{i}].content: only text parts are supported"),
                    )
                })?
                .join("\n"),
        };
        match item.role.as_deref().unwrap_or("user") {
            "user" => messages.push(ChatMessage::user(text)),
            "assistant" => messages.push(ChatMessage::assistant(text)),
            "system" | "developer" => instructions.push(text),
            other => {
                return Err(OpenAiError::invalid(
                    format!("input[{i}].role"),
                    format!(
                        "input[{i}].role `{other}` is not supported (user, assistant, system, developer)"
                    ),
                ));
            }
        }
    }
    Ok((instructions.join("\n\n"), messages))
}

/// Runs the agent on the input (after the conversation of
/// `previous_response_id`) and answers as OpenAI's Responses API does,
/// whole or streamed as `response.*` events.
#[utoipa::path(post, path = "/v1/responses", tag = "openai",
    request_body = ResponseRequest,
    responses(
        (status = 200, description = "The response object, or with `stream` its events as server-sent events",
            content(
                (Object = "application/json"),
                (String = "text/event-stream", example = "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",…}\n\n"))),
        (status = 400, description = "A request the agent cannot honour", body = OpenAiErrorBody),
        (status = 401, description = "Missing or bad token", body = OpenAiErrorBody),
        (status = 404, description = "Unknown `previous_response_id`, or model (strict)", body = OpenAiErrorBody),
        (status = 502, description = "The LLM provider failed", body = OpenAiErrorBody),
        (status = 503, description = "No LLM is configured", body = OpenAiErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn create_response(
    State(state): State<AppState>,
    _auth: Authed,
    ApiJson(request): ApiJson<ResponseRequest>,
) -> Response {
    match respond(state, request).await {
        Ok(response) => response,
        Err(e) => e.into_response(),
    }
}

/// What the response object repeats from its request.
struct Head {
    id: String,
    created: i64,
    model: String,
    previous: Option<String>,
    instructions: Option<String>,
}

impl Head {
    fn object(&self, status: &str, text: Option<&str>, outcome: Option<&LoopOutcome>) -> Value {
        let output = match text {
            Some(text) => json!([message_item(&self.id, text, "completed")]),
            None => json!([]),
        };
        let usage = outcome.map(|o| {
            json!({
                "input_tokens": o.usage.input_tokens,
                "output_tokens": o.usage.output_tokens,
                "total_tokens": o.usage.input_tokens + o.usage.output_tokens,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": 0},
            })
        });
        json!({
            "id": self.id, "object": "response", "created_at": self.created,
            "status": status, "model": self.model, "output": output, "usage": usage,
            "previous_response_id": self.previous, "instructions": self.instructions,
            "error": null, "incomplete_details": null, "metadata": {},
            "parallel_tool_calls": false, "tool_choice": "auto", "tools": [],
            "text": {"format": {"type": "text"}},
        })
    }
}

fn message_item(response: &str, text: &str, status: &str) -> Value {
    json!({
        "type": "message", "id": format!("msg_{}", response.trim_start_matches("resp_")),
        "status": status, "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    })
}

async fn respond(state: AppState, request: ResponseRequest) -> Result<Response, OpenAiError> {
    let chat = super::chat_for(&state, &request.model)?;
    check_model(&state, &request.model)?;
    let (instructions, new) = translate(&request)?;
    let mut conversation: Vec<ChatMessage> = match &request.previous_response_id {
        Some(previous) => state.responses().get(previous).map(|c| c.as_ref().clone()).ok_or_else(|| OpenAiError {
            param: Some("previous_response_id".into()),
            ..OpenAiError::new(
                StatusCode::NOT_FOUND,
                "not_found",
                format!("no response `{previous}` is kept here (the daemon keeps the last {KEPT}, until it restarts)"),
            )
        })?,
        None => Vec::new(),
    };
    conversation.extend(new);
    if !conversation.iter().any(|m| m.role == Role::User) {
        return Err(OpenAiError::invalid(
            "input",
            "input: at least one user message is needed",
        ));
    }
    super::inbound_hooks(&chat, &mut conversation).await?;
    let agent = chat.agent().with_request(
        request.temperature,
        request.max_output_tokens,
        GenerationOptions {
            top_p: request.top_p,
            ..GenerationOptions::default()
        },
        Vec::new(),
    );
    let id = format!("resp_{}", uuid::Uuid::new_v4().simple());
    let head = Head {
        id: id.clone(),
        created: state.clock().now().timestamp(),
        model: state.model().unwrap_or(MODEL_ALIAS).to_string(),
        previous: request.previous_response_id.clone(),
        instructions: request.instructions.clone(),
    };
    let prepared = Prepared::new(&state, &chat, agent, &instructions, conversation, &id).await;
    let events = Arc::clone(state.events());
    let keeper = Arc::clone(&state);

    if !request.stream {
        let (outcome, messages) = prepared.run(events, id.clone()).await;
        if let Some(error) = failure(&outcome.status) {
            return Err(error);
        }
        keeper.responses().keep(id, without_system(messages));
        let head = Head {
            model: answered_by(&outcome, head.model.clone()),
            ..head
        };
        return Ok(
            Json(head.object("completed", Some(&outcome.text), Some(&outcome))).into_response(),
        );
    }

    let (tx, rx) = mpsc::unbounded_channel();
    let kept = id.clone();
    let stop = prepared.spawn(events, id, tx, move |outcome, messages| {
        if failure(&outcome.status).is_none() {
            keeper.responses().keep(kept, without_system(messages));
        }
    });
    let events = Events {
        head,
        rx,
        text: String::new(),
        sequence: 0,
        started: false,
        ended: false,
        _stop: stop,
    };
    Ok(Sse::new(events_of(events))
        .keep_alive(KeepAlive::default())
        .into_response())
}

/// The conversation to keep: everything but the system prompt.
fn without_system(messages: Vec<ChatMessage>) -> Vec<ChatMessage> {
    messages
        .into_iter()
        .filter(|m| m.role != Role::System)
        .collect()
}

/// The streaming state of one response.
struct Events {
    head: Head,
    rx: mpsc::UnboundedReceiver<Piece>,
    text: String,
    sequence: u64,
    started: bool,
    ended: bool,
    _stop: tokio_util::sync::DropGuard,
}

impl Events {
    fn event(&mut self, kind: &str, mut data: Value) -> SseEvent {
        data["type"] = json!(kind);
        data["sequence_number"] = json!(self.sequence);
        self.sequence += 1;
        SseEvent::default().event(kind).data(data.to_string())
    }

    fn item_id(&self) -> String {
        format!("msg_{}", self.head.id.trim_start_matches("resp_"))
    }

    /// The events that open the message, before its first text.
    fn start(&mut self) -> Vec<SseEvent> {
        self.started = true;
        let item = json!({"type": "message", "id": self.item_id(), "status": "in_progress", "role": "assistant", "content": []});
        let part = json!({"type": "output_text", "text": "", "annotations": []});
        let id = self.item_id();
        vec![
            self.event(
                "response.output_item.added",
                json!({"output_index": 0, "item": item}),
            ),
            self.event(
                "response.content_part.added",
                json!({"item_id": id, "output_index": 0, "content_index": 0, "part": part}),
            ),
        ]
    }

    fn delta(&mut self, delta: &str) -> SseEvent {
        self.text.push_str(delta);
        let id = self.item_id();
        self.event("response.output_text.delta", json!({"item_id": id, "output_index": 0, "content_index": 0, "delta": delta, "logprobs": []}))
    }

    fn end(&mut self, outcome: &LoopOutcome) -> Vec<SseEvent> {
        self.ended = true;
        if let Some(error) = failure(&outcome.status) {
            let body = error.body();
            let failed = self.head.object("failed", None, Some(outcome));
            return vec![
                self.event("error", json!({"code": body["error"]["code"], "message": body["error"]["message"], "param": null})),
                self.event("response.failed", json!({"response": failed})),
            ];
        }
        let mut out = Vec::new();
        if !self.started {
            out.extend(self.start());
        }
        // Text not streamed as it came goes in one delta.
        if self.text.is_empty() && !outcome.text.is_empty() {
            out.push(self.delta(&outcome.text.clone()));
        }
        let id = self.item_id();
        let text = outcome.text.clone();
        out.push(self.event("response.output_text.done", json!({"item_id": id, "output_index": 0, "content_index": 0, "text": text, "logprobs": []})));
        out.push(self.event("response.content_part.done", json!({"item_id": id, "output_index": 0, "content_index": 0, "part": {"type": "output_text", "text": text, "annotations": []}})));
        let item = message_item(&self.head.id, &text, "completed");
        out.push(self.event(
            "response.output_item.done",
            json!({"output_index": 0, "item": item}),
        ));
        self.head.model = answered_by(outcome, self.head.model.clone());
        let done = self.head.object("completed", Some(&text), Some(outcome));
        out.push(self.event("response.completed", json!({"response": done})));
        out
    }
}

fn events_of(events: Events) -> impl futures::Stream<Item = Result<SseEvent, Infallible>> {
    let opening = VecDeque::new();
    futures::stream::unfold(
        (events, opening, true),
        |(mut events, mut queue, first)| async move {
            if first {
                let created = events.head.object("in_progress", None, None);
                queue.push_back(events.event("response.created", json!({"response": created})));
                queue.push_back(events.event("response.in_progress", json!({"response": created})));
            }
            loop {
                if let Some(event) = queue.pop_front() {
                    return Some((Ok(event), (events, queue, false)));
                }
                if events.ended {
                    return None;
                }
                match events.rx.recv().await {
                    Some(Piece::Delta(text)) => {
                        if !events.started {
                            queue.extend(events.start());
                        }
                        queue.push_back(events.delta(&text));
                    }
                    Some(Piece::End(outcome)) => queue.extend(events.end(&outcome)),
                    None => {
                        events.ended = true;
                        let failed = events.head.object("failed", None, None);
                        queue.push_back(
                            events.event("response.failed", json!({"response": failed})),
                        );
                    }
                }
            }
        },
    )
}
