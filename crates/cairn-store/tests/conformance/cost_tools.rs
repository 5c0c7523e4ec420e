//! The shared cost counters, tool health and job repair (migration 11).

use std::sync::Arc;

use cairn_core::job::{JobRecord, JobState};
use cairn_store::{CostLimits, JobRepair, LlmAdmission, Store};
use serde_json::json;
use uuid::Uuid;

use crate::fixture::Fixture;
use crate::routines::at;

fn admitted(a: &LlmAdmission) -> Uuid {
    match a {
        LlmAdmission::Admitted { call_id, .. } => call_id.unwrap(),
        other => panic!("expected an admission, got {other:?}"),
    }
}

pub async fn spend_adds_up_and_reservations_hold_the_budget(fx: &Fixture) {
    let s = &fx.store;
    let limits = CostLimits {
        budget_micros: Some(1_000),
        hourly_limit: None,
    };
    let first = admitted(&s.admit_llm_call(at(0), limits, true).await.unwrap());
    let totals = s
        .finish_llm_call(first, "main", 600, None, at(1))
        .await
        .unwrap();
    assert_eq!((totals.spent_micros, totals.reserved_micros), (600, 0));
    // Finishing twice adds nothing.
    assert_eq!(
        s.finish_llm_call(first, "main", 600, None, at(1))
            .await
            .unwrap()
            .spent_micros,
        600
    );
    // A call in flight reserves the day's dearest call (600): 600 + 600 >= 1000.
    let second = admitted(&s.admit_llm_call(at(2), limits, true).await.unwrap());
    let refused = s.admit_llm_call(at(3), limits, true).await.unwrap();
    match refused {
        LlmAdmission::OverBudget { totals } => {
            assert_eq!((totals.spent_micros, totals.reserved_micros), (600, 600));
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    let totals = s
        .finish_llm_call(second, "main", 100, None, at(4))
        .await
        .unwrap();
    assert_eq!(totals.spent_micros, 700);
    assert_eq!(totals.hourly_calls, 2);
    // Another store on the same database sees the same totals.
    let (other, _) = Store::open(&fx.url).await.unwrap();
    assert_eq!(other.cost_totals(at(5)).await.unwrap().spent_micros, 700);
    other.close().await;
    assert_eq!(
        s.add_llm_spend(400, at(6)).await.unwrap().spent_micros,
        1_100
    );
    assert!(matches!(
        s.admit_llm_call(at(7), limits, true).await.unwrap(),
        LlmAdmission::OverBudget { .. }
    ));
    let day = at(7).date_naive();
    assert!(s.claim_cost_warning(day).await.unwrap());
    assert!(!s.claim_cost_warning(day).await.unwrap());
    assert!(s.cost_totals(at(8)).await.unwrap().warned);
}

pub async fn the_hourly_window_slides_and_names_the_next_slot(fx: &Fixture) {
    let s = &fx.store;
    let limits = CostLimits {
        budget_micros: None,
        hourly_limit: Some(2),
    };
    admitted(&s.admit_llm_call(at(0), limits, true).await.unwrap());
    admitted(&s.admit_llm_call(at(10), limits, true).await.unwrap());
    match s.admit_llm_call(at(20), limits, true).await.unwrap() {
        LlmAdmission::HourlyLimit {
            totals,
            next_allowed,
        } => {
            assert_eq!(totals.hourly_calls, 2);
            assert_eq!(next_allowed, Some(at(3_600)));
        }
        other => panic!("expected the hourly limit, got {other:?}"),
    }
    // Exactly one hour after the first call it has left the window.
    admitted(&s.admit_llm_call(at(3_600), limits, true).await.unwrap());
    let zero = CostLimits {
        budget_micros: None,
        hourly_limit: Some(0),
    };
    assert!(matches!(
        s.admit_llm_call(at(3_601), zero, true).await.unwrap(),
        LlmAdmission::HourlyLimit {
            next_allowed: None,
            ..
        }
    ));
}

pub async fn concurrent_admissions_never_overshoot_the_hourly_limit(fx: &Fixture) {
    let (a, _) = Store::open(&fx.url).await.unwrap();
    let (b, _) = Store::open(&fx.url).await.unwrap();
    let limits = CostLimits {
        budget_micros: None,
        hourly_limit: Some(7),
    };
    let tasks: Vec<_> = (0..20)
        .map(|i| {
            let store = if i % 2 == 0 { a.clone() } else { b.clone() };
            tokio::spawn(async move { store.admit_llm_call(at(100), limits, true).await.unwrap() })
        })
        .collect();
    let mut admitted = 0;
    for task in tasks {
        if matches!(task.await.unwrap(), LlmAdmission::Admitted { .. }) {
            admitted += 1;
        }
    }
    assert_eq!(admitted, 7);
    a.close().await;
    b.close().await;
}

pub async fn the_old_settings_blob_is_migrated(fx: &Fixture) {
    let old = fx.sibling().await;
    old.store.migrate_up_to(8).await.unwrap();
    let now_ms = chrono::Utc::now().timestamp_millis();
    let today = chrono::Utc::now().date_naive().to_string();
    old.store
        .set_setting(
            "cost.state",
            &json!({"date": today, "spent_micros": 1_234, "warned": true, "calls_ms": [now_ms - 1_000]}),
        )
        .await
        .unwrap();
    old.store.migrate().await.unwrap();
    let totals = old.store.cost_totals(chrono::Utc::now()).await.unwrap();
    assert_eq!((totals.spent_micros, totals.hourly_calls), (1_234, 1));
    assert!(totals.warned);
    assert_eq!(old.store.get_setting("cost.state").await.unwrap(), None);
    old.cleanup().await;
}

pub async fn tools_are_disabled_once_and_enabled_again(fx: &Fixture) {
    let s = Arc::new(fx.store.clone());
    for i in 0..3 {
        let f = s
            .record_tool_failure("shell", "boom", Some(5), at(i))
            .await
            .unwrap();
        assert!(!f.newly_disabled);
    }
    // A success resets the streak.
    assert!(s.record_tool_success("shell", at(4)).await.unwrap());
    assert!(!s.record_tool_success("shell", at(4)).await.unwrap());
    // Ten concurrent failures: exactly one of them disables the tool.
    let tasks: Vec<_> = (0..10)
        .map(|i| {
            let s = s.clone();
            tokio::spawn(async move {
                s.record_tool_failure("shell", &format!("boom {i}"), Some(5), at(10 + i))
                    .await
                    .unwrap()
                    .newly_disabled
            })
        })
        .collect();
    let mut disabled = 0;
    for t in tasks {
        disabled += u32::from(t.await.unwrap());
    }
    assert_eq!(disabled, 1);
    let list = s.list_tool_health().await.unwrap();
    assert_eq!(list.len(), 1);
    assert!(list[0].disabled);
    assert_eq!(list[0].consecutive_failures, 10);
    assert!(list[0].last_error.as_deref().unwrap().starts_with("boom"));
    // Success does not lift a disablement; enabling does.
    s.record_tool_success("shell", at(30)).await.unwrap();
    assert!(s.list_tool_health().await.unwrap()[0].disabled);
    assert!(s.enable_tool("shell", at(31)).await.unwrap());
    assert!(!s.enable_tool("shell", at(32)).await.unwrap());
    let row = &s.list_tool_health().await.unwrap()[0];
    assert!(!row.disabled && row.consecutive_failures == 0);
    // Without a limit a tool is never disabled.
    for i in 0..6 {
        let f = s
            .record_tool_failure("http", "x", None, at(40 + i))
            .await
            .unwrap();
        assert!(!f.newly_disabled);
    }
}

pub async fn quiet_jobs_are_restarted_then_given_up(fx: &Fixture) {
    let s = &fx.store;
    let mut job = JobRecord::new(Uuid::now_v7(), "t", "do t", "ada", at(0));
    job.lease_owner = Some("proc-a".into());
    job.lease_until = Some(at(10_000));
    s.create_job(&job).await.unwrap();
    assert!(
        s.start_job(job.id, "proc-a", at(10_000), at(1))
            .await
            .unwrap()
    );
    assert!(s.quiet_jobs(at(1), at(2)).await.unwrap().is_empty());
    let quiet = s.quiet_jobs(at(700), at(700)).await.unwrap();
    assert_eq!(quiet.len(), 1);
    assert_eq!(
        s.repair_job(job.id, 2, true, "r", at(700)).await.unwrap(),
        JobRepair::Restarted { attempt: 1 }
    );
    // Pending request: a second repairer changes nothing until it is taken.
    assert_eq!(
        s.repair_job(job.id, 2, true, "r", at(701)).await.unwrap(),
        JobRepair::Unchanged
    );
    assert_eq!(
        s.restart_requested_jobs("proc-a").await.unwrap(),
        vec![job.id]
    );
    assert!(s.take_job_restart(job.id).await.unwrap());
    assert!(!s.take_job_restart(job.id).await.unwrap());
    assert!(s.quiet_jobs(at(650), at(1_000)).await.unwrap().is_empty());
    assert_eq!(
        s.repair_job(job.id, 2, false, "r", at(1_500))
            .await
            .unwrap(),
        JobRepair::Restarted { attempt: 2 }
    );
    assert!(s.restart_requested_jobs("proc-a").await.unwrap().is_empty());
    assert_eq!(
        s.repair_job(job.id, 2, false, "no progress", at(2_500))
            .await
            .unwrap(),
        JobRepair::GaveUp
    );
    assert_eq!(
        s.repair_job(job.id, 2, false, "no progress", at(2_600))
            .await
            .unwrap(),
        JobRepair::Unchanged
    );
    let stored = s.get_job(job.id).await.unwrap().unwrap();
    assert_eq!(stored.state, JobState::Failed);
    assert!(stored.needs_attention);
    assert_eq!(stored.repair_attempts, 2);
    assert_eq!(stored.error.as_deref(), Some("no progress"));
}

pub async fn spend_per_day_and_model_adds_up_and_reads_back_in_order(fx: &Fixture) {
    let s = &fx.store;
    let day = chrono::Duration::days(1);
    s.add_llm_spend(500, at(0)).await.unwrap();
    s.add_model_spend("b-model", 300, at(0)).await.unwrap();
    s.add_model_spend("a-model", 200, at(0)).await.unwrap();
    s.add_model_spend("b-model", 50, at(0)).await.unwrap();
    s.add_llm_spend(70, at(0) + day).await.unwrap();
    s.add_model_spend("a-model", 70, at(0) + day).await.unwrap();
    let first = at(0).date_naive();
    let history = s.cost_history(first).await.unwrap();
    assert_eq!(history.days, vec![(first, 500), (first + day, 70)]);
    let rows: Vec<_> = history
        .models
        .iter()
        .map(|m| (m.day, m.model.as_str(), m.spent_micros, m.calls))
        .collect();
    assert_eq!(
        rows,
        vec![
            (first, "a-model", 200, 1),
            (first, "b-model", 350, 2),
            (first + day, "a-model", 70, 1)
        ]
    );
    // Days before `from` are left out.
    let later = s.cost_history(first + day).await.unwrap();
    assert_eq!(later.days, vec![(first + day, 70)]);
    assert_eq!(later.models.len(), 1);
}
