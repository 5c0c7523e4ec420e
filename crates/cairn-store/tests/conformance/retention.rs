//! Retention: a routine keeps its newest runs, in `(started_at, id)` order;
//! a run still running or waiting keeps its place and is never deleted.

use cairn_core::routine::RunStatus;
use cairn_store::{Admission, Admitted, EncodedEnd, FinishRun};

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

/// Ends written without their routine's prune (a burst's) are pruned by a
/// later batch that names the routines, whether or not it ends a run of
/// theirs; a routine in both is pruned once, to the batch's own retention.
pub async fn a_later_batch_prunes_the_routines_named_to_it(fx: &Fixture) {
    let apart = routine("ada", "apart");
    let inside = routine("ada", "inside");
    let mut ends = Vec::new();
    for r in [&apart, &inside] {
        fx.store.create_routine(r).await.unwrap();
        for started in 0..4 {
            let run = run_for(r, None, at(started));
            assert_eq!(
                admit(fx, Admission::default(), vec![run.clone()]).await,
                Admitted::Started
            );
            ends.push(FinishRun {
                run_id: run.id,
                routine_id: r.id,
                outcome: ended(RunStatus::Ok, 10),
                notification: None,
                auto_pause: None,
            });
        }
    }
    // All but the last run of `inside` end with no retention applied.
    let last = ends.pop().unwrap();
    fx.store.finish_runs(&ends).await.unwrap();
    assert_eq!(fx.store.list_runs(apart.id, 10).await.unwrap().len(), 4);
    let mut last = last;
    last.outcome.retain = Some(2);
    let done = fx
        .store
        .finish_encoded(
            &[EncodedEnd::new(last).unwrap()],
            &[(apart.id, 1), (inside.id, 3)],
        )
        .await
        .unwrap();
    assert!(done[0].ended);
    assert_eq!(fx.store.list_runs(apart.id, 10).await.unwrap().len(), 1);
    assert_eq!(fx.store.list_runs(inside.id, 10).await.unwrap().len(), 2);
}
