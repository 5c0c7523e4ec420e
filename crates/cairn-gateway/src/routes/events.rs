//! `GET /api/events`: the daemon's events as Server-Sent Events. Each
//! carries its id; a client reconnecting with `Last-Event-ID` first gets
//! the buffered events after it (or `events.lost` when some are gone), then
//! live ones. Keep-alive comments every 15 s; the stream ends at shutdown,
//! and within seconds of its token being revoked or expiring.
//!
//! Events carry no SSE `event:` name, so a browser's `EventSource.onmessage`
//! sees them all; the kind is the `type` field of the JSON data.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use futures::Stream;
use serde_json::json;
use tokio::sync::broadcast;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::auth::Authed;
use crate::error::{ApiError, ErrorBody};
use crate::events::{EVENTS_LOST, Event, EventBus};
use crate::revocation::StreamGuard;
use crate::state::AppState;

/// The routes of this module.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(events))
}

/// The daemon's events, live: routine runs, job progress, tool calls and
/// notifications. Each SSE event's `data` is `{"id","type","at",...}`;
/// examples are in docs/gateway.md, "WebSocket and SSE frames".
#[utoipa::path(get, path = "/api/events", tag = "events",
    params(("Last-Event-ID" = Option<u64>, Header,
        description = "Replay the buffered events after this id, then go live")),
    responses(
        (status = 200, description = "An event stream", content_type = "text/event-stream", body = String),
        (status = 400, description = "Last-Event-ID is not a number", body = ErrorBody),
        (status = 401, description = "Missing or bad token", body = ErrorBody)),
    security(("bearer" = [])))]
async fn events(
    State(state): State<AppState>,
    Authed(token): Authed,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, ApiError> {
    let last = match headers.get("last-event-id") {
        None => None,
        Some(value) => Some(
            value
                .to_str()
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .ok_or_else(|| ApiError::bad_request("Last-Event-ID must be an event id"))?,
        ),
    };
    let stream = event_stream(state.events(), last, state.open_stream(&token));
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}

struct Pump {
    queue: VecDeque<SseEvent>,
    live: broadcast::Receiver<Arc<Event>>,
    stop: StreamGuard,
}

fn sse(event: &Event) -> SseEvent {
    SseEvent::default()
        .id(event.id.to_string())
        .data(event.to_json())
}

/// A "some events are gone" event; it has no id, so the client's
/// `Last-Event-ID` stays where it was.
fn lost(message: &str) -> SseEvent {
    let body = json!({"type": EVENTS_LOST, "message": message});
    SseEvent::default().data(body.to_string())
}

/// The replay, then live events, until `stop` ends.
pub(crate) fn event_stream(
    bus: &Arc<EventBus>,
    last: Option<u64>,
    stop: StreamGuard,
) -> impl Stream<Item = Result<SseEvent, Infallible>> + use<> {
    let replay = bus.subscribe(last);
    let mut queue = VecDeque::new();
    if replay.lost {
        queue.push_back(lost(
            "events after your Last-Event-ID are no longer kept (or were from before a restart); re-read what you need",
        ));
    }
    queue.extend(replay.events.iter().map(|e| sse(e)));
    let pump = Pump {
        queue,
        live: replay.live,
        stop,
    };
    futures::stream::unfold(pump, |mut pump| async move {
        if let Some(event) = pump.queue.pop_front() {
            return Some((Ok(event), pump));
        }
        tokio::select! {
            () = pump.stop.ended().cancelled() => None,
            received = pump.live.recv() => match received {
                Ok(event) => Some((Ok(sse(&event)), pump)),
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    let message = format!("this client fell behind and missed {n} events");
                    Some((Ok(lost(&message)), pump))
                }
                Err(broadcast::error::RecvError::Closed) => None,
            },
        }
    })
}
