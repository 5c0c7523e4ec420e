//! `cairn daemon`: the always-on half, supervised. One daemon per
//! `CAIRN_HOME` ([`lock`]); its components (the gateway, the routine engine,
//! the notification dispatcher, event forwarding, session pruning, job
//! upkeep and the state file writer) each run in their own task under the
//! [`supervisor`], restarted with backoff when they end or panic; their
//! health goes to `/readyz`, `/api/status` and `daemon_state.json`
//! ([`state_file`]). SIGINT/SIGTERM stop it within
//! `[daemon] shutdown_deadline_secs`; SIGHUP or a changed config.toml
//! reloads what can change while running ([`reload`]).

mod components;
pub mod config_watch;
pub mod heartbeat;
pub mod inbound;
pub mod lock;
mod phases;
pub mod reload;
pub mod service;
pub mod state_file;
pub mod supervisor;

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::Context;
use cairn_agent::agents::Chats;
use cairn_agent::sandbox::Confinement;
use cairn_core::clock::{Clock, SystemClock};
use cairn_core::config::{Config, ConfigInput};
use cairn_gateway::Components;
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
/// The agents' browsers (`browser_*`): running while they can be started;
/// its stop closes them. Disabled when no browser is installed.
pub const BROWSER: &str = "browser";

/// Runs until a stop signal.
pub fn run(args: &DaemonArgs) -> anyhow::Result<ExitCode> {
    let mut phases = phases::Phases::start();
    // Read before the file is: a change made while the daemon starts (before
    // its watch is set up) is then seen as one, not taken for the start's.
    let loaded = loaded_version()?;
    // The vault is read from the store `serve` opens (one open, not two).
    let (input, mut config) = settings::load_before_vault()?;
    if let Some(port) = args.port {
        config.gateway.port = port;
    }
    // Before anything is opened or written: the home is the owner's alone.
    crate::home::secure(config.home(), config.database_url.expose_secret())
        .with_context(|| format!("cannot create {}", config.home().display()))?;
    let runtime = runtime()?;
    phases.mark("config");
    // A task, not the main thread's future: what it waits for (config.toml's
    // events, signals) is then taken by the worker in the wake that caused
    // it, instead of waking the main thread too.
    let result = runtime.block_on(async {
        tokio::spawn(serve(input, config, loaded, phases))
            .await
            .unwrap_or_else(|e| Err(anyhow::anyhow!("the daemon's main task failed: {e}")))
    });
    // A component that ignored the deadline must not hold the exit.
    runtime.shutdown_timeout(Duration::from_secs(1));
    result
}

/// The daemon's runtime: a worker per core, at most [`MAX_WORKERS`]. Under
/// load one worker was the limit (it ran at its full core while the other
/// stood a third idle); idle, workers park and cost nothing measurable.
fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers())
        .on_thread_park(crate::alloc::parked)
        .enable_all()
        .build()?)
}

/// Workers at most: the daemon's work is mostly waiting (SQLite runs on
/// sqlx's own threads), so a large machine's cores would add threads and
/// wake-ups, not throughput.
const MAX_WORKERS: usize = 4;

/// The runtime's workers on this machine.
fn workers() -> usize {
    std::thread::available_parallelism()
        .map_or(1, std::num::NonZeroUsize::get)
        .clamp(1, MAX_WORKERS)
}

/// The daemon's life: each start-up step in order, then the wait for a
/// stop signal, then the shutdown.
async fn serve(
    input: ConfigInput,
    config: Config,
    loaded: Option<SystemTime>,
    mut phases: phases::Phases,
) -> anyhow::Result<ExitCode> {
    let lock = take_lock(&config).await?;
    phases.mark("lock");
    let listener = bind_gateway(&config).await?;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let components = Arc::new(Components::new());
    let sup = supervisor(&config, &components, &clock);
    // Served now: /healthz answers while the rest is built, in this order.
    let serving = components::serve_gateway(&sup, listener, &config)?;
    phases.mark("bind and serve");
    phases.ready();
    let (store, url) = open_store(&config).await?;
    let port = config.gateway.port;
    let mut config = settings::with_whole_vault(input, config, &store).await?;
    config.gateway.port = port;
    warn_unavailable(&config);
    // After the vault: the tools' settings may name its secrets.
    install_sandbox(&config)?;
    phases.mark("store, vault and sandbox");
    greet(&store, &config, serving.as_ref().map(|(addr, _)| *addr)).await?;
    // Recorded while the rest starts (it needs nothing of it), and
    // awaited before the daemon says it runs.
    let announced = tokio::spawn(announce(store.clone(), config.home().display().to_string()));
    let automation = build_automation(&config, &store, &lock).await?;
    phases.mark("automation");
    let chat = automation
        .runtime
        .as_ref()
        .map(|rt| wiring::chat_service_unpruned(&config, rt));
    let chats = match (automation.runtime.as_ref(), chat.as_ref()) {
        (Some(rt), Some(main)) => Some(wiring::chats(&config, rt, Arc::clone(main))?),
        _ => None,
    };
    components::spawn_engine(&sup, &config, &automation);
    components::spawn_dispatcher(&sup, &automation, &clock);
    components::spawn_event_forwarding(&sup, &automation);
    components::spawn_pruning(&sup, chats.as_ref());
    phases.mark("components");
    let inbound = start_inbound(&config, &store, chats.as_ref(), &sup, &automation).await?;
    phases.mark("channels");
    components::spawn_job_upkeep(&sup, &config, &automation, &clock);
    components::spawn_browser(&sup, &automation);
    let gateway_parts = components::GatewayParts {
        config: &config,
        store: &store,
        automation: &automation,
        chats: chats.as_ref(),
        clock: &clock,
        components: &components,
        inbound: inbound.as_ref(),
    };
    let app = serving.as_ref().map(|(_, app)| app);
    components::start_gateway(&sup, app, &gateway_parts).await?;
    phases.mark("gateway");
    phases.log_started();
    let gateway = serving.map(|(addr, _)| addr);
    let header = components::spawn_state_writer(&sup, &config, gateway, &url, &clock);
    let mut reloader = reloader(&config, &automation, inbound.as_ref());
    if let (Some(rt), Some(chats)) = (&automation.runtime, &chats) {
        wiring::register_agent_reload(&mut reloader, rt, chats);
    }
    let signals = Signals::register();
    // Before "running": a secret stored from then on is heard.
    let vault = VaultWatch::start(&store).await;
    if let Err(e) = announced.await {
        tracing::warn!(error = %e, "recording this daemon on the database failed");
    }
    report_running(&store, &url).await?;
    // Start-up ran on this thread, which from here mostly waits: its
    // allocator cache goes back now, not never (it has no park hook).
    let _ = crate::alloc::hand_back();
    let signal = wait_for_stop(&mut reloader, config.home(), loaded, signals, vault).await;
    eprintln!("{signal}: stopping");
    let in_time = shut_down(&config, &sup, &automation, &store).await;
    write_last_state(&header, &components, clock.now()).await;
    drop(lock);
    Ok(stopped(in_time, config.daemon.shutdown_deadline))
}

/// Takes this home's daemon lock: a second daemon on this home stops here,
/// before the port.
async fn take_lock(config: &Config) -> anyhow::Result<DaemonLock> {
    let lock = DaemonLock::acquire(config.home()).await?;
    tracing::debug!(lock = %lock.path().display(), home = %lock.home_id(), "this home's daemon lock is held");
    Ok(lock)
}

/// Says, once, which configured values are unavailable: each part that
/// needs one of them fails with it when used.
fn warn_unavailable(config: &Config) {
    for why in config.unavailable() {
        tracing::warn!(unavailable = %why, "a configured value is unavailable: what needs it fails saying so, the rest runs");
    }
}

/// Installs this process's host sandbox and says how shell commands are
/// confined. A policy that runs `shell` unapproved where it cannot be
/// confined stops here.
fn install_sandbox(config: &Config) -> anyhow::Result<()> {
    let sandbox = wiring::install_sandbox(&wiring::tools_config(config)?)?;
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
    Ok(())
}

/// Binds the gateway's port (when it is enabled), so a taken port is
/// reported before anything starts.
async fn bind_gateway(config: &Config) -> anyhow::Result<Option<tokio::net::TcpListener>> {
    if !config.gateway.enabled {
        return Ok(None);
    }
    let listener = cairn_gateway::bind(&config.gateway)
        .await
        .map_err(|e| BadInput(e.to_string()))?;
    Ok(Some(listener))
}

/// Opens (and migrates) the database; answers the store and its URL.
async fn open_store(config: &Config) -> anyhow::Result<(Store, String)> {
    let url = config.database_url.expose_secret().to_string();
    let (store, report) = Store::open(&url)
        .await
        .context("cannot open the database")?;
    if !report.applied.is_empty() {
        tracing::info!(migrations = ?report.applied, "database migrated");
    }
    Ok((store, url))
}

/// The routine engine, notifications and (with an LLM) the agent runtime;
/// then the built-in routines.
async fn build_automation(
    config: &Config,
    store: &Store,
    lock: &DaemonLock,
) -> anyhow::Result<wiring::Automation> {
    // Its engine's owner id names this home, so it can reap at once what
    // an earlier daemon of the home left running.
    let automation = wiring::automation(config, store, Some(lock.owner_prefix())).await?;
    // The built-in routines (heartbeat, …): created or corrected by name,
    // nothing written when they are as configured.
    if config.routines.enabled {
        wiring::ensure_system_routines(config, store).await?;
    }
    if automation.runtime.is_none() {
        tracing::warn!(
            "no LLM provider is configured: lightweight and full_job routines will fail saying so; the others run"
        );
    }
    Ok(automation)
}

/// The supervisor the components run under.
fn supervisor(config: &Config, components: &Arc<Components>, clock: &Arc<dyn Clock>) -> Supervisor {
    Supervisor::new(
        Arc::clone(components),
        Arc::clone(clock),
        SupervisorSettings {
            initial_backoff: Duration::from_secs(1),
            max_backoff: config.daemon.restart_max_backoff,
            healthy_after: config.daemon.healthy_after,
        },
    )
}

/// Inbound chat channels (Telegram, Slack, Discord, WhatsApp): one component each, which a
/// reload restarts when its table changes. None without chat.
async fn start_inbound(
    config: &Config,
    store: &Store,
    chat: Option<&Arc<Chats>>,
    sup: &Supervisor,
    automation: &wiring::Automation,
) -> anyhow::Result<Option<Arc<inbound::InboundChannels>>> {
    let desk = automation.runtime.as_ref().map(|rt| &rt.desk);
    match chat {
        Some(chat) => Ok(Some(
            inbound::InboundChannels::start(config, store, chat, sup, desk).await?,
        )),
        None => Ok(None),
    }
}

/// What a changed configuration reloads: the runtime's parts and the
/// inbound channels.
fn reloader(
    config: &Config,
    automation: &wiring::Automation,
    inbound: Option<&Arc<inbound::InboundChannels>>,
) -> Reloader {
    let mut reloader = Reloader::new(config.clone());
    wiring::register_reloads(&mut reloader, automation);
    if let Some(inbound) = inbound {
        let inbound = Arc::clone(inbound);
        reloader.on(&["channels"], move |config| {
            let inbound = Arc::clone(&inbound);
            async move { inbound.apply(&config).await }
        });
    }
    reloader
}

/// Says the daemon runs, with how many routines it has.
async fn report_running(store: &Store, url: &str) -> anyhow::Result<()> {
    // A count: loading every routine here kept them all, decoded, for the
    // daemon's life (0.65 MB of array per 1,000 routines, plus their strings).
    let (routines, enabled) = store.count_routines().await?;
    eprintln!(
        "cairn daemon running (pid {}): {routines} routine(s), {enabled} enabled; database {}; stop with Ctrl-C or SIGTERM, reload with SIGHUP",
        std::process::id(),
        cairn_core::config::redact_url(url),
    );
    Ok(())
}

/// Stops the components, then the jobs, background tasks, MCP servers and
/// the store, within `[daemon] shutdown_deadline_secs`; true when all
/// stopped in time.
async fn shut_down(
    config: &Config,
    sup: &Supervisor,
    automation: &wiring::Automation,
    store: &Store,
) -> bool {
    let deadline = config.daemon.shutdown_deadline;
    let started = tokio::time::Instant::now();
    let in_time = sup.shutdown(deadline).await;
    let left = deadline.saturating_sub(started.elapsed());
    let rest = async {
        if let Some(rt) = &automation.runtime {
            rt.jobs.shutdown().await;
            rt.background.shutdown().await;
            // MCP servers' processes end with their connections.
            rt.mcp.get().shutdown().await;
            if let Some(browsers) = &rt.browsers {
                browsers.shutdown().await;
            }
        }
        if let Err(e) = store.withdraw_daemon(store.signal_id()).await {
            tracing::warn!(error = %e, "cannot remove this daemon's record from the database");
        }
        store.close().await;
    };
    in_time & tokio::time::timeout(left, rest).await.is_ok()
}

/// Writes the state file one last time, marked stopping.
async fn write_last_state(
    header: &StateHeader,
    components: &Components,
    now: chrono::DateTime<chrono::Utc>,
) {
    let mut last = header.snapshot(components, now);
    last.stopping = true;
    if let Err(e) = state_file::write(&header.home, &last).await {
        tracing::warn!(error = %format!("{e:#}"), "cannot write the daemon state file");
    }
}

/// Says the daemon stopped; exit 1 when shutdown outran its deadline.
fn stopped(in_time: bool, deadline: Duration) -> ExitCode {
    if in_time {
        eprintln!("cairn daemon stopped");
        ExitCode::SUCCESS
    } else {
        eprintln!(
            "cairn daemon stopped without waiting for everything: shutdown took longer than {}s (daemon.shutdown_deadline_secs)",
            deadline.as_secs()
        );
        ExitCode::from(1)
    }
}

/// Records this daemon on the database, so commands (here or on another
/// home sharing it) hand it what they record instead of delivering it
/// themselves; forgets the records of daemons of this host that died.
async fn announce(store: Store, home: String) {
    let host = crate::commands::delivery::host_name();
    if let Ok(daemons) = store.daemons().await {
        for d in daemons {
            let dead = d.connected.is_none() && d.host == host && !state_file::pid_alive(d.pid);
            if dead {
                let _ = store.withdraw_daemon(&d.id).await;
            }
        }
    }
    if let Err(e) = store
        .announce_daemon(std::process::id(), &host, &home, chrono::Utc::now())
        .await
    {
        tracing::warn!(error = %e, "cannot record this daemon on the database; commands will deliver what they record themselves");
    }
}

/// The first lines a person reads: where the dashboard is and, until a
/// device is paired, the code to pair one (the gateway already serves at
/// `gateway`, the address it is bound to).
async fn greet(
    store: &Store,
    config: &Config,
    gateway: Option<std::net::SocketAddr>,
) -> anyhow::Result<()> {
    let Some(addr) = gateway else {
        eprintln!("dashboard: none (gateway.enabled = false)");
        return Ok(());
    };
    eprintln!("dashboard: {}", dashboard_url(addr));
    let key = cairn_gateway::pairing::PairingKey::load_or_create(config.home())
        .await
        .context("cannot read the install key pairing codes are hashed with")?;
    first_pairing(store, &key, chrono::Utc::now()).await;
    Ok(())
}

/// The dashboard's address as a browser on this machine reaches it (an
/// unspecified bind address, `0.0.0.0` or `::`, is reached as loopback).
fn dashboard_url(addr: std::net::SocketAddr) -> String {
    let ip = match addr.ip() {
        std::net::IpAddr::V4(ip) if ip.is_unspecified() => std::net::Ipv4Addr::LOCALHOST.into(),
        std::net::IpAddr::V6(ip) if ip.is_unspecified() => std::net::Ipv6Addr::LOCALHOST.into(),
        ip => ip,
    };
    format!("http://{}/", std::net::SocketAddr::new(ip, addr.port()))
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

/// Waits for SIGINT or SIGTERM (named in the answer), reloading on SIGHUP,
/// when config.toml changes (file events, see [`config_watch`]) and when
/// another process changes the vault (the store's change signal): what
/// reads a secret, leak detection first, takes its new value.
async fn wait_for_stop(
    reloader: &mut Reloader,
    home: &std::path::Path,
    loaded: Option<SystemTime>,
    mut signals: Signals,
    mut vault: VaultWatch,
) -> &'static str {
    let path = settings::config_path(home);
    let mut watch = self::config_watch::ConfigWatch::start(path.clone()).await;
    tracing::debug!(file_events = watch.has_events(), path = %path.display(), "watching config.toml");
    // A change made during start-up came before the watch could hear it.
    let mut seen = modified(&path).await;
    if seen != loaded {
        reload(reloader, "config.toml changed while the daemon started").await;
    }
    let stop = signals.stop();
    tokio::pin!(stop);
    loop {
        let hangup = signals.hangup();
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
            () = vault.changed() => reload(reloader, "the vault changed").await,
        }
    }
}

/// The vault as the change signal reports it: a wake is a change only when
/// its secrets' names or times moved (the listener's start wakes every
/// waiter once), so the configuration is read again only for a real one.
struct VaultWatch {
    store: Store,
    watch: cairn_store::Watch,
    seen: Option<Vec<(String, chrono::DateTime<chrono::Utc>)>>,
}

impl VaultWatch {
    async fn start(store: &Store) -> VaultWatch {
        let watch = store.watch(cairn_store::Topic::Vault);
        let mut vault = VaultWatch {
            store: store.clone(),
            watch,
            seen: None,
        };
        vault.seen = vault.stamp().await;
        vault
    }

    async fn stamp(&self) -> Option<Vec<(String, chrono::DateTime<chrono::Utc>)>> {
        let entries = self.store.vault_list().await.ok()?;
        Some(
            entries
                .into_iter()
                .map(|e| (e.name, e.updated_at))
                .collect(),
        )
    }

    /// Completes when a secret was stored, replaced or removed.
    async fn changed(&mut self) {
        loop {
            self.watch.changed().await;
            let now = self.stamp().await;
            // Unreadable: looked at again by the reload itself.
            if now.is_none() || now != self.seen {
                self.seen = now;
                return;
            }
        }
    }
}

/// config.toml's modification time before it is read at start-up.
#[expect(
    clippy::disallowed_methods,
    reason = "start-up, before the runtime exists"
)]
fn loaded_version() -> anyhow::Result<Option<SystemTime>> {
    let path = settings::config_path(&settings::home_dir()?);
    Ok(std::fs::metadata(path).ok().and_then(|m| m.modified().ok()))
}

/// config.toml's modification time (`None` when it does not exist).
async fn modified(path: &std::path::Path) -> Option<SystemTime> {
    tokio::fs::metadata(path).await.ok()?.modified().ok()
}

/// Reads the configuration again and applies it, logging what changed.
async fn reload(reloader: &mut Reloader, why: &str) {
    let config = match settings::load_with_whole_vault() {
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

/// The signals that stop (SIGINT, SIGTERM) or reload (SIGHUP) the daemon,
/// registered before it says it runs: a SIGTERM sent as soon as the
/// "running" line shows is a clean stop, not the default kill.
struct Signals {
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    int: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    hup: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    fn register() -> Signals {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Signals {
                term: signal(SignalKind::terminate()).ok(),
                int: signal(SignalKind::interrupt()).ok(),
                hup: signal(SignalKind::hangup()).ok(),
            }
        }
        #[cfg(not(unix))]
        Signals {}
    }

    /// Waits for SIGINT or SIGTERM; names the one that came. It takes the
    /// stop signals, so SIGHUP can still be awaited beside it.
    #[cfg(unix)]
    fn stop(&mut self) -> impl std::future::Future<Output = &'static str> + use<> {
        let (term, int) = (self.term.take(), self.int.take());
        async move {
            let recv = |s: Option<tokio::signal::unix::Signal>| async move {
                match s {
                    Some(mut s) => {
                        s.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                () = recv(int) => "SIGINT",
                () = recv(term) => "SIGTERM",
            }
        }
    }

    #[cfg(not(unix))]
    fn stop(&mut self) -> impl std::future::Future<Output = &'static str> + use<> {
        async {
            tokio::signal::ctrl_c().await.ok();
            "SIGINT"
        }
    }

    /// The next SIGHUP (never, where there is none).
    async fn hangup(&mut self) -> Option<()> {
        #[cfg(unix)]
        if let Some(h) = self.hup.as_mut() {
            return h.recv().await;
        }
        std::future::pending().await
    }
}
