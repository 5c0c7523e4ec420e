//! MCP servers' tools through the agent: real servers (the Python SDK's over
//! stdio and streamable HTTP, server-everything from npm over stdio), the
//! agent loop on the fake LLM, results reaching the model.

mod support;

use std::time::Duration;

use cairn_agent::runner::ToolStatus;
use cairn_agent::tools::ToolContext;
use cairn_llm::testing::{FakeLlmServer, Scripted};
use cairn_test_support::npm::everything;
use cairn_test_support::python::python;
use serde_json::json;
use support::*;

/// The text of every request the model received after the first.
fn later_requests(llm: &FakeLlmServer) -> String {
    llm.requests()[1..]
        .iter()
        .map(|r| r.body.to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_python_server_tool_answers_the_model() {
    let Some(python) = python("a_stdio_python_server_tool_answers_the_model") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let clients = clients(vec![py_stdio("py", &python)], dir.path()).await;
    clients.settle(Duration::from_secs(30)).await;
    let llm = FakeLlmServer::start().await.unwrap();
    llm.push_all([
        Scripted::tool_call("mcp__py__echo", json!({"text": "over stdio"})),
        Scripted::text("It echoed."),
    ]);
    let ctx = ToolContext::new(dir.path(), "s");
    let messages = turn(&llm, runner(&clients, full()), &ctx, "echo something").await;
    assert_eq!(messages.last().unwrap().content, "It echoed.");
    let seen = later_requests(&llm);
    assert!(seen.contains("echo: over stdio"), "{seen}");
    clients.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamable_http_python_server_tool_answers_the_model() {
    let Some(python) = python("a_streamable_http_python_server_tool_answers_the_model") else {
        return;
    };
    let http = HttpServer::start(&python).await;
    let dir = tempfile::tempdir().unwrap();
    let mut spec = cairn_mcp::ServerSpec::http("remote", &http.url);
    if let cairn_mcp::Transport::Http { headers, .. } = &mut spec.transport {
        headers.insert("X-Cairn-Test".into(), "configured-header".into());
    }
    let clients = clients(vec![spec], dir.path()).await;
    clients.settle(Duration::from_secs(30)).await;
    assert_eq!(
        clients.server("remote").unwrap().state(),
        cairn_mcp::State::Ready,
        "{:?}",
        clients.statuses()
    );
    let tools: Vec<String> = clients
        .server("remote")
        .unwrap()
        .tools()
        .iter()
        .map(|e| e.name.clone())
        .collect();
    assert!(
        tools.contains(&"mcp__remote__echo".to_string()),
        "{tools:?}"
    );
    let llm = FakeLlmServer::start().await.unwrap();
    llm.push_all([
        Scripted::tool_call("mcp__remote__add", json!({"a": 20, "b": 22})),
        Scripted::text("42."),
    ]);
    let ctx = ToolContext::new(dir.path(), "s");
    turn(&llm, runner(&clients, full()), &ctx, "add them").await;
    let seen = later_requests(&llm);
    assert!(seen.contains("42"), "{seen}");
    assert!(seen.contains("mcp__remote__add"), "{seen}");
    // The configured headers go with every request.
    let got = call(
        &runner(&clients, full()),
        &ctx,
        "mcp__remote__header",
        json!({"name": "X-Cairn-Test"}),
    )
    .await;
    assert!(got.content.contains("configured-header"), "{}", got.content);
    clients.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_everything_from_npm_answers_the_model() {
    let Some(program) = everything("server_everything_from_npm_answers_the_model") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let spec = cairn_mcp::ServerSpec::stdio("everything", program.to_str().unwrap(), &["stdio"]);
    let clients = clients(vec![spec], dir.path()).await;
    clients.settle(Duration::from_secs(60)).await;
    let llm = FakeLlmServer::start().await.unwrap();
    llm.push_all([
        Scripted::tool_calls([
            ("mcp__everything__get_sum", json!({"a": 1234, "b": 4321})),
            ("mcp__everything__echo", json!({"message": "from cairn"})),
        ]),
        Scripted::text("Done."),
    ]);
    let ctx = ToolContext::new(dir.path(), "s");
    turn(&llm, runner(&clients, full()), &ctx, "sum and echo").await;
    let seen = later_requests(&llm);
    assert!(seen.contains("5555"), "{seen}");
    assert!(seen.contains("from cairn"), "{seen}");
    clients.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_gets_a_clean_environment_plus_its_own() {
    let Some(python) = python("a_server_gets_a_clean_environment_plus_its_own") else {
        return;
    };
    // Cargo sets this for the test process; the server must not inherit it.
    assert!(std::env::var("CARGO_MANIFEST_DIR").is_ok());
    let dir = tempfile::tempdir().unwrap();
    let mut spec = py_stdio("py", &python);
    if let cairn_mcp::Transport::Stdio { env, .. } = &mut spec.transport {
        env.insert("GREETING".into(), "hello".into());
    }
    let clients = clients(vec![spec], dir.path()).await;
    let runner = runner(&clients, full());
    let ctx = ToolContext::new(dir.path(), "s");
    let own = call(&runner, &ctx, "mcp__py__env", json!({"name": "GREETING"})).await;
    assert!(own.content.contains("hello"), "{}", own.content);
    let leaked = call(
        &runner,
        &ctx,
        "mcp__py__env",
        json!({"name": "CARGO_MANIFEST_DIR"}),
    )
    .await;
    assert!(leaked.content.contains("<unset>"), "{}", leaked.content);
    let path = call(&runner, &ctx, "mcp__py__env", json!({"name": "PATH"})).await;
    assert!(!path.content.contains("<unset>"), "{}", path.content);
    clients.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_server_restarts_and_its_tools_come_back() {
    let Some(python) = python("a_killed_server_restarts_and_its_tools_come_back") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let clients = clients(vec![py_stdio("py", &python)], dir.path()).await;
    let runner = runner(&clients, full());
    let ctx = ToolContext::new(dir.path(), "s");
    let first = call(&runner, &ctx, "mcp__py__pid", json!({})).await;
    assert_eq!(first.status, ToolStatus::Success, "{}", first.content);
    let pid: i32 = first
        .content
        .split(|c: char| !c.is_ascii_digit())
        .find(|s| !s.is_empty())
        .unwrap()
        .parse()
        .unwrap();
    std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    let meanwhile = call(&runner, &ctx, "mcp__py__echo", json!({"text": "x"})).await;
    assert_eq!(
        meanwhile.status,
        ToolStatus::Failed,
        "{}",
        meanwhile.content
    );
    assert!(
        meanwhile.content.contains("unavailable"),
        "{}",
        meanwhile.content
    );
    let server = clients.server("py").unwrap();
    let back = |s: &cairn_mcp::Status| s.restarts == 1 && s.state == cairn_mcp::State::Ready;
    assert!(
        server.wait_until(Duration::from_secs(30), back).await,
        "{:?}",
        server.status()
    );
    let again = call(&runner, &ctx, "mcp__py__pid", json!({})).await;
    assert_eq!(again.status, ToolStatus::Success, "{}", again.content);
    assert!(!again.content.contains(&pid.to_string()), "a new process");
    let status = server.status();
    assert_eq!(status.restarts, 1, "{status:?}");
    assert!(
        status
            .last_error
            .as_deref()
            .unwrap_or("")
            .contains("exited"),
        "{status:?}"
    );
    clients.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_tool_times_out_with_a_clear_result_and_is_cancelled() {
    let Some(python) = python("a_slow_tool_times_out_with_a_clear_result_and_is_cancelled") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let marks = tempfile::tempdir().unwrap();
    let mut spec = py_stdio("py", &python);
    spec.timeout = Duration::from_secs(1);
    spec.max_call = Duration::from_secs(2);
    if let cairn_mcp::Transport::Stdio { env, .. } = &mut spec.transport {
        env.insert(
            "CAIRN_TEST_MCP_MARKS".into(),
            marks.path().display().to_string(),
        );
    }
    let clients = clients(vec![spec], dir.path()).await;
    let runner = runner(&clients, full());
    let ctx = ToolContext::new(dir.path(), "s");
    let slow = call(&runner, &ctx, "mcp__py__slow", json!({"seconds": 60})).await;
    assert_eq!(slow.status, ToolStatus::TimedOut, "{}", slow.content);
    assert!(
        slow.content.contains("timed out after 1s"),
        "{}",
        slow.content
    );
    assert!(
        wait_for_file(&marks.path().join("cancelled"), Duration::from_secs(10)).await,
        "the server was told to cancel"
    );
    // Progress keeps a call alive past the idle limit, within the total.
    let steps = call(
        &runner,
        &ctx,
        "mcp__py__steps",
        json!({"count": 4, "pause": 0.4}),
    )
    .await;
    assert_eq!(steps.status, ToolStatus::Success, "{}", steps.content);
    assert!(steps.content.contains("4 steps done"), "{}", steps.content);
    clients.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_turn_cancels_the_call_on_the_server() {
    let Some(python) = python("a_cancelled_turn_cancels_the_call_on_the_server") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let marks = tempfile::tempdir().unwrap();
    let mut spec = py_stdio("py", &python);
    if let cairn_mcp::Transport::Stdio { env, .. } = &mut spec.transport {
        env.insert(
            "CAIRN_TEST_MCP_MARKS".into(),
            marks.path().display().to_string(),
        );
    }
    let clients = clients(vec![spec], dir.path()).await;
    let runner = runner(&clients, full());
    let ctx = ToolContext::new(dir.path(), "s");
    let cancel = ctx.cancel.clone();
    let started = marks.path().join("started");
    let call = tokio::spawn({
        let runner = runner.clone();
        let ctx = ctx.clone();
        async move { call(&runner, &ctx, "mcp__py__slow", json!({"seconds": 60})).await }
    });
    assert!(wait_for_file(&started, Duration::from_secs(30)).await);
    cancel.cancel();
    let result = call.await.unwrap();
    assert_eq!(result.status, ToolStatus::Cancelled, "{}", result.content);
    assert!(
        wait_for_file(&marks.path().join("cancelled"), Duration::from_secs(10)).await,
        "the server was told to cancel"
    );
    clients.shutdown().await;
}

/// Whether this kernel confines (Landlock); fails when it does not unless
/// `CAIRN_TEST_NO_LANDLOCK=1` says the kernel lacks it.
fn landlock_here() -> bool {
    use cairn_agent::sandbox::{Sandbox, SandboxSettings};
    let sandbox = Sandbox::new(SandboxSettings::default());
    if sandbox.is_confined() {
        return true;
    }
    assert!(
        std::env::var_os("CAIRN_TEST_NO_LANDLOCK").is_some(),
        "Landlock is unavailable ({}); set CAIRN_TEST_NO_LANDLOCK=1 only on a kernel without it",
        sandbox.confinement()
    );
    cairn_test_support::skipped(
        module_path!(),
        &format!("Landlock is unavailable ({})", sandbox.confinement()),
    );
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandboxed_server_reads_only_the_workspace_and_its_own_files() {
    use cairn_agent::sandbox::SandboxSettings;
    let Some(python) = python("a_sandboxed_server_reads_only_the_workspace_and_its_own_files")
    else {
        return;
    };
    if !landlock_here() {
        return;
    }
    // The interpreter's own files (the venv and the installation it comes
    // from) and the script are readable, as `tools.shell.read_paths` would say.
    let out = std::process::Command::new(&python)
        .args([
            "-c",
            "import sys; print(sys.prefix); print(sys.base_prefix)",
        ])
        .output()
        .unwrap();
    let mut read_paths: Vec<std::path::PathBuf> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(Into::into)
        .collect();
    read_paths.push(py_script().parent().unwrap().to_path_buf());
    cairn_test_support::agent::host_sandbox(SandboxSettings {
        read_paths,
        ..SandboxSettings::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let inside = dir.path().join("inside.txt");
    let outside = elsewhere.path().join("outside.txt");
    tokio::fs::write(&inside, "inside the workspace")
        .await
        .unwrap();
    tokio::fs::write(&outside, "OUTSIDE-MARKER").await.unwrap();
    let mut spec = py_stdio("boxed", &python);
    if let cairn_mcp::Transport::Stdio { sandbox, env, .. } = &mut spec.transport {
        *sandbox = true;
        env.insert("GREETING".into(), "kept".into());
    }
    let clients = clients(vec![spec], dir.path()).await;
    let runner = runner(&clients, full());
    let ctx = ToolContext::new(dir.path(), "s");
    let read = |path: &std::path::Path| json!({"path": path.display().to_string()});
    let ok = call(&runner, &ctx, "mcp__boxed__read_file", read(&inside)).await;
    assert_eq!(ok.status, ToolStatus::Success, "{}", ok.content);
    assert!(
        ok.content.contains("inside the workspace"),
        "{}",
        ok.content
    );
    let refused = call(&runner, &ctx, "mcp__boxed__read_file", read(&outside)).await;
    assert!(
        refused.content.contains("cannot read: Permission denied"),
        "{}",
        refused.content
    );
    // HOME (and the working directory) is the server's own folder, never the workspace.
    let home = call(&runner, &ctx, "mcp__boxed__env", json!({"name": "HOME"})).await;
    assert!(
        home.content.contains("/boxed")
            && !home.content.contains(&dir.path().display().to_string()),
        "HOME is the server's own folder: {}",
        home.content
    );
    let own = call(
        &runner,
        &ctx,
        "mcp__boxed__env",
        json!({"name": "GREETING"}),
    )
    .await;
    assert!(own.content.contains("kept"), "{}", own.content);
    clients.shutdown().await;
}
