//! `cairn daemon`: the always-on half, supervised. One daemon per
//! `CAIRN_HOME` ([`lock`]); its components (the gateway, the routine engine,
//! the notification dispatcher, event forwarding, session pruning, job
//! upkeep and the state file writer) each run in their own task under the
//! [`supervisor`], restarted with backoff when they end or panic; their
//! health goes to `/readyz`, `/api/status` and `daemon_state.json`
//! ([`state_file`]). SIGINT/SIGTERM stop it within
//! `[daemon] shutdown_deadline_secs`; SIGHUP or a changed config.toml
//! reloads what can change while running ([`reload`]).

pub mod config_watch;
pub mod heartbeat;
pub mod inbound;
pub mod lock;
pub mod reload;
pub mod service;
pub mod state_file;
pub mod supervisor;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::Context;
use cairn_agent::sandbox::Confinement;
use cairn_automation::notify::{Dispatcher, owner_id};
use cairn_automation::routines::upkeep_watch as repair_watch;
use cairn_core::clock::{Clock, SystemClock};
use cairn_core::config::Config;
use cairn_gateway::{Components, Gateway};
use cairn_store::Store;
use secrecy::ExposeSecret;

use self::lock::DaemonLock;
use self::reload::Reloader;
use self::state_file::StateHeader;
use self::supervisor::{Supervisor, SupervisorSettings};
use crate::cli::DaemonArgs;
use crate::exit::BadInput;
use crate::{settings, wiring};

/// Component names, as `/readyz`, `/api/status` and `cairn status` show them.
pub const GATEWAY: &str = "gateway";
/// The routine engine.
pub const ENGINE: &str = "routine_engine";
/// The notification dispatcher.
pub const DISPATCHER: &str = "notification_dispatcher";
/// Turning job ends and given-up notifications into routine events.
pub const EVENTS: &str = "event_forwarding";
/// Pruning idle chat sessions.
pub const PRUNING: &str = "session_pruning";
/// The job scheduler's upkeep (leases, cancellations, orphans), and
/// self-repair fired when a job stops making progress.
pub const JOB_UPKEEP: &str = "job_upkeep";
/// The state file writer.
pub const STATE_WRITER: &str = "state_writer";

/// Runs until a stop signal.
pub fn run(args: &DaemonArgs) -> anyhow::Result<ExitCode> {
    let mut config = settings::load()?;
    if let Some(port) = args.port {
        config.gateway.port = port;
    }
    // Before anything is opened or written: the home is the owner's alone.
    crate::home::secure(config.home(), config.database_url.expose_secret())
        .with_context(|| format!("cannot create {}", config.home().display()))?;
    let runtime = runtime()?;
    // A task, not the main thread's future: what it waits for (config.toml's
    // events, signals) is then taken by the worker in the wake that caused
    // it, instead of waking the main thread too.
    let result = runtime.block_on(async {
        tokio::spawn(serve(config))
            .await
            .unwrap_or_else(|e| Err(anyhow::anyhow!("the daemon's main task failed: {e}")))
    });
    // A component that ignored the deadline must not hold the exit.
    runtime.shutdown_timeout(Duration::from_secs(1));
    result
}

/// The daemon's runtime: one worker. Its work waits on I/O (SQLite runs on
/// sqlx's own threads, the store's timers on its runtime); a second worker
/// only added wake-ups when idle (a woken worker wakes its sibling to share
/// the work) and another thread's memory.
fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?)
}

async fn serve(config: Config) -> anyhow::Result<ExitCode> {
    // First: a second daemon on this home stops here, before the port.
    let lock = DaemonLock::acquire(config.home()).await?;
    tracing::debug!(lock = %lock.path().display(), home = %lock.home_id(), "this home's daemon lock is held");
    // Once, here: each part that needs one of these fails with it when used.
    for why in config.unavailable() {
        tracing::warn!(unavailable = %why, "a configured value is unavailable: what needs it fails saying so, the rest runs");
    }
    // A policy that runs `shell` unapproved where it cannot be confined stops here.
    let sandbox = wiring::install_sandbox(&wiring::tools_config(&config)?);
    match sandbox.confinement() {
        Confinement::Landlock { abi } => tracing::info!(
            landlock_abi = %abi,
            "shell commands are confined by Landlock to the workspace"
        ),
        Confinement::Unavailable { reason } => tracing::warn!(
            allow_unconfined = sandbox.settings().allow_unconfined,
            "Landlock {reason}: shell commands run unconfined; unapproved runs of `shell` are refused unless tools.shell.allow_unconfined = true"
        ),
    }
    // Bound next: a taken port is reported before anything starts.
    let listener = if config.gateway.enabled {
        Some(
            cairn_gateway::bind(&config.gateway)
                .await
                .map_err(|e| BadInput(e.to_string()))?,
        )
    } else {
        None
    };
    let url = config.database_url.expose_secret().to_string();
    let (store, report) = Store::open(&url)
        .await
        .context("cannot open the database")?;
    if !report.applied.is_empty() {
        tracing::info!(migrations = ?report.applied, "database migrated");
    }
    announce(&store, &config).await;
    // Its engine's owner id names this home, so it can reap at once what
    // an earlier daemon of the home left running.
    let automation = wiring::automation(&config, &store, Some(lock.owner_prefix())).await?;
    // The built-in routines (heartbeat, …): created or corrected by name,
    // nothing written when they are as configured.
    if config.routines.enabled {
        wiring::ensure_system_routines(&config, &store).await?;
    }
    if automation.runtime.is_none() {
        tracing::warn!(
            "no LLM provider is configured: lightweight and full_job routines will fail saying so; the others run"
        );
    }
    let chat = automation
        .runtime
        .as_ref()
        .map(|rt| wiring::chat_service_unpruned(&config, rt));
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let components = Arc::new(Components::new());
    let sup = Supervisor::new(
        Arc::clone(&components),
        Arc::clone(&clock),
        SupervisorSettings {
            initial_backoff: Duration::from_secs(1),
            max_backoff: config.daemon.restart_max_backoff,
            healthy_after: config.daemon.healthy_after,
        },
    );

    let engine = automation.engine.clone();
    if config.routines.enabled {
        sup.spawn(ENGINE, move |cancel| {
            let engine = engine.clone();
            async move {
                engine.run(cancel).await;
                Ok(())
            }
        });
    } else {
        tracing::warn!("routines.enabled is false: no routine will fire");
        sup.disabled(ENGINE);
    }
    let notifier = automation.notifier.clone();
    sup.spawn(DISPATCHER, {
        let clock = Arc::clone(&clock);
        move |cancel| {
            let dispatcher = Dispatcher::new(notifier.clone(), owner_id());
            let clock = Arc::clone(&clock);
            async move {
                dispatcher.run(clock, cancel).await;
                Ok(())
            }
        }
    });
    sup.spawn(EVENTS, {
        let engine = automation.engine.clone();
        let notifier = automation.notifier.clone();
        let jobs = automation.runtime.as_ref().map(|rt| Arc::clone(&rt.jobs));
        move |cancel| {
            let forwarding = engine.forward_events(
                jobs.as_ref().map(|j| j.subscribe_finished()),
                Some(notifier.subscribe_given_up()),
                cancel,
            );
            async move { forwarding.await.context("event forwarding failed") }
        }
    });
    match &chat {
        Some(chat) => {
            let chat = Arc::clone(chat);
            sup.spawn(PRUNING, move |cancel| {
                let chat = Arc::clone(&chat);
                async move {
                    let mut ticker = tokio::time::interval(wiring::PRUNE_EVERY);
                    ticker.tick().await;
                    loop {
                        tokio::select! {
                            () = cancel.cancelled() => return Ok(()),
                            _ = ticker.tick() => { chat.prune_idle().await; }
                        }
                    }
                }
            });
        }
        None => sup.disabled(PRUNING),
    }
    // Inbound chat channels (a Telegram bot, WhatsApp): one component each, which a
    // reload restarts when its table changes.
    let inbound = match &chat {
        Some(chat) => Some(inbound::InboundChannels::start(&config, &store, chat, &sup).await?),
        None => None,
    };
    match &automation.runtime {
        Some(rt) => {
            let jobs = Arc::clone(&rt.jobs);
            let (engine, clock) = (automation.engine.clone(), Arc::clone(&clock));
            let (user, stuck_after) = (config.user.id.clone(), config.repair.stuck_after);
            let repairs = config.routines.enabled;
            sup.spawn(JOB_UPKEEP, move |cancel| {
                let jobs = Arc::clone(&jobs);
                let watch = repair_watch::watch_quiet_jobs(
                    engine.clone(),
                    Arc::clone(&clock),
                    user.clone(),
                    stuck_after,
                    cancel.clone(),
                );
                async move {
                    let watch = async {
                        if repairs {
                            watch.await;
                        } else {
                            std::future::pending::<()>().await;
                        }
                    };
                    // Ends by itself at the scheduler's shutdown, after this.
                    tokio::select! {
                        () = cancel.cancelled() => {}
                        () = jobs.upkeep() => {}
                        () = watch => {}
                    }
                    Ok(())
                }
            });
        }
        None => sup.disabled(JOB_UPKEEP),
    }

    let mut gateway_addr: Option<SocketAddr> = None;
    match listener {
        Some(listener) => {
            let addr = listener.local_addr().context("the gateway's address")?;
            gateway_addr = Some(addr);
            let pairing_key = cairn_gateway::pairing::PairingKey::load_or_create(config.home())
                .await
                .context("cannot read the install key pairing codes are hashed with")?;
            if !addr.ip().is_loopback() {
                tracing::warn!(%addr, "the gateway is reachable from other machines (gateway.allow_public_bind)");
            }
            let mut gateway = Gateway::new(
                store.clone(),
                Arc::clone(&clock),
                config.gateway.clone(),
                config.user.id.clone(),
            )
            .with_engine(automation.engine.clone())
            .with_routines(
                crate::wiring::routine_service(&config, &store, Arc::clone(&clock))
                    .with_wake(Arc::new(automation.engine.clone())),
            )
            .with_notifier(automation.notifier.clone())
            .with_components(Arc::clone(&components))
            .with_pairing_key(pairing_key.clone())
            .with_shutdown(sup.cancel_token());
            // The status page's checks are this binary's `doctor`.
            if let Ok(exe) = std::env::current_exe() {
                gateway = gateway.with_doctor(exe);
            }
            if let Some(inbound) = &inbound {
                gateway = gateway.with_whatsapp(inbound.whatsapp_endpoints().clone());
            }
            if let (Some(chat), Some(rt)) = (&chat, &automation.runtime) {
                gateway = gateway
                    .with_chat(Arc::clone(chat), rt.providers.main.model())
                    .with_jobs(Arc::clone(&rt.jobs))
                    .with_background(Arc::clone(&rt.background))
                    .with_cost_guard(Arc::clone(&rt.reloadable.guard));
            }
            let gateway = Arc::new(gateway);
            // Routine runs, jobs and notifications flow into /api/events.
            gateway.spawn_event_feeds();
            let app = cairn_gateway::router(gateway);
            // The first run serves the socket bound above; a restart binds
            // the same address again.
            let first = Arc::new(std::sync::Mutex::new(Some(listener)));
            let limits = config.gateway.clone();
            sup.spawn(GATEWAY, move |cancel| {
                let app = app.clone();
                let first = Arc::clone(&first);
                let limits = limits.clone();
                async move {
                    let bound = first.lock().unwrap_or_else(|p| p.into_inner()).take();
                    let listener = match bound {
                        Some(l) => l,
                        None => tokio::net::TcpListener::bind(addr)
                            .await
                            .with_context(|| format!("cannot bind {addr} again"))?,
                    };
                    cairn_gateway::serve(listener, app, &limits, cancel.clone())
                        .await
                        .context("the gateway stopped")?;
                    if !cancel.is_cancelled() {
                        anyhow::bail!("the gateway stopped serving");
                    }
                    Ok(())
                }
            });
            eprintln!("gateway listening on http://{addr}");
            first_pairing(&store, &pairing_key, clock.now()).await;
        }
        None => {
            sup.disabled(GATEWAY);
            // Meta's webhooks come only through the gateway.
            let whatsapp = wiring::inbound_channels(&config).unwrap_or_default();
            for channel in whatsapp
                .iter()
                .filter(|c| matches!(c.inbound, wiring::Inbound::WhatsApp(_)))
            {
                tracing::warn!(channel = %channel.name, "the gateway is disabled: this WhatsApp channel receives no messages");
            }
        }
    }

    let header = Arc::new(StateHeader {
        home: config.home().to_path_buf(),
        started_at: clock.now(),
        gateway: gateway_addr.map(|a| a.to_string()),
        database: cairn_core::config::redact_url(&url),
    });
    sup.spawn(STATE_WRITER, {
        let (header, components, clock) = (
            Arc::clone(&header),
            Arc::clone(sup.components()),
            Arc::clone(&clock),
        );
        move |cancel| {
            state_file::writer(
                Arc::clone(&header),
                Arc::clone(&components),
                Arc::clone(&clock),
                cancel,
            )
        }
    });

    let mut reloader = Reloader::new(config.clone());
    wiring::register_reloads(&mut reloader, &automation);
    if let Some(inbound) = &inbound {
        let inbound = Arc::clone(inbound);
        reloader.on(&["channels"], move |config| {
            let inbound = Arc::clone(&inbound);
            async move { inbound.apply(&config).await }
        });
    }

    // A count: loading every routine here kept them all, decoded, for the
    // daemon's life (0.65 MB of array per 1,000 routines, plus their strings).
    let (routines, enabled) = store.count_routines().await?;
    eprintln!(
        "cairn daemon running (pid {}): {routines} routine(s), {enabled} enabled; database {}; stop with Ctrl-C or SIGTERM, reload with SIGHUP",
        std::process::id(),
        cairn_core::config::redact_url(&url),
    );

    let signal = wait_for_stop(&mut reloader, config.home()).await;
    eprintln!("{signal}: stopping");
    let deadline = config.daemon.shutdown_deadline;
    let started = tokio::time::Instant::now();
    let mut in_time = sup.shutdown(deadline).await;
    let left = deadline.saturating_sub(started.elapsed());
    let rest = async {
        if let Some(rt) = &automation.runtime {
            rt.jobs.shutdown().await;
            rt.background.shutdown().await;
            // MCP servers' processes end with their connections.
            rt.mcp.get().shutdown().await;
        }
        if let Err(e) = store.withdraw_daemon(store.signal_id()).await {
            tracing::warn!(error = %e, "cannot remove this daemon's record from the database");
        }
        store.close().await;
    };
    in_time &= tokio::time::timeout(left, rest).await.is_ok();
    let mut last = header.snapshot(&components, clock.now());
    last.stopping = true;
    if let Err(e) = state_file::write(&header.home, &last).await {
        tracing::warn!(error = %format!("{e:#}"), "cannot write the daemon state file");
    }
    drop(lock);
    if in_time {
        eprintln!("cairn daemon stopped");
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!(
            "cairn daemon stopped without waiting for everything: shutdown took longer than {}s (daemon.shutdown_deadline_secs)",
            deadline.as_secs()
        );
        Ok(ExitCode::from(1))
    }
}

/// Records this daemon on the database, so commands (here or on another
/// home sharing it) hand it what they record instead of delivering it
/// themselves; forgets the records of daemons of this host that died.
async fn announce(store: &Store, config: &Config) {
    let host = crate::commands::delivery::host_name();
    if let Ok(daemons) = store.daemons().await {
        for d in daemons {
            let dead = d.connected.is_none() && d.host == host && !state_file::pid_alive(d.pid);
            if dead {
                let _ = store.withdraw_daemon(&d.id).await;
            }
        }
    }
    let home = config.home().display().to_string();
    if let Err(e) = store
        .announce_daemon(std::process::id(), &host, &home, chrono::Utc::now())
        .await
    {
        tracing::warn!(error = %e, "cannot record this daemon on the database; commands will deliver what they record themselves");
    }
}

/// Prints a pairing code at start only while nothing was ever paired (no
/// token was ever made) and wrong codes have not locked pairing; otherwise
/// says how to get one. A code at every start would give whoever can
/// restart or watch the daemon a fresh code each time.
async fn first_pairing(
    store: &cairn_store::Store,
    key: &cairn_gateway::pairing::PairingKey,
    now: chrono::DateTime<chrono::Utc>,
) {
    use cairn_gateway::pairing::{self, WRONG_CODES_LIMIT};
    let state = match store.pairing_state().await {
        Ok(state) => state,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the pairing state");
            return;
        }
    };
    if state.wrong_codes >= WRONG_CODES_LIMIT {
        eprintln!(
            "pairing is locked after {WRONG_CODES_LIMIT} wrong codes; run `cairn pair` for a new code"
        );
    } else if state.tokens_ever {
        eprintln!("to pair another device, run `cairn pair` for a code");
    } else {
        match pairing::issue_code(store, key, now).await {
            Ok(code) => eprintln!("{}", crate::commands::pairing_line(&code)),
            Err(e) => tracing::warn!(error = %e, "cannot record a pairing code"),
        }
    }
}

/// Waits for SIGINT or SIGTERM (named in the answer), reloading on SIGHUP
/// and when config.toml changes (file events, see [`config_watch`]).
async fn wait_for_stop(reloader: &mut Reloader, home: &std::path::Path) -> &'static str {
    let path = settings::config_path(home);
    let mut seen = modified(&path).await;
    let mut watch = self::config_watch::ConfigWatch::start(path.clone()).await;
    tracing::debug!(file_events = watch.has_events(), path = %path.display(), "watching config.toml");
    #[cfg(unix)]
    let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
    let stop = stop_signal();
    tokio::pin!(stop);
    loop {
        #[cfg(unix)]
        let hangup = async {
            match hup.as_mut() {
                Some(h) => h.recv().await,
                None => std::future::pending().await,
            }
        };
        #[cfg(not(unix))]
        let hangup = std::future::pending::<Option<()>>();
        tokio::select! {
            signal = &mut stop => return signal,
            _ = hangup => {
                seen = modified(&path).await;
                reload(reloader, "SIGHUP").await;
            }
            () = watch.changed() => {
                let now = modified(&path).await;
                if now != seen {
                    seen = now;
                    reload(reloader, "config.toml changed").await;
                }
            }
        }
    }
}

/// config.toml's modification time (`None` when it does not exist).
async fn modified(path: &std::path::Path) -> Option<SystemTime> {
    tokio::fs::metadata(path).await.ok()?.modified().ok()
}

/// Reads the configuration again and applies it, logging what changed.
async fn reload(reloader: &mut Reloader, why: &str) {
    let config = match settings::load() {
        Ok(config) => config,
        Err(e) => {
            tracing::error!(cause = why, error = %format!("{e:#}"), "configuration not reloaded: the new one is invalid; the old one stays");
            return;
        }
    };
    let report = reloader.reload(config).await;
    if report.is_empty() {
        tracing::info!(cause = why, "configuration reloaded: nothing changed");
        return;
    }
    if !report.applied.is_empty() {
        tracing::info!(cause = why, keys = %report.applied.join(", "), "configuration reloaded: now in force");
    }
    for (key, error) in &report.failed {
        tracing::error!(cause = why, key = %key, error = %error, "configuration reloaded: not applied, the old value stays");
    }
    if !report.need_restart.is_empty() {
        tracing::warn!(cause = why, keys = %report.need_restart.join(", "), "configuration reloaded: these changes need a restart of the daemon");
    }
}

/// Waits for SIGINT or SIGTERM; names the one that came.
async fn stop_signal() -> &'static str {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            return tokio::select! {
                _ = tokio::signal::ctrl_c() => "SIGINT",
                _ = term.recv() => "SIGTERM",
            };
        }
    }
    tokio::signal::ctrl_c().await.ok();
    "SIGINT"
}
