use std::sync::mpsc;
use std::time::Duration;

use chrono::TimeZone;

use super::*;
use cairn_core::clock::FixedClock;

fn at(day: u32, h: u32, m: u32, s: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, day, h, m, s).unwrap()
}

fn setup(budget_cents: Option<u64>, hourly: Option<u64>) -> (CostGuard, Arc<FixedClock>) {
    let clock = Arc::new(FixedClock::new(at(9, 12, 0, 0)));
    let config = CostConfig {
        daily_budget_cents: budget_cents,
        hourly_action_limit: hourly,
    };
    (CostGuard::new(&config, clock.clone()), clock)
}

async fn call(guard: &CostGuard, cost: u64) {
    guard.admit().await.unwrap();
    guard.record(cost).await;
}

#[tokio::test]
async fn budget_warns_at_80_percent_then_refuses() {
    // 1 cent = 10_000 micro-dollars.
    let (guard, _) = setup(Some(1), None);
    call(&guard, 6_000).await;
    assert!(!guard.status().warning);
    call(&guard, 2_000).await;
    let status = guard.status();
    assert!(status.warning && !status.exceeded);
    assert!(guard.lock().warned);
    call(&guard, 2_500).await;
    let status = guard.status();
    assert!(status.warning && status.exceeded);
    assert_eq!(status.spent_micros, 10_500);
    assert_eq!(
        guard.admit().await,
        Err(CostLimitError::DailyBudget {
            spent_micros: 10_500,
            budget_micros: 10_000,
        })
    );
    assert_eq!(guard.status().hourly_calls, 3, "a refusal is not a call");
}

#[tokio::test]
async fn the_day_rolls_over_at_utc_midnight() {
    let (guard, clock) = setup(Some(1), None);
    clock.set(at(9, 23, 59, 59));
    call(&guard, 10_000).await;
    assert!(guard.check().await.is_err());
    assert!(guard.exceeded.load(Ordering::Acquire));
    clock.set(at(10, 0, 0, 0));
    assert_eq!(guard.check().await, Ok(()));
    assert!(!guard.exceeded.load(Ordering::Acquire), "flag reset");
    let status = guard.status();
    assert_eq!(status.date, at(10, 0, 0, 0).date_naive());
    assert_eq!((status.spent_micros, status.warning), (0, false));
    assert!(!guard.lock().warned, "the warning is given again each day");
    call(&guard, 8_000).await;
    assert!(guard.lock().warned);
}

#[tokio::test]
async fn a_cost_counts_on_the_day_the_call_ends() {
    let (guard, clock) = setup(Some(1), None);
    clock.set(at(9, 23, 59, 59));
    guard.admit().await.unwrap();
    clock.set(at(10, 0, 0, 1));
    guard.record(4_000).await;
    assert_eq!(guard.status().spent_micros, 4_000);
    assert_eq!(guard.status().date, at(10, 0, 0, 0).date_naive());
}

#[tokio::test]
async fn the_hourly_window_slides() {
    let (guard, clock) = setup(None, Some(3));
    for m in [0, 10, 20] {
        clock.set(at(9, 13, m, 0));
        guard.admit().await.unwrap();
    }
    clock.set(at(9, 13, 59, 59));
    let refused = guard.admit().await.unwrap_err();
    assert_eq!(
        refused,
        CostLimitError::HourlyLimit {
            limit: 3,
            next_allowed: Some(at(9, 14, 0, 0)),
        }
    );
    assert_eq!(
        refused.to_string(),
        "hourly limit of 3 LLM calls reached; next call allowed at 14:00 UTC"
    );
    assert!(guard.status().hourly_limit_reached());
    // Exactly one hour after the first call, its slot is free again.
    clock.set(at(9, 14, 0, 0));
    guard.admit().await.unwrap();
    let refused = guard.admit().await.unwrap_err();
    assert!(refused.to_string().ends_with("at 14:10 UTC"), "{refused}");
    assert_eq!(guard.status().hourly_calls, 3);
}

#[tokio::test]
async fn the_window_slides_across_midnight() {
    let (guard, clock) = setup(None, Some(1));
    clock.set(at(9, 23, 30, 0));
    guard.admit().await.unwrap();
    clock.set(at(10, 0, 10, 0));
    assert!(guard.check().await.is_err());
    clock.set(at(10, 0, 30, 0));
    assert_eq!(guard.check().await, Ok(()));
}

#[tokio::test]
async fn check_does_not_count_but_admit_does() {
    let (guard, _) = setup(None, Some(1));
    guard.check().await.unwrap();
    guard.check().await.unwrap();
    assert_eq!(guard.status().hourly_calls, 0);
    guard.admit().await.unwrap();
    assert!(guard.check().await.is_err());
}

#[tokio::test]
async fn an_exceeded_budget_refuses_without_the_lock() {
    let (guard, _) = setup(Some(1), None);
    call(&guard, 12_345).await;
    let held = guard.lock();
    let (tx, rx) = mpsc::channel();
    std::thread::scope(|scope| {
        scope.spawn(|| tx.send(futures::executor::block_on(guard.admit())).unwrap());
        // Only reached with the lock still held: the check must not need it.
        let answer = rx.recv_timeout(Duration::from_secs(30));
        drop(held);
        assert_eq!(
            answer.unwrap(),
            Err(CostLimitError::DailyBudget {
                spent_micros: 12_345,
                budget_micros: 10_000,
            })
        );
    });
}

#[tokio::test]
async fn unlimited_never_refuses_but_still_counts() {
    let (guard, _) = setup(None, None);
    for _ in 0..50 {
        call(&guard, 1_000_000_000).await;
    }
    let status = guard.status();
    assert_eq!(status.spent_micros, 50_000_000_000);
    assert_eq!(status.hourly_calls, 50);
    assert!(!status.warning && !status.exceeded && !status.hourly_limit_reached());
    assert_eq!(
        serde_json::to_value(&status).unwrap(),
        serde_json::json!({
            "date": "2026-03-09",
            "spent_micros": 50_000_000_000_u64,
            "daily_budget_cents": null,
            "hourly_calls": 50,
            "hourly_limit": null,
            "warning": false,
            "exceeded": false,
            "agents": [{
                "id": "main",
                "spent_micros": 50_000_000_000_u64,
                "calls": 0,
                "daily_budget_cents": null,
                "exceeded": false,
            }],
        })
    );
}

#[tokio::test]
async fn zero_limits_refuse_everything() {
    let (guard, _) = setup(Some(0), None);
    assert!(matches!(
        guard.admit().await,
        Err(CostLimitError::DailyBudget { .. })
    ));
    let (guard, _) = setup(None, Some(0));
    assert_eq!(
        guard.admit().await,
        Err(CostLimitError::HourlyLimit {
            limit: 0,
            next_allowed: None,
        })
    );
}

#[tokio::test]
async fn debug_output_is_short() {
    let (guard, _) = setup(Some(500), Some(10));
    let text = format!("{guard:?}");
    assert!(text.contains("budget_micros: Some(5000000)"), "{text}");
}

/// A call of `agent` costing `cost`, answered by a model.
async fn call_as(guard: &CostGuard, agent: &str, cost: u64) {
    let ticket = guard.admit_as(agent).await.unwrap();
    guard.finish(ticket, cost, Some("m")).await;
}

fn line<'a>(status: &'a CostStatus, agent: &str) -> &'a AgentCost {
    status.agents.iter().find(|a| a.id == agent).unwrap()
}

#[tokio::test]
async fn an_agent_over_its_share_is_refused_and_the_others_go_on() {
    // A $1.00 budget; family's share is 1 cent (10_000 micro-dollars).
    let (guard, clock) = setup(Some(100), None);
    guard.set_agents(vec![("family".into(), Some(1)), ("coder".into(), None)]);
    call_as(&guard, "family", 6_000).await;
    call_as(&guard, "main", 50_000).await;
    // A stream cut short: paid for, but no answered call.
    let ticket = guard.admit_as("family").await.unwrap();
    guard.finish(ticket, 5_000, None).await;
    let refused = guard.admit_as("family").await.unwrap_err();
    assert_eq!(
        refused,
        CostLimitError::AgentShare {
            agent: "family".into(),
            spent_micros: 11_000,
            share_micros: 10_000,
        }
    );
    assert!(
        refused
            .to_string()
            .starts_with("agent family's daily LLM budget share of $0.01 reached")
    );
    assert!(guard.check_as("family").await.is_err());
    // Main and an agent without a share answer to the global budget only.
    call_as(&guard, "main", 1_000).await;
    call_as(&guard, "coder", 1_000).await;
    let status = guard.status();
    assert_eq!(status.spent_micros, 63_000, "the total has every line");
    let ids: Vec<&str> = status.agents.iter().map(|a| a.id.as_str()).collect();
    assert_eq!(
        ids,
        ["main", "family", "coder"],
        "main first, as configured"
    );
    let family = line(&status, "family");
    assert_eq!(
        (
            family.spent_micros,
            family.calls,
            family.daily_budget_cents,
            family.exceeded
        ),
        (11_000, 1, Some(1), true),
        "recorded without a model is no answered call"
    );
    let main = line(&status, "main");
    assert_eq!(
        (main.spent_micros, main.calls, main.exceeded),
        (51_000, 2, false)
    );
    // The next UTC day starts every line again.
    clock.set(at(10, 0, 0, 1));
    guard.admit_as("family").await.unwrap();
    assert_eq!(line(&guard.status(), "family").spent_micros, 0);
}

#[tokio::test]
async fn the_global_limits_still_hold_an_agent_within_its_share() {
    let (guard, _) = setup(Some(1), Some(3));
    guard.set_agents(vec![("family".into(), Some(1))]);
    call_as(&guard, "main", 10_000).await;
    assert!(matches!(
        guard.admit_as("family").await,
        Err(CostLimitError::DailyBudget { .. })
    ));
    let (guard, _) = setup(None, Some(2));
    guard.set_agents(vec![("family".into(), Some(1))]);
    call_as(&guard, "main", 0).await;
    call_as(&guard, "family", 0).await;
    assert!(matches!(
        guard.admit_as("family").await,
        Err(CostLimitError::HourlyLimit { .. })
    ));
}

#[tokio::test]
async fn an_agents_provider_counts_its_calls_and_those_it_delegates() {
    use cairn_llm::testing::InstantProvider;
    use cairn_llm::{ChatRequest, LlmProvider, ReloadableProvider};

    let (guard, _) = setup(Some(100), None);
    let guard = Arc::new(guard);
    guard.set_agents(vec![("family".into(), Some(1))]);
    let priced = cairn_llm::ChatResponse {
        cost_micros: 4_000,
        ..InstantProvider::text_response("ok")
    };
    let inner = Arc::new(InstantProvider::always(priced));
    let guarded: Arc<dyn LlmProvider> =
        Arc::new(GuardedProvider::new(inner.clone(), Arc::clone(&guard)));
    // As wired: the reloadable chain around the guard, shared by every agent.
    let shared: Arc<dyn LlmProvider> = Arc::new(ReloadableProvider::new(guarded));
    let family: Arc<dyn LlmProvider> = Arc::new(AgentProvider::new(Arc::clone(&shared), "family"));
    let request = ChatRequest::new(vec![cairn_core::chat::ChatMessage::user("hi")]);
    family.complete(&request).await.unwrap();
    family.complete(&request).await.unwrap();
    shared.complete(&request).await.unwrap();
    // A turn pins the provider: still family's.
    let pinned = cairn_llm::pin(&family);
    assert!(!Arc::ptr_eq(&pinned, &family));
    pinned
        .stream(&request)
        .await
        .unwrap()
        .into_response()
        .await
        .unwrap();
    // Three calls of family's: 12_000 over its 10_000 share.
    let refused = family.complete(&request).await.unwrap_err();
    assert_eq!(refused.kind(), cairn_llm::LlmErrorKind::CostLimit);
    assert!(refused.to_string().contains("agent family's"), "{refused}");
    shared.complete(&request).await.unwrap();
    let status = guard.status();
    assert_eq!(
        (
            line(&status, "family").spent_micros,
            line(&status, "family").calls
        ),
        (12_000, 3)
    );
    assert_eq!(line(&status, "main").spent_micros, 8_000);
    assert_eq!(inner.calls(), 5, "the refused call reached no provider");
    assert_eq!(current_agent().as_ref(), "main", "outside any agent's call");
}
