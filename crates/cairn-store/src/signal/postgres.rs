//! PostgreSQL: `LISTEN cairn_changes` (or the store's schema's own
//! channel) on a dedicated connection (sqlx's
//! `PgListener`, through the postgres driver directly: the `Any` driver
//! has no listener). A lost connection is re-established with backoff, and
//! every waiter is then woken once: notifications sent while it was down
//! are gone, so everyone re-reads (a full resync).

use std::str::FromStr;
use std::sync::Weak;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use tokio::sync::watch;

use super::{Hub, SignalMode, Topic, pg_channel_sql};

const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

pub(super) async fn listen(hub: Weak<Hub>, url: String, mut stop: watch::Receiver<bool>) {
    let options = match PgConnectOptions::from_str(&url) {
        Ok(o) => o,
        Err(e) => {
            tracing::error!(error = %e, "change signal: the database URL does not parse; other processes' changes will not be heard");
            return;
        }
    };
    let mut backoff = FIRST_BACKOFF;
    loop {
        let Some(label) = hub.upgrade().map(|h| h.label()) else {
            return;
        };
        let connecting = connect(&options, &label);
        let mut listener = tokio::select! {
            _ = stop.changed() => return,
            result = connecting => match result {
                Ok(l) => l,
                Err(e) => {
                    let error = e.to_string();
                    tracing::warn!(%error, retry_ms = backoff.as_millis() as u64, "change signal: cannot listen on PostgreSQL; retrying");
                    set_mode(&hub, SignalMode::Reconnecting { error });
                    tokio::select! {
                        _ = stop.changed() => return,
                        () = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                    continue;
                }
            }
        };
        backoff = FIRST_BACKOFF;
        let Some(h) = hub.upgrade() else { return };
        if matches!(*h.mode.borrow(), SignalMode::Reconnecting { .. }) {
            tracing::info!("change signal: listening on PostgreSQL again; every waiter re-reads");
        }
        // Whatever was sent before we listened (or while we were away) is
        // lost: everyone re-reads, before `signal_ready` hears we listen.
        h.wake_all();
        h.set_mode(SignalMode::Listening);
        let relabels = std::sync::Arc::clone(&h.relabel);
        drop(h);
        let relabel = relabels.notified();
        tokio::pin!(relabel);
        loop {
            tokio::select! {
                _ = stop.changed() => return,
                () = &mut relabel => break,
                received = listener.try_recv() => match received {
                    Ok(Some(n)) => {
                        let Some(h) = hub.upgrade() else { return };
                        deliver(&h, n.payload());
                    }
                    Ok(None) => {
                        // Lost and re-established by the listener itself.
                        tracing::info!("change signal: the PostgreSQL listener reconnected; every waiter re-reads");
                        let Some(h) = hub.upgrade() else { return };
                        h.wake_all();
                    }
                    Err(e) => {
                        let error = e.to_string();
                        tracing::warn!(%error, "change signal: lost the PostgreSQL listener; reconnecting");
                        set_mode(&hub, SignalMode::Reconnecting { error });
                        break;
                    }
                }
            }
        }
    }
}

async fn connect(options: &PgConnectOptions, label: &str) -> Result<PgListener, sqlx::Error> {
    // A pool of one, so the listener can re-establish its own connection.
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .min_connections(0)
        .idle_timeout(None)
        .max_lifetime(None)
        .acquire_timeout(Duration::from_secs(10))
        .connect_lazy_with(options.clone().application_name(label));
    let mut listener = PgListener::connect_with(&pool).await?;
    let channel: String = sqlx::query_scalar(concat!("SELECT ", pg_channel_sql!()))
        .fetch_one(&mut listener)
        .await?;
    listener.listen(&channel).await?;
    Ok(listener)
}

/// Wakes the topic a notification names, unless this store sent it (its
/// waiters were woken at its commit).
fn deliver(hub: &Hub, payload: &str) {
    let Some((sender, topic)) = payload.split_once(' ') else {
        hub.wake_all();
        return;
    };
    if sender == hub.id() {
        return;
    }
    match Topic::parse(topic) {
        Some(topic) => hub.wake(topic),
        None => hub.wake_all(),
    }
}

fn set_mode(hub: &Weak<Hub>, mode: SignalMode) {
    if let Some(hub) = hub.upgrade() {
        hub.set_mode(mode);
    }
}
