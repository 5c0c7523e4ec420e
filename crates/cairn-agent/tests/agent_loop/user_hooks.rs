//! The `[[hooks]]` commands at the agent's hook points, as real processes in the sandbox.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use cairn_agent::hooks::command::{HookExit, UserHooks, parse_hooks};
use cairn_agent::sandbox::SandboxSettings;
use cairn_agent::tools::RiskLevel;
use cairn_agent::tools::shell::{ShellConfig, ShellTool};
use cairn_agent::{AgentLoop, AutonomyLevel, Hook, HookRegistry, LoopConfig};
use cairn_core::chat::Role;
use cairn_core::config::Section;
use cairn_llm::testing::Scripted;
use serde_json::{Value, json};

use crate::fixtures::{Echo, Harness, Recorder};

fn hooks(entries: Value, workspace: &Path) -> UserHooks {
    let parsed = parse_hooks(Some(&Section {
        value: entries,
        line: 1,
    }))
    .unwrap();
    UserHooks::new(parsed, workspace.to_path_buf(), SandboxSettings::default())
}

fn with_hooks(h: &Harness, user: &UserHooks) -> AgentLoop {
    let mut registry = HookRegistry::new();
    registry.register(Arc::new(user.clone()));
    AgentLoop::new(
        h.agent.provider().clone(),
        h.agent.runner().clone(),
        Arc::new(registry),
        LoopConfig::default(),
    )
}

/// Runs one turn of `agent` on "go" and returns the tool results' texts.
async fn turn(h: &Harness, agent: &AgentLoop) -> Vec<String> {
    let mut messages = vec![cairn_core::chat::ChatMessage::user("go")];
    agent.run(&Recorder::new(), &mut messages, &h.ctx).await;
    messages
        .into_iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.content)
        .collect()
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[tokio::test]
async fn a_before_tool_hook_exiting_2_blocks_shell_and_the_model_sees_why() {
    let echo = Echo::new("echo", RiskLevel::ReadOnly);
    let shell = Arc::new(ShellTool::new(ShellConfig::default()));
    let h = Harness::new(
        vec![echo.clone(), shell],
        AutonomyLevel::Full,
        LoopConfig::default(),
    )
    .await;
    let user = hooks(
        json!([{"event": "before_tool", "matcher": "^shell$",
                "command": "cat > before.json; echo 'no shell on Sundays' >&2; exit 2"}]),
        &h.ctx.workspace,
    );
    let agent = with_hooks(&h, &user);
    h.server.push(Scripted::tool_calls([
        ("shell", json!({"command": "touch ran"})),
        ("echo", json!({"text": "fine"})),
    ]));
    h.server.push(Scripted::text("ok"));
    let tools = turn(&h, &agent).await;
    assert!(tools[0].contains("no shell on Sundays"), "{}", tools[0]);
    assert!(
        !h.ctx.workspace.join("ran").exists(),
        "the command never ran"
    );
    assert_eq!(echo.runs(), 1, "the matcher names shell only");
    let event = read_json(&h.ctx.workspace.join("before.json"));
    assert_eq!(event["event"], "before_tool");
    assert_eq!(event["tool"], "shell");
    assert_eq!(event["arguments"]["command"], "touch ran");
    // The model got the hook's words in the next request.
    let second = serde_json::to_string(&h.server.requests()[1].body).unwrap();
    assert!(second.contains("no shell on Sundays"));
}

#[tokio::test]
async fn a_before_tool_hook_may_replace_the_arguments() {
    let echo = Echo::new("echo", RiskLevel::ReadOnly);
    let h = Harness::new(
        vec![echo.clone()],
        AutonomyLevel::Full,
        LoopConfig::default(),
    )
    .await;
    let user = hooks(
        json!([{"event": "before_tool", "command": "echo '{\"text\": \"replaced\"}'"}]),
        &h.ctx.workspace,
    );
    let agent = with_hooks(&h, &user);
    h.server.push(Scripted::tool_calls([(
        "echo",
        json!({"text": "original"}),
    )]));
    h.server.push(Scripted::text("ok"));
    let tools = turn(&h, &agent).await;
    assert!(tools[0].contains("echo: replaced"), "{}", tools[0]);
}

#[tokio::test]
async fn an_after_tool_hook_receives_the_result_without_secrets() {
    let echo = Echo::new("echo", RiskLevel::ReadOnly);
    let h = Harness::new(
        vec![echo.clone()],
        AutonomyLevel::Full,
        LoopConfig::default(),
    )
    .await;
    let user = hooks(
        json!([{"event": "after_tool", "matcher": "echo", "command": "cat > after.json"}]),
        &h.ctx.workspace,
    );
    let agent = with_hooks(&h, &user);
    let secret = "sk-ant-api03-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
    h.server.push(Scripted::tool_calls([(
        "echo",
        json!({"text": format!("hello {secret}")}),
    )]));
    h.server.push(Scripted::text("ok"));
    turn(&h, &agent).await;
    user.settle().await;
    let event = read_json(&h.ctx.workspace.join("after.json"));
    assert_eq!(event["event"], "after_tool");
    assert_eq!(event["tool"], "echo");
    assert_eq!(event["status"], "success");
    assert!(
        event["result"].as_str().unwrap().contains("echo: hello"),
        "{event}"
    );
    assert!(!event.to_string().contains(secret), "{event}");
}

#[tokio::test]
async fn a_hook_that_hangs_is_killed_at_its_timeout() {
    let workspace = tempfile::tempdir().unwrap();
    let parsed = parse_hooks(Some(&Section {
        value: json!([{"event": "before_tool", "timeout_secs": 1,
                       "command": "sleep 300 & echo $! > sleeper.pid; wait"}]),
        line: 1,
    }))
    .unwrap();
    let user = UserHooks::new(
        parsed.clone(),
        workspace.path().to_path_buf(),
        SandboxSettings::default(),
    );
    let end = user.run(&parsed[0], &json!({})).await;
    assert_eq!(end, HookExit::TimedOut);
    // The whole group went, the backgrounded sleep included (a zombie at most).
    let pid = std::fs::read_to_string(workspace.path().join("sleeper.pid")).unwrap();
    let stat = Path::new("/proc").join(pid.trim()).join("stat");
    let mut gone = false;
    for _ in 0..50 {
        match std::fs::read_to_string(&stat) {
            Err(_) => gone = true,
            Ok(text) => {
                gone = text
                    .rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z')
            }
        }
        if gone {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(gone, "the hook's background sleep was not killed");
}

#[tokio::test]
async fn notification_hooks_see_messages_session_ends_and_routine_runs() {
    let workspace = tempfile::tempdir().unwrap();
    let user = hooks(
        json!([
            {"event": "on_message", "matcher": "^tele", "command": "cat > message.json"},
            {"event": "on_session_end", "command": "cat > session.json"},
            {"event": "on_routine_run", "matcher": "digest", "command": "cat > run.json"},
            {"event": "on_message", "matcher": "^web$", "command": "cat > wrong.json"},
        ]),
        workspace.path(),
    );
    assert!(
        user.watches_routine_runs(),
        "an on_routine_run entry watches"
    );
    let others = hooks(
        json!([{"event": "on_message", "command": "true"}]),
        workspace.path(),
    );
    assert!(!others.watches_routine_runs(), "no on_routine_run entry");
    let mut text = "hello".to_string();
    user.before_inbound("telegram", &mut text).await;
    user.on_session_end("ada", "telegram", "s-1").await;
    user.on_routine_run("daily-digest", &json!({"status": "ok", "run_id": "r-1"}))
        .await;
    user.on_routine_run("other", &json!({"status": "ok"})).await;
    user.settle().await;
    let message = read_json(&workspace.path().join("message.json"));
    assert_eq!(message["event"], "on_message");
    assert_eq!(message["channel"], "telegram");
    assert_eq!(message["text"], "hello");
    let session = read_json(&workspace.path().join("session.json"));
    assert_eq!(session["event"], "on_session_end");
    assert_eq!(session["user"], "ada");
    let run = read_json(&workspace.path().join("run.json"));
    assert_eq!(run["routine"], "daily-digest");
    assert_eq!(run["status"], "ok");
    assert!(!workspace.path().join("wrong.json").exists());
}

#[test]
fn an_invalid_matcher_is_an_error_naming_the_entry() {
    let errors = parse_hooks(Some(&Section {
        value: json!([
            {"event": "after_tool", "command": "true"},
            {"event": "before_tool", "matcher": "shell(", "command": "true"},
            {"event": "on_lunch", "command": "true"},
        ]),
        line: 7,
    }))
    .unwrap_err();
    assert_eq!(errors.len(), 2);
    assert!(
        errors[0]
            .to_string()
            .starts_with("config.toml line 7: hooks[1]: matcher"),
        "{}",
        errors[0]
    );
    assert!(errors[1].to_string().contains("hooks[2]"), "{}", errors[1]);
}

/// A turn where the model calls `shell` (`touch ran`) under `user`, autonomy
/// `full`: the tool results' texts and whether the command ran.
async fn shell_turn(user_of: impl FnOnce(&Path) -> UserHooks) -> (Vec<String>, bool) {
    let shell = Arc::new(ShellTool::new(ShellConfig::default()));
    let h = Harness::new(vec![shell], AutonomyLevel::Full, LoopConfig::default()).await;
    let user = user_of(&h.ctx.workspace);
    let agent = with_hooks(&h, &user);
    h.server.push(Scripted::tool_calls([(
        "shell",
        json!({"command": "touch ran"}),
    )]));
    h.server.push(Scripted::text("ok"));
    let tools = turn(&h, &agent).await;
    (tools, h.ctx.workspace.join("ran").exists())
}

#[tokio::test]
async fn a_hook_beside_cairns_home_runs_and_its_verdict_applies() {
    // ~/check.sh with CAIRN_HOME=~/.cairn: its directory holds the home,
    // which the sandbox keeps closed, yet the script itself is readable.
    let parent = tempfile::tempdir().unwrap();
    let home = parent.path().join(".cairn");
    std::fs::create_dir(&home).unwrap();
    let script = parent.path().join("check.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\necho 'checked beside the home' >&2\nexit 2\n",
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let settings = SandboxSettings {
        protected: vec![home.clone()],
        ..SandboxSettings::default()
    };
    let command = script.display().to_string();
    let (tools, ran) = shell_turn(|workspace| {
        let parsed = parse_hooks(Some(&Section {
            value: json!([{"event": "before_tool", "command": command}]),
            line: 1,
        }))
        .unwrap();
        UserHooks::new(parsed, workspace.to_path_buf(), settings)
    })
    .await;
    assert!(tools[0].contains("checked beside the home"), "{}", tools[0]);
    assert!(!ran, "the hook's verdict applies");
}

#[tokio::test]
async fn a_before_tool_hook_that_cannot_decide_blocks_the_call() {
    let cases = [
        (
            json!({"event": "before_tool", "command": "/nonexistent/check.sh"}),
            "exit status 127",
        ),
        (
            json!({"event": "before_tool", "timeout_secs": 1, "command": "sleep 30"}),
            "timeout",
        ),
        (
            json!({"event": "before_tool", "command": "kill -9 $$"}),
            "killed by a signal",
        ),
        (
            json!({"event": "before_tool", "command": "echo oops >&2; exit 1"}),
            "status 1: oops",
        ),
    ];
    for (entry, why) in cases {
        let (tools, ran) = shell_turn(|workspace| hooks(json!([entry]), workspace)).await;
        assert!(
            tools[0].contains("gave no verdict") && tools[0].contains("so the call is blocked"),
            "{}",
            tools[0]
        );
        assert!(tools[0].contains(why), "{why}: {}", tools[0]);
        assert!(!ran, "{why}: the command ran");
    }
}

#[tokio::test]
async fn a_dry_run_marks_its_event_and_says_how_the_hook_answered() {
    let workspace = tempfile::tempdir().unwrap();
    let user = hooks(
        json!([
            {"event": "before_tool", "command": "cat > dry.json; exit 2"},
            {"event": "on_message", "command": "exit 3"},
            {"event": "after_tool", "command": "/nonexistent/hook"},
        ]),
        workspace.path(),
    );
    let parsed = parse_hooks(Some(&Section {
        value: json!([
            {"event": "before_tool", "command": "cat > dry.json; exit 2"},
            {"event": "on_message", "command": "exit 3"},
            {"event": "after_tool", "command": "/nonexistent/hook"},
        ]),
        line: 1,
    }))
    .unwrap();
    let blocked = user.dry_run(&parsed[0]).await.unwrap();
    assert!(blocked.contains("exit 2"), "{blocked}");
    let event = read_json(&workspace.path().join("dry.json"));
    assert_eq!(event["dry_run"], true);
    assert_eq!(event["event"], "before_tool");
    let failed = user.dry_run(&parsed[1]).await.unwrap_err();
    assert!(failed.contains("exited with status 3"), "{failed}");
    let missing = user.dry_run(&parsed[2]).await.unwrap_err();
    assert!(missing.contains("127"), "{missing}");
}

#[test]
fn the_message_events_parse_and_on_message_sending_takes_no_matcher() {
    let parsed = parse_hooks(Some(&Section {
        value: json!([
            {"event": "on_message", "matcher": "^tele", "command": "true"},
            {"event": "on_message_sending", "command": "true"},
            {"event": "before_llm_call", "command": "true"},
        ]),
        line: 1,
    }))
    .unwrap();
    let events: Vec<&str> = parsed.iter().map(|h| h.event.as_str()).collect();
    assert_eq!(
        events,
        ["on_message", "on_message_sending", "before_llm_call"]
    );
    assert!(parsed.iter().all(|h| h.event.blocks()));
    let errors = parse_hooks(Some(&Section {
        value: json!([{"event": "on_message_sending", "matcher": "web", "command": "true"}]),
        line: 3,
    }))
    .unwrap_err();
    assert!(
        errors[0].to_string().contains("no matcher"),
        "{}",
        errors[0]
    );
}

/// On a text, a hook printing `{"text": …}` replaces it, exit 2 drops it
/// with its stderr, and stray stdout drops it too (fails closed).
#[tokio::test]
async fn text_hooks_replace_drop_and_fail_closed() {
    let workspace = tempfile::tempdir().unwrap();
    let run = |command: &str| {
        let user = hooks(
            json!([{"event": "on_message_sending", "command": command}]),
            workspace.path(),
        );
        async move {
            let mut text = "the answer".to_string();
            let flow = user.before_sending(&mut text).await;
            (flow, text)
        }
    };
    let (flow, text) = run("cat > /dev/null; echo '{\"text\": \"new\"}'").await;
    assert_eq!(flow, cairn_agent::HookFlow::Continue);
    assert_eq!(text, "new");
    let (flow, _) = run("echo 'not today' >&2; exit 2").await;
    assert_eq!(flow, cairn_agent::HookFlow::Cancel("not today".into()));
    let (flow, text) = run("echo hello").await;
    assert!(
        matches!(flow, cairn_agent::HookFlow::Cancel(ref r) if r.contains("hooks[0] printed")),
        "{flow:?}"
    );
    assert_eq!(text, "the answer");
    let (flow, text) = run("cat > /dev/null").await;
    assert_eq!(flow, cairn_agent::HookFlow::Continue);
    assert_eq!(text, "the answer");
}

/// `cairn doctor`'s dry run covers the message events: exit 2 is an
/// answer they may give, and each gets a sample event of its kind.
#[tokio::test]
async fn a_dry_run_covers_the_message_events() {
    let workspace = tempfile::tempdir().unwrap();
    let entries = json!([
        {"event": "on_message", "command": "cat > message.json; exit 2"},
        {"event": "on_message_sending", "command": "cat > sending.json"},
        {"event": "before_llm_call", "command": "cat > llm.json; exit 2"},
    ]);
    let user = hooks(entries.clone(), workspace.path());
    let parsed = parse_hooks(Some(&Section {
        value: entries,
        line: 1,
    }))
    .unwrap();
    let dropped = user.dry_run(&parsed[0]).await.unwrap();
    assert!(dropped.contains("would be dropped"), "{dropped}");
    assert_eq!(user.dry_run(&parsed[1]).await.unwrap(), "ran (exit 0)");
    let blocked = user.dry_run(&parsed[2]).await.unwrap();
    assert!(blocked.contains("would be blocked"), "{blocked}");
    let message = read_json(&workspace.path().join("message.json"));
    assert_eq!(message["event"], "on_message");
    assert_eq!(message["dry_run"], true);
    assert_eq!(
        read_json(&workspace.path().join("sending.json"))["text"],
        ""
    );
    let llm = read_json(&workspace.path().join("llm.json"));
    assert_eq!(llm["event"], "before_llm_call");
    assert!(llm["tools"].is_array(), "{llm}");
}
