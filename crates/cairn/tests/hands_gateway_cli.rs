//! Issue 42 through the real binary: credentials in URLs, MCP settings and
//! hook commands never leave the process (`doctor`, `config show`, the
//! daemon's log), and a daemon's gateway refuses a foreign `Host`, too
//! many images and an unsigned `/webhook` when a secret is set.
#![expect(clippy::unwrap_used, reason = "test code unwraps freely")]
#![expect(
    clippy::disallowed_methods,
    reason = "test fixtures may use blocking std::fs"
)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cairn_llm::testing::{FakeLlmServer, Scripted};
use serde_json::{Value, json};

/// Every secret below is spelt with this, so one search finds any leak.
const MARK: &str = "S3CR";

/// A config.toml with a credential in every place the issue found one.
const CONFIG: &str = r#"
[[mcp.servers]]
name = "remote"
url = "http://127.0.0.1:1/mcp?token=S3CR-url&sig=S3CR-sig"
headers = { Authorization = "Bearer S3CR-header" }
start = "startup"

[[mcp.servers]]
name = "local"
command = "/bin/false"
args = ["--token", "S3CR-arg", "--api-key=S3CR-key", "-p", "S3CR-pw", "plain"]
env = { API_TOKEN = "S3CR-env" }
enabled = false

[channels.ops]
type = "webhook"
url = "https://127.0.0.1:1/hook?token=S3CR-channel"

[[hooks]]
event = "on_message"
command = "/bin/true --password S3CR-hook"
"#;

fn cairn(home: &std::path::Path, base_url: &str) -> Command {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("cairn"));
    cmd.env_clear()
        .env("CAIRN_HOME", home)
        .env("CAIRN_TIMEZONE", "UTC")
        .env("CAIRN_GATEWAY_PORT", "0")
        .env("CAIRN_LLM_PROVIDER", "openai")
        .env("CAIRN_LLM_BASE_URL", base_url)
        .env("CAIRN_LLM_MODEL", "test-model")
        .env("CAIRN_LLM_API_KEY", "sk-test-0123456789")
        .env("CAIRN_LLM_MAX_RETRIES", "0")
        .env("HANDS_HOOK_SECRET", "hook-s3cret");
    cmd
}

/// A home with [`CONFIG`] and `more` after it.
fn home(more: &str) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.toml"), format!("{more}\n{CONFIG}")).unwrap();
    home
}

#[test]
fn doctor_and_config_show_never_print_a_credential() {
    let home = home("");
    // The LLM's URL carries one too; doctor builds the provider without calling it.
    let base_url = "http://127.0.0.1:1/v1?key=S3CR-llm";
    let mut printed = String::new();
    for args in [
        &["doctor"][..],
        &["doctor", "--json"],
        &["config", "show"],
        &["config", "show", "--json"],
    ] {
        let out = cairn(home.path(), base_url).args(args).output().unwrap();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(!stdout.contains(MARK), "{args:?} printed:\n{stdout}");
        assert!(!stderr.contains(MARK), "{args:?} logged:\n{stderr}");
        printed.push_str(&stdout);
    }
    // What is hidden is shown hidden, the rest as written.
    for shown in [
        "mcp?token=****&sig=****",
        "hook?token=****",
        "v1?key=****",
        "\"--token\"",
        "\"--api-key=********\"",
        "\"plain\"",
        "/bin/true --password ********",
        "\"API_TOKEN\": \"********\"",
    ] {
        assert!(printed.contains(shown), "{shown} in:\n{printed}");
    }
}

struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits until a line of `log` contains `text`.
fn wait_for(log: &Mutex<Vec<String>>, text: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(line) = log.lock().unwrap().iter().find(|l| l.contains(text)) {
            return line.clone();
        }
        assert!(Instant::now() < deadline, "no log line with {text:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_daemon_logs_no_credential_and_its_gateway_guards_its_doors() {
    let home = home("[gateway]\nwebhook_secret = \"${HANDS_HOOK_SECRET}\"\n");
    let llm = FakeLlmServer::start_on_thread().unwrap();
    let mut cmd = cairn(home.path(), &llm.base_url_openai());
    cmd.arg("daemon")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut daemon = Daemon(cmd.spawn().unwrap());
    let stderr = BufReader::new(daemon.0.stderr.take().unwrap());
    let log = Arc::new(Mutex::new(Vec::new()));
    let reader = std::thread::spawn({
        let log = Arc::clone(&log);
        move || {
            for line in stderr.lines().map_while(Result::ok) {
                log.lock().unwrap().push(line);
            }
        }
    });
    let listening = wait_for(&log, "gateway listening on ");
    let base = listening
        .split("gateway listening on ")
        .nth(1)
        .unwrap()
        .trim()
        .to_string();
    // The MCP server at start-up: its endpoint is in the log lines about it.
    wait_for(&log, "could not be started");
    let token = cairn(home.path(), &llm.base_url_openai())
        .args(["token", "create", "--name", "hands"])
        .output()
        .unwrap();
    let token = String::from_utf8(token.stdout).unwrap().trim().to_string();
    let port = base.rsplit(':').next().unwrap().to_string();

    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let http = cairn_llm::tls::client().unwrap();
        // A DNS-rebinding page: its own name, pointed at 127.0.0.1.
        let evil = format!("evil-rebind.test:{port}");
        let signed = http
            .post(format!("{base}/ui/session"))
            .header("Host", &evil)
            .header("Origin", format!("http://{evil}"))
            .json(&json!({"code": "ABCDE-FGHJK"}))
            .send()
            .await
            .unwrap();
        assert_eq!(signed.status(), 421);

        // Seventeen images in one /v1 request.
        let mut content = vec![json!({"type": "text", "text": "what?"})];
        let gif = "data:image/gif;base64,R0lGODlhAQABAAAAADs=";
        content.extend((0..17).map(|_| json!({"type": "image_url", "image_url": {"url": gif}})));
        let v1 = http
            .post(format!("{base}/v1/chat/completions"))
            .bearer_auth(&token)
            .json(&json!({"model": "cairn", "messages": [{"role": "user", "content": content}]}))
            .send()
            .await
            .unwrap();
        assert_eq!(v1.status(), 400);
        let body: Value = v1.json().await.unwrap();
        assert!(body.to_string().contains("gateway.max_images"), "{body}");

        // `/webhook` with the secret read from ${HANDS_HOOK_SECRET}.
        let message = br#"{"message":"hello"}"#;
        let send = |signature: Option<String>| {
            let mut request = http
                .post(format!("{base}/webhook"))
                .bearer_auth(&token)
                .header("Content-Type", "application/json")
                .body(message.to_vec());
            if let Some(s) = signature {
                request = request.header("X-Webhook-Signature", s);
            }
            request.send()
        };
        assert_eq!(send(None).await.unwrap().status(), 403);
        let wrong = cairn_automation::notify::channels::webhook::signature("guess", message);
        assert_eq!(send(Some(wrong)).await.unwrap().status(), 403);
        assert!(llm.requests().is_empty(), "nothing reached the agent");
        llm.push(Scripted::text("signed"));
        let right = cairn_automation::notify::channels::webhook::signature("hook-s3cret", message);
        let answered = send(Some(right)).await.unwrap();
        assert_eq!(answered.status(), 200);
        assert_eq!(
            answered.json::<Value>().await.unwrap()["response"],
            "signed"
        );
    });

    let ok = Command::new("kill")
        .args(["-TERM", &daemon.0.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok);
    assert!(daemon.0.wait().unwrap().success());
    reader.join().unwrap();
    let log = log.lock().unwrap().join("\n");
    assert!(log.contains("mcp?token=****"), "{log}");
    assert!(!log.contains(MARK), "the log carries a credential:\n{log}");
}
