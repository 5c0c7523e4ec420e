//! Inbound Discord, black-box: `cairn daemon` against a local stand-in of
//! the REST API and the gateway (real HTTP and a real WebSocket on
//! 127.0.0.1) and the fake LLM server.
#![expect(
    clippy::unwrap_used,
    clippy::disallowed_methods,
    reason = "test code unwraps freely and may use blocking std::fs"
)]

#[path = "../common/mod.rs"]
mod common;
mod standin;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use assert_cmd::cargo::CommandCargoExt;
use cairn_llm::testing::{FakeLlmServer, Scripted};
use common::DaemonChild;
use serde_json::{Value, json};
use standin::{BOT_ID, BOT_TOKEN, StandIn};

const OWNER: &str = "111111111111111111";
const STRANGER: &str = "222222222222222222";
const CHANNEL: &str = "333333333333333333";

struct Home {
    dir: PathBuf,
    _temp: tempfile::TempDir,
    llm_url: String,
}

impl Home {
    fn new(standin: &StandIn, llm: &FakeLlmServer) -> Home {
        let temp = tempfile::tempdir().unwrap();
        let home = Home {
            dir: temp.path().to_path_buf(),
            _temp: temp,
            llm_url: llm.base_url_openai(),
        };
        home.write_config(&standin.url, &[OWNER]);
        home
    }

    /// The contract's table, the token read from the environment.
    fn write_config(&self, api_url: &str, allowed: &[&str]) {
        let allowed: Vec<String> = allowed.iter().map(|u| format!("\"{u}\"")).collect();
        let config = format!(
            "[gateway]\nenabled = false\n\n[channels.guild]\ntype = \"discord\"\n\
             bot_token = \"${{DISCORD_BOT_TOKEN}}\"\ninbound = true\n\
             allowed_users = [{}]\napi_url = \"{api_url}\"\n",
            allowed.join(", ")
        );
        std::fs::write(self.dir.join("config.toml"), config).unwrap();
    }

    fn cmd(&self) -> Command {
        let mut cmd = Command::cargo_bin("cairn").unwrap();
        cmd.env_clear()
            .env("CAIRN_HOME", &self.dir)
            .env("CAIRN_LLM_PROVIDER", "openai")
            .env("CAIRN_LLM_BASE_URL", &self.llm_url)
            .env("CAIRN_LLM_MODEL", "test-model")
            .env("CAIRN_LLM_API_KEY", "sk-test-0123456789")
            .env("CAIRN_LLM_MAX_RETRIES", "0")
            .env("DISCORD_BOT_TOKEN", BOT_TOKEN);
        cmd
    }

    /// The daemon, once its session is live on the gateway.
    fn daemon(&self, standin: &StandIn) -> DaemonChild {
        let daemon = DaemonChild::start(self.cmd());
        standin.until("the daemon to identify", |w| w.session.is_some());
        let deadline = Instant::now() + Duration::from_secs(60);
        while !standin.live() {
            assert!(Instant::now() < deadline, "no live session");
            std::thread::sleep(Duration::from_millis(50));
        }
        daemon
    }

    /// `cairn --json status`'s component `channel.guild`, once `f` holds for it.
    fn health(&self, f: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let (_, out, _) = self.run(&["--json", "status"]);
            let status: Value = serde_json::from_str(&out).unwrap_or_default();
            let component = &status["daemon"]["components"]["channel.guild"];
            if f(component) {
                return component.clone();
            }
            assert!(Instant::now() < deadline, "channel.guild: {status}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn run(&self, args: &[&str]) -> (bool, String, String) {
        let out = self.cmd().args(args).output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

/// The person's messages the LLM was sent, one per turn (the last user
/// message of each request, repeats of one turn's calls merged).
fn asked(llm: &FakeLlmServer) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in llm.requests() {
        let last = r.body["messages"].as_array().and_then(|m| {
            m.iter()
                .rev()
                .find(|m| m["role"] == "user")
                .map(|m| match &m["content"] {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
        });
        if let Some(last) = last
            && out.last() != Some(&last)
        {
            out.push(last);
        }
    }
    out
}

fn answered(standin: &StandIn, channel: &str, text: &str) {
    standin.until(text, |w| {
        w.messages
            .values()
            .any(|m| m.channel == channel && m.content == text)
    });
}

#[test]
fn an_allowed_users_dm_is_answered_and_a_strangers_never_reaches_the_llm() {
    let standin = StandIn::start();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    llm.push(Scripted::text("## Hello\nfrom **cairn**"));
    let home = Home::new(&standin, &llm);
    let daemon = home.daemon(&standin);
    // Identify as the contract says: the token, the four intents, properties.
    let identify = standin.world(|w| w.identifies[0].clone());
    assert_eq!(identify["token"], BOT_TOKEN);
    assert_eq!(identify["intents"], 1 | 512 | 4096 | 32768);
    assert_eq!(identify["properties"]["browser"], "cairn");
    let path = standin.world(|w| w.connections[0].clone());
    assert_eq!(path, "/?v=10&encoding=json");

    let stranger_dm = StandIn::dm_channel(STRANGER);
    standin.dm(STRANGER, "hi, run rm -rf for me");
    standin.dm(STRANGER, "hello?");
    standin.until("the stranger told", |w| {
        w.messages.values().any(|m| m.channel == stranger_dm)
    });
    let owner_dm = StandIn::dm_channel(OWNER);
    let hello = standin.dm(OWNER, "hello");
    answered(&standin, &owner_dm, "**Hello**\nfrom **cairn**");
    // The turn's progress shows as reactions on the person's message, and typing.
    standin.until("the reactions", |w| {
        w.reactions.iter().filter(|(m, _)| *m == hello).count() == 2
    });
    assert_eq!(standin.reactions(&hello), ["👀", "✅"]);
    assert!(standin.world(|w| w.typing.contains(&owner_dm)));
    // The stranger was told once, with their id and the command to run;
    // nothing of theirs reached the LLM.
    let told = standin.texts(&stranger_dm);
    assert_eq!(told.len(), 1, "{told:?}");
    assert!(told[0].contains(STRANGER), "{}", told[0]);
    assert!(
        told[0].contains(&format!("cairn channel allow guild {STRANGER}")),
        "{}",
        told[0]
    );
    assert_eq!(asked(&llm), ["hello"]);
    // Heartbeats carry the last sequence number (null only before READY).
    standin.until("a heartbeat after READY", |w| {
        w.heartbeats.iter().any(|h| h.as_u64().is_some())
    });
    assert!(standin.world(|w| w.heartbeats.iter().all(|h| h.is_null() || h.is_u64())));
    home.health(|c| c["state"] == "running");

    // `/pair <code>` with a code from `cairn pair`.
    let (ok, out, err) = home.run(&["pair"]);
    assert!(ok, "{err}");
    let code = out.split_whitespace().nth(2).unwrap().to_string();
    let paired = "444444444444444444";
    standin.dm(paired, &format!("/pair {code}"));
    standin.until("the pairing", |w| {
        w.messages
            .values()
            .any(|m| m.channel == StandIn::dm_channel(paired) && m.content.starts_with("Paired"))
    });
    llm.push(Scripted::text("Paired and answered"));
    standin.dm(paired, "now?");
    answered(
        &standin,
        &StandIn::dm_channel(paired),
        "Paired and answered",
    );
    assert_eq!(asked(&llm), ["hello", "now?"]);
    daemon.stop();
}

#[test]
fn in_a_server_channel_only_mentions_and_replies_are_heard_and_never_the_bots_own() {
    let standin = StandIn::start();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    llm.push(Scripted::text("noted"));
    llm.push(Scripted::text("still here"));
    let home = Home::new(&standin, &llm);
    let file = home.dir.join("deploys.yaml");
    std::fs::write(
        &file,
        "name: deploys\ntrigger:\n  type: event\n  channel: discord\n  pattern: \"deploy(ed)? done\"\naction: {type: notification, message: seen a deploy}\n",
    )
    .unwrap();
    let (ok, _, err) = home.run(&["routine", "apply", "--file", file.to_str().unwrap()]);
    assert!(ok, "{err}");
    let daemon = home.daemon(&standin);
    // Not addressed to the bot, or the bot's own: not heard at all.
    standin.in_server(OWNER, CHANNEL, "deploy done over here", false, None);
    standin.in_server(BOT_ID, CHANNEL, "deploy done, says the bot", true, None);
    let asked_id = standin.in_server(OWNER, CHANNEL, "deploy done", true, None);
    answered(&standin, CHANNEL, "noted");
    let answer = standin.world(|w| {
        w.messages
            .iter()
            .find(|(_, m)| m.content == "noted")
            .map(|(id, m)| (id.to_string(), m.clone()))
            .unwrap()
    });
    // The answer replies to the person's message.
    assert_eq!(answer.1.reply_to.as_deref(), Some(asked_id.as_str()));
    // A reply to the bot's message is heard without a mention.
    standin.in_server(
        OWNER,
        CHANNEL,
        "and then?",
        false,
        Some((&answer.0, BOT_ID)),
    );
    answered(&standin, CHANNEL, "still here");
    // A reply to someone else's message is not.
    standin.in_server(
        OWNER,
        CHANNEL,
        "deploy done too",
        false,
        Some((&asked_id, OWNER)),
    );
    assert_eq!(asked(&llm), ["deploy done", "and then?"]);
    let runs = || {
        let (ok, out, err) = home.run(&["--json", "routine", "runs", "deploys"]);
        assert!(ok, "{err}");
        serde_json::from_str::<Value>(&out)
            .unwrap()
            .as_array()
            .unwrap()
            .len()
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while runs() == 0 {
        assert!(Instant::now() < deadline, "the routine never fired");
        std::thread::sleep(Duration::from_millis(100));
    }
    // One more message, answered, so the ignored ones had time to be heard.
    llm.push(Scripted::text("last"));
    standin.in_server(OWNER, CHANNEL, "last one", true, None);
    answered(&standin, CHANNEL, "last");
    assert_eq!(asked(&llm), ["deploy done", "and then?", "last one"]);
    assert_eq!(runs(), 1);
    daemon.stop();
}

/// The bot's latest message with buttons: its id and (label, custom_id)s.
fn buttons(standin: &StandIn, asked_before: usize) -> (u64, Vec<(String, String)>) {
    standin.until("the approval request", |w| {
        w.messages
            .values()
            .filter(|m| m.components.is_some())
            .count()
            > asked_before
    });
    standin.world(|w| {
        let (id, m) = w
            .messages
            .iter()
            .rfind(|(_, m)| m.components.is_some())
            .unwrap();
        let row = &m.components.as_ref().unwrap()[0];
        assert_eq!(row["type"], 1);
        let buttons = row["components"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| {
                assert_eq!(b["type"], 2);
                (
                    b["label"].as_str().unwrap().to_string(),
                    b["custom_id"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        (*id, buttons)
    })
}

#[test]
fn an_approval_button_runs_the_tool_a_denial_does_not_and_a_strangers_press_is_refused() {
    let standin = StandIn::start();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    llm.push(Scripted::tool_call(
        "write_file",
        json!({"path": "note.txt", "content": "approved"}),
    ));
    llm.push(Scripted::text("Written."));
    llm.push(Scripted::tool_call(
        "write_file",
        json!({"path": "other.txt", "content": "denied"}),
    ));
    llm.push(Scripted::text("Not written."));
    let home = Home::new(&standin, &llm);
    let daemon = home.daemon(&standin);
    let dm = StandIn::dm_channel(OWNER);
    standin.dm(OWNER, "write the note");
    let (id, buttons_shown) = buttons(&standin, 0);
    let labels: Vec<&str> = buttons_shown.iter().map(|b| b.0.as_str()).collect();
    assert_eq!(labels, ["Approve", "Deny", "Always"]);
    // A stranger's press decides nothing, and only they are told.
    let press = standin.press(STRANGER, &dm, id, &buttons_shown[0].1);
    standin.until("the stranger's press answered", |w| {
        w.callbacks.iter().any(|(i, _)| *i == press)
    });
    let refusal = standin.world(|w| w.callbacks[0].1.clone());
    assert_eq!(refusal["type"], 4, "{refusal}");
    assert_eq!(refusal["data"]["flags"], 64, "{refusal}");
    assert!(!home.dir.join("workspace/note.txt").exists());
    let press = standin.press(OWNER, &dm, id, &buttons_shown[0].1);
    answered(&standin, &dm, "Written.");
    assert_eq!(
        std::fs::read_to_string(home.dir.join("workspace/note.txt")).unwrap(),
        "approved"
    );
    // The press was answered by updating the request: the decision, no buttons.
    let update = standin.world(|w| w.callbacks.iter().find(|(i, _)| *i == press).cloned());
    let update = update.unwrap().1;
    assert_eq!(update["type"], 7, "{update}");
    assert_eq!(update["data"]["components"], json!([]));
    assert!(
        update["data"]["content"]
            .as_str()
            .unwrap()
            .starts_with("✅ Approved"),
        "{update}"
    );
    let shown = standin.world(|w| w.messages[&id].clone());
    assert!(
        shown.content.starts_with("✅ Approved"),
        "{}",
        shown.content
    );
    assert!(shown.components.is_none());

    standin.dm(OWNER, "write the other");
    let (id, buttons_shown) = buttons(&standin, 0);
    standin.press(OWNER, &dm, id, &buttons_shown[1].1);
    answered(&standin, &dm, "Not written.");
    assert!(!home.dir.join("workspace/other.txt").exists());
    let shown = standin.world(|w| w.messages[&id].clone());
    assert!(shown.content.starts_with("❌ Denied"), "{}", shown.content);
    daemon.stop();
}

#[test]
fn a_5000_character_answer_arrives_in_parts_under_2000_and_whole_within_the_bucket() {
    let standin = StandIn::start();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    let answer = "lorem ipsum dolor sit amet, ".repeat(179); // 5,012 characters
    let answer = answer.trim().to_string();
    assert!((5_000..5_100).contains(&answer.chars().count()));
    llm.push(Scripted::text(answer.clone()));
    let home = Home::new(&standin, &llm);
    let daemon = home.daemon(&standin);
    let dm = StandIn::dm_channel(OWNER);
    standin.dm(OWNER, "tell me a lot");
    standin.until("the whole answer", |w| {
        let texts: Vec<&str> = w.messages.values().map(|m| m.content.as_str()).collect();
        texts.join(" ") == answer
    });
    let texts = standin.texts(&dm);
    assert_eq!(texts.len(), 3, "{texts:?}");
    for t in &texts {
        assert!(t.chars().count() <= 2_000, "{}", t.chars().count());
    }
    // The bucket said when it was empty, and cairn waited for its reset.
    assert!(standin.world(|w| w.emptied) >= 1);
    assert_eq!(standin.world(|w| w.violations), 0);
    daemon.stop();
}

#[test]
fn a_429_is_waited_out_and_the_answer_still_arrives() {
    let standin = StandIn::start();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    llm.push(Scripted::text("after the limit"));
    let home = Home::new(&standin, &llm);
    let daemon = home.daemon(&standin);
    let dm = StandIn::dm_channel(OWNER);
    standin.rate_limit_once(&format!("POST /channels/{dm}/messages"));
    standin.dm(OWNER, "hello");
    answered(&standin, &dm, "after the limit");
    let posts = standin.world(|w| {
        w.calls
            .iter()
            .filter(|(r, _)| *r == format!("POST /channels/{dm}/messages"))
            .count()
    });
    assert!(posts >= 2, "the limited post was not made again");
    daemon.stop();
}

#[test]
fn a_dropped_connection_resumes_with_op_6_and_an_invalid_session_identifies_again() {
    let standin = StandIn::start();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    for text in ["first", "after a drop", "after an invalid session"] {
        llm.push(Scripted::text(text));
    }
    let home = Home::new(&standin, &llm);
    let daemon = home.daemon(&standin);
    let dm = StandIn::dm_channel(OWNER);
    standin.dm(OWNER, "one");
    answered(&standin, &dm, "first");
    // The socket drops; a message sent meanwhile is replayed on the resume.
    let seq = standin.world(|w| w.seq);
    standin.drop_socket();
    standin.dm(OWNER, "two");
    standin.until("a resume", |w| !w.resumes.is_empty());
    let resume = standin.world(|w| w.resumes[0].clone());
    assert_eq!(resume["session_id"], "session-1");
    assert_eq!(resume["seq"], seq, "{resume}");
    assert_eq!(resume["token"], BOT_TOKEN);
    // At READY's resume_gateway_url.
    let path = standin.world(|w| w.connections.last().cloned().unwrap());
    assert_eq!(path, "/resume?v=10&encoding=json");
    answered(&standin, &dm, "after a drop");
    assert_eq!(standin.world(|w| w.identifies.len()), 1);
    // Op 9 (not resumable): a new session.
    standin.invalidate_session();
    standin.until("a second identify", |w| w.identifies.len() == 2);
    standin.until("the new session", |w| {
        w.session.as_deref() == Some("session-2")
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    while !standin.live() {
        assert!(Instant::now() < deadline, "no live session");
        std::thread::sleep(Duration::from_millis(50));
    }
    standin.dm(OWNER, "three");
    answered(&standin, &dm, "after an invalid session");
    assert_eq!(asked(&llm), ["one", "two", "three"]);
    home.health(|c| c["state"] == "running");
    daemon.stop();
}

#[test]
fn a_connection_whose_heartbeats_go_unacknowledged_is_resumed() {
    let standin = StandIn::start();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    llm.push(Scripted::text("still alive"));
    let home = Home::new(&standin, &llm);
    let daemon = home.daemon(&standin);
    standin.until("a heartbeat", |w| !w.heartbeats.is_empty());
    standin.stop_acknowledging();
    standin.until("a resume", |w| !w.resumes.is_empty());
    let resume = standin.world(|w| w.resumes[0].clone());
    assert_eq!(resume["session_id"], "session-1");
    standin.dm(OWNER, "there?");
    answered(&standin, &StandIn::dm_channel(OWNER), "still alive");
    assert_eq!(standin.world(|w| w.identifies.len()), 1);
    daemon.stop();
}

#[test]
fn an_image_becomes_image_input_and_a_document_lands_in_the_inbox() {
    let standin = StandIn::start();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    llm.push(Scripted::text("Seen both"));
    let home = Home::new(&standin, &llm);
    let daemon = home.daemon(&standin);
    // A stranger's files are never fetched.
    standin.dm_with_files(STRANGER, "take this", &[("evil.txt", "text/plain")]);
    standin.until("the stranger told", |w| {
        w.messages
            .values()
            .any(|m| m.channel == StandIn::dm_channel(STRANGER))
    });
    standin.dm_with_files(
        OWNER,
        "look at these",
        &[("photo.png", "image/png"), ("notes.txt", "text/plain")],
    );
    answered(&standin, &StandIn::dm_channel(OWNER), "Seen both");
    assert_eq!(
        standin.world(|w| w.downloads.clone()),
        ["photo.png", "notes.txt"]
    );
    let request = llm.requests().last().unwrap().body.to_string();
    assert!(request.contains("look at these"), "{request}");
    assert!(request.contains("inbox/notes.txt"), "{request}");
    assert!(
        request.contains("data:image/png;base64"),
        "no image in {request}"
    );
    let saved = std::fs::read_to_string(home.dir.join("workspace/inbox/notes.txt")).unwrap();
    assert_eq!(saved, "hello from a document");
    assert!(!home.dir.join("workspace/inbox/evil.txt").exists());
    daemon.stop();
}

#[test]
fn a_refused_token_shows_in_the_channels_health_and_is_never_shown() {
    let standin = StandIn::start();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    let home = Home::new(&standin, &llm);
    let mut cmd = home.cmd();
    cmd.env("DISCORD_BOT_TOKEN", "WRONG-token-value");
    let daemon = DaemonChild::start(cmd);
    let component = home.health(|c| c["last_error"].as_str().is_some_and(|e| e.contains("401")));
    assert_ne!(component["state"], "running", "{component}");
    assert!(!component.to_string().contains("WRONG-token-value"));
    assert!(standin.world(|w| w.connections.is_empty()));
    daemon.stop();
}

#[test]
fn disallowed_intents_end_the_run_with_the_reason_and_no_tight_loop() {
    let standin = StandIn::start();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    standin.disallow_intents();
    let home = Home::new(&standin, &llm);
    let daemon = DaemonChild::start(home.cmd());
    let component = home.health(|c| {
        c["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("4014") && e.contains("Message Content"))
    });
    assert_ne!(component["state"], "running", "{component}");
    // The supervisor's backoff, not a loop: a few tries at most by now.
    assert!(standin.world(|w| w.identifies.len()) <= 3);
    daemon.stop();
}

#[test]
fn doctor_checks_the_bot_token_and_names_the_bot() {
    let standin = StandIn::start();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    let home = Home::new(&standin, &llm);
    let discord_line = |out: &str| {
        out.lines()
            .find(|l| l.contains("discord"))
            .unwrap_or_default()
            .to_string()
    };
    let (_, out, _) = home.run(&["doctor"]);
    let line = discord_line(&out);
    assert!(line.starts_with("ok"), "{out}");
    assert!(
        out.contains(&format!("the bot token works: cairn ({BOT_ID})")),
        "{out}"
    );
    let out = home
        .cmd()
        .env("DISCORD_BOT_TOKEN", "WRONG-token-value")
        .arg("doctor")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        discord_line(&out).starts_with("FAIL") && out.contains("401"),
        "{out}"
    );
    assert!(
        !out.contains("WRONG-token-value"),
        "the token leaked: {out}"
    );
}

#[test]
fn a_person_added_to_allowed_users_is_answered_without_a_restart() {
    let standin = StandIn::start();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    let home = Home::new(&standin, &llm);
    let daemon = home.daemon(&standin);
    // The changed table restarts the channel: a new session.
    home.write_config(&standin.url, &[OWNER, STRANGER]);
    standin.until("the channel restarted", |w| {
        w.session.as_deref() == Some("session-2")
    });
    llm.push(Scripted::text("welcome"));
    standin.dm(STRANGER, "hello now");
    answered(&standin, &StandIn::dm_channel(STRANGER), "welcome");
    assert_eq!(asked(&llm), ["hello now"]);
    daemon.stop();
}

#[test]
fn cairn_channel_lists_the_bot_with_its_health_and_tests_it() {
    let standin = StandIn::start();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    let home = Home::new(&standin, &llm);
    // No daemon yet: the bot is listed, not receiving.
    let (ok, out, err) = home.run(&["--json", "channel", "list"]);
    assert!(ok, "{err}");
    let listed: Value = serde_json::from_str(&out).unwrap();
    let guild = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "guild")
        .unwrap();
    assert_eq!(
        (
            &guild["type"],
            &guild["receives"],
            &guild["posts"],
            &guild["health"]
        ),
        (
            &json!("discord"),
            &json!(true),
            &json!(false),
            &json!("daemon_not_running")
        ),
        "{guild}"
    );
    // Without --to: a direct message to the first allowed user.
    let (ok, out, err) = home.run(&["--json", "channel", "test", "guild", "--message", "ping"]);
    assert!(ok, "{out}{err}");
    let tested: Value = serde_json::from_str(&out).unwrap();
    let steps: Vec<&str> = tested["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["step"].as_str().unwrap())
        .collect();
    let dm = StandIn::dm_channel(OWNER);
    assert_eq!(
        steps,
        [
            "GET /users/@me".to_string(),
            format!("open a direct message with {OWNER}"),
            format!("POST /channels/{dm}/messages"),
        ]
    );
    assert_eq!(standin.texts(&dm), ["ping"]);
    let (ok, _, err) = home.run(&[
        "channel",
        "test",
        "guild",
        "--to",
        CHANNEL,
        "--message",
        "pong",
    ]);
    assert!(ok, "{err}");
    assert_eq!(standin.texts(CHANNEL), ["pong"]);
    assert!(!out.contains(BOT_TOKEN));
}
