//! When slots fire: DST, catch-up after downtime, one-shots, restarts,
//! routines added by another process.

use super::*;

#[tokio::test(start_paused = true)]
async fn cron_fires_at_the_right_instants_across_a_dst_change() {
    let s = setup(t0()).await;
    // 02:30 does not exist in New York on 8 March 2026: it fires at 03:00 EDT.
    let r = s
        .routine("name: nightly\ntrigger: {type: cron, schedule: '30 2 * * *'}\naction: {type: notification, message: hi}\ntimezone: America/New_York\n")
        .await;
    let engine = s.engine("a");
    let (cancel, handle) = s.spawn(&engine);
    tokio::time::sleep(Duration::from_secs(3 * 86_400)).await;
    cancel.cancel();
    handle.await.unwrap();
    let runs = s.runs(&r).await;
    let slots: Vec<_> = runs
        .iter()
        .map(|r| r.scheduled_for.unwrap().to_rfc3339())
        .collect();
    assert_eq!(
        slots,
        [
            "2026-03-08T07:00:00+00:00",
            "2026-03-09T06:30:00+00:00",
            "2026-03-10T06:30:00+00:00"
        ]
    );
    for run in &runs {
        assert_eq!(
            run.started_at,
            run.scheduled_for.unwrap(),
            "no lateness on a paused clock"
        );
        assert_eq!(run.status, RunStatus::Ok);
    }
}

/// A day step keeps its step after its first fire: the schedule is read
/// again at each slot, anchored so the slot stays on its grid.
#[tokio::test(start_paused = true)]
async fn every_other_day_fires_every_other_day() {
    let s = setup(t0()).await;
    let r = s
        .routine("name: plants\ntrigger: {type: cron, schedule: 'every 2 days at 9am'}\naction: {type: notification, message: water}\n")
        .await;
    let engine = s.engine("a");
    let (cancel, handle) = s.spawn(&engine);
    tokio::time::sleep(Duration::from_secs(7 * 86_400)).await;
    cancel.cancel();
    handle.await.unwrap();
    let days: Vec<u32> = s
        .runs(&r)
        .await
        .iter()
        .map(|r| chrono::Datelike::day(&r.scheduled_for.unwrap()))
        .collect();
    assert_eq!(days, [8, 10, 12, 14]);
}

/// The daemon was down from 03:00 to 08:30: an hourly routine missed six slots.
async fn after_downtime(policy: &str) -> (Setup, Routine, RoutineEngine) {
    let s = setup(t0()).await;
    let yaml = format!(
        "name: hourly\ntrigger: {{type: cron, schedule: '0 * * * *'}}\naction: {{type: notification, message: hi}}\nguardrails: {{catch_up: {policy}{}}}\n",
        if policy == "all" {
            ", catch_up_limit: 3"
        } else {
            ""
        }
    );
    let r = s.routine(&yaml).await;
    let mut stored = s.store.get_routine(r.id).await.unwrap().unwrap();
    stored.runtime.next_fire_at = Some(Utc.with_ymd_and_hms(2026, 3, 8, 3, 0, 0).unwrap());
    s.store.update_routine(&stored).await.unwrap();
    s.clock
        .set(Utc.with_ymd_and_hms(2026, 3, 8, 8, 30, 0).unwrap());
    let engine = s.engine("a");
    engine.tick(s.clock.now()).await.unwrap();
    engine.idle().await;
    (s, r, engine)
}

#[tokio::test(start_paused = true)]
async fn catch_up_once_runs_the_latest_missed_slot_once() {
    let (s, r, _) = after_downtime("once").await;
    let runs = s.runs(&r).await;
    assert_eq!(runs.len(), 1);
    assert_eq!(
        runs[0].scheduled_for,
        Some(Utc.with_ymd_and_hms(2026, 3, 8, 8, 0, 0).unwrap())
    );
    assert!(
        runs[0]
            .result_summary
            .as_deref()
            .unwrap()
            .contains("6 slot(s) were missed"),
        "{:?}",
        runs[0].result_summary
    );
    let next = s
        .store
        .get_routine(r.id)
        .await
        .unwrap()
        .unwrap()
        .runtime
        .next_fire_at;
    assert_eq!(
        next,
        Some(Utc.with_ymd_and_hms(2026, 3, 8, 9, 0, 0).unwrap())
    );
}

#[tokio::test(start_paused = true)]
async fn catch_up_skip_records_one_skipped_run_saying_how_many() {
    let (s, r, _) = after_downtime("skip").await;
    let runs = s.runs(&r).await;
    assert_eq!(statuses(&runs), [RunStatus::Skipped]);
    let reason = runs[0].skip_reason.as_deref().unwrap();
    assert!(reason.starts_with("6 slot(s) were missed"), "{reason}");
    assert_eq!(s.script.count("hourly"), 0);
    let next = s
        .store
        .get_routine(r.id)
        .await
        .unwrap()
        .unwrap()
        .runtime
        .next_fire_at;
    assert_eq!(
        next,
        Some(Utc.with_ymd_and_hms(2026, 3, 8, 9, 0, 0).unwrap())
    );
}

#[tokio::test(start_paused = true)]
async fn catch_up_all_runs_each_missed_slot_up_to_the_bound() {
    let (s, r, _) = after_downtime("all").await;
    let runs = s.runs(&r).await;
    let hours: Vec<_> = runs
        .iter()
        .map(|r| r.scheduled_for.unwrap().format("%H:%M").to_string())
        .collect();
    assert_eq!(hours, ["06:00", "07:00", "08:00"]);
    assert_eq!(statuses(&runs), [RunStatus::Ok; 3]);
    assert_eq!(s.script.count("hourly"), 3);
}

#[tokio::test(start_paused = true)]
async fn a_one_shot_fires_once_and_never_again_after_a_restart() {
    let s = setup(t0()).await;
    let r = s
        .routine("name: remind-tea\ntrigger: {type: once, at: 'in 20m'}\naction: {type: notification, message: tea, title: Tea}\n")
        .await;
    let engine = s.engine("a");
    let (cancel, handle) = s.spawn(&engine);
    tokio::time::sleep(Duration::from_secs(3600)).await;
    cancel.cancel();
    handle.await.unwrap();
    assert_eq!(s.runs(&r).await.len(), 1);
    let stored = s.store.get_routine(r.id).await.unwrap().unwrap();
    assert!(!stored.spec.enabled);
    assert_eq!(stored.runtime.next_fire_at, None);

    // A new process on the same database: nothing fires again.
    let again = s.engine("b");
    let (cancel, handle) = s.spawn(&again);
    tokio::time::sleep(Duration::from_secs(86_400)).await;
    cancel.cancel();
    handle.await.unwrap();
    assert_eq!(s.runs(&r).await.len(), 1);
    assert_eq!(s.script.count("remind-tea"), 1);
}

#[tokio::test(start_paused = true)]
async fn a_killed_run_is_interrupted_after_restart_and_the_routine_fires_again() {
    let s = setup(t0()).await;
    let r = s
        .routine("name: sync\ntrigger: {type: cron, schedule: '*/10 * * * *'}\naction: {type: notification, message: x}\n")
        .await;
    // What a process killed during the 12:10 run leaves behind: the slot
    // claimed, the run `running` under a lease nobody renews.
    let slot = t0() + chrono::Duration::minutes(10);
    s.clock.set(slot);
    let mut dead = settings("dead");
    dead.lease = Duration::from_secs(60);
    let run = slot_run(&r, slot, "dead", slot + chrono::Duration::seconds(60));
    claim_as_a_dead_process(&s.store, &run, slot + chrono::Duration::minutes(10)).await;
    s.clock.set(slot + chrono::Duration::minutes(2));

    let restarted = s.engine("second");
    let (cancel, handle) = s.spawn(&restarted);
    tokio::time::sleep(Duration::from_secs(10 * 60)).await;
    cancel.cancel();
    handle.await.unwrap();
    let runs = s.runs(&r).await;
    // The 12:10 slot (a reminder, safe to repeat) is re-run as its attempt 2.
    assert_eq!(
        statuses(&runs),
        [RunStatus::Interrupted, RunStatus::Ok, RunStatus::Ok]
    );
    assert_eq!(
        runs[0].result_summary.as_deref(),
        Some(
            format!(
                "interrupted by a crash of dead; re-run as attempt 2 (run {})",
                runs[1].id
            )
            .as_str()
        )
    );
    assert_eq!((runs[1].scheduled_for, runs[1].attempt), (Some(slot), 2));
    assert_eq!(
        runs[2].scheduled_for,
        Some(t0() + chrono::Duration::minutes(20))
    );
    // The interruption is not a failure.
    let stored = s.store.get_routine(r.id).await.unwrap().unwrap();
    assert_eq!(stored.runtime.consecutive_failures, 0);
}

#[tokio::test(start_paused = true)]
async fn a_routine_added_by_another_process_is_live_at_once() {
    let s = setup(t0()).await;
    let live = s.live_lines();
    let engine = s.engine("a");
    let (cancel, handle) = s.spawn(&engine);
    tokio::time::sleep(Duration::from_secs(5)).await;
    // Another process (its own connection pool, its own signal) adds a
    // routine due in 3 s: the engine hears it from the database.
    let (other, _) = Store::open(&s.url).await.unwrap();
    let spec = RoutineSpec::parse("name: later\ntrigger: {type: once, at: 'in 3s'}\naction: {type: notification, message: x}\n", SpecFormat::Yaml).unwrap();
    let mut r = Routine::new(spec, "ada", s.clock.now());
    r.runtime.next_fire_at = Some(s.clock.now() + chrono::Duration::seconds(3));
    s.heard(cairn_store::Topic::Routines, other.create_routine(&r))
        .await
        .unwrap();
    live.next().await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    cancel.cancel();
    handle.await.unwrap();
    let runs = s.runs(&r).await;
    assert_eq!(runs.len(), 1);
    assert_eq!(
        runs[0].started_at,
        runs[0].scheduled_for.unwrap(),
        "fired on its slot"
    );
}

#[tokio::test(start_paused = true)]
async fn a_change_a_webhook_noticed_first_still_wakes_the_timer() {
    let s = setup(t0()).await;
    let live = s.live_lines();
    let engine = s.engine("a");
    let (cancel, handle) = s.spawn(&engine);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (other, _) = Store::open(&s.url).await.unwrap();
    // A webhook (or chat message) reloads the cache before the engine's
    // own reload runs: the engine must still wake the timer for the new slot.
    // The engine hears the other process in real time and now and then
    // reloads first; that round is not this case, so it is set up again.
    let mut noticed = None;
    for attempt in 0..5 {
        let yaml = format!(
            "name: later{attempt}\ntrigger: {{type: once, at: 'in 3s'}}\naction: {{type: notification, message: x}}\n"
        );
        let spec = RoutineSpec::parse(&yaml, SpecFormat::Yaml).unwrap();
        let mut r = Routine::new(spec, "ada", s.clock.now());
        r.runtime.next_fire_at = Some(s.clock.now() + chrono::Duration::seconds(3));
        let webhook_first = s
            .heard(cairn_store::Topic::Routines, async {
                other.create_routine(&r).await.unwrap();
                engine.refresh_triggered().await.unwrap()
            })
            .await;
        if webhook_first {
            noticed = Some(r);
            break;
        }
    }
    let r = noticed.expect("in five rounds the webhook's reload never came first");
    live.next().await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    cancel.cancel();
    handle.await.unwrap();
    let runs = s.runs(&r).await;
    assert_eq!(runs.len(), 1, "the new routine fired");
    assert_eq!(runs[0].started_at, runs[0].scheduled_for.unwrap());
}

/// A crowded slot's routines are read a second ahead of it. A routine that
/// changes in that second without a change signal (here a failure, which
/// moves its streak and so brings backoff) fires as it is at the slot, not
/// as it was read; the rest start on the slot.
#[tokio::test(start_paused = true)]
async fn a_crowded_slot_read_ahead_still_sees_a_change_made_after_the_read() {
    let s = setup(t0()).await;
    let hourly = |name: &str| {
        format!(
            "name: {name}\ntrigger: {{type: cron, schedule: '0 * * * *'}}\naction: {{type: notification, message: hi}}\n"
        )
    };
    let mut crowd = Vec::new();
    for i in 0..119 {
        crowd.push(s.routine(&hourly(&format!("hourly{i}"))).await);
    }
    let failing = s.routine(&hourly("failing")).await;
    let slot = t0() + chrono::Duration::hours(1);
    let engine = s.engine("a");
    let (cancel, handle) = s.spawn(&engine);
    // Half a second before the slot, after its read: a run of the routine
    // (by hand, elsewhere) fails.
    tokio::time::sleep(Duration::from_millis(3_599_500)).await;
    let elsewhere = s.engine("b");
    elsewhere.fire_manual(&failing, None, None).await.unwrap();
    elsewhere.idle().await;
    let stored = s.store.get_routine(failing.id).await.unwrap().unwrap();
    assert_eq!(stored.runtime.consecutive_failures, 1);
    tokio::time::sleep(Duration::from_secs(10)).await;
    cancel.cancel();
    handle.await.unwrap();
    let at_slot: Vec<_> = s
        .runs(&failing)
        .await
        .into_iter()
        .filter(|r| r.scheduled_for == Some(slot))
        .collect();
    assert_eq!(at_slot.len(), 1);
    assert_eq!(at_slot[0].status, RunStatus::Skipped);
    assert!(
        at_slot[0]
            .skip_reason
            .as_deref()
            .unwrap_or("")
            .starts_with("backoff"),
        "{:?}",
        at_slot[0].skip_reason
    );
    for r in &crowd {
        let runs = s.runs(r).await;
        assert_eq!(runs.len(), 1, "{}", r.spec.name);
        assert_eq!(runs[0].scheduled_for, Some(slot));
        assert_eq!(
            runs[0].started_at, slot,
            "{} started on its slot",
            r.spec.name
        );
    }
}
