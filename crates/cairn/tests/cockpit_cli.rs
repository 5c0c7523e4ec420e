//! The CLI as a person's daily cockpit (issue 48): `doctor` contacts the
//! LLM, the daemon's first lines say where its dashboard is, a routine is
//! made without YAML, and one inbox item is shown by the id listed.
#![expect(
    clippy::unwrap_used,
    clippy::disallowed_methods,
    reason = "test code unwraps freely and may use blocking std::fs"
)]

mod common;

use std::io::BufRead;
use std::process::Stdio;
use std::time::{Duration, Instant};

use cairn_llm::testing::FakeLlmServer;
use common::agents::{Daemon, cairn};

/// `(exit code, stdout)` of a command.
fn run(cmd: &mut std::process::Command) -> (Option<i32>, String) {
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    (out.status.code(), format!("{stdout}{stderr}"))
}

/// The lines of doctor's `llm` check (its own and those continuing it).
fn llm_check(report: &str) -> String {
    let mut lines = report.lines().skip_while(|l| !l.contains(" llm "));
    let mut out: Vec<&str> = lines.next().into_iter().collect();
    out.extend(lines.take_while(|l| l.starts_with("      ")));
    out.join("\n")
}

/// A port nothing listens on (bound, then let go).
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[test]
fn doctor_contacts_the_llm_and_says_what_failed() {
    let temp = tempfile::tempdir().unwrap();
    let home = temp.path();
    let llm = FakeLlmServer::start_on_thread().unwrap();

    // It answers, but does not serve the model configured: a warning.
    let (code, report) = run(cairn(home, &llm).arg("doctor"));
    let check = llm_check(&report);
    assert_eq!(code, Some(0), "{report}");
    assert!(check.starts_with("warn  llm"), "{check}");
    assert!(
        check.contains("test-model is not among the 1 models it lists (e.g. fake-model)"),
        "{check}"
    );

    llm.set_models(vec![cairn_llm::ModelInfo::new("test-model")], None);
    let (code, report) = run(cairn(home, &llm).arg("doctor"));
    let check = llm_check(&report);
    assert_eq!(code, Some(0), "{report}");
    assert!(check.starts_with("ok    llm"), "{check}");
    assert!(
        check.contains("primary openai at http://127.0.0.1:")
            && check.contains("serves test-model"),
        "{check}"
    );

    llm.fail_models(401, "invalid api key");
    let (code, report) = run(cairn(home, &llm).arg("doctor"));
    let check = llm_check(&report);
    assert_eq!(code, Some(1), "{report}");
    assert!(check.starts_with("FAIL  llm"), "{check}");
    assert!(
        check.contains("the API key was refused (HTTP 401)"),
        "{check}"
    );
    assert!(!check.contains("sk-test-0123456789"), "{check}");

    let port = closed_port();
    let (code, report) = run(cairn(home, &llm)
        .env("CAIRN_LLM_BASE_URL", format!("http://127.0.0.1:{port}/v1"))
        .arg("doctor"));
    let check = llm_check(&report);
    assert_eq!(code, Some(1), "{report}");
    assert!(check.starts_with("FAIL  llm"), "{check}");
    assert!(
        check.contains(&format!("connection refused at 127.0.0.1:{port}")),
        "{check}"
    );

    // Offline, the settings are checked and nothing is contacted.
    let asked = llm.requests().len();
    let (code, report) = run(cairn(home, &llm).args(["doctor", "--offline"]));
    assert_eq!(llm.requests().len(), asked, "--offline contacted the LLM");
    let check = llm_check(&report);
    assert_eq!(code, Some(0), "{report}");
    assert!(check.contains("(not contacted)"), "{check}");
}

#[test]
fn a_failover_provider_is_contacted_too() {
    let temp = tempfile::tempdir().unwrap();
    let home = temp.path();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    llm.set_models(vec![cairn_llm::ModelInfo::new("test-model")], None);
    let port = closed_port();
    std::fs::write(
        home.join("config.toml"),
        format!(
            "[[llm.fallbacks]]\nprovider = \"openai\"\nmodel = \"backup\"\nbase_url = \"http://127.0.0.1:{port}/v1\"\n"
        ),
    )
    .unwrap();
    let (code, report) = run(cairn(home, &llm).arg("doctor"));
    let check = llm_check(&report);
    assert_eq!(code, Some(1), "{report}");
    assert!(check.contains("serves test-model"), "{check}");
    assert!(
        check.contains(&format!(
            "fallback 1 openai at http://127.0.0.1:{port}/v1, model backup: connection refused at 127.0.0.1:{port}"
        )),
        "{check}"
    );
}

#[test]
fn the_daemons_first_lines_name_the_dashboard_and_the_pairing_code() {
    let temp = tempfile::tempdir().unwrap();
    let home = temp.path();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    let mut cmd = cairn(home, &llm);
    cmd.arg("daemon")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut daemon = Daemon(cmd.spawn().unwrap());
    let stderr = std::io::BufReader::new(daemon.0.stderr.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut lines = Vec::new();
    while !lines
        .iter()
        .any(|l: &String| l.starts_with("cairn daemon running"))
    {
        let wait = deadline.saturating_duration_since(Instant::now());
        lines.push(rx.recv_timeout(wait).expect("the daemon started"));
    }
    let at = |prefix: &str| {
        lines
            .iter()
            .position(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix:?} line in {lines:#?}"))
    };
    let (dashboard, pairing) = (at("dashboard: http://127.0.0.1:"), at("pairing code: "));
    // First: only the log lines of the home, the sandbox and a first
    // migration precede; the pairing code follows (after the install
    // key's line on a first start).
    assert!(dashboard < 6, "{lines:#?}");
    assert!(
        pairing > dashboard && pairing <= dashboard + 2,
        "{lines:#?}"
    );
    let url = lines[dashboard]["dashboard: ".len()..].trim().to_string();
    let listening = &lines[at("gateway listening on ")];
    assert_eq!(
        format!("{}/", listening["gateway listening on ".len()..].trim()),
        url
    );
    let page = tokio::runtime::Runtime::new().unwrap().block_on(async {
        let client = cairn_llm::tls::client().unwrap();
        let response = client.get(&url).send().await.unwrap();
        (response.status().as_u16(), response.text().await.unwrap())
    });
    assert_eq!(page.0, 200, "{}", page.1);
    assert!(page.1.contains("<html"), "{}", page.1);
}
