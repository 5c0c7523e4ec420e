//! `GET /ws/chat`: authentication (header or subprotocol), streamed
//! answers, the approval round-trip (approve, deny, timeout), bad frames
//! that leave the connection open, notifications, and shutdown.
#![expect(clippy::unwrap_used, reason = "test code unwraps freely")]

mod support;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use cairn_core::clock::SystemClock;
use cairn_core::notification::{NewNotification, Priority};
use cairn_gateway::events::{EventBus, Sources};
use cairn_llm::testing::Scripted;
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use support::agents::{FAMILY_MODEL, with_family};
use support::{TestGateway, settings};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

fn ws_url(gw: &TestGateway, query: &str) -> String {
    format!("{}/ws/chat{query}", gw.base.replacen("http://", "ws://", 1))
}

async fn connect(gw: &TestGateway) -> Socket {
    connect_to(gw, "").await.0
}

/// A connection with `query`, and its `ready` frame.
async fn connect_to(gw: &TestGateway, query: &str) -> (Socket, Value) {
    let mut request = ws_url(gw, query).into_client_request().unwrap();
    request.headers_mut().insert(
        "Authorization",
        HeaderValue::from_str(&format!("Bearer {}", gw.token)).unwrap(),
    );
    let (mut socket, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    let ready = next_frame(&mut socket).await;
    assert_eq!(ready["type"], "ready", "{ready}");
    assert!(ready["channel"].as_str().unwrap().starts_with("ws:"));
    (socket, ready)
}

/// The next JSON frame (pings skipped).
async fn next_frame(socket: &mut Socket) -> Value {
    loop {
        let message = tokio::time::timeout(Duration::from_secs(10), socket.next())
            .await
            .expect("a frame within 10 s")
            .expect("the connection is open")
            .unwrap();
        if let Message::Text(text) = message {
            return serde_json::from_str(text.as_str()).unwrap();
        }
    }
}

/// Frames until one of type `kind`, returning all of them.
async fn until(socket: &mut Socket, kind: &str) -> Vec<Value> {
    let mut seen = Vec::new();
    loop {
        let frame = next_frame(socket).await;
        let done = frame["type"] == kind;
        seen.push(frame);
        if done {
            return seen;
        }
    }
}

async fn send(socket: &mut Socket, frame: Value) {
    socket
        .send(Message::Text(frame.to_string().into()))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_message_streams_chunks_and_ends_with_done_and_usage() {
    let gw = TestGateway::start().await;
    gw.llm
        .push(Scripted::text("hello from the agent").with_chunk_bytes(5));
    let mut socket = connect(&gw).await;
    send(&mut socket, json!({"type": "message", "content": "hi"})).await;
    let frames = until(&mut socket, "done").await;
    let streamed: String = frames
        .iter()
        .filter(|f| f["type"] == "chunk")
        .map(|f| f["content"].as_str().unwrap())
        .collect();
    assert_eq!(streamed, "hello from the agent");
    let done = frames.last().unwrap();
    assert_eq!(done["response"], "hello from the agent");
    assert_eq!(done["usage"]["input_tokens"], 10);
    assert_eq!(done["usage"]["output_tokens"], 5);
    gw.stop().await;
}

#[tokio::test]
async fn an_approved_tool_call_runs_and_a_denied_one_does_not() {
    let events = Arc::new(EventBus::new(Arc::new(SystemClock)));
    let gw = TestGateway::start_with(settings(), {
        let events = events.clone();
        move |g| g.with_events(events)
    })
    .await;
    let mut socket = connect(&gw).await;

    // Approve.
    gw.llm.push(Scripted::tool_call("writer", json!({})));
    gw.llm.push(Scripted::text("written it"));
    send(&mut socket, json!({"type": "message", "content": "write"})).await;
    let asked = until(&mut socket, "approval_request").await;
    let request = asked.last().unwrap();
    assert_eq!(request["tool"], "writer");
    assert_eq!(request["timeout_secs"], 120);
    let id = request["id"].as_str().unwrap().to_string();
    send(
        &mut socket,
        json!({"type": "approval", "id": id, "decision": "approve"}),
    )
    .await;
    let frames = until(&mut socket, "done").await;
    let result = frames.iter().find(|f| f["type"] == "tool_result").unwrap();
    assert_eq!(
        (result["tool"].as_str(), result["status"].as_str()),
        (Some("writer"), Some("success"))
    );
    assert_eq!(frames.last().unwrap()["response"], "written it");
    assert_eq!(gw.writer.0.load(Ordering::SeqCst), 1);
    assert!(
        asked.iter().any(|f| f["type"] == "tool_call")
            || frames.iter().any(|f| f["type"] == "tool_call")
    );

    // The tool calls went to the event bus with their channel.
    let replay = events.subscribe(Some(0));
    let kinds: Vec<&str> = replay.events.iter().map(|e| e.kind).collect();
    assert!(
        kinds.contains(&"tool.started") && kinds.contains(&"tool.finished"),
        "{kinds:?}"
    );
    let finished = replay
        .events
        .iter()
        .find(|e| e.kind == "tool.finished")
        .unwrap();
    assert!(
        finished.data()["channel"]
            .as_str()
            .unwrap()
            .starts_with("ws:")
    );

    // Deny.
    gw.llm
        .push(Scripted::tool_call("writer", json!({"again": true})));
    gw.llm.push(Scripted::text("as you wish"));
    send(
        &mut socket,
        json!({"type": "message", "content": "write again"}),
    )
    .await;
    let asked = until(&mut socket, "approval_request").await;
    let id = asked.last().unwrap()["id"].as_str().unwrap().to_string();
    send(
        &mut socket,
        json!({"type": "approval", "id": id, "decision": "deny"}),
    )
    .await;
    let frames = until(&mut socket, "done").await;
    let result = frames.iter().find(|f| f["type"] == "tool_result").unwrap();
    assert_eq!(result["status"], "declined");
    assert_eq!(frames.last().unwrap()["response"], "as you wish");
    assert_eq!(
        gw.writer.0.load(Ordering::SeqCst),
        1,
        "the denied call did not run"
    );

    // Answering it again is an error frame, and the connection stays open.
    send(
        &mut socket,
        json!({"type": "approval", "id": id, "decision": "approve"}),
    )
    .await;
    assert_eq!(next_frame(&mut socket).await["type"], "error");
    gw.stop().await;
}

#[tokio::test]
async fn an_unanswered_approval_is_declined_after_agent_approval_timeout_secs() {
    // `agent.approval_timeout_secs = 1` reaches the WebSocket through the
    // chat service (it was fixed at 120 s there).
    let options = support::Options {
        approval_timeout: Duration::from_secs(1),
        ..Default::default()
    };
    let gw = TestGateway::start_opts(options, |g| g).await;
    let mut socket = connect(&gw).await;
    gw.llm.push(Scripted::tool_call("writer", json!({})));
    gw.llm.push(Scripted::text("nobody answered"));
    send(&mut socket, json!({"type": "message", "content": "write"})).await;
    let frames = until(&mut socket, "done").await;
    let asked = frames
        .iter()
        .find(|f| f["type"] == "approval_request")
        .unwrap();
    assert_eq!(asked["timeout_secs"], 1, "{asked}");
    let result = frames.iter().find(|f| f["type"] == "tool_result").unwrap();
    assert_eq!(result["status"], "declined");
    assert_eq!(gw.writer.0.load(Ordering::SeqCst), 0);
    gw.stop().await;
}

#[tokio::test]
async fn the_token_may_come_as_a_subprotocol_which_is_echoed() {
    let gw = TestGateway::start().await;
    let protocol = format!("bearer.{}", gw.token);
    let mut request = ws_url(&gw, "?conversation=kitchen-1")
        .into_client_request()
        .unwrap();
    request.headers_mut().insert(
        "Sec-WebSocket-Protocol",
        HeaderValue::from_str(&protocol).unwrap(),
    );
    let (mut socket, response) = tokio_tungstenite::connect_async(request).await.unwrap();
    assert_eq!(
        response.headers()["sec-websocket-protocol"]
            .to_str()
            .unwrap(),
        protocol
    );
    let ready = next_frame(&mut socket).await;
    assert_eq!(ready["conversation"], "kitchen-1");
    assert_eq!(ready["channel"], "ws:kitchen-1");

    // A wrong token, or none, is refused before the upgrade.
    for header in [Some("bearer.cairn_wrong"), None] {
        let mut request = ws_url(&gw, "").into_client_request().unwrap();
        if let Some(h) = header {
            request
                .headers_mut()
                .insert("Sec-WebSocket-Protocol", HeaderValue::from_static(h));
        }
        match tokio_tungstenite::connect_async(request).await {
            Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
                assert_eq!(response.status(), 401)
            }
            other => panic!("expected 401, got {other:?}"),
        }
    }
    gw.stop().await;
}

#[tokio::test]
async fn bad_frames_are_answered_with_errors_and_the_connection_stays_open() {
    let gw = TestGateway::start().await;
    let mut socket = connect(&gw).await;
    socket.send(Message::Text("not json".into())).await.unwrap();
    let error = next_frame(&mut socket).await;
    assert_eq!(error["type"], "error");
    assert!(error["message"].as_str().unwrap().contains("bad frame"));
    send(&mut socket, json!({"type": "dance"})).await;
    assert_eq!(next_frame(&mut socket).await["type"], "error");

    // An agent error is an error frame too.
    gw.llm.push(Scripted::auth_error());
    send(&mut socket, json!({"type": "message", "content": "hi"})).await;
    assert_eq!(
        until(&mut socket, "error").await.last().unwrap()["type"],
        "error"
    );

    gw.llm.push(Scripted::text("still here"));
    send(
        &mut socket,
        json!({"type": "message", "content": "hi again"}),
    )
    .await;
    assert_eq!(
        until(&mut socket, "done").await.last().unwrap()["response"],
        "still here"
    );
    gw.stop().await;
}

#[tokio::test]
async fn notifications_for_the_person_arrive_and_shutdown_closes_the_socket() {
    let bus = Arc::new(EventBus::new(Arc::new(SystemClock)));
    let gw = TestGateway::start_with(settings(), {
        let bus = bus.clone();
        move |g| g.with_events(bus)
    })
    .await;
    bus.feed(
        Sources {
            notifier: Some(gw.notifier.clone()),
            ..Default::default()
        },
        gw.shutdown.clone(),
    );
    let mut socket = connect(&gw).await;
    gw.notifier
        .send(
            NewNotification {
                user_id: "ada".into(),
                channel: None,
                title: "Laundry".into(),
                body: "the machine is done".into(),
                priority: Priority::High,
                tags: vec![],
                data: None,
                source: "test".into(),
            },
            chrono::Utc::now(),
        )
        .await
        .unwrap();
    let frame = next_frame(&mut socket).await;
    assert_eq!(frame["type"], "notification");
    assert_eq!(frame["title"], "Laundry");
    assert_eq!(frame["priority"], "high");

    gw.shutdown.cancel();
    let closed = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match socket.next().await {
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return true,
                Some(Ok(_)) => {}
            }
        }
    })
    .await
    .unwrap();
    assert!(closed);
    gw.stop().await;
}

#[tokio::test]
async fn a_new_message_interrupts_a_turn_waiting_for_approval() {
    let gw = TestGateway::start().await;
    let mut socket = connect(&gw).await;
    gw.llm.push(Scripted::tool_call("writer", json!({})));
    gw.llm.push(Scripted::text("second answer"));
    send(&mut socket, json!({"type": "message", "content": "write"})).await;
    let asked = until(&mut socket, "approval_request").await;
    let id = asked.last().unwrap()["id"].as_str().unwrap().to_string();
    send(
        &mut socket,
        json!({"type": "message", "content": "never mind"}),
    )
    .await;
    let mut answers = Vec::new();
    while !answers.iter().any(|r| r == "second answer") {
        let frames = until(&mut socket, "done").await;
        answers.push(
            frames.last().unwrap()["response"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    // The interrupted request is gone: answering it now is an error.
    send(
        &mut socket,
        json!({"type": "approval", "id": id, "decision": "approve"}),
    )
    .await;
    assert_eq!(next_frame(&mut socket).await["type"], "error");
    assert_eq!(gw.writer.0.load(Ordering::SeqCst), 0);
    gw.stop().await;
}

#[tokio::test]
async fn a_finished_background_task_brings_the_agents_reaction_unasked() {
    let gw = TestGateway::start().await;
    gw.llm.push(Scripted::text("started it"));
    let mut socket = connect(&gw).await;
    send(
        &mut socket,
        json!({"type": "message", "content": "download it in the background"}),
    )
    .await;
    until(&mut socket, "done").await;
    // The conversation's session, and a task of it that has just completed.
    let session = gw
        .store
        .list_sessions()
        .await
        .unwrap()
        .into_iter()
        .find(|s| s.channel.starts_with("ws:"))
        .unwrap();
    let now = chrono::Utc::now();
    gw.store
        .create_background_task(&cairn_store::BackgroundTask {
            id: "bg-0000abcd".into(),
            owner: "some-proc".into(),
            lease_until: Some(now + chrono::Duration::seconds(60)),
            session_id: session.id.to_string(),
            thread_id: None,
            tool: "http_get".into(),
            params: json!({}),
            status: cairn_store::TaskStatus::Running,
            result: None,
            error: None,
            started_at: now,
            finished_at: None,
            delivered_at: None,
        })
        .await
        .unwrap();
    gw.store
        .finish_background_task(
            "bg-0000abcd",
            cairn_store::TaskStatus::Completed,
            Some(&json!({"success": true, "data": "12 MB saved"})),
            None,
            now,
        )
        .await
        .unwrap();
    gw.llm.push(Scripted::text("Your download is complete."));
    // No message from the client: the agent's reaction arrives on its own.
    let frames = until(&mut socket, "done").await;
    let done = frames.last().unwrap();
    assert_eq!(done["response"], "Your download is complete.", "{frames:?}");
    assert_eq!(done["automatic"], true);
    let asked = gw.llm.last_request().unwrap().body.to_string();
    assert!(
        asked.contains("[BACKGROUND TASK COMPLETED] task_id=bg-0000abcd"),
        "{asked}"
    );
    // Delivered once: no second automatic turn.
    assert!(
        !gw.store
            .has_undelivered_tasks(&session.id.to_string())
            .await
            .unwrap()
    );
    gw.stop().await;
}

#[tokio::test]
async fn a_client_that_answers_no_ping_is_dropped_and_one_that_does_stays() {
    let gw =
        TestGateway::start_with(settings(), |g| g.with_ws_ping(Duration::from_millis(150))).await;
    let mut silent = connect(&gw).await;
    let mut alive = connect(&gw).await;
    // `alive` reads (so its client answers pings) while `silent` reads nothing.
    let deadline = tokio::time::Instant::now() + Duration::from_millis(1_200);
    while let Ok(Some(message)) = tokio::time::timeout_at(deadline, alive.next()).await {
        assert!(
            !matches!(message, Ok(Message::Close(_))),
            "a client answering pings is kept: {message:?}"
        );
    }
    // The server closed it. Reading now, the client may first fail to
    // answer a queued ping on the closed socket, so a close frame is not
    // always read; when it is, it says why.
    let ended = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match silent.next().await {
                Some(Ok(Message::Close(frame))) => return frame.map(|f| f.reason.to_string()),
                Some(Ok(_)) => {}
                Some(Err(_)) | None => return None,
            }
        }
    })
    .await
    .expect("the silent connection is closed by the server");
    if let Some(reason) = ended {
        assert_eq!(reason, "no answer to pings");
    }

    gw.llm.push(Scripted::text("still here"));
    send(&mut alive, json!({"type": "message", "content": "hi"})).await;
    let frames = until(&mut alive, "done").await;
    assert_eq!(frames.last().unwrap()["response"], "still here");
    gw.stop().await;
}

#[tokio::test]
async fn a_message_over_the_body_limit_is_refused_before_the_agent() {
    let gw = TestGateway::start().await;
    let limit = settings().body_limit;
    let mut socket = connect(&gw).await;
    let big = json!({"type": "message", "content": "x".repeat(limit)});
    send(&mut socket, big).await;
    let frame = next_frame(&mut socket).await;
    assert_eq!(frame["type"], "error", "{frame}");
    let message = frame["message"].as_str().unwrap();
    assert!(
        message.contains("gateway.body_limit_bytes") && message.contains(&limit.to_string()),
        "{message}"
    );
    assert!(gw.llm.requests().is_empty(), "nothing reached the model");
    assert!(
        gw.store.list_sessions().await.unwrap().is_empty(),
        "nothing reached the store"
    );

    // The connection stays open for messages within the limit.
    gw.llm.push(Scripted::text("small is fine"));
    send(&mut socket, json!({"type": "message", "content": "hi"})).await;
    let frames = until(&mut socket, "done").await;
    assert_eq!(frames.last().unwrap()["response"], "small is fine");

    // Far past the limit, the connection is closed (the server stops
    // reading, so the client may see a reset while still sending).
    let huge = "y".repeat(4 << 20);
    if socket.send(Message::Text(huge.into())).await.is_ok() {
        tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                match socket.next().await {
                    Some(Ok(Message::Close(_)) | Err(_)) | None => return,
                    Some(Ok(_)) => {}
                }
            }
        })
        .await
        .expect("the connection closed");
    }
    assert_eq!(gw.llm.requests().len(), 1);
    gw.stop().await;
}

#[tokio::test]
async fn a_stop_frame_interrupts_the_turn_in_progress() {
    let gw = TestGateway::start().await;
    // A slow answer: the stop arrives while the model is still "thinking".
    gw.llm
        .push(Scripted::text("too late").with_delay(Duration::from_secs(30)));
    let mut socket = connect(&gw).await;
    send(&mut socket, json!({"type": "stop"})).await;
    let idle = next_frame(&mut socket).await;
    assert_eq!(
        (idle["type"].as_str(), idle["message"].as_str()),
        (Some("error"), Some("no turn is running"))
    );
    send(&mut socket, json!({"type": "message", "content": "hi"})).await;
    // Once the model is asked, the turn is running; the stop ends it at once.
    tokio::time::timeout(Duration::from_secs(10), async {
        while gw.llm.requests().is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the turn reaches the model");
    send(&mut socket, json!({"type": "stop"})).await;
    let frames = until(&mut socket, "done").await;
    let done = frames.last().unwrap();
    assert!(
        done["response"]
            .as_str()
            .unwrap()
            .starts_with("Interrupted"),
        "{frames:?}"
    );
    gw.stop().await;
}

/// The text of every message of a model request.
fn said(body: &Value) -> String {
    body["messages"].to_string()
}

#[tokio::test]
async fn the_agent_parameter_picks_the_agent_and_its_conversations_are_its_own() {
    let family_home = tempfile::tempdir().unwrap();
    let gw = TestGateway::start_with(settings(), {
        let home = family_home.path().to_path_buf();
        move |g| with_family(g, &home)
    })
    .await;
    let turn = async |query: &str, text: &str| {
        let (mut socket, ready) = connect_to(&gw, query).await;
        send(&mut socket, json!({"type": "message", "content": text})).await;
        let done = until(&mut socket, "done").await.pop().unwrap();
        (ready, done)
    };

    gw.llm.push(Scripted::text("noted, Pip here"));
    let (ready, done) = turn(
        "?agent=family&conversation=c1",
        "the hideout is the treehouse",
    )
    .await;
    assert_eq!(done["response"], "noted, Pip here");
    assert_eq!(
        (&ready["agent"], &ready["channel"]),
        (&json!("family"), &json!("ws:family:c1"))
    );
    // The same conversation id without the agent is main's own session.
    gw.llm.push(Scripted::text("main here"));
    let (ready, _) = turn("?conversation=c1", "where is the hideout?").await;
    assert_eq!(
        (&ready["agent"], &ready["channel"]),
        (&json!("main"), &json!("ws:c1"))
    );
    // Family's conversation goes on where it was.
    gw.llm.push(Scripted::text("the treehouse"));
    turn("?agent=family&conversation=c1", "and again?").await;
    // `main` named is main.
    gw.llm.push(Scripted::text("main again"));
    let (ready, _) = turn("?agent=main&conversation=c1", "still you?").await;
    assert_eq!(ready["channel"], "ws:c1");

    let requests: Vec<Value> = gw.llm.requests().into_iter().map(|r| r.body).collect();
    assert_eq!(requests.len(), 4);
    let models: Vec<&str> = requests
        .iter()
        .map(|r| r["model"].as_str().unwrap())
        .collect();
    assert_eq!(
        models,
        [FAMILY_MODEL, "fake-model", FAMILY_MODEL, "fake-model"]
    );
    assert!(
        !said(&requests[1]).contains("treehouse"),
        "main continued family's conversation: {}",
        said(&requests[1])
    );
    assert!(said(&requests[2]).contains("the hideout is the treehouse"));
    assert!(said(&requests[3]).contains("where is the hideout?"));
    assert!(!said(&requests[3]).contains("treehouse"));
    gw.stop().await;
}

#[tokio::test]
async fn an_agent_not_configured_is_refused_before_the_upgrade_naming_the_agents() {
    let family_home = tempfile::tempdir().unwrap();
    let gw = TestGateway::start_with(settings(), {
        let home = family_home.path().to_path_buf();
        move |g| with_family(g, &home)
    })
    .await;
    let mut request = ws_url(&gw, "?agent=nobody").into_client_request().unwrap();
    request.headers_mut().insert(
        "Authorization",
        HeaderValue::from_str(&format!("Bearer {}", gw.token)).unwrap(),
    );
    match tokio_tungstenite::connect_async(request).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            assert_eq!(response.status(), 404);
            let body: Value = serde_json::from_slice(response.body().as_deref().unwrap()).unwrap();
            assert_eq!(body["error"]["code"], "agent_not_found", "{body}");
            let message = body["error"]["message"].as_str().unwrap();
            assert!(
                message.contains("`nobody`") && message.contains("main, family"),
                "{message}"
            );
        }
        other => panic!("expected 404, got {other:?}"),
    }
    // Without [[agents]], only main is there.
    let alone = TestGateway::start().await;
    let mut request = ws_url(&alone, "?agent=family")
        .into_client_request()
        .unwrap();
    request.headers_mut().insert(
        "Authorization",
        HeaderValue::from_str(&format!("Bearer {}", alone.token)).unwrap(),
    );
    match tokio_tungstenite::connect_async(request).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            assert_eq!(response.status(), 404)
        }
        other => panic!("expected 404, got {other:?}"),
    }
    assert!(gw.llm.requests().is_empty() && alone.llm.requests().is_empty());
    alone.stop().await;
    gw.stop().await;
}
