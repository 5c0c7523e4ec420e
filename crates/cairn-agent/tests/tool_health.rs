//! Tool health: a tool failing five times in a row is disabled for the agent
//! (left out of the next request's tool list, refused if called anyway) with
//! one notification, across runners sharing the database, until re-enabled.
#![expect(
    clippy::unwrap_used,
    clippy::disallowed_methods,
    reason = "test code unwraps freely and may use blocking std::fs"
)]

use std::sync::Arc;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use async_trait::async_trait;
use cairn_agent::policy::{PolicyGate, ToolPolicyConfig};
use cairn_agent::repair::{InboxNotifier, ToolHealth, repair_tools};
use cairn_agent::runner::{Authorized, AutoApprove, ToolRunner, ToolStatus};
use cairn_agent::tools::{
    RiskLevel, Tool, ToolContext, ToolError, ToolOutput, ToolRegistry, ToolSpec,
};
use cairn_agent::{AgentLoop, Approver, HookRegistry, LoopConfig, LoopDelegate, LoopStatus};
use cairn_core::chat::{ChatMessage, ToolCall};
use cairn_core::clock::{Clock, SystemClock};
use cairn_llm::build_provider;
use cairn_llm::testing::{FakeLlmServer, Scripted};
use cairn_store::Store;
use serde_json::json;

/// Fails while `broken` is set; counts its runs.
struct Flaky {
    broken: AtomicBool,
    runs: AtomicUsize,
}

#[async_trait]
impl Tool for Flaky {
    fn spec(&self) -> &ToolSpec {
        static SPEC: LazyLock<ToolSpec> = LazyLock::new(|| {
            ToolSpec::new("flaky", RiskLevel::ReadOnly, "fails while broken").not_reusable()
        });
        &SPEC
    }
    async fn execute(
        &self,
        _: serde_json::Value,
        _: &ToolContext,
        _: &Authorized,
    ) -> Result<ToolOutput, ToolError> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        if self.broken.load(Ordering::SeqCst) {
            Ok(ToolOutput::failed("upstream said 503"))
        } else {
            Ok(ToolOutput::ok("fine"))
        }
    }
}

struct Quiet;

impl LoopDelegate for Quiet {
    fn approver(&self) -> &dyn Approver {
        &AutoApprove
    }
}

fn runner(store: &Store, flaky: Arc<Flaky>) -> Arc<ToolRunner> {
    let mut registry = ToolRegistry::new();
    registry.register(flaky).unwrap();
    runner_over(store, registry)
}

/// A runner over `registry` with tool health (limit 5) on `store`.
fn runner_over(store: &Store, registry: ToolRegistry) -> Arc<ToolRunner> {
    let runner = Arc::new(ToolRunner::new(
        Arc::new(registry),
        Arc::new(PolicyGate::new(&ToolPolicyConfig::default())),
    ));
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    runner.attach_health(Arc::new(ToolHealth::new(
        store.clone(),
        Some(5),
        Arc::new(InboxNotifier::new(store.clone(), Arc::clone(&clock))),
        clock,
        "ada",
    )));
    runner
}

fn tool_names(request: &cairn_llm::testing::RecordedRequest) -> Vec<String> {
    request.body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn five_failures_disable_a_tool_until_it_is_enabled() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("cairn.db").display());
    let (store, _) = Store::open(&url).await.unwrap();
    let flaky = Arc::new(Flaky {
        broken: AtomicBool::new(true),
        runs: AtomicUsize::new(0),
    });
    let runner = runner(&store, Arc::clone(&flaky));
    let server = FakeLlmServer::start().await.unwrap();
    let provider = build_provider(&server.openai_settings()).unwrap();
    let agent = AgentLoop::new(
        provider,
        Arc::clone(&runner),
        Arc::new(HookRegistry::new()),
        LoopConfig::default(),
    );
    for _ in 0..5 {
        server.push(Scripted::tool_call("flaky", json!({})));
    }
    server.push(Scripted::text("gave up on flaky"));
    let ctx = ToolContext::new(dir.path(), "s");
    let mut messages = vec![ChatMessage::user("use flaky")];
    let outcome = agent.run(&Quiet, &mut messages, &ctx).await;
    assert_eq!(outcome.status, LoopStatus::Answered);
    assert_eq!(flaky.runs.load(Ordering::SeqCst), 5);
    let requests = server.requests();
    assert_eq!(requests.len(), 6);
    assert_eq!(
        tool_names(&requests[4]),
        vec!["flaky"],
        "listed until the fifth failure"
    );
    assert!(
        tool_names(&requests[5]).is_empty(),
        "then hidden from the model"
    );

    // Called anyway: refused without running.
    let call = ToolCall {
        id: "c1".into(),
        name: "flaky".into(),
        arguments: json!({}),
    };
    let refused = runner.run(&call, &ctx, &AutoApprove).await;
    assert_eq!(refused.status, ToolStatus::Denied);
    assert!(
        refused.content.contains("cairn tool enable flaky"),
        "{}",
        refused.content
    );
    assert_eq!(flaky.runs.load(Ordering::SeqCst), 5);

    // One notification, and self-repair reports the tool.
    let inbox = store.inbox("ada", true, 10).await.unwrap();
    assert_eq!(inbox.len(), 1);
    assert!(inbox[0].title.contains("flaky"), "{}", inbox[0].title);
    assert_eq!(inbox[0].headline(), format!("🔔 {}", inbox[0].title));
    assert!(
        inbox[0].body.contains("upstream said 503"),
        "{}",
        inbox[0].body
    );
    let disabled = repair_tools(&store).await.unwrap();
    assert_eq!(disabled.len(), 1);
    assert_eq!(disabled[0].consecutive_failures, 5);

    // Another process (another runner on the database) sees it disabled too.
    let other = runner_for_check(&store, &flaky).await;
    assert!(other.definitions().is_empty());

    // Re-enabled (as `cairn tool enable` does): listed again on the next call.
    flaky.broken.store(false, Ordering::SeqCst);
    assert!(
        store
            .enable_tool("flaky", chrono::Utc::now())
            .await
            .unwrap()
    );
    server.push(Scripted::tool_call("flaky", json!({})));
    server.push(Scripted::text("works again"));
    let outcome = agent.run(&Quiet, &mut messages, &ctx).await;
    assert_eq!(outcome.status, LoopStatus::Answered);
    assert_eq!(tool_names(&server.requests()[6]), vec!["flaky"]);
    assert_eq!(flaky.runs.load(Ordering::SeqCst), 6);
    assert!(repair_tools(&store).await.unwrap().is_empty());
    assert_eq!(
        store.inbox("ada", true, 10).await.unwrap().len(),
        1,
        "still one notification"
    );
}

async fn runner_for_check(store: &Store, flaky: &Arc<Flaky>) -> Arc<ToolRunner> {
    let runner = runner(store, Arc::clone(flaky));
    runner.refresh_health().await;
    runner
}

#[tokio::test]
async fn a_success_resets_the_streak_and_refusals_do_not_count() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("cairn.db").display());
    let (store, _) = Store::open(&url).await.unwrap();
    let flaky = Arc::new(Flaky {
        broken: AtomicBool::new(true),
        runs: AtomicUsize::new(0),
    });
    let runner = runner(&store, Arc::clone(&flaky));
    let ctx = ToolContext::new(dir.path(), "s");
    let call = ToolCall {
        id: "c".into(),
        name: "flaky".into(),
        arguments: json!({}),
    };
    for _ in 0..4 {
        runner.run(&call, &ctx, &AutoApprove).await;
    }
    flaky.broken.store(false, Ordering::SeqCst);
    assert_eq!(
        runner.run(&call, &ctx, &AutoApprove).await.status,
        ToolStatus::Success
    );
    flaky.broken.store(true, Ordering::SeqCst);
    for _ in 0..4 {
        runner.run(&call, &ctx, &AutoApprove).await;
    }
    // Bad arguments are the model's fault, not the tool's.
    let bad = ToolCall {
        arguments: json!("not an object"),
        ..call.clone()
    };
    assert_eq!(
        runner.run(&bad, &ctx, &AutoApprove).await.status,
        ToolStatus::InvalidArguments
    );
    let health = store.list_tool_health().await.unwrap();
    assert_eq!(health[0].consecutive_failures, 4);
    assert!(!health[0].disabled);
    assert_eq!(runner.definitions().len(), 1);
}

/// Five (six) URLs refused as private or local must not disable `http_request`
/// for everyone: a refusal by the tool's own rules is policy, not a broken tool.
/// The last one is a name the resolver finds on a loopback or private address
/// (this machine's host name), refused after DNS rather than by the URL check.
#[tokio::test]
async fn refused_addresses_never_disable_http_request() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("cairn.db").display());
    let (store, _) = Store::open(&url).await.unwrap();
    let registry = cairn_agent::tools::builtin_registry(&Default::default()).unwrap();
    let runner = runner_over(&store, registry);
    let ctx = ToolContext::new(dir.path(), "s");
    let mut urls: Vec<String> = [
        "http://127.0.0.1:9/",
        "http://[::1]/",
        "http://[::127.0.0.1]/",
        "http://169.254.169.254/latest/meta-data",
        "http://localhost/",
        "http://10.0.0.1/",
    ]
    .map(String::from)
    .to_vec();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap_or_default()
        .trim()
        .to_string();
    let local_name = !host.is_empty()
        && tokio::net::lookup_host((host.as_str(), 80))
            .await
            .map(|addrs| addrs.collect::<Vec<_>>())
            .is_ok_and(|addrs| {
                !addrs.is_empty()
                    && addrs
                        .iter()
                        .all(|a| !cairn_agent::tools::net::is_public(a.ip()))
            });
    if local_name {
        urls.push(format!("http://{host}:9/"));
    } else {
        println!("host name {host} does not resolve to a local address: DNS refusal not exercised");
    }
    for (i, url) in urls.iter().enumerate() {
        let call = ToolCall {
            id: format!("c{i}"),
            name: "http_request".into(),
            arguments: json!({ "url": url }),
        };
        let result = runner.run(&call, &ctx, &AutoApprove).await;
        assert!(
            result.content.contains("not permitted") && result.content.contains("refused"),
            "{url}: {}",
            result.content
        );
    }
    let health = store.list_tool_health().await.unwrap();
    assert!(
        health
            .iter()
            .all(|h| h.consecutive_failures == 0 && !h.disabled),
        "{health:?}"
    );
    assert!(
        runner
            .definitions()
            .iter()
            .any(|d| d.name == "http_request")
    );
    assert!(store.inbox("ada", true, 10).await.unwrap().is_empty());
}

/// A tool whose server is down (an MCP server restarting).
struct Down;

#[async_trait]
impl Tool for Down {
    fn spec(&self) -> &ToolSpec {
        static SPEC: LazyLock<ToolSpec> = LazyLock::new(|| {
            ToolSpec::new("down", RiskLevel::ReadOnly, "its server is restarting")
        });
        &SPEC
    }
    async fn execute(
        &self,
        _: serde_json::Value,
        _: &ToolContext,
        _: &Authorized,
    ) -> Result<ToolOutput, ToolError> {
        Err(ToolError::Unavailable("its server is restarting".into()))
    }
}

/// An unavailable dependency is not the tool's failure: a server that is
/// down for a while must not get its tools disabled for good.
#[tokio::test]
async fn unavailable_answers_never_disable_a_tool() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("cairn.db").display());
    let (store, _) = Store::open(&url).await.unwrap();
    let mut registry = ToolRegistry::new();
    registry.register(Arc::new(Down)).unwrap();
    let runner = runner_over(&store, registry);
    let ctx = ToolContext::new(dir.path(), "s");
    let call = ToolCall {
        id: "c".into(),
        name: "down".into(),
        arguments: json!({}),
    };
    for _ in 0..6 {
        let result = runner.run(&call, &ctx, &AutoApprove).await;
        assert_eq!(result.status, ToolStatus::Failed);
        assert!(
            result
                .content
                .contains("unavailable: its server is restarting"),
            "{}",
            result.content
        );
    }
    runner.refresh_health().await;
    assert_eq!(runner.definitions().len(), 1, "still offered");
    assert!(
        store
            .list_tool_health()
            .await
            .unwrap()
            .iter()
            .all(|h| !h.disabled)
    );
}

/// A command's own exit status is the command's business: `grep` finding
/// nothing (exit 1), or a file the sandbox keeps it from (Permission denied),
/// is a result the model sees, never a failure of `shell`.
#[tokio::test]
async fn a_commands_own_exit_status_never_disables_shell() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("cairn.db").display());
    let (store, _) = Store::open(&url).await.unwrap();
    let workspace = dir.path().join("ws");
    std::fs::create_dir(&workspace).unwrap();
    std::fs::write(workspace.join("notes.txt"), "nothing to see\n").unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::write(elsewhere.path().join("secret.txt"), "x").unwrap();
    let registry = cairn_agent::tools::builtin_registry(&Default::default()).unwrap();
    let runner = runner_over(&store, registry);
    let ctx = ToolContext::new(&workspace, "s");
    let outside = format!("cat {}/secret.txt", elsewhere.path().display());
    let confined = cairn_test_support::agent::host_sandbox(Default::default()).is_confined();
    let mut commands = vec!["grep -c nomatch notes.txt".to_string(); 5];
    if confined {
        commands.push(outside);
    }
    for (i, command) in commands.iter().enumerate() {
        let call = ToolCall {
            id: format!("c{i}"),
            name: "shell".into(),
            arguments: json!({ "command": command }),
        };
        let result = runner.run(&call, &ctx, &AutoApprove).await;
        assert_eq!(result.status, ToolStatus::Failed, "{}", result.content);
        assert!(
            result.content.contains("[exit status 1]"),
            "{command}: {}",
            result.content
        );
    }
    runner.refresh_health().await;
    assert!(store.list_tool_health().await.unwrap().is_empty());
    assert!(runner.definitions().iter().any(|d| d.name == "shell"));
}
