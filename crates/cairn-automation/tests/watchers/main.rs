//! Watchers on the real routine engine over SQLite: a scripted tool gives a
//! sequence of results, a fixed clock is moved one interval per check and
//! the engine's timer round is run by hand, so hundreds of checks take no
//! real time and no test sleeps. Notifications are counted where the
//! conversation takes them (`conversation:<session>`).
#![expect(clippy::unwrap_used, reason = "test code unwraps freely")]

use std::sync::Arc;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use cairn_agent::runner::Authorized;
use cairn_agent::tools::{RiskLevel, Tool, ToolContext, ToolError, ToolOutput, ToolSpec};
use cairn_agent::{AutonomyLevel, PolicyGate, ToolPolicyConfig, ToolRegistry, ToolRunner};
use cairn_automation::notify::{ChannelSet, Notifier, NotifySettings};
use cairn_automation::primitives::RunnerLink;
use cairn_automation::primitives::watch::{WatchError, WatchRequest, Watchers};
use cairn_automation::routines::actions::AgentActions;
use cairn_automation::routines::engine::{EngineSettings, RoutineEngine};
use cairn_core::clock::{Clock, FixedClock};
use cairn_core::notification::Notification;
use cairn_core::routine::WatchStrategy;
use cairn_store::Store;
use chrono::{DateTime, TimeZone, Utc};
use serde_json::{Value, json};

/// What the probe answers at call `n` (from 0): a result or an error.
type Script = Arc<dyn Fn(u64) -> Result<String, String> + Send + Sync>;

/// `probe`: read-only, answers from its script.
struct Probe {
    script: Script,
    calls: Arc<AtomicU64>,
}

#[async_trait]
impl Tool for Probe {
    fn spec(&self) -> &ToolSpec {
        static SPEC: LazyLock<ToolSpec> =
            LazyLock::new(|| ToolSpec::new("probe", RiskLevel::ReadOnly, "scripted"));
        &SPEC
    }
    async fn execute(
        &self,
        _: Value,
        _: &ToolContext,
        _: &Authorized,
    ) -> Result<ToolOutput, ToolError> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        (self.script)(n)
            .map(ToolOutput::ok)
            .map_err(ToolError::Failed)
    }
}

/// `danger`: the supervised policy asks about it.
struct Danger;

#[async_trait]
impl Tool for Danger {
    fn spec(&self) -> &ToolSpec {
        static SPEC: LazyLock<ToolSpec> =
            LazyLock::new(|| ToolSpec::new("danger", RiskLevel::Dangerous, "asks"));
        &SPEC
    }
    async fn execute(
        &self,
        _: Value,
        _: &ToolContext,
        _: &Authorized,
    ) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::ok("ran"))
    }
}

const SESSION: &str = "s-1";

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 23, 9, 0, 0).unwrap()
}

struct Fx {
    store: Store,
    url: String,
    clock: Arc<FixedClock>,
    script: Script,
    calls: Arc<AtomicU64>,
    engine: RoutineEngine,
    watchers: Arc<Watchers>,
    _runner: Arc<ToolRunner>,
    dir: tempfile::TempDir,
}

/// The runner, engine and watchers of one "process" over `store`.
fn process(
    store: &Store,
    clock: Arc<FixedClock>,
    script: Script,
    calls: Arc<AtomicU64>,
    workspace: &std::path::Path,
    deny: &[&str],
) -> (RoutineEngine, Arc<Watchers>, Arc<ToolRunner>) {
    let link = RunnerLink::new();
    let watchers = Watchers::new(
        cairn_automation::routines::service::RoutineService::new(
            store.clone(),
            clock.clone(),
            "ada",
            chrono_tz::UTC,
        ),
        Arc::clone(&link),
    );
    let mut registry = ToolRegistry::new();
    registry
        .register(Arc::new(Probe { script, calls }))
        .unwrap();
    registry.register(Arc::new(Danger)).unwrap();
    for tool in watchers.tools() {
        registry.register(tool).unwrap();
    }
    let policy = PolicyGate::new(&ToolPolicyConfig {
        autonomy: AutonomyLevel::Supervised,
        deny: deny.iter().map(|d| d.to_string()).collect(),
        ..Default::default()
    });
    let runner = Arc::new(ToolRunner::new(Arc::new(registry), Arc::new(policy)));
    link.attach(&runner);
    let ctx = ToolContext::new(workspace, "routines").with_clock(clock.clone());
    let actions = AgentActions::new(store.clone(), workspace, clock.clone())
        .with_tools(Arc::clone(&runner), ctx);
    let notifier = Notifier::new(
        store.clone(),
        Arc::new(ChannelSet::new()),
        NotifySettings::default(),
    );
    let mut settings = EngineSettings::new("proc", chrono_tz::UTC);
    settings.lease = Duration::from_secs(3600);
    let engine = RoutineEngine::new(
        store.clone(),
        clock,
        Arc::new(actions),
        Some(notifier),
        settings,
    );
    (engine, watchers, runner)
}

impl Fx {
    async fn new(script: impl Fn(u64) -> Result<String, String> + Send + Sync + 'static) -> Fx {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}/cairn.db", dir.path().display());
        let (store, _) = Store::open(&url).await.unwrap();
        let clock = Arc::new(FixedClock::new(t0()));
        let script: Script = Arc::new(script);
        let calls = Arc::new(AtomicU64::new(0));
        let (engine, watchers, runner) = process(
            &store,
            clock.clone(),
            script.clone(),
            calls.clone(),
            dir.path(),
            &[],
        );
        Fx {
            store,
            url,
            clock,
            script,
            calls,
            engine,
            watchers,
            _runner: runner,
            dir,
        }
    }

    /// A new process over the same database: store, engine, watchers.
    async fn restart(&mut self) {
        let (store, _) = Store::open(&self.url).await.unwrap();
        let (engine, watchers, runner) = process(
            &store,
            self.clock.clone(),
            self.script.clone(),
            self.calls.clone(),
            self.dir.path(),
            &[],
        );
        self.store = store;
        self.engine = engine;
        self.watchers = watchers;
        self._runner = runner;
    }

    async fn start(&self, strategy: WatchStrategy, config: Value) -> String {
        let request = WatchRequest {
            tool: "probe".into(),
            params: json!({"url": "https://example.test/health"}),
            interval: 30,
            label: "API health".into(),
            notify_when: strategy,
            notify_config: config,
            output_channel: None,
        };
        self.watchers
            .start(request, Some(SESSION))
            .await
            .unwrap()
            .watcher_id
    }

    /// Moves the clock one interval and runs what is due: one check per call.
    async fn checks(&self, n: u64) {
        for _ in 0..n {
            self.clock
                .set(self.clock.now() + chrono::Duration::seconds(30));
            self.engine.tick(self.clock.now()).await.unwrap();
            self.engine.idle().await;
        }
    }

    /// The notifications the conversation has not taken yet (taking them).
    async fn taken(&self) -> Vec<Notification> {
        self.store
            .take_conversation_notices(SESSION, self.clock.now())
            .await
            .unwrap()
    }
}

fn ok(v: Value) -> Result<String, String> {
    Ok(v.to_string())
}

#[tokio::test]
async fn on_change_tells_the_baseline_then_each_of_five_changes_in_120_checks() {
    // The status changes at checks 21, 41, 61, 81 and 101.
    let fx = Fx::new(|n| ok(json!({"status": format!("v{}", n / 20)}))).await;
    let id = fx.start(WatchStrategy::OnChange, json!({})).await;
    fx.checks(120).await;
    let told = fx.taken().await;
    assert_eq!(told.len(), 6, "baseline + 5 changes");
    let checks: Vec<String> = told
        .iter()
        .map(|n| n.body.lines().next().unwrap().to_string())
        .collect();
    assert_eq!(
        checks,
        [
            "Check #1 (interval: 30s, 1 notification(s) so far, strategy: on_change)",
            "Check #21 (interval: 30s, 2 notification(s) so far, strategy: on_change)",
            "Check #41 (interval: 30s, 3 notification(s) so far, strategy: on_change)",
            "Check #61 (interval: 30s, 4 notification(s) so far, strategy: on_change)",
            "Check #81 (interval: 30s, 5 notification(s) so far, strategy: on_change)",
            "Check #101 (interval: 30s, 6 notification(s) so far, strategy: on_change)",
        ]
    );
    assert_eq!(
        told[0].title,
        format!("[WATCHER UPDATE] watcher_id={id}, label=\"API health\", tool=probe")
    );
    assert!(told[1].body.ends_with("Result: {\"status\":\"v1\"}"));
    let w = fx.watchers.get(&id).await.unwrap();
    assert_eq!((w.check_count, w.notification_count), (120, 6));
    // The history is the routine's 100 kept runs.
    let history = fx.watchers.history(&id, 100).await.unwrap();
    assert_eq!(history.len(), 100);
    assert_eq!(history[0].check, 21);
    assert_eq!(history[99].check, 120);
    assert!(history[0].notified && !history[1].notified);
    assert_eq!(fx.watchers.history(&id, 3).await.unwrap()[2].check, 120);
}

#[tokio::test]
async fn on_error_tells_errors_and_recoveries_only() {
    // ok 1-10, errors 11-15, ok 16-25, error 26, ok 27-30.
    let fx = Fx::new(|n| match n + 1 {
        11..=15 | 26 => Err("Connection refused".into()),
        _ => ok(json!({"status_code": 200})),
    })
    .await;
    fx.start(WatchStrategy::OnError, json!({})).await;
    fx.checks(30).await;
    let told = fx.taken().await;
    let heads: Vec<(String, String)> = told
        .iter()
        .map(|n| {
            let mut lines = n.body.lines();
            let head = lines.next().unwrap();
            let check = head.split(' ').nth(1).unwrap().to_string();
            (check, lines.next().unwrap().to_string())
        })
        .collect();
    assert_eq!(
        heads,
        [
            ("#11".to_string(), "Error: Connection refused".to_string()),
            ("#16".into(), "Result: {\"status_code\":200}".into()),
            ("#26".into(), "Error: Connection refused".into()),
            ("#27".into(), "Result: {\"status_code\":200}".into()),
        ]
    );
    // A failing check is not a failed run: no backoff, every slot checked.
    assert_eq!(fx.calls.load(Ordering::SeqCst), 30);
}

#[tokio::test]
async fn on_threshold_tells_when_true_and_a_type_mismatch_once() {
    let counts = [
        json!(50),
        json!(150),
        json!(50),
        json!("high"),
        json!("high"),
        json!("high"),
        json!(150),
        json!(20),
        json!("low"),
    ];
    let fx = Fx::new(move |n| ok(json!({"count": counts[n as usize]}))).await;
    fx.start(
        WatchStrategy::OnThreshold,
        json!({"expression": "result.count > 100"}),
    )
    .await;
    fx.checks(9).await;
    let told = fx.taken().await;
    let checks: Vec<&str> = told
        .iter()
        .map(|n| n.body.split(' ').nth(1).unwrap())
        .collect();
    assert_eq!(checks, ["#2", "#4", "#7", "#9"]);
    assert!(
        told[1]
            .body
            .contains("Error: cannot evaluate `result.count > 100`"),
        "{}",
        told[1].body
    );
    assert!(told[2].body.ends_with("Result: {\"count\":150}"));
}

#[tokio::test]
async fn a_bad_threshold_expression_is_refused_at_start() {
    let fx = Fx::new(|_| ok(json!({}))).await;
    let request = WatchRequest {
        tool: "probe".into(),
        params: json!({}),
        interval: 30,
        label: String::new(),
        notify_when: WatchStrategy::OnThreshold,
        notify_config: json!({"expression": "result.count >> 3"}),
        output_channel: None,
    };
    let err = fx.watchers.start(request, Some(SESSION)).await.unwrap_err();
    assert!(
        err.to_string().contains("notify_config.expression"),
        "{err}"
    );
}

#[tokio::test]
async fn summary_tells_every_batch_size_checks_with_the_batch() {
    let fx = Fx::new(|n| ok(json!({"load": n}))).await;
    fx.start(WatchStrategy::Summary, json!({"batch_size": 10}))
        .await;
    fx.checks(35).await;
    let told = fx.taken().await;
    assert_eq!(told.len(), 3);
    assert!(
        told[2].body.starts_with(
            "Check #30 (interval: 30s, 3 notification(s) so far, strategy: summary)\n\
             Summary (10 checks): [{\"check\":21,\"result\":{\"load\":20}},"
        ),
        "{}",
        told[2].body
    );
}

#[tokio::test]
async fn always_tells_every_check() {
    let fx = Fx::new(|_| ok(json!({"same": true}))).await;
    fx.start(WatchStrategy::Always, json!({})).await;
    fx.checks(7).await;
    assert_eq!(fx.taken().await.len(), 7);
}

#[tokio::test]
async fn a_watcher_survives_a_restart_with_its_counts() {
    let mut fx = Fx::new(|n| ok(json!({"v": n / 3}))).await;
    let id = fx.start(WatchStrategy::OnChange, json!({})).await;
    fx.checks(5).await;
    assert_eq!(fx.taken().await.len(), 2);
    fx.restart().await;
    fx.checks(3).await;
    let w = fx.watchers.get(&id).await.unwrap();
    assert_eq!((w.check_count, w.notification_count), (8, 3));
    let told = fx.taken().await;
    assert_eq!(told.len(), 1);
    assert!(
        told[0]
            .body
            .starts_with("Check #7 (interval: 30s, 3 notification(s) so far"),
        "{}",
        told[0].body
    );
}

#[tokio::test]
async fn a_paused_watcher_skips_checks_and_stays_paused_across_a_restart() {
    let mut fx = Fx::new(|n| ok(json!({"v": n}))).await;
    let id = fx.start(WatchStrategy::Always, json!({})).await;
    fx.checks(2).await;
    let paused = fx.watchers.pause(&id).await.unwrap();
    assert_eq!((paused.status.as_str(), paused.check_count), ("paused", 2));
    fx.checks(5).await;
    fx.restart().await;
    fx.checks(5).await;
    let w = fx.watchers.get(&id).await.unwrap();
    assert_eq!((w.status.as_str(), w.check_count), ("paused", 2));
    assert_eq!(fx.calls.load(Ordering::SeqCst), 2);
    assert_eq!(fx.watchers.history(&id, 100).await.unwrap().len(), 2);
    let resumed = fx.watchers.resume(&id).await.unwrap();
    assert_eq!(resumed.status, "running");
    fx.checks(2).await;
    let w = fx.watchers.get(&id).await.unwrap();
    assert_eq!((w.check_count, w.notification_count), (4, 4));
    // Listed running first; stopping deletes it and its history.
    let other = fx.start(WatchStrategy::OnError, json!({})).await;
    fx.watchers.pause(&other).await.unwrap();
    let list = fx.watchers.list().await.unwrap();
    assert_eq!(list[0].watcher_id, id);
    assert_eq!(list[1].status, "paused");
    fx.watchers.stop(&id).await.unwrap();
    assert!(matches!(
        fx.watchers.get(&id).await,
        Err(WatchError::NotFound(_))
    ));
}

#[tokio::test]
async fn tools_needing_approval_or_denied_cannot_be_watched() {
    let fx = Fx::new(|_| ok(json!({}))).await;
    for tool in ["danger", "watch_list"] {
        let request = WatchRequest {
            tool: tool.into(),
            params: json!({}),
            interval: 30,
            label: String::new(),
            notify_when: WatchStrategy::OnChange,
            notify_config: json!({}),
            output_channel: None,
        };
        let err = fx.watchers.start(request, Some(SESSION)).await.unwrap_err();
        match tool {
            "danger" => assert!(
                matches!(&err, WatchError::Refused(t) if t.contains("needs the person's approval")),
                "{err}"
            ),
            _ => assert!(matches!(err, WatchError::Invalid(_)), "{err}"),
        }
    }
    assert!(fx.watchers.list().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_tool_denied_after_the_start_is_not_run_and_the_check_says_why() {
    let mut fx = Fx::new(|_| ok(json!({"up": true}))).await;
    fx.start(WatchStrategy::OnError, json!({})).await;
    fx.checks(2).await;
    // The next process's policy denies the tool: each check asks again.
    let (store, _) = Store::open(&fx.url).await.unwrap();
    let (engine, watchers, runner) = process(
        &store,
        fx.clock.clone(),
        fx.script.clone(),
        fx.calls.clone(),
        fx.dir.path(),
        &["probe"],
    );
    (fx.store, fx.engine, fx.watchers, fx._runner) = (store, engine, watchers, runner);
    fx.checks(3).await;
    assert_eq!(fx.calls.load(Ordering::SeqCst), 2, "not run once denied");
    let told = fx.taken().await;
    assert_eq!(told.len(), 1, "the first error only");
    assert!(
        told[0].body.contains("Error: `probe` is denied by policy"),
        "{}",
        told[0].body
    );
}

#[tokio::test]
async fn the_tools_speak_the_seed_shapes() {
    /// The person in the conversation, approving what they are asked.
    struct Person;
    #[async_trait::async_trait]
    impl cairn_agent::runner::Approver for Person {
        async fn approve(
            &self,
            _: &cairn_agent::runner::ApprovalRequest,
        ) -> cairn_agent::runner::ApprovalAnswer {
            cairn_agent::runner::ApprovalAnswer::Yes
        }
        fn person_present(&self) -> bool {
            true
        }
    }
    let fx = Fx::new(|_| ok(json!({"up": true}))).await;
    let ctx = ToolContext::new(fx.dir.path(), SESSION);
    let run_with = |name: &str, args: Value, person: bool| {
        let call = cairn_core::chat::ToolCall {
            id: "c".into(),
            name: name.into(),
            arguments: args,
        };
        let runner = Arc::clone(&fx._runner);
        let ctx = ctx.clone();
        async move {
            let r = if person {
                runner.run(&call, &ctx, &Person).await
            } else {
                runner.run(&call, &ctx, &cairn_agent::runner::DenyAll).await
            };
            let text = cairn_automation::routines::watch::unframe(&r.content).to_string();
            serde_json::from_str::<Value>(&text).unwrap_or(Value::String(text))
        }
    };
    // Nobody there to ask: reading runs; starting (recurring work) and
    // changing do not.
    let run = |name: &str, args: Value| run_with(name, args, false);
    let person = |name: &str, args: Value| run_with(name, args, true);
    let start = json!({"name": "probe", "interval": 5, "label": "up?", "notify_when": "on_error"});
    let refused = run("watch_start", start.clone()).await;
    assert!(
        refused.as_str().unwrap().contains("nobody can approve"),
        "{refused}"
    );
    let started = person("watch_start", start).await;
    let id = started["watcher_id"].as_str().unwrap().to_string();
    assert_eq!(id.len(), 12);
    assert_eq!(started["status"], "running");
    assert_eq!(started["interval"], 5);
    assert!(started["hint"].as_str().unwrap().contains("'on_error'"));
    let bad = person("watch_start", json!({"name": "probe", "interval": 4})).await;
    assert!(bad.as_str().unwrap().contains("from 5 to 3600"), "{bad}");
    let list = run("watch_list", json!({})).await;
    assert_eq!(list["watchers"][0]["watcher_id"], id.as_str());
    let status = run("watch_status", json!({"watcher_id": id})).await;
    assert_eq!(status["check_count"], 0);
    assert_eq!(status["output_channel"], "conversation:s-1");
    let history = run("watch_history", json!({"watcher_id": id, "last_n": 0})).await;
    assert!(history.as_str().unwrap().contains("from 1 to 100"));
    for tool in ["watch_pause", "watch_stop"] {
        let refused = run(tool, json!({"watcher_id": id})).await;
        assert!(
            refused.as_str().unwrap().contains("nobody can approve"),
            "{refused}"
        );
    }
    let status = run("watch_status", json!({"watcher_id": id})).await;
    assert_eq!(status["status"], "running");
    let paused = person("watch_pause", json!({"watcher_id": id})).await;
    assert_eq!(paused["status"], "paused");
    let resumed = person("watch_resume", json!({"watcher_id": id})).await;
    assert_eq!(resumed["status"], "running");
    let stopped = person("watch_stop", json!({"watcher_id": id})).await;
    assert_eq!(stopped["status"], "stopped");
}

mod chat;
