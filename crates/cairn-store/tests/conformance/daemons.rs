//! Daemons recorded on the database (migration 12), and the lease ends
//! reapers sleep until.

use std::time::Duration;

use cairn_store::Backend;
use chrono::{TimeZone, Utc};

use crate::fixture::Fixture;

pub async fn a_daemon_is_recorded_listed_and_withdrawn(fx: &Fixture) {
    let s = &fx.store;
    let at = Utc.with_ymd_and_hms(2026, 11, 25, 12, 0, 0).unwrap();
    s.announce_daemon(4242, "box", "/home/ada/.cairn", at)
        .await
        .unwrap();
    let listed = s.daemons().await.unwrap();
    assert_eq!(listed.len(), 1);
    let d = &listed[0];
    assert_eq!(
        (
            d.id.as_str(),
            d.pid,
            d.host.as_str(),
            d.home.as_str(),
            d.started_at
        ),
        (s.signal_id(), 4242, "box", "/home/ada/.cairn", at)
    );
    match s.backend() {
        // The caller checks the pid on this host.
        Backend::Sqlite => assert_eq!(d.connected, None),
        // Its listening connection, named after it, is open once it listens.
        Backend::Postgres => {
            assert!(s.signal_ready(Duration::from_secs(15)).await.is_push());
            assert_eq!(s.daemons().await.unwrap()[0].connected, Some(true));
        }
    }
    // Announcing again (a restart under the same store) replaces the row.
    s.announce_daemon(4243, "box", "/home/ada/.cairn", at)
        .await
        .unwrap();
    assert_eq!(s.daemons().await.unwrap()[0].pid, 4243);
    assert!(s.withdraw_daemon(s.signal_id()).await.unwrap());
    assert!(s.daemons().await.unwrap().is_empty());
}

pub async fn no_lease_end_when_nothing_runs(fx: &Fixture) {
    assert_eq!(fx.store.earliest_run_lease_end().await.unwrap(), None);
    assert_eq!(fx.store.earliest_job_lease_end().await.unwrap(), None);
}
