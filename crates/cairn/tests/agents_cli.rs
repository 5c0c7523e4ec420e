//! Several agents (`[[agents]]`) through the daemon's OpenAI-compatible
//! API: `cairn:<id>` answers as that agent, with its model and identity,
//! and `/v1/models` lists every agent.
#![expect(
    clippy::unwrap_used,
    clippy::disallowed_methods,
    reason = "test code unwraps freely and may use blocking std::fs"
)]

mod common;

use cairn_llm::testing::{FakeLlmServer, Scripted};
use common::agents::*;
use serde_json::{Value, json};

#[test]
fn v1_answers_as_the_agent_its_model_names_and_lists_every_agent() {
    let temp = tempfile::tempdir().unwrap();
    let home = temp.path();
    std::fs::write(
        home.join("config.toml"),
        "[[agents]]\nid = \"family\"\nname = \"Pip\"\nmodel = \"family-model\"\n",
    )
    .unwrap();
    std::fs::create_dir_all(home.join("workspace")).unwrap();
    std::fs::write(home.join("workspace/USER.md"), "MAIN-IDENTITY-7731\n").unwrap();
    std::fs::create_dir_all(home.join("agents/family")).unwrap();
    std::fs::write(home.join("agents/family/USER.md"), "FAMILY-IDENTITY-4410\n").unwrap();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    let (_daemon, base, token) = daemon(home, &llm);

    let (status, models) = call(&base, &token, "/v1/models", None);
    assert_eq!(status, 200, "{models}");
    let ids: Vec<&str> = models["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["test-model", "cairn", "cairn:family"]);

    llm.push(Scripted::text("I am Pip"));
    let (status, answer) = ask(&base, &token, "cairn:family");
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["choices"][0]["message"]["content"], "I am Pip");
    llm.push(Scripted::text("I am main"));
    let (status, answer) = ask(&base, &token, "cairn");
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["choices"][0]["message"]["content"], "I am main");
    let (status, refused) = ask(&base, &token, "cairn:nobody");
    assert_eq!(status, 404, "{refused}");
    assert_eq!(refused["error"]["code"], "model_not_found", "{refused}");

    let requests: Vec<Value> = llm.requests().into_iter().map(|r| r.body).collect();
    assert_eq!(requests.len(), 2, "the unknown agent reached the model");
    assert_eq!(requests[0]["model"], "family-model");
    let family = system(&requests[0]);
    assert!(
        family.contains("FAMILY-IDENTITY-4410") && family.contains("Pip"),
        "{family}"
    );
    assert!(!family.contains("MAIN-IDENTITY-7731"), "{family}");
    assert_eq!(requests[1]["model"], "test-model");
    let main = system(&requests[1]);
    assert!(
        main.contains("MAIN-IDENTITY-7731") && !main.contains("FAMILY-IDENTITY-4410"),
        "{main}"
    );
}

#[test]
fn doctor_asks_the_llm_about_each_agents_own_model() {
    let temp = tempfile::tempdir().unwrap();
    let home = temp.path();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    std::fs::write(
        home.join("config.toml"),
        "[[agents]]\nid = \"family\"\nmodel = \"fake-model\"\n\n[[agents]]\nid = \"work\"\nmodel = \"ghost-model\"\n",
    )
    .unwrap();
    let out = cairn(home, &llm).arg("doctor").output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let status = |name: &str| {
        stdout
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some(name))
            .and_then(|l| l.split_whitespace().next())
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(status("agents"), "warn", "{stdout}");
    let family = stdout
        .lines()
        .find(|l| l.contains("agent family") && l.contains("fake-model"));
    assert!(
        family.is_some_and(|l| l.contains("serves fake-model")),
        "{stdout}"
    );
    let work = stdout
        .lines()
        .find(|l| l.contains("agent work") && l.contains("ghost-model"));
    assert!(work.is_some_and(|l| !l.contains("serves")), "{stdout}");

    // Offline, nothing is asked.
    let asked = llm.requests().len();
    let out = cairn(home, &llm)
        .args(["doctor", "--offline"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains("ghost-model"), "{stdout}");
    assert_eq!(llm.requests().len(), asked);
}

#[test]
fn doctor_checks_the_agents_and_a_bad_table_is_named_by_file_line_and_field() {
    let temp = tempfile::tempdir().unwrap();
    let home = temp.path();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    std::fs::write(
        home.join("config.toml"),
        "[[agents]]\nid = \"family\"\n\n[[agents.bindings]]\nchannel = \"wa\"\n",
    )
    .unwrap();
    let out = cairn(home, &llm).arg("doctor").output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.contains("agents"))
        .unwrap_or_default();
    assert!(line.starts_with("FAIL"), "{stdout}");
    assert!(
        stdout.contains("agent family: bound to channel wa, which [channels] does not have"),
        "{stdout}"
    );
    assert!(stdout.contains("agents/family"), "{stdout}");

    std::fs::write(
        home.join("config.toml"),
        "[tools.policy]\nautonomy = \"supervised\"\n\n[[agents]]\nid = \"boss\"\nautonomy = \"full\"\n",
    )
    .unwrap();
    // doctor asked the LLM for its models; the chat must ask it nothing.
    let asked = llm.requests().len();
    let out = cairn(home, &llm)
        .args(["chat", "-m", "hi"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("config.toml:4: agents[0].autonomy: Full is more than tools.policy.autonomy (Supervised)"), "{stderr}");
    assert_eq!(
        llm.requests().len(),
        asked,
        "the refused chat reached the model"
    );
}

/// The tool results the model was sent in the last request.
fn last_tool_results(llm: &FakeLlmServer) -> String {
    let last = llm.requests().last().unwrap().body.clone();
    last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].to_string())
        .collect()
}

#[test]
fn what_an_agent_remembers_is_its_own_unless_it_shares_it() {
    let temp = tempfile::tempdir().unwrap();
    let home = temp.path();
    std::fs::write(
        home.join("config.toml"),
        "[tools.policy]\nautonomy = \"full\"\n\n[[agents]]\nid = \"family\"\n",
    )
    .unwrap();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    let (_daemon, base, token) = daemon(home, &llm);
    let turn = |model: &str, tool: &str, args: Value| {
        llm.push(Scripted::tool_call(tool, args));
        llm.push(Scripted::text("done"));
        let (status, answer) = ask(&base, &token, model);
        assert_eq!(status, 200, "{answer}");
        last_tool_results(&llm)
    };
    let stored = turn(
        "cairn:family",
        "memory_store",
        json!({"key": "hideout", "content": "the kids' hideout is the treehouse"}),
    );
    assert!(!stored.contains("failed"), "{stored}");
    let recalled = turn(
        "cairn",
        "memory_recall",
        json!({"query": "hideout treehouse"}),
    );
    assert!(
        !recalled.contains("treehouse"),
        "main found family's memory: {recalled}"
    );
    let recalled = turn(
        "cairn:family",
        "memory_recall",
        json!({"query": "hideout treehouse"}),
    );
    assert!(recalled.contains("treehouse"), "{recalled}");
    turn(
        "cairn:family",
        "memory_store",
        json!({"key": "dinner", "content": "dinner is at six", "shared": true}),
    );
    let recalled = turn("cairn", "memory_recall", json!({"query": "dinner six"}));
    assert!(recalled.contains("dinner is at six"), "{recalled}");
    assert!(!recalled.contains("treehouse"), "{recalled}");
}

/// `family`'s shell is confined to its own workspace: a file planted in
/// `main`'s workspace is refused by the sandbox (Landlock; the shell's
/// arguments are not path-checked, and with `landlock = false` this test
/// reads the secret), while family's own file is read.
#[test]
fn an_agents_shell_cannot_read_mains_workspace() {
    if std::env::var_os("CAIRN_TEST_NO_LANDLOCK").is_some() {
        // No Landlock here: the sandbox half cannot be shown (sandbox_cli
        // fails CI on a machine without it unless this is set).
        return;
    }
    let temp = tempfile::tempdir().unwrap();
    let home = temp.path();
    std::fs::write(
        home.join("config.toml"),
        "[tools.policy]\nautonomy = \"full\"\n\n[[agents]]\nid = \"family\"\n",
    )
    .unwrap();
    std::fs::create_dir_all(home.join("workspace")).unwrap();
    std::fs::write(home.join("workspace/secret.txt"), "PLANTED-SECRET-5150\n").unwrap();
    std::fs::create_dir_all(home.join("agents/family")).unwrap();
    std::fs::write(home.join("agents/family/own.txt"), "FAMILY-OWN-7\n").unwrap();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    let (_daemon, base, token) = daemon(home, &llm);
    let shell = |command: &str| {
        llm.push(Scripted::tool_call("shell", json!({ "command": command })));
        llm.push(Scripted::text("done"));
        let (status, answer) = ask(&base, &token, "cairn:family");
        assert_eq!(status, 200, "{answer}");
        last_tool_results(&llm)
    };
    let own = shell("cat own.txt");
    assert!(own.contains("FAMILY-OWN-7"), "{own}");
    let planted = shell("cat ../../workspace/secret.txt");
    assert!(!planted.contains("PLANTED-SECRET-5150"), "{planted}");
    assert!(planted.contains("Permission denied"), "{planted}");
}
