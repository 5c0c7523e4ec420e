//! Several agents (`[[agents]]`): a chat bound to `family` is answered by
//! family's model, with family's identity and tools, and never sees
//! main's; main answers the rest.

use cairn_llm::testing::{FakeLlmServer, Scripted};
use serde_json::{Value, json};

use super::standin::{StandIn, TOKEN};
use super::{Home, OWNER};

/// Family's person, in a private chat of their own.
const KID: i64 = 43;

fn write_config(home: &Home) {
    let config = format!(
        "[gateway]\nenabled = false\n\n[channels.tg]\ntype = \"telegram\"\nbot_token = \"{TOKEN}\"\n\
         chat_id = \"{OWNER}\"\ninbound = true\nallowed_users = [\"{OWNER}\", \"{KID}\"]\napi_url = \"{}\"\n\n\
         [[agents]]\nid = \"family\"\nname = \"Pip\"\nmodel = \"family-model\"\n\
         tools = {{ deny = [\"shell\"] }}\n\n[[agents.bindings]]\nchannel = \"tg\"\nchat = \"{KID}\"\n",
        home.api_url
    );
    std::fs::write(home.dir.join("config.toml"), config).unwrap();
    let main = home.dir.join("workspace");
    std::fs::create_dir_all(&main).unwrap();
    std::fs::write(main.join("USER.md"), "MAIN-IDENTITY-7731: the owner.\n").unwrap();
    std::fs::write(main.join("secret.txt"), "PLANTED-SECRET-5150\n").unwrap();
    let family = home.dir.join("agents/family");
    std::fs::create_dir_all(&family).unwrap();
    std::fs::write(family.join("USER.md"), "FAMILY-IDENTITY-4410: the kids.\n").unwrap();
}

/// The system prompt of a request.
fn system(body: &Value) -> String {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "system")
        .map(|m| m["content"].to_string())
        .collect()
}

/// The tools a request offers, by name.
fn tools(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|t| {
                    t["function"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string()
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_chat_bound_to_an_agent_gets_its_model_identity_and_tools_and_nothing_of_mains() {
    let standin = StandIn::start();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    let home = Home::new(&standin, &llm, None);
    write_config(&home);
    let daemon = home.daemon(&standin);

    llm.push(Scripted::text("hello from main"));
    standin.message(OWNER, "who are you?");
    standin.until("main's answer", |w| {
        w.messages.values().any(|m| m.1 == "hello from main")
    });
    // Family reads a file of main's workspace by its absolute path.
    let secret = home.dir.join("workspace/secret.txt");
    llm.push(Scripted::tool_call(
        "file_read",
        json!({"path": secret.display().to_string()}),
    ));
    llm.push(Scripted::text("hello from Pip"));
    standin.message(KID, "read the secret");
    standin.until("family's answer", |w| {
        w.messages.values().any(|m| m.1 == "hello from Pip")
    });
    daemon.stop();

    let requests: Vec<Value> = llm.requests().into_iter().map(|r| r.body).collect();
    assert_eq!(requests.len(), 3, "{requests:#?}");
    let (main, family, after_tool) = (&requests[0], &requests[1], &requests[2]);
    assert_eq!(main["model"], "test-model");
    assert_eq!(family["model"], "family-model");
    assert_eq!(after_tool["model"], "family-model");
    let (main_prompt, family_prompt) = (system(main), system(family));
    assert!(main_prompt.contains("MAIN-IDENTITY-7731"), "{main_prompt}");
    assert!(!main_prompt.contains("FAMILY-IDENTITY-4410"));
    assert!(
        family_prompt.contains("FAMILY-IDENTITY-4410"),
        "{family_prompt}"
    );
    assert!(family_prompt.contains("Pip"), "{family_prompt}");
    assert!(
        !family_prompt.contains("MAIN-IDENTITY-7731"),
        "{family_prompt}"
    );
    // Denied, shell is not even offered to family; main has it.
    assert!(
        tools(main).iter().any(|t| t == "shell"),
        "{:?}",
        tools(main)
    );
    assert!(
        !tools(family).iter().any(|t| t == "shell"),
        "{:?}",
        tools(family)
    );
    // Main's file is outside family's workspace: refused, never read.
    let everything = after_tool.to_string();
    assert!(!everything.contains("PLANTED-SECRET-5150"), "{everything}");
    let result: Vec<&Value> = after_tool["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .collect();
    assert_eq!(result.len(), 1, "{after_tool}");
    let content = result[0]["content"].as_str().unwrap();
    assert!(
        content.contains("status=\"failed\"") && content.contains("is outside the workspace"),
        "{content}"
    );
    // The workspace it was given is family's own.
    assert!(home.dir.join("agents/family/USER.md").exists());
}

#[test]
fn a_tool_the_owner_denies_while_the_daemon_runs_leaves_every_agent() {
    let standin = StandIn::start();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    let home = Home::new(&standin, &llm, None);
    write_config(&home);
    let daemon = home.daemon(&standin);
    let family_tools = |n: usize| -> Vec<String> {
        let answer = format!("answer {n}");
        llm.push(Scripted::text(answer.clone()));
        standin.message(KID, &format!("question {n}"));
        standin.until("family's answer", |w| {
            w.messages.values().any(|m| m.1 == answer)
        });
        tools(&llm.requests().last().unwrap().body)
    };
    assert!(family_tools(0).iter().any(|t| t == "file_read"));
    // The owner denies file_read for everyone; the daemon reloads.
    let config = std::fs::read_to_string(home.dir.join("config.toml")).unwrap();
    let denied = config.replacen(
        "[[agents]]",
        "[tools.policy]\ndeny = [\"file_read\"]\n\n[[agents]]",
        1,
    );
    std::fs::write(home.dir.join("config.toml"), denied).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut n = 1;
    while family_tools(n).iter().any(|t| t == "file_read") {
        assert!(
            std::time::Instant::now() < deadline,
            "the reload never reached family"
        );
        n += 1;
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    daemon.stop();
}

#[test]
fn an_agent_bound_while_the_daemon_runs_takes_its_chat_and_leaves_it_when_removed() {
    let standin = StandIn::start();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    let home = Home::new(&standin, &llm, None);
    write_config(&home);
    let with_family = std::fs::read_to_string(home.dir.join("config.toml")).unwrap();
    let (without, _) = with_family.split_once("[[agents]]").unwrap();
    std::fs::write(home.dir.join("config.toml"), without).unwrap();
    let daemon = home.daemon(&standin);
    // The model the kid's next message is answered with.
    let kid_model = |n: &mut usize| -> String {
        *n += 1;
        let answer = format!("answer {n}");
        llm.push(Scripted::text(answer.clone()));
        standin.message(KID, &format!("question {n}"));
        standin.until("an answer", |w| w.messages.values().any(|m| m.1 == answer));
        llm.requests().last().unwrap().body["model"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let until_model = |model: &str, n: &mut usize| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while kid_model(n) != model {
            assert!(
                std::time::Instant::now() < deadline,
                "the reload never gave the kid's chat to {model}"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    };
    let mut n = 0;
    assert_eq!(kid_model(&mut n), "test-model");
    // The owner adds family, bound to the kid's chat; the daemon reloads.
    std::fs::write(home.dir.join("config.toml"), &with_family).unwrap();
    until_model("family-model", &mut n);
    let family = llm.requests().last().unwrap().body.clone();
    assert!(system(&family).contains("FAMILY-IDENTITY-4410"), "{family}");
    // The owner's own chat stays main's.
    llm.push(Scripted::text("still main"));
    standin.message(OWNER, "and me?");
    standin.until("main's answer", |w| {
        w.messages.values().any(|m| m.1 == "still main")
    });
    assert_eq!(llm.requests().last().unwrap().body["model"], "test-model");
    // Removed again: the kid's chat goes back to main.
    std::fs::write(home.dir.join("config.toml"), without).unwrap();
    until_model("test-model", &mut n);
    daemon.stop();
}
