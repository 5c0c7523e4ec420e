//! Recurring work needs a person (issue 42), through `cairn daemon`'s
//! gateway and the fake LLM: over `/v1/chat/completions` (nobody to
//! approve) `schedule_cron`, a repeating `remember` and `watch_start` are
//! refused; over the WebSocket chat `schedule_cron` asks, and a denied
//! approval leaves nothing scheduled.
#![expect(clippy::unwrap_used, reason = "test helpers unwrap freely")]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use cairn_llm::testing::{FakeLlmServer, Scripted};
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;

struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn cairn(home: &std::path::Path, llm: &FakeLlmServer) -> Command {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("cairn"));
    cmd.env_clear()
        .env("CAIRN_HOME", home)
        .env("CAIRN_TIMEZONE", "UTC")
        .env("CAIRN_GATEWAY_PORT", "0")
        .env("CAIRN_LLM_PROVIDER", "openai")
        .env("CAIRN_LLM_BASE_URL", llm.base_url_openai())
        .env("CAIRN_LLM_MODEL", "test-model")
        .env("CAIRN_LLM_API_KEY", "sk-test-0123456789")
        .env("CAIRN_LLM_MAX_RETRIES", "0");
    cmd
}

fn stdout(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A daemon on a free port with a token: `(daemon, base URL, token)`.
fn start(home: &std::path::Path, llm: &FakeLlmServer) -> (Daemon, String, String) {
    let mut cmd = cairn(home, llm);
    cmd.arg("daemon")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut daemon = Daemon(cmd.spawn().unwrap());
    let stderr = BufReader::new(daemon.0.stderr.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            if let Some(at) = line.split("gateway listening on ").nth(1) {
                let _ = tx.send(at.trim().to_string());
            }
        }
    });
    let base = rx.recv_timeout(Duration::from_secs(30)).unwrap();
    let token = stdout(cairn(home, llm).args(["token", "create", "--name", "t"]))
        .trim()
        .to_string();
    (daemon, base, token)
}

/// The person's scheduled jobs and watchers (cairn's own routines left out).
fn scheduled(home: &std::path::Path, llm: &FakeLlmServer) -> Vec<String> {
    let list: Value = serde_json::from_str(&stdout(
        cairn(home, llm).args(["routine", "list", "--json"]),
    ))
    .unwrap();
    list.as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["name"].as_str())
        .filter(|n| {
            ["schedule-", "remind-", "watch-"]
                .iter()
                .any(|p| n.starts_with(p))
        })
        .map(String::from)
        .collect()
}

/// The tool results of the model's `n`th request.
fn tool_results(llm: &FakeLlmServer, n: usize) -> Vec<String> {
    llm.requests()[n].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// `/v1`: an API client, nobody to approve.
#[test]
fn recurring_work_is_refused_over_v1() {
    let home = tempfile::tempdir().unwrap();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    let (_daemon, base, token) = start(home.path(), &llm);
    let rt = tokio::runtime::Runtime::new().unwrap();
    llm.push(Scripted::tool_calls([
        (
            "schedule_cron",
            json!({"cron": "every 5 minutes", "prompt": "tick"}),
        ),
        (
            "remember",
            json!({"what": "stretch", "when": "every day at 9am", "action": "llm_prompt"}),
        ),
        ("watch_start", json!({"name": "time_now", "interval": 60})),
    ]));
    llm.push(Scripted::text("could not"));
    rt.block_on(async {
        let response = cairn_llm::tls::client().unwrap()
            .post(format!("{base}/v1/chat/completions"))
            .bearer_auth(&token)
            .json(&json!({"model": "cairn", "messages": [{"role": "user", "content": "tick every 5 minutes"}]}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
    });
    let results = tool_results(&llm, 1);
    assert_eq!(results.len(), 3, "{results:?}");
    for (result, tool) in results
        .iter()
        .zip(["schedule_cron", "remember", "watch_start"])
    {
        assert!(
            result.contains("nobody can approve") && result.contains(tool),
            "{result}"
        );
    }
    assert_eq!(scheduled(home.path(), &llm), Vec::<String>::new());
}

/// The WebSocket chat: a person, who is asked and says no.
#[test]
fn recurring_work_asks_over_the_websocket_and_a_denial_schedules_nothing() {
    let home = tempfile::tempdir().unwrap();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    let (_daemon, base, token) = start(home.path(), &llm);
    let rt = tokio::runtime::Runtime::new().unwrap();
    llm.push(Scripted::tool_call(
        "schedule_cron",
        json!({"cron": "*/5 * * * *", "action_type": "llm_prompt", "prompt": "tick"}),
    ));
    llm.push(Scripted::text("as you wish"));
    let frames = rt.block_on(async {
        let url = format!("{}/ws/chat", base.replacen("http://", "ws://", 1));
        let mut request = url.into_client_request().unwrap();
        request.headers_mut().insert(
            "Authorization",
            HeaderValue::from_str(&format!("Bearer {token}")).unwrap(),
        );
        let (mut socket, _) = tokio_tungstenite::connect_async(request).await.unwrap();
        let message = json!({"type": "message", "content": "tick every 5 minutes"});
        socket
            .send(Message::Text(message.to_string().into()))
            .await
            .unwrap();
        let mut frames: Vec<Value> = Vec::new();
        loop {
            let next = tokio::time::timeout(Duration::from_secs(20), socket.next())
                .await
                .expect("a frame within 20 s")
                .unwrap()
                .unwrap();
            let Message::Text(text) = next else { continue };
            let frame: Value = serde_json::from_str(text.as_str()).unwrap();
            if frame["type"] == "approval_request" {
                let deny = json!({"type": "approval", "id": frame["id"], "decision": "deny"});
                socket
                    .send(Message::Text(deny.to_string().into()))
                    .await
                    .unwrap();
            }
            let done = frame["type"] == "done";
            frames.push(frame);
            if done {
                return frames;
            }
        }
    });
    let asked = frames
        .iter()
        .find(|f| f["type"] == "approval_request")
        .unwrap_or_else(|| panic!("schedule_cron ran without asking: {frames:?}"));
    assert_eq!(asked["tool"], "schedule_cron", "{asked}");
    let result = frames.iter().find(|f| f["type"] == "tool_result").unwrap();
    assert_eq!(result["status"], "declined", "{result}");
    assert_eq!(scheduled(home.path(), &llm), Vec::<String>::new());
}
