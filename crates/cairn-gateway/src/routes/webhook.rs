//! `POST /webhook`: one agent turn for a message from another program, on
//! the same chat service as the terminal (channel `webhook`). An
//! `X-Idempotency-Key` is claimed in the database for 24 h: a repeat gets
//! the first response again, byte for byte, instead of a second turn. The
//! claim is leased to this process and renewed while the turn runs, so a
//! daemon killed mid-turn leaves the key free again once the lease lapses.
//! With `gateway.webhook_secret`, messages are signed too
//! ([`crate::webhook_signature`]).
//!
//! `?agent=ID` asks another agent (`[[agents]]`): its turn runs on channel
//! `webhook:<id>` and its idempotency keys are its own.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use cairn_agent::chat::{ChatSink, Inbound, Reply};
use cairn_agent::runner::Approver;
use cairn_store::IdempotencyClaim;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::auth::Authed;
use crate::error::{ApiError, ErrorBody};
use crate::extract::ApiQuery;
use crate::state::AppState;
use crate::webhook_signature::SignedJson;

/// The header naming a request's idempotency key.
pub const IDEMPOTENCY_HEADER: &str = "x-idempotency-key";
/// Set (to `true`) on an answer replayed from an earlier request.
pub const REPLAYED_HEADER: &str = "idempotent-replayed";
/// The scope of webhook keys in the store.
const SCOPE: &str = "webhook";
/// How long a key is remembered.
const KEY_TTL_HOURS: i64 = 24;
/// Longest key accepted.
const MAX_KEY_LEN: usize = 200;
/// How long a claim outlives its last renewal; renewed every third of it.
pub const CLAIM_LEASE: std::time::Duration = std::time::Duration::from_secs(60);

/// The routes of this module.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(webhook))
}

/// Query of `POST /webhook`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct WebhookQuery {
    /// The agent to ask (an `[[agents]]` id); `main` without it.
    pub agent: Option<String>,
}

/// Where a webhook turn runs: the agent (`None`: main), and the channel
/// and idempotency scope, both `webhook` or `webhook:<agent>`.
struct Place {
    agent: Option<String>,
    channel: String,
}

impl Place {
    fn of(agent: Option<String>) -> Place {
        let agent = agent.filter(|a| a != cairn_agent::agents::MAIN);
        let channel = match &agent {
            Some(agent) => format!("{SCOPE}:{agent}"),
            None => SCOPE.to_string(),
        };
        Place { agent, channel }
    }
}

/// A message for the agent.
#[derive(Debug, Deserialize, ToSchema)]
pub struct WebhookRequest {
    /// What to tell the agent (not blank).
    #[schema(min_length = 1)]
    pub message: String,
}

/// The agent's answer.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct WebhookResponse {
    /// The answer's text.
    pub response: String,
    /// The model that answered.
    pub model: String,
}

/// Nobody attends a webhook's turn: approvals go to the approval desk,
/// or are declined as needing a person.
struct WebhookSink(Arc<dyn Approver>);

impl ChatSink for WebhookSink {
    fn approver(&self) -> Option<&dyn Approver> {
        Some(self.0.as_ref())
    }
}

/// Runs one agent turn on the message.
#[utoipa::path(post, path = "/webhook", tag = "chat",
    security(("bearer" = [])),
    params(WebhookQuery,
        ("X-Idempotency-Key" = Option<String>, Header,
        description = "Repeats with the same key within 24 h get the first response (header Idempotent-Replayed: true)"),
        ("X-Webhook-Signature" = Option<String>, Header,
        description = "sha256=<hex HMAC-SHA256 under gateway.webhook_secret of the body, or of <timestamp>.<body> with X-Cairn-Timestamp>; required when the secret is set, refused when it is not"),
        ("X-Cairn-Timestamp" = Option<i64>, Header,
        description = "Unix seconds, signed with the body; accepted within 5 minutes of the daemon's clock, once")),
    request_body = WebhookRequest,
    responses(
        (status = 200, description = "The agent's answer", body = WebhookResponse),
        (status = 400, description = "Malformed request or key", body = ErrorBody),
        (status = 401, description = "No valid bearer token", body = ErrorBody),
        (status = 403, description = "Missing, malformed, wrong or replayed X-Webhook-Signature (with gateway.webhook_secret), or one sent without the secret set", body = ErrorBody),
        (status = 404, description = "No such agent (`agent_not_found`, naming the agents)", body = ErrorBody),
        (status = 408, description = "The body did not arrive within the request time limit", body = ErrorBody),
        (status = 409, description = "A request with this key is still running", body = ErrorBody),
        (status = 413, description = "Body too large", body = ErrorBody),
        (status = 422, description = "The message was refused", body = ErrorBody),
        (status = 429, description = "Too many failed authentications", body = ErrorBody),
        (status = 502, description = "The agent could not answer", body = ErrorBody),
        (status = 503, description = "No LLM is configured", body = ErrorBody)))]
async fn webhook(
    State(state): State<AppState>,
    _auth: Authed,
    headers: HeaderMap,
    ApiQuery(query): ApiQuery<WebhookQuery>,
    SignedJson(request): SignedJson<WebhookRequest>,
) -> Result<Response, ApiError> {
    state.chat_of(query.agent.as_deref())?;
    let place = Place::of(query.agent);
    if request.message.trim().is_empty() {
        return Err(ApiError::unprocessable("message is empty"));
    }
    let key = match headers.get(IDEMPOTENCY_HEADER) {
        None => None,
        Some(value) => Some(
            value
                .to_str()
                .ok()
                .map(str::trim)
                .filter(|k| !k.is_empty() && k.len() <= MAX_KEY_LEN)
                .ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "X-Idempotency-Key must be 1 to {MAX_KEY_LEN} visible ASCII characters"
                    ))
                })?
                .to_string(),
        ),
    };
    let Some(key) = key else {
        return run_turn(&state, &place, request.message)
            .await
            .map(|body| Json(body).into_response());
    };
    let store = state.store();
    let now = state.clock().now();
    let ttl = chrono::Duration::hours(KEY_TTL_HOURS);
    if state.idempotency_prune_due(now)
        && let Err(e) = store.prune_idempotency_keys(now - ttl).await
    {
        tracing::warn!(error = %e, "cannot prune idempotency keys");
    }
    let lease = chrono::Duration::from_std(CLAIM_LEASE).unwrap_or(chrono::Duration::minutes(1));
    match store
        .claim_idempotency_key(&place.channel, &key, state.instance(), now, ttl, lease)
        .await?
    {
        IdempotencyClaim::Done(stored) => {
            let mut response = json_body(stored);
            response
                .headers_mut()
                .insert(REPLAYED_HEADER, HeaderValue::from_static("true"));
            Ok(response)
        }
        IdempotencyClaim::InFlight => Err(ApiError::conflict(
            "a request with this X-Idempotency-Key is still running; retry when it has finished",
        )),
        IdempotencyClaim::Claimed => {
            // The turn runs in its own task so that a client hanging up does
            // not leave the key claimed with no one to complete it.
            let task_state = Arc::clone(&state);
            let task = tokio::spawn(async move {
                let state = task_state;
                let result = tokio::select! {
                    result = run_turn(&state, &place, request.message) => result,
                    never = renew_claim(&state, &place.channel, &key) => match never {},
                };
                let (store, owner, scope) = (state.store(), state.instance(), &place.channel);
                let body = match result {
                    Ok(body) => serde_json::to_string(&body)
                        .map_err(|e| ApiError::internal("cannot encode the answer", &e)),
                    Err(e) => Err(e),
                };
                match &body {
                    Ok(text) => match store
                        .complete_idempotency_key(scope, &key, owner, text)
                        .await
                    {
                        Ok(true) => {}
                        Ok(false) => tracing::warn!(
                            "a webhook's idempotency claim lapsed before its turn ended; a repeat may run again"
                        ),
                        Err(e) => {
                            tracing::warn!(error = %e, "cannot store a webhook's response");
                            let _ = store.release_idempotency_key(scope, &key, owner).await;
                        }
                    },
                    Err(_) => {
                        if let Err(e) = store.release_idempotency_key(scope, &key, owner).await {
                            tracing::warn!(error = %e, "cannot release a webhook's idempotency key");
                        }
                    }
                }
                body
            });
            match task.await {
                Ok(body) => body.map(json_body),
                Err(e) => Err(ApiError::internal("the agent turn failed", &e)),
            }
        }
    }
}

/// A JSON answer whose body is `text` exactly, so a replay is byte for
/// byte the first answer.
fn json_body(text: String) -> Response {
    (
        StatusCode::OK,
        [(
            axum::http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        text,
    )
        .into_response()
}

/// Renews this process's claim on `key` every third of the lease, for as
/// long as the turn runs (never returns; the turn's end drops it). A
/// renewal the store refuses or cannot make is logged; the turn goes on.
async fn renew_claim(state: &AppState, scope: &str, key: &str) -> std::convert::Infallible {
    let mut ticker = tokio::time::interval(CLAIM_LEASE / 3);
    ticker.tick().await;
    loop {
        ticker.tick().await;
        let lease = chrono::Duration::from_std(CLAIM_LEASE).unwrap_or(chrono::Duration::minutes(1));
        let until = state.clock().now() + lease;
        match state
            .store()
            .renew_idempotency_key(scope, key, state.instance(), until)
            .await
        {
            Ok(true) => {}
            Ok(false) => tracing::warn!("lost a webhook's idempotency claim while its turn ran"),
            Err(e) => tracing::warn!(error = %e, "cannot renew a webhook's idempotency claim"),
        }
    }
}

/// One turn through the chat service, its reply mapped to an answer.
/// Agent errors are logged, not echoed: their text may name files or hosts.
async fn run_turn(
    state: &AppState,
    place: &Place,
    message: String,
) -> Result<WebhookResponse, ApiError> {
    let chat = state.chat_of(place.agent.as_deref())?;
    let inbound = Inbound {
        user_id: state.user_id().to_string(),
        channel: place.channel.clone(),
        thread: None,
        text: message,
        images: Vec::new(),
    };
    let model = match place.agent {
        Some(_) => chat.agent().model(),
        None => state.model().unwrap_or_default(),
    }
    .to_string();
    let sink = WebhookSink(state.unattended_approver(&place.channel));
    match chat.handle(inbound, &sink).await {
        // The model that answered (a route's, when the message was routed).
        Reply::Answer(report) => Ok(WebhookResponse {
            response: report.response,
            model: report.model.unwrap_or(model),
        }),
        // A command's output (`/threads`, say) is the answer to that message.
        Reply::Notice { text } => Ok(WebhookResponse {
            response: text,
            model,
        }),
        Reply::Error { text } => {
            tracing::warn!(error = %text, "webhook turn failed");
            Err(ApiError::new(
                StatusCode::BAD_GATEWAY,
                "agent_failed",
                "the agent could not answer; the daemon's log has the details",
            ))
        }
        Reply::Dropped { reason } => {
            tracing::info!(%reason, "a hook dropped a webhook message");
            Err(ApiError::unprocessable("a hook refused the message"))
        }
        Reply::Quit => Err(ApiError::unprocessable(
            "a webhook has no conversation to leave",
        )),
    }
}
