//! The dashboard served by `cairn daemon`, as a person meets it: `cairn
//! pair` prints a code, the browser signs in with it, `cairn token list`
//! shows the session and `cairn token revoke` ends it; the status page's
//! checks are `cairn doctor`'s and the costs page shows the configured
//! budget.
#![expect(clippy::unwrap_used, reason = "test code unwraps freely")]
#![expect(
    clippy::disallowed_methods,
    reason = "test fixtures may use blocking std::fs"
)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use cairn_llm::testing::FakeLlmServer;
use serde_json::{Value, json};

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

#[test]
fn a_paired_browser_session_is_a_token_the_cli_lists_and_revokes() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        "[cost]\ndaily_budget_cents = 500\n",
    )
    .unwrap();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    let mut cmd = cairn(home.path(), &llm);
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

    let printed = stdout(cairn(home.path(), &llm).arg("pair"));
    let code = printed
        .split("pairing code: ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap()
        .to_string();

    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let http = cairn_llm::tls::client().unwrap();
        let page = http.get(format!("{base}/")).send().await.unwrap();
        assert_eq!(page.status(), 200);
        assert!(
            page.headers()["content-security-policy"]
                .to_str()
                .unwrap()
                .contains("default-src 'self'")
        );
        let signed = http
            .post(format!("{base}/ui/session"))
            .header("Origin", &base)
            .json(&json!({"code": code}))
            .send()
            .await
            .unwrap();
        assert_eq!(signed.status(), 200);
        let cookie = signed.headers()["set-cookie"]
            .to_str()
            .unwrap()
            .split(';')
            .next()
            .unwrap()
            .to_string();
        let session: Value = signed.json().await.unwrap();
        let name = session["name"].as_str().unwrap().to_string();

        let get = |path: &str| {
            http.get(format!("{base}{path}"))
                .header("Cookie", &cookie)
                .send()
        };
        let doctor: Value = get("/ui/api/doctor").await.unwrap().json().await.unwrap();
        let checks = doctor["checks"].as_array().unwrap();
        let database = checks.iter().find(|c| c["name"] == "database").unwrap();
        assert_eq!(database["status"], "ok", "{doctor}");
        let costs: Value = get("/ui/api/costs").await.unwrap().json().await.unwrap();
        assert_eq!(costs["limits"]["daily_budget_cents"], 500, "{costs}");
        assert_eq!(costs["days"].as_array().unwrap().len(), 30);

        let listed = stdout(cairn(home.path(), &llm).args(["token", "list", "--json"]));
        let tokens: Vec<Value> = serde_json::from_str(&listed).unwrap();
        let row = tokens.iter().find(|t| t["name"] == name.as_str()).unwrap();
        assert_eq!(row["origin"], "dashboard");

        stdout(cairn(home.path(), &llm).args(["token", "revoke", &name]));
        assert_eq!(get("/api/status").await.unwrap().status(), 401);
    });
}
