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

/// An admission tells the engines (`Topic::Runs`) when a lease it records is
/// the earliest among running runs, which their reapers sleep until, and
/// not for one later than a lease already running: a reaper wakes at the
/// earliest and reads the next then.
pub async fn an_admission_tells_of_a_lease_only_when_it_is_the_earliest(fx: &Fixture) {
    use cairn_store::{Admission, Topic};

    use crate::routines::{at, routine, run_for};

    // The listener's start wakes every topic once: let it pass first.
    fx.store.signal_ready(Duration::from_secs(15)).await;
    let r = routine("ada", "hook");
    fx.store.create_routine(&r).await.unwrap();
    let r = &r;
    let admit = |started| async move {
        let runs = vec![run_for(r, None, at(started))];
        fx.store
            .admit_runs(&[(Admission::default(), runs)])
            .await
            .unwrap();
    };
    let told = fx.store.watch(Topic::Runs);
    admit(10).await;
    assert!(told.has_changed(), "the first lease is the earliest");
    let told = fx.store.watch(Topic::Runs);
    admit(20).await;
    assert!(!told.has_changed(), "a later lease than one running");
    assert_eq!(
        fx.store.earliest_run_lease_end().await.unwrap(),
        Some(at(10) + chrono::Duration::seconds(60))
    );
    // An earlier one (another process's shorter lease, say) is news.
    admit(5).await;
    assert!(told.has_changed(), "an earlier lease than any running");
}
