//! Notifications, the routine engine, system routines and the routine service.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use cairn_agent::HookRegistry;
use cairn_agent::prompt::{PromptContext, RuntimeInfo};
use cairn_agent::tools::{ToolContext, ToolLimits};
use cairn_automation::notify::channels::Unavailable;
use cairn_automation::notify::{ChannelSet, Notifier, NotifySettings, owner_id, parse_channels};
use cairn_automation::routines::actions::{AgentActions, RoutineAgents};
use cairn_automation::routines::as_agent::RoutineAgent;
use cairn_automation::routines::engine::{EngineSettings, RoutineEngine, RunEvent};
use cairn_automation::routines::heartbeat::{HEARTBEAT, Heartbeat, HeartbeatSettings};
use cairn_automation::routines::service::RoutineService;
use cairn_automation::routines::system::{Ensured, SystemRoutine, SystemTask};
use cairn_automation::routines::upkeep::{MEMORY_HYGIENE, MemoryHygiene, SELF_REPAIR, SelfRepair};
use cairn_core::clock::{Clock, SystemClock};
use cairn_core::config::Config;
use cairn_core::watchers::Watcher;
use cairn_store::Store;

use super::memory::{hygiene_settings, memory_service};
use super::tools::{tool_runner, tools_config};
use super::{AgentRun, Runtime, located, runtime, unset_reason};
use crate::exit::BadInput;

/// The notification router with the configured channels and delivery
/// policy. Channel problems (unknown fields, an unset `${VAR}`, an email
/// channel without `to`) are bad input naming the file, line and key.
pub fn notifier(config: &Config, store: &Store) -> anyhow::Result<Notifier> {
    notifier_watching(config, store, &super::leaks::leak_guard(config))
}

/// [`notifier`], keeping unsent what holds a secret `leaks` watches (and
/// recording it through this notifier).
pub(super) fn notifier_watching(
    config: &Config,
    store: &Store,
    leaks: &cairn_agent::safety::leak::LeakGuard,
) -> anyhow::Result<Notifier> {
    let channels = channel_set(config)?;
    let notifier = Notifier::new(store.clone(), Arc::new(channels), notify_settings(config));
    super::leaks::attach_recorder(leaks, config, store, &notifier);
    Ok(notifier.with_leaks(leaks.clone()))
}

/// The delivery policy of `[notify]`.
pub fn notify_settings(config: &Config) -> NotifySettings {
    let n = &config.notify;
    NotifySettings {
        default_channel: n.default_channel.clone(),
        max_attempts: n.max_attempts,
        max_age: n.max_age,
        retry_base: n.retry_base,
        retry_max: n.retry_max,
        lease: n.lease,
    }
}

/// The configured output channels, checked (no network), with the default
/// channel among them. A channel naming an unset `${VAR}` is there but
/// unavailable: its deliveries fail for good saying which variable, so
/// they wait in the inbox with that reason.
pub fn channel_set(config: &Config) -> anyhow::Result<ChannelSet> {
    let section = config.notify.channels.as_ref();
    let bad = |errors: Vec<cairn_automation::notify::ChannelConfigError>| {
        let lines: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        located(config, section, &lines)
    };
    let parsed = parse_channels(section.map(|s| &s.value), config.env()).map_err(bad)?;
    // A receiver's redirect is reported as its answer, never followed (a
    // followed POST can turn into a GET that "succeeds" with nothing delivered).
    let http = cairn_llm::tls::client_builder()
        .timeout(Duration::from_secs(30))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .context("cannot build the HTTP client for notifications")?;
    let mut channels = ChannelSet::build(&parsed.specs, &http).map_err(bad)?;
    for (name, channel) in &parsed.unavailable {
        let why = unset_reason(config, section, &channel.unset);
        channels.insert(name.clone(), Arc::new(Unavailable::new(channel.kind, why)));
    }
    let default = &config.notify.default_channel;
    if !channels.contains(default) {
        return Err(BadInput(format!(
            "notify.default_channel: no channel named \"{default}\" (configured: {})",
            channels.names().join(", ")
        ))
        .into());
    }
    Ok(channels)
}

/// What runs routines in this process: the agent runtime when an LLM is
/// configured (`None` otherwise: routines that need one fail saying so), the
/// notifier, and the engine over them.
pub struct Automation {
    /// The agent runtime, when an LLM is configured.
    pub runtime: Option<Runtime>,
    /// The notification router.
    pub notifier: Notifier,
    /// The routine engine (not yet running).
    pub engine: RoutineEngine,
    /// The heartbeat task the engine runs (its settings reload live).
    pub heartbeat: Arc<Heartbeat>,
}

/// Builds [`Automation`] over an open store. `home_prefix` is given by a
/// daemon holding its home's lock ([`DaemonLock::owner_prefix`](crate::daemon::lock::DaemonLock::owner_prefix)):
/// its engine's owner id starts with it, and at start the engine reaps the
/// runs that earlier daemons of the home left.
pub async fn automation(
    config: &Config,
    store: &Store,
    home_prefix: Option<String>,
) -> anyhow::Result<Automation> {
    let runtime = match config.llm.provider {
        Some(_) => Some(runtime(config, store.clone()).await?),
        None => {
            // No agent here, but memory still hydrates from its snapshot at start-up.
            memory_service(config, store).await?;
            None
        }
    };
    // One router for the engine and the agent's tools, so a reload reaches both.
    let notifier = match &runtime {
        Some(rt) => rt.notifier.clone(),
        None => notifier(config, store)?,
    };
    let (engine, heartbeat) = routine_engine_with_heartbeat(
        config,
        store,
        Some(notifier.clone()),
        runtime.as_ref(),
        home_prefix,
    )?;
    if let Some(rt) = &runtime {
        forward_routine_runs(&engine, Arc::clone(rt.agent.hooks()));
    }
    Ok(Automation {
        runtime,
        notifier,
        engine,
        heartbeat,
    })
}

/// Tells the hooks of every routine run that ends (`on_routine_run`).
fn forward_routine_runs(engine: &RoutineEngine, hooks: Arc<HookRegistry>) {
    if let Some(watcher) = run_ends_for(hooks) {
        engine.watch_runs(watcher);
    }
}

/// The engine's watcher that hands each run end to the hooks, in order, or
/// none when no hook watches run ends. It only queues: a burst of run ends
/// (hundreds of routines due at once, each hook a process) waits here for
/// the hooks, and each end's JSON is made off the run's task.
fn run_ends_for(hooks: Arc<HookRegistry>) -> Option<Watcher<RunEvent>> {
    if !hooks.watches_routine_runs() {
        return None;
    }
    // A run end as the hooks are told it: routine, run, status, summary.
    let (queue, mut queued) = tokio::sync::mpsc::unbounded_channel::<(
        String,
        uuid::Uuid,
        cairn_core::routine::RunStatus,
        Option<String>,
    )>();
    tokio::spawn(async move {
        while let Some((routine, run_id, status, summary)) = queued.recv().await {
            let run = serde_json::json!({
                "run_id": run_id,
                "status": status.to_string(),
                "summary": summary,
            });
            hooks.on_routine_run(&routine, &run).await;
        }
    });
    Some(Arc::new(move |event| {
        if let RunEvent::Finished {
            routine,
            run_id,
            status,
            summary,
        } = event
        {
            let _ = queue.send((routine, run_id, status, summary));
        }
    }))
}

/// The routine engine with the real executor. With a runtime, routines get
/// the LLM, the agent's tools and the job scheduler, and chat messages reach
/// the event routines; without one (no LLM configured) they get the tools
/// only, and actions that need an LLM fail saying so.
pub fn routine_engine(
    config: &Config,
    store: &Store,
    notifier: Option<Notifier>,
    rt: Option<&Runtime>,
) -> anyhow::Result<RoutineEngine> {
    Ok(routine_engine_with_heartbeat(config, store, notifier, rt, None)?.0)
}

/// [`routine_engine`] and the heartbeat task it runs, whose settings a
/// configuration reload replaces; `home_prefix` as for [`automation`].
pub fn routine_engine_with_heartbeat(
    config: &Config,
    store: &Store,
    notifier: Option<Notifier>,
    rt: Option<&Runtime>,
    home_prefix: Option<String>,
) -> anyhow::Result<(RoutineEngine, Arc<Heartbeat>)> {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let mut actions = AgentActions::new(store.clone(), &config.workspace, Arc::clone(&clock));
    let (runner, limits) = match rt {
        Some(rt) => {
            actions = actions
                .with_llm(
                    Arc::clone(&rt.providers.main),
                    Arc::clone(&rt.providers.cheap),
                )
                .with_jobs(Arc::clone(&rt.jobs));
            let runs = rt.agents.get();
            let agents = routine_agents(config, &runs, &rt.tools.limits, &clock);
            rt.routine_agents.set(Arc::new(agents));
            actions = actions
                .with_agent_set(rt.routine_agents.clone())
                .with_desk(rt.desk.clone());
            (Arc::clone(rt.agent.runner()), rt.tools.limits.clone())
        }
        None => {
            // No agent runs here (no LLM), so no routine tools are needed.
            let tools = tools_config(config)?;
            (tool_runner(&tools, Vec::new(), None)?, tools.limits)
        }
    };
    let ctx = ToolContext::new(&config.workspace, "routines")
        .with_timezone(config.user.timezone)
        .with_clock(Arc::clone(&clock))
        .with_limits(limits);
    actions = actions.with_tools(runner, ctx);
    // System routines' tasks (cairn_automation::routines::system); each
    // also needs its routine in `system_routines`.
    let cheap = rt.map(|rt| Arc::clone(&rt.providers.cheap));
    let heartbeat = Arc::new(Heartbeat::new(
        heartbeat_settings(config),
        &config.workspace,
        cheap,
        Arc::clone(&clock),
    ));
    actions = actions.with_system_task(HEARTBEAT, Arc::clone(&heartbeat) as Arc<dyn SystemTask>);
    let repair = SelfRepair::new(
        store.clone(),
        rt.map(|rt| Arc::clone(&rt.jobs)),
        Arc::clone(&clock),
    );
    actions = actions.with_system_task(SELF_REPAIR, Arc::new(repair));
    let mut hygiene = MemoryHygiene::new(
        store.clone(),
        config.user.id.clone(),
        hygiene_settings(config),
        &config.workspace,
        Arc::clone(&clock),
    );
    match rt {
        // The agents a reload of `[[agents]]` gives the routines.
        Some(rt) => hygiene = hygiene.with_agent_set(rt.routine_agents.clone()),
        None => {
            for agent in super::agents(config)?.all() {
                if let Some(workspace) = &agent.workspace {
                    hygiene = hygiene.with_agent(&agent.id, workspace);
                }
            }
        }
    }
    actions = actions.with_system_task(MEMORY_HYGIENE, Arc::new(hygiene));
    let owner = format!("{}{}", home_prefix.as_deref().unwrap_or(""), owner_id());
    let mut settings = EngineSettings::new(owner, config.user.timezone);
    settings.home_prefix = home_prefix;
    settings.max_concurrent = config.routines.max_concurrent;
    settings.max_waiting = config.routines.max_waiting;
    // Only a daemon (it holds the home's lock) starts runs that wait: a
    // one-off command stops when its own run ends.
    settings.starts_waiting = settings.home_prefix.is_some();
    // Running runs are interrupted (and recorded so) well before the daemon's
    // own shutdown deadline gives up on waiting.
    settings.shutdown_grace = settings
        .shutdown_grace
        .min(config.daemon.shutdown_deadline / 2);
    settings.lease = config.routines.lease;
    settings.env = config.env().clone();
    let engine = RoutineEngine::new(store.clone(), clock, Arc::new(actions), notifier, settings);
    if let Some(rt) = rt {
        rt.link.attach(engine.clone());
    }
    Ok((engine, heartbeat))
}

/// The heartbeat's settings from `[heartbeat]` (empty notify settings
/// mean the default channel and the owner).
pub fn heartbeat_settings(config: &Config) -> HeartbeatSettings {
    let h = &config.heartbeat;
    let given = |s: &str| Some(s.trim().to_string()).filter(|s| !s.is_empty());
    HeartbeatSettings {
        interval: h.interval,
        active_hours: h.active_hours,
        zone: config.user.timezone,
        max_failures: h.max_failures,
        enabled: h.enabled,
        notify_channel: given(&h.notify_channel),
        notify_user: given(&h.notify_user),
    }
}

/// The built-in routines the daemon keeps stored (see
/// [`ensure_system_routines`]): one per system task registered in
/// [`routine_engine`].
pub fn system_routines(config: &Config) -> Vec<SystemRoutine> {
    vec![
        heartbeat_settings(config).routine(),
        SelfRepair::routine(),
        MemoryHygiene::routine(&hygiene_settings(config)),
    ]
}

/// Creates or corrects the built-in routines for the configured user;
/// writes nothing when they are as configured.
pub async fn ensure_system_routines(config: &Config, store: &Store) -> anyhow::Result<()> {
    let done = cairn_automation::routines::system::ensure_system_routines(
        store,
        &config.user.id,
        &system_routines(config),
        config.user.timezone,
        SystemClock.now(),
    )
    .await
    .context("cannot store the built-in routines")?;
    for (name, what) in done {
        if what != Ensured::Unchanged {
            tracing::info!(routine = %name, action = ?what, "built-in routine");
        }
    }
    Ok(())
}

/// The routine service for the configured user: the one writer of routine
/// operations for every front end (`routines.max_backfill` applied, and
/// the agents of `[[agents]]` the routines may run as).
pub fn routine_service(config: &Config, store: &Store, clock: Arc<dyn Clock>) -> RoutineService {
    // A table with problems is refused, naming them, where the agents are
    // built (the runtime, `cairn routine apply`); here it leaves `main`
    // alone, so a routine naming another agent is refused, never let through.
    let agents: Vec<String> = super::agents(config)
        .map(|agents| agents.all().iter().map(|a| a.id.clone()).collect())
        .unwrap_or_default();
    RoutineService::new(
        store.clone(),
        clock,
        config.user.id.clone(),
        config.user.timezone,
    )
    .with_max_backfill(config.routines.max_backfill)
    .with_agents(agents)
}

/// What the routines of each agent other than `main` run with: its loop,
/// its workspace (as the tools' context) and its identity.
pub fn routine_agents(
    config: &Config,
    runs: &[AgentRun],
    limits: &ToolLimits,
    clock: &Arc<dyn Clock>,
) -> RoutineAgents {
    runs.iter()
        .filter_map(|run| {
            // Every agent but main has one (`agents/<id>` unless written).
            let workspace = run.spec.workspace.clone()?;
            let ctx = ToolContext::new(&workspace, "routines")
                .with_timezone(config.user.timezone)
                .with_clock(Arc::clone(clock))
                .with_limits(limits.clone());
            let prompt = PromptContext {
                agent_name: run
                    .spec
                    .name
                    .clone()
                    .unwrap_or_else(|| config.agent.name.clone()),
                workspace,
                timezone: config.user.timezone,
                now: clock.now(),
                model: String::new(),
                tools: Vec::new(),
                more_tools: Vec::new(),
                runtime: RuntimeInfo::detect(),
                skill_paths: config.skills.paths.clone(),
            };
            let agent = RoutineAgent {
                agent: run.agent.clone(),
                ctx,
                prompt,
            };
            Some((run.spec.id.clone(), Arc::new(agent)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use cairn_agent::hooks::Hook;
    use cairn_core::routine::RunStatus;

    use super::*;

    /// Takes a millisecond a run, as a hook that starts a process does.
    #[derive(Default)]
    struct Slow(AtomicUsize);

    #[async_trait::async_trait]
    impl Hook for Slow {
        fn name(&self) -> &str {
            "slow"
        }

        async fn on_routine_run(&self, _routine: &str, _run: &serde_json::Value) {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            self.0.fetch_add(1, Ordering::SeqCst);
        }

        fn watches_routine_runs(&self) -> bool {
            true
        }
    }

    /// A hook that watches nothing a run does.
    struct Deaf;

    impl Hook for Deaf {
        fn name(&self) -> &str {
            "deaf"
        }
    }

    #[test]
    fn no_hook_watching_run_ends_means_no_watcher() {
        let mut hooks = HookRegistry::new();
        hooks.register(Arc::new(Deaf));
        assert!(run_ends_for(Arc::new(hooks)).is_none());
    }

    #[tokio::test]
    async fn a_burst_of_run_ends_reaches_a_slow_hook_whole() {
        let slow = Arc::new(Slow::default());
        let mut hooks = HookRegistry::new();
        hooks.register(slow.clone());
        let watcher = run_ends_for(Arc::new(hooks)).expect("a hook watches run ends");
        for i in 0..1000 {
            watcher(RunEvent::Started {
                routine: format!("r{i}"),
                run_id: uuid::Uuid::now_v7(),
                trigger: "cron".into(),
            });
            watcher(RunEvent::Finished {
                routine: format!("r{i}"),
                run_id: uuid::Uuid::now_v7(),
                status: RunStatus::Ok,
                summary: None,
            });
            // As run ends come: interleaved with the hooks' work, not all
            // before the forwarder first runs.
            if i % 100 == 0 {
                tokio::task::yield_now().await;
            }
        }
        tokio::time::timeout(std::time::Duration::from_secs(30), async {
            while slow.0.load(Ordering::SeqCst) < 1000 {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        })
        .await
        .expect("every run end reached the hook");
        assert_eq!(slow.0.load(Ordering::SeqCst), 1000);
    }
}
