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
