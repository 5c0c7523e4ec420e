//! What the dashboard's chat reads and does beside `/ws/chat`: a
//! conversation's history from the store (paged, newest last, answers as
//! Markdown nodes), New thread, Undo and switching as actions that post
//! nothing, the Markdown of a streamed answer, what Home's first run
//! says is left to do, and a built-in routine saved with only what the
//! page lets change.
#![expect(clippy::unwrap_used, reason = "test code unwraps freely")]

mod support;

use std::time::Duration;

use cairn_llm::testing::Scripted;
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use support::{TestGateway, error_code};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A chat connection and the conversation its `ready` frame names.
async fn connect(gw: &TestGateway) -> (Socket, String) {
    let url = format!("{}/ws/chat", gw.base.replacen("http://", "ws://", 1));
    let mut request = url.into_client_request().unwrap();
    request.headers_mut().insert(
        "Authorization",
        HeaderValue::from_str(&format!("Bearer {}", gw.token)).unwrap(),
    );
    let (mut socket, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    let ready = next_frame(&mut socket).await;
    assert_eq!(ready["type"], "ready", "{ready}");
    (socket, ready["conversation"].as_str().unwrap().to_string())
}

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

/// Sends a message and waits for its `done`.
async fn say(socket: &mut Socket, text: &str) -> Value {
    let frame = json!({"type": "message", "content": text}).to_string();
    socket.send(Message::Text(frame.into())).await.unwrap();
    loop {
        let frame = next_frame(socket).await;
        if frame["type"] == "done" || frame["type"] == "error" {
            return frame;
        }
    }
}

async fn history(gw: &TestGateway, query: &str) -> Value {
    let response = gw
        .get(&format!("/ui/api/chat/history?{query}"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

async fn action(gw: &TestGateway, body: Value) -> (u16, Value) {
    let response = gw
        .post("/ui/api/chat/thread")
        .json(&body)
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

fn inputs(history: &Value) -> Vec<String> {
    history["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["user_input"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn the_history_is_the_stores_newest_last_in_pages_with_markdown_nodes() {
    let gw = TestGateway::start().await;
    for answer in ["one", "**two** and `x`", "three"] {
        gw.llm.push(Scripted::text(answer));
    }
    let (mut socket, conversation) = connect(&gw).await;
    // Nothing said yet: no session, nothing shown.
    let empty = history(&gw, &format!("conversation={conversation}")).await;
    assert_eq!(empty["turns"], json!([]));
    assert_eq!(empty["thread"], Value::Null);
    for text in ["first", "second", "third"] {
        assert_eq!(say(&mut socket, text).await["type"], "done");
    }

    let all = history(&gw, &format!("conversation={conversation}")).await;
    assert_eq!(inputs(&all), ["first", "second", "third"]);
    assert_eq!(all["more"], false);
    assert_eq!(
        all["thread"]["title"], "first",
        "named by its first message"
    );
    let second = &all["turns"][1];
    assert_eq!(
        second["nodes"],
        json!([{"t": "p", "c": [{"t": "strong", "c": ["two"]}, " and ", {"t": "code", "c": ["x"]}]}])
    );
    assert_eq!(all["threads"].as_array().unwrap().len(), 1);
    assert_eq!(all["threads"][0]["active"], true);

    // Paged: the newest two, then the one before them.
    let last = history(&gw, &format!("conversation={conversation}&limit=2")).await;
    assert_eq!(inputs(&last), ["second", "third"]);
    assert_eq!(last["more"], true);
    let before = last["turns"][0]["number"].as_u64().unwrap();
    let earlier = history(
        &gw,
        &format!("conversation={conversation}&limit=2&before={before}"),
    )
    .await;
    assert_eq!(inputs(&earlier), ["first"]);
    assert_eq!(earlier["more"], false);

    // Another agent's conversation of the same id is another session.
    let (status, code) = error_code(
        gw.get(&format!(
            "/ui/api/chat/history?conversation={conversation}&agent=nobody"
        ))
        .send()
        .await
        .unwrap(),
    )
    .await;
    assert_eq!((status, code.as_str()), (404, "agent_not_found"));
    let (status, _) = error_code(
        gw.get("/ui/api/chat/history?conversation=no%20spaces")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 400);
    gw.stop().await;
}

#[tokio::test]
async fn new_thread_undo_and_switch_change_what_is_shown_and_post_nothing() {
    let gw = TestGateway::start().await;
    for answer in ["a1", "a2", "b1"] {
        gw.llm.push(Scripted::text(answer));
    }
    let (mut socket, conversation) = connect(&gw).await;
    let c = |extra: Value| {
        let mut body = json!({"conversation": conversation});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        body
    };
    say(&mut socket, "alpha one").await;
    say(&mut socket, "alpha two").await;
    let query = format!("conversation={conversation}");
    let first = history(&gw, &query).await["thread"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let calls = gw.llm.requests().len();

    let (status, said) = action(&gw, c(json!({"action": "new"}))).await;
    assert_eq!(status, 200, "{said}");
    let fresh = history(&gw, &query).await;
    assert_eq!(fresh["turns"], json!([]), "a new thread shows nothing");
    assert_eq!(fresh["threads"].as_array().unwrap().len(), 2);
    say(&mut socket, "beta one").await;
    assert_eq!(inputs(&history(&gw, &query).await), ["beta one"]);

    let (status, _) = action(&gw, c(json!({"action": "switch", "thread": first}))).await;
    assert_eq!(status, 200);
    let back = history(&gw, &query).await;
    assert_eq!(back["thread"]["id"], first.as_str());
    assert_eq!(inputs(&back), ["alpha one", "alpha two"]);

    let (status, said) = action(&gw, c(json!({"action": "undo"}))).await;
    assert_eq!(status, 200, "{said}");
    assert_eq!(inputs(&history(&gw, &query).await), ["alpha one"]);
    action(&gw, c(json!({"action": "undo"}))).await;
    let (_, nothing) = action(&gw, c(json!({"action": "undo"}))).await;
    assert!(
        nothing["notice"].as_str().unwrap().starts_with("Nothing"),
        "{nothing}"
    );

    // None of it reached the model or became a turn of any thread.
    assert_eq!(
        gw.llm.requests().len(),
        calls + 1,
        "only \"beta one\" asked"
    );
    let sessions: Vec<Value> = gw
        .get("/api/sessions")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let session = sessions
        .iter()
        .find(|s| s["channel"] == format!("ws:{conversation}"))
        .unwrap();
    for thread in session["threads"].as_array().unwrap() {
        let path = format!(
            "/api/sessions/{}/threads/{}",
            session["id"].as_str().unwrap(),
            thread["id"].as_str().unwrap()
        );
        let turns: Value = gw.get(&path).send().await.unwrap().json().await.unwrap();
        for turn in turns["turns"].as_array().unwrap() {
            assert!(
                !turn["user_input"].as_str().unwrap().starts_with('/'),
                "{turn}"
            );
        }
    }

    for (body, field) in [
        (c(json!({"action": "switch", "thread": "/new"})), "thread"),
        (c(json!({"action": "switch"})), "thread"),
        (c(json!({"action": "delete"})), "action"),
    ] {
        let (status, error) = action(&gw, body).await;
        assert_eq!(status, 422, "{error}");
        assert!(
            error["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with(field),
            "{error}"
        );
    }
    gw.stop().await;
}

#[tokio::test]
async fn a_streamed_answer_renders_to_nodes_with_raw_html_as_text() {
    let gw = TestGateway::start().await;
    let text = "## Plan\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n<img src=x onerror=\"alert(1)\"> [x](javascript:alert(1)) [ok](https://example.org)";
    let response = gw
        .post("/ui/api/markdown")
        .json(&json!({ "text": text }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let nodes = response.json::<Value>().await.unwrap()["nodes"].clone();
    assert_eq!(nodes[0], json!({"t": "h3", "c": ["Plan"]}));
    assert_eq!(nodes[1]["t"], "table");
    let last = nodes[2]["c"].as_array().unwrap();
    assert_eq!(last[0], json!("<img src=x onerror=\"alert(1)\"> "));
    assert_eq!(
        last[1],
        json!({"t": "span", "c": ["x"]}),
        "no javascript: link"
    );
    assert_eq!(
        last[3],
        json!({"t": "a", "href": "https://example.org", "c": ["ok"]})
    );
    // Without a session or token it is refused like every dashboard call.
    let (status, _) = error_code(
        gw.http
            .post(gw.url("/ui/api/markdown"))
            .json(&json!({"text": "x"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 401);
    gw.stop().await;
}

#[tokio::test]
async fn setup_says_what_a_first_run_has_left_to_do() {
    let gw = TestGateway::start().await;
    let setup = |gw: &TestGateway| gw.get("/ui/api/setup").send();
    let first: Value = setup(&gw).await.unwrap().json().await.unwrap();
    assert_eq!(
        first,
        json!({"llm": true, "paired_devices": 0, "routines": 0})
    );
    let made = gw
        .post("/api/routines")
        .json(&json!({"name": "tea", "trigger": {"type": "manual"}, "action": {"type": "notification", "message": "tea"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(made.status(), 201);
    let code = gw.pairing_code().await;
    let paired = gw
        .http
        .post(gw.url("/pair"))
        .header("X-Pairing-Code", code)
        .send()
        .await
        .unwrap();
    assert!(paired.status().is_success(), "{}", paired.status());
    let later: Value = setup(&gw).await.unwrap().json().await.unwrap();
    assert_eq!(
        later,
        json!({"llm": true, "paired_devices": 1, "routines": 1})
    );
    gw.stop().await;
}

#[tokio::test]
async fn a_built_in_routine_saves_with_what_the_page_changes() {
    use cairn_automation::routines::system::{SystemRoutine, ensure_system_routines};
    let gw = TestGateway::start().await;
    let now = cairn_core::clock::Clock::now(&cairn_core::clock::SystemClock);
    let beat = SystemRoutine::every(
        "heartbeat",
        "checks HEARTBEAT.md",
        Duration::from_secs(1800),
    );
    ensure_system_routines(&gw.store, "ada", &[beat], chrono_tz::UTC, now)
        .await
        .unwrap();
    let view: Value = gw
        .get("/api/routines/heartbeat")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    // What the page sends: the spec as read, enabled and notify changed.
    let mut spec = view["spec"].clone();
    spec["enabled"] = json!(false);
    spec["notify"]["on_success"] = json!(true);
    let saved = gw
        .http
        .put(gw.url(&format!("/api/routines/{}", view["id"].as_str().unwrap())))
        .bearer_auth(&gw.token)
        .json(&spec)
        .send()
        .await
        .unwrap();
    assert_eq!(saved.status(), 200, "{}", saved.text().await.unwrap());
    let stored = gw.store.list_routines(None).await.unwrap();
    let beat = stored.iter().find(|r| r.spec.name == "heartbeat").unwrap();
    assert!(!beat.spec.enabled && beat.spec.notify.on_success);
    assert_eq!(beat.spec.action.kind(), "system");
    gw.stop().await;
}
