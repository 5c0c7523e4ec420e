//! Approvals where nobody is present (`agent.approval_channel`): a `/v1`
//! turn's tool call is put to the owner in Telegram with buttons, and runs
//! when approved; without an approval channel the model is told no person
//! could approve it, never that the user declined.

use cairn_llm::testing::{FakeLlmServer, Scripted};
use serde_json::{Value, json};

use super::common::agents::{call, daemon_with};
use super::standin::{StandIn, TOKEN};
use super::{Home, OWNER};

fn write_config(home: &Home, desk: bool) {
    let agent = if desk {
        "[agent]\napproval_channel = \"tg\"\n\n"
    } else {
        ""
    };
    let config = format!(
        "{agent}[channels.tg]\ntype = \"telegram\"\nbot_token = \"{TOKEN}\"\nchat_id = \"{OWNER}\"\n\
         inbound = true\nallowed_users = [\"{OWNER}\"]\napi_url = \"{}\"\n",
        home.api_url
    );
    std::fs::write(home.dir.join("config.toml"), config).unwrap();
}

/// `/v1/chat/completions` asking for the note, on a thread of its own.
fn ask_for_note(base: &str, token: &str) -> std::thread::JoinHandle<(u16, Value)> {
    let (base, token) = (base.to_string(), token.to_string());
    std::thread::spawn(move || {
        let body =
            json!({"model": "cairn", "messages": [{"role": "user", "content": "write the note"}]});
        call(&base, &token, "/v1/chat/completions", Some(body))
    })
}

fn script(llm: &FakeLlmServer) {
    llm.push(Scripted::tool_call(
        "write_file",
        json!({"path": "note.txt", "content": "approved"}),
    ));
    llm.push(Scripted::text("Written."));
}

#[test]
fn an_api_clients_tool_call_is_approved_by_the_owner_in_telegram_and_runs() {
    let standin = StandIn::start();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    let home = Home::new(&standin, &llm, None);
    write_config(&home, true);
    let mut cmd = home.cmd();
    cmd.env("CAIRN_GATEWAY_PORT", "0")
        .env("CAIRN_TIMEZONE", "UTC");
    let (_daemon, base, token) = daemon_with(cmd, &home.dir, &llm);
    standin.until("the daemon to poll", |w| {
        w.calls.iter().any(|(m, _)| m == "getUpdates")
    });
    script(&llm);
    let answer = ask_for_note(&base, &token);
    standin.until("the approval request", |w| {
        w.messages.values().any(|m| m.2.is_some())
    });
    let (id, (chat, text, keyboard)) = standin.world(|w| {
        let (id, m) = w.messages.iter().find(|(_, m)| m.2.is_some()).unwrap();
        (*id, m.clone())
    });
    assert_eq!(chat, OWNER);
    assert!(text.contains("an API client (/v1)"), "{text}");
    assert!(text.contains("file_write"), "{text}");
    assert!(!home.dir.join("workspace/note.txt").exists());
    let approve = keyboard.unwrap()["inline_keyboard"][0][0]["callback_data"]
        .as_str()
        .unwrap()
        .to_string();
    standin.press(OWNER, id, &approve);
    let (status, body) = answer.join().unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["choices"][0]["message"]["content"], "Written.");
    assert_eq!(
        std::fs::read_to_string(home.dir.join("workspace/note.txt")).unwrap(),
        "approved"
    );
    let shown = standin.world(|w| w.messages[&id].clone());
    assert!(shown.1.starts_with("✅ Approved"), "{}", shown.1);
}

#[test]
fn without_an_approval_channel_the_model_is_told_nobody_could_approve() {
    let standin = StandIn::start();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    let home = Home::new(&standin, &llm, None);
    write_config(&home, false);
    let mut cmd = home.cmd();
    cmd.env("CAIRN_GATEWAY_PORT", "0")
        .env("CAIRN_TIMEZONE", "UTC");
    let (_daemon, base, token) = daemon_with(cmd, &home.dir, &llm);
    script(&llm);
    let (status, body) = ask_for_note(&base, &token).join().unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(!home.dir.join("workspace/note.txt").exists());
    let requests = llm.requests();
    let result = requests[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap()["content"]
        .to_string();
    assert!(result.contains("nobody was available"), "{result}");
    assert!(!result.contains("user declined"), "{result}");
    // Nothing was put to anyone.
    assert!(standin.world(|w| w.messages.values().all(|m| m.2.is_none())));
}
