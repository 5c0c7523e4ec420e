//! `cairn daemon`: the always-on half in the foreground. The routine engine
//! fires routines, the dispatcher delivers notifications, the gateway serves
//! the HTTP API, idle chat sessions are pruned; SIGINT or SIGTERM stops it
//! gracefully (running routine runs get a deadline, then are recorded
//! `interrupted`).

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use cairn_automation::notify::{Dispatcher, owner_id};
use cairn_core::clock::{Clock, SystemClock};
use cairn_gateway::{ComponentState, Components, Gateway};
use cairn_store::Store;
use secrecy::ExposeSecret;
use tokio_util::sync::CancellationToken;

use crate::cli::DaemonArgs;
use crate::exit::BadInput;
use crate::{settings, wiring};

/// Component names, as `/readyz` and `/api/status` show them.
const ENGINE: &str = "routine_engine";
const DISPATCHER: &str = "notification_dispatcher";
const GATEWAY: &str = "gateway";

/// How often the dispatcher re-reads the outbox when nothing woke it (a
/// notification recorded by another process).
const OUTBOX_RECHECK: Duration = Duration::from_secs(30);

/// Runs until a stop signal.
pub fn run(args: &DaemonArgs) -> anyhow::Result<ExitCode> {
    let mut config = settings::load()?;
    if let Some(port) = args.port {
        config.gateway.port = port;
    }
    super::runtime()?.block_on(async {
        // Bound first: a taken port is reported before anything starts.
        let listener = if config.gateway.enabled {
            Some(
                cairn_gateway::bind(&config.gateway)
                    .await
                    .map_err(|e| BadInput(e.to_string()))?,
            )
        } else {
            None
        };
        let url = config.database_url.expose_secret();
        let (store, report) = Store::open(url)
            .await
            .context("cannot open the database")?;
        if !report.applied.is_empty() {
            tracing::info!(migrations = ?report.applied, "database migrated");
        }
        let automation = wiring::automation(&config, &store).await?;
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
        // Prunes idle sessions for as long as the daemon runs.
        let chat = automation
            .runtime
            .as_ref()
            .map(|rt| wiring::chat_service(&config, rt));
        let cancel = CancellationToken::new();
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let components = Arc::new(Components::new());
        let dispatcher = Dispatcher::new(automation.notifier.clone(), owner_id());
        let delivering = tokio::spawn({
            let (clock, cancel) = (Arc::clone(&clock), cancel.clone());
            async move { dispatcher.run(clock, cancel, OUTBOX_RECHECK).await }
        });
        let forwarding = automation.engine.forward_events(
            automation.runtime.as_ref().map(|rt| rt.jobs.subscribe_finished()),
            Some(automation.notifier.subscribe_given_up()),
            cancel.clone(),
        );
        let engine = automation.engine.clone();
        let firing = if config.routines.enabled {
            let cancel = cancel.clone();
            components.set(ENGINE, ComponentState::Running, clock.now(), None);
            Some(tokio::spawn(async move { engine.run(cancel).await }))
        } else {
            tracing::warn!("routines.enabled is false: no routine will fire");
            components.set(ENGINE, ComponentState::Disabled, clock.now(), None);
            None
        };
        components.set(DISPATCHER, ComponentState::Running, clock.now(), None);
        let serving = match listener {
            Some(listener) => {
                let addr = listener.local_addr().context("the gateway's address")?;
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
                .with_notifier(automation.notifier.clone())
                .with_components(Arc::clone(&components))
                .with_shutdown(cancel.clone());
                if let (Some(chat), Some(rt)) = (&chat, &automation.runtime) {
                    gateway = gateway
                        .with_chat(Arc::clone(chat), rt.providers.main.model())
                        .with_jobs(Arc::clone(&rt.jobs))
                        .with_background(Arc::clone(&rt.background));
                }
                let gateway = Arc::new(gateway);
                // Routine runs, jobs and notifications flow into /api/events.
                gateway.spawn_event_feeds();
                let app = cairn_gateway::router(gateway);
                components.set(GATEWAY, ComponentState::Running, clock.now(), None);
                eprintln!("gateway listening on http://{addr}");
                match cairn_gateway::auth::issue_pairing_code(&store, clock.now()).await {
                    Ok(code) => eprintln!("{}", super::token::pairing_line(&code)),
                    Err(e) => tracing::warn!(error = %e, "cannot record a pairing code"),
                }
                let cancel = cancel.clone();
                Some(tokio::spawn(async move {
                    cairn_gateway::serve(listener, app, cancel).await
                }))
            }
            None => {
                components.set(GATEWAY, ComponentState::Disabled, clock.now(), None);
                None
            }
        };
        let routines = store.list_routines(None).await?;
        let enabled = routines.iter().filter(|r| r.spec.enabled).count();
        eprintln!(
            "cairn daemon running (pid {}): {} routine(s), {enabled} enabled; database {}; stop with Ctrl-C or SIGTERM",
            std::process::id(),
            routines.len(),
            cairn_core::config::redact_url(url),
        );
        let signal = stop_signal().await;
        eprintln!("{signal}: stopping");
        cancel.cancel();
        if let Some(firing) = firing {
            firing.await.ok();
        }
        delivering.await.ok();
        forwarding.await.ok();
        if let Some(serving) = serving {
            match serving.await {
                Ok(Err(e)) => tracing::error!(error = %e, "the gateway stopped with an error"),
                Err(e) => tracing::error!(error = %e, "the gateway task failed"),
                Ok(Ok(())) => {}
            }
        }
        if let Some(rt) = &automation.runtime {
            rt.jobs.shutdown().await;
            rt.background.shutdown().await;
        }
        store.close().await;
        eprintln!("cairn daemon stopped");
        Ok(ExitCode::SUCCESS)
    })
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
