//! A server's life: lazy start with the tool list remembered in the store,
//! `tools/list_changed` honoured, a call made while it starts waiting for it.

mod support;

use std::time::Duration;

use cairn_agent::runner::ToolStatus;
use cairn_agent::tools::ToolContext;
use cairn_mcp::server::ToolsFrom;
use cairn_mcp::{McpClients, State};
use cairn_store::Store;
use cairn_test_support::python::python;
use serde_json::json;
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_tool_list_is_listed_again() {
    let Some(python) = python("a_changed_tool_list_is_listed_again") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let clients = clients(vec![py_stdio("py", &python)], dir.path()).await;
    clients.settle(Duration::from_secs(30)).await;
    let runner = runner(&clients, full());
    let ctx = ToolContext::new(dir.path(), "s");
    let before = call(&runner, &ctx, "mcp__py__added", json!({})).await;
    assert_eq!(before.status, ToolStatus::UnknownTool, "{}", before.content);
    let grown = call(&runner, &ctx, "mcp__py__grow", json!({})).await;
    assert_eq!(grown.status, ToolStatus::Success, "{}", grown.content);
    let server = clients.server("py").unwrap();
    let listed = |s: &cairn_mcp::Status| s.tools == 13;
    assert!(
        server.wait_until(Duration::from_secs(10), listed).await,
        "{:?}",
        server.status()
    );
    let after = call(&runner, &ctx, "mcp__py__added", json!({})).await;
    assert_eq!(after.status, ToolStatus::Success, "{}", after.content);
    assert!(after.content.contains("I was added"), "{}", after.content);
    clients.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lazy_server_starts_at_its_first_call_with_its_tools_remembered() {
    let Some(python) = python("a_lazy_server_starts_at_its_first_call_with_its_tools_remembered")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("cairn.db").display());
    let (store, _) = Store::open(&url).await.unwrap();
    let spec = py_stdio("py", &python);

    // Never connected: started at once to learn its tools, which are remembered.
    let first = McpClients::new(
        vec![spec.clone()],
        places(dir.path()),
        Some(store.clone()),
        fast(),
    )
    .await;
    first.start();
    let server = first.server("py").unwrap();
    assert!(server.wait_ready(Duration::from_secs(30)).await);
    first.shutdown().await;

    // Next process: its tools are known without starting it.
    let second = McpClients::new(vec![spec], places(dir.path()), Some(store.clone()), fast()).await;
    second.start();
    let server = second.server("py").unwrap();
    assert_eq!(server.state(), State::Idle);
    assert_eq!(server.tools_from(), ToolsFrom::Remembered);
    let runner = runner(&second, full());
    let offered: Vec<String> = runner.definitions().into_iter().map(|d| d.name).collect();
    assert!(
        offered.contains(&"mcp__py__echo".to_string()),
        "{offered:?}"
    );
    assert_eq!(
        server.state(),
        State::Idle,
        "offering a tool does not start it"
    );
    let ctx = ToolContext::new(dir.path(), "s");
    let echo = call(&runner, &ctx, "mcp__py__echo", json!({"text": "lazy"})).await;
    assert_eq!(echo.status, ToolStatus::Success, "{}", echo.content);
    assert!(echo.content.contains("echo: lazy"));
    assert_eq!(server.state(), State::Ready);
    assert_eq!(server.tools_from(), ToolsFrom::Live);
    second.shutdown().await;
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_made_while_the_server_starts_waits_for_it() {
    let Some(python) = python("a_call_made_while_the_server_starts_waits_for_it") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let clients = clients(vec![py_stdio("py", &python)], dir.path()).await;
    assert_eq!(clients.server("py").unwrap().state(), State::Starting);
    let runner = runner(&clients, full());
    let ctx = ToolContext::new(dir.path(), "s");
    let echo = call(&runner, &ctx, "mcp__py__echo", json!({"text": "early"})).await;
    assert_eq!(echo.status, ToolStatus::Success, "{}", echo.content);
    let nope = call(&runner, &ctx, "mcp__py__nope", json!({})).await;
    assert_eq!(nope.status, ToolStatus::UnknownTool, "{}", nope.content);
    clients.shutdown().await;
}
