//! The daemon's components, each started under the [`Supervisor`] (or
//! recorded disabled) by a step of [`super::serve`].

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use cairn_agent::agents::Chats;
use cairn_automation::notify::{Dispatcher, owner_id};
use cairn_automation::routines::service::RoutineService;
use cairn_automation::routines::upkeep_watch as repair_watch;
use cairn_core::clock::Clock;
use cairn_core::config::Config;
use cairn_gateway::pairing::PairingKey;
use cairn_gateway::{AppSlot, Components, Gateway};
use cairn_store::Store;
use tokio::net::TcpListener;

use super::state_file::{self, StateHeader};
use super::supervisor::Supervisor;
use super::{BROWSER, DISPATCHER, ENGINE, EVENTS, GATEWAY, JOB_UPKEEP, PRUNING, STATE_WRITER};
use crate::wiring::{self, Automation};

/// The routine engine, unless `routines.enabled` is false.
pub(super) fn spawn_engine(sup: &Supervisor, config: &Config, automation: &Automation) {
    if !config.routines.enabled {
        tracing::warn!("routines.enabled is false: no routine will fire");
        sup.disabled(ENGINE);
        return;
    }
    let engine = automation.engine.clone();
    sup.spawn(ENGINE, move |cancel| {
        let engine = engine.clone();
        async move {
            engine.run(cancel).await;
            Ok(())
        }
    });
}

/// The notification dispatcher.
pub(super) fn spawn_dispatcher(sup: &Supervisor, automation: &Automation, clock: &Arc<dyn Clock>) {
    let notifier = automation.notifier.clone();
    let clock = Arc::clone(clock);
    sup.spawn(DISPATCHER, move |cancel| {
        let dispatcher = Dispatcher::new(notifier.clone(), owner_id());
        let clock = Arc::clone(&clock);
        async move {
            dispatcher.run(clock, cancel).await;
            Ok(())
        }
    });
}

/// Job ends and given-up notifications turned into routine events.
pub(super) fn spawn_event_forwarding(sup: &Supervisor, automation: &Automation) {
    let engine = automation.engine.clone();
    let notifier = automation.notifier.clone();
    let jobs = automation.runtime.as_ref().map(|rt| Arc::clone(&rt.jobs));
    sup.spawn(EVENTS, move |cancel| {
        let forwarding = engine.forward_events(
            jobs.as_ref().map(|j| j.subscribe_finished()),
            Some(notifier.subscribe_given_up()),
            cancel,
        );
        async move { forwarding.await.context("event forwarding failed") }
    });
}

/// The agents' browsers, when one is installed: the component waits for
/// the shutdown, then closes them (profiles written, processes killed).
pub(super) fn spawn_browser(sup: &Supervisor, automation: &Automation) {
    let Some(browsers) = automation
        .runtime
        .as_ref()
        .and_then(|rt| rt.browsers.clone())
    else {
        sup.disabled(BROWSER);
        return;
    };
    sup.spawn(BROWSER, move |cancel| {
        let browsers = Arc::clone(&browsers);
        async move {
            cancel.cancelled().await;
            browsers.shutdown().await;
            Ok(())
        }
    });
}

/// Pruning idle chat sessions, when there is chat (an LLM is configured).
pub(super) fn spawn_pruning(sup: &Supervisor, chats: Option<&Arc<Chats>>) {
    let Some(chats) = chats else {
        sup.disabled(PRUNING);
        return;
    };
    let chats = Arc::clone(chats);
    sup.spawn(PRUNING, move |cancel| {
        let chats = Arc::clone(&chats);
        async move {
            let mut ticker = tokio::time::interval(wiring::PRUNE_EVERY);
            ticker.tick().await;
            loop {
                tokio::select! {
                    () = cancel.cancelled() => return Ok(()),
                    _ = ticker.tick() => {
                        // Every agent's idle sessions, main's first.
                        chats.main().prune_idle().await;
                        for chat in chats.set().others().values() {
                            chat.prune_idle().await;
                        }
                    }
                }
            }
        }
    });
}

/// The job scheduler's upkeep, with self-repair of jobs that stop making
/// progress when routines run; disabled without an agent runtime.
pub(super) fn spawn_job_upkeep(
    sup: &Supervisor,
    config: &Config,
    automation: &Automation,
    clock: &Arc<dyn Clock>,
) {
    let Some(rt) = &automation.runtime else {
        sup.disabled(JOB_UPKEEP);
        return;
    };
    let jobs = Arc::clone(&rt.jobs);
    let (engine, clock) = (automation.engine.clone(), Arc::clone(clock));
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

/// What the gateway is built over.
pub(super) struct GatewayParts<'a> {
    pub config: &'a Config,
    pub store: &'a Store,
    pub automation: &'a Automation,
    /// Every agent's chat service (`main`'s for the dashboard and chat).
    pub chats: Option<&'a Arc<Chats>>,
    pub clock: &'a Arc<dyn Clock>,
    pub components: &'a Arc<Components>,
    /// The inbound channels, whose WhatsApp webhooks come through the gateway.
    pub inbound: Option<&'a Arc<super::inbound::InboundChannels>>,
}

/// Serves the socket bound at start (the gateway is disabled without one)
/// before the rest of the daemon is built: `/healthz` answers at once,
/// other requests wait for [`start_gateway`] to put the app in place.
/// Answers the address and the app's slot.
pub(super) fn serve_gateway(
    sup: &Supervisor,
    listener: Option<TcpListener>,
    config: &Config,
) -> anyhow::Result<Option<(SocketAddr, AppSlot)>> {
    let Some(listener) = listener else {
        sup.disabled(GATEWAY);
        return Ok(None);
    };
    let addr = listener.local_addr().context("the gateway's address")?;
    if !addr.ip().is_loopback() {
        tracing::warn!(%addr, "the gateway is reachable from other machines (gateway.allow_public_bind)");
    }
    let app = AppSlot::empty();
    spawn_gateway(sup, listener, addr, app.clone(), config);
    eprintln!("gateway listening on http://{addr}");
    Ok(Some((addr, app)))
}

/// Builds the gateway and puts its app in the slot [`serve_gateway`]
/// serves (without a gateway, says what that leaves unreachable).
pub(super) async fn start_gateway(
    sup: &Supervisor,
    app: Option<&AppSlot>,
    parts: &GatewayParts<'_>,
) -> anyhow::Result<()> {
    let Some(app) = app else {
        warn_unreachable_whatsapp(parts.config);
        return Ok(());
    };
    let pairing_key = PairingKey::load_or_create(parts.config.home())
        .await
        .context("cannot read the install key pairing codes are hashed with")?;
    let gateway = Arc::new(gateway(sup, parts, &pairing_key));
    // Routine runs, jobs and notifications flow into /api/events.
    gateway.spawn_event_feeds();
    app.fill(cairn_gateway::router(gateway));
    Ok(())
}

/// Meta's webhooks come only through the gateway: without it a WhatsApp
/// channel receives nothing, which the log says.
fn warn_unreachable_whatsapp(config: &Config) {
    let channels = wiring::inbound_channels(config).unwrap_or_default();
    for channel in channels
        .iter()
        .filter(|c| matches!(c.inbound, wiring::Inbound::WhatsApp(_)))
    {
        tracing::warn!(channel = %channel.name, "the gateway is disabled: this WhatsApp channel receives no messages");
    }
}

/// The gateway's state: the store, the engine, routines, notifications,
/// components' health, pairing and, with an LLM, chat and jobs.
fn gateway(sup: &Supervisor, parts: &GatewayParts<'_>, pairing_key: &PairingKey) -> Gateway {
    let GatewayParts {
        config,
        store,
        automation,
        chats,
        clock,
        components,
        inbound,
    } = *parts;
    let mut gateway = Gateway::new(
        store.clone(),
        Arc::clone(clock),
        config.gateway.clone(),
        config.user.id.clone(),
    )
    .with_engine(automation.engine.clone())
    .with_routines(routines_of(config, store, clock, automation))
    .with_notifier(automation.notifier.clone())
    .with_components(Arc::clone(components))
    .with_pairing_key(pairing_key.clone())
    .with_shutdown(sup.cancel_token());
    // The status page's checks are this binary's `doctor`.
    if let Ok(exe) = std::env::current_exe() {
        gateway = gateway.with_doctor(exe);
    }
    if let Some(inbound) = inbound {
        gateway = gateway.with_whatsapp(inbound.whatsapp_endpoints().clone());
    }
    if let (Some(chats), Some(rt)) = (chats, &automation.runtime) {
        gateway = gateway
            .with_chat(Arc::clone(chats.main()), rt.providers.main.model())
            .with_agent_set(chats.live())
            .with_approval_desk(rt.desk.clone())
            .with_jobs(Arc::clone(&rt.jobs))
            .with_background(Arc::clone(&rt.background))
            .with_cost_guard(Arc::clone(&rt.reloadable.guard));
    }
    gateway
}

/// The routine service of the gateway's front ends, waking the engine;
/// with an agent runtime, its agents follow a reload of `[[agents]]`.
fn routines_of(
    config: &Config,
    store: &Store,
    clock: &Arc<dyn Clock>,
    automation: &wiring::Automation,
) -> RoutineService {
    let service = wiring::routine_service(config, store, Arc::clone(clock))
        .with_wake(Arc::new(automation.engine.clone()));
    match &automation.runtime {
        Some(rt) => service.with_agent_set(rt.agent_ids.clone()),
        None => service,
    }
}

/// The gateway's component: the first run serves the socket bound at
/// start; a restart binds the same address again. Both serve `app`.
fn spawn_gateway(
    sup: &Supervisor,
    listener: TcpListener,
    addr: SocketAddr,
    app: AppSlot,
    config: &Config,
) {
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
                None => TcpListener::bind(addr)
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
}

/// The state file writer, over the header it answers (the last state is
/// written from it at shutdown).
pub(super) fn spawn_state_writer(
    sup: &Supervisor,
    config: &Config,
    gateway: Option<SocketAddr>,
    database: &str,
    clock: &Arc<dyn Clock>,
) -> Arc<StateHeader> {
    let header = Arc::new(StateHeader {
        home: config.home().to_path_buf(),
        started_at: clock.now(),
        gateway: gateway.map(|a| a.to_string()),
        database: cairn_core::config::redact_url(database),
    });
    let (writer_header, components, clock) = (
        Arc::clone(&header),
        Arc::clone(sup.components()),
        Arc::clone(clock),
    );
    sup.spawn(STATE_WRITER, move |cancel| {
        state_file::writer(
            Arc::clone(&writer_header),
            Arc::clone(&components),
            Arc::clone(&clock),
            cancel,
        )
    });
    header
}
