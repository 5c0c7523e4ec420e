//! System routines and the heartbeat over the real store and engine, with
//! a fake LLM over HTTP. Time is a [`FixedClock`] set by hand and the timer
//! rounds are driven with `tick`, so no test waits for a slot.
#![expect(
    clippy::unwrap_used,
    clippy::disallowed_methods,
    reason = "test code unwraps freely and may use blocking std::fs"
)]

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use cairn_automation::notify::{ChannelSet, Notifier, NotifySettings};
use cairn_automation::routines::action::{ActionOutcome, ActionRequest, FireContext};
use cairn_automation::routines::actions::AgentActions;
use cairn_automation::routines::engine::{EngineSettings, RoutineEngine};
use cairn_automation::routines::heartbeat::{
    HEARTBEAT, Heartbeat, HeartbeatSettings, estimate_tokens, heartbeat_request,
};
use cairn_automation::routines::system::{
    Ensured, SystemRoutine, SystemTask, ensure_system_routines,
};
use cairn_core::clock::{Clock, FixedClock};
use cairn_core::notification::Notification;
use cairn_core::routine::{Routine, RoutineRun, RunStatus};
use cairn_llm::testing::{FakeLlmServer, Scripted};
use cairn_llm::{LlmProvider, build_provider};
use cairn_store::{NotificationFilter, Store};
use chrono::{DateTime, TimeZone, Utc};
use chrono_tz::Tz;
use tokio_util::sync::CancellationToken;

/// 10:00 in Paris (winter): inside 08:00-22:00.
fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 12, 9, 0, 0).unwrap()
}

const PARIS: Tz = chrono_tz::Europe::Paris;
const INTERVAL: Duration = Duration::from_secs(600);

const FIVE_ITEMS: &str = "# Heartbeat\n\n<!-- things to look at every half hour -->\n\
- [ ] Any email from the landlord about the lease renewal?\n\
- [ ] Did last night's backup of the photo library finish?\n\
- [ ] Is a calendar event starting within the next hour that needs preparation?\n\
- [ ] Are any of the watched GitHub pull requests waiting on my review?\n\
- [ ] Is the home server's disk more than 90% full?\n";

struct Env {
    store: Store,
    clock: Arc<FixedClock>,
    workspace: tempfile::TempDir,
    server: FakeLlmServer,
    _db: tempfile::TempDir,
}

async fn env() -> Env {
    let db = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}/cairn.db", db.path().display());
    let (store, _) = Store::open(&url).await.unwrap();
    Env {
        store,
        clock: Arc::new(FixedClock::new(t0())),
        workspace: tempfile::tempdir().unwrap(),
        server: FakeLlmServer::start().await.unwrap(),
        _db: db,
    }
}

fn hb_settings() -> HeartbeatSettings {
    let mut s = HeartbeatSettings::new(INTERVAL, PARIS);
    s.active_hours = Some("08:00-22:00".parse().unwrap());
    s.notify_channel = Some("ops".into());
    s.notify_user = Some("ada".into());
    s.max_failures = 2;
    s
}

impl Env {
    fn provider(&self) -> Arc<dyn LlmProvider> {
        let mut settings = self.server.openai_settings();
        settings.retry.max_retries = 0;
        build_provider(&settings).unwrap()
    }

    fn heartbeat(&self, settings: HeartbeatSettings) -> Heartbeat {
        Heartbeat::new(
            settings,
            self.workspace.path(),
            Some(self.provider()),
            self.clock.clone(),
        )
    }

    fn engine(&self, owner: &str, settings: HeartbeatSettings) -> RoutineEngine {
        let clock: Arc<dyn Clock> = self.clock.clone();
        let actions = AgentActions::new(self.store.clone(), self.workspace.path(), clock.clone())
            .with_system_task(HEARTBEAT, Arc::new(self.heartbeat(settings)));
        let mut channels = ChannelSet::new();
        channels.insert_inbox("ops");
        let notifier = Notifier::new(
            self.store.clone(),
            Arc::new(channels),
            NotifySettings::default(),
        );
        let s = EngineSettings::new(owner, PARIS);
        RoutineEngine::new(
            self.store.clone(),
            clock,
            Arc::new(actions),
            Some(notifier),
            s,
        )
    }

    async fn checklist(&self, text: &str) {
        tokio::fs::write(self.workspace.path().join("HEARTBEAT.md"), text)
            .await
            .unwrap();
    }

    async fn ensure(&self, settings: &HeartbeatSettings) -> Routine {
        ensure_system_routines(
            &self.store,
            "ada",
            &[settings.routine()],
            PARIS,
            self.clock.now(),
        )
        .await
        .unwrap();
        self.store
            .find_routine("ada", HEARTBEAT)
            .await
            .unwrap()
            .unwrap()
    }

    /// Moves the clock to the routine's next slot and runs that timer round
    /// on every engine, waiting for the runs to end.
    async fn beat(&self, engines: &[&RoutineEngine]) {
        let r = self
            .store
            .find_routine("ada", HEARTBEAT)
            .await
            .unwrap()
            .unwrap();
        self.clock.set(r.runtime.next_fire_at.unwrap());
        for engine in engines {
            engine.tick(self.clock.now()).await.unwrap();
        }
        for engine in engines {
            engine.idle().await;
        }
    }

    async fn runs(&self) -> Vec<RoutineRun> {
        let r = self
            .store
            .find_routine("ada", HEARTBEAT)
            .await
            .unwrap()
            .unwrap();
        let mut runs = self.store.list_runs(r.id, 1000).await.unwrap();
        runs.sort_by_key(|r| r.started_at);
        runs
    }

    async fn notifications(&self) -> Vec<Notification> {
        self.store
            .list_notifications(&NotificationFilter::default())
            .await
            .unwrap()
    }
}

#[tokio::test]
async fn empty_checklist_makes_no_llm_request_over_several_beats_and_each_beat_runs_once() {
    let env = env().await;
    env.checklist("# Heartbeat\n\n<!-- add checks here -->\n- \n- [ ]\n")
        .await;
    env.ensure(&hb_settings()).await;
    // Two daemons on one database: each slot is run by one of them.
    let (a, b) = (
        env.engine("a", hb_settings()),
        env.engine("b", hb_settings()),
    );
    for _ in 0..5 {
        env.beat(&[&a, &b]).await;
    }
    assert_eq!(env.server.requests().len(), 0);
    let runs = env.runs().await;
    assert_eq!(runs.len(), 5, "{runs:#?}");
    for run in &runs {
        assert_eq!(run.status, RunStatus::Ok);
        assert_eq!(
            run.result_summary.as_deref(),
            Some("skipped: empty checklist")
        );
        assert_eq!(run.trigger_type, "cron");
    }
    let slots: std::collections::BTreeSet<_> = runs.iter().map(|r| r.scheduled_for).collect();
    assert_eq!(slots.len(), 5);
    assert!(env.notifications().await.is_empty());
}

#[tokio::test]
async fn a_missing_checklist_is_empty_too() {
    let env = env().await;
    env.ensure(&hb_settings()).await;
    let engine = env.engine("a", hb_settings());
    env.beat(&[&engine]).await;
    assert_eq!(env.server.requests().len(), 0);
    assert_eq!(env.runs().await[0].status, RunStatus::Ok);
}

/// `HEARTBEAT.md` planted as a link to a file outside: not read, not sent;
/// the beat fails saying why.
#[tokio::test]
async fn a_checklist_behind_a_link_is_refused() {
    let env = env().await;
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret");
    std::fs::write(&secret, "- [ ] OUTSIDE SECRET").unwrap();
    std::os::unix::fs::symlink(&secret, env.workspace.path().join("HEARTBEAT.md")).unwrap();
    env.ensure(&hb_settings()).await;
    let engine = env.engine("a", hb_settings());
    env.beat(&[&engine]).await;
    assert_eq!(env.server.requests().len(), 0);
    let runs = env.runs().await;
    assert_eq!(runs[0].status, RunStatus::Failed);
    let summary = runs[0].result_summary.as_deref().unwrap_or_default();
    assert!(summary.contains("symbolic link"), "{summary}");
}

#[tokio::test]
async fn heartbeat_ok_sends_nothing_and_records_tokens() {
    let env = env().await;
    env.checklist(FIVE_ITEMS).await;
    env.ensure(&hb_settings()).await;
    env.server
        .push(Scripted::text("HEARTBEAT_OK").with_usage(412, 6));
    let engine = env.engine("a", hb_settings());
    env.beat(&[&engine]).await;
    let runs = env.runs().await;
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].status, RunStatus::Ok);
    assert_eq!(runs[0].result_summary.as_deref(), Some("HEARTBEAT_OK"));
    assert_eq!(runs[0].tokens_used, Some(418));
    assert!(env.notifications().await.is_empty());
    // One light call: the checklist and the time, nothing of a conversation.
    let requests = env.server.requests();
    assert_eq!(requests.len(), 1);
    let body = &requests[0].body;
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2, "{body}");
    let user = messages[1]["content"].as_str().unwrap();
    assert!(user.contains("photo library"), "{user}");
    assert!(
        user.contains("Monday 2026-01-12 10:10 (Europe/Paris)"),
        "{user}"
    );
}

#[tokio::test]
async fn other_text_notifies_the_configured_channel_and_user() {
    let env = env().await;
    env.checklist(FIVE_ITEMS).await;
    env.ensure(&hb_settings()).await;
    env.server.push(Scripted::text(
        "The photo backup did not finish last night.",
    ));
    let engine = env.engine("a", hb_settings());
    env.beat(&[&engine]).await;
    let runs = env.runs().await;
    assert_eq!(runs[0].status, RunStatus::Attention);
    let notes = env.notifications().await;
    assert_eq!(notes.len(), 1, "{notes:#?}");
    assert_eq!(notes[0].channel, "ops");
    assert_eq!(notes[0].user_id, "ada");
    assert_eq!(notes[0].body, "The photo backup did not finish last night.");
    assert_eq!(runs[0].notification_id, Some(notes[0].id));
}

#[tokio::test]
async fn outside_active_hours_no_call() {
    let env = env().await;
    env.checklist(FIVE_ITEMS).await;
    // 23:30 in Paris.
    env.clock
        .set(Utc.with_ymd_and_hms(2026, 1, 12, 22, 30, 0).unwrap());
    env.ensure(&hb_settings()).await;
    let engine = env.engine("a", hb_settings());
    env.beat(&[&engine]).await;
    assert_eq!(env.server.requests().len(), 0);
    let run = &env.runs().await[0];
    assert_eq!(run.status, RunStatus::Ok);
    assert!(
        run.result_summary
            .as_deref()
            .unwrap()
            .starts_with("skipped: outside active hours (08:00-22:00 Europe/Paris)"),
        "{run:?}"
    );
    // The next morning (the night's slots are one catch-up skip), the beat calls.
    env.server.push(Scripted::text("HEARTBEAT_OK"));
    env.clock
        .set(Utc.with_ymd_and_hms(2026, 1, 13, 7, 5, 0).unwrap());
    engine.tick(env.clock.now()).await.unwrap();
    engine.idle().await;
    env.beat(&[&engine]).await;
    assert_eq!(env.server.requests().len(), 1);
    let runs = env.runs().await;
    let statuses: Vec<RunStatus> = runs.iter().map(|r| r.status).collect();
    assert_eq!(
        statuses,
        vec![RunStatus::Ok, RunStatus::Skipped, RunStatus::Ok],
        "{runs:#?}"
    );
}

/// A request for one beat at `slot`, with the routine's state as the last
/// outcome left it.
fn request(routine: &Routine, state: &serde_json::Value, slot: DateTime<Utc>) -> ActionRequest {
    let mut routine = routine.clone();
    routine.runtime.state = state.clone();
    ActionRequest {
        routine: routine.into(),
        run_id: uuid::Uuid::now_v7(),
        fire: FireContext {
            trigger_type: "cron".into(),
            detail: None,
            payload: None,
            scheduled_for: Some(slot),
        },
        cancel: CancellationToken::new(),
    }
}

#[tokio::test]
async fn failures_back_off_doubling_the_interval_and_keep_going() {
    let env = env().await;
    env.checklist(FIVE_ITEMS).await;
    let routine = env.ensure(&hb_settings()).await;
    let hb = env.heartbeat(hb_settings());
    let mut state = serde_json::json!({});
    let mut log = Vec::new();
    let mut notices = 0;
    // Beats every 10 minutes for 3 hours; the LLM fails until 02:00 in.
    for i in 0..18u32 {
        let slot = t0() + chrono::Duration::minutes(10 * i64::from(i));
        env.clock.set(slot);
        if i < 12 {
            env.server.push(Scripted::server_error(500));
        } else {
            env.server.push(Scripted::text("HEARTBEAT_OK"));
        }
        let before = env.server.requests().len();
        let outcome: ActionOutcome = hb.run(&request(&routine, &state, slot)).await;
        let called = env.server.requests().len() > before;
        if !called {
            env.server.reset();
        }
        if outcome.notice.is_some() {
            notices += 1;
        }
        if let Some(s) = outcome.state.clone() {
            state = s;
        }
        log.push((i, called, outcome.status));
    }
    let called: Vec<u32> = log.iter().filter(|l| l.1).map(|l| l.0).collect();
    // Failures at 0 and 1 (the 2nd reaches max_failures: wait 2 intervals),
    // 3 (wait 4), 7 (wait 8), then 15 succeeds and it beats every interval again.
    assert_eq!(called, vec![0, 1, 3, 7, 15, 16, 17], "{log:?}");
    for (i, called, status) in &log {
        let want = match i {
            0 | 1 | 3 | 7 => RunStatus::Failed,
            _ => RunStatus::Ok,
        };
        assert_eq!(*status, want, "beat {i} ({called})");
    }
    assert_eq!(notices, 1, "one notice when it starts backing off");
    assert_eq!(state, serde_json::json!({}), "a success clears the backoff");
}

#[tokio::test]
async fn ensuring_is_idempotent_and_quiet_and_recreates_a_deleted_one() {
    let env = env().await;
    let wanted = [hb_settings().routine()];
    let now = env.clock.now();
    let first = ensure_system_routines(&env.store, "ada", &wanted, PARIS, now)
        .await
        .unwrap();
    assert_eq!(first, vec![(HEARTBEAT.to_string(), Ensured::Created)]);
    let version = env.store.routines_version().await.unwrap();
    // Three daemons starting together after that: nothing is written.
    let (a, b, c) = tokio::join!(
        ensure_system_routines(&env.store, "ada", &wanted, PARIS, now),
        ensure_system_routines(&env.store, "ada", &wanted, PARIS, now),
        ensure_system_routines(&env.store, "ada", &wanted, PARIS, now),
    );
    for done in [a, b, c] {
        assert_eq!(done.unwrap()[0].1, Ensured::Unchanged);
    }
    assert_eq!(env.store.routines_version().await.unwrap(), version);
    let routine = env
        .store
        .find_routine("ada", HEARTBEAT)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(routine.spec.guardrails.max_concurrent, 1);
    assert_eq!(
        routine.runtime.next_fire_at,
        Some(now + chrono::Duration::minutes(10))
    );

    // A changed interval replaces the spec and the next slot, keeping the id.
    let mut longer = hb_settings();
    longer.interval = Duration::from_secs(1800);
    let done = ensure_system_routines(&env.store, "ada", &[longer.routine()], PARIS, now)
        .await
        .unwrap();
    assert_eq!(done[0].1, Ensured::Updated);
    let changed = env
        .store
        .find_routine("ada", HEARTBEAT)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(changed.id, routine.id);
    assert_eq!(
        changed.runtime.next_fire_at,
        Some(now + chrono::Duration::minutes(30))
    );

    // The setting turned off: the stored routine is disabled, not deleted.
    let mut off = longer.clone();
    off.enabled = false;
    ensure_system_routines(&env.store, "ada", &[off.routine()], PARIS, now)
        .await
        .unwrap();
    let disabled = env
        .store
        .find_routine("ada", HEARTBEAT)
        .await
        .unwrap()
        .unwrap();
    assert!(!disabled.spec.enabled);

    // Deleted by hand: back at the next start.
    env.store.delete_routine(routine.id).await.unwrap();
    let done = ensure_system_routines(&env.store, "ada", &[longer.routine()], PARIS, now)
        .await
        .unwrap();
    assert_eq!(done[0].1, Ensured::Created);
}

#[tokio::test]
async fn concurrent_first_starts_create_one_routine() {
    let env = env().await;
    let wanted = [hb_settings().routine()];
    let now = env.clock.now();
    let runs = futures::future::join_all(
        (0..4).map(|_| ensure_system_routines(&env.store, "ada", &wanted, PARIS, now)),
    )
    .await;
    let mut kinds: Vec<Ensured> = runs.into_iter().map(|r| r.unwrap()[0].1).collect();
    kinds.sort_by_key(|k| format!("{k:?}"));
    assert_eq!(
        kinds.iter().filter(|k| **k == Ensured::Created).count(),
        1,
        "{kinds:?}"
    );
    assert_eq!(env.store.list_routines(Some("ada")).await.unwrap().len(), 1);
}

/// A task registered in a few lines, as the integrator adds `self-repair`.
struct Counting(std::sync::atomic::AtomicU32);

#[async_trait]
impl SystemTask for Counting {
    async fn run(&self, _: &ActionRequest) -> ActionOutcome {
        let n = self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        ActionOutcome::new(RunStatus::Ok, format!("pass {n}"))
    }
}

#[tokio::test]
async fn any_registered_task_runs_as_a_system_routine_and_unknown_ones_fail_clearly() {
    let env = env().await;
    let clock: Arc<dyn Clock> = env.clock.clone();
    let task = Arc::new(Counting(0.into()));
    let actions = AgentActions::new(env.store.clone(), env.workspace.path(), clock.clone())
        .with_system_task("self-repair", task.clone());
    let engine = RoutineEngine::new(
        env.store.clone(),
        clock,
        Arc::new(actions),
        None,
        EngineSettings::new("a", PARIS),
    );
    let wanted = [
        SystemRoutine::every(
            "self-repair",
            "recovers stuck jobs",
            Duration::from_secs(60),
        ),
        SystemRoutine::every("memory-hygiene", "tidies memory", Duration::from_secs(60)),
    ];
    ensure_system_routines(&env.store, "ada", &wanted, PARIS, env.clock.now())
        .await
        .unwrap();
    env.clock.set(t0() + chrono::Duration::seconds(60));
    engine.tick(env.clock.now()).await.unwrap();
    engine.idle().await;
    assert_eq!(task.0.load(std::sync::atomic::Ordering::SeqCst), 1);
    let hygiene = env
        .store
        .find_routine("ada", "memory-hygiene")
        .await
        .unwrap()
        .unwrap();
    let runs = env.store.list_runs(hygiene.id, 10).await.unwrap();
    assert_eq!(runs[0].status, RunStatus::Failed);
    let summary = runs[0].result_summary.as_deref().unwrap();
    assert!(
        summary.starts_with(
            "no system task named \"memory-hygiene\" in this process (registered: self-repair)"
        ),
        "{summary}"
    );
}

/// Not an assertion about behaviour: prints the estimated tokens of a beat
/// over the five-item checklist above (`--nocapture` to see it), by the
/// repo's estimator, since the fake LLM's usage numbers mean nothing.
#[test]
fn tokens_of_a_typical_five_item_beat() {
    let request = heartbeat_request(FIVE_ITEMS, t0(), PARIS);
    let prompt = estimate_tokens(&request, "");
    let with_ok = estimate_tokens(&request, "HEARTBEAT_OK");
    println!("five-item heartbeat: prompt ~{prompt} tokens, with a HEARTBEAT_OK reply ~{with_ok}");
    assert!(prompt > 100 && prompt < 400, "{prompt}");
}
