//! The OpenAI-compatible API: `POST /v1/chat/completions` and
//! `GET /v1/models`, so tools built for OpenAI's API can talk to cairn.
//!
//! Stateless: each request runs the agent loop over the agent's own system
//! prompt (with the client's `system`/`developer` messages appended to it)
//! and the client's `user` and `assistant` messages; nothing is kept on the
//! server. The agent's tools run under the tool policy; a call the policy
//! would ask about is declined, since this API cannot ask anyone.
//!
//! `temperature`, `top_p`, `max_tokens`, `max_completion_tokens`, `stop`,
//! `seed` and other sampling fields are accepted and ignored: the agent
//! answers with its configured settings. Requests the agent cannot honour
//! are refused with 400: client-defined `tools` (or `functions`), `tool`
//! messages, content parts other than text and `image_url` (user messages
//! only; see `openai_images`), images for a model without vision, and `n`
//! other than 1. Images sent as `data:` URLs may take a request past
//! `gateway.body_limit_bytes` (see [`crate::image_allowance`]).
//!
//! The model must be the agent's (`GET /v1/models` lists it) or the alias
//! `cairn`; anything else is 404 `model_not_found`. Errors use OpenAI's
//! shape `{"error":{"message","type","code","param"}}`.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;

use async_trait::async_trait;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use cairn_agent::agent_loop::{LoopDelegate, LoopEvent, LoopOutcome, LoopStatus};
use cairn_agent::chat::ChatService;
use cairn_agent::prompt::{PromptContext, build_system_prompt};
use cairn_agent::runner::{Approver, DenyAll};
use cairn_agent::tools::ToolContext;
use cairn_core::chat::ChatMessage;
use futures::Stream;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::DropGuard;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::auth::Authed;
use crate::error::{ApiError, ErrorBody};
use crate::events::EventBus;
use crate::image_allowance::JsonWithImages;
use crate::state::AppState;

/// The model alias accepted besides the agent's own model.
pub const MODEL_ALIAS: &str = "cairn";

/// The channel tool events of this API are published with.
const CHANNEL: &str = "openai";

/// The routes of this module.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(chat_completions))
        .routes(routes!(models))
}

/// A chat completion request (the fields cairn reads; others are ignored).
#[derive(Debug, Deserialize, ToSchema)]
pub struct CompletionRequest {
    /// The agent's model, or `cairn`.
    pub model: String,
    /// The conversation so far.
    pub messages: Vec<InMessage>,
    /// Stream the answer as server-sent events.
    #[serde(default)]
    pub stream: bool,
    /// Streaming options.
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
    /// Ignored: the agent uses its configured sampling.
    #[serde(default)]
    pub temperature: Option<f64>,
    /// Ignored: the agent uses its configured limits.
    #[serde(default)]
    pub max_tokens: Option<u64>,
    /// Refused unless empty: the agent uses its own tools.
    #[serde(default)]
    #[schema(value_type = Option<Vec<Object>>)]
    pub tools: Option<Vec<Value>>,
    /// Refused unless empty, as `tools`.
    #[serde(default)]
    #[schema(value_type = Option<Vec<Object>>)]
    pub functions: Option<Vec<Value>>,
    /// Only 1 is supported.
    #[serde(default)]
    pub n: Option<u32>,
}

/// Streaming options.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct StreamOptions {
    /// Send a last chunk with the usage and no choices.
    #[serde(default)]
    pub include_usage: bool,
}

/// One message of the request.
#[derive(Debug, Deserialize, ToSchema)]
pub struct InMessage {
    /// `system`, `developer`, `user` or `assistant`.
    pub role: String,
    /// A string, or an array of `{"type":"text","text":…}` parts.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub content: Value,
}

/// A completion (non-streaming answer).
#[derive(Debug, Serialize, ToSchema)]
pub struct Completion {
    /// `chatcmpl-…`.
    pub id: String,
    /// `chat.completion`.
    pub object: String,
    /// Unix seconds.
    pub created: i64,
    /// The model that answered.
    pub model: String,
    /// The one answer.
    pub choices: Vec<Choice>,
    /// Tokens used by every model call of the turn.
    pub usage: CompletionUsage,
}

/// One answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct Choice {
    /// Always 0.
    pub index: u32,
    /// The answer.
    pub message: OutMessage,
    /// `stop`.
    pub finish_reason: String,
}

/// The assistant's message.
#[derive(Debug, Serialize, ToSchema)]
pub struct OutMessage {
    /// `assistant`.
    pub role: String,
    /// The text.
    pub content: String,
}

/// Token counts, OpenAI's names.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub struct CompletionUsage {
    /// Input tokens over all the turn's model calls.
    pub prompt_tokens: u64,
    /// Output tokens over all the turn's model calls.
    pub completion_tokens: u64,
    /// Their sum.
    pub total_tokens: u64,
}

impl From<&LoopOutcome> for CompletionUsage {
    fn from(outcome: &LoopOutcome) -> Self {
        Self {
            prompt_tokens: outcome.usage.input_tokens,
            completion_tokens: outcome.usage.output_tokens,
            total_tokens: outcome.usage.input_tokens + outcome.usage.output_tokens,
        }
    }
}

/// The models list.
#[derive(Debug, Serialize, ToSchema)]
pub struct ModelList {
    /// `list`.
    pub object: String,
    /// The models.
    pub data: Vec<ModelEntry>,
}

/// One model.
#[derive(Debug, Serialize, ToSchema)]
pub struct ModelEntry {
    /// Its name, for `model`.
    pub id: String,
    /// `model`.
    pub object: String,
    /// Unix seconds (when the daemon started).
    pub created: i64,
    /// `cairn`.
    pub owned_by: String,
}

/// An error in OpenAI's shape (which also has our `code` and `message`).
#[derive(Debug)]
struct OpenAiError {
    status: StatusCode,
    kind: &'static str,
    code: &'static str,
    message: String,
}

impl OpenAiError {
    fn invalid(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            kind: "invalid_request_error",
            code: "bad_request",
            message: message.into(),
        }
    }

    fn body(&self) -> Value {
        json!({"error": {"message": self.message, "type": self.kind, "code": self.code, "param": null}})
    }
}

impl From<ApiError> for OpenAiError {
    fn from(e: ApiError) -> Self {
        let kind = match e.status.as_u16() {
            401 => "authentication_error",
            400..=499 => "invalid_request_error",
            _ => "server_error",
        };
        Self {
            status: e.status,
            kind,
            code: e.code,
            message: e.message,
        }
    }
}

impl IntoResponse for OpenAiError {
    fn into_response(self) -> Response {
        (self.status, Json(self.body())).into_response()
    }
}

/// The models this API answers to: the agent's model and `cairn`.
#[utoipa::path(get, path = "/v1/models", tag = "openai",
    responses(
        (status = 200, description = "The models", body = ModelList),
        (status = 401, description = "Missing or bad token", body = ErrorBody),
        (status = 503, description = "No LLM is configured", body = ErrorBody)),
    security(("bearer" = [])))]
async fn models(State(state): State<AppState>, _auth: Authed) -> Result<Json<ModelList>, ApiError> {
    state.chat()?;
    let created = state.started_at().timestamp();
    let entry = |id: &str| ModelEntry {
        id: id.to_string(),
        object: "model".into(),
        created,
        owned_by: "cairn".into(),
    };
    let mut data = vec![entry(MODEL_ALIAS)];
    if let Some(model) = state.model().filter(|m| *m != MODEL_ALIAS) {
        data.insert(0, entry(model));
    }
    Ok(Json(ModelList {
        object: "list".into(),
        data,
    }))
}

/// Runs the agent on the request's messages and answers as OpenAI's chat
/// completions API does, whole or streamed (`stream`), with `usage`.
#[utoipa::path(post, path = "/v1/chat/completions", tag = "openai",
    request_body = CompletionRequest,
    responses(
        (status = 200, description = "The answer (as `text/event-stream` chunks when `stream` is true)", body = Completion),
        (status = 400, description = "A request the agent cannot honour", body = ErrorBody),
        (status = 401, description = "Missing or bad token", body = ErrorBody),
        (status = 404, description = "Unknown model (`model_not_found`)", body = ErrorBody),
        (status = 502, description = "The LLM provider failed", body = ErrorBody),
        (status = 503, description = "No LLM is configured", body = ErrorBody)),
    security(("bearer" = [])))]
async fn chat_completions(
    State(state): State<AppState>,
    _auth: Authed,
    JsonWithImages(request): JsonWithImages<CompletionRequest>,
) -> Response {
    match complete(state, request).await {
        Ok(response) => response,
        Err(e) => e.into_response(),
    }
}

async fn complete(state: AppState, request: CompletionRequest) -> Result<Response, OpenAiError> {
    let chat = Arc::clone(state.chat()?);
    let model = state.model().unwrap_or(MODEL_ALIAS).to_string();
    if request.model != model && request.model != MODEL_ALIAS {
        return Err(OpenAiError {
            status: StatusCode::NOT_FOUND,
            kind: "invalid_request_error",
            code: "model_not_found",
            message: format!(
                "the model `{}` does not exist here; use `{model}` or `{MODEL_ALIAS}` (GET /v1/models)",
                request.model
            ),
        });
    }
    if request.tools.as_ref().is_some_and(|t| !t.is_empty())
        || request.functions.as_ref().is_some_and(|f| !f.is_empty())
    {
        return Err(OpenAiError::invalid(
            "client-defined tools are not supported: the agent uses its own tools",
        ));
    }
    if request.n.is_some_and(|n| n != 1) {
        return Err(OpenAiError::invalid("only n = 1 is supported"));
    }
    let (instructions, mut conversation) = translate(&request.messages)?;
    attach_images(&chat, &request.messages, &mut conversation).await?;
    let mut messages = vec![ChatMessage::system(
        system_prompt(&chat, state.clock().now(), &instructions).await,
    )];
    messages.extend(conversation);

    let id = format!("chatcmpl-{}", uuid::Uuid::new_v4().simple());
    let created = state.clock().now().timestamp();
    // Shutdown, or the client going away, stops the turn.
    let cancel = state.shutdown().child_token();
    let ctx = ToolContext::new(&chat.settings().workspace, format!("{CHANNEL}:{id}"))
        .with_cancel(cancel.clone())
        .with_timezone(chat.settings().timezone)
        .with_clock(Arc::clone(state.clock()))
        .with_limits(chat.settings().tool_limits.clone());
    let events = Arc::clone(state.events());

    if !request.stream {
        let _stop = cancel.drop_guard();
        let delegate = Delegate {
            deltas: None,
            events,
            session: id.clone(),
        };
        let outcome = chat.agent().run(&delegate, &mut messages, &ctx).await;
        if let Some(error) = failure(&outcome.status) {
            return Err(error);
        }
        let completion = Completion {
            id,
            object: "chat.completion".into(),
            created,
            model,
            choices: vec![Choice {
                index: 0,
                message: OutMessage {
                    role: "assistant".into(),
                    content: outcome.text.clone(),
                },
                finish_reason: "stop".into(),
            }],
            usage: CompletionUsage::from(&outcome),
        };
        return Ok(Json(completion).into_response());
    }

    let (tx, rx) = mpsc::unbounded_channel();
    let include_usage = request.stream_options.is_some_and(|o| o.include_usage);
    let delegate = Delegate {
        deltas: Some(tx.clone()),
        events,
        session: id.clone(),
    };
    tokio::spawn(async move {
        let outcome = chat.agent().run(&delegate, &mut messages, &ctx).await;
        let _ = tx.send(Piece::End(Box::new(outcome)));
    });
    let pump = Pump {
        chunk: ChunkHead {
            id,
            created,
            model,
            include_usage,
        },
        rx,
        queue: VecDeque::from([head_chunk_role()]),
        streamed: false,
        ended: false,
        _stop: cancel.drop_guard(),
    };
    Ok(Sse::new(stream_of(pump))
        .keep_alive(KeepAlive::default())
        .into_response())
}

/// The request's `system`/`developer` text and the rest as chat messages.
fn translate(messages: &[InMessage]) -> Result<(String, Vec<ChatMessage>), OpenAiError> {
    let mut instructions = Vec::new();
    let mut conversation = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let text = text_of(&m.content).ok_or_else(|| {
            OpenAiError::invalid(format!(
                "messages[{i}].content: only text and image_url parts are supported"
            ))
        })?;
        match m.role.as_str() {
            "system" | "developer" => instructions.push(text),
            "user" => conversation.push(ChatMessage::user(text)),
            "assistant" => conversation.push(ChatMessage::assistant(text)),
            other => {
                return Err(OpenAiError::invalid(format!(
                    "messages[{i}].role `{other}` is not supported (system, developer, user, assistant)"
                )));
            }
        }
    }
    if !conversation
        .iter()
        .any(|m| m.role == cairn_core::chat::Role::User)
    {
        return Err(OpenAiError::invalid(
            "messages: at least one user message is needed",
        ));
    }
    Ok((instructions.join("\n\n"), conversation))
}

/// A message's text: a string, or text parts joined (image parts are read
/// by [`attach_images`]; `None`: other parts).
fn text_of(content: &Value) -> Option<String> {
    match content {
        Value::String(s) => Some(s.clone()),
        Value::Null => Some(String::new()),
        Value::Array(parts) => parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str) != Some("image_url"))
            .map(|p| {
                (p.get("type").and_then(Value::as_str) == Some("text"))
                    .then(|| p.get("text").and_then(Value::as_str).map(str::to_string))
                    .flatten()
            })
            .collect::<Option<Vec<_>>>()
            .map(|texts| texts.join("\n")),
        _ => None,
    }
}

/// Gives each translated user message the images of its request message
/// (`conversation` holds the user and assistant messages in request order).
async fn attach_images(
    chat: &ChatService,
    messages: &[InMessage],
    conversation: &mut [ChatMessage],
) -> Result<(), OpenAiError> {
    let spoken = messages
        .iter()
        .enumerate()
        .filter(|(_, m)| matches!(m.role.as_str(), "user" | "assistant"));
    for ((i, m), translated) in spoken.zip(conversation.iter_mut()) {
        let images = super::openai_images::images_of(chat, i, &m.content)
            .await
            .map_err(OpenAiError::invalid)?;
        if images.is_empty() {
            continue;
        }
        if m.role != "user" {
            return Err(OpenAiError::invalid(format!(
                "messages[{i}]: images are accepted in user messages only"
            )));
        }
        if !chat.agent().provider().vision() {
            return Err(OpenAiError::invalid(cairn_llm::vision_refusal(
                chat.agent().model(),
            )));
        }
        translated.images = images;
    }
    Ok(())
}

async fn system_prompt(
    chat: &ChatService,
    now: chrono::DateTime<chrono::Utc>,
    instructions: &str,
) -> String {
    let settings = chat.settings();
    let agent = chat.agent();
    let prompt = build_system_prompt(&PromptContext {
        agent_name: settings.agent_name.clone(),
        workspace: settings.workspace.clone(),
        timezone: settings.timezone,
        now,
        model: agent
            .config()
            .model
            .clone()
            .unwrap_or_else(|| agent.provider().model().to_string()),
        tools: agent.runner().definitions(),
        more_tools: agent.runner().on_demand_listing(),
        runtime: settings.runtime.clone(),
        skill_paths: settings.skill_paths.clone(),
    })
    .await;
    if instructions.trim().is_empty() {
        prompt
    } else {
        format!("{prompt}\n\n## Instructions from the API client\n\n{instructions}")
    }
}

/// The error for a turn that did not answer.
fn failure(status: &LoopStatus) -> Option<OpenAiError> {
    let (status, kind, code, message) = match status {
        LoopStatus::Answered => return None,
        LoopStatus::Failed { error } => (
            StatusCode::BAD_GATEWAY,
            "server_error",
            "llm_error",
            format!("the LLM provider failed: {error}"),
        ),
        LoopStatus::Interrupted => (
            StatusCode::SERVICE_UNAVAILABLE,
            "server_error",
            "interrupted",
            "the turn was interrupted (the daemon is stopping)".to_string(),
        ),
        LoopStatus::IterationLimit { limit } => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "agent_error",
            format!("stopped after {limit} model calls without a final answer"),
        ),
        LoopStatus::Cancelled { reason } => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "agent_error",
            format!("stopped by a hook: {reason}"),
        ),
    };
    Some(OpenAiError {
        status,
        kind,
        code,
        message,
    })
}

/// What the running turn sends the stream.
enum Piece {
    Delta(String),
    End(Box<LoopOutcome>),
}

/// The loop's view of an API request: declines what would be asked,
/// forwards text deltas, publishes tool activity.
struct Delegate {
    deltas: Option<mpsc::UnboundedSender<Piece>>,
    events: Arc<EventBus>,
    session: String,
}

#[async_trait]
impl LoopDelegate for Delegate {
    fn approver(&self) -> &dyn Approver {
        &DenyAll
    }

    fn streaming(&self) -> bool {
        self.deltas.is_some()
    }

    fn on_event(&self, event: LoopEvent) {
        self.events.publish_tool(&event, CHANNEL, &self.session);
        if let (LoopEvent::TextDelta(text), Some(tx)) = (event, &self.deltas) {
            let _ = tx.send(Piece::Delta(text));
        }
    }
}

struct ChunkHead {
    id: String,
    created: i64,
    model: String,
    include_usage: bool,
}

impl ChunkHead {
    fn chunk(&self, choices: Value, usage: Option<CompletionUsage>) -> SseEvent {
        let mut body = json!({
            "id": self.id, "object": "chat.completion.chunk", "created": self.created,
            "model": self.model, "choices": choices,
        });
        if self.include_usage {
            body["usage"] = json!(usage);
        }
        SseEvent::default().data(body.to_string())
    }

    fn delta(&self, delta: Value, finish: Option<&str>) -> SseEvent {
        self.chunk(
            json!([{"index": 0, "delta": delta, "finish_reason": finish}]),
            None,
        )
    }
}

/// Marks the first chunk, which carries the role.
fn head_chunk_role() -> Queued {
    Queued::Role
}

enum Queued {
    Role,
    Ready(SseEvent),
}

struct Pump {
    chunk: ChunkHead,
    rx: mpsc::UnboundedReceiver<Piece>,
    queue: VecDeque<Queued>,
    streamed: bool,
    ended: bool,
    /// Cancels the turn when the client goes away (the stream is dropped).
    _stop: DropGuard,
}

impl Pump {
    fn finish(&mut self, outcome: &LoopOutcome) {
        self.ended = true;
        if let Some(error) = failure(&outcome.status) {
            self.queue.push_back(Queued::Ready(
                SseEvent::default().data(error.body().to_string()),
            ));
            return;
        }
        if !self.streamed && !outcome.text.is_empty() {
            let delta = self.chunk.delta(json!({"content": outcome.text}), None);
            self.queue.push_back(Queued::Ready(delta));
        }
        let stop = self.chunk.delta(json!({}), Some("stop"));
        self.queue.push_back(Queued::Ready(stop));
        if self.chunk.include_usage {
            let usage = self
                .chunk
                .chunk(json!([]), Some(CompletionUsage::from(outcome)));
            self.queue.push_back(Queued::Ready(usage));
        }
        self.queue
            .push_back(Queued::Ready(SseEvent::default().data("[DONE]")));
    }
}

fn stream_of(pump: Pump) -> impl Stream<Item = Result<SseEvent, Infallible>> {
    futures::stream::unfold(pump, |mut pump| async move {
        loop {
            if let Some(queued) = pump.queue.pop_front() {
                let event = match queued {
                    Queued::Role => pump
                        .chunk
                        .delta(json!({"role": "assistant", "content": ""}), None),
                    Queued::Ready(event) => event,
                };
                return Some((Ok(event), pump));
            }
            if pump.ended {
                return None;
            }
            match pump.rx.recv().await {
                Some(Piece::Delta(text)) => {
                    pump.streamed = true;
                    let delta = pump.chunk.delta(json!({"content": text}), None);
                    return Some((Ok(delta), pump));
                }
                Some(Piece::End(outcome)) => pump.finish(&outcome),
                // The turn's task ended without a word (it panicked).
                None => {
                    let error = OpenAiError {
                        status: StatusCode::INTERNAL_SERVER_ERROR,
                        kind: "server_error",
                        code: "internal",
                        message: "the turn ended unexpectedly".into(),
                    };
                    pump.ended = true;
                    pump.queue.push_back(Queued::Ready(
                        SseEvent::default().data(error.body().to_string()),
                    ));
                }
            }
        }
    })
}
