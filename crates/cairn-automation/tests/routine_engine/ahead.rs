//! A crowded slot is claimed a little ahead of it (about 118 ms for the 120
//! routines here): its runs start on the slot, and what happens to a
//! routine between the claim and the slot still decides that slot.

use cairn_core::routine::Pause;

use super::*;

fn hourly(name: &str) -> String {
    format!(
        "name: {name}\ntrigger: {{type: cron, schedule: '0 * * * *'}}\naction: {{type: notification, message: hi}}\n"
    )
}

fn slot() -> DateTime<Utc> {
    t0() + chrono::Duration::hours(1)
}

/// Fifty milliseconds before the slot, after the claim.
const AFTER_THE_CLAIM: Duration = Duration::from_millis(3_599_950);

/// A pause, a disable and an edit made after the claim: the paused routine
/// does not run and its slot is owed as missed while paused, the disabled
/// one does not run, the edited one runs as edited; the rest start on the
/// slot.
async fn a_change_after_the_claim_still_decides_the_slot(url: &str) {
    let s = setup_on(url, t0()).await;
    let mut crowd = Vec::new();
    for i in 0..117 {
        crowd.push(s.routine(&hourly(&format!("hourly{i}"))).await);
    }
    let paused = s.routine(&hourly("paused")).await;
    let disabled = s.routine(&hourly("disabled")).await;
    let edited = s.routine(&hourly("edited")).await;
    let engine = s.engine("a");
    let (cancel, handle) = s.spawn(&engine);
    tokio::time::sleep(AFTER_THE_CLAIM).await;
    // Claimed: recorded as of the slot, not begun.
    let claimed = s.runs(&paused).await;
    assert_eq!(claimed.len(), 1, "claimed ahead of the slot");
    assert_eq!(claimed[0].started_at, slot());
    assert_eq!(claimed[0].status, RunStatus::Running);
    assert_eq!(s.script.count("paused"), 0, "not begun");
    let now = s.clock.now();
    let pause = Pause {
        at: now,
        by: "ada".into(),
        note: None,
    };
    assert!(s.store.pause_routine(paused.id, &pause).await.unwrap());
    assert!(
        s.store
            .set_routine_enabled(disabled.id, false, now)
            .await
            .unwrap()
    );
    // Renamed, as `routine apply` writes an edit (its slot computed again).
    let mut changed = s.store.get_routine(edited.id).await.unwrap().unwrap();
    changed.spec.name = "edited-again".into();
    changed.runtime.next_fire_at = Some(slot());
    changed.updated_at = now;
    s.store.update_routine(&changed).await.unwrap();
    tokio::time::sleep(Duration::from_secs(10)).await;
    cancel.cancel();
    handle.await.unwrap();

    assert!(
        s.runs(&paused).await.is_empty(),
        "a pause gives the run back"
    );
    let after = s.store.get_routine(paused.id).await.unwrap().unwrap();
    assert_eq!(after.runtime.next_fire_at, Some(slot()), "the slot is owed");
    assert_eq!(after.runtime.run_count, 0);
    assert!(s.runs(&disabled).await.is_empty());
    assert_eq!(s.script.count("paused") + s.script.count("disabled"), 0);
    let runs = s.runs(&edited).await;
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].scheduled_for, Some(slot()));
    assert_eq!(runs[0].started_at, slot(), "still on the slot");
    assert_eq!(
        (s.script.count("edited"), s.script.count("edited-again")),
        (0, 1)
    );
    for r in &crowd {
        let runs = s.runs(r).await;
        assert_eq!(runs.len(), 1, "{}", r.spec.name);
        assert_eq!(runs[0].started_at, slot(), "{}", r.spec.name);
        assert_eq!(runs[0].status, RunStatus::Ok, "{}", r.spec.name);
        // Begun a moment before the slot, carried out on it, never before.
        let ended = runs[0].completed_at.unwrap();
        assert!(ended >= slot(), "{} ended at {ended}", r.spec.name);
    }
    assert_eq!(s.script.calls.lock().unwrap().len(), 118);
}

/// A routine with a run going when the slot is claimed is left to the slot
/// itself: its run ends just before the slot, so the slot starts (claimed
/// a moment early, `overlap: skip` would have skipped it).
async fn a_routine_with_a_run_going_is_left_to_its_slot(url: &str) {
    let s = setup_on(url, t0()).await;
    for i in 0..119 {
        s.routine(&hourly(&format!("hourly{i}"))).await;
    }
    let slow = s.routine(&hourly("slow-report")).await;
    let engine = s.engine("a");
    let (cancel, handle) = s.spawn(&engine);
    tokio::time::sleep(Duration::from_secs(3_590)).await;
    engine.fire_manual(&slow, None, None).await.unwrap();
    tokio::time::sleep_until(tokio::time::Instant::now() + Duration::from_millis(9_950)).await;
    let runs = s.runs(&slow).await;
    assert_eq!(runs.len(), 1, "only the run by hand: the slot was left");
    // The run by hand ends before the slot.
    s.script.gate.as_ref().unwrap().add_permits(1);
    tokio::time::sleep(Duration::from_secs(10)).await;
    cancel.cancel();
    handle.await.unwrap();
    let at_slot: Vec<_> = s
        .runs(&slow)
        .await
        .into_iter()
        .filter(|r| r.scheduled_for == Some(slot()))
        .collect();
    assert_eq!(at_slot.len(), 1);
    assert_eq!(at_slot[0].status, RunStatus::Ok);
    assert_eq!(at_slot[0].started_at, slot());
    assert_eq!(s.script.count("slow-report"), 2);
}

on_both_backends!(
    a_change_after_the_claim_still_decides_the_slot,
    a_routine_with_a_run_going_is_left_to_its_slot,
);
