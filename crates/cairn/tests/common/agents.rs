//! The harness of the several-agents tests (`[[agents]]`): the `cairn`
//! binary over a fake LLM, a daemon with a token, requests to its gateway.

use std::io::BufRead;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use cairn_llm::testing::FakeLlmServer;
use serde_json::{Value, json};

/// A `cairn daemon` child, killed when dropped.
pub struct Daemon(pub Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The `cairn` binary with a home and the fake LLM (model `test-model`).
pub fn cairn(home: &Path, llm: &FakeLlmServer) -> Command {
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

/// `cairn daemon` on a free port, and a token: `(daemon, base URL, token)`.
pub fn daemon(home: &Path, llm: &FakeLlmServer) -> (Daemon, String, String) {
    daemon_with(cairn(home, llm), home, llm)
}

/// [`daemon`] from a `cairn` command the caller prepared (more variables).
pub fn daemon_with(mut cmd: Command, home: &Path, llm: &FakeLlmServer) -> (Daemon, String, String) {
    cmd.arg("daemon")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
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
    let out = cairn(home, llm)
        .args(["token", "create", "--name", "t"])
        .output()
        .unwrap();
    let token = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (daemon, base, token)
}

/// A request to the gateway: `(status, JSON body)`.
pub fn call(base: &str, token: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let client = cairn_llm::tls::client().unwrap();
        let request = match body {
            Some(body) => client.post(format!("{base}{path}")).json(&body),
            None => client.get(format!("{base}{path}")),
        };
        let response = request.bearer_auth(token).send().await.unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or_default())
    })
}

/// `/v1/chat/completions` asking `model` who it is.
pub fn ask(base: &str, token: &str, model: &str) -> (u16, Value) {
    let body = json!({"model": model, "messages": [{"role": "user", "content": "who are you?"}]});
    call(base, token, "/v1/chat/completions", Some(body))
}

/// The system messages of a model request, as one string.
pub fn system(body: &Value) -> String {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "system")
        .map(|m| m["content"].to_string())
        .collect()
}

/// The names of the tools a model request offers.
pub fn tools(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}
