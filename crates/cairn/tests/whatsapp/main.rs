//! Inbound WhatsApp, black-box: `cairn daemon` with its gateway receiving
//! Meta's webhooks (signed here as Meta signs them), a local Graph API
//! stand-in (real HTTP on 127.0.0.1) and the fake LLM server.
#![expect(
    clippy::unwrap_used,
    clippy::disallowed_methods,
    reason = "test code unwraps freely and may use blocking std::fs"
)]

mod standin;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cairn_llm::testing::{FakeLlmServer, Scripted};
use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Value, json};
use sha2::Sha256;
use standin::{PHONE_ID, StandIn, TOKEN, World, texts};

const OWNER: &str = "15551234567";
const STRANGER: &str = "15559990000";
const VERIFY_TOKEN: &str = "verify-me-4711";
const APP_SECRET: &str = "app-secret-0815";

struct Home {
    dir: PathBuf,
    _temp: tempfile::TempDir,
    api_url: String,
    llm_url: String,
}

/// A running daemon and its gateway's address.
struct Daemon {
    child: Child,
    base: String,
    /// Its log, as it came.
    lines: Arc<Mutex<Vec<String>>>,
    rt: tokio::runtime::Runtime,
    http: reqwest::Client,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Home {
    fn new(standin: &StandIn, llm: &FakeLlmServer) -> Home {
        let temp = tempfile::tempdir().unwrap();
        let home = Home {
            dir: temp.path().to_path_buf(),
            _temp: temp,
            api_url: standin.url.clone(),
            llm_url: llm.base_url_openai(),
        };
        let config = format!(
            "[channels.wa]\ntype = \"whatsapp\"\naccess_token = \"${{WHATSAPP_TOKEN}}\"\n\
             phone_number_id = \"{PHONE_ID}\"\nverify_token = \"${{WHATSAPP_VERIFY_TOKEN}}\"\n\
             app_secret = \"${{WHATSAPP_APP_SECRET}}\"\ninbound = true\n\
             allowed_users = [\"{OWNER}\"]\napi_url = \"{}\"\n",
            home.api_url
        );
        std::fs::write(home.dir.join("config.toml"), config).unwrap();
        home
    }

    fn cmd(&self) -> Command {
        let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("cairn"));
        cmd.env_clear()
            .env("CAIRN_HOME", &self.dir)
            .env("CAIRN_GATEWAY_PORT", "0")
            .env("CAIRN_LLM_PROVIDER", "openai")
            .env("CAIRN_LLM_BASE_URL", &self.llm_url)
            .env("CAIRN_LLM_MODEL", "test-model")
            .env("CAIRN_LLM_API_KEY", "sk-test-0123456789")
            .env("CAIRN_LLM_MAX_RETRIES", "0")
            .env("WHATSAPP_TOKEN", TOKEN)
            .env("WHATSAPP_VERIFY_TOKEN", VERIFY_TOKEN)
            .env("WHATSAPP_APP_SECRET", APP_SECRET);
        cmd
    }

    /// Starts the daemon and waits until its WhatsApp channel answers
    /// Meta's verification.
    fn daemon(&self) -> Daemon {
        let mut cmd = self.cmd();
        cmd.arg("daemon")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let stderr = BufReader::new(child.stderr.take().unwrap());
        let (tx, rx) = std::sync::mpsc::channel();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&lines);
        std::thread::spawn(move || {
            for line in stderr.lines().map_while(Result::ok) {
                log.lock().unwrap().push(line.clone());
                if let Some(at) = line.split("gateway listening on ").nth(1) {
                    let _ = tx.send(at.trim().to_string());
                }
            }
        });
        let base = rx.recv_timeout(Duration::from_secs(30)).unwrap();
        let daemon = Daemon {
            child,
            base,
            lines,
            rt: tokio::runtime::Runtime::new().unwrap(),
            http: cairn_llm::tls::client().unwrap(),
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while daemon.verify("/whatsapp", "subscribe", VERIFY_TOKEN).0 != 200 {
            assert!(
                std::time::Instant::now() < deadline,
                "the channel never registered"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        daemon
    }
}

impl Daemon {
    /// Meta's verification request: (status, body, content type).
    fn verify(&self, path: &str, mode: &str, token: &str) -> (u16, String, String) {
        let url = format!("{}{path}", self.base);
        let query = [
            ("hub.mode", mode),
            ("hub.verify_token", token),
            ("hub.challenge", "1158201444"),
        ];
        self.rt.block_on(async {
            let r = self.http.get(url).query(&query).send().await.unwrap();
            let kind = r
                .headers()
                .get("content-type")
                .map(|v| v.to_str().unwrap().to_string())
                .unwrap_or_default();
            (r.status().as_u16(), r.text().await.unwrap(), kind)
        })
    }

    /// POSTs `body` to `/whatsapp` with `signature` (none when `None`).
    fn post(&self, body: &[u8], signature: Option<String>) -> u16 {
        let mut request = self
            .http
            .post(format!("{}/whatsapp", self.base))
            .header("content-type", "application/json")
            .body(body.to_vec());
        if let Some(s) = signature {
            request = request.header("X-Hub-Signature-256", s);
        }
        self.rt
            .block_on(async { request.send().await.unwrap().status().as_u16() })
    }

    /// Delivers `messages` as Meta does: signed with the app secret.
    fn deliver(&self, messages: Vec<Value>) {
        let body = payload(messages);
        assert_eq!(self.post(&body, Some(sign(APP_SECRET, &body))), 200);
    }

    fn stop(mut self) {
        let ok = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok);
        let status = self.child.wait().unwrap();
        assert!(status.success(), "the daemon exited with {status}");
    }
}

/// `sha256=<hex HMAC-SHA256(secret, body)>`, as Meta signs a webhook.
fn sign(secret: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(body);
    let hex: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256={hex}")
}

/// A `messages` webhook as Meta sends it.
fn payload(messages: Vec<Value>) -> Vec<u8> {
    let contacts: Vec<Value> = messages
        .iter()
        .map(|m| json!({"profile": {"name": "P"}, "wa_id": m["from"]}))
        .collect();
    serde_json::to_vec(&json!({
        "object": "whatsapp_business_account",
        "entry": [{"id": "102290129340398", "changes": [{"field": "messages", "value": {
            "messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "15550783881", "phone_number_id": PHONE_ID},
            "contacts": contacts,
            "messages": messages,
        }}]}],
    }))
    .unwrap()
}

fn text(from: &str, id: &str, body: &str) -> Value {
    json!({"from": from, "id": id, "timestamp": "1750000000", "type": "text", "text": {"body": body}})
}

fn button(from: &str, id: &str, button: &str, context: &str) -> Value {
    json!({"from": from, "id": id, "timestamp": "1750000000", "type": "interactive",
        "context": {"from": "15550783881", "id": context},
        "interactive": {"type": "button_reply", "button_reply": {"id": button, "title": "Approve"}}})
}

/// The person's messages the LLM was sent, in order (the last user
/// message of each request).
fn asked(llm: &FakeLlmServer) -> Vec<String> {
    llm.requests()
        .iter()
        .filter_map(|r| {
            r.body["messages"]
                .as_array()?
                .iter()
                .rev()
                .find(|m| m["role"] == "user")
                .map(|m| match &m["content"] {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
        })
        .collect()
}

fn answered(w: &World, to: &str, text: &str) -> bool {
    texts(w, to).iter().any(|t| t == text)
}

#[test]
fn verification_and_signatures_guard_the_webhook() {
    let standin = StandIn::start();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    let home = Home::new(&standin, &llm);
    let daemon = home.daemon();
    // Verification: the challenge, as text, for the verify token only.
    for path in ["/whatsapp", "/whatsapp/wa"] {
        let (status, body, kind) = daemon.verify(path, "subscribe", VERIFY_TOKEN);
        assert_eq!((status, body.as_str()), (200, "1158201444"), "{path}");
        assert!(kind.starts_with("text/plain"), "{kind}");
    }
    assert_eq!(
        daemon.verify("/whatsapp", "subscribe", "verify-me-4712").0,
        403
    );
    assert_eq!(daemon.verify("/whatsapp", "subscribe", "").0, 403);
    assert_eq!(
        daemon.verify("/whatsapp", "unsubscribe", VERIFY_TOKEN).0,
        403
    );
    assert_eq!(
        daemon
            .verify("/whatsapp/other", "subscribe", VERIFY_TOKEN)
            .0,
        404
    );
    // Deliveries without the app secret's signature reach nothing.
    let body = payload(vec![text(OWNER, "wamid.bad", "unsigned hello")]);
    assert_eq!(daemon.post(&body, None), 401);
    assert_eq!(daemon.post(&body, Some("sha256=00ff".into())), 401);
    assert_eq!(daemon.post(&body, Some(sign("another secret", &body))), 401);
    let other = payload(vec![text(OWNER, "wamid.bad", "another body")]);
    assert_eq!(daemon.post(&body, Some(sign(APP_SECRET, &other))), 401);
    // The same message, signed: answered (so the refused ones were not lost
    // to a slow daemon, they were refused).
    llm.push(Scripted::text("signed and answered"));
    assert_eq!(daemon.post(&body, Some(sign(APP_SECRET, &body))), 200);
    standin.until("the answer", |w| answered(w, OWNER, "signed and answered"));
    assert_eq!(asked(&llm), ["unsigned hello"]);
    assert_eq!(standin.texts(OWNER), ["signed and answered"]);
    daemon.stop();
}

#[test]
fn an_allowed_users_message_is_answered_and_a_strangers_never_reaches_the_llm() {
    let standin = StandIn::start();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    llm.push(Scripted::text("Hello from **cairn**"));
    let home = Home::new(&standin, &llm);
    let daemon = home.daemon();
    daemon.deliver(vec![text(STRANGER, "wamid.s1", "hi, run rm -rf for me")]);
    daemon.deliver(vec![text(STRANGER, "wamid.s2", "hello?")]);
    daemon.deliver(vec![text(OWNER, "wamid.o1", "hello")]);
    // The answer goes to the same number, in WhatsApp's markers.
    standin.until("the answer", |w| answered(w, OWNER, "Hello from *cairn*"));
    // Progress as reactions on the person's message: 👀, then ✅.
    let reactions = |w: &World| -> Vec<String> {
        w.sent
            .iter()
            .filter(|(to, kind, b)| {
                to == OWNER && kind == "reaction" && b["reaction"]["message_id"] == "wamid.o1"
            })
            .map(|(_, _, b)| b["reaction"]["emoji"].as_str().unwrap().to_string())
            .collect()
    };
    standin.until("the reactions", |w| reactions(w).len() == 2);
    assert_eq!(standin.world(reactions), ["👀", "✅"]);
    // The stranger was told once, with their number and the command.
    let told = standin.texts(STRANGER);
    assert_eq!(told.len(), 1, "{told:?}");
    assert!(
        told[0].contains("cairn channel allow wa 15559990000"),
        "{}",
        told[0]
    );
    assert_eq!(asked(&llm), ["hello"]);
    // Nothing the stranger wrote reached the disk (the database included).
    for file in files(&home.dir) {
        let bytes = std::fs::read(&file).unwrap_or_default();
        let found = bytes.windows(13).any(|w| w == b"rm -rf for me");
        assert!(!found, "the stranger's text is in {}", file.display());
    }

    // A document goes to the workspace's inbox/ and is named in the message.
    llm.push(Scripted::text("Got the file"));
    daemon.deliver(vec![json!({"from": OWNER, "id": "wamid.o2", "timestamp": "1750000001", "type": "document",
        "document": {"id": "MEDIA1", "filename": "notes.txt", "mime_type": "text/plain", "sha256": "00", "caption": "read this"}})]);
    standin.until("the document's answer", |w| {
        answered(w, OWNER, "Got the file")
    });
    let last = asked(&llm).pop().unwrap();
    assert!(
        last.contains("read this") && last.contains("inbox/notes.txt"),
        "{last}"
    );
    let saved = std::fs::read_to_string(home.dir.join("workspace/inbox/notes.txt")).unwrap();
    assert_eq!(saved, "hello from a document");
    assert_eq!(standin.world(|w| w.media.clone()), ["MEDIA1"]);

    // An image is fetched by id and reaches the model as an image.
    llm.push(Scripted::text("A tiny image"));
    daemon.deliver(vec![json!({"from": OWNER, "id": "wamid.o3", "timestamp": "1750000002", "type": "image",
        "image": {"id": "IMG1", "mime_type": "image/png", "sha256": "00", "caption": "what is this?"}})]);
    standin.until("the image's answer", |w| answered(w, OWNER, "A tiny image"));
    let last = asked(&llm).pop().unwrap();
    assert!(
        last.contains("what is this?") && last.contains("data:image/png;base64,"),
        "{last}"
    );
    daemon.stop();
}

#[test]
fn a_changed_table_restarts_the_channel_with_its_new_secrets() {
    let standin = StandIn::start();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    let home = Home::new(&standin, &llm);
    let daemon = home.daemon();
    let running = |lines: &Vec<String>| lines.iter().any(|l| l.starts_with("cairn daemon running"));
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !running(&daemon.lines.lock().unwrap()) {
        assert!(std::time::Instant::now() < deadline, "the daemon never ran");
        std::thread::sleep(Duration::from_millis(50));
    }
    let config = std::fs::read_to_string(home.dir.join("config.toml")).unwrap();
    let changed = config.replace("${WHATSAPP_APP_SECRET}", "a-new-secret");
    std::fs::write(home.dir.join("config.toml"), changed).unwrap();
    // Told, in case the file watch is not yet looking.
    let pid = daemon.child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-HUP", &pid])
            .status()
            .unwrap()
            .success()
    );
    // Its log says when the channel started again (polling with requests
    // would count as failed authentications).
    let started = |lines: &Vec<String>| {
        lines
            .iter()
            .filter(|l| l.contains("receiving WhatsApp webhooks"))
            .count()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while started(&daemon.lines.lock().unwrap()) < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the channel never restarted: {:?}",
            daemon.lines.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let body = payload(vec![text(OWNER, "wamid.r1", "after the change")]);
    llm.push(Scripted::text("new secret, same channel"));
    // The old secret no longer works; the new one is the channel's.
    assert_eq!(daemon.post(&body, Some(sign(APP_SECRET, &body))), 401);
    assert_eq!(daemon.post(&body, Some(sign("a-new-secret", &body))), 200);
    standin.until("the answer", |w| {
        answered(w, OWNER, "new secret, same channel")
    });
    assert_eq!(asked(&llm), ["after the change"]);
    daemon.stop();
}

/// Every file under `dir`.
fn files(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().map_while(Result::ok) {
        let path = entry.path();
        if path.is_dir() {
            out.extend(files(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[test]
fn a_message_delivered_again_is_answered_once_even_after_a_restart() {
    let standin = StandIn::start();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    let home = Home::new(&standin, &llm);
    let daemon = home.daemon();
    llm.push(Scripted::text("answer one"));
    daemon.deliver(vec![text(OWNER, "wamid.1", "one")]);
    standin.until("answer one", |w| answered(w, OWNER, "answer one"));
    // Meta delivers it again (it doubted the first delivery arrived).
    daemon.deliver(vec![text(OWNER, "wamid.1", "one")]);
    llm.push(Scripted::text("answer two"));
    daemon.deliver(vec![text(OWNER, "wamid.2", "two")]);
    standin.until("answer two", |w| answered(w, OWNER, "answer two"));
    daemon.stop();
    // A restarted daemon hears both again: neither is answered twice.
    let daemon = home.daemon();
    daemon.deliver(vec![
        text(OWNER, "wamid.1", "one"),
        text(OWNER, "wamid.2", "two"),
    ]);
    llm.push(Scripted::text("answer three"));
    daemon.deliver(vec![text(OWNER, "wamid.3", "three")]);
    standin.until("answer three", |w| answered(w, OWNER, "answer three"));
    assert_eq!(asked(&llm), ["one", "two", "three"]);
    assert_eq!(
        standin.texts(OWNER),
        ["answer one", "answer two", "answer three"]
    );
    daemon.stop();
}

#[test]
fn an_approval_pressed_as_a_button_runs_the_tool_and_a_denial_does_not() {
    let standin = StandIn::start();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    let home = Home::new(&standin, &llm);
    let daemon = home.daemon();
    let note = home.dir.join("workspace/note.txt");
    let write = |content: &str| {
        Scripted::tool_call(
            "write_file",
            json!({"path": "note.txt", "content": content}),
        )
    };
    let request = |n: usize| {
        standin.until("the approval request", |w| {
            w.sent.iter().filter(|(_, k, _)| k == "interactive").count() == n
        });
        let sent = standin.world(|w| w.sent.clone());
        let index = sent
            .iter()
            .enumerate()
            .filter(|(_, (_, k, _))| k == "interactive")
            .map(|(i, _)| i)
            .nth(n - 1)
            .unwrap();
        // Its id is the stand-in's numbering of the messages sent.
        let id = format!("wamid.out.{}", index + 1);
        let buttons: Vec<(String, String)> = sent[index].2["interactive"]["action"]["buttons"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| {
                (
                    b["reply"]["title"].as_str().unwrap().to_string(),
                    b["reply"]["id"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        assert_eq!(sent[index].2["interactive"]["type"], "button");
        (id, buttons)
    };

    // Denied: the tool does not run; the decision follows as a reply.
    llm.push(write("denied"));
    llm.push(Scripted::text("Not written."));
    daemon.deliver(vec![text(OWNER, "wamid.a1", "write the note")]);
    let (id, buttons) = request(1);
    let titles: Vec<&str> = buttons.iter().map(|b| b.0.as_str()).collect();
    assert_eq!(titles, ["Approve", "Deny", "Always"]);
    // A stranger's press decides nothing.
    daemon.deliver(vec![button(STRANGER, "wamid.p0", &buttons[0].1, &id)]);
    standin.until("the stranger's refusal", |w| {
        answered(w, STRANGER, "You are not allowed to answer this.")
    });
    daemon.deliver(vec![button(OWNER, "wamid.p1", &buttons[1].1, &id)]);
    standin.until("the answer", |w| answered(w, OWNER, "Not written."));
    assert!(!note.exists());
    let decision = standin
        .sent(OWNER, "text")
        .into_iter()
        .find(|m| m["text"]["body"].as_str().unwrap().starts_with("❌ Denied"))
        .unwrap();
    assert_eq!(decision["context"]["message_id"], id.as_str());

    // Approved: the tool runs.
    llm.push(write("approved"));
    llm.push(Scripted::text("Written."));
    daemon.deliver(vec![text(OWNER, "wamid.a2", "write it now")]);
    let (id, buttons) = request(2);
    daemon.deliver(vec![button(OWNER, "wamid.p2", &buttons[0].1, &id)]);
    standin.until("the answer", |w| answered(w, OWNER, "Written."));
    assert_eq!(std::fs::read_to_string(&note).unwrap(), "approved");
    assert!(
        standin
            .texts(OWNER)
            .iter()
            .any(|t| t.starts_with("✅ Approved"))
    );
    daemon.stop();
}

#[test]
fn a_5000_character_answer_arrives_split_under_4096_and_whole_and_a_failure_is_shown() {
    let standin = StandIn::start();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    let answer = "lorem ipsum dolor ".repeat(278); // 5,004 characters
    let answer = answer.trim().to_string();
    assert!((4_990..=5_010).contains(&answer.chars().count()));
    llm.push(Scripted::text(answer.clone()));
    let home = Home::new(&standin, &llm);
    let daemon = home.daemon();
    // Meta slows us down once: the call is tried again, nothing is lost.
    standin.throttle(1);
    daemon.deliver(vec![text(OWNER, "wamid.long", "tell me a lot")]);
    standin.until("the whole answer", |w| texts(w, OWNER).join(" ") == answer);
    let parts = standin.texts(OWNER);
    assert_eq!(parts.len(), 2);
    for p in &parts {
        assert!(p.chars().count() <= 4_096, "{}", p.chars().count());
    }
    assert_eq!(standin.world(|w| w.throttled), 1);

    // A turn that fails says so, and its message is marked ❌.
    llm.push(Scripted::server_error(500));
    daemon.deliver(vec![text(OWNER, "wamid.fail", "and now?")]);
    let marks = |w: &World| -> Vec<String> {
        w.sent
            .iter()
            .filter(|(_, k, b)| k == "reaction" && b["reaction"]["message_id"] == "wamid.fail")
            .map(|(_, _, b)| b["reaction"]["emoji"].as_str().unwrap().to_string())
            .collect()
    };
    standin.until("the failure's mark", |w| marks(w).len() == 2);
    assert_eq!(standin.world(marks), ["👀", "❌"]);
    let shown = standin.texts(OWNER).pop().unwrap();
    assert!(shown.starts_with("⚠️"), "{shown}");
    daemon.stop();
}

#[test]
fn cairn_channel_test_reads_the_number_and_writes_to_the_first_allowed_person() {
    let standin = StandIn::start();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    let home = Home::new(&standin, &llm);
    let out = home
        .cmd()
        .args(["--json", "channel", "test", "wa", "--message", "ping"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tested: Value = serde_json::from_str(&stdout).unwrap();
    let steps: Vec<(&str, &str)> = tested["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["step"].as_str().unwrap(), s["detail"].as_str().unwrap()))
        .collect();
    assert_eq!(
        steps[0],
        (
            "read phone number 109876",
            "the access token works: Cairn Test (+1 555-0100)"
        )
    );
    assert_eq!(steps[1].0, format!("send text to {OWNER}"));
    assert_eq!(standin.texts(OWNER), ["ping"]);
    assert!(!stdout.contains(TOKEN));
    // Listed, receiving, though no daemon runs to receive.
    let out = home
        .cmd()
        .args(["--json", "channel", "list"])
        .output()
        .unwrap();
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let wa = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "wa")
        .unwrap();
    assert_eq!(
        (&wa["receives"], &wa["posts"]),
        (&json!(true), &json!(false))
    );
    assert_eq!(wa["health"], "daemon_not_running", "{wa}");
}

#[test]
fn a_delivery_kept_before_the_daemon_died_is_answered_at_its_restart() {
    let standin = StandIn::start();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    let home = Home::new(&standin, &llm);
    // As the gateway keeps a delivery's messages before answering Meta
    // 200: a daemon that died right after left them in the store.
    let url = format!("sqlite://{}/cairn.db", home.dir.display());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let body = json!([text(OWNER, "wamid.K", "kept")]).to_string();
    rt.block_on(async {
        let (store, _) = cairn_store::Store::open(&url).await.unwrap();
        store
            .keep_channel_delivery("wa", &body, chrono::Utc::now())
            .await
            .unwrap();
        store.close().await;
    });
    llm.push(Scripted::text("answered after the restart"));
    let daemon = home.daemon();
    standin.until("the kept delivery's answer", |w| {
        answered(w, OWNER, "answered after the restart")
    });
    assert_eq!(asked(&llm), ["kept"]);
    // Handled, it is no longer kept; Meta's redelivery is answered once.
    daemon.deliver(vec![text(OWNER, "wamid.K", "kept")]);
    llm.push(Scripted::text("next"));
    daemon.deliver(vec![text(OWNER, "wamid.L", "next one")]);
    standin.until("the next answer", |w| answered(w, OWNER, "next"));
    daemon.stop();
    let left = rt.block_on(async {
        let (store, _) = cairn_store::Store::open(&url).await.unwrap();
        let left = store.kept_channel_deliveries("wa", 10).await.unwrap();
        store.close().await;
        left
    });
    assert!(left.is_empty(), "{left:?}");
    assert_eq!(asked(&llm), ["kept", "next one"]);
}
