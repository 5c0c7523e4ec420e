//! A small Chrome DevTools Protocol client over the browser's pipe
//! (`--remote-debugging-pipe`: JSON messages, each ended by a NUL byte, the
//! browser reading its descriptor 3 and writing its 4). Calls are matched
//! to answers by id; events go, in order, to one receiver (the browser's
//! pump), which must never fall behind a paused request.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// Most bytes of one message (a full-page screenshot is the largest).
const MAX_MESSAGE: usize = 64 * 1024 * 1024;

/// An event the browser sent.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// `Domain.event`.
    pub method: String,
    /// Its parameters.
    pub params: Value,
    /// The session (an attached target) it came from; `None` for the browser's own.
    pub session: Option<String>,
}

/// Why a call got no result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CdpError {
    /// The pipe closed: the browser is gone.
    #[error("the browser is gone")]
    Closed,
    /// The browser answered with an error.
    #[error("{0}")]
    Protocol(String),
    /// No answer in time.
    #[error("the browser did not answer {method} within {}s", .limit.as_secs())]
    Timeout {
        /// The method called.
        method: String,
        /// How long it waited.
        limit: Duration,
    },
}

type Answer = Result<Value, CdpError>;
type Writer = Pin<Box<dyn AsyncWrite + Send>>;

/// One connection to a browser.
pub struct Cdp {
    writer: tokio::sync::Mutex<Writer>,
    pending: std::sync::Mutex<HashMap<u64, oneshot::Sender<Answer>>>,
    next: AtomicU64,
    closed: CancellationToken,
}

impl std::fmt::Debug for Cdp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cdp")
            .field("closed", &self.closed.is_cancelled())
            .finish_non_exhaustive()
    }
}

impl Cdp {
    /// A client over the browser's output (`reader`) and input (`writer`),
    /// and the receiver of its events. Its reading task ends with the pipe.
    pub fn start(
        reader: impl AsyncRead + Send + Unpin + 'static,
        writer: impl AsyncWrite + Send + 'static,
    ) -> (Arc<Self>, mpsc::UnboundedReceiver<Event>) {
        let cdp = Arc::new(Self {
            writer: tokio::sync::Mutex::new(Box::pin(writer)),
            pending: std::sync::Mutex::new(HashMap::new()),
            next: AtomicU64::new(1),
            closed: CancellationToken::new(),
        });
        let (events, received) = mpsc::unbounded_channel();
        tokio::spawn(read_loop(Arc::clone(&cdp), reader, events));
        (cdp, received)
    }

    /// Cancelled once the pipe closed.
    pub fn closed(&self) -> &CancellationToken {
        &self.closed
    }

    /// Calls `method` (on the attached `session`, or the browser itself)
    /// and waits up to `limit` for its result.
    pub async fn call(
        &self,
        method: &str,
        params: Value,
        session: Option<&str>,
        limit: Duration,
    ) -> Answer {
        if self.closed.is_cancelled() {
            return Err(CdpError::Closed);
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let mut message = json!({"id": id, "method": method, "params": params});
        if let Some(session) = session {
            message["sessionId"] = json!(session);
        }
        let (tx, rx) = oneshot::channel();
        self.pending_map().insert(id, tx);
        let mut bytes = message.to_string().into_bytes();
        bytes.push(0);
        let sent = async {
            let mut writer = self.writer.lock().await;
            writer.write_all(&bytes).await?;
            writer.flush().await
        };
        let answer = tokio::time::timeout(limit, async {
            if sent.await.is_err() {
                return Err(CdpError::Closed);
            }
            rx.await.unwrap_or(Err(CdpError::Closed))
        })
        .await;
        match answer {
            Ok(answer) => answer,
            Err(_) => {
                self.pending_map().remove(&id);
                Err(CdpError::Timeout {
                    method: method.to_string(),
                    limit,
                })
            }
        }
    }

    fn pending_map(&self) -> std::sync::MutexGuard<'_, HashMap<u64, oneshot::Sender<Answer>>> {
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Hands one message to its caller or to the events.
    fn dispatch(&self, message: Value, events: &mpsc::UnboundedSender<Event>) {
        if let Some(id) = message.get("id").and_then(Value::as_u64) {
            let answer = match message.get("error") {
                Some(error) => Err(CdpError::Protocol(
                    error
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("an error without a message")
                        .to_string(),
                )),
                None => Ok(message.get("result").cloned().unwrap_or(Value::Null)),
            };
            if let Some(caller) = self.pending_map().remove(&id) {
                let _ = caller.send(answer);
            }
            return;
        }
        let Some(method) = message.get("method").and_then(Value::as_str) else {
            return;
        };
        let _ = events.send(Event {
            method: method.to_string(),
            params: message.get("params").cloned().unwrap_or(Value::Null),
            session: message
                .get("sessionId")
                .and_then(Value::as_str)
                .map(str::to_string),
        });
    }
}

/// Reads NUL-ended messages until the pipe closes, then fails every call
/// still waiting.
async fn read_loop(
    cdp: Arc<Cdp>,
    mut reader: impl AsyncRead + Unpin,
    events: mpsc::UnboundedSender<Event>,
) {
    let mut buffer: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 256 * 1024];
    'reading: loop {
        let n = match reader.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let searched = buffer.len();
        buffer.extend_from_slice(&chunk[..n]);
        let mut start = 0;
        let mut from = searched;
        while let Some(end) = buffer[from..]
            .iter()
            .position(|b| *b == 0)
            .map(|i| from + i)
        {
            if let Ok(message) = serde_json::from_slice::<Value>(&buffer[start..end]) {
                cdp.dispatch(message, &events);
            }
            start = end + 1;
            from = start;
        }
        buffer.drain(..start);
        if buffer.len() > MAX_MESSAGE {
            tracing::warn!("the browser sent a message over 64 MiB: its connection is closed");
            break 'reading;
        }
    }
    cdp.closed.cancel();
    let waiting: Vec<_> = cdp.pending_map().drain().collect();
    for (_, caller) in waiting {
        let _ = caller.send(Err(CdpError::Closed));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncBufReadExt, BufReader};

    /// A fake browser over in-memory pipes: answers each call with its
    /// method echoed (an error for `Bad.method`), after an event.
    fn fake() -> (Arc<Cdp>, mpsc::UnboundedReceiver<Event>) {
        let (ours, theirs) = tokio::io::duplex(1 << 16);
        let (read, write) = tokio::io::split(ours);
        let (their_read, mut their_write) = tokio::io::split(theirs);
        tokio::spawn(async move {
            let mut lines = BufReader::new(their_read);
            let mut message = Vec::new();
            while lines.read_until(0, &mut message).await.unwrap_or(0) > 0 {
                message.pop();
                let call: Value = serde_json::from_slice(&message).unwrap();
                message.clear();
                let event = json!({"method": "Page.loadEventFired", "params": {"n": call["id"]}, "sessionId": "s1"});
                let answer = if call["method"] == "Bad.method" {
                    json!({"id": call["id"], "error": {"code": -32601, "message": "'Bad.method' wasn't found"}})
                } else if call["method"] == "Slow.method" {
                    continue;
                } else {
                    json!({"id": call["id"], "result": {"echo": call["method"], "session": call["sessionId"]}})
                };
                // Both in one write: the reader must split them.
                let mut out = event.to_string().into_bytes();
                out.push(0);
                out.extend(answer.to_string().into_bytes());
                out.push(0);
                their_write.write_all(&out).await.unwrap();
            }
        });
        Cdp::start(read, write)
    }

    #[tokio::test]
    async fn calls_get_their_own_answers_and_events_come_in_order() {
        let (cdp, mut events) = fake();
        let limit = Duration::from_secs(5);
        let answer = cdp
            .call("Page.navigate", json!({}), Some("s1"), limit)
            .await
            .unwrap();
        assert_eq!(answer, json!({"echo": "Page.navigate", "session": "s1"}));
        let error = cdp.call("Bad.method", json!({}), None, limit).await;
        assert_eq!(
            error,
            Err(CdpError::Protocol("'Bad.method' wasn't found".into()))
        );
        let first = events.recv().await.unwrap();
        assert_eq!(first.method, "Page.loadEventFired");
        assert_eq!(first.session.as_deref(), Some("s1"));
        assert_eq!(first.params["n"], 1);
        assert_eq!(events.recv().await.unwrap().params["n"], 2);
        let slow = cdp
            .call("Slow.method", json!({}), None, Duration::from_millis(50))
            .await;
        assert!(
            matches!(slow, Err(CdpError::Timeout { ref method, .. }) if method == "Slow.method"),
            "{slow:?}"
        );
        assert!(
            cdp.pending_map().is_empty(),
            "a timed-out call is forgotten"
        );
    }

    #[tokio::test]
    async fn a_closed_pipe_fails_the_calls_waiting_and_those_after() {
        let (ours, theirs) = tokio::io::duplex(1024);
        let (read, write) = tokio::io::split(ours);
        let (cdp, _events) = Cdp::start(read, write);
        let waiting = {
            let cdp = Arc::clone(&cdp);
            tokio::spawn(async move {
                cdp.call("Page.navigate", json!({}), None, Duration::from_secs(30))
                    .await
            })
        };
        tokio::task::yield_now().await;
        drop(theirs);
        assert_eq!(waiting.await.unwrap(), Err(CdpError::Closed));
        cdp.closed().cancelled().await;
        assert_eq!(
            cdp.call("Page.navigate", json!({}), None, Duration::from_secs(1))
                .await,
            Err(CdpError::Closed)
        );
    }
}
