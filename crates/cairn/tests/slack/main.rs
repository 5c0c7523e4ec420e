//! Inbound Slack, black-box: `cairn daemon` against a local stand-in of
//! the Web API and Socket Mode (real HTTP and a real WebSocket on
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
use standin::{APP_TOKEN, BOT_TOKEN, StandIn};

const OWNER: &str = "U0OWNER01";
const OWNER_DM: &str = "DU0OWNER01";
const STRANGER: &str = "U0STRANGE";

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

    /// The contract's table, tokens read from the environment.
    fn write_config(&self, api_url: &str, allowed: &[&str]) {
        let allowed: Vec<String> = allowed.iter().map(|u| format!("\"{u}\"")).collect();
        let config = format!(
            "[gateway]\nenabled = false\n\n[channels.team]\ntype = \"slack\"\n\
             bot_token = \"${{SLACK_BOT_TOKEN}}\"\napp_token = \"${{SLACK_APP_TOKEN}}\"\n\
             inbound = true\nallowed_users = [{}]\napi_url = \"{api_url}\"\n",
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
            .env("SLACK_BOT_TOKEN", BOT_TOKEN)
            .env("SLACK_APP_TOKEN", APP_TOKEN);
        cmd
    }

    fn daemon(&self, standin: &StandIn) -> DaemonChild {
        let before = standin.world(|w| w.connections);
        let daemon = DaemonChild::start(self.cmd());
        standin.until("the daemon to connect", |w| w.connections > before);
        daemon
    }

    /// `cairn --json status`'s component `channel.team`, once `f` holds for it.
    fn health(&self, f: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let (_, out, _) = self.run(&["--json", "status"]);
            let status: Value = serde_json::from_str(&out).unwrap_or_default();
            let component = &status["daemon"]["components"]["channel.team"];
            if f(component) {
                return component.clone();
            }
            assert!(Instant::now() < deadline, "channel.team: {status}");
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

fn unescape(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

#[test]
fn an_allowed_users_message_is_answered_and_a_strangers_never_reaches_the_llm() {
    let standin = StandIn::start();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    llm.push(Scripted::text(
        "Hello from **cairn**, see [docs](https://x.org)",
    ));
    let home = Home::new(&standin, &llm);
    let daemon = home.daemon(&standin);
    assert_eq!(standin.calls("auth.test").len(), 1);

    standin.dm(STRANGER, "hi, run rm -rf for me");
    standin.dm(STRANGER, "hello?");
    standin.until("the stranger told", |w| {
        w.messages
            .values()
            .any(|m| m.channel == format!("D{STRANGER}"))
    });
    // The first answer meets a rate limit: Retry-After is waited out.
    standin.rate_limit_once("chat.postMessage");
    let hello = standin.dm(OWNER, "hello");
    standin.until("the answer", |w| {
        w.messages.values().any(|m| {
            m.channel == OWNER_DM && m.text == "Hello from *cairn*, see <https://x.org|docs>"
        })
    });
    // The turn's progress shows as reactions on the person's message.
    standin.until("the reactions", |w| {
        w.calls
            .iter()
            .filter(|(m, c)| m == "reactions.add" && c["timestamp"] == hello.as_str())
            .count()
            == 2
    });
    assert_eq!(standin.reactions(&hello), ["eyes", "white_check_mark"]);
    // The stranger was told once, with their id and the command to run;
    // nothing of theirs reached the LLM.
    let told = standin.texts(&format!("D{STRANGER}"));
    assert_eq!(told.len(), 1, "{told:?}");
    assert!(told[0].contains(STRANGER), "{}", told[0]);
    assert!(
        told[0].contains(&format!("cairn channel allow team {STRANGER}")),
        "{}",
        told[0]
    );
    assert_eq!(asked(&llm), ["hello"]);
    let posts = standin.calls("chat.postMessage");
    assert!(
        posts.iter().filter(|p| p["channel"] == OWNER_DM).count() >= 2,
        "the rate-limited post was not made again: {posts:?}"
    );

    // `/pair <code>` with a code from `cairn pair`.
    let (ok, out, err) = home.run(&["pair"]);
    assert!(ok, "{err}");
    let code = out.split_whitespace().nth(2).unwrap().to_string();
    // Slack keeps `/…` for its commands: `pair <code>` as a message, or `/cairn pair <code>`.
    standin.dm("U0PAIRED1", &format!("pair {code}"));
    standin.until("the pairing", |w| {
        w.messages
            .values()
            .any(|m| m.channel == "DU0PAIRED1" && m.text.starts_with("Paired"))
    });
    llm.push(Scripted::text("Paired and answered"));
    standin.dm("U0PAIRED1", "now?");
    standin.until("the paired user's answer", |w| {
        w.messages.values().any(|m| m.text == "Paired and answered")
    });
    // cairn's chat commands through the app's slash command, without the LLM.
    standin.slash("U0PAIRED1", "DU0PAIRED1", "help");
    standin.until("the help", |w| {
        w.messages
            .values()
            .any(|m| m.channel == "DU0PAIRED1" && m.text.contains("/new"))
    });
    assert_eq!(asked(&llm), ["hello", "now?"]);
    assert!(standin.all_acked(), "an envelope was not acknowledged");
    daemon.stop();
}

#[test]
fn an_approval_pressed_as_a_button_runs_the_tool_and_a_denial_does_not() {
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
    let with_buttons = |asked_before: usize| {
        standin.until("the approval request", |w| {
            w.messages.values().filter(|m| m.blocks.is_some()).count() > asked_before
        });
        standin.world(|w| {
            let (ts, m) = w
                .messages
                .iter()
                .rfind(|(_, m)| m.blocks.is_some())
                .unwrap();
            (ts.clone(), m.blocks.clone().unwrap())
        })
    };
    standin.dm(OWNER, "write the note");
    let (ts, blocks) = with_buttons(0);
    let buttons: Vec<(String, String)> = blocks[1]["elements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["text"]["text"].as_str().unwrap().to_string(),
                b["value"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let labels: Vec<&str> = buttons.iter().map(|b| b.0.as_str()).collect();
    assert_eq!(labels, ["Approve", "Deny", "Always"]);
    // A stranger's press decides nothing, and they are told.
    standin.press(STRANGER, OWNER_DM, &ts, &buttons[0].1);
    standin.until("the stranger's press refused", |w| {
        w.calls
            .iter()
            .any(|(m, c)| m == "chat.postEphemeral" && c["user"] == STRANGER)
    });
    assert!(!home.dir.join("workspace/note.txt").exists());
    standin.press(OWNER, OWNER_DM, &ts, &buttons[0].1);
    standin.until("the answer", |w| {
        w.messages.values().any(|m| m.text == "Written.")
    });
    assert_eq!(
        std::fs::read_to_string(home.dir.join("workspace/note.txt")).unwrap(),
        "approved"
    );
    // The request's message shows the decision, its buttons gone.
    let shown = standin.world(|w| w.messages[&ts].clone());
    assert!(shown.text.starts_with("✅ Approved"), "{}", shown.text);
    assert!(shown.blocks.is_none());

    standin.dm(OWNER, "write the other");
    let (ts, blocks) = with_buttons(0);
    let deny = blocks[1]["elements"][1]["value"]
        .as_str()
        .unwrap()
        .to_string();
    standin.press(OWNER, OWNER_DM, &ts, &deny);
    standin.until("the answer", |w| {
        w.messages.values().any(|m| m.text == "Not written.")
    });
    assert!(!home.dir.join("workspace/other.txt").exists());
    let shown = standin.world(|w| w.messages[&ts].clone());
    assert!(shown.text.starts_with("❌ Denied"), "{}", shown.text);
    assert!(standin.all_acked(), "an envelope was not acknowledged");
    daemon.stop();
}

#[test]
fn a_5000_character_answer_arrives_split_under_4000_and_whole() {
    let standin = StandIn::start();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    let answer = "lorem ipsum <dolor> & ".repeat(228); // 5,016 characters
    let answer = answer.trim().to_string();
    assert!((5_000..5_100).contains(&answer.chars().count()));
    llm.push(Scripted::text(answer.clone()));
    let home = Home::new(&standin, &llm);
    let daemon = home.daemon(&standin);
    standin.dm(OWNER, "tell me a lot");
    standin.until("the whole answer", |w| {
        let texts: Vec<String> = w.messages.values().map(|m| unescape(&m.text)).collect();
        texts.join(" ") == answer
    });
    let texts = standin.texts(OWNER_DM);
    assert_eq!(texts.len(), 2, "{texts:?}");
    for t in &texts {
        assert!(unescape(t).chars().count() <= 4_000, "{}", t.len());
    }
    // mrkdwn: what the model wrote is escaped, so Slack shows it as written.
    assert!(texts[0].contains("&lt;dolor&gt; &amp;"), "{}", texts[0]);
    daemon.stop();
}

#[test]
fn a_dropped_socket_and_a_disconnect_envelope_reconnect_and_the_next_message_is_answered() {
    let standin = StandIn::start();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    for text in ["first", "after a drop", "after a disconnect"] {
        llm.push(Scripted::text(text));
    }
    let home = Home::new(&standin, &llm);
    let daemon = home.daemon(&standin);
    let answered = |text: &str| {
        standin.until(text, |w| w.messages.values().any(|m| m.text == text));
    };
    standin.dm(OWNER, "one");
    answered("first");
    standin.drop_socket();
    standin.dm(OWNER, "two");
    answered("after a drop");
    standin.disconnect();
    standin.dm(OWNER, "three");
    answered("after a disconnect");
    assert_eq!(asked(&llm), ["one", "two", "three"]);
    // A fresh URL for each connection.
    assert_eq!(standin.calls("apps.connections.open").len(), 3);
    home.health(|c| c["state"] == "running");
    assert!(standin.all_acked(), "an envelope was not acknowledged");
    daemon.stop();
}

#[test]
fn in_a_channel_the_bot_hears_a_mention_and_its_thread_and_an_event_routine_fires() {
    let standin = StandIn::start();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    llm.push(Scripted::text("noted"));
    llm.push(Scripted::text("still here"));
    let home = Home::new(&standin, &llm);
    let file = home.dir.join("deploys.yaml");
    std::fs::write(
        &file,
        "name: deploys\ntrigger:\n  type: event\n  channel: slack\n  pattern: \"deploy(ed)? done\"\naction: {type: notification, message: seen a deploy}\n",
    )
    .unwrap();
    let (ok, _, err) = home.run(&["routine", "apply", "--file", file.to_str().unwrap()]);
    assert!(ok, "{err}");
    let daemon = home.daemon(&standin);
    // Not addressed to the bot: not heard at all.
    standin.event("message", OWNER, "C0GENERAL", None, "deploy done over here");
    // A mention arrives twice (message and app_mention) and is answered once, in its thread.
    let root = standin.mention(OWNER, "C0GENERAL", "deploy done");
    standin.until("the answer", |w| {
        w.messages.values().any(|m| m.text == "noted")
    });
    let answer = standin.world(|w| w.messages.values().find(|m| m.text == "noted").cloned());
    assert_eq!(answer.unwrap().thread.as_deref(), Some(root.as_str()));
    // In its thread, the bot listens without a mention.
    standin.event("message", OWNER, "C0GENERAL", Some(&root), "and then?");
    standin.until("the answer in the thread", |w| {
        w.messages
            .values()
            .any(|m| m.text == "still here" && m.thread.as_deref() == Some(root.as_str()))
    });
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
    assert_eq!(runs(), 1);
    assert!(standin.all_acked(), "an envelope was not acknowledged");
    daemon.stop();
    // Restarted, the bot still listens in the thread it answered in (and
    // still not outside it).
    let daemon = home.daemon(&standin);
    llm.push(Scripted::text("back again"));
    standin.event("message", OWNER, "C0GENERAL", None, "not for the bot");
    standin.event(
        "message",
        OWNER,
        "C0GENERAL",
        Some(&root),
        "after the restart?",
    );
    standin.until("the answer in the thread after the restart", |w| {
        w.messages
            .values()
            .any(|m| m.text == "back again" && m.thread.as_deref() == Some(root.as_str()))
    });
    assert_eq!(
        asked(&llm),
        ["deploy done", "and then?", "after the restart?"]
    );
    daemon.stop();
}

#[test]
fn a_shared_picture_becomes_image_input_and_a_document_lands_in_the_inbox() {
    let standin = StandIn::start();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    llm.push(Scripted::text("Seen both"));
    let home = Home::new(&standin, &llm);
    let daemon = home.daemon(&standin);
    // A stranger's files are never fetched.
    standin.share(STRANGER, "take this", &[("evil.txt", "text/plain")]);
    standin.until("the stranger told", |w| {
        w.messages
            .values()
            .any(|m| m.channel == format!("D{STRANGER}"))
    });
    standin.share(
        OWNER,
        "look at these",
        &[("photo.png", "image/png"), ("notes.txt", "text/plain")],
    );
    standin.until("the answer", |w| {
        w.messages.values().any(|m| m.text == "Seen both")
    });
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
fn doctor_checks_both_tokens_and_names_the_bot() {
    let standin = StandIn::start();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    let home = Home::new(&standin, &llm);
    let slack_line = |out: &str| {
        out.lines()
            .find(|l| l.contains("slack"))
            .unwrap_or_default()
            .to_string()
    };
    let (_, out, _) = home.run(&["doctor"]);
    let line = slack_line(&out);
    assert!(
        line.starts_with("ok") && line.contains("cairn in workspace T0TEAM01"),
        "{out}"
    );
    assert!(out.contains("the app token opens Socket Mode"), "{out}");
    let out = home
        .cmd()
        .env("SLACK_APP_TOKEN", "xapp-WRONG-token-value")
        .arg("doctor")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        slack_line(&out).starts_with("FAIL") && out.contains("invalid_auth"),
        "{out}"
    );
    assert!(
        !out.contains("WRONG-token-value"),
        "the token leaked: {out}"
    );
}

#[test]
fn a_refused_app_token_shows_in_the_channels_health_and_is_never_shown() {
    let standin = StandIn::start();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    let home = Home::new(&standin, &llm);
    let mut cmd = home.cmd();
    cmd.env("SLACK_APP_TOKEN", "xapp-WRONG-token-value");
    let daemon = DaemonChild::start(cmd);
    let component = home.health(|c| {
        c["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("invalid_auth"))
    });
    assert_ne!(component["state"], "running", "{component}");
    assert!(!component.to_string().contains("WRONG-token-value"));
    assert_eq!(standin.world(|w| w.connections), 0);
    daemon.stop();
}

#[test]
fn a_person_added_to_allowed_users_is_answered_without_a_restart() {
    let standin = StandIn::start();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    let home = Home::new(&standin, &llm);
    let daemon = home.daemon(&standin);
    // The changed table restarts the channel: a new connection.
    home.write_config(&standin.url, &[OWNER, STRANGER]);
    standin.until("the channel restarted", |w| w.connections >= 2);
    llm.push(Scripted::text("welcome"));
    standin.dm(STRANGER, "hello now");
    standin.until("the answer", |w| {
        w.messages
            .values()
            .any(|m| m.channel == format!("D{STRANGER}") && m.text == "welcome")
    });
    assert_eq!(asked(&llm), ["hello now"]);
    assert_eq!(standin.calls("auth.test").len(), 2);
    daemon.stop();
}

#[test]
fn cairn_channel_lists_the_app_with_its_health_tests_it_and_allows_a_person() {
    let standin = StandIn::start();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    let home = Home::new(&standin, &llm);
    let daemon = home.daemon(&standin);
    home.health(|c| c["state"] == "running");

    let (ok, out, err) = home.run(&["--json", "channel", "list"]);
    assert!(ok, "{err}");
    let listed: Value = serde_json::from_str(&out).unwrap();
    let team = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "team")
        .unwrap();
    assert_eq!(
        (
            &team["type"],
            &team["receives"],
            &team["posts"],
            &team["health"]
        ),
        (&json!("slack"), &json!(true), &json!(false), &json!("ok")),
        "{team}"
    );
    assert_eq!(team["receiving"]["state"], "running", "{team}");
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["name"] == "inbox")
    );

    let (ok, out, err) = home.run(&[
        "--json",
        "channel",
        "test",
        "team",
        "--to",
        "C0GENERAL",
        "--message",
        "ping",
    ]);
    assert!(ok, "{out}{err}");
    let tested: Value = serde_json::from_str(&out).unwrap();
    let steps: Vec<&str> = tested["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["step"].as_str().unwrap())
        .collect();
    assert_eq!(
        steps,
        [
            "auth.test",
            "apps.connections.open",
            "chat.postMessage to C0GENERAL"
        ]
    );
    assert_eq!(standin.texts("C0GENERAL"), ["ping"]);
    assert!(!out.contains(BOT_TOKEN) && !out.contains(APP_TOKEN));

    // A name is not a user id; the stranger's id is.
    let (ok, _, err) = home.run(&["channel", "allow", "team", "ada"]);
    assert!(!ok);
    assert!(err.contains("\"ada\" is not a Slack user id"), "{err}");
    let (ok, _, err) = home.run(&["channel", "allow", "team", STRANGER]);
    assert!(ok, "{err}");
    llm.push(Scripted::text("allowed now"));
    standin.dm(STRANGER, "hello");
    standin.until("the allowed person's answer", |w| {
        w.messages
            .values()
            .any(|m| m.channel == format!("D{STRANGER}") && m.text == "allowed now")
    });
    assert_eq!(asked(&llm), ["hello"]);
    daemon.stop();
}

#[test]
fn message_hooks_drop_and_redact_what_passes_through_slack() {
    let standin = StandIn::start();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    let home = Home::new(&standin, &llm);
    // Hooks beside the home, not in the workspace the agent writes.
    let script = |name: &str, text: &str| {
        let path = home.dir.join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        path.display().to_string()
    };
    let drop = script(
        "drop.sh",
        "#!/bin/sh\nif grep -q mangosteen; then echo 'no fruit talk' >&2; exit 2; fi\n",
    );
    let redact = script(
        "redact.sh",
        "#!/bin/sh\nsed -e 's/.*\"text\":\"\\([^\"]*\\)\".*/{\"text\":\"\\1\"}/' -e 's/sesame/[redacted]/g'\n",
    );
    let mut config = std::fs::read_to_string(home.dir.join("config.toml")).unwrap();
    config.push_str(&format!(
        "\n[tools.shell]\nallow_unconfined = true\n\n[[hooks]]\nevent = \"on_message\"\ncommand = \"{drop}\"\n\n\
         [[hooks]]\nevent = \"on_message_sending\"\ncommand = \"{redact}\"\n"
    ));
    std::fs::write(home.dir.join("config.toml"), config).unwrap();
    let daemon = home.daemon(&standin);
    standin.dm(OWNER, "tell me about the mangosteen");
    llm.push(Scripted::text("the password is sesame"));
    standin.dm(OWNER, "what is the password?");
    standin.until("the redacted answer", |w| {
        w.messages
            .values()
            .any(|m| m.channel == OWNER_DM && m.text == "the password is [redacted]")
    });
    assert_eq!(asked(&llm), ["what is the password?"]);
    // The person is told their message was dropped, and why.
    let told = standin.texts(OWNER_DM);
    assert!(
        told[0].starts_with("The message was dropped")
            && told[0].contains("(on_message): no fruit talk"),
        "{told:?}"
    );
    // Neither a post nor an edit carried the word.
    let calls = standin.world(|w| w.calls.clone());
    assert!(
        !calls
            .iter()
            .any(|(_, body)| body.to_string().contains("sesame")),
        "{calls:?}"
    );
    daemon.stop();
}
