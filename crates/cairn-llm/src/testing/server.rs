//! The fake LLM HTTP server: axum on 127.0.0.1, answering from a script.

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::StreamExt as _;
use serde_json::{Value, json};

use super::models::{self, ModelsAnswer};
use super::render::{Rendered, render};
use super::script::Scripted;
use super::{Protocol, RecordedRequest};

/// Requests larger than this are refused (conversations can be big).
const MAX_REQUEST_BYTES: usize = 64 * 1024 * 1024;

#[derive(Debug, Default)]
pub(crate) struct ServerState {
    script: Mutex<VecDeque<Scripted>>,
    requests: Mutex<Vec<RecordedRequest>>,
    serial: AtomicU64,
    /// Chat requests received and not yet answered (their delay included).
    in_flight: AtomicU64,
    /// The most of them at once so far.
    most_in_flight: AtomicU64,
    /// Held answers' requests received so far (never decreases, so a
    /// waiter cannot miss its group filling up).
    held: tokio::sync::watch::Sender<u64>,
    /// What `GET /v1/models` answers.
    pub(crate) models: Mutex<ModelsAnswer>,
}

/// Locks a mutex even if a panicking test thread poisoned it.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl ServerState {
    pub(crate) fn push(&self, scripted: Scripted) {
        lock(&self.script).push_back(scripted);
    }

    pub(crate) fn pending(&self) -> usize {
        lock(&self.script).len()
    }

    pub(crate) fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.requests).clone()
    }

    pub(crate) fn most_in_flight(&self) -> u64 {
        self.most_in_flight.load(Ordering::SeqCst)
    }

    pub(crate) fn clear(&self) {
        lock(&self.script).clear();
        lock(&self.requests).clear();
    }
}

pub(crate) fn router(state: Arc<ServerState>) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(openai))
        .route("/v1/messages", post(anthropic))
        .route("/v1/models", get(models::list))
        .fallback(unknown_route)
        .layer(DefaultBodyLimit::max(MAX_REQUEST_BYTES))
        .with_state(state)
}

async fn openai(
    State(state): State<Arc<ServerState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    answer(
        &state,
        Protocol::OpenAi,
        "/v1/chat/completions",
        &headers,
        &body,
    )
    .await
}

async fn anthropic(
    State(state): State<Arc<ServerState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    answer(&state, Protocol::Anthropic, "/v1/messages", &headers, &body).await
}

async fn unknown_route(
    State(state): State<Arc<ServerState>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_owned();
    record(&state, method.as_str(), &path, &headers, &body);
    let message = format!(
        "FakeLlmServer: no route for {method} {path}; use POST /v1/chat/completions (OpenAI), POST /v1/messages (Anthropic) or GET /v1/models"
    );
    (
        StatusCode::NOT_FOUND,
        axum::Json(json!({"error": {"message": message, "type": "not_found"}})),
    )
        .into_response()
}

pub(crate) fn record(
    state: &ServerState,
    method: &str,
    path: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> RecordedRequest {
    let raw_body = String::from_utf8_lossy(body).into_owned();
    let recorded = RecordedRequest {
        method: method.to_owned(),
        path: path.to_owned(),
        headers: headers
            .iter()
            .map(|(name, value)| {
                (
                    name.as_str().to_ascii_lowercase(),
                    String::from_utf8_lossy(value.as_bytes()).into_owned(),
                )
            })
            .collect::<BTreeMap<_, _>>(),
        body: serde_json::from_str(&raw_body).unwrap_or(Value::Null),
        raw_body,
    };
    lock(&state.requests).push(recorded.clone());
    recorded
}

async fn answer(
    state: &ServerState,
    protocol: Protocol,
    path: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Response {
    let recorded = record(state, "POST", path, headers, body);
    let serial = state.serial.fetch_add(1, Ordering::SeqCst) + 1;
    let _flying = InFlight::new(state);
    let next = lock(&state.script).pop_front();
    let Some(script) = next else {
        let message = format!(
            "FakeLlmServer: the script ran out: no scripted response left for request #{serial} (POST {path}); \
             push more with server.push(Scripted::...)"
        );
        tracing::warn!("{message}");
        let body = match protocol {
            Protocol::OpenAi => {
                json!({"error": {"message": message, "type": "fake_script_exhausted", "code": "fake_script_exhausted"}})
            }
            Protocol::Anthropic => {
                json!({"type": "error", "error": {"type": "fake_script_exhausted", "message": message}})
            }
        };
        return (StatusCode::INTERNAL_SERVER_ERROR, axum::Json(body)).into_response();
    };
    if let Some(n) = script.held_until
        && let Err(message) = hold(state, n, serial).await
    {
        tracing::warn!("{message}");
        let body = json!({"error": {"message": message, "type": "fake_not_held"}});
        return (StatusCode::INTERNAL_SERVER_ERROR, axum::Json(body)).into_response();
    }
    // Zero-length sleeps are skipped so paused-time tests see no stray timers.
    if !script.delay.is_zero() {
        tokio::time::sleep(script.delay).await;
    }
    let rendered = render(&script, protocol, &recorded.body, serial);
    respond(&script, rendered)
}

/// Holds a request until it and `n - 1` others held like it have arrived
/// (held requests form groups of `n` in arrival order), for at most 10
/// seconds of real time: a paused test clock would jump past any wait.
async fn hold(state: &ServerState, n: usize, serial: u64) -> Result<(), String> {
    let n = u64::try_from(n.max(1)).unwrap_or(u64::MAX);
    let mut arrived = 0;
    state.held.send_modify(|held| {
        *held += 1;
        arrived = *held;
    });
    let full = (arrived - 1) / n * n + n;
    let (tx, rx) = tokio::sync::oneshot::channel();
    // Dropping the handle detaches the thread; it ends by itself.
    drop(std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_secs(10));
        let _ = tx.send(());
    }));
    let mut held = state.held.subscribe();
    tokio::select! {
        full = held.wait_for(|held| *held >= full) => full.map(|_| ()).map_err(|e| e.to_string()),
        _ = rx => Err(format!(
            "FakeLlmServer: request #{serial} was held until {n} held requests arrived, \
             but only {} of its group did within 10 s",
            *state.held.borrow() - (full - n)
        )),
    }
}

/// Counts a chat request in flight until it is answered (dropped).
struct InFlight<'a>(&'a ServerState);

impl<'a> InFlight<'a> {
    fn new(state: &'a ServerState) -> Self {
        let now = state.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        state.most_in_flight.fetch_max(now, Ordering::SeqCst);
        InFlight(state)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

fn respond(script: &Scripted, rendered: Rendered) -> Response {
    let status = StatusCode::from_u16(rendered.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut headers = HeaderMap::new();
    if let Ok(value) = HeaderValue::from_str(&rendered.content_type) {
        headers.insert(header::CONTENT_TYPE, value);
    }
    for (name, value) in &script.headers {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            headers.append(name, value);
        }
    }
    let pieces: Vec<Bytes> = match script.chunk_bytes {
        Some(size) => rendered
            .pieces
            .concat()
            .into_bytes()
            .chunks(size)
            .map(Bytes::copy_from_slice)
            .collect(),
        None => rendered.pieces.into_iter().map(Bytes::from).collect(),
    };
    let delay = script.chunk_delay;
    let stream =
        futures::stream::iter(pieces.into_iter().enumerate()).then(move |(i, piece)| async move {
            if i > 0 && !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            Ok::<_, Infallible>(piece)
        });
    (status, headers, Body::from_stream(stream)).into_response()
}

/// A handle to the running server that stops it when dropped.
#[derive(Debug)]
pub(crate) enum Runner {
    /// Spawned on the test's runtime.
    Task(tokio::task::JoinHandle<()>),
    /// On its own thread and runtime; dropping the sender stops it.
    Thread(Option<tokio::sync::oneshot::Sender<()>>),
}

impl Drop for Runner {
    fn drop(&mut self) {
        match self {
            Self::Task(handle) => handle.abort(),
            Self::Thread(shutdown) => {
                if let Some(tx) = shutdown.take() {
                    let _ = tx.send(());
                }
            }
        }
    }
}

pub(crate) async fn spawn_here(state: Arc<ServerState>) -> std::io::Result<(SocketAddr, Runner)> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
    let addr = listener.local_addr()?;
    let app = router(state);
    let handle = tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, app).await {
            tracing::warn!(%error, "FakeLlmServer stopped");
        }
    });
    Ok((addr, Runner::Task(handle)))
}

pub(crate) fn spawn_thread(state: Arc<ServerState>) -> std::io::Result<(SocketAddr, Runner)> {
    spawn_thread_with(router(state), "fake-llm-server")
}

/// Serves `app` on 127.0.0.1 from its own thread and runtime.
pub(crate) fn spawn_thread_with(app: Router, name: &str) -> std::io::Result<(SocketAddr, Runner)> {
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(error) => {
                    let _ = addr_tx.send(Err(error));
                    return;
                }
            };
            runtime.block_on(async move {
                let listener = match tokio::net::TcpListener::bind(("127.0.0.1", 0)).await {
                    Ok(listener) => listener,
                    Err(error) => {
                        let _ = addr_tx.send(Err(error));
                        return;
                    }
                };
                let _ = addr_tx.send(listener.local_addr());
                tokio::select! {
                    result = axum::serve(listener, app) => {
                        if let Err(error) = result {
                            tracing::warn!(%error, "FakeLlmServer stopped");
                        }
                    }
                    _ = stop_rx => {}
                }
            });
        })?;
    let addr = addr_rx
        .recv()
        .map_err(|_| std::io::Error::other("the fake server thread died while starting"))??;
    Ok((addr, Runner::Thread(Some(stop_tx))))
}
