//! `GET /api/events`: ids, replay after `Last-Event-ID`, the lost-events
//! notice, events fed from the notifier, and the end of the stream at
//! shutdown.
#![expect(clippy::unwrap_used, reason = "test code unwraps freely")]

mod support;

use std::sync::Arc;
use std::time::Duration;

use cairn_core::clock::SystemClock;
use cairn_core::notification::{NewNotification, Priority};
use cairn_gateway::events::{EventBus, Sources};
use futures::StreamExt;
use serde_json::{Value, json};
use support::{TestGateway, error_code, settings};

/// One parsed server-sent event.
#[derive(Debug)]
struct Sse {
    id: Option<String>,
    event: Option<String>,
    data: Value,
}

/// Reads server-sent events off a response.
struct SseReader {
    body: futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buffer: String,
}

impl SseReader {
    fn new(response: reqwest::Response) -> Self {
        assert_eq!(response.status(), 200);
        Self {
            body: response.bytes_stream().boxed(),
            buffer: String::new(),
        }
    }

    /// The next event (keep-alive comments skipped), or `None` at the end.
    async fn next(&mut self) -> Option<Sse> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let (mut id, mut event, mut data) = (None, None, String::new());
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        id = Some(v.trim().to_string());
                    } else if let Some(v) = line.strip_prefix("event:") {
                        event = Some(v.trim().to_string());
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.trim_start());
                    }
                }
                if data.is_empty() {
                    continue;
                }
                return Some(Sse {
                    id,
                    event,
                    data: serde_json::from_str(&data).unwrap(),
                });
            }
            let chunk = tokio::time::timeout(Duration::from_secs(10), self.body.next())
                .await
                .expect("an event within 10 s")?
                .unwrap();
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
        }
    }
}

async fn with_bus() -> (TestGateway, Arc<EventBus>) {
    let bus = Arc::new(EventBus::new(Arc::new(SystemClock)));
    let gw = TestGateway::start_with(settings(), {
        let bus = bus.clone();
        move |g| g.with_events(bus)
    })
    .await;
    (gw, bus)
}

async fn open(gw: &TestGateway, last: Option<u64>) -> SseReader {
    let mut request = gw.get("/api/events");
    if let Some(last) = last {
        request = request.header("Last-Event-ID", last.to_string());
    }
    SseReader::new(request.send().await.unwrap())
}

#[tokio::test]
async fn a_reconnect_with_last_event_id_gets_exactly_the_later_events_then_live_ones() {
    let (gw, bus) = with_bus().await;
    for i in 1..=5 {
        bus.publish("test.thing", json!({ "n": i }));
    }
    let mut events = open(&gw, Some(3)).await;
    for expected in [4, 5] {
        let e = events.next().await.unwrap();
        assert_eq!(e.id.as_deref(), Some(expected.to_string().as_str()));
        assert_eq!(e.event, None, "unnamed, so EventSource.onmessage sees it");
        assert_eq!(e.data["id"], expected);
        assert_eq!(e.data["type"], "test.thing");
        assert_eq!(e.data["n"], expected);
        assert!(e.data["at"].is_string());
    }
    bus.publish("test.thing", json!({ "n": 6 }));
    let live = events.next().await.unwrap();
    assert_eq!(live.data["id"], 6);

    // Without Last-Event-ID only live events come.
    let mut fresh = open(&gw, None).await;
    bus.publish("test.other", Value::Null);
    let e = fresh.next().await.unwrap();
    assert_eq!(
        (e.data["id"].as_u64(), e.data["type"].as_str()),
        (Some(7), Some("test.other"))
    );
    gw.stop().await;
}

#[tokio::test]
async fn an_id_older_than_the_buffer_starts_with_events_lost() {
    let (gw, bus) = with_bus().await;
    let total = EventBus::CAPACITY as u64 + 5;
    for _ in 0..total {
        bus.publish("test.thing", Value::Null);
    }
    let mut events = open(&gw, Some(1)).await;
    let first = events.next().await.unwrap();
    assert_eq!(first.data["type"], "events.lost");
    assert_eq!(first.id, None, "the notice keeps the client's last id");
    let next = events.next().await.unwrap();
    assert_eq!(next.data["id"], 6, "the oldest buffered event follows");

    // An id this process never gave (from before a restart) is lost too.
    let mut events = open(&gw, Some(total + 50)).await;
    assert_eq!(events.next().await.unwrap().data["type"], "events.lost");

    let bad = gw
        .get("/api/events")
        .header("Last-Event-ID", "yesterday")
        .send()
        .await
        .unwrap();
    assert_eq!(error_code(bad).await, (400, "bad_request".to_string()));
    gw.stop().await;
}

#[tokio::test]
async fn events_need_a_token_and_end_at_shutdown() {
    let (gw, bus) = with_bus().await;
    let (status, code) = error_code(gw.http.get(gw.url("/api/events")).send().await.unwrap()).await;
    assert_eq!((status, code.as_str()), (401, "unauthorized"));

    let mut events = open(&gw, None).await;
    bus.publish("test.thing", Value::Null);
    events.next().await.unwrap();
    let shutdown = gw.shutdown.clone();
    let ended = tokio::spawn(async move { events.next().await.is_none() });
    shutdown.cancel();
    assert!(
        tokio::time::timeout(Duration::from_secs(10), ended)
            .await
            .unwrap()
            .unwrap()
    );
    gw.stop().await;
}

#[tokio::test]
async fn notifications_reach_the_stream_through_the_feeds() {
    let (gw, bus) = with_bus().await;
    bus.feed(
        Sources {
            notifier: Some(gw.notifier.clone()),
            engine: Some(gw.engine.clone()),
            jobs: None,
        },
        gw.shutdown.clone(),
    );
    let mut events = open(&gw, None).await;
    let sent = gw
        .notifier
        .send(
            NewNotification {
                user_id: "ada".into(),
                channel: None,
                title: "Backup done".into(),
                body: "all files copied".into(),
                priority: Priority::Normal,
                tags: vec![],
                data: None,
                source: "test".into(),
            },
            chrono::Utc::now(),
        )
        .await
        .unwrap();
    let e = events.next().await.unwrap();
    assert_eq!(e.data["type"], "notification.recorded");
    assert_eq!(e.data["notification_id"], sent.id.to_string());
    assert_eq!(e.data["title"], "Backup done");
    assert_eq!(
        e.data["status"], "delivered",
        "the inbox delivers by recording"
    );
    gw.stop().await;
}
