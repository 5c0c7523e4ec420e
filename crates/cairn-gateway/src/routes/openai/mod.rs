//! The OpenAI-compatible API: `POST /v1/chat/completions`,
//! `POST /v1/responses`, `GET /v1/models` and `GET /v1/models/{id}`, so
//! tools built for OpenAI's API can talk to cairn.
//!
//! Each request runs the agent loop over the agent's own system prompt
//! (with the client's `system`/`developer` messages appended to it) and the
//! client's messages. The agent's tools run under the tool policy; a call
//! the policy would ask about is declined, since this API cannot ask anyone.
//! The client's own `tools` are offered beside the agent's: a call to one
//! ends the turn, returned as `tool_calls`, and the client's next request
//! carries the results as `tool` messages.
//!
//! Sampling fields and `response_format` are forwarded to the model for the
//! request (see `cairn_llm::GenerationOptions`). Refused with 400: legacy
//! `functions`, content parts other than text and `image_url` (user
//! messages only; see `images`), images for a model without vision, `n`
//! other than 1. Images sent as `data:` URLs may take a request past
//! `gateway.body_limit_bytes` (see [`crate::image_allowance`]).
//!
//! Model names: `cairn` and the agent's model are listed; any other name is
//! served by the agent too, unless `gateway.openai_strict_models` (then 404
//! `model_not_found`). Errors are OpenAI's shape (see [`error`]).

mod error;
mod images;
mod request;
mod responses;
mod stream;

use std::sync::Arc;

use async_trait::async_trait;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::sse::{KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use cairn_agent::AgentLoop;
use cairn_agent::agent_loop::{LoopDelegate, LoopEvent, LoopOutcome, LoopStatus};
use cairn_agent::chat::ChatService;
use cairn_agent::runner::Approver;
use cairn_agent::tools::ToolContext;
use cairn_core::chat::{ChatMessage, ToolCall};
use cairn_llm::LlmErrorKind;
use serde::Serialize;
use tokio::sync::mpsc;
use tracing::Instrument;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub use error::{OpenAiErrorBody, OpenAiErrorDetail, kind_for, openai_errors};
pub use request::{
    CompletionRequest, ContentPart, InCalled, InContent, InFunction, InJsonSchema, InMessage,
    InResponseFormat, InTool, InToolCall, Stop, StreamOptions,
};
pub use responses::ResponseMemory;

use crate::auth::Authed;
use crate::events::EventBus;
use crate::image_allowance::JsonWithImages;
use crate::state::AppState;
use error::OpenAiError;
use stream::{ChunkHead, Piece, Pump, stream_of};

/// The model alias accepted besides the agent's own model.
pub const MODEL_ALIAS: &str = "cairn";

/// The channel tool events of this API are published with.
const CHANNEL: &str = "openai";

/// The routes of this module.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(chat_completions))
        .routes(routes!(responses::create_response))
        .routes(routes!(models))
        .routes(routes!(model))
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
    /// `stop`, or `tool_calls` when the client's tools are to run.
    pub finish_reason: String,
}

/// The assistant's message.
#[derive(Debug, Serialize, ToSchema)]
pub struct OutMessage {
    /// `assistant`.
    pub role: String,
    /// The text (null when only tools are called).
    pub content: Option<String>,
    /// Calls of the client's tools.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<OutToolCall>>,
}

/// A call of a client tool.
#[derive(Debug, Serialize, ToSchema)]
pub struct OutToolCall {
    /// The id the `tool` message with its result names.
    pub id: String,
    /// `function`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The function and its arguments.
    pub function: OutFunction,
}

/// The function of a call.
#[derive(Debug, Serialize, ToSchema)]
pub struct OutFunction {
    /// The tool's name.
    pub name: String,
    /// The arguments, JSON-encoded.
    pub arguments: String,
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

/// The names this API lists: the agent's model, then `cairn`, then each
/// other agent as `cairn:<id>`.
fn model_names(state: &AppState) -> Vec<String> {
    let mut names = Vec::new();
    if let Some(model) = state.model().filter(|m| *m != MODEL_ALIAS) {
        names.push(model.to_string());
    }
    names.push(MODEL_ALIAS.to_string());
    names.extend(
        state
            .agent_ids()
            .iter()
            .map(|id| format!("{MODEL_ALIAS}:{id}")),
    );
    names
}

/// The chat service a request's `model` asks for: `cairn:<id>` names an
/// agent (`cairn:main` and every other name: the main one).
fn chat_for(state: &AppState, model: &str) -> Result<Arc<ChatService>, OpenAiError> {
    let main = state.chat()?;
    let Some(id) = model
        .strip_prefix(MODEL_ALIAS)
        .and_then(|r| r.strip_prefix(':'))
    else {
        return Ok(Arc::clone(main));
    };
    if id == cairn_agent::agents::MAIN {
        return Ok(Arc::clone(main));
    }
    state.agent_chat(id).ok_or_else(|| OpenAiError {
        param: Some("model".into()),
        ..OpenAiError::new(
            StatusCode::NOT_FOUND,
            "model_not_found",
            format!(
                "no agent `{id}` here; the agents are {} (GET /v1/models)",
                model_names(state).join(", ")
            ),
        )
    })
}

fn entry(state: &AppState, id: &str) -> ModelEntry {
    ModelEntry {
        id: id.to_string(),
        object: "model".into(),
        created: state.started_at().timestamp(),
        owned_by: "cairn".into(),
    }
}

/// Checks a request's model name: listed names always pass; others only
/// unless `gateway.openai_strict_models`.
fn check_model(state: &AppState, requested: &str) -> Result<(), OpenAiError> {
    let names = model_names(state);
    if names.iter().any(|n| n == requested) || !state.settings().openai_strict_models {
        return Ok(());
    }
    Err(OpenAiError {
        param: Some("model".into()),
        ..OpenAiError::new(
            StatusCode::NOT_FOUND,
            "model_not_found",
            format!(
                "the model `{requested}` does not exist here; use one of {} (GET /v1/models)",
                names.join(", ")
            ),
        )
    })
}

/// The models this API answers to: the agent's model, `cairn`, and each
/// other agent (`[[agents]]`) as `cairn:<id>`.
#[utoipa::path(get, path = "/v1/models", tag = "openai",
    responses(
        (status = 200, description = "The models", body = ModelList),
        (status = 401, description = "Missing or bad token", body = OpenAiErrorBody),
        (status = 503, description = "No LLM is configured", body = OpenAiErrorBody)),
    security(("bearer" = [])))]
async fn models(
    State(state): State<AppState>,
    _auth: Authed,
) -> Result<Json<ModelList>, OpenAiError> {
    state.chat()?;
    let data = model_names(&state)
        .iter()
        .map(|id| entry(&state, id))
        .collect();
    Ok(Json(ModelList {
        object: "list".into(),
        data,
    }))
}

/// One of the models `GET /v1/models` lists.
#[utoipa::path(get, path = "/v1/models/{id}", tag = "openai",
    params(("id" = String, Path, description = "The model's name")),
    responses(
        (status = 200, description = "The model", body = ModelEntry),
        (status = 401, description = "Missing or bad token", body = OpenAiErrorBody),
        (status = 404, description = "Not a listed model (`model_not_found`)", body = OpenAiErrorBody),
        (status = 503, description = "No LLM is configured", body = OpenAiErrorBody)),
    security(("bearer" = [])))]
async fn model(
    State(state): State<AppState>,
    _auth: Authed,
    Path(id): Path<String>,
) -> Result<Json<ModelEntry>, OpenAiError> {
    state.chat()?;
    if !model_names(&state).contains(&id) {
        return Err(OpenAiError {
            param: Some("model".into()),
            ..OpenAiError::new(
                StatusCode::NOT_FOUND,
                "model_not_found",
                format!("the model `{id}` is not one GET /v1/models lists"),
            )
        });
    }
    Ok(Json(entry(&state, &id)))
}

/// Runs the agent on the request's messages and answers as OpenAI's chat
/// completions API does, whole or streamed (`stream`), with `usage`.
#[utoipa::path(post, path = "/v1/chat/completions", tag = "openai",
    request_body = CompletionRequest,
    responses(
        (status = 200, description = "The answer: a completion, or with `stream` chunks as server-sent events",
            content(
                (Completion = "application/json"),
                (String = "text/event-stream", example = "data: {\"object\":\"chat.completion.chunk\",…}\n\ndata: [DONE]\n\n"))),
        (status = 400, description = "A request the agent cannot honour", body = OpenAiErrorBody),
        (status = 401, description = "Missing or bad token", body = OpenAiErrorBody),
        (status = 404, description = "Unknown model (`model_not_found`, with `gateway.openai_strict_models`)", body = OpenAiErrorBody),
        (status = 422, description = "A field is missing or of the wrong type", body = OpenAiErrorBody),
        (status = 429, description = "The LLM provider is rate limiting", body = OpenAiErrorBody),
        (status = 502, description = "The LLM provider failed", body = OpenAiErrorBody),
        (status = 503, description = "No LLM is configured", body = OpenAiErrorBody)),
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

/// A turn ready to run: the agent with the request's settings, the
/// messages (system prompt first) and the tool context.
pub(super) struct Prepared {
    agent: AgentLoop,
    messages: Vec<ChatMessage>,
    ctx: ToolContext,
    cancel: tokio_util::sync::CancellationToken,
    /// Asks the owner at the approval desk, if any (`agent.approval_channel`).
    approver: Arc<dyn Approver>,
}

impl Prepared {
    /// The system prompt of `chat`'s `agent` with the client's instructions,
    /// then `conversation`; `session` names the turn's tool context.
    async fn new(
        state: &AppState,
        chat: &ChatService,
        agent: AgentLoop,
        instructions: &str,
        conversation: Vec<ChatMessage>,
        session: &str,
    ) -> Self {
        let mut prompt = chat.system_prompt(&agent).await;
        if !instructions.trim().is_empty() {
            prompt = format!("{prompt}\n\n## Instructions from the API client\n\n{instructions}");
        }
        let mut messages = vec![ChatMessage::system(prompt)];
        messages.extend(conversation);
        // Shutdown, or the client going away, stops the turn.
        let cancel = state.shutdown().child_token();
        let ctx = chat.tool_context(&format!("{CHANNEL}:{session}"), cancel.clone());
        Self {
            agent,
            messages,
            ctx,
            cancel,
            approver: state.unattended_approver("an API client (/v1)"),
        }
    }

    /// Runs the turn, whole.
    async fn run(
        mut self,
        events: Arc<EventBus>,
        session: String,
    ) -> (LoopOutcome, Vec<ChatMessage>) {
        let _stop = self.cancel.drop_guard();
        let delegate = Delegate {
            deltas: None,
            events,
            session,
            approver: Arc::clone(&self.approver),
        };
        let outcome = self
            .agent
            .run(&delegate, &mut self.messages, &self.ctx)
            .await;
        (outcome, self.messages)
    }

    /// Runs the turn in a task, sending its text deltas and its end to `tx`;
    /// the returned guard stops it when dropped.
    fn spawn(
        mut self,
        events: Arc<EventBus>,
        session: String,
        tx: mpsc::UnboundedSender<Piece>,
        on_end: impl FnOnce(&LoopOutcome, Vec<ChatMessage>) + Send + 'static,
    ) -> tokio_util::sync::DropGuard {
        let stop = self.cancel.clone().drop_guard();
        let delegate = Delegate {
            deltas: Some(tx.clone()),
            events,
            session,
            approver: Arc::clone(&self.approver),
        };
        tokio::spawn(
            async move {
                let outcome = self
                    .agent
                    .run(&delegate, &mut self.messages, &self.ctx)
                    .await;
                on_end(&outcome, self.messages);
                let _ = tx.send(Piece::End(Box::new(outcome)));
            }
            .in_current_span(),
        );
        stop
    }
}

async fn complete(state: AppState, request: CompletionRequest) -> Result<Response, OpenAiError> {
    let chat = chat_for(&state, &request.model)?;
    check_model(&state, &request.model)?;
    let translated = request.translate(&chat)?;
    let mut conversation = translated.conversation;
    images::attach(&chat, &request.messages, &mut conversation).await?;
    inbound_hooks(&chat, &mut conversation).await?;
    let agent = chat.agent().with_request(
        request.temperature,
        request.max_tokens(),
        translated.options,
        translated.tools,
    );
    let id = format!("chatcmpl-{}", uuid::Uuid::new_v4().simple());
    let created = state.clock().now().timestamp();
    let configured = state.model().unwrap_or(MODEL_ALIAS).to_string();
    let prepared = Prepared::new(
        &state,
        &chat,
        agent,
        &translated.instructions,
        conversation,
        &id,
    )
    .await;
    let events = Arc::clone(state.events());

    if !request.stream {
        let (outcome, _) = prepared.run(events, id.clone()).await;
        if let Some(error) = failure(&outcome.status) {
            return Err(error);
        }
        let (content, tool_calls, finish) = match &outcome.status {
            LoopStatus::ClientTools { calls } => (
                Some(outcome.text.clone()).filter(|t| !t.is_empty()),
                Some(out_tool_calls(calls)),
                "tool_calls",
            ),
            _ => (Some(outcome.text.clone()), None, "stop"),
        };
        let completion = Completion {
            id,
            object: "chat.completion".into(),
            created,
            model: answered_by(&outcome, configured),
            choices: vec![Choice {
                index: 0,
                message: OutMessage {
                    role: "assistant".into(),
                    content,
                    tool_calls,
                },
                finish_reason: finish.into(),
            }],
            usage: CompletionUsage::from(&outcome),
        };
        return Ok(Json(completion).into_response());
    }

    let (tx, rx) = mpsc::unbounded_channel();
    let include_usage = request.stream_options.is_some_and(|o| o.include_usage);
    let stop = prepared.spawn(events, id.clone(), tx, |_, _| {});
    let head = ChunkHead {
        id,
        created,
        model: configured,
        include_usage,
    };
    Ok(Sse::new(stream_of(Pump::new(head, rx, stop)))
        .keep_alive(KeepAlive::default())
        .into_response())
}

/// The model that answered, as the provider reported it, else the configured one.
fn answered_by(outcome: &LoopOutcome, configured: String) -> String {
    Some(outcome.model.clone())
        .filter(|m| !m.trim().is_empty())
        .unwrap_or(configured)
}

/// Client tool calls in OpenAI's shape.
fn out_tool_calls(calls: &[ToolCall]) -> Vec<OutToolCall> {
    calls
        .iter()
        .map(|c| OutToolCall {
            id: c.id.clone(),
            kind: "function".into(),
            function: OutFunction {
                name: c.name.clone(),
                arguments: match &c.arguments {
                    serde_json::Value::String(raw) => raw.clone(),
                    other => other.to_string(),
                },
            },
        })
        .collect()
}

/// The error for a turn that did not answer.
/// Runs the `before_inbound` hooks (`on_message`) on the client's last user
/// message, the one this request brings (the earlier ones were its own
/// turns' or the client's history): a hook may rewrite it or drop the request.
pub(super) async fn inbound_hooks(
    chat: &ChatService,
    conversation: &mut [ChatMessage],
) -> Result<(), OpenAiError> {
    let Some(last) = conversation
        .iter_mut()
        .rev()
        .find(|m| m.role == cairn_core::chat::Role::User)
    else {
        return Ok(());
    };
    match chat
        .agent()
        .hooks()
        .before_inbound(CHANNEL, &mut last.content)
        .await
    {
        cairn_agent::hooks::HookFlow::Continue => Ok(()),
        cairn_agent::hooks::HookFlow::Cancel(reason) => Err(OpenAiError::new(
            StatusCode::BAD_REQUEST,
            "message_dropped",
            format!("the message was dropped: {reason}"),
        )),
    }
}

fn failure(status: &LoopStatus) -> Option<OpenAiError> {
    let (status, code, message) = match status {
        LoopStatus::Answered | LoopStatus::ClientTools { .. } => return None,
        LoopStatus::Failed { error } if error.kind() == LlmErrorKind::RateLimited => (
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limited",
            format!("the LLM provider is rate limiting: {error}"),
        ),
        // The daily budget, an agent's share or the hourly limit: OpenAI's
        // own answer to a spent quota, so clients stop rather than retry.
        LoopStatus::Failed { error } if error.kind() == LlmErrorKind::CostLimit => (
            StatusCode::TOO_MANY_REQUESTS,
            "insufficient_quota",
            format!("refused by the cost limits: {error}"),
        ),
        LoopStatus::Failed { error } => (
            StatusCode::BAD_GATEWAY,
            "llm_error",
            format!("the LLM provider failed: {error}"),
        ),
        LoopStatus::Interrupted => (
            StatusCode::SERVICE_UNAVAILABLE,
            "interrupted",
            "the turn was interrupted (the daemon is stopping)".to_string(),
        ),
        LoopStatus::IterationLimit { limit } => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "agent_error",
            format!("stopped after {limit} model calls without a final answer"),
        ),
        LoopStatus::Cancelled { reason } => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "agent_error",
            format!("stopped by a hook: {reason}"),
        ),
    };
    Some(OpenAiError::new(status, code, message))
}

/// The loop's view of an API request: asks the approval desk (or nobody),
/// forwards text deltas, publishes tool activity.
struct Delegate {
    deltas: Option<mpsc::UnboundedSender<Piece>>,
    events: Arc<EventBus>,
    session: String,
    approver: Arc<dyn Approver>,
}

#[async_trait]
impl LoopDelegate for Delegate {
    fn approver(&self) -> &dyn Approver {
        self.approver.as_ref()
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
