//! `--agent` on the commands that act for an agent (`[[agents]]`): `cairn
//! chat` talks to that agent (its model, its identity) in a conversation of
//! its own, `cairn memory` works on its memory and workspace, `cairn skill`
//! lists its workspace's skills; an agent not configured is bad input
//! naming the configured ones.
#![expect(
    clippy::unwrap_used,
    clippy::disallowed_methods,
    reason = "test code unwraps freely and may use blocking std::fs"
)]

mod common;

use std::path::Path;
use std::process::Output;

use cairn_llm::testing::{FakeLlmServer, Scripted};
use common::agents::{cairn, system};
use serde_json::Value;

/// A home with `main` and `family` (model `family-model`, its own USER.md).
fn home_with_family() -> tempfile::TempDir {
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
    temp
}

fn run(home: &Path, llm: &FakeLlmServer, args: &[&str]) -> Output {
    cairn(home, llm).args(args).output().unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Succeeded, or fails showing why.
fn ok(out: Output) -> Output {
    assert!(
        out.status.success(),
        "{}\n{}",
        stdout(&out),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Refused as bad input (exit 2), naming the agent and the configured ones.
fn refused_naming_the_agents(out: &Output) {
    assert_eq!(out.status.code(), Some(2), "{}", stdout(out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--agent nobody: no such agent; the agents are main, family"),
        "{stderr}"
    );
}

#[test]
fn chat_with_an_agent_is_its_model_identity_and_conversation() {
    let temp = home_with_family();
    let home = temp.path();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    llm.push(Scripted::text("noted"));
    let out = ok(run(
        home,
        &llm,
        &[
            "chat",
            "--agent",
            "family",
            "-m",
            "the hideout is the treehouse",
        ],
    ));
    assert_eq!(stdout(&out).trim(), "noted");
    // Main's terminal conversation is not family's.
    llm.push(Scripted::text("no idea"));
    ok(run(home, &llm, &["chat", "-m", "where is the hideout?"]));
    // Family's goes on where it was.
    llm.push(Scripted::text("the treehouse"));
    ok(run(
        home,
        &llm,
        &["chat", "--agent", "family", "-m", "where is it?"],
    ));
    // `main` named is main.
    llm.push(Scripted::text("still no idea"));
    ok(run(
        home,
        &llm,
        &["chat", "--agent", "main", "-m", "and now?"],
    ));

    let requests: Vec<Value> = llm.requests().into_iter().map(|r| r.body).collect();
    assert_eq!(requests.len(), 4);
    let models: Vec<&str> = requests
        .iter()
        .map(|r| r["model"].as_str().unwrap())
        .collect();
    assert_eq!(
        models,
        ["family-model", "test-model", "family-model", "test-model"]
    );
    let family = system(&requests[0]);
    assert!(
        family.contains("FAMILY-IDENTITY-4410") && family.contains("Pip"),
        "{family}"
    );
    assert!(!family.contains("MAIN-IDENTITY-7731"), "{family}");
    assert!(system(&requests[1]).contains("MAIN-IDENTITY-7731"));
    let said = |i: usize| requests[i]["messages"].to_string();
    assert!(!said(1).contains("treehouse"), "{}", said(1));
    assert!(
        said(2).contains("the hideout is the treehouse"),
        "{}",
        said(2)
    );
    assert!(
        said(3).contains("where is the hideout?") && !said(3).contains("treehouse"),
        "{}",
        said(3)
    );

    refused_naming_the_agents(&run(home, &llm, &["chat", "--agent", "nobody", "-m", "hi"]));
    assert_eq!(
        llm.requests().len(),
        4,
        "the unknown agent reached the model"
    );
}

/// The JSON of `cairn --json ARGS…`.
fn json_of(home: &Path, llm: &FakeLlmServer, args: &[&str]) -> Value {
    let out = ok(cairn(home, llm).arg("--json").args(args).output().unwrap());
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn memory_with_an_agent_is_that_agents_memory_and_workspace() {
    let temp = home_with_family();
    let home = temp.path();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    ok(run(
        home,
        &llm,
        &[
            "memory",
            "add",
            "the kids' hideout is the treehouse",
            "--key",
            "hideout",
            "--agent",
            "family",
        ],
    ));
    // The flag may come before the subcommand too.
    ok(run(
        home,
        &llm,
        &[
            "memory",
            "--agent",
            "main",
            "add",
            "my desk is by the window",
        ],
    ));
    let hits = |args: &[&str]| -> String { json_of(home, &llm, args)["hits"].to_string() };
    let main = hits(&["memory", "search", "hideout treehouse"]);
    assert!(
        !main.contains("treehouse"),
        "main found family's memory: {main}"
    );
    let family = hits(&["memory", "search", "hideout treehouse", "--agent", "family"]);
    assert!(family.contains("treehouse"), "{family}");
    let family = hits(&["memory", "search", "desk window", "--agent", "family"]);
    assert!(
        !family.contains("window"),
        "family found main's memory: {family}"
    );

    let listed = json_of(home, &llm, &["memory", "list", "--agent", "family"]);
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(
        json_of(home, &llm, &["memory", "stats", "--agent", "family"])["total"],
        1
    );

    // The snapshot goes to the agent's own workspace.
    let path = json_of(home, &llm, &["memory", "export", "--agent", "family"])["path"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        Path::new(&path).starts_with(home.join("agents/family")),
        "{path}"
    );
    assert!(
        std::fs::read_to_string(&path)
            .unwrap()
            .contains("treehouse")
    );

    // Forgetting by key forgets family's, not a key main does not have.
    let out = run(home, &llm, &["memory", "forget", "--key", "hideout"]);
    assert_eq!(out.status.code(), Some(1), "main forgot family's memory");
    ok(run(
        home,
        &llm,
        &["memory", "forget", "--key", "hideout", "--agent", "family"],
    ));

    refused_naming_the_agents(&run(home, &llm, &["memory", "list", "--agent", "nobody"]));
    assert!(llm.requests().is_empty());
}

#[test]
fn skills_with_an_agent_are_its_workspaces() {
    let temp = home_with_family();
    let home = temp.path();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    let skill = |dir: &str, name: &str| {
        let folder = home.join(dir).join("skills").join(name);
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(
            folder.join("SKILL.md"),
            format!("---\nname: {name}\ndescription: The {name} skill.\n---\nBODY OF {name}\n"),
        )
        .unwrap();
    };
    skill("workspace", "haiku");
    skill("agents/family", "bedtime-story");
    let names = |args: &[&str]| -> Vec<String> {
        json_of(home, &llm, args)["skills"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names(&["skill", "list"]), ["haiku"]);
    assert_eq!(
        names(&["skill", "list", "--agent", "family"]),
        ["bedtime-story"]
    );
    let out = ok(run(
        home,
        &llm,
        &["skill", "--agent", "family", "show", "bedtime-story"],
    ));
    assert!(stdout(&out).contains("BODY OF bedtime-story"));
    let out = run(home, &llm, &["skill", "show", "bedtime-story"]);
    assert_eq!(out.status.code(), Some(2), "main has family's skill");

    refused_naming_the_agents(&run(home, &llm, &["skill", "list", "--agent", "nobody"]));
}

/// `cairn export` keeps each memory's agent and `shared`, and `cairn
/// import` puts them back under their agent: family's private memory stays
/// family's, a shared one is found by main too.
#[test]
fn export_and_import_keep_each_memorys_agent_and_sharing() {
    let temp = home_with_family();
    let home = temp.path();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    let add = |args: &[&str]| ok(run(home, &llm, args));
    add(&[
        "memory",
        "add",
        "the kids' hideout is the treehouse",
        "--agent",
        "family",
    ]);
    add(&["memory", "add", "my desk is by the window"]);
    let dir = home.join("exported");
    ok(run(home, &llm, &["export", dir.to_str().unwrap()]));
    let mut lines = std::fs::read_to_string(dir.join("memories.jsonl")).unwrap();
    assert_eq!(lines.lines().count(), 2, "{lines}");
    let family_line = lines.lines().find(|l| l.contains("treehouse")).unwrap();
    assert!(family_line.contains(r#""agent":"family""#), "{lines}");
    let main_line = lines.lines().find(|l| l.contains("window")).unwrap();
    assert!(!main_line.contains("agent"), "{lines}");
    // One more, shared by family, written as a person would edit the file.
    lines.push_str(
        r#"{"category":"custom","content":"dinner is at six","source":"cli","agent":"family","shared":true}"#,
    );
    lines.push('\n');
    std::fs::write(dir.join("memories.jsonl"), lines).unwrap();

    let other = home_with_family();
    let other = other.path();
    ok(run(other, &llm, &["import", dir.to_str().unwrap()]));
    let hits = |args: &[&str]| -> String { json_of(other, &llm, args)["hits"].to_string() };
    let main = hits(&["memory", "search", "hideout treehouse"]);
    assert!(
        !main.contains("treehouse"),
        "main found family's memory: {main}"
    );
    let family = hits(&["memory", "search", "hideout treehouse", "--agent", "family"]);
    assert!(family.contains("treehouse"), "{family}");
    let main = hits(&["memory", "search", "dinner six"]);
    assert!(main.contains("dinner is at six"), "{main}");
    let main = hits(&["memory", "search", "desk window"]);
    assert!(main.contains("window"), "{main}");
    assert!(llm.requests().is_empty());
}
