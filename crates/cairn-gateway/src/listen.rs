//! Serving connections with limits a slow or hostile client cannot hold
//! open: hyper's HTTP/1 connection driven directly (rather than
//! `axum::serve`, which has no header timeout, idle timeout or cap).
//!
//! - At most `gateway.max_connections` connections are served. Past that,
//!   a few more ([`HEALTH_ROOM`]) are read just far enough to see the
//!   request line: `GET /healthz` is answered, anything else gets a 503
//!   and the connection is closed. Past those, a connection gets the 503
//!   at once, unread. So health checks answer under a flood, and nothing
//!   waits in the accept queue for a slot.
//! - A connection must send its first request's headers within
//!   `gateway.header_timeout_secs` of connecting; a later request, within
//!   that time of its first byte. A kept-alive connection with no request
//!   for `gateway.idle_timeout_secs` is closed. While a request is being
//!   answered neither applies (an agent turn may be silent for minutes).
//! - A WebSocket keeps its connection's place until it closes.
//! - The app may still be on its way ([`AppSlot`]): health checks are
//!   answered meanwhile, other requests wait for it.

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Request, Response};
use cairn_core::config::GatewayConfig;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tower_service::Service;

use crate::opening::{AppSlot, before_the_app};

/// Connections past `max_connections` that are read for a health check.
pub const HEALTH_ROOM: usize = 16;

/// How long a connection past the cap has to show its request line.
const HEALTH_READ: Duration = Duration::from_secs(2);

/// The request line a health check starts with.
const HEALTH_LINE: &[u8] = b"GET /healthz";

/// Serves `app` on `listener` with the limits in `settings` until
/// `shutdown` is cancelled; then stops accepting, lets requests in flight
/// finish, and returns once every connection (WebSockets included) closed.
pub async fn serve(
    listener: TcpListener,
    app: impl Into<AppSlot>,
    settings: &GatewayConfig,
    shutdown: CancellationToken,
) -> io::Result<()> {
    let app = app.into();
    let max = settings.max_connections.max(1);
    let slots = Arc::new(Semaphore::new(max));
    let room = Arc::new(Semaphore::new(HEALTH_ROOM));
    let timeouts = Timeouts {
        header: settings.header_timeout,
        idle: settings.idle_timeout,
    };
    loop {
        let accepted = tokio::select! {
            biased;
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) if is_per_connection(&e) => continue,
            Err(e) => {
                // Out of descriptors, say: wait a moment rather than spin.
                tracing::warn!(error = %e, "the gateway cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        if let Ok(permit) = Arc::clone(&slots).try_acquire_owned() {
            let (app, shutdown) = (app.clone(), shutdown.clone());
            tokio::spawn(connection(stream, peer, app, permit, timeouts, shutdown));
        } else if let Ok(permit) = Arc::clone(&room).try_acquire_owned() {
            tokio::spawn(past_the_cap(stream, peer, app.clone(), permit, max));
        } else {
            refuse_unread(&stream, peer, max);
        }
    }
    drop(listener);
    // Every connection holds a permit until its socket closes.
    let all = u32::try_from(max).unwrap_or(u32::MAX);
    let _ = slots.acquire_many(all).await;
    let _ = room.acquire_many(HEALTH_ROOM as u32).await;
    Ok(())
}

/// Accept errors that concern one connection only (it was reset before
/// being accepted): the listener itself is fine.
fn is_per_connection(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

#[derive(Debug, Clone, Copy)]
struct Timeouts {
    header: Duration,
    idle: Duration,
}

/// What the watchdog of one connection knows.
#[derive(Debug)]
struct Activity {
    state: Mutex<ActivityState>,
    changed: Notify,
}

#[derive(Debug)]
struct ActivityState {
    /// Requests being answered.
    in_flight: usize,
    /// Requests answered so far.
    served: u64,
    /// When the connection began waiting for its next request.
    waiting_since: Instant,
    /// When the first byte of that request arrived.
    head_began: Option<Instant>,
}

impl Activity {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(ActivityState {
                in_flight: 0,
                served: 0,
                waiting_since: Instant::now(),
                head_began: None,
            }),
            changed: Notify::new(),
        })
    }

    fn update(&self, f: impl FnOnce(&mut ActivityState)) {
        f(&mut self.state.lock().unwrap_or_else(|p| p.into_inner()));
        self.changed.notify_one();
    }

    /// Bytes arrived: the next request has begun, if none is being answered.
    fn read_some(&self) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.in_flight == 0 && state.head_began.is_none() {
            state.head_began = Some(Instant::now());
            drop(state);
            self.changed.notify_one();
        }
    }

    /// When the connection is to be closed if nothing changes; `None` while
    /// a request is being answered.
    fn deadline(&self, t: Timeouts) -> Option<Instant> {
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.in_flight > 0 {
            return None;
        }
        Some(match state.head_began {
            // The first request's headers are due within the header
            // timeout of connecting, however slowly they start.
            _ if state.served == 0 => state.waiting_since + t.header,
            Some(began) => began + t.header,
            None => state.waiting_since + t.idle,
        })
    }
}

/// A request being answered; when its response body is done (or dropped),
/// the connection is waiting again.
struct InFlight(Arc<Activity>);

impl InFlight {
    fn begin(activity: &Arc<Activity>) -> Self {
        activity.update(|s| {
            s.in_flight += 1;
            s.head_began = None;
        });
        Self(Arc::clone(activity))
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.update(|s| {
            s.in_flight = s.in_flight.saturating_sub(1);
            s.served += 1;
            s.waiting_since = Instant::now();
        });
    }
}

/// A response body that ends its request's [`InFlight`] when dropped.
struct Tracked {
    body: Body,
    _in_flight: InFlight,
}

impl http_body::Body for Tracked {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// The socket as hyper sees it: bytes already read come first, reads are
/// reported to the watchdog, and the connection's place (its permit) is
/// given back only when the socket is dropped — after a WebSocket ends.
struct Socket {
    stream: TcpStream,
    prefix: Vec<u8>,
    activity: Option<Arc<Activity>>,
    _permit: OwnedSemaphorePermit,
}

impl AsyncRead for Socket {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if !self.prefix.is_empty() {
            let n = self.prefix.len().min(buf.remaining());
            buf.put_slice(&self.prefix[..n]);
            self.prefix.drain(..n);
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        if buf.filled().len() > before
            && let Some(activity) = &self.activity
        {
            activity.read_some();
        }
        polled
    }
}

impl AsyncWrite for Socket {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// Answers one request from `peer` with `app`, telling `activity` (when
/// the connection has a watchdog) when the answer is done.
async fn handle(
    app: AppSlot,
    peer: SocketAddr,
    activity: Option<Arc<Activity>>,
    mut request: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    let waiting = app.now().is_none();
    if waiting && let Some(early) = before_the_app(&request) {
        return Ok(early);
    }
    let in_flight = activity.as_ref().map(InFlight::begin);
    request.extensions_mut().insert(ConnectInfo(peer));
    let mut app = match app.now() {
        Some(app) => app.clone(),
        None => app.wait().await,
    };
    // A router is always ready, so `call` needs no `poll_ready` first.
    let response = app.call(request.map(Body::new)).await?;
    Ok(match in_flight {
        Some(in_flight) => response.map(|body| {
            Body::new(Tracked {
                body,
                _in_flight: in_flight,
            })
        }),
        None => response,
    })
}

/// One connection within the cap, until it closes, times out, or the
/// daemon stops (then it ends after the request in flight).
async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    app: AppSlot,
    permit: OwnedSemaphorePermit,
    timeouts: Timeouts,
    shutdown: CancellationToken,
) {
    let activity = Activity::new();
    let socket = Socket {
        stream,
        prefix: Vec::new(),
        activity: Some(Arc::clone(&activity)),
        _permit: permit,
    };
    let mut builder = http1::Builder::new();
    builder.timer(TokioTimer::new());
    // The watchdog below times headers, so that a kept-alive connection's
    // wait for its next request can be longer than the header timeout.
    builder.header_read_timeout(None);
    let conn = builder
        .serve_connection(
            TokioIo::new(socket),
            hyper::service::service_fn({
                let activity = Arc::clone(&activity);
                move |request| handle(app.clone(), peer, Some(Arc::clone(&activity)), request)
            }),
        )
        .with_upgrades();
    tokio::pin!(conn);
    let mut stopping = false;
    loop {
        let deadline = activity.deadline(timeouts);
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(error = %e, client = %peer, "a gateway connection ended with an error");
                }
                return;
            }
            () = shutdown.cancelled(), if !stopping => {
                stopping = true;
                conn.as_mut().graceful_shutdown();
            }
            () = activity.changed.notified() => {}
            () = sleep_until(deadline) => {
                if activity.deadline(timeouts).is_some_and(|d| d <= Instant::now()) {
                    tracing::debug!(client = %peer, "closing a gateway connection that sent no request in time");
                    return;
                }
            }
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// A connection past the cap: a health check is answered, anything else
/// gets a 503 and is closed.
async fn past_the_cap(
    mut stream: TcpStream,
    peer: SocketAddr,
    app: AppSlot,
    permit: OwnedSemaphorePermit,
    max: usize,
) {
    let mut head = Vec::with_capacity(HEALTH_LINE.len() + 1);
    let read = tokio::time::timeout(HEALTH_READ, async {
        let mut buf = [0u8; 64];
        while undecided(&head) {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return false,
                Ok(n) => head.extend_from_slice(&buf[..n]),
            }
        }
        true
    })
    .await;
    if !matches!(read, Ok(true)) {
        return;
    }
    let health =
        head.starts_with(HEALTH_LINE) && matches!(head.get(HEALTH_LINE.len()), Some(b' ' | b'?'));
    if !health {
        // The place is free at once; the refusal lingers only briefly.
        drop(permit);
        let id = crate::layers::new_request_id();
        tracing::debug!(request_id = %id, %peer, "refused: the gateway is at gateway.max_connections");
        refuse(&mut stream, max, &id).await;
        return;
    }
    let socket = Socket {
        stream,
        prefix: head,
        activity: None,
        _permit: permit,
    };
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEALTH_READ)
        .keep_alive(false);
    if let Err(e) = builder
        .serve_connection(
            TokioIo::new(socket),
            hyper::service::service_fn(move |request| handle(app.clone(), peer, None, request)),
        )
        .await
    {
        tracing::debug!(error = %e, "a health check past the connection cap failed");
    }
}

/// Whether `head` could still be the start of a health check and is too
/// short to tell.
fn undecided(head: &[u8]) -> bool {
    head.len() <= HEALTH_LINE.len() && HEALTH_LINE.starts_with(head)
}

/// The answer past the cap: the gateway's JSON error shape and a request
/// id like every other answer's, then close.
fn refusal(max: usize, request_id: &str) -> Vec<u8> {
    let body = serde_json::json!({"error": {
        "code": "unavailable",
        "message": format!("the gateway is serving its limit of {max} connections (gateway.max_connections); retry shortly"),
    }})
    .to_string();
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\nretry-after: 1\r\nx-request-id: {request_id}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Writes the refusal and closes, after giving the client a moment to
/// finish sending (closing with unread bytes would reset the connection
/// and could lose the answer).
async fn refuse(stream: &mut TcpStream, max: usize, request_id: &str) {
    if stream.write_all(&refusal(max, request_id)).await.is_err() {
        return;
    }
    let _ = stream.shutdown().await;
    let mut sink = [0u8; 1024];
    let _ = tokio::time::timeout(Duration::from_millis(500), async {
        while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
    })
    .await;
}

/// The refusal when even the room for health checks is full: written
/// without waiting (a fresh socket's send buffer takes it), then closed.
fn refuse_unread(stream: &TcpStream, peer: SocketAddr, max: usize) {
    let id = crate::layers::new_request_id();
    tracing::debug!(request_id = %id, %peer, "refused unread: the gateway is at gateway.max_connections");
    let _ = stream.try_write(&refusal(max, &id));
}
