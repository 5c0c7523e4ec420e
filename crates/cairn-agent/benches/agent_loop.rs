//! Agent loop overhead with an instant in-process model: what the loop itself
//! costs per iteration (request building, policy, tool dispatch, bookkeeping),
//! and the same turn behind the cost guard the daemon uses (its counters in
//! a SQLite store on disk, one recorded call a model call).
//!
//! `cargo bench -p cairn-agent --bench agent_loop` (`-- --quick` for a short run).
//! The target and the latest figures are in docs/performance.md.
#![expect(clippy::unwrap_used, reason = "benchmark set-up unwraps freely")]

use std::hint::black_box;
use std::sync::Arc;

use cairn_agent::tools::ToolContext;
use cairn_agent::{
    AgentLoop, Approver, AutoApprove, AutonomyLevel, CostGuard, GuardedProvider, HookRegistry,
    LoopConfig, LoopDelegate, LoopStatus, PolicyGate, ToolPolicyConfig, ToolRegistry, ToolRunner,
};
use cairn_core::chat::ChatMessage;
use cairn_core::clock::SystemClock;
use cairn_core::config::CostConfig;
use cairn_llm::LlmProvider;
use cairn_llm::testing::InstantProvider;
use cairn_store::Store;
use cairn_test_support::agent::Echo;
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;

/// Approves everything, streams nothing, records nothing.
struct Quiet;

impl LoopDelegate for Quiet {
    fn approver(&self) -> &dyn Approver {
        &AutoApprove
    }
}

fn build_agent(provider: Arc<dyn LlmProvider>) -> AgentLoop {
    let mut registry = ToolRegistry::new();
    registry.register(Arc::new(Echo)).unwrap();
    let policy = PolicyGate::new(&ToolPolicyConfig {
        autonomy: AutonomyLevel::Full,
        ..Default::default()
    });
    let runner = Arc::new(ToolRunner::new(Arc::new(registry), Arc::new(policy)));
    AgentLoop::new(
        provider,
        runner,
        Arc::new(HookRegistry::new()),
        LoopConfig::default(),
    )
}

fn conversation() -> Vec<ChatMessage> {
    vec![
        ChatMessage::system("You are a benchmark agent."),
        ChatMessage::user("Echo hello, then say done."),
    ]
}

fn bench_loop(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let ctx = ToolContext::new(workspace.path(), "bench");
    let provider = Arc::new(
        InstantProvider::always(InstantProvider::text_response("done")).without_recording(),
    );
    let agent = build_agent(provider.clone());
    let call = InstantProvider::tool_call_response("call-1", "echo", json!({"text": "hello"}));

    let mut group = c.benchmark_group("agent_loop");
    group.bench_function("plain_answer_1_iteration", |b| {
        b.iter(|| {
            let mut messages = conversation();
            let outcome = rt.block_on(agent.run(&Quiet, &mut messages, &ctx));
            assert_eq!(
                (outcome.status, outcome.iterations),
                (LoopStatus::Answered, 1)
            );
            black_box(messages)
        });
    });
    group.bench_function("tool_call_then_answer_2_iterations", |b| {
        b.iter(|| {
            provider.push(call.clone());
            let mut messages = conversation();
            let outcome = rt.block_on(agent.run(&Quiet, &mut messages, &ctx));
            assert_eq!(
                (outcome.status, outcome.iterations),
                (LoopStatus::Answered, 2)
            );
            black_box(messages)
        });
    });
    // The same plain turn with the cost guard around the model, as the
    // daemon wires it: counters shared through a SQLite store on disk.
    let db = tempfile::tempdir().unwrap();
    let store = rt.block_on(async {
        let url = format!("sqlite://{}/cairn.db", db.path().display());
        Store::open(&url).await.unwrap().0
    });
    let config = CostConfig {
        daily_budget_cents: Some(u64::MAX / 100),
        hourly_action_limit: None,
    };
    let guard = Arc::new(
        rt.block_on(CostGuard::load(
            store.clone(),
            &config,
            Arc::new(SystemClock),
        ))
        .unwrap(),
    );
    let guarded = build_agent(Arc::new(GuardedProvider::new(provider.clone(), guard)));
    group.bench_function("plain_answer_1_iteration_cost_guarded", |b| {
        b.iter(|| {
            let mut messages = conversation();
            let outcome = rt.block_on(guarded.run(&Quiet, &mut messages, &ctx));
            assert_eq!(
                (outcome.status, outcome.iterations),
                (LoopStatus::Answered, 1)
            );
            black_box(messages)
        });
    });
    group.finish();
    rt.block_on(store.close());
}

criterion_group!(benches, bench_loop);
criterion_main!(benches);
