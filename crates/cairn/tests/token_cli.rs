//! Black-box tests of `cairn token` and `cairn pair` against a running
//! `cairn daemon` on the same database: a created token authenticates, a
//! revoked one is refused on the next request, and a code printed by
//! either command buys a token over `POST /pair`.
#![expect(clippy::unwrap_used, reason = "test code unwraps freely")]
#![expect(
    clippy::disallowed_methods,
    reason = "test fixtures may use blocking std::io"
)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use assert_cmd::Command;
use predicates::str::contains;
use serde_json::Value;

fn command(home: &std::path::Path) -> std::process::Command {
    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("cairn"));
    cmd.env_clear()
        .env("CAIRN_HOME", home)
        .env("CAIRN_TIMEZONE", "UTC")
        .env("CAIRN_GATEWAY_PORT", "0");
    cmd
}

fn cairn(home: &std::path::Path) -> Command {
    Command::from_std(command(home))
}

/// One HTTP/1.1 request; the status code and body.
fn http(addr: &str, request: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    let status = text
        .split(' ')
        .nth(1)
        .unwrap_or_else(|| panic!("no answer to {request:?}: {text:?}"))
        .parse()
        .unwrap();
    let body = text
        .split("\r\n\r\n")
        .nth(1)
        .unwrap_or_default()
        .to_string();
    (status, body)
}

fn metrics_status(addr: &str, token: &str) -> u16 {
    http(
        addr,
        &format!("GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"),
    )
    .0
}

fn pair(addr: &str, code: &str) -> (u16, String) {
    http(
        addr,
        &format!(
            // The gateway's own address: pairing answers no other host name.
            "POST /pair HTTP/1.1\r\nHost: {addr}\r\nX-Pairing-Code: {code}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        ),
    )
}

/// The code in a `pairing code: ABCDE-FGHJK (…)` line.
fn code_in(line: &str) -> String {
    let code = line.split("pairing code: ").nth(1).unwrap()[..11].to_string();
    assert_eq!(&code[5..6], "-", "{line}");
    assert!(
        code.bytes()
            .all(|b| b == b'-' || b.is_ascii_uppercase() || b.is_ascii_digit()),
        "{line}"
    );
    code
}

/// The code `cairn pair` prints for `home`.
fn cairn_pair(home: &std::path::Path) -> String {
    let out = cairn(home)
        .arg("pair")
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    code_in(&String::from_utf8(out).unwrap())
}

struct Daemon {
    child: Child,
    addr: String,
    /// The code printed at start; `None` when the daemon said to run `cairn pair`.
    code: Option<String>,
    /// The start-up line about pairing.
    pairing: String,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_daemon(home: &std::path::Path) -> Daemon {
    let mut child = command(home)
        .arg("daemon")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { return };
            // Keep draining after the test stops listening: a closed pipe
            // would make the daemon's next log line fail.
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let (mut addr, mut pairing) = (None, None);
    while addr.is_none() || pairing.is_none() {
        let line = rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("the daemon printed its address and how to pair");
        if let Some(a) = line.strip_prefix("gateway listening on http://") {
            addr = Some(a.trim().to_string());
        } else if line.starts_with("pairing code: ") {
            assert!(line.contains("valid 15 min"), "{line}");
            pairing = Some(line);
        } else if line.contains("`cairn pair`") {
            pairing = Some(line);
        }
    }
    let pairing = pairing.unwrap();
    Daemon {
        child,
        addr: addr.unwrap(),
        code: pairing
            .starts_with("pairing code: ")
            .then(|| code_in(&pairing)),
        pairing,
    }
}

#[test]
fn tokens_are_created_listed_and_revoked() {
    let home = tempfile::tempdir().unwrap();
    let out = cairn(home.path())
        .args(["token", "create", "--name", "ci", "--ttl", "30d"])
        .assert()
        .success()
        .get_output()
        .clone();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let token = stdout.trim_end().to_string();
    assert_eq!(stdout, format!("{token}\n"), "the token alone on stdout");
    assert!(token.starts_with("cairn_"), "{token}");

    cairn(home.path())
        .args(["token", "create", "--name", "ci"])
        .assert()
        .code(2)
        .stderr(contains("already exists"));
    cairn(home.path())
        .args(["token", "create", "--name", "bad", "--ttl", "soon"])
        .assert()
        .code(2)
        .stderr(contains("--ttl"));

    let listed = cairn(home.path())
        .args(["token", "list", "--json"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let listed: Value = serde_json::from_slice(&listed).unwrap();
    let ci = &listed.as_array().unwrap()[0];
    assert_eq!(ci["name"], "ci");
    assert_eq!(ci["origin"], "cli");
    assert!(ci["expires_at"].is_string(), "{ci}");
    assert!(ci["revoked_at"].is_null(), "{ci}");
    assert!(!listed.to_string().contains("token_hash"), "{listed}");
    assert!(!listed.to_string().contains(&token[6..]), "{listed}");
    cairn(home.path())
        .args(["token", "list"])
        .assert()
        .success()
        .stdout(contains("NAME"))
        .stdout(contains("LAST USED"))
        .stdout(contains("ci"));

    let daemon = start_daemon(home.path());
    // A token exists, so no code is given out at start.
    assert_eq!(daemon.code, None, "{}", daemon.pairing);
    assert_eq!(metrics_status(&daemon.addr, &token), 200);
    cairn(home.path())
        .args(["token", "revoke", "ci"])
        .assert()
        .success()
        .stdout(contains("revoked"));
    assert_eq!(metrics_status(&daemon.addr, &token), 401);
    cairn(home.path())
        .args(["token", "revoke", "ci"])
        .assert()
        .code(2)
        .stderr(contains("no live token named \"ci\""));
}

#[test]
fn codes_from_the_daemon_and_from_cairn_pair_buy_tokens() {
    let home = tempfile::tempdir().unwrap();
    let daemon = start_daemon(home.path());
    let first = daemon.code.clone().expect("a first start gives a code");
    let (status, body) = pair(&daemon.addr, &first);
    assert_eq!(status, 200, "{body}");
    let paired: Value = serde_json::from_str(&body).unwrap();
    let token = paired["token"].as_str().unwrap();
    assert_eq!(metrics_status(&daemon.addr, token), 200);

    // `cairn pair` writes a code into the database the running daemon reads.
    let code = cairn_pair(home.path());
    let (status, body) = pair(&daemon.addr, &code);
    assert_eq!(status, 200, "{body}");
    // Spent.
    assert_eq!(pair(&daemon.addr, &code).0, 401);

    let listed = cairn(home.path())
        .args(["token", "list", "--json"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let listed: Value = serde_json::from_slice(&listed).unwrap();
    let tokens = listed.as_array().unwrap();
    assert_eq!(tokens.len(), 2);
    assert!(tokens.iter().all(|t| t["origin"] == "pairing"
        && t["name"].as_str().unwrap().starts_with("paired-")));
}

#[test]
fn a_code_is_printed_at_start_only_until_something_is_paired() {
    use std::os::unix::fs::PermissionsExt;
    let home = tempfile::tempdir().unwrap();
    let daemon = start_daemon(home.path());
    let code = daemon.code.clone().expect("nothing paired yet: a code");
    // The code is hashed with the install key, kept private in the home.
    let key = std::fs::metadata(home.path().join("install.key")).unwrap();
    assert_eq!((key.len(), key.permissions().mode() & 0o777), (32, 0o600));
    drop(daemon);
    // Restarted before anyone paired: a code again.
    let daemon = start_daemon(home.path());
    let code = daemon.code.clone().unwrap_or(code);
    assert_eq!(pair(&daemon.addr, &code).0, 200);
    drop(daemon);
    // Once a device paired, a start gives no code, only the way to get one.
    let daemon = start_daemon(home.path());
    assert_eq!(daemon.code, None, "{}", daemon.pairing);
    assert!(
        daemon.pairing.contains("`cairn pair`"),
        "{}",
        daemon.pairing
    );
    // `cairn pair` of the same home still works for it (same install key),
    // in lower case and without the dash too.
    let code = cairn_pair(home.path()).replace('-', "").to_lowercase();
    assert_eq!(pair(&daemon.addr, &code).0, 200);
}
