//! The routine engine over the real store, on tokio's paused clock: days of
//! schedules run in milliseconds and no test waits for a slot in real time.
//! Actions are scripted here (the real executors have their own tests); the
//! engine's part is when, how often, under which guardrails, and the record.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use cairn_automation::notify::{ChannelSet, Notifier, NotifySettings};
use cairn_automation::routines::action::{
    ActionExecutor, ActionOutcome, ActionRequest, FireContext, Notice,
};
use cairn_automation::routines::engine::{EngineSettings, RoutineEngine};
use cairn_automation::routines::events::MAX_EVENT_DEPTH;
use cairn_core::clock::{Clock, ManualClock};
use cairn_core::routine::{Routine, RoutineRun, RoutineSpec, RunStatus, SpecFormat, Trigger};
use cairn_core::schedule::Schedule;
use cairn_store::{Admitted, Store};
use chrono::{DateTime, TimeZone, Utc};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// How a scripted routine behaves, by routine name prefix.
#[derive(Default)]
struct Script {
    /// Calls seen: routine name and fire context.
    calls: Mutex<Vec<(String, FireContext)>>,
    /// Routines named `slow*` wait for a permit (or their cancel token).
    gate: Option<Arc<Semaphore>>,
}

#[async_trait]
impl ActionExecutor for Script {
    async fn execute(&self, request: ActionRequest) -> ActionOutcome {
        let name = request.routine.spec.name.clone();
        self.calls
            .lock()
            .unwrap()
            .push((name.clone(), request.fire.clone()));
        if name.starts_with("slow") {
            let gate = self.gate.clone().unwrap();
            tokio::select! {
                permit = gate.acquire() => drop(permit),
                () = request.cancel.cancelled() => return ActionOutcome::failed("cancelled"),
            }
        }
        if name.starts_with("fail") {
            return ActionOutcome::failed("the check broke");
        }
        if name.starts_with("alert") {
            return ActionOutcome::new(RunStatus::Attention, "disk 91% full");
        }
        if name.starts_with("remind") {
            let mut o = ActionOutcome::new(RunStatus::Ok, "stand up");
            o.notice = Some(Notice {
                title: Some("Reminder".into()),
                body: "stand up".into(),
            });
            return o;
        }
        ActionOutcome::new(RunStatus::Ok, "ROUTINE_OK")
    }
}

impl Script {
    fn count(&self, name: &str) -> usize {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .filter(|(n, _)| n == name)
            .count()
    }
}

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 7, 12, 0, 0).unwrap()
}

struct Setup {
    store: Store,
    url: String,
    clock: Arc<ManualClock>,
    script: Arc<Script>,
    _dir: tempfile::TempDir,
}

async fn setup(start: DateTime<Utc>) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}/cairn.db", dir.path().display());
    let (store, _) = Store::open(&url).await.unwrap();
    Setup {
        store,
        url,
        clock: Arc::new(ManualClock::new(start)),
        script: Arc::new(Script {
            gate: Some(Arc::new(Semaphore::new(0))),
            ..Script::default()
        }),
        _dir: dir,
    }
}

fn settings(owner: &str) -> EngineSettings {
    let mut s = EngineSettings::new(owner, chrono_tz::UTC);
    // Upkeep rarely, so paused time does not crawl through it second by second.
    s.change_poll = Duration::from_secs(3600);
    s.lease = Duration::from_secs(3600);
    s.max_concurrent = 1000;
    s
}

impl Setup {
    fn engine(&self, owner: &str) -> RoutineEngine {
        self.engine_with(settings(owner))
    }

    fn engine_with(&self, settings: EngineSettings) -> RoutineEngine {
        let notifier = Notifier::new(
            self.store.clone(),
            Arc::new(ChannelSet::new()),
            NotifySettings::default(),
        );
        RoutineEngine::new(
            self.store.clone(),
            self.clock.clone(),
            self.script.clone(),
            Some(notifier),
            settings,
        )
    }

    /// Stores a routine from YAML, with its first slot computed from the clock.
    async fn routine(&self, yaml: &str) -> Routine {
        let spec = RoutineSpec::parse(yaml, SpecFormat::Yaml).unwrap();
        spec.validate().unwrap();
        let now = self.clock.now();
        let mut r = Routine::new(spec, "ada", now);
        let zone = r
            .spec
            .timezone
            .as_deref()
            .map(|z| z.parse().unwrap())
            .unwrap_or(chrono_tz::UTC);
        r.runtime.next_fire_at = match &r.spec.trigger {
            Trigger::Cron { schedule } | Trigger::Once { at: schedule } => {
                Schedule::parse(schedule, zone, now)
                    .unwrap()
                    .next_after(now)
            }
            _ => None,
        };
        self.store.create_routine(&r).await.unwrap();
        r
    }

    async fn runs(&self, r: &Routine) -> Vec<RoutineRun> {
        let mut runs = self.store.list_runs(r.id, 10_000).await.unwrap();
        runs.sort_by_key(|r| (r.scheduled_for, r.started_at));
        runs
    }

    fn spawn(&self, engine: &RoutineEngine) -> (CancellationToken, tokio::task::JoinHandle<()>) {
        let cancel = CancellationToken::new();
        let handle = tokio::spawn({
            let engine = engine.clone();
            let cancel = cancel.clone();
            async move { engine.run(cancel).await }
        });
        (cancel, handle)
    }
}

fn statuses(runs: &[RoutineRun]) -> Vec<RunStatus> {
    runs.iter().map(|r| r.status).collect()
}

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
async fn cooldown_refuses_an_event_fire_with_the_reason() {
    let s = setup(t0()).await;
    let r = s
        .routine("name: deploys\ntrigger: {type: event, pattern: 'deploy \\w+'}\naction: {type: notification, message: seen}\nguardrails: {cooldown: 5m}\n")
        .await;
    let engine = s.engine("a");
    engine.refresh_triggered().await.unwrap();
    assert!(
        engine
            .offer_message("terminal", "nothing here")
            .await
            .is_empty()
    );
    let first = engine.offer_message("terminal", "deploy api").await;
    assert_eq!(first[0].admitted, Admitted::Started);
    engine.idle().await;
    tokio::time::sleep(Duration::from_secs(60)).await;
    let second = engine.offer_message("terminal", "deploy web").await;
    let Admitted::Skipped(reason) = &second[0].admitted else {
        panic!("fired within the cooldown")
    };
    assert!(reason.starts_with("cooldown:"), "{reason}");
    tokio::time::sleep(Duration::from_secs(300)).await;
    assert_eq!(
        engine.offer_message("terminal", "deploy db").await[0].admitted,
        Admitted::Started
    );
    engine.idle().await;
    let runs = s.runs(&r).await;
    assert_eq!(
        statuses(&runs),
        [RunStatus::Ok, RunStatus::Skipped, RunStatus::Ok]
    );
    assert_eq!(runs[1].skip_reason.as_deref(), Some(reason.as_str()));
    // The payload reached the action.
    let calls = s.script.calls.lock().unwrap();
    assert_eq!(calls[0].1.payload.as_ref().unwrap()["text"], "deploy api");
}

#[tokio::test(start_paused = true)]
async fn max_concurrent_refuses_a_second_run_while_one_runs() {
    let s = setup(t0()).await;
    let r = s
        .routine("name: slow-report\ntrigger: {type: manual}\naction: {type: notification, message: x}\n")
        .await;
    let engine = s.engine("a");
    let first = engine.fire_manual(&r, None, None).await.unwrap();
    assert_eq!(first.admitted, Admitted::Started);
    let second = engine.fire_manual(&r, None, None).await.unwrap();
    let Admitted::Skipped(reason) = &second.admitted else {
        panic!("ran twice at once")
    };
    assert!(reason.starts_with("max_concurrent: 1 run(s)"), "{reason}");
    s.script.gate.as_ref().unwrap().add_permits(1);
    engine.idle().await;
    assert_eq!(
        engine.fire_manual(&r, None, None).await.unwrap().admitted,
        Admitted::Started
    );
    s.script.gate.as_ref().unwrap().add_permits(1);
    engine.idle().await;
    assert_eq!(
        statuses(&s.runs(&r).await),
        [RunStatus::Ok, RunStatus::Skipped, RunStatus::Ok]
    );
}

#[tokio::test(start_paused = true)]
async fn dedup_refuses_the_same_webhook_body_within_the_window() {
    let s = setup(t0()).await;
    let r = s
        .routine("name: hook\ntrigger: {type: webhook, path: deploys, secret: s3cret}\naction: {type: notification, message: x}\nguardrails: {dedup_window: 10m, cooldown: 0s, max_concurrent: 5}\n")
        .await;
    let engine = s.engine("a");
    let body = br#"{"ref":"main"}"#;
    let sig = cairn_automation::notify::channels::webhook::signature("s3cret", body);
    let first = engine
        .fire_webhook("deploys", body, Some(&sig), false)
        .await
        .unwrap();
    assert_eq!(first.admitted, Admitted::Started);
    let dup = engine
        .fire_webhook("deploys", body, Some(&sig), false)
        .await
        .unwrap();
    let Admitted::Skipped(reason) = &dup.admitted else {
        panic!("a duplicate fired")
    };
    assert!(reason.starts_with("dedup_window:"), "{reason}");
    let other = br#"{"ref":"dev"}"#;
    let sig2 = cairn_automation::notify::channels::webhook::signature("s3cret", other);
    assert_eq!(
        engine
            .fire_webhook("deploys", other, Some(&sig2), false)
            .await
            .unwrap()
            .admitted,
        Admitted::Started
    );
    // Wrong or missing signatures fire nothing.
    assert!(
        engine
            .fire_webhook("deploys", other, Some(&sig), false)
            .await
            .is_err()
    );
    assert!(
        engine
            .fire_webhook("deploys", other, None, true)
            .await
            .is_err()
    );
    assert!(
        engine
            .fire_webhook("nope", other, Some(&sig2), false)
            .await
            .is_err()
    );
    engine.idle().await;
    assert_eq!(statuses(&s.runs(&r).await).len(), 3);
}

#[tokio::test(start_paused = true)]
async fn a_run_past_its_timeout_fails_saying_so() {
    let s = setup(t0()).await;
    let r = s
        .routine("name: slow-check\ntrigger: {type: manual}\naction: {type: notification, message: x}\nguardrails: {timeout: 30s}\n")
        .await;
    let engine = s.engine("a");
    engine.fire_manual(&r, None, None).await.unwrap();
    engine.idle().await;
    let runs = s.runs(&r).await;
    assert_eq!(statuses(&runs), [RunStatus::Failed]);
    assert_eq!(
        runs[0].result_summary.as_deref(),
        Some("timed out after 30s")
    );
    assert_eq!(
        runs[0].completed_at.unwrap() - runs[0].started_at,
        chrono::Duration::seconds(30)
    );
}

#[tokio::test(start_paused = true)]
async fn consecutive_failures_back_off_before_the_next_scheduled_fire() {
    let s = setup(t0()).await;
    let r = s
        .routine("name: fail-probe\ntrigger: {type: cron, schedule: '* * * * *'}\naction: {type: notification, message: x}\n")
        .await;
    let engine = s.engine("a");
    let (cancel, handle) = s.spawn(&engine);
    tokio::time::sleep(Duration::from_secs(10 * 60 + 30)).await;
    cancel.cancel();
    handle.await.unwrap();
    let runs = s.runs(&r).await;
    use RunStatus::{Failed as F, Skipped as S};
    // Failures at :01 and :02 (30 s and 1 min waits pass by the next slot),
    // :03 (the 1 min wait ends exactly then), then 5 min: :04-:07 skipped, :08 runs.
    assert_eq!(statuses(&runs), [F, F, F, S, S, S, S, F, S, S]);
    let reason = runs[3].skip_reason.as_deref().unwrap();
    assert!(
        reason.starts_with(
            "backoff: 3 failure(s) in a row; no scheduled fire before 2026-03-07T12:08:00Z"
        ),
        "{reason}"
    );
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
    let run = RoutineRun {
        id: uuid::Uuid::now_v7(),
        routine_id: r.id,
        trigger_type: "cron".into(),
        trigger_detail: None,
        scheduled_for: Some(slot),
        started_at: slot,
        completed_at: None,
        status: RunStatus::Running,
        result_summary: None,
        tokens_used: None,
        job_id: None,
        owner: Some("dead".into()),
        lease_until: Some(slot + chrono::Duration::seconds(60)),
        notification_id: None,
        skip_reason: None,
        dedup_key: None,
    };
    let claim = cairn_store::Admission {
        slot: Some(cairn_store::SlotMove {
            expected: slot,
            next: Some(slot + chrono::Duration::minutes(10)),
            disable: false,
        }),
        ..Default::default()
    };
    assert_eq!(
        s.store.admit_runs(&[(claim, vec![run])]).await.unwrap(),
        [Admitted::Started]
    );
    s.clock.set(slot + chrono::Duration::minutes(2));

    let restarted = s.engine("second");
    let (cancel, handle) = s.spawn(&restarted);
    tokio::time::sleep(Duration::from_secs(10 * 60)).await;
    cancel.cancel();
    handle.await.unwrap();
    let runs = s.runs(&r).await;
    assert_eq!(statuses(&runs), [RunStatus::Interrupted, RunStatus::Ok]);
    assert_eq!(
        runs[0].result_summary.as_deref(),
        Some("interrupted: the process running it stopped")
    );
    assert_eq!(
        runs[1].scheduled_for,
        Some(t0() + chrono::Duration::minutes(20))
    );
    // The interruption counted as a failure; the success reset the streak.
    let stored = s.store.get_routine(r.id).await.unwrap().unwrap();
    assert_eq!(stored.runtime.consecutive_failures, 0);
}

#[tokio::test(start_paused = true)]
async fn shutdown_gives_running_runs_a_deadline_then_interrupts_them() {
    let s = setup(t0()).await;
    let r = s
        .routine("name: slow-export\ntrigger: {type: manual}\naction: {type: notification, message: x}\n")
        .await;
    let engine = s.engine("a");
    let (cancel, handle) = s.spawn(&engine);
    engine.fire_manual(&r, None, None).await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    cancel.cancel();
    handle.await.unwrap();
    let runs = s.runs(&r).await;
    assert_eq!(statuses(&runs), [RunStatus::Interrupted]);
    assert!(
        runs[0]
            .result_summary
            .as_deref()
            .unwrap()
            .contains("did not finish within 10s")
    );
}

#[tokio::test(start_paused = true)]
async fn a_routine_added_by_another_process_is_live_within_two_seconds() {
    let s = setup(t0()).await;
    let mut fast = settings("a");
    fast.change_poll = Duration::from_secs(1);
    let engine = s.engine_with(fast);
    let (cancel, handle) = s.spawn(&engine);
    tokio::time::sleep(Duration::from_secs(5)).await;
    // Another process (its own connection pool) adds a routine due in 3 s.
    let (other, _) = Store::open(&s.url).await.unwrap();
    let spec = RoutineSpec::parse("name: later\ntrigger: {type: once, at: 'in 3s'}\naction: {type: notification, message: x}\n", SpecFormat::Yaml).unwrap();
    let mut r = Routine::new(spec, "ada", s.clock.now());
    r.runtime.next_fire_at = Some(s.clock.now() + chrono::Duration::seconds(3));
    other.create_routine(&r).await.unwrap();
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
async fn outcomes_notify_as_the_routine_says_and_the_run_keeps_the_id() {
    let s = setup(t0()).await;
    let alert = s
        .routine("name: alert-disk\ntrigger: {type: manual}\naction: {type: notification, message: x}\nnotify: {channel: inbox}\n")
        .await;
    let quiet = s
        .routine("name: quiet\ntrigger: {type: manual}\naction: {type: notification, message: x}\n")
        .await;
    let remind = s
        .routine("name: remind-standup\ntrigger: {type: manual}\naction: {type: notification, message: stand up}\n")
        .await;
    let engine = s.engine("a");
    for r in [&alert, &quiet, &remind] {
        engine.fire_manual(r, None, None).await.unwrap();
    }
    engine.idle().await;
    let alert_run = &s.runs(&alert).await[0];
    assert_eq!(alert_run.status, RunStatus::Attention);
    let n = s
        .store
        .get_notification(alert_run.notification_id.unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(n.title, "alert-disk needs attention");
    assert_eq!(n.body, "disk 91% full");
    assert_eq!(n.source, format!("routine:{}", alert_run.id));
    // ROUTINE_OK with on_success false: nothing sent.
    assert_eq!(s.runs(&quiet).await[0].notification_id, None);
    // A reminder goes out whatever on_success says.
    let remind_run = &s.runs(&remind).await[0];
    let n = s
        .store
        .get_notification(remind_run.notification_id.unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (n.title.as_str(), n.body.as_str()),
        ("Reminder", "stand up")
    );
}

#[tokio::test(start_paused = true)]
async fn system_events_fire_routines_and_chains_are_cut() {
    let s = setup(t0()).await;
    let source = s
        .routine("name: fail-backup\ntrigger: {type: manual}\naction: {type: notification, message: x}\n")
        .await;
    let watcher = s
        .routine("name: on-backup-failure\ntrigger: {type: system_event, event: routine.finished, filters: {routine: fail-backup, status: failed}}\naction: {type: notification, message: x}\nguardrails: {cooldown: 0s}\n")
        .await;
    // Fires on every routine's end, its own included: a loop the depth cut stops.
    let echo = s
        .routine("name: echo\ntrigger: {type: system_event, event: routine.finished}\naction: {type: notification, message: x}\nguardrails: {cooldown: 0s, max_concurrent: 10}\n")
        .await;
    let engine = s.engine("a");
    engine.refresh_triggered().await.unwrap();
    engine.fire_manual(&source, None, None).await.unwrap();
    // Let the chain play out.
    for _ in 0..20 {
        engine.idle().await;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(s.runs(&watcher).await.len(), 1);
    let echoes = s.runs(&echo).await.len();
    assert!(
        echoes >= 1 && echoes <= (MAX_EVENT_DEPTH as usize + 1) * 2,
        "echo ran {echoes} times"
    );
    let payload = s
        .script
        .calls
        .lock()
        .unwrap()
        .iter()
        .find(|(n, _)| n == "on-backup-failure")
        .map(|(_, f)| f.payload.clone().unwrap())
        .unwrap();
    assert_eq!(payload["fields"]["status"], "failed");
}

/// Two engines (own connection pools, one database), 200 routines due
/// every second for 30 s; the first stops half-way.
async fn two_engines_share_the_slots(url: &str) {
    let (store_a, _) = Store::open(url).await.unwrap();
    let (store_b, _) = Store::open(url).await.unwrap();
    let start = Utc.with_ymd_and_hms(2026, 11, 23, 12, 0, 0).unwrap();
    let clock = Arc::new(ManualClock::new(start));
    let script = Arc::new(Script::default());
    let mut ids = Vec::new();
    for i in 0..200 {
        let spec = RoutineSpec::parse(
            &format!("name: r{i}\ntrigger: {{type: cron, schedule: 'every 1s'}}\naction: {{type: notification, message: x}}\n"),
            SpecFormat::Yaml,
        )
        .unwrap();
        let mut r = Routine::new(spec, "ada", start);
        r.runtime.next_fire_at = Some(start + chrono::Duration::seconds(1));
        store_a.create_routine(&r).await.unwrap();
        ids.push(r.id);
    }
    let engine = |store: &Store, owner: &str| {
        RoutineEngine::new(
            store.clone(),
            clock.clone(),
            script.clone(),
            None,
            settings(owner),
        )
    };
    let (a, b) = (engine(&store_a, "a"), engine(&store_b, "b"));
    let spawn = |e: &RoutineEngine| {
        let cancel = CancellationToken::new();
        let e = e.clone();
        let c = cancel.clone();
        (cancel, tokio::spawn(async move { e.run(c).await }))
    };
    let (stop_a, run_a) = spawn(&a);
    let (stop_b, run_b) = spawn(&b);
    tokio::time::sleep(Duration::from_millis(15_500)).await;
    stop_a.cancel();
    run_a.await.unwrap();
    tokio::time::sleep(Duration::from_millis(15_000)).await;
    stop_b.cancel();
    run_b.await.unwrap();

    let mut per_slot: HashMap<(uuid::Uuid, i64), usize> = HashMap::new();
    for id in &ids {
        for run in store_a.list_runs(*id, 1000).await.unwrap() {
            assert_eq!(run.status, RunStatus::Ok, "{run:?}");
            *per_slot
                .entry((*id, run.scheduled_for.unwrap().timestamp()))
                .or_default() += 1;
        }
    }
    assert!(per_slot.values().all(|n| *n == 1), "a slot ran twice");
    // Every slot from 1 s to 30 s has its run, including those after A stopped.
    assert_eq!(per_slot.len(), 200 * 30);
    for id in &ids {
        for sec in 1..=30 {
            let slot = (start + chrono::Duration::seconds(sec)).timestamp();
            assert!(
                per_slot.contains_key(&(*id, slot)),
                "slot {sec} of {id} has no run"
            );
        }
    }
}

#[tokio::test(start_paused = true, flavor = "current_thread")]
async fn two_engines_on_one_sqlite_file_run_each_slot_once() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}/cairn.db", dir.path().display());
    two_engines_share_the_slots(&url).await;
}

// The admin pool runs on real time (sqlx's timers); only the engines' part is paused.
#[tokio::test(flavor = "current_thread")]
async fn two_engines_on_one_postgres_database_run_each_slot_once() {
    let Ok(base) = std::env::var("CAIRN_TEST_POSTGRES_URL") else {
        assert!(
            std::env::var("CAIRN_REQUIRE_POSTGRES").is_err(),
            "CAIRN_REQUIRE_POSTGRES is set but CAIRN_TEST_POSTGRES_URL is not"
        );
        eprintln!("skipped: set CAIRN_TEST_POSTGRES_URL to run on PostgreSQL");
        return;
    };
    let admin = sqlx::PgPool::connect(&base).await.unwrap();
    let schema = format!("e_{}", uuid::Uuid::new_v4().simple());
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
        .execute(&admin)
        .await
        .unwrap();
    let sep = if base.contains('?') { '&' } else { '?' };
    tokio::time::pause();
    two_engines_share_the_slots(&format!("{base}{sep}options=-csearch_path%3D{schema}")).await;
    tokio::time::resume();
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
        .execute(&admin)
        .await
        .unwrap();
}

/// A channel whose receiver always refuses for good.
struct Refusing;

#[async_trait]
impl cairn_automation::notify::Channel for Refusing {
    fn kind(&self) -> &'static str {
        "refusing"
    }
    async fn deliver(
        &self,
        _: &cairn_core::notification::Notification,
    ) -> Result<cairn_automation::notify::Receipt, cairn_automation::notify::DeliveryError> {
        Err(cairn_automation::notify::DeliveryError::Permanent(
            "HTTP 404: no such hook".into(),
        ))
    }
}

#[tokio::test(start_paused = true)]
async fn a_notification_given_up_on_fires_notification_failed_routines() {
    let s = setup(t0()).await;
    let watcher = s
        .routine("name: on-lost-notice\ntrigger: {type: system_event, event: notification.failed, filters: {channel: pager}}\naction: {type: notification, message: x}\nguardrails: {cooldown: 0s}\n")
        .await;
    let mut channels = ChannelSet::new();
    channels.insert("pager", Arc::new(Refusing));
    let notifier = Notifier::new(
        s.store.clone(),
        Arc::new(channels),
        NotifySettings::default(),
    );
    let engine = RoutineEngine::new(
        s.store.clone(),
        s.clock.clone(),
        s.script.clone(),
        Some(notifier.clone()),
        settings("a"),
    );
    engine.refresh_triggered().await.unwrap();
    let cancel = CancellationToken::new();
    let forwarding =
        engine.forward_events(None, Some(notifier.subscribe_given_up()), cancel.clone());
    let sent = notifier
        .send(
            cairn_core::notification::NewNotification {
                user_id: "ada".into(),
                channel: Some("pager".into()),
                title: "t".into(),
                body: "b".into(),
                priority: Default::default(),
                tags: vec![],
                data: None,
                source: "test".into(),
            },
            s.clock.now(),
        )
        .await
        .unwrap();
    let dispatcher = cairn_automation::notify::Dispatcher::new(notifier.clone(), "d");
    dispatcher.deliver_due(s.clock.now()).await.unwrap();
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(10)).await;
        engine.idle().await;
    }
    cancel.cancel();
    forwarding.await.unwrap();
    let runs = s.runs(&watcher).await;
    assert_eq!(statuses(&runs), [RunStatus::Ok]);
    let calls = s.script.calls.lock().unwrap();
    let payload = calls[0].1.payload.clone().unwrap();
    assert_eq!(payload["fields"]["id"], sent.id.to_string());
    assert_eq!(payload["fields"]["error"], "HTTP 404: no such hook");
}

#[tokio::test(start_paused = true)]
async fn a_run_longer_than_its_lease_keeps_it_and_is_not_reaped() {
    let s = setup(t0()).await;
    let r = s
        .routine("name: slow-backup\ntrigger: {type: manual}\naction: {type: notification, message: x}\n")
        .await;
    let mut short = settings("cli");
    short.lease = Duration::from_secs(60);
    // Fired by a process that runs no engine loop (`routine fire`, a chat).
    let firing = s.engine_with(short.clone());
    firing.fire_manual(&r, None, None).await.unwrap();
    // A daemon beside it reaps orphans every 20 s.
    short.owner = "daemon".into();
    let daemon = s.engine_with(short);
    let (cancel, handle) = s.spawn(&daemon);
    tokio::time::sleep(Duration::from_secs(5 * 60)).await;
    assert_eq!(statuses(&s.runs(&r).await), [RunStatus::Running]);
    s.script.gate.as_ref().unwrap().add_permits(1);
    firing.idle().await;
    cancel.cancel();
    handle.await.unwrap();
    assert_eq!(statuses(&s.runs(&r).await), [RunStatus::Ok]);
}
