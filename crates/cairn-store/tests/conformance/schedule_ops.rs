//! Schedule operations: pause and resume, jitter, rounds of slots under an
//! `overlap` policy, waiting slots, `pause_after_failures`, retry tries.

use chrono::Duration;

use cairn_core::routine::{
    Overlap, Pause, Routine, RoutineRun, RoutineSpec, RunStatus, RunTry, SpecFormat,
};
use cairn_store::{
    Admission, Admitted, AutoPause, FinishRun, OverlapRule, Rerunner, Round, RunOutcome, SlotMove,
};

use crate::fixture::Fixture;
use crate::routines::{at, routine, run_for};

fn cron(name: &str, guardrails: &str) -> Routine {
    let yaml = format!(
        "name: {name}\ntrigger: {{type: cron, schedule: 'every 1m'}}\n\
         action: {{type: notification, message: hi}}\nguardrails: {guardrails}\n"
    );
    let spec = RoutineSpec::parse(&yaml, SpecFormat::Yaml).unwrap();
    spec.validate().unwrap();
    let mut r = Routine::new(spec, "ada", at(0));
    r.runtime.next_fire_at = Some(at(60));
    r
}

fn pause_by(by: &str, secs: i64) -> Pause {
    Pause {
        at: at(secs),
        by: by.to_string(),
        note: Some("migrating the server".into()),
    }
}

fn slot_run(r: &Routine, slot: i64, now: i64) -> RoutineRun {
    let mut run = run_for(r, Some(at(slot)), at(now));
    run.trigger_type = "backfill".into();
    run
}

async fn round(fx: &Fixture, rule: OverlapRule, max: u32, runs: Vec<RoutineRun>) -> Round {
    let admission = Admission {
        max_concurrent: Some(max),
        global_max: Some(100),
        overlap: Some(rule),
        ..Admission::default()
    };
    fx.store
        .admit_rounds(&[(admission, runs)])
        .await
        .unwrap()
        .remove(0)
}

fn rule(policy: Overlap, start_first: bool) -> OverlapRule {
    OverlapRule {
        policy,
        start_first,
        buffer_limit: 2,
    }
}

fn statuses(runs: &[RoutineRun]) -> Vec<RunStatus> {
    runs.iter().map(|r| r.status).collect()
}

fn ok_at(status: RunStatus, secs: i64) -> RunOutcome {
    RunOutcome {
        status,
        summary: Some("the check broke".into()),
        tokens_used: None,
        completed_at: at(secs),
        notification_id: None,
        state: None,
        retain: None,
    }
}

fn starter() -> Rerunner {
    Rerunner {
        owner: "proc-b".into(),
        lease_until: at(10_000),
        global_max: Some(100),
    }
}

/// A paused routine keeps its slot, is not due, refuses its slot's claim
/// and records an unscheduled fire as skipped with the pause; a rewrite
/// leaves the pause; resuming lifts it once.
pub async fn a_paused_routine_keeps_its_slot_and_fires_nothing(fx: &Fixture) {
    let r = cron("paused", "{}");
    fx.store.create_routine(&r).await.unwrap();
    let v0 = fx.store.routines_version().await.unwrap();
    let pause = pause_by("ada (cli)", 30);
    assert!(fx.store.pause_routine(r.id, &pause).await.unwrap());
    assert!(
        !fx.store
            .pause_routine(r.id, &pause_by("bob", 31))
            .await
            .unwrap()
    );
    assert!(fx.store.routines_version().await.unwrap() > v0);
    let stored = fx.store.get_routine(r.id).await.unwrap().unwrap();
    assert_eq!(stored.runtime.paused.as_ref(), Some(&pause));
    assert_eq!(stored.runtime.next_fire_at, Some(at(60)));
    assert!(fx.store.due_routines(at(600), 10).await.unwrap().is_empty());
    assert_eq!(fx.store.earliest_fire_at().await.unwrap(), None);
    let claim = Admission {
        slot: Some(SlotMove {
            expected: at(60),
            next: Some(at(120)),
            disable: false,
            as_read: None,
            retry: None,
        }),
        ..Admission::default()
    };
    let claimed = fx
        .store
        .admit_runs(&[(claim, vec![run_for(&r, Some(at(60)), at(61))])])
        .await
        .unwrap();
    assert_eq!(claimed, [Admitted::Taken]);
    let fired = fx
        .store
        .admit_runs(&[(Admission::default(), vec![run_for(&r, None, at(62))])])
        .await
        .unwrap();
    let reason = format!(
        "paused by ada (cli) at {}: migrating the server",
        at(30).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    );
    assert_eq!(fired, [Admitted::Skipped(reason)]);
    // `routine apply` rewriting it does not unpause it.
    let mut edited = stored.clone();
    edited.spec.description = "edited".into();
    edited.runtime.paused = None;
    fx.store.update_routine(&edited).await.unwrap();
    let stored = fx.store.get_routine(r.id).await.unwrap().unwrap();
    assert_eq!(stored.runtime.paused.as_ref(), Some(&pause));

    assert_eq!(
        fx.store.resume_routine(r.id, at(90)).await.unwrap(),
        Some(pause)
    );
    assert_eq!(fx.store.resume_routine(r.id, at(91)).await.unwrap(), None);
    let stored = fx.store.get_routine(r.id).await.unwrap().unwrap();
    assert_eq!(stored.runtime.paused, None);
    assert_eq!(stored.runtime.resumed_at, Some(at(90)));
    let due = fx.store.due_routines(at(600), 10).await.unwrap();
    assert_eq!(due.len(), 1);
    assert_eq!(due[0].runtime.next_fire_at, Some(at(60)));
}

/// Jitter moves when a slot fires, not the slot: the due queries use the
/// slot plus the routine's offset, every way a slot is written keeps it.
pub async fn jitter_moves_when_a_slot_fires_not_the_slot(fx: &Fixture) {
    let mut r = cron("spread", "{jitter: 30s}");
    let offset = r.jitter();
    assert!(offset > Duration::zero() && offset < Duration::seconds(30));
    fx.store.create_routine(&r).await.unwrap();
    let fires = at(60) + offset;
    assert_eq!(fx.store.earliest_fire_at().await.unwrap(), Some(fires));
    let before = fires - Duration::microseconds(1);
    assert!(fx.store.due_routines(before, 10).await.unwrap().is_empty());
    let due = fx.store.due_routines(fires, 10).await.unwrap();
    assert_eq!(due[0].runtime.next_fire_at, Some(at(60)));
    assert_eq!(due[0].next_due(), Some(fires));
    // The claim's next slot.
    let claim = Admission {
        slot: Some(SlotMove {
            expected: at(60),
            next: Some(at(120)),
            disable: false,
            as_read: None,
            retry: None,
        }),
        ..Admission::default()
    };
    let run = run_for(&r, Some(at(60)), fires);
    fx.store.admit_runs(&[(claim, vec![run])]).await.unwrap();
    assert_eq!(
        fx.store.earliest_fire_at().await.unwrap(),
        Some(at(120) + offset)
    );
    // A slot set directly, and a rewrite with a new bound.
    fx.store
        .set_next_fire_at(r.id, Some(at(300)), at(100))
        .await
        .unwrap();
    assert_eq!(
        fx.store.earliest_fire_at().await.unwrap(),
        Some(at(300) + offset)
    );
    r.spec.guardrails.jitter = None;
    r.runtime.next_fire_at = Some(at(300));
    fx.store.update_routine(&r).await.unwrap();
    assert_eq!(fx.store.earliest_fire_at().await.unwrap(), Some(at(300)));
}

/// Each policy's verdict on a slot due while a run of its routine goes.
pub async fn overlap_rounds_record_every_slot_with_its_fate(fx: &Fixture) {
    let policies = [
        Overlap::Skip,
        Overlap::BufferOne,
        Overlap::BufferAll,
        Overlap::CancelOther,
        Overlap::AllowAll,
    ];
    for policy in policies {
        let r = routine("ada", policy.as_str());
        fx.store.create_routine(&r).await.unwrap();
        let going = run_for(&r, None, at(1));
        fx.store.start_run(&going).await.unwrap();
        let slots = vec![
            slot_run(&r, 60, 61),
            slot_run(&r, 120, 121),
            slot_run(&r, 180, 181),
        ];
        let got = round(fx, rule(policy, true), 2, slots.clone()).await;
        let mut runs = fx.store.list_runs(r.id, 10).await.unwrap();
        runs.sort_by_key(|r| r.scheduled_for);
        use RunStatus::{Cancelled as C, Running as R, Skipped as S, Waiting as W};
        let expected: &[RunStatus] = match policy {
            Overlap::Skip => &[R, S, S, S],
            Overlap::BufferOne => &[R, W, S, S],
            Overlap::BufferAll => &[R, W, W, S],
            Overlap::CancelOther => &[C, R, W, W],
            Overlap::AllowAll => &[R, R, W, W],
        };
        assert_eq!(statuses(&runs), expected, "{policy:?}");
        assert_eq!(got.runs.len(), 3, "{policy:?}");
        let skipped: Vec<&RoutineRun> = runs.iter().filter(|r| r.status == S).collect();
        for run in &skipped {
            let reason = run.skip_reason.clone().unwrap();
            assert!(
                reason.starts_with(&format!("overlap: {}; ", policy.as_str())),
                "{policy:?}: {reason}"
            );
        }
        if policy == Overlap::CancelOther {
            assert_eq!(got.cancelled.len(), 1);
            assert_eq!(got.cancelled[0].id, going.id);
            let summary = runs[0].result_summary.clone().unwrap();
            assert!(
                summary.starts_with("cancelled: overlap: cancel_other; slot "),
                "{summary}"
            );
            assert_eq!(got.admitted, Admitted::Started);
        } else {
            assert!(got.cancelled.is_empty());
        }
        if policy == Overlap::Skip {
            assert!(matches!(got.admitted, Admitted::Skipped(_)));
        }
    }
}

/// Waiting slots start one at a time, oldest first, when nothing of their
/// routine runs; a second record of the same slots records nothing; a
/// paused routine's slots keep waiting and a disabled one's are skipped.
pub async fn waiting_slots_start_one_at_a_time_oldest_first(fx: &Fixture) {
    let r = cron("backfilled", "{}");
    fx.store.create_routine(&r).await.unwrap();
    let slots = vec![
        slot_run(&r, 60, 5),
        slot_run(&r, 120, 5),
        slot_run(&r, 180, 5),
    ];
    let first = round(fx, rule(Overlap::BufferAll, false), 1, slots.clone()).await;
    assert_eq!(first.admitted, Admitted::Started);
    assert_eq!(statuses(&first.runs), [RunStatus::Waiting; 3]);
    let again = slots
        .iter()
        .map(|s| {
            let mut s = s.clone();
            s.id = uuid::Uuid::now_v7();
            s
        })
        .collect();
    let second = round(fx, rule(Overlap::BufferAll, false), 1, again).await;
    assert_eq!(second.admitted, Admitted::Taken);
    assert!(second.runs.is_empty());

    let started = fx
        .store
        .start_waiting(None, &starter(), at(10))
        .await
        .unwrap();
    assert_eq!(started.len(), 1);
    let run = &started[0].run;
    assert_eq!(
        (run.scheduled_for, run.status, run.owner.as_deref()),
        (Some(at(60)), RunStatus::Running, Some("proc-b"))
    );
    assert_eq!(run.started_at, at(10));
    // Nothing more while it runs.
    assert!(
        fx.store
            .start_waiting(Some(r.id), &starter(), at(11))
            .await
            .unwrap()
            .is_empty()
    );
    let finish = FinishRun {
        run_id: run.id,
        routine_id: r.id,
        outcome: ok_at(RunStatus::Ok, 12),
        notification: None,
        auto_pause: None,
    };
    let done = fx.store.finish_runs(&[finish]).await.unwrap();
    assert!(done[0].ended && done[0].waiting);
    let next = fx
        .store
        .start_waiting(Some(r.id), &starter(), at(13))
        .await
        .unwrap();
    assert_eq!(next[0].run.scheduled_for, Some(at(120)));
    assert_eq!(
        fx.store
            .get_routine(r.id)
            .await
            .unwrap()
            .unwrap()
            .runtime
            .run_count,
        2
    );
    fx.store
        .finish_run(next[0].run.id, &ok_at(RunStatus::Ok, 14))
        .await
        .unwrap();
    // Paused: it keeps waiting. Disabled: it is skipped, saying so.
    fx.store
        .pause_routine(r.id, &pause_by("ada", 15))
        .await
        .unwrap();
    assert!(
        fx.store
            .start_waiting(None, &starter(), at(16))
            .await
            .unwrap()
            .is_empty()
    );
    let last = fx.store.get_run(slots[2].id).await.unwrap().unwrap();
    assert_eq!(last.status, RunStatus::Waiting);
    // Retention never prunes a waiting slot: only the oldest ended run goes.
    assert_eq!(fx.store.prune_runs(r.id, 1).await.unwrap(), 1);
    assert!(fx.store.get_run(slots[2].id).await.unwrap().is_some());
    fx.store.resume_routine(r.id, at(17)).await.unwrap();
    fx.store
        .set_routine_enabled(r.id, false, at(17))
        .await
        .unwrap();
    assert!(
        fx.store
            .start_waiting(None, &starter(), at(18))
            .await
            .unwrap()
            .is_empty()
    );
    let last = fx.store.get_run(slots[2].id).await.unwrap().unwrap();
    assert_eq!(last.status, RunStatus::Skipped);
    assert!(last.skip_reason.unwrap().contains("disabled"));
}

/// The failure that brings the streak to `pause_after_failures` pauses the
/// routine in the run's own transaction, once, and the pause's
/// notification replaces that run's own.
pub async fn pause_after_failures_pauses_once_with_its_notification(fx: &Fixture) {
    let r = cron("flaky", "{pause_after_failures: 2}");
    fx.store.create_routine(&r).await.unwrap();
    // Three runs going at once (started before any failed), ending one by one.
    let mut runs = Vec::new();
    for secs in [100, 200, 300] {
        let run = run_for(&r, None, at(secs));
        fx.store.start_run(&run).await.unwrap();
        runs.push((secs, run));
    }
    let mut ends = Vec::new();
    for (secs, run) in runs {
        let own = crate::notifications::pending(secs + 1, "inbox");
        let pause_note = crate::notifications::pending(secs + 2, "inbox");
        let mut outcome = ok_at(RunStatus::Failed, secs + 1);
        outcome.notification_id = Some(own.id);
        let finish = FinishRun {
            run_id: run.id,
            routine_id: r.id,
            outcome,
            notification: Some(own.clone().into()),
            auto_pause: Some(AutoPause {
                after: 2,
                pause: Pause {
                    at: at(secs + 1),
                    by: "cairn".into(),
                    note: Some("paused after 2 failures in a row: the check broke".into()),
                },
                notification: Some(pause_note.clone()),
            }),
        };
        let done = fx.store.finish_runs(&[finish]).await.unwrap();
        ends.push((run.id, own, pause_note, done[0]));
    }
    let paused: Vec<bool> = ends.iter().map(|e| e.3.paused).collect();
    assert_eq!(paused, [false, true, false]);
    let stored = fx.store.get_routine(r.id).await.unwrap().unwrap();
    let pause = stored.runtime.paused.unwrap();
    assert_eq!(pause.by, "cairn");
    assert_eq!(pause.at, at(201));
    for (i, (run_id, own, pause_note, _)) in ends.iter().enumerate() {
        let run = fx.store.get_run(*run_id).await.unwrap().unwrap();
        let own_kept = fx.store.get_notification(own.id).await.unwrap().is_some();
        let pause_kept = fx
            .store
            .get_notification(pause_note.id)
            .await
            .unwrap()
            .is_some();
        if i == 1 {
            assert_eq!(run.notification_id, Some(pause_note.id));
            assert!(!own_kept && pause_kept);
        } else {
            assert_eq!(run.notification_id, Some(own.id));
            assert!(own_kept && !pause_kept, "run {i}");
        }
    }
}

/// A run's tries are kept beside it, in order, and go with it.
pub async fn tries_are_kept_beside_their_run(fx: &Fixture) {
    let r = cron("retried", "{retry: {max_attempts: 3}}");
    fx.store.create_routine(&r).await.unwrap();
    let run = run_for(&r, None, at(10));
    fx.store.start_run(&run).await.unwrap();
    let tries = [
        (RunStatus::Failed, "timed out after 30s; cancelled"),
        (RunStatus::Ok, "ROUTINE_OK"),
    ];
    for (i, (status, summary)) in tries.iter().enumerate() {
        let n = i64::try_from(i).unwrap();
        fx.store
            .record_run_try(&RunTry {
                run_id: run.id,
                number: u32::try_from(i).unwrap() + 1,
                started_at: at(10 + 40 * n),
                ended_at: at(40 + 40 * n),
                status: *status,
                summary: Some((*summary).into()),
            })
            .await
            .unwrap();
    }
    let got = fx.store.run_tries(run.id).await.unwrap();
    assert_eq!(got.len(), 2);
    assert_eq!((got[0].number, got[0].status), (1, RunStatus::Failed));
    assert_eq!(got[1].summary.as_deref(), Some("ROUTINE_OK"));
    fx.store.delete_routine(r.id).await.unwrap();
    assert!(fx.store.run_tries(run.id).await.unwrap().is_empty());
}
