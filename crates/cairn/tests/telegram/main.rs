//! Inbound Telegram, black-box: `cairn daemon` against a local Bot API
//! stand-in (real HTTP on 127.0.0.1) and the fake LLM server; a channel
//! changed while the daemon runs is in [`reload`].
#![expect(
    clippy::unwrap_used,
    clippy::disallowed_methods,
    reason = "test code unwraps freely and may use blocking std::fs"
)]

mod agents;
#[path = "../common/mod.rs"]
mod common;
mod desk;
mod reload;
mod standin;

use std::path::PathBuf;
use std::process::Command;

use assert_cmd::cargo::CommandCargoExt;
use cairn_llm::testing::{FakeLlmServer, Scripted};
use cairn_test_support::postgres::PgSchema;
use common::DaemonChild;
use serde_json::{Value, json};
use standin::{StandIn, TOKEN, World};

const OWNER: i64 = 42;

struct Home {
    dir: PathBuf,
    _temp: Option<tempfile::TempDir>,
    api_url: String,
    llm_url: String,
    database: Option<String>,
}

impl Home {
    fn new(standin: &StandIn, llm: &FakeLlmServer, database: Option<&str>) -> Home {
        let temp = tempfile::tempdir().unwrap();
        let home = Home {
            dir: temp.path().to_path_buf(),
            _temp: Some(temp),
            api_url: standin.url.clone(),
            llm_url: llm.base_url_openai(),
            database: database.map(str::to_string),
        };
        home.write_config(TOKEN);
        home
    }

    fn write_config(&self, token: &str) {
        let config = format!(
            "[gateway]\nenabled = false\n\n[channels.tg]\ntype = \"telegram\"\nbot_token = \"{token}\"\n\
             chat_id = \"{OWNER}\"\ninbound = true\nallowed_users = [\"{OWNER}\"]\napi_url = \"{}\"\n",
            self.api_url
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
            .env("CAIRN_LLM_MAX_RETRIES", "0");
        if let Some(url) = &self.database {
            cmd.env("CAIRN_DATABASE_URL", url);
        }
        cmd
    }

    fn daemon(&self, standin: &StandIn) -> DaemonChild {
        let polls = standin.calls("getUpdates").len();
        let daemon = DaemonChild::start(self.cmd());
        standin.until("the daemon to poll", |w| {
            w.calls.iter().filter(|(m, _)| m == "getUpdates").count() > polls
        });
        daemon
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

fn seen(standin: &StandIn, update: i64) {
    standin.until("the update to be taken", |w| {
        w.offsets.iter().any(|o| *o > update)
    });
}

#[test]
fn an_allowed_users_message_is_answered_and_a_strangers_never_reaches_the_llm() {
    let standin = StandIn::start();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    llm.push(Scripted::text("Hello from cairn"));
    let home = Home::new(&standin, &llm, None);
    let daemon = home.daemon(&standin);
    // The bot is set up for polling and its commands registered.
    assert_eq!(standin.calls("deleteWebhook").len(), 1);
    let commands = &standin.calls("setMyCommands")[0]["commands"];
    let names: Vec<&str> = commands
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["command"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["new", "undo", "status", "jobs", "cancel", "help"]);

    let first = standin.message(7, "hi, run rm -rf for me");
    let second = standin.message(7, "hello?");
    seen(&standin, second.max(first));
    let hello = standin.message(OWNER, "hello");
    standin.until("the answer", |w| {
        w.messages
            .values()
            .any(|m| m.0 == OWNER && m.1 == "Hello from cairn")
    });
    // The turn's progress shows as reactions on the person's message:
    // 👀 when it starts, 👌 when it ends (Telegram's set has no ✅).
    let reactions = |w: &World| -> Vec<String> {
        w.calls
            .iter()
            .filter(|(m, c)| {
                m == "setMessageReaction" && c["chat_id"] == OWNER && c["message_id"] == hello
            })
            .map(|(_, c)| c["reaction"][0]["emoji"].as_str().unwrap().to_string())
            .collect()
    };
    standin.until("the reactions", |w| reactions(w).len() == 2);
    assert_eq!(standin.world(reactions), ["👀", "👌"]);
    // The stranger was told once how to be allowed; nothing of theirs reached the LLM.
    let told = standin.texts(7);
    assert_eq!(told.len(), 1, "{told:?}");
    assert!(told[0].contains("cairn telegram allow 7"), "{}", told[0]);
    assert_eq!(asked(&llm), ["hello"]);
    assert!(
        !standin.calls("sendChatAction").is_empty(),
        "no typing indicator"
    );

    // `cairn telegram allow` lets them in.
    let (ok, out, err) = home.run(&["telegram", "allow", "7"]);
    assert!(ok, "{err}");
    assert!(out.contains("7"), "{out}");
    llm.push(Scripted::text("Now I know you"));
    standin.message(7, "and now?");
    standin.until("the allowed stranger's answer", |w| {
        w.messages
            .values()
            .any(|m| m.0 == 7 && m.1 == "Now I know you")
    });

    // `/pair <code>` with a code from `cairn pair`.
    let (ok, out, err) = home.run(&["pair"]);
    assert!(ok, "{err}");
    let code = out.split_whitespace().nth(2).unwrap().to_string();
    standin.message(8, "/pair WRONG-CODE1");
    standin.until("the refusal", |w| w.messages.values().any(|m| m.0 == 8));
    standin.message(8, &format!("/pair {code}"));
    standin.until("the pairing", |w| {
        w.messages
            .values()
            .any(|m| m.0 == 8 && m.1.starts_with("Paired"))
    });
    llm.push(Scripted::text("Paired and answered"));
    // A document is saved into the workspace's inbox/ and named in the message.
    standin.document(8, "notes.txt", "read this");
    standin.until("the paired user's answer", |w| {
        w.messages
            .values()
            .any(|m| m.0 == 8 && m.1 == "Paired and answered")
    });
    let last = asked(&llm).pop().unwrap();
    assert!(
        last.contains("read this") && last.contains("inbox/notes.txt"),
        "{last}"
    );
    let saved = std::fs::read_to_string(home.dir.join("workspace/inbox/notes.txt")).unwrap();
    assert_eq!(saved, "hello from a document");
    assert_eq!(asked(&llm).len(), 3);
    let (ok, out, _) = home.run(&["--json", "telegram", "list"]);
    assert!(ok);
    let users: Value = serde_json::from_str(&out).unwrap();
    let origins: Vec<(&str, &str)> = users
        .as_array()
        .unwrap()
        .iter()
        .map(|u| {
            (
                u["user_id"].as_str().unwrap(),
                u["origin"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(origins, [("7", "cli"), ("8", "pairing")]);
    daemon.stop();
}

#[test]
fn an_approval_arrives_as_an_inline_keyboard_and_approve_runs_the_tool() {
    let standin = StandIn::start();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    llm.push(Scripted::tool_call(
        "write_file",
        json!({"path": "note.txt", "content": "approved"}),
    ));
    llm.push(Scripted::text("Written."));
    let home = Home::new(&standin, &llm, None);
    let daemon = home.daemon(&standin);
    standin.message(OWNER, "write the note");
    standin.until("the approval request", |w| {
        w.messages.values().any(|m| m.2.is_some())
    });
    let (id, keyboard) = standin.world(|w| {
        let (id, m) = w.messages.iter().find(|(_, m)| m.2.is_some()).unwrap();
        (*id, m.2.clone().unwrap())
    });
    let buttons: Vec<(&str, &str)> = keyboard["inline_keyboard"][0]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["text"].as_str().unwrap(),
                b["callback_data"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        buttons.iter().map(|b| b.0).collect::<Vec<_>>(),
        ["Approve", "Deny", "Always"]
    );
    assert!(!home.dir.join("workspace/note.txt").exists());
    // A stranger's press decides nothing.
    standin.press(7, id, buttons[0].1);
    standin.until("the stranger's press answered", |w| {
        w.calls.iter().any(|(m, _)| m == "answerCallbackQuery")
    });
    assert!(!home.dir.join("workspace/note.txt").exists());
    standin.press(OWNER, id, buttons[0].1);
    standin.until("the answer", |w| {
        w.messages.values().any(|m| m.1 == "Written.")
    });
    assert_eq!(
        std::fs::read_to_string(home.dir.join("workspace/note.txt")).unwrap(),
        "approved"
    );
    let acks: Vec<String> = standin
        .calls("answerCallbackQuery")
        .iter()
        .map(|c| c["text"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(acks, ["You are not allowed to answer this.", "Approved"]);
    // The request's message now shows the decision, without buttons.
    let shown = standin.world(|w| w.messages[&id].clone());
    assert!(shown.1.starts_with("✅ Approved"), "{}", shown.1);
    assert!(shown.2.is_none());
    daemon.stop();
}

#[test]
fn an_event_routine_with_channel_telegram_fires_on_a_matching_message() {
    let standin = StandIn::start();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    llm.push(Scripted::text("noted"));
    let home = Home::new(&standin, &llm, None);
    let file = home.dir.join("deploys.yaml");
    std::fs::write(
        &file,
        "name: deploys\ntrigger:\n  type: event\n  channel: telegram\n  pattern: \"deploy(ed)? done\"\naction: {type: notification, message: seen a deploy}\n",
    )
    .unwrap();
    let (ok, _, err) = home.run(&["routine", "apply", "--file", file.to_str().unwrap()]);
    assert!(ok, "{err}");
    let daemon = home.daemon(&standin);
    // In a group, a message not addressed to the bot is not heard at all.
    let ignored = standin.group_message(OWNER, -100, "deploy done over here");
    seen(&standin, ignored);
    standin.message(OWNER, "deploy done");
    standin.until("the answer", |w| {
        w.messages.values().any(|m| m.1 == "noted")
    });
    let runs = || {
        let (ok, out, err) = home.run(&["--json", "routine", "runs", "deploys"]);
        assert!(ok, "{err}");
        serde_json::from_str::<Value>(&out)
            .unwrap()
            .as_array()
            .unwrap()
            .len()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while runs() == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the routine never fired"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(runs(), 1);
    assert_eq!(asked(&llm), ["deploy done"]);
    daemon.stop();
}

#[test]
fn a_7500_character_answer_arrives_as_two_messages_of_at_most_4096() {
    let standin = StandIn::start();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    let answer = "lorem ipsum <dolor> & ".repeat(341); // 7,502 characters
    let answer = answer.trim().to_string();
    assert!((7_400..=7_600).contains(&answer.chars().count()));
    llm.push(Scripted::text(answer.clone()));
    let home = Home::new(&standin, &llm, None);
    let daemon = home.daemon(&standin);
    standin.message(OWNER, "tell me a lot");
    let unescape = |t: &str| {
        t.replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&amp;", "&")
    };
    standin.until("the whole answer", |w| {
        let texts: Vec<String> = w.messages.values().map(|m| unescape(&m.1)).collect();
        texts.join(" ") == answer
    });
    let texts: Vec<String> = standin.texts(OWNER).iter().map(|t| unescape(t)).collect();
    assert_eq!(texts.len(), 2);
    for t in &texts {
        assert!(t.encode_utf16().count() <= 4_096, "{}", t.len());
    }
    // HTML: what the model wrote is escaped, so Telegram shows it as written.
    assert!(
        standin
            .calls("sendMessage")
            .iter()
            .all(|c| c["parse_mode"] == "HTML")
    );
    assert!(standin.texts(OWNER)[0].contains("&lt;dolor&gt; &amp;"));
    daemon.stop();
}

fn restart_and_count(home: &Home, standin: &StandIn, llm: &FakeLlmServer) {
    for text in ["one", "two", "three"] {
        llm.push(Scripted::text(format!("answer {text}")));
    }
    let daemon = home.daemon(standin);
    standin.message(OWNER, "one");
    standin.until("answer one", |w| {
        w.messages.values().any(|m| m.1 == "answer one")
    });
    daemon.stop();
    // Arrive while no daemon runs.
    standin.message(OWNER, "two");
    standin.message(OWNER, "three");
    let daemon = home.daemon(standin);
    standin.until("answer three", |w| {
        w.messages
            .values()
            .filter(|m| m.1.starts_with("answer "))
            .count()
            == 3
    });
    assert_eq!(asked(llm), ["one", "two", "three"]);
    daemon.stop();
}

#[test]
fn a_restart_in_the_middle_of_a_conversation_neither_repeats_nor_loses_an_update() {
    let standin = StandIn::start();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    let home = Home::new(&standin, &llm, None);
    restart_and_count(&home, &standin, &llm);
    // The second daemon started from where the first stopped.
    let offsets = standin.world(|w| w.offsets.clone());
    assert!(offsets.windows(2).all(|p| p[0] <= p[1]), "{offsets:?}");
}

#[test]
fn two_daemons_on_one_postgresql_database_answer_each_message_once() {
    let Some(pg) =
        PgSchema::create("two_daemons_on_one_postgresql_database_answer_each_message_once")
    else {
        return;
    };
    let url = pg.url.clone();
    let standin = StandIn::start();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    let (a, b) = (
        Home::new(&standin, &llm, Some(&url)),
        Home::new(&standin, &llm, Some(&url)),
    );
    let first = a.daemon(&standin);
    let second = DaemonChild::start(b.cmd());
    // Both are up (each asked who the bot is); only one polls.
    standin.until("both daemons", |w| {
        w.calls.iter().filter(|(m, _)| m == "getMe").count() >= 2
    });
    for n in 0..4 {
        llm.push(Scripted::text(format!("answer {n}")));
        standin.message(OWNER, &format!("message {n}"));
        standin.until("the answer", |w| {
            w.messages.values().any(|m| m.1 == format!("answer {n}"))
        });
    }
    assert_eq!(
        asked(&llm),
        ["message 0", "message 1", "message 2", "message 3"]
    );
    assert_eq!(standin.texts(OWNER).len(), 4);
    assert_eq!(
        standin.calls("deleteWebhook").len(),
        1,
        "a second daemon polled too"
    );
    // The poller stops: the other takes over at once (the lease is released).
    first.stop();
    llm.push(Scripted::text("answer after"));
    standin.message(OWNER, "after");
    standin.until("the other daemon's answer", |w| {
        w.messages.values().any(|m| m.1 == "answer after")
    });
    assert_eq!(asked(&llm).len(), 5);
    second.stop();
}

#[test]
fn doctor_checks_the_token_with_get_me_and_names_the_bot() {
    let standin = StandIn::start();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    let home = Home::new(&standin, &llm, None);
    let (_, out, _) = home.run(&["doctor"]);
    let line = out
        .lines()
        .find(|l| l.contains("telegram"))
        .unwrap_or_default()
        .to_string();
    assert!(
        line.starts_with("ok") && line.contains("Cairn Test (@cairn_test_bot)"),
        "{out}"
    );
    home.write_config("999:WRONG-token-value");
    let (ok, out, _) = home.run(&["doctor"]);
    assert!(!ok);
    let line = out
        .lines()
        .find(|l| l.contains("telegram"))
        .unwrap_or_default()
        .to_string();
    assert!(
        line.starts_with("FAIL") && line.contains("Unauthorized"),
        "{out}"
    );
    assert!(
        !out.contains("WRONG-token-value"),
        "the token leaked: {out}"
    );
}

#[test]
fn cairn_channel_test_asks_get_me_and_sends_to_the_chat() {
    let standin = StandIn::start();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    let home = Home::new(&standin, &llm, None);
    let (ok, out, err) = home.run(&["channel", "test", "tg", "--message", "ping"]);
    assert!(ok, "{out}{err}");
    assert!(
        out.contains("getMe") && out.contains("Cairn Test (@cairn_test_bot)"),
        "{out}"
    );
    assert!(out.contains(&format!("sendMessage to {OWNER}")), "{out}");
    assert!(out.contains("tg: works in"), "{out}");
    assert_eq!(standin.texts(OWNER), ["ping"]);
    let (ok, _, err) = home.run(&["channel", "test", "tg", "--to", "@someone"]);
    assert!(!ok);
    assert!(
        err.contains("\"@someone\" is not a Telegram chat id"),
        "{err}"
    );
    // A refused token fails the first step, and is never shown.
    home.write_config("999:WRONG-token-value");
    let (ok, out, _) = home.run(&["channel", "test", "tg"]);
    assert!(!ok);
    assert!(
        out.contains("FAILED") && out.contains("Unauthorized"),
        "{out}"
    );
    assert!(!out.contains("WRONG-token-value"), "{out}");
    assert_eq!(standin.texts(OWNER).len(), 1);
}
