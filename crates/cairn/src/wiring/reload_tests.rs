//! A running runtime (real store, fake LLM server over HTTP, real tools)
//! whose configuration is reloaded, observed through chat turns.
#![expect(
    clippy::disallowed_methods,
    reason = "test fixtures may use blocking std::fs"
)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use cairn_agent::ToolStatus;
use cairn_agent::agents::Chats;
use cairn_agent::chat::{ChatService, ChatSink, Inbound, Reply, TurnReport};
use cairn_agent::runner::{ApprovalAnswer, ApprovalRequest, Approver};
use cairn_core::config::{Config, ConfigInput};
use cairn_llm::testing::{FakeLlmServer, Scripted};
use cairn_store::Store;
use secrecy::ExposeSecret;
use serde_json::json;
use tokio::sync::{Notify, mpsc};

use crate::daemon::reload::{ReloadReport, Reloader};
use crate::wiring::{
    Automation, automation, chat_service_unpruned, chats, parse_tools, register_agent_reload,
    register_reloads,
};

/// A bound on every wait for something observable.
const LIMIT: Duration = Duration::from_secs(30);

struct Harness {
    _dir: tempfile::TempDir,
    home: PathBuf,
    llm: FakeLlmServer,
    automation: Automation,
    chat: Arc<ChatService>,
    chats: Arc<Chats>,
    reloader: Reloader,
}

impl Harness {
    async fn start(extra: &str) -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let llm = FakeLlmServer::start().await.unwrap();
        let config = load(&home, &file(&llm, extra));
        let (store, _) = Store::open(config.database_url.expose_secret())
            .await
            .unwrap();
        // As the daemon's start-up does: a reload of [tools] replaces it.
        cairn_test_support::agent::host_sandbox(
            parse_tools(&config).unwrap().shell.sandbox_settings(),
        );
        let automation = automation(&config, &store, None).await.unwrap();
        let rt = automation.runtime.as_ref().unwrap();
        let chat = chat_service_unpruned(&config, rt);
        // As the daemon does: every agent's chat, and their reload.
        let chats = chats(&config, rt, Arc::clone(&chat)).unwrap();
        let mut reloader = Reloader::new(config);
        register_reloads(&mut reloader, &automation);
        register_agent_reload(&mut reloader, rt, &chats);
        Harness {
            _dir: dir,
            home,
            llm,
            automation,
            chat,
            chats,
            reloader,
        }
    }

    async fn reload(&mut self, extra: &str) -> ReloadReport {
        let config = load(&self.home, &file(&self.llm, extra));
        self.reloader.reload(config).await
    }

    async fn say(&self, text: &str) -> Reply {
        say(&self.chat, text, Arc::new(Approve::default())).await
    }

    async fn answer(&self, text: &str) -> TurnReport {
        match self.say(text).await {
            Reply::Answer(report) => *report,
            other => panic!("not an answer: {other:?}"),
        }
    }

    fn runtime(&self) -> &crate::wiring::Runtime {
        self.automation.runtime.as_ref().unwrap()
    }

    /// The model named in each request the fake server received.
    fn models(&self) -> Vec<String> {
        self.llm
            .requests()
            .iter()
            .map(|r| r.body["model"].as_str().unwrap_or_default().to_string())
            .collect()
    }
}

/// config.toml: the fake server as the OpenAI-compatible provider, then `extra`.
fn file(llm: &FakeLlmServer, extra: &str) -> String {
    format!(
        "[llm]\nprovider = \"openai\"\nmodel = \"model-one\"\nbase_url = \"{}\"\napi_key = \"sk-test-0123456789\"\nmax_retries = 0\n{extra}",
        llm.base_url_openai()
    )
}

fn load(home: &Path, text: &str) -> Config {
    Config::load(&ConfigInput {
        home: home.to_path_buf(),
        file: Some((home.join("config.toml"), text.to_string())),
        env: Default::default(),
        system_zone: Some("UTC".into()),
        secrets: Default::default(),
    })
    .unwrap()
}

async fn say(chat: &ChatService, text: &str, approver: Arc<Approve>) -> Reply {
    let inbound = Inbound {
        user_id: "owner".into(),
        channel: "test".into(),
        thread: None,
        text: text.into(),
        images: Vec::new(),
    };
    chat.handle(inbound, &Sink(approver)).await
}

/// Approves every call; when gated, first says it was asked and waits.
#[derive(Default)]
struct Approve {
    gate: Option<(mpsc::UnboundedSender<String>, Arc<Notify>)>,
}

#[async_trait]
impl Approver for Approve {
    async fn approve(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        if let Some((asked, go)) = &self.gate {
            asked.send(request.tool.clone()).unwrap();
            go.notified().await;
        }
        ApprovalAnswer::Yes
    }

    fn person_present(&self) -> bool {
        true
    }
}

struct Sink(Arc<Approve>);

impl ChatSink for Sink {
    fn approver(&self) -> Option<&dyn Approver> {
        Some(self.0.as_ref())
    }
}

/// The status of the turn's only tool call.
fn only_call(report: &TurnReport) -> (ToolStatus, String) {
    assert_eq!(report.tool_calls.len(), 1, "{:?}", report.tool_calls);
    let call = &report.tool_calls[0];
    (call.status, call.tool.clone())
}

#[tokio::test]
async fn a_tool_denied_by_a_reload_is_refused_at_the_next_turn() {
    let mut h = Harness::start("").await;
    let time_call = || Scripted::tool_call("time_now", json!({}));
    h.llm.push_all([time_call(), Scripted::text("it is now")]);
    let report = h.answer("what time is it?").await;
    assert_eq!(only_call(&report).0, ToolStatus::Success);

    let report = h.reload("[tools.policy]\ndeny = [\"time_now\"]\n").await;
    assert_eq!(report.applied, vec!["tools.policy"], "{report:?}");
    h.llm.push_all([time_call(), Scripted::text("cannot tell")]);
    let report = h.answer("and now?").await;
    assert_eq!(only_call(&report).0, ToolStatus::Denied);
}

#[tokio::test]
async fn a_refused_policy_keeps_the_old_one_and_names_its_key() {
    let mut h = Harness::start("[tools.policy]\ndeny = [\"time_now\"]\n").await;
    let report = h
        .reload("[tools.policy]\nautonomy = \"reckless\"\ndeny = []\n")
        .await;
    assert!(report.applied.is_empty(), "{report:?}");
    assert_eq!(report.failed.len(), 1, "{report:?}");
    assert_eq!(report.failed[0].0, "tools.policy");
    assert!(report.failed[0].1.contains("reckless"), "{report:?}");
    h.llm.push_all([
        Scripted::tool_call("time_now", json!({})),
        Scripted::text("denied"),
    ]);
    let report = h.answer("time?").await;
    assert_eq!(only_call(&report).0, ToolStatus::Denied);
}

#[tokio::test]
async fn the_shell_allowlist_follows_a_reload() {
    let mut h = Harness::start("[tools.shell]\nallowed_programs = [\"echo\"]\n").await;
    let echo = || Scripted::tool_call("shell", json!({"command": "echo reloaded"}));
    h.llm.push_all([echo(), Scripted::text("done")]);
    let report = h.answer("echo something").await;
    assert_eq!(only_call(&report).0, ToolStatus::Success);

    let report = h
        .reload("[tools.shell]\nallowed_programs = [\"ls\"]\n")
        .await;
    assert_eq!(report.applied, vec!["tools.shell"], "{report:?}");
    h.llm.push_all([echo(), Scripted::text("refused")]);
    let report = h.answer("echo again").await;
    assert_eq!(only_call(&report).0, ToolStatus::Failed);
    let sent = h.llm.last_request().unwrap().raw_body;
    assert!(sent.contains("not in the shell allowlist"), "{sent}");
}

#[tokio::test]
async fn a_lowered_hourly_limit_refuses_the_next_turn() {
    let mut h = Harness::start("[cost]\nhourly_action_limit = 100\n").await;
    h.llm.push(Scripted::text("first"));
    assert_eq!(h.answer("hello").await.response, "first");

    let report = h.reload("[cost]\nhourly_action_limit = 1\n").await;
    assert_eq!(report.applied, vec!["cost.hourly_action_limit"]);
    h.llm.push(Scripted::text("never sent"));
    match h.say("hello again").await {
        Reply::Error { text } => assert!(text.contains("limit"), "{text}"),
        other => panic!("not refused: {other:?}"),
    }
    assert_eq!(
        h.llm.requests().len(),
        1,
        "the refused call reached the model"
    );
}

#[tokio::test]
async fn a_new_model_answers_new_turns_and_a_turn_in_progress_keeps_its_own() {
    let mut h = Harness::start("[tools.policy]\nask = [\"time_now\"]\n").await;
    // A turn waits for the approval of its tool call while the reload happens.
    h.llm.push_all([
        Scripted::tool_call("time_now", json!({})),
        Scripted::text("it is now"),
    ]);
    let (asked_tx, mut asked) = mpsc::unbounded_channel();
    let go = Arc::new(Notify::new());
    let approver = Arc::new(Approve {
        gate: Some((asked_tx, Arc::clone(&go))),
    });
    let chat = Arc::clone(&h.chat);
    let turn = tokio::spawn(async move { say(&chat, "time?", approver).await });
    let tool = tokio::time::timeout(LIMIT, asked.recv()).await.unwrap();
    assert_eq!(tool.as_deref(), Some("time_now"));

    let config =
        file(&h.llm, "[tools.policy]\ndeny = [\"time_now\"]\n").replace("model-one", "model-two");
    let report = h.reloader.reload(load(&h.home, &config)).await;
    let applied: BTreeSet<&str> = report.applied.iter().map(String::as_str).collect();
    assert_eq!(
        applied,
        BTreeSet::from(["llm.model", "tools.policy"]),
        "{report:?}"
    );
    assert!(
        report.failed.is_empty() && report.need_restart.is_empty(),
        "{report:?}"
    );
    go.notify_one();
    let Reply::Answer(first) = tokio::time::timeout(LIMIT, turn).await.unwrap().unwrap() else {
        panic!("the turn in progress did not answer");
    };
    // It ran its approved call and asked the model it started with.
    assert_eq!(only_call(&first).0, ToolStatus::Success);
    assert_eq!(h.models(), vec!["model-one", "model-one"]);

    // New turns: the new model, and the tool now denied.
    h.llm.push_all([
        Scripted::tool_call("time_now", json!({})),
        Scripted::text("from two"),
    ]);
    let report = h.answer("time again?").await;
    assert_eq!(only_call(&report).0, ToolStatus::Denied);
    assert_eq!(h.models()[2..], ["model-two", "model-two"]);
    assert_eq!(h.runtime().providers.main.model(), "model-two");
}

#[tokio::test]
async fn an_unknown_provider_is_refused_and_the_old_one_answers() {
    let mut h = Harness::start("").await;
    let config = file(&h.llm, "").replace("\"openai\"", "\"nonesuch\"");
    let report = h.reloader.reload(load(&h.home, &config)).await;
    assert_eq!(report.failed.len(), 1, "{report:?}");
    assert_eq!(report.failed[0].0, "llm.provider");
    assert!(report.failed[0].1.contains("nonesuch"), "{report:?}");
    h.llm.push(Scripted::text("still here"));
    assert_eq!(h.answer("hello").await.response, "still here");
    assert_eq!(h.models(), vec!["model-one"]);
}

#[tokio::test]
async fn routing_rules_added_by_a_reload_route_the_next_turn() {
    let mut h = Harness::start("").await;
    let routing = "[[routing.rules]]\nhint = \"code\"\nkeywords = [\"rust\"]\n\n[routing.models.code]\nmodel = \"coder\"\n";
    let report = h.reload(routing).await;
    assert_eq!(
        report.applied,
        vec!["routing.models", "routing.rules"],
        "{report:?}"
    );
    h.llm
        .push_all([Scripted::text("routed"), Scripted::text("default")]);
    let report = h.answer("help me with rust").await;
    assert_eq!(report.route.as_deref(), Some("code"));
    h.answer("hello").await;
    assert_eq!(h.models(), vec!["coder", "model-one"]);
}

/// The Python MCP test server's `[[mcp.servers]]` entry, when the test
/// venv is there (`CAIRN_REQUIRE_PYTHON=1` makes its absence a failure).
fn py_server(test: &str) -> Option<String> {
    let python = cairn_test_support::python::python(test)?;
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../cairn-mcp/tests/servers/py_server.py");
    Some(format!(
        "[[mcp.servers]]\nname = \"py\"\ncommand = \"{}\"\nargs = [\"{}\", \"stdio\"]\nstart = \"startup\"\n",
        python.display(),
        script.display()
    ))
}

#[tokio::test]
async fn mcp_servers_added_and_removed_by_a_reload_bring_and_take_their_tools() {
    let Some(entry) = py_server("mcp_servers_added_and_removed_by_a_reload") else {
        return;
    };
    let mut h = Harness::start("").await;
    let runner = Arc::clone(h.runtime().agent.runner());
    assert!(runner.registry().get("mcp__py__echo").is_none());

    let report = h.reload(&entry).await;
    assert_eq!(report.applied, vec!["mcp.servers"], "{report:?}");
    let server = Arc::clone(h.runtime().mcp.get().server("py").unwrap());
    assert!(server.wait_ready(LIMIT).await, "{:?}", server.status());
    assert!(runner.registry().get("mcp__py__echo").is_some());
    // Its tools run through the agent loop like any other.
    h.llm.push_all([
        Scripted::tool_call("mcp__py__echo", json!({"text": "over mcp"})),
        Scripted::text("echoed"),
    ]);
    let report = h.answer("echo over mcp").await;
    assert_eq!(
        only_call(&report),
        (ToolStatus::Success, "mcp__py__echo".into())
    );

    let report = h.reload("").await;
    assert_eq!(report.applied, vec!["mcp.servers"], "{report:?}");
    assert!(runner.registry().get("mcp__py__echo").is_none());
    assert!(h.runtime().mcp.get().server("py").is_none());
    let stopped = server
        .wait_until(LIMIT, |s| s.state == cairn_mcp::State::Stopped)
        .await;
    assert!(stopped, "{:?}", server.status());
}

#[tokio::test]
async fn the_reload_hooks_cover_exactly_the_documented_keys() {
    let h = Harness::start("").await;
    let hooked: BTreeSet<&str> = h.reloader.keys().into_iter().collect();
    let documented: BTreeSet<&str> = cairn_core::config::reloadable::RELOADABLE
        .iter()
        .copied()
        .collect();
    assert_eq!(hooked, documented);
}

/// `family`, bound to the chat 42 of `tg`, with a model of its own.
const FAMILY: &str = "[[agents]]\nid = \"family\"\nname = \"Pip\"\nmodel = \"family-model\"\n\
                      [[agents.bindings]]\nchannel = \"tg\"\nchat = \"42\"\n";

#[tokio::test]
async fn agents_added_changed_and_removed_by_a_reload_take_the_next_message() {
    let mut h = Harness::start("").await;
    let name =
        |h: &Harness, chat: &str| h.chats.pick("tg", chat, "u").settings().agent_name.clone();
    let main_name = name(&h, "42");
    assert_ne!(main_name, "Pip");

    let report = h.reload(FAMILY).await;
    assert_eq!(report.applied, vec!["agents"], "{report:?}");
    assert_eq!(name(&h, "42"), "Pip");
    assert_eq!(name(&h, "7"), main_name);
    // Its turn runs on its own model, and every other part knows it.
    h.llm.push(Scripted::text("hi from Pip"));
    let family = h.chats.pick("tg", "42", "u");
    assert!(matches!(
        say(&family, "hello", Arc::new(Approve::default())).await,
        Reply::Answer(_)
    ));
    assert_eq!(h.models(), ["family-model"]);
    let rt = h.runtime();
    assert_eq!(*rt.agent_ids.get(), ["main", "family"]);
    assert!(rt.routine_agents.get().contains_key("family"));
    assert!(h.home.join("agents/family").is_dir());

    // Another agent added: family's entry is the same, so it keeps its service.
    let work = "[[agents]]\nid = \"work\"\n";
    let report = h.reload(&format!("{FAMILY}{work}")).await;
    assert_eq!(report.applied, vec!["agents"], "{report:?}");
    assert!(Arc::ptr_eq(&family, &h.chats.pick("tg", "42", "u")));
    assert_eq!(*h.runtime().agent_ids.get(), ["main", "family", "work"]);

    // Family's binding moved to chat 7: a changed entry is built anew.
    let moved = FAMILY.replace("\"42\"", "\"7\"");
    h.reload(&format!("{moved}{work}")).await;
    assert_eq!(name(&h, "42"), main_name);
    assert_eq!(name(&h, "7"), "Pip");

    // Removed: its chats go to main, and routines may no longer name it.
    let report = h.reload(work).await;
    assert_eq!(report.applied, vec!["agents"], "{report:?}");
    assert_eq!(name(&h, "7"), main_name);
    assert_eq!(*h.runtime().agent_ids.get(), ["main", "work"]);
    assert!(!h.runtime().routine_agents.get().contains_key("family"));
}

#[tokio::test]
async fn a_refused_agents_table_keeps_the_agents_in_force() {
    let mut h = Harness::start(FAMILY).await;
    let report = h
        .reload(&FAMILY.replace("id = \"family\"", "id = \"fam ily\""))
        .await;
    assert!(report.applied.is_empty(), "{report:?}");
    assert_eq!(report.failed.len(), 1, "{report:?}");
    assert_eq!(report.failed[0].0, "agents");
    assert!(report.failed[0].1.contains("agents[0].id"), "{report:?}");
    let picked = h.chats.pick("tg", "42", "u");
    assert_eq!(picked.settings().agent_name, "Pip");
    assert_eq!(*h.runtime().agent_ids.get(), ["main", "family"]);
}
