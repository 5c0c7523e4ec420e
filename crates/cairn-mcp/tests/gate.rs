//! MCP tools pass the same policy gate as every tool: risk `ask` by
//! default, `allow`/`deny` per server, annotations that raise the risk but
//! never lower it; results bounded; resources and prompts through
//! `mcp_resource_read`. Against the Python SDK test server.

mod support;

use cairn_agent::runner::ToolStatus;
use cairn_agent::tools::{RiskLevel, ToolContext};
use cairn_agent::{AutonomyLevel, ToolPolicyConfig};
use cairn_test_support::python::python;
use serde_json::json;
use support::*;

fn supervised() -> ToolPolicyConfig {
    ToolPolicyConfig {
        autonomy: AutonomyLevel::Supervised,
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_ask_by_default_and_allow_and_deny_decide_per_tool() {
    let Some(python) = python("calls_ask_by_default_and_allow_and_deny_decide_per_tool") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut spec = py_stdio("py", &python);
    spec.allow = vec!["add".into()];
    spec.deny = vec!["wipe".into()];
    let clients = clients(vec![spec], dir.path()).await;
    let mut policy = supervised();
    let (allow, deny) = clients.policy_rules();
    policy.allow.extend(allow);
    policy.deny.extend(deny);
    let runner = runner(&clients, policy);
    let ctx = ToolContext::new(dir.path(), "s");
    // `echo` says readOnlyHint, which does not lower the default risk: it asks,
    // and nobody approves here.
    let echo = call(&runner, &ctx, "mcp__py__echo", json!({"text": "x"})).await;
    assert_eq!(echo.status, ToolStatus::Declined, "{}", echo.content);
    let add = call(&runner, &ctx, "mcp__py__add", json!({"a": 1, "b": 2})).await;
    assert_eq!(add.status, ToolStatus::Success, "{}", add.content);
    assert!(add.content.contains('3'), "{}", add.content);
    // A denied tool is not offered, and not run.
    let wipe = call(&runner, &ctx, "mcp__py__wipe", json!({"target": "/"})).await;
    assert_eq!(wipe.status, ToolStatus::UnknownTool, "{}", wipe.content);
    let offered: Vec<String> = runner.definitions().into_iter().map(|d| d.name).collect();
    assert!(
        offered.contains(&"mcp__py__echo".to_string()),
        "{offered:?}"
    );
    assert!(
        !offered.contains(&"mcp__py__wipe".to_string()),
        "{offered:?}"
    );
    clients.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn annotations_raise_the_risk_but_never_lower_a_configured_one() {
    let Some(python) = python("annotations_raise_the_risk_but_never_lower_a_configured_one") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut trusted = py_stdio("trusted", &python);
    trusted.risk = Some(RiskLevel::ReadOnly);
    let clients = clients(vec![py_stdio("plain", &python), trusted], dir.path()).await;
    let runner = runner(&clients, supervised());
    let risk = |name: &str| runner.registry().get(name).unwrap().spec().risk();
    let ctx = ToolContext::new(dir.path(), "s");
    clients.settle(std::time::Duration::from_secs(30)).await;
    assert_eq!(
        risk("mcp__plain__echo"),
        RiskLevel::Write,
        "readOnlyHint does not lower"
    );
    assert_eq!(risk("mcp__plain__add"), RiskLevel::Write);
    assert_eq!(
        risk("mcp__plain__wipe"),
        RiskLevel::Dangerous,
        "destructiveHint raises"
    );
    assert_eq!(risk("mcp__trusted__echo"), RiskLevel::ReadOnly);
    assert_eq!(risk("mcp__trusted__wipe"), RiskLevel::Dangerous);
    // Configured read-only: its read-only tools run without asking, the
    // destructive one still asks.
    let echo = call(&runner, &ctx, "mcp__trusted__echo", json!({"text": "x"})).await;
    assert_eq!(echo.status, ToolStatus::Success, "{}", echo.content);
    let wipe = call(&runner, &ctx, "mcp__trusted__wipe", json!({"target": "x"})).await;
    assert_eq!(wipe.status, ToolStatus::Declined, "{}", wipe.content);
    clients.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_are_bounded_and_tool_errors_are_failures() {
    let Some(python) = python("results_are_bounded_and_tool_errors_are_failures") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut spec = py_stdio("py", &python);
    spec.max_output_chars = 1_000;
    let clients = clients(vec![spec], dir.path()).await;
    let runner = runner(&clients, full());
    let ctx = ToolContext::new(dir.path(), "s");
    let big = call(&runner, &ctx, "mcp__py__big", json!({"chars": 100000})).await;
    assert_eq!(big.status, ToolStatus::Success);
    assert!(
        big.content
            .contains("[output cut: 1000 of 100000 characters]"),
        "{}",
        &big.content[big.content.len() - 200..]
    );
    assert!(big.content.len() < 2_000, "{}", big.content.len());
    let fail = call(&runner, &ctx, "mcp__py__fail", json!({})).await;
    // The SDK keeps the exception's text to itself.
    assert_eq!(fail.status, ToolStatus::Failed, "{}", fail.content);
    assert!(
        fail.content.contains("Error executing tool fail"),
        "{}",
        fail.content
    );
    clients.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_and_prompts_are_read_through_one_tool() {
    let Some(python) = python("resources_and_prompts_are_read_through_one_tool") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let clients = clients(vec![py_stdio("py", &python)], dir.path()).await;
    let runner = runner(&clients, supervised());
    let ctx = ToolContext::new(dir.path(), "s");
    // Read-only: it runs without asking.
    let listed = call(&runner, &ctx, "mcp_resource_read", json!({"server": "py"})).await;
    assert_eq!(listed.status, ToolStatus::Success, "{}", listed.content);
    assert!(
        listed.content.contains("memo://greeting"),
        "{}",
        listed.content
    );
    assert!(listed.content.contains("summarize"), "{}", listed.content);
    let read = call(
        &runner,
        &ctx,
        "mcp_resource_read",
        json!({"server": "py", "uri": "memo://greeting"}),
    )
    .await;
    assert!(
        read.content.contains("hello from a resource"),
        "{}",
        read.content
    );
    let prompt = call(
        &runner,
        &ctx,
        "mcp_resource_read",
        json!({"server": "py", "prompt": "summarize", "arguments": {"topic": "tides"}}),
    )
    .await;
    assert!(
        prompt.content.contains("Summarize tides in one line."),
        "{}",
        prompt.content
    );
    let unknown = call(
        &runner,
        &ctx,
        "mcp_resource_read",
        json!({"server": "nope"}),
    )
    .await;
    assert_eq!(
        unknown.status,
        ToolStatus::InvalidArguments,
        "{}",
        unknown.content
    );
    assert!(
        unknown.content.contains("configured: py"),
        "{}",
        unknown.content
    );
    clients.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn before_its_tools_are_known_a_call_is_never_judged_read_only() {
    let dir = tempfile::tempdir().unwrap();
    // A server that never answers stays "starting" (its tools unknown).
    let mut silent = cairn_mcp::ServerSpec::stdio("silent", "sleep", &["60"]);
    silent.risk = Some(RiskLevel::ReadOnly);
    let clients = clients(vec![silent], dir.path()).await;
    let runner = runner(&clients, supervised());
    let pending = runner.registry().get("mcp__silent__anything").unwrap();
    assert_eq!(pending.spec().risk(), RiskLevel::Write);
    let ctx = ToolContext::new(dir.path(), "s");
    let asked = call(&runner, &ctx, "mcp__silent__anything", json!({})).await;
    assert_eq!(asked.status, ToolStatus::Declined, "{}", asked.content);
    clients.shutdown().await;
}
