//! Message hooks (issue 44), through the built binary and the fake LLM:
//! `on_message` drops or rewrites a message before the agent sees it,
//! `on_message_sending` redacts an answer, `before_llm_call` blocks the
//! model call, and a hook that cannot answer fails closed.
#![expect(clippy::unwrap_used, reason = "test helpers unwrap freely")]
#![expect(
    clippy::disallowed_methods,
    reason = "test fixtures may use blocking std::fs"
)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use assert_cmd::Command;
use cairn_llm::testing::{FakeLlmServer, Scripted};

/// Hooks may run unconfined where Landlock is missing (as in hands_exec_cli.rs).
const BASE: &str = "[tools.shell]\nallow_unconfined = true\n";

/// Prints the answer with `sesame` redacted, as `{"text": "…"}`.
const REDACT: &str = "#!/bin/sh\nsed -e 's/.*\"text\":\"\\([^\"]*\\)\".*/{\"text\":\"\\1\"}/' -e 's/sesame/[redacted]/g'\n";

/// Drops the messages naming the mangosteen.
const NO_FRUIT: &str =
    "#!/bin/sh\nif grep -q mangosteen; then echo 'no fruit talk here' >&2; exit 2; fi\n";

/// A home at `<parent>/.cairn`; hook scripts sit beside it.
struct Env {
    parent: tempfile::TempDir,
    llm: FakeLlmServer,
}

impl Env {
    fn new() -> Env {
        let parent = tempfile::tempdir().unwrap();
        std::fs::create_dir(parent.path().join(".cairn")).unwrap();
        Env {
            parent,
            llm: FakeLlmServer::start_on_thread().unwrap(),
        }
    }

    fn home(&self) -> PathBuf {
        self.parent.path().join(".cairn")
    }

    /// config.toml with one hook of `event` running the script `text`.
    fn hook(&self, event: &str, text: &str) {
        self.hooks(&[(event, text)]);
    }

    /// config.toml with these hooks, `(event, script text)` each.
    fn hooks(&self, hooks: &[(&str, &str)]) {
        let mut toml = BASE.to_string();
        for (event, text) in hooks {
            let path = self.parent.path().join(format!("{event}.sh"));
            std::fs::write(&path, text).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
            toml.push_str(&format!(
                "\n[[hooks]]\nevent = \"{event}\"\ncommand = \"{}\"\n",
                path.display()
            ));
        }
        std::fs::write(self.home().join("config.toml"), toml).unwrap();
    }

    fn cairn(&self) -> Command {
        cairn(&self.home(), &self.llm)
    }

    /// `cairn chat -m text`.
    fn chat(&self, text: &str) -> Output {
        self.cairn().args(["chat", "-m", text]).output().unwrap()
    }

    /// The user messages of every request the fake LLM received.
    fn user_texts(&self) -> Vec<String> {
        self.llm
            .requests()
            .iter()
            .flat_map(|r| r.body["messages"].as_array().cloned().unwrap_or_default())
            .filter(|m| m["role"] == "user")
            .map(|m| m["content"].to_string())
            .collect()
    }
}

/// `cairn` with the fake LLM.
fn cairn(home: &Path, llm: &FakeLlmServer) -> Command {
    let mut cmd = Command::cargo_bin("cairn").unwrap();
    cmd.env_clear()
        .env("CAIRN_HOME", home)
        .env("CAIRN_TIMEZONE", "UTC")
        .env("CAIRN_GATEWAY_PORT", "0")
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("CAIRN_LLM_PROVIDER", "openai")
        .env("CAIRN_LLM_BASE_URL", llm.base_url_openai())
        .env("CAIRN_LLM_MODEL", "test-model")
        .env("CAIRN_LLM_API_KEY", "sk-test-0123456789")
        .env("CAIRN_LLM_MAX_RETRIES", "0");
    cmd
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// An `on_message` hook drops the messages naming a word (the model never
/// sees them, the person reads the hook's reason) and lets others through.
#[test]
fn on_message_drops_messages_with_a_word() {
    let env = Env::new();
    env.hook("on_message", NO_FRUIT);
    let out = env.chat("tell me about the mangosteen");
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("dropped") && stderr.contains("no fruit talk here"),
        "{stderr}"
    );
    assert!(
        env.llm.requests().is_empty(),
        "the model saw a dropped message"
    );

    env.llm.push(Scripted::text("hello back"));
    let out = env.chat("hello");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("hello back"));
    assert_eq!(env.llm.requests().len(), 1);
}

/// An `on_message` hook printing `{"text": …}` replaces the message the model sees.
#[test]
fn on_message_rewrites_messages() {
    let env = Env::new();
    env.hook(
        "on_message",
        "#!/bin/sh\ncat > /dev/null\necho '{\"text\": \"rewritten by the hook\"}'\n",
    );
    env.llm.push(Scripted::text("ok"));
    let out = env.chat("the original words");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let users = env.user_texts();
    assert!(
        users.iter().any(|u| u.contains("rewritten by the hook")),
        "{users:?}"
    );
    assert!(
        !users.iter().any(|u| u.contains("the original words")),
        "{users:?}"
    );
}

/// An `on_message_sending` hook redacts a word from the answer `cairn chat -m` prints.
#[test]
fn on_message_sending_redacts_answers_in_chat() {
    let env = Env::new();
    env.hook("on_message_sending", REDACT);
    env.llm.push(Scripted::text("the password is sesame"));
    let out = env.chat("what is the password?");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("the password is [redacted]"), "{stdout}");
    assert!(!stdout.contains("sesame"), "{stdout}");
}

/// A `before_llm_call` hook blocking: no request reaches the model, and
/// the turn fails with the hook's reason.
#[test]
fn before_llm_call_blocks_the_call() {
    let env = Env::new();
    env.hook(
        "before_llm_call",
        "#!/bin/sh\ncat > llm.json\necho 'the model is resting' >&2\nexit 2\n",
    );
    env.llm.push(Scripted::text("should not be asked"));
    let out = env.chat("hello");
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(stderr.contains("the model is resting"), "{stderr}");
    assert!(env.llm.requests().is_empty(), "a request reached the model");
    let event: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(env.home().join("workspace/llm.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(event["event"], "before_llm_call");
    assert!(event["messages"].as_u64().unwrap() >= 2, "{event}");
    assert!(
        event["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == "shell"),
        "{event}"
    );
}

/// A hook that cannot start fails closed: the message is dropped, the
/// answer withheld, the model call blocked, each saying the hook failed.
#[test]
fn a_failing_hook_fails_closed() {
    let env = Env::new();
    for event in ["on_message", "before_llm_call", "on_message_sending"] {
        env.hook(event, "#!/nonexistent/interpreter\n");
        env.llm.push(Scripted::text("the secret answer"));
        let before = env.llm.requests().len();
        let out = env.chat("hello");
        assert!(!out.status.success(), "{event}: it went through");
        let stderr = text(&out.stderr);
        assert!(stderr.contains("gave no verdict"), "{event}: {stderr}");
        assert!(!text(&out.stdout).contains("the secret answer"), "{event}");
        if event != "on_message_sending" {
            assert_eq!(
                env.llm.requests().len(),
                before,
                "{event}: the model was asked"
            );
        }
    }
}

struct Daemon(std::process::Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `cairn daemon` on a free port, with a token: `(daemon, base URL, token)`.
fn daemon(env: &Env) -> (Daemon, String, String) {
    use std::io::BufRead;
    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("cairn"));
    cmd.envs(env.cairn().get_envs().filter_map(|(k, v)| Some((k, v?))))
        .arg("daemon")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let mut daemon = Daemon(cmd.spawn().unwrap());
    let stderr = std::io::BufReader::new(daemon.0.stderr.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            if let Some(at) = line.split("gateway listening on ").nth(1) {
                let _ = tx.send(at.trim().to_string());
            }
        }
    });
    let base = rx.recv_timeout(std::time::Duration::from_secs(30)).unwrap();
    let out = env
        .cairn()
        .args(["token", "create", "--name", "t"])
        .output()
        .unwrap();
    (daemon, base, text(&out.stdout).trim().to_string())
}

/// `POST /v1/chat/completions` with one user message; `(status, body)`.
fn post(base: &str, token: &str, text: &str, stream: bool) -> (u16, String) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let response = cairn_llm::tls::client()
            .unwrap()
            .post(format!("{base}/v1/chat/completions"))
            .bearer_auth(token)
            .json(&serde_json::json!({
                "model": "cairn",
                "stream": stream,
                "messages": [{"role": "user", "content": text}],
            }))
            .send()
            .await
            .unwrap();
        (response.status().as_u16(), response.text().await.unwrap())
    })
}

/// One message over the WebSocket chat; every frame until `done` or `error`.
fn ws_frames(base: &str, token: &str, text: &str) -> Vec<serde_json::Value> {
    use futures::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let url = format!("{}/ws/chat", base.replacen("http://", "ws://", 1));
        let mut request = url.into_client_request().unwrap();
        request
            .headers_mut()
            .insert("Authorization", format!("Bearer {token}").parse().unwrap());
        let (mut socket, _) = tokio_tungstenite::connect_async(request).await.unwrap();
        let message = serde_json::json!({"type": "message", "content": text});
        socket
            .send(Message::Text(message.to_string().into()))
            .await
            .unwrap();
        let mut frames = Vec::new();
        loop {
            let next = tokio::time::timeout(std::time::Duration::from_secs(20), socket.next())
                .await
                .expect("a frame within 20 s")
                .unwrap()
                .unwrap();
            let Message::Text(text) = next else { continue };
            let frame: serde_json::Value = serde_json::from_str(text.as_str()).unwrap();
            let end = frame["type"] == "done" || frame["type"] == "error";
            frames.push(frame);
            if end {
                return frames;
            }
        }
    })
}

/// Over `/v1/chat/completions` an `on_message` hook drops a message (the
/// model never sees it), and the answer is redacted, whole and streamed
/// (with an `on_message_sending` hook nothing streams before it ran), and
/// over the WebSocket chat too.
#[test]
fn message_hooks_apply_over_the_gateway() {
    let env = Env::new();
    env.hooks(&[("on_message", NO_FRUIT), ("on_message_sending", REDACT)]);
    let (_daemon, base, token) = daemon(&env);
    let (status, body) = post(&base, &token, "the mangosteen is ripe", false);
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("no fruit talk here"), "{body}");
    assert!(
        env.llm.requests().is_empty(),
        "the model saw a dropped message"
    );
    for stream in [false, true] {
        env.llm.push(Scripted::text("the password is sesame"));
        let (status, body) = post(&base, &token, "what is the password?", stream);
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("[redacted]"), "stream {stream}: {body}");
        assert!(!body.contains("sesame"), "stream {stream}: {body}");
        let asked = env.llm.requests().last().unwrap().body.clone();
        assert_ne!(asked["stream"], true, "the model was asked to stream");
    }
    env.llm.push(Scripted::text("the password is sesame"));
    let frames = serde_json::Value::from(ws_frames(&base, &token, "the password?")).to_string();
    assert!(frames.contains("[redacted]"), "{frames}");
    assert!(!frames.contains("sesame"), "{frames}");
}
