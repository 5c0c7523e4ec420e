//! Retention: a routine keeps its newest runs, in `(started_at, id)` order;
//! a run still running or waiting keeps its place and is never deleted.

use cairn_core::routine::RunStatus;
use cairn_store::{Admission, Admitted};

use crate::admission::{admit, ended};
use crate::fixture::Fixture;
use crate::routines::{at, routine, run_for};

/// The places past the newest `keep` are counted over every run, ended or
/// not; of those, only the ended ones go. Two runs started in the same
/// microsecond are told apart by id, the larger one the newer.
pub async fn retention_keeps_places_in_start_then_id_order(fx: &Fixture) {
    let r = routine("ada", "kept");
    fx.store.create_routine(&r).await.unwrap();
    let mut runs = Vec::new();
    for started in [0, 10, 20, 30, 40, 40] {
        let run = run_for(&r, None, at(started));
        assert_eq!(
            admit(fx, Admission::default(), vec![run.clone()]).await,
            Admitted::Started
        );
        runs.push(run.id);
    }
    // The second oldest stays running; the rest end.
    for (i, id) in runs.iter().enumerate() {
        if i != 1 {
            let done = ended(RunStatus::Ok, 50);
            assert!(fx.store.finish_run(*id, &done).await.unwrap());
        }
    }
    let (older_tie, newer_tie) = if runs[4] < runs[5] {
        (runs[4], runs[5])
    } else {
        (runs[5], runs[4])
    };
    let left = |keep: &[uuid::Uuid]| {
        let mut keep = keep.to_vec();
        keep.sort();
        keep
    };
    let stored = || async {
        let mut ids: Vec<_> = fx
            .store
            .list_runs(r.id, 10)
            .await
            .unwrap()
            .iter()
            .map(|run| run.id)
            .collect();
        ids.sort();
        ids
    };
    // Newest three: both of 40 and the one of 30. Past them: 20 (ended,
    // deleted), 10 (running, kept), 0 (ended, deleted).
    assert_eq!(fx.store.prune_runs(r.id, 3).await.unwrap(), 2);
    assert_eq!(
        stored().await,
        left(&[runs[1], runs[3], older_tie, newer_tie])
    );
    // Nothing more past three.
    assert_eq!(fx.store.prune_runs(r.id, 3).await.unwrap(), 0);
    // Newest one: the tie's larger id. The other of 40 and 30 go; the
    // running one stays.
    assert_eq!(fx.store.prune_runs(r.id, 1).await.unwrap(), 2);
    assert_eq!(stored().await, left(&[runs[1], newer_tie]));
}
