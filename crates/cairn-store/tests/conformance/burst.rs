//! A burst of scheduled rounds admitted in one batch (the engine's claim
//! batch): slots claimed, runs read and written a chunk of routines per
//! statement, with the same verdicts as one admission at a time.

use cairn_core::routine::{Overlap, Routine, RoutineRun, RunStatus};
use cairn_store::{Admission, Admitted, AsRead, EncodedEnd, FAILING_READ_MOST, FinishRun, Store};

use crate::admission::ended;
use crate::fixture::Fixture;
use crate::routines::{at, routine, run_for};
use crate::runs::scheduled;

/// More routines than any statement's chunk, so every chunk boundary is crossed.
const BURST: usize = 300;

async fn stored_burst(store: &Store, prefix: &str) -> Vec<Routine> {
    let mut routines = Vec::new();
    for i in 0..BURST {
        let mut r = routine("ada", &format!("{prefix}{i}"));
        r.runtime.next_fire_at = Some(at(60));
        store.create_routine(&r).await.unwrap();
        routines.push(r);
    }
    routines
}

fn round_of(r: &Routine) -> (Admission, Vec<RoutineRun>) {
    let run = run_for(r, Some(at(60)), at(61));
    let mut admission = scheduled(r, &run, Some(at(120)));
    admission.global_max = Some(10 * BURST as u32);
    (admission, vec![run])
}

pub async fn a_burst_is_admitted_once_and_counted(fx: &Fixture) {
    let routines = stored_burst(&fx.store, "burst").await;
    let fires: Vec<_> = routines.iter().map(round_of).collect();
    let rounds = fx.store.admit_rounds(&fires).await.unwrap();
    assert_eq!(rounds.len(), BURST);
    for (round, (_, runs)) in rounds.iter().zip(&fires) {
        assert_eq!(round.admitted, Admitted::Started);
        assert_eq!(round.runs, *runs);
    }
    for r in &routines {
        let got = fx.store.get_routine(r.id).await.unwrap().unwrap();
        assert_eq!(got.runtime.next_fire_at, Some(at(120)), "{}", r.spec.name);
        assert_eq!(got.runtime.run_count, 1);
        assert_eq!(got.runtime.last_run_at, Some(at(61)));
        let runs = fx.store.list_runs(r.id, 10).await.unwrap();
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].status, RunStatus::Running);
    }
    // The same slots again: all taken, nothing more recorded.
    let again: Vec<_> = routines.iter().map(round_of).collect();
    let rounds = fx.store.admit_rounds(&again).await.unwrap();
    assert!(
        rounds
            .iter()
            .all(|r| r.admitted == Admitted::Taken && r.runs.is_empty())
    );
    assert_eq!(fx.store.count_running(None).await.unwrap(), BURST as u64);
}

/// Two processes admitting the same burst at once, one in the opposite
/// order: every slot runs once, and neither batch fails (on PostgreSQL the
/// routines' rows are locked in one order, so the two cannot deadlock).
pub async fn two_processes_admitting_one_burst_run_each_slot_once(fx: &Fixture) {
    let routines = stored_burst(&fx.store, "race").await;
    let other = Store::connect(&fx.url).await.unwrap();
    let forward: Vec<_> = routines.iter().map(round_of).collect();
    let backward: Vec<_> = routines.iter().rev().map(round_of).collect();
    let (a, b) = tokio::join!(
        fx.store.admit_rounds(&forward),
        other.admit_rounds(&backward)
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    let started = a
        .iter()
        .chain(&b)
        .filter(|r| r.admitted == Admitted::Started)
        .count();
    assert_eq!(started, BURST);
    assert_eq!(fx.store.count_running(None).await.unwrap(), BURST as u64);
    for r in &routines {
        assert_eq!(fx.store.list_runs(r.id, 10).await.unwrap().len(), 1);
    }
    other.close().await;
}

/// A slot that already has its run (the routine was set back to it) moves
/// on without a second run, in a burst as alone.
pub async fn a_slot_already_run_is_not_run_again_in_a_burst(fx: &Fixture) {
    let routines = stored_burst(&fx.store, "again").await;
    let done = &routines[7];
    let earlier = run_for(done, Some(at(60)), at(50));
    let unchecked = (Admission::default(), vec![earlier.clone()]);
    assert_eq!(
        fx.store.admit_runs(&[unchecked]).await.unwrap(),
        [Admitted::Started]
    );
    let fires: Vec<_> = routines.iter().map(round_of).collect();
    let rounds = fx.store.admit_rounds(&fires).await.unwrap();
    for (r, round) in routines.iter().zip(&rounds) {
        if r.id == done.id {
            assert_eq!(round.admitted, Admitted::Taken);
            assert!(round.runs.is_empty());
        } else {
            assert_eq!(round.admitted, Admitted::Started, "{}", r.spec.name);
        }
    }
    let runs = fx.store.list_runs(done.id, 10).await.unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].id, earlier.id);
    let got = fx.store.get_routine(done.id).await.unwrap().unwrap();
    assert_eq!(got.runtime.next_fire_at, Some(at(120)));
    assert_eq!(got.runtime.run_count, 1, "only the earlier run counted");
}

/// Later admissions in the batch see the runs a burst recorded before them:
/// a manual fire after its routine's scheduled round meets its limit, and a
/// scheduled round after a manual fire of its routine sees that run going.
pub async fn later_fires_in_a_batch_see_the_rounds_before_them(fx: &Fixture) {
    let routines = stored_burst(&fx.store, "mixed").await;
    let limited = &routines[3];
    let manual = (
        Admission {
            max_concurrent: Some(1),
            ..Admission::default()
        },
        vec![run_for(limited, None, at(62))],
    );
    let mut fires: Vec<_> = routines.iter().map(round_of).collect();
    fires.push(manual);
    let rounds = fx.store.admit_rounds(&fires).await.unwrap();
    assert!(
        rounds[..BURST]
            .iter()
            .all(|r| r.admitted == Admitted::Started)
    );
    match &rounds[BURST].admitted {
        Admitted::Skipped(reason) => assert!(reason.starts_with("max_concurrent"), "{reason}"),
        other => panic!("the manual fire should meet max_concurrent: {other:?}"),
    }

    // A routine that skips overlapping slots, fired by hand first in the batch.
    let mut single = routine("ada", "single");
    single.spec.guardrails.max_concurrent = 1;
    single.runtime.next_fire_at = Some(at(60));
    fx.store.create_routine(&single).await.unwrap();
    let by_hand = (Admission::default(), vec![run_for(&single, None, at(61))]);
    let rounds = fx
        .store
        .admit_rounds(&[by_hand, round_of(&single)])
        .await
        .unwrap();
    assert_eq!(rounds[0].admitted, Admitted::Started);
    match &rounds[1].admitted {
        Admitted::Skipped(reason) => assert!(reason.contains("overlap"), "{reason}"),
        other => panic!("the slot should be skipped while the manual run goes: {other:?}"),
    }
}

/// The ends of a burst's runs in one batch: each routine's failure streak
/// and retention as if its runs had ended one by one.
pub async fn a_burst_of_run_ends_keeps_each_routines_streak_and_retention(fx: &Fixture) {
    let routines = stored_burst(&fx.store, "ends").await;
    let mut fires = Vec::new();
    for r in &routines {
        for secs in 1..=3 {
            fires.push((Admission::default(), vec![run_for(r, None, at(secs))]));
        }
    }
    let admitted = fx.store.admit_runs(&fires).await.unwrap();
    assert!(admitted.iter().all(|a| *a == Admitted::Started));
    let ends: Vec<FinishRun> = fires
        .iter()
        .enumerate()
        .map(|(i, (_, runs))| {
            let run = &runs[0];
            // Even routines succeed, odd ones fail all three times.
            let status = if (i / 3) % 2 == 0 {
                RunStatus::Ok
            } else {
                RunStatus::Failed
            };
            let mut outcome = ended(status, 10 + (i % 3) as i64);
            outcome.retain = Some(2);
            FinishRun {
                run_id: run.id,
                routine_id: run.routine_id,
                outcome,
                notification: None,
                auto_pause: None,
            }
        })
        .collect();
    let done = fx.store.finish_runs(&ends).await.unwrap();
    assert!(done.iter().all(|f| f.ended && !f.paused));
    for (i, r) in routines.iter().enumerate() {
        let got = fx.store.get_routine(r.id).await.unwrap().unwrap();
        let streak = if i % 2 == 0 { 0 } else { 3 };
        assert_eq!(got.runtime.consecutive_failures, streak, "{}", r.spec.name);
        let kept = fx.store.list_runs(r.id, 10).await.unwrap();
        let kept: Vec<_> = kept.iter().map(|run| run.started_at).collect();
        assert_eq!(
            kept,
            [at(3), at(2)],
            "{}: the newest two are kept",
            r.spec.name
        );
    }
}

/// An end encoded ahead of the write (as the engine encodes it, on the
/// run's task) is stored as it was given, on each backend: the run's
/// outcome and its notification, every field, read back equal, whether
/// alone or in a batch with others and encoded by `finish_runs`.
pub async fn an_end_encoded_ahead_is_stored_as_given(fx: &Fixture) {
    let r = routine("ada", "encoded");
    fx.store.create_routine(&r).await.unwrap();
    let runs: Vec<RoutineRun> = (0..3).map(|i| run_for(&r, None, at(i))).collect();
    let fires: Vec<_> = runs
        .iter()
        .map(|run| (Admission::default(), vec![run.clone()]))
        .collect();
    fx.store.admit_runs(&fires).await.unwrap();
    let ends: Vec<FinishRun> = runs
        .iter()
        .enumerate()
        .map(|(i, run)| {
            let mut note = crate::notifications::pending(10 + i as i64, "ops");
            note.id = uuid::Uuid::now_v7();
            note.title = format!("Routine encoded: ok ({i}) — «déjà vu» 🚀");
            note.tags = vec!["routine".into(), "ok".into(), format!("n{i}")];
            note.data = Some(
                serde_json::json!({"run_id": run.id, "n": i, "nested": {"a": [1, 2.5, null]}}),
            );
            note.last_error = (i == 1).then(|| "once failed".to_string());
            let mut outcome = ended(RunStatus::Ok, 20 + i as i64);
            outcome.summary = Some(format!("done {i}: ünïcode ✓"));
            outcome.tokens_used = Some(1_234 + i as u64);
            outcome.notification_id = Some(note.id);
            FinishRun {
                run_id: run.id,
                routine_id: r.id,
                outcome,
                notification: Some(note.into()),
                auto_pause: None,
            }
        })
        .collect();
    let encoded: Vec<EncodedEnd> = ends[..2]
        .iter()
        .cloned()
        .map(|e| EncodedEnd::new(e).unwrap())
        .collect();
    assert_eq!(encoded[1].end(), &ends[1]);
    // Prepared ahead as for a crowded slot: the same statements then run.
    fx.store.prepare_run_ends().await.unwrap();
    let done = fx.store.finish_encoded(&encoded, &[]).await.unwrap();
    assert!(done.iter().all(|f| f.ended));
    let done = fx.store.finish_runs(&ends[2..]).await.unwrap();
    assert!(done[0].ended);
    for end in &ends {
        let run = fx.store.get_run(end.run_id).await.unwrap().unwrap();
        let o = &end.outcome;
        assert_eq!(
            (
                run.status,
                run.result_summary.as_deref(),
                run.tokens_used,
                run.completed_at,
                run.notification_id,
            ),
            (
                o.status,
                o.summary.as_deref(),
                o.tokens_used,
                Some(o.completed_at),
                o.notification_id,
            )
        );
        let note = end.notification.as_deref().unwrap();
        let stored = fx.store.get_notification(note.id).await.unwrap();
        assert_eq!(stored.as_ref(), Some(note));
    }
}

/// Runs of `routines` started at `secs` and ended with `status` in one batch.
async fn end_one_run_each(store: &Store, routines: &[Routine], status: RunStatus, secs: i64) {
    let fires: Vec<_> = routines
        .iter()
        .map(|r| (Admission::default(), vec![run_for(r, None, at(secs))]))
        .collect();
    let admitted = store.admit_runs(&fires).await.unwrap();
    assert!(admitted.iter().all(|a| *a == Admitted::Started));
    let ends: Vec<FinishRun> = fires
        .iter()
        .map(|(_, runs)| FinishRun {
            run_id: runs[0].id,
            routine_id: runs[0].routine_id,
            outcome: ended(status, secs + 1),
            notification: None,
            auto_pause: None,
        })
        .collect();
    let done = store.finish_runs(&ends).await.unwrap();
    assert!(done.iter().all(|f| f.ended));
}

/// A run that succeeds resets its own routine's failure streak and no
/// other's, whether the routines failing are few (read from their index)
/// or more than that read takes (each routine of the batch looked up).
pub async fn a_success_resets_its_own_streak_however_many_are_failing(fx: &Fixture) {
    const { assert!(BURST > FAILING_READ_MOST + 20) };
    let mut routines = stored_burst(&fx.store, "streak").await;
    // In id order: the routines a bounded read of the failing ones leaves
    // out are the last.
    routines.sort_by_key(|r| r.id);
    let streaks = |fx: &Fixture| {
        let store = fx.store.clone();
        let ids: Vec<_> = routines.iter().map(|r| r.id).collect();
        async move {
            let mut out = Vec::new();
            for id in ids {
                let got = store.get_routine(id).await.unwrap().unwrap();
                out.push(got.runtime.consecutive_failures);
            }
            out
        }
    };
    end_one_run_each(&fx.store, &routines, RunStatus::Failed, 1).await;
    // More failing than the read takes: every routine of the batch looked up.
    let last = BURST - 10;
    end_one_run_each(&fx.store, &routines[last..], RunStatus::Ok, 10).await;
    let want: Vec<u32> = (0..BURST).map(|i| u32::from(i < last)).collect();
    assert_eq!(streaks(fx).await, want);
    // Few failing now (half the read's bound): only those of a batch reset.
    let few = last - FAILING_READ_MOST / 2;
    end_one_run_each(&fx.store, &routines[..few], RunStatus::Ok, 20).await;
    end_one_run_each(
        &fx.store,
        &routines[few + 1..few + 2],
        RunStatus::Failed,
        30,
    )
    .await;
    // One already at 0 left as it is, ten failing reset, one failing twice kept.
    let mut batch = vec![routines[BURST - 1].clone()];
    batch.extend_from_slice(&routines[few + 2..few + 12]);
    end_one_run_each(&fx.store, &batch, RunStatus::Ok, 40).await;
    let want: Vec<u32> = (0..BURST)
        .map(|i| match i {
            i if i < few => 0,
            i if i == few => 1,
            i if i == few + 1 => 2,
            i if i < few + 12 => 0,
            i if i < last => 1,
            _ => 0,
        })
        .collect();
    assert_eq!(streaks(fx).await, want);
}

/// A batch of ends over several statements' chunks in which two runs had
/// already ended (reaped, say): exactly those two say so and keep their
/// record; every other run ends with its outcome, every notification is kept.
pub async fn a_burst_of_run_ends_some_already_ended_ends_the_rest(fx: &Fixture) {
    let routines = stored_burst(&fx.store, "late").await;
    let fires: Vec<_> = routines
        .iter()
        .map(|r| (Admission::default(), vec![run_for(r, None, at(1))]))
        .collect();
    let admitted = fx.store.admit_runs(&fires).await.unwrap();
    assert!(admitted.iter().all(|a| *a == Admitted::Started));
    // One in the first chunk of a statement, one past it.
    let late = [7, BURST - 3];
    for i in late {
        let run = fires[i].1[0].id;
        assert!(
            fx.store
                .finish_run(run, &ended(RunStatus::Failed, 5))
                .await
                .unwrap()
        );
    }
    let ends: Vec<FinishRun> = fires
        .iter()
        .map(|(_, runs)| {
            let note = crate::notifications::pending(10, "inbox");
            let mut outcome = ended(RunStatus::Ok, 10);
            outcome.notification_id = Some(note.id);
            FinishRun {
                run_id: runs[0].id,
                routine_id: runs[0].routine_id,
                outcome,
                notification: Some(note.into()),
                auto_pause: None,
            }
        })
        .collect();
    let done = fx.store.finish_runs(&ends).await.unwrap();
    for (i, (f, end)) in done.iter().zip(&ends).enumerate() {
        assert_eq!(f.ended, !late.contains(&i), "entry {i}");
        let run = fx.store.get_run(end.run_id).await.unwrap().unwrap();
        let (status, note) = if late.contains(&i) {
            (RunStatus::Failed, None)
        } else {
            (RunStatus::Ok, end.outcome.notification_id)
        };
        assert_eq!(
            (run.status, run.notification_id),
            (status, note),
            "entry {i}"
        );
        let id = end.notification.as_ref().unwrap().id;
        assert!(
            fx.store.get_notification(id).await.unwrap().is_some(),
            "entry {i}"
        );
    }
}

/// Routines read ahead of their slot: each claim takes the slot only while
/// the routine is as read (not edited, same failure streak, same state);
/// one that changed keeps its slot for the engine to read again.
pub async fn a_claim_read_ahead_takes_only_routines_still_as_read(fx: &Fixture) {
    stored_burst(&fx.store, "ahead").await;
    let read = fx.store.due_routines(at(60), BURST as u32).await.unwrap();
    assert_eq!(read.len(), BURST);
    assert_eq!(fx.store.count_due(at(60)).await.unwrap(), BURST as u64);
    assert_eq!(fx.store.count_due(at(59)).await.unwrap(), 0);
    let (edited, failed, watched) = (read[0].id, read[1].id, read[2].id);
    // An edit moves `updated_at`; a run's end moves the streak or the state.
    let mut edit = fx.store.get_routine(edited).await.unwrap().unwrap();
    edit.spec.description = "edited after the read".into();
    edit.updated_at = at(59);
    fx.store.update_routine(&edit).await.unwrap();
    for (id, status, state) in [
        (failed, RunStatus::Failed, None),
        (watched, RunStatus::Ok, Some(serde_json::json!({"seen": 3}))),
    ] {
        let r = read.iter().find(|r| r.id == id).unwrap();
        let run = run_for(r, None, at(30));
        fx.store.start_run(&run).await.unwrap();
        let mut outcome = ended(status, 31);
        outcome.state = state;
        assert!(fx.store.finish_run(run.id, &outcome).await.unwrap());
    }
    let fires: Vec<_> = read
        .iter()
        .map(|r| {
            let (mut admission, runs) = round_of(r);
            if let Some(slot) = admission.slot.as_mut() {
                slot.as_read = Some(AsRead {
                    updated_at: r.updated_at,
                    consecutive_failures: r.runtime.consecutive_failures,
                    state: r.runtime.state.clone(),
                    ahead: None,
                });
            }
            (admission, runs)
        })
        .collect();
    let rounds = fx.store.admit_rounds(&fires).await.unwrap();
    for (r, round) in read.iter().zip(&rounds) {
        let changed = [edited, failed, watched].contains(&r.id);
        let want = if changed {
            Admitted::Taken
        } else {
            Admitted::Started
        };
        assert_eq!(round.admitted, want, "{}", r.spec.name);
        let got = fx.store.get_routine(r.id).await.unwrap().unwrap();
        let next = if changed { at(60) } else { at(120) };
        assert_eq!(got.runtime.next_fire_at, Some(next), "{}", r.spec.name);
    }
    // Read again, the changed ones are claimed as they are now.
    let again = fx.store.due_routines(at(60), BURST as u32).await.unwrap();
    let ids: Vec<_> = again.iter().map(|r| r.id).collect();
    assert_eq!(ids.len(), 3);
    assert_eq!(fx.store.count_due(at(60)).await.unwrap(), 3);
    for id in [edited, failed, watched] {
        assert!(ids.contains(&id));
    }
    let fires: Vec<_> = again.iter().map(round_of).collect();
    let rounds = fx.store.admit_rounds(&fires).await.unwrap();
    assert!(rounds.iter().all(|r| r.admitted == Admitted::Started));
}

/// A slot still waiting its turn in the global queue holds its routine's
/// next round in a burst (`overlap: skip`), like a run still running.
pub async fn a_slot_waiting_its_turn_holds_the_next_round_of_a_burst(fx: &Fixture) {
    let routines = stored_burst(&fx.store, "queued").await;
    let held = &routines[5];
    // The one place is taken (a run of another routine by hand): the slot
    // of 60 waits.
    let by_hand = (
        Admission::default(),
        vec![run_for(&routines[6], None, at(59))],
    );
    let taken = fx.store.admit_runs(&[by_hand]).await.unwrap();
    assert_eq!(taken, [Admitted::Started]);
    let first = run_for(held, Some(at(60)), at(61));
    let mut full = scheduled(held, &first, Some(at(120)));
    full.global_max = Some(1);
    let queued = fx.store.admit_rounds(&[(full, vec![first])]).await.unwrap();
    assert_eq!(queued[0].admitted, Admitted::Started);
    assert_eq!(queued[0].runs[0].status, RunStatus::Waiting);
    let fires: Vec<_> = routines
        .iter()
        .map(|r| {
            if r.id != held.id {
                return round_of(r);
            }
            let next = run_for(r, Some(at(120)), at(121));
            let mut admission = scheduled(r, &next, Some(at(180)));
            admission.global_max = Some(10 * BURST as u32);
            if let Some(rule) = admission.overlap.as_mut() {
                rule.policy = Overlap::Skip;
            }
            (admission, vec![next])
        })
        .collect();
    let rounds = fx.store.admit_rounds(&fires).await.unwrap();
    for (r, round) in routines.iter().zip(&rounds) {
        if r.id == held.id {
            match &round.admitted {
                Admitted::Skipped(reason) => {
                    assert!(reason.contains("is still waiting its turn"), "{reason}")
                }
                other => panic!("the waiting slot should hold the next: {other:?}"),
            }
        } else {
            assert_eq!(round.admitted, Admitted::Started, "{}", r.spec.name);
        }
    }
}
