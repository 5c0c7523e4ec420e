//! `type = "email"`: a real SMTP server (aiosmtpd) receives the message;
//! its headers and body, and the SMTP error mapping.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use cairn_automation::notify::channels::email::{Email, EmailSpec};
use serde_json::{Value, json};

use crate::{ID, channel, closed_url, notification, permanent, retryable, with_outcome};
use cairn_test_support::python::python;

/// The SMTP sink as a child process; killed when dropped.
struct Sink {
    child: Child,
    port: u16,
    out: tempfile::TempDir,
}

impl Sink {
    fn start(python: &Path) -> Sink {
        let out = tempfile::tempdir().unwrap();
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/channels/smtp_sink.py");
        let mut child = Command::new(python)
            .arg(script)
            .arg(out.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        // Wait for the line it prints once listening: no sleeping.
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .strip_prefix("PORT ")
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| panic!("the SMTP sink did not start (said {line:?}); is aiosmtpd in CAIRN_TEST_PYTHON's venv?"));
        Sink { child, port, out }
    }

    /// The `n`-th message received, as the sink parsed it.
    fn message(&self, n: usize) -> Value {
        let text = std::fs::read_to_string(self.out.path().join(format!("{n}.json"))).unwrap();
        serde_json::from_str(&text).unwrap()
    }

    fn received(&self) -> usize {
        std::fs::read_dir(self.out.path()).unwrap().count()
    }

    fn table(&self, to: Value) -> Value {
        json!({
            "type": "email",
            "host": "127.0.0.1",
            "port": self.port,
            "security": "none",
            "from": "Cairn <cairn@example.org>",
            "to": to,
        })
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn the_smtp_server_receives_the_message_with_its_id_and_confirms_with_250() {
    let Some(python) = python("email delivery") else {
        return;
    };
    let sink = Sink::start(&python);
    let mail = channel(sink.table(json!(["me@example.org", "Ops <ops@example.org>"])));
    let mut n = notification();
    n.title = "Disk almost full — /var".into();
    n.body = "/var is at 93 %.\nCafé closes at 18:00.".into();
    let receipt = mail.deliver(&n).await.unwrap();
    assert_eq!(receipt.detail, "250 2.0.0 Ok: queued as cairn-test-1");

    let got = sink.message(1);
    assert_eq!(got["mail_from"], "cairn@example.org");
    assert_eq!(
        got["rcpt_tos"],
        json!(["me@example.org", "ops@example.org"])
    );
    assert_eq!(got["from"], "Cairn <cairn@example.org>");
    assert_eq!(got["to"], "me@example.org, Ops <ops@example.org>");
    assert_eq!(got["subject"], "Disk almost full — /var");
    assert_eq!(got["message_id"], format!("<{ID}@cairn>"));
    assert_eq!(got["x_priority"], "2 (High)");
    assert_eq!(got["content_type"], "text/plain");
    assert_eq!(got["date_present"], true);
    // SMTP carries text as lines: the last one ends with a line break.
    assert_eq!(got["body"], "/var is at 93 %.\nCafé closes at 18:00.\n");
}

#[tokio::test]
async fn smtp_refusals_map_to_retryable_and_permanent() {
    let Some(python) = python("email refusals") else {
        return;
    };
    let sink = Sink::start(&python);
    let busy = retryable(
        channel(sink.table(json!("tempfail@example.org")))
            .deliver(&notification())
            .await,
    );
    assert!(busy.contains("451"), "{busy}");
    let unknown = permanent(
        channel(sink.table(json!("reject@example.org")))
            .deliver(&notification())
            .await,
    );
    assert!(unknown.contains("550"), "{unknown}");
    assert_eq!(sink.received(), 0);
}

#[tokio::test]
async fn a_server_that_is_not_there_is_retryable() {
    let port = closed_url()
        .rsplit(':')
        .next()
        .unwrap()
        .parse::<u16>()
        .unwrap();
    let table = json!({
        "type": "email",
        "host": "127.0.0.1",
        "port": port,
        "security": "none",
        "username": "cairn",
        "password": "pw-do-not-show",
        "from": "cairn@example.org",
        "to": "me@example.org",
    });
    let mail = channel(table.clone());
    let error = retryable(mail.deliver(&notification()).await);
    assert!(error.contains(&format!("127.0.0.1:{port}")), "{error}");
    assert!(!error.contains("pw-do-not-show"), "{error}");
    let mut fields = table;
    fields.as_object_mut().unwrap().remove("type");
    let spec: EmailSpec = serde_json::from_value(fields).unwrap();
    let debug = format!("{:?}", Email::new(&spec).unwrap());
    assert!(!debug.contains("pw-do-not-show"), "{debug}");
}

#[tokio::test]
async fn the_subject_starts_with_the_outcome_marker() {
    let Some(python) = python("email subject marker") else {
        return;
    };
    let sink = Sink::start(&python);
    channel(sink.table(json!("me@example.org")))
        .deliver(&with_outcome("attention"))
        .await
        .unwrap();
    assert_eq!(sink.message(1)["subject"], "🔔 Disk almost full");
}
