//! The cost guard around real providers: refusals before the request leaves,
//! cost from the fake server's usage and price table, streaming, restarts
//! against one SQLite file, concurrent calls, and the agent loop behind it.
#![expect(clippy::unwrap_used, reason = "test helpers outside #[test] fns")]

use std::path::Path;
use std::sync::Arc;

use cairn_agent::cost_guard::{GuardedProvider, STATE_KEY};
use cairn_agent::runner::AutoApprove;
use cairn_agent::tools::{ToolContext, ToolRegistry};
use cairn_agent::{
    AgentLoop, Approver, CostGuard, HookRegistry, LoopConfig, LoopDelegate, LoopStatus, PolicyGate,
    ToolPolicyConfig, ToolRunner,
};
use cairn_core::chat::ChatMessage;
use cairn_core::clock::{Clock, FixedClock};
use cairn_core::config::CostConfig;
use cairn_llm::testing::{FAKE_MODEL, FakeLlmServer, InstantProvider, Scripted};
use cairn_llm::{ChatRequest, ChatResponse, LlmError, LlmErrorKind, LlmProvider, build_provider};
use cairn_store::Store;
use chrono::{DateTime, TimeZone, Utc};

fn at(day: u32, h: u32, m: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, day, h, m, 0).unwrap()
}

fn limits(budget_cents: Option<u64>, hourly: Option<u64>) -> CostConfig {
    CostConfig {
        daily_budget_cents: budget_cents,
        hourly_action_limit: hourly,
    }
}

async fn open(dir: &Path) -> Store {
    let url = format!("sqlite://{}", dir.join("cairn.db").display());
    Store::open(&url).await.unwrap().0
}

fn request() -> ChatRequest {
    ChatRequest::new(vec![ChatMessage::user("hi")])
}

/// A guard on a fresh SQLite file and a fake server priced at $1/M input,
/// $2/M output tokens (so usage figures below are easy dollars).
struct Setup {
    server: FakeLlmServer,
    guard: Arc<CostGuard>,
    llm: GuardedProvider,
    clock: Arc<FixedClock>,
    store: Store,
    _dir: tempfile::TempDir,
}

async fn setup(config: CostConfig) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    let clock = Arc::new(FixedClock::new(at(9, 12, 0)));
    let guard = Arc::new(
        CostGuard::load(store.clone(), &config, clock.clone())
            .await
            .unwrap(),
    );
    let server = FakeLlmServer::start().await.unwrap();
    let inner = build_provider(&server.openai_settings()).unwrap();
    let llm = GuardedProvider::new(inner, Arc::clone(&guard));
    Setup {
        server,
        guard,
        llm,
        clock,
        store,
        _dir: dir,
    }
}

#[tokio::test]
async fn the_budget_refuses_before_the_request_leaves() {
    let s = setup(limits(Some(100), None)).await;
    // 0.6M in + 0.1M out = $0.60 + $0.20 = $0.80: the 80% warning.
    s.server
        .push(Scripted::text("one").with_usage(600_000, 100_000));
    let first = s.llm.complete(&request()).await.unwrap();
    assert_eq!(first.cost_micros, 800_000);
    let status = s.guard.status();
    assert!(status.warning && !status.exceeded, "{status:?}");
    // $0.30 more: $1.10, over the $1.00 budget (calls in flight may overshoot).
    s.server.push(Scripted::text("two").with_usage(300_000, 0));
    s.llm.complete(&request()).await.unwrap();
    assert!(s.guard.status().exceeded);

    s.server.push(Scripted::text("never sent"));
    let error = s.llm.complete(&request()).await.unwrap_err();
    assert_eq!(error.kind(), LlmErrorKind::CostLimit);
    assert!(matches!(error, LlmError::CostLimit { .. }));
    assert_eq!(
        error.to_string(),
        "daily LLM budget of $1.00 reached ($1.10 spent today, UTC); raise cost.daily_budget_cents or wait until 00:00 UTC"
    );
    let error = s.llm.stream(&request()).await.unwrap_err();
    assert_eq!(error.kind(), LlmErrorKind::CostLimit);
    assert_eq!(
        s.server.requests().len(),
        2,
        "refused calls reach no provider"
    );
    assert_eq!(s.server.pending(), 1);

    // UTC midnight: a new day, a new budget.
    s.clock.set(at(10, 0, 0));
    s.llm.complete(&request()).await.unwrap();
    assert_eq!(s.server.requests().len(), 3);
    assert_eq!(
        s.guard.status().spent_micros,
        20,
        "default usage 10 in / 5 out"
    );
}

#[tokio::test]
async fn listing_models_goes_through_and_costs_nothing_even_over_budget() {
    let s = setup(limits(Some(1), None)).await;
    s.server
        .push(Scripted::text("spend").with_usage(600_000, 100_000));
    s.llm.complete(&request()).await.unwrap();
    assert!(s.guard.status().exceeded);
    let models = s.llm.list_models().await.unwrap();
    assert_eq!(models, [cairn_llm::ModelInfo::new(FAKE_MODEL)]);
    assert!(s.guard.status().exceeded);
    assert_eq!(s.server.requests().len(), 2);
}

#[tokio::test]
async fn streamed_calls_record_their_cost_when_done() {
    let s = setup(limits(Some(500), None)).await;
    s.server
        .push(Scripted::text("streamed answer").with_usage(1_000_000, 500_000));
    let stream = s.llm.stream(&request()).await.unwrap();
    assert_eq!(
        s.guard.status().spent_micros,
        0,
        "nothing known before Done"
    );
    let response = stream.into_response().await.unwrap();
    assert_eq!(response.text, "streamed answer");
    assert_eq!(response.cost_micros, 2_000_000);
    assert_eq!(s.guard.status().spent_micros, 2_000_000);
    assert!(s.server.requests()[0].is_stream());
    let saved = s.store.cost_totals(at(9, 12, 0)).await.unwrap();
    assert_eq!(saved.spent_micros, 2_000_000);
    assert_eq!(saved.day.to_string(), "2026-03-09");
    assert_eq!(saved.reserved_micros, 0, "the reservation is released");
}

#[tokio::test]
async fn answered_calls_add_to_their_models_daily_spend() {
    let s = setup(limits(None, None)).await;
    s.server.push(
        Scripted::text("one")
            .with_usage(1_000_000, 0)
            .with_model("big-model"),
    );
    s.server.push(Scripted::text("two").with_usage(0, 500_000));
    s.server
        .push(Scripted::text("three").with_usage(1_000_000, 0));
    s.llm.complete(&request()).await.unwrap();
    s.llm.complete(&request()).await.unwrap();
    let stream = s.llm.stream(&request()).await.unwrap();
    stream.into_response().await.unwrap();
    // A refused or failed call is no model's spend.
    s.server.push(Scripted::error(500, "boom"));
    let _ = s.llm.complete(&request()).await;
    let history = s
        .store
        .cost_history(at(9, 0, 0).date_naive())
        .await
        .unwrap();
    let rows: Vec<_> = history
        .models
        .iter()
        .map(|m| (m.model.as_str(), m.spent_micros, m.calls))
        .collect();
    assert_eq!(
        rows,
        vec![("big-model", 1_000_000, 1), (FAKE_MODEL, 2_000_000, 2)]
    );
    assert_eq!(history.days, vec![(at(9, 0, 0).date_naive(), 3_000_000)]);
}

#[tokio::test]
async fn a_stream_dropped_midway_records_what_was_received() {
    let s = setup(limits(Some(500), None)).await;
    // No usage from the server: the cost is estimated from the text received.
    // One 400-character delta per piece, then a long pause: the caller
    // gives up after two.
    let event = format!(
        "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{}\"}}}}]}}\n\n",
        "x".repeat(400)
    );
    let body = event.repeat(5);
    s.server.push(
        Scripted::raw_stream(body)
            .with_chunk_bytes(event.len())
            .with_chunk_delay(std::time::Duration::from_millis(300)),
    );
    let mut stream = s.llm.stream(&request()).await.unwrap();
    let mut received = 0;
    while received < 2 {
        match futures::StreamExt::next(&mut stream)
            .await
            .unwrap()
            .unwrap()
        {
            cairn_llm::StreamEvent::TextDelta(_) => received += 1,
            _ => panic!("unexpected event"),
        }
    }
    drop(stream);
    // The cost is written by a task: wait for it (bounded).
    let mut spent = 0;
    for _ in 0..200 {
        let totals = s.store.cost_totals(at(9, 12, 0)).await.unwrap();
        spent = totals.spent_micros;
        if spent > 0 {
            assert_eq!(totals.reserved_micros, 0);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    // Input "hi" ≈ 1 token at $1/M; 800 characters ≈ 200 tokens at $2/M.
    assert_eq!(spent, 401, "what was received, not the whole answer");
    assert_eq!(s.guard.refresh().await.spent_micros, spent);
}

#[tokio::test]
async fn two_guards_on_one_database_share_the_budget_and_the_window() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(FixedClock::new(at(9, 12, 0)));
    let config = limits(Some(100), Some(3));
    let a = CostGuard::load(open(dir.path()).await, &config, clock.clone())
        .await
        .unwrap();
    let b = CostGuard::load(open(dir.path()).await, &config, clock.clone())
        .await
        .unwrap();
    let t = a.admit().await.unwrap();
    a.finish(t, 600_000, None).await;
    let t = b.admit().await.unwrap();
    b.finish(t, 300_000, None).await;
    assert_eq!(
        a.refresh().await.spent_micros,
        900_000,
        "b's spend is a's too"
    );
    // a is mid-call: its reservation (the dearest call, $0.60) holds b off.
    let in_flight = a.admit().await.unwrap();
    let refused = b.admit().await.unwrap_err();
    assert!(matches!(
        refused,
        cairn_agent::CostLimitError::DailyBudget { .. }
    ));
    a.finish(in_flight, 200_000, None).await;
    assert!(a.status().exceeded);
    // Three calls admitted in the hour across both: the window is full for both.
    let error = b.admit().await.unwrap_err();
    assert!(matches!(
        error,
        cairn_agent::CostLimitError::DailyBudget { .. }
    ));
    assert_eq!(b.refresh().await.hourly_calls, 3);
}

#[tokio::test]
async fn a_restart_keeps_the_day_spend_and_the_hourly_window() {
    let dir = tempfile::tempdir().unwrap();
    let config = limits(Some(100), Some(2));
    let clock = Arc::new(FixedClock::new(at(9, 10, 0)));
    {
        let store = open(dir.path()).await;
        let guard = CostGuard::load(store.clone(), &config, clock.clone())
            .await
            .unwrap();
        guard.admit().await.unwrap();
        guard.record(700_000).await;
        clock.set(at(9, 10, 5));
        guard.admit().await.unwrap();
        guard.record(350_000).await;
        store.close().await;
    }

    clock.set(at(9, 10, 30));
    let store = open(dir.path()).await;
    let guard = CostGuard::load(store.clone(), &config, clock.clone())
        .await
        .unwrap();
    let status = guard.status();
    assert_eq!(status.spent_micros, 1_050_000, "spend survives the restart");
    assert_eq!(status.hourly_calls, 2, "so does the window");
    assert!(status.exceeded && status.warning);
    let refused = guard.admit().await.unwrap_err();
    assert!(
        refused.to_string().contains("$1.05 spent today"),
        "{refused}"
    );

    // A restart on another UTC day starts at zero; the window has moved on.
    clock.set(at(10, 11, 0));
    let guard = CostGuard::load(store, &config, clock.clone())
        .await
        .unwrap();
    let status = guard.status();
    assert_eq!((status.spent_micros, status.hourly_calls), (0, 0));
    assert_eq!(status.date, at(10, 0, 0).date_naive());
    guard.admit().await.unwrap();
}

#[tokio::test]
async fn a_restart_inside_the_hour_still_enforces_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let config = limits(None, Some(2));
    let clock = Arc::new(FixedClock::new(at(9, 13, 2)));
    let store = open(dir.path()).await;
    let guard = CostGuard::load(store.clone(), &config, clock.clone())
        .await
        .unwrap();
    for _ in 0..2 {
        guard.admit().await.unwrap();
        guard.record(0).await;
    }
    drop(guard);
    clock.set(at(9, 13, 30));
    let guard = CostGuard::load(store, &config, clock.clone())
        .await
        .unwrap();
    let refused = guard.admit().await.unwrap_err();
    assert_eq!(
        refused.to_string(),
        "hourly limit of 2 LLM calls reached; next call allowed at 14:02 UTC"
    );
}

#[tokio::test]
async fn the_old_settings_blob_is_no_longer_read() {
    // Migration 11 moved it into the shared tables; a blob written later
    // (an older binary on the same database) is ignored.
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    store
        .set_setting(STATE_KEY, &serde_json::json!({"spent": "lots"}))
        .await
        .unwrap();
    let clock: Arc<dyn Clock> = Arc::new(FixedClock::new(at(9, 12, 0)));
    let guard = CostGuard::load(store, &limits(Some(100), None), clock)
        .await
        .unwrap();
    assert_eq!(guard.status().spent_micros, 0);
}

#[tokio::test]
async fn failed_calls_count_toward_the_hourly_limit() {
    let s = setup(limits(None, Some(1))).await;
    s.server.push(Scripted::auth_error());
    let error = s.llm.complete(&request()).await.unwrap_err();
    assert_eq!(error.kind(), LlmErrorKind::Auth);
    let error = s.llm.complete(&request()).await.unwrap_err();
    assert_eq!(error.kind(), LlmErrorKind::CostLimit);
    assert_eq!(s.server.requests().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_never_overshoot_the_hourly_limit() {
    let clock = Arc::new(FixedClock::new(at(9, 12, 0)));
    let guard = Arc::new(CostGuard::new(&limits(None, Some(5)), clock));
    let inner = Arc::new(InstantProvider::new());
    let llm = Arc::new(GuardedProvider::new(inner.clone(), guard.clone()));
    let calls = (0..20).map(|_| {
        let llm = Arc::clone(&llm);
        tokio::spawn(async move { llm.complete(&request()).await })
    });
    let mut refused = 0;
    for call in calls.collect::<Vec<_>>() {
        if let Err(error) = call.await.unwrap() {
            assert_eq!(error.kind(), LlmErrorKind::CostLimit);
            refused += 1;
        }
    }
    assert_eq!((inner.calls(), refused), (5, 15));
    assert_eq!(guard.status().hourly_calls, 5);
}

struct Quiet;

impl LoopDelegate for Quiet {
    fn approver(&self) -> &dyn Approver {
        &AutoApprove
    }
}

#[tokio::test]
async fn the_agent_loop_behind_the_guard_fails_with_the_typed_error() {
    let clock = Arc::new(FixedClock::new(at(9, 12, 0)));
    let guard = Arc::new(CostGuard::new(&limits(Some(1), None), clock));
    let priced = ChatResponse {
        cost_micros: 10_000,
        ..InstantProvider::text_response("that was a cent")
    };
    let inner = Arc::new(InstantProvider::always(priced));
    let llm = Arc::new(GuardedProvider::new(inner.clone(), guard));
    let runner = Arc::new(ToolRunner::new(
        Arc::new(ToolRegistry::new()),
        Arc::new(PolicyGate::new(&ToolPolicyConfig::default())),
    ));
    let agent = AgentLoop::new(
        llm,
        runner,
        Arc::new(HookRegistry::new()),
        LoopConfig::default(),
    );
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolContext::new(dir.path(), "s");
    let mut messages = vec![ChatMessage::user("hi")];
    let first = agent.run(&Quiet, &mut messages, &ctx).await;
    assert_eq!(first.status, LoopStatus::Answered);
    assert_eq!(first.cost_micros, 10_000);
    let second = agent.run(&Quiet, &mut messages, &ctx).await;
    match second.status {
        LoopStatus::Failed { error } => assert_eq!(error.kind(), LlmErrorKind::CostLimit),
        other => panic!("expected a cost-limit failure, got {other:?}"),
    }
    assert_eq!(inner.calls(), 1);
}

#[tokio::test]
async fn each_agents_line_is_in_the_store_for_every_process() {
    let s = setup(limits(Some(500), None)).await;
    s.guard.set_agents(vec![("family".into(), Some(100))]);
    let family = cairn_agent::AgentProvider::new(Arc::new(s.llm.clone()), "family");
    // $0.60 then a streamed $0.50: family's $1.00 share is spent.
    s.server.push(Scripted::text("one").with_usage(600_000, 0));
    family.complete(&request()).await.unwrap();
    s.server.push(Scripted::text("two").with_usage(500_000, 0));
    family
        .stream(&request())
        .await
        .unwrap()
        .into_response()
        .await
        .unwrap();
    s.server
        .push(Scripted::text("main's").with_usage(200_000, 0));
    s.llm.complete(&request()).await.unwrap();
    let spent = s.store.agent_spend("family", at(9, 12, 0)).await.unwrap();
    assert_eq!((spent.spent_micros, spent.calls), (1_100_000, 2));

    // Another process on the same database holds family to its share too.
    let other = CostGuard::load(s.store.clone(), &limits(Some(500), None), s.clock.clone())
        .await
        .unwrap();
    other.set_agents(vec![("family".into(), Some(100))]);
    let status = other.status();
    let lines: Vec<_> = status
        .agents
        .iter()
        .map(|a| (a.id.as_str(), a.spent_micros, a.exceeded))
        .collect();
    assert_eq!(
        lines,
        [("main", 200_000, false), ("family", 1_100_000, true)]
    );
    let refused = other.admit_as("family").await.unwrap_err();
    assert_eq!(
        refused.to_string(),
        "agent family's daily LLM budget share of $1.00 reached ($1.10 spent today, UTC); raise its daily_budget_cents in [[agents]] or wait until 00:00 UTC"
    );
    other.admit_as("main").await.unwrap();
    assert_eq!(s.server.requests().len(), 3);
}
