//! Black-box tests of `cairn chat` against the fake LLM server.
#![expect(clippy::unwrap_used, reason = "test code unwraps freely")]
#![expect(
    clippy::disallowed_methods,
    reason = "test fixtures may use blocking std::fs"
)]

use assert_cmd::Command;
use cairn_llm::testing::{FakeLlmServer, Scripted};
use predicates::prelude::PredicateBooleanExt;
use predicates::str::contains;
use serde_json::json;

mod context;

struct Env {
    server: FakeLlmServer,
    home: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        Env {
            server: FakeLlmServer::start_on_thread().unwrap(),
            home: tempfile::tempdir().unwrap(),
        }
    }

    fn cairn(&self) -> Command {
        let mut cmd = Command::cargo_bin("cairn").unwrap();
        cmd.env_clear()
            .env("CAIRN_HOME", self.home.path())
            .env("CAIRN_LLM_PROVIDER", "openai")
            .env("CAIRN_LLM_BASE_URL", self.server.base_url_openai())
            .env("CAIRN_LLM_MODEL", "test-model")
            .env("CAIRN_LLM_API_KEY", "sk-test-0123456789")
            .env("CAIRN_LLM_MAX_RETRIES", "0");
        cmd
    }

    fn workspace(&self) -> std::path::PathBuf {
        self.home.path().join("workspace")
    }

    /// The `messages` of the n-th request the model received.
    fn sent(&self, n: usize) -> Vec<serde_json::Value> {
        self.server.requests()[n].body["messages"]
            .as_array()
            .unwrap()
            .clone()
    }
}

fn text_of(messages: &[serde_json::Value]) -> String {
    serde_json::to_string(messages).unwrap()
}

#[test]
fn one_shot_prints_only_the_answer() {
    let env = Env::new();
    env.server.push(Scripted::text("Paris."));
    env.cairn()
        .args(["chat", "-m", "Capital of France?"])
        .assert()
        .success()
        .stdout("Paris.\n");
    let sent = env.sent(0);
    assert_eq!(sent[0]["role"], "system");
    assert!(
        sent[0]["content"]
            .as_str()
            .unwrap()
            .contains("Working directory:")
    );
    assert_eq!(sent.last().unwrap()["content"], "Capital of France?");
}

#[test]
fn one_shot_json_reports_tool_calls_and_usage() {
    let env = Env::new();
    env.server
        .push(Scripted::tool_call("time_now", json!({})).with_usage(20, 5));
    env.server
        .push(Scripted::text("It is noon.").with_usage(30, 4));
    let out = env
        .cairn()
        .args(["chat", "-m", "What time is it?", "--json"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["response"], "It is noon.");
    assert_eq!(v["tool_calls"][0]["tool"], "time_now");
    assert_eq!(v["tool_calls"][0]["status"], "success");
    assert_eq!(v["usage"]["input_tokens"], 50);
    assert_eq!(v["usage"]["output_tokens"], 9);
}

#[test]
fn yes_approves_asked_tools_and_without_it_they_are_declined() {
    let env = Env::new();
    env.server.push(Scripted::tool_call(
        "file_write",
        json!({"path": "note.txt", "content": "hello"}),
    ));
    env.server.push(Scripted::text("Written."));
    env.cairn()
        .args(["chat", "-m", "write a note", "--yes"])
        .assert()
        .success()
        .stdout("Written.\n");
    assert_eq!(
        std::fs::read_to_string(env.workspace().join("note.txt")).unwrap(),
        "hello"
    );

    env.server.push(Scripted::tool_call(
        "file_write",
        json!({"path": "other.txt", "content": "x"}),
    ));
    env.server.push(Scripted::text("I could not write it."));
    env.cairn()
        .args(["chat", "-m", "write another"])
        .assert()
        .success()
        .stdout("I could not write it.\n")
        .stderr(contains("[Approval Required] Tool: file_write"));
    assert!(!env.workspace().join("other.txt").exists());
    let tool_result = env
        .sent(3)
        .iter()
        .rev()
        .find(|m| m["role"] == "tool")
        .cloned()
        .unwrap();
    assert!(
        tool_result["content"]
            .as_str()
            .unwrap()
            .contains("declined"),
        "{tool_result}"
    );
}

#[test]
fn piped_repl_answers_approvals_and_commands_in_order() {
    let env = Env::new();
    env.server.push(Scripted::text("Hello there."));
    env.server.push(Scripted::tool_call(
        "file_write",
        json!({"path": "a.txt", "content": "A"}),
    ));
    env.server.push(Scripted::text("Saved."));
    env.cairn()
        .arg("chat")
        .write_stdin("hi\n/tools\nsave a file\ny\n/ping\n/quit\nnever read\n")
        .assert()
        .success()
        .stdout(contains("Hello there."))
        .stdout(contains("file_write:"))
        .stdout(contains("Saved."))
        .stdout(contains("pong"))
        .stderr(contains("[Approval Required] Tool: file_write"));
    assert_eq!(
        std::fs::read_to_string(env.workspace().join("a.txt")).unwrap(),
        "A"
    );
    assert_eq!(env.server.requests().len(), 3, "/quit stops reading");
}

#[test]
fn a_restart_resumes_the_thread() {
    let env = Env::new();
    env.server.push(Scripted::text("Nice to meet you, Ada."));
    env.server.push(Scripted::text("You are Ada."));
    env.cairn()
        .args(["chat", "-m", "My name is Ada."])
        .assert()
        .success();
    env.cairn()
        .args(["chat", "-m", "What is my name?"])
        .assert()
        .success()
        .stdout("You are Ada.\n");
    let second = text_of(&env.sent(1));
    assert!(
        second.contains("My name is Ada.") && second.contains("Nice to meet you, Ada."),
        "{second}"
    );

    // --new starts a fresh thread.
    env.server.push(Scripted::text("I don't know."));
    env.cairn()
        .args(["chat", "--new", "-m", "What is my name?"])
        .assert()
        .success();
    assert!(!text_of(&env.sent(2)).contains("My name is Ada."));
}

#[test]
fn undo_in_the_repl_drops_the_last_turn() {
    let env = Env::new();
    for answer in ["one", "two", "three"] {
        env.server.push(Scripted::text(answer));
    }
    env.cairn()
        .arg("chat")
        .write_stdin("first\nsecond\n/undo\nthird\n")
        .assert()
        .success()
        .stdout(contains("Undone"));
    let third = text_of(&env.sent(2));
    assert!(
        third.contains("first") && !third.contains("second"),
        "{third}"
    );

    // The undo stacks persist across processes.
    env.server.push(Scripted::text("four"));
    env.cairn()
        .arg("chat")
        .write_stdin("/undo\n/redo\nfourth\n")
        .assert()
        .success()
        .stdout(contains("Redone"));
    let fourth = text_of(&env.sent(3));
    assert!(fourth.contains("third"), "{fourth}");
}

#[test]
fn provider_errors_exit_non_zero_with_the_reason() {
    let env = Env::new();
    env.server.push(Scripted::auth_error());
    env.cairn()
        .args(["chat", "-m", "hello"])
        .assert()
        .code(1)
        .stderr(contains("error:"))
        .stderr(contains("sk-test-0123456789").not());
}

#[test]
fn without_a_provider_the_message_says_what_to_set() {
    let home = tempfile::tempdir().unwrap();
    let mut cmd = Command::cargo_bin("cairn").unwrap();
    cmd.env_clear().env("CAIRN_HOME", home.path());
    cmd.args(["chat", "-m", "hello"])
        .assert()
        .failure()
        .stderr(contains("CAIRN_LLM_PROVIDER"))
        .stderr(contains("CAIRN_LLM_MODEL"));
}

#[test]
fn unknown_commands_never_reach_the_model() {
    let env = Env::new();
    env.cairn()
        .args(["chat", "-m", "/frobnicate"])
        .assert()
        .code(1)
        .stderr(contains("Unknown command /frobnicate"));
    env.cairn()
        .args(["chat", "-m", "/undoo"])
        .assert()
        .code(1)
        .stderr(contains("Did you mean /undo?"));
    // No daemon runs a heartbeat yet, so there is no command promising one.
    env.cairn()
        .args(["chat", "-m", "/heartbeat"])
        .assert()
        .code(1)
        .stderr(contains(
            "Unknown command /heartbeat. Type /help for the list.",
        ));
    env.cairn()
        .args(["chat", "-m", "/help"])
        .assert()
        .success()
        .stdout(contains("/undo"))
        .stdout(contains("heartbeat").not());
    assert!(env.server.requests().is_empty());
}

#[test]
fn jobs_from_chat_run_and_are_listed() {
    let env = Env::new();
    env.server.push(Scripted::text("the job is done"));
    let started = env
        .cairn()
        .args(["chat", "-m", "/job write a haiku about stones"])
        .assert()
        .success()
        .stdout(contains("Started job"))
        .get_output()
        .stdout
        .clone();
    // The id it says to ask about is accepted back, by chat and by the CLI.
    let started = String::from_utf8(started).unwrap();
    let short = started
        .split("/status ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no /status ID in {started:?}"))
        .to_string();
    env.cairn()
        .args(["chat", "-m", &format!("/status {short}")])
        .assert()
        .success()
        .stdout(contains("write a haiku about stones"))
        .stdout(contains("the job is done"));
    env.cairn()
        .args(["job", "show", &short])
        .assert()
        .success()
        .stdout(contains("the job is done"));
    let out = env
        .cairn()
        .args(["job", "list", "--json"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let jobs: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(jobs[0]["state"], "completed", "{jobs}");
    assert_eq!(jobs[0]["result"], "the job is done");
    env.cairn()
        .args(["chat", "-m", "/jobs"])
        .assert()
        .success()
        .stdout(contains("write a haiku about stones"));
}

/// `/job --plan`: the job asks for a plan of steps first, then works to it.
#[test]
fn a_job_from_chat_with_plan_plans_its_steps_first() {
    let env = Env::new();
    env.server
        .push(Scripted::text("1. read the notes\n2. sort them"));
    env.server.push(Scripted::text("sorted"));
    env.cairn()
        .args(["chat", "-m", "/job --plan tidy the notes"])
        .assert()
        .success()
        .stdout(contains("Started job"));
    let out = env
        .cairn()
        .args(["job", "list", "--json"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let jobs: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(jobs[0]["state"], "completed", "{jobs}");
    assert_eq!(jobs[0]["title"], "tidy the notes", "{jobs}");
    assert_eq!(jobs[0]["use_planning"], true, "{jobs}");
    let requests = env.server.requests();
    assert_eq!(requests.len(), 2, "one planning call, then the work");
    let work = requests[1].body["messages"].to_string();
    assert!(
        work.contains("Plan:") && work.contains("2. sort them"),
        "the work is given the plan: {work}"
    );
}

#[test]
fn the_cost_guard_refuses_a_job_after_the_budget_is_spent_even_across_a_restart() {
    let env = Env::new();
    // 1,000 input tokens at $20 per million = 2 cents, over a 1-cent daily budget.
    std::fs::write(
        env.home.path().join("config.toml"),
        "[cost]\ndaily_budget_cents = 1\n\n[llm.prices.\"test-model\"]\ninput_micros_per_mtok = 20000000\noutput_micros_per_mtok = 0\n",
    )
    .unwrap();
    env.server.push(Scripted::text("hello").with_usage(1000, 0));
    env.cairn()
        .args(["chat", "-m", "hi"])
        .assert()
        .success()
        .stdout("hello\n");

    // A new process: the day's spend was kept, so the job's first call is refused.
    env.cairn()
        .args(["chat", "-m", "/job tidy the notes"])
        .assert()
        .success();
    let out = env
        .cairn()
        .args(["job", "list", "--json"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let jobs: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(jobs[0]["state"], "failed", "{jobs}");
    let error = jobs[0]["error"].as_str().unwrap();
    assert!(error.contains("daily LLM budget"), "{error}");
    assert_eq!(
        env.server.requests().len(),
        1,
        "the refused call never reached the provider"
    );

    // Chat is refused the same way, with the reason.
    env.cairn()
        .args(["chat", "-m", "anything?"])
        .assert()
        .code(1)
        .stderr(contains("daily LLM budget"));
    let out = env
        .cairn()
        .args(["cost", "--json"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let cost: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(cost["spent_micros"], 20_000);
    assert_eq!(cost["exceeded"], true);
}

#[test]
fn always_survives_a_restart_of_the_chat() {
    let env = Env::new();
    env.server.push(Scripted::tool_call(
        "file_write",
        json!({"path": "a.txt", "content": "A"}),
    ));
    env.server.push(Scripted::text("first saved"));
    env.cairn()
        .arg("chat")
        .write_stdin("save a\na\n")
        .assert()
        .success()
        .stdout(contains("first saved"));

    // A new, non-interactive process: nobody could answer, yet nothing is asked.
    env.server.push(Scripted::tool_call(
        "file_write",
        json!({"path": "b.txt", "content": "B"}),
    ));
    env.server.push(Scripted::text("second saved"));
    env.cairn()
        .args(["chat", "-m", "save b"])
        .assert()
        .success()
        .stdout("second saved\n")
        .stderr(contains("Approval Required").not());
    assert_eq!(
        std::fs::read_to_string(env.workspace().join("b.txt")).unwrap(),
        "B"
    );
}
