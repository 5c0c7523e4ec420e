//! Admission batches that keep the runs of unscheduled fires to write them
//! together: later fires still see them, and a taken run id is still taken.

use std::time::Duration as StdDuration;

use cairn_store::{Admission, Admitted};

use crate::admission::admit;
use crate::fixture::Fixture;
use crate::routines::{at, routine, run_for};

/// A batch keeps the runs of unscheduled fires to write them together; a
/// later fire of the batch whose guardrails read runs still sees them.
pub async fn a_batch_reads_the_runs_it_has_not_written_yet(fx: &Fixture) {
    let r = routine("ada", "deferred");
    fx.store.create_routine(&r).await.unwrap();
    let plain = Admission {
        max_concurrent: Some(10),
        global_max: Some(100),
        ..Admission::default()
    };
    let cooled = Admission {
        cooldown: Some(StdDuration::from_secs(60)),
        ..plain.clone()
    };
    let dedup = Admission {
        dedup_window: Some(StdDuration::from_secs(60)),
        ..plain.clone()
    };
    let mut keyed = run_for(&r, None, at(2));
    keyed.dedup_key = Some("same".to_string());
    let mut keyed_again = run_for(&r, None, at(3));
    keyed_again.dedup_key = Some("same".to_string());
    let fires = vec![
        (plain.clone(), vec![run_for(&r, None, at(1))]),
        (dedup.clone(), vec![keyed]),
        (dedup, vec![keyed_again]),
        (cooled, vec![run_for(&r, None, at(4))]),
        (plain, vec![run_for(&r, None, at(5))]),
    ];
    let admitted = fx.store.admit_runs(&fires).await.unwrap();
    assert_eq!(admitted[..2], [Admitted::Started, Admitted::Started]);
    assert!(
        matches!(&admitted[2], Admitted::Skipped(why) if why.starts_with("dedup_window")),
        "{:?}",
        admitted[2]
    );
    assert!(
        matches!(&admitted[3], Admitted::Skipped(why) if why.starts_with("cooldown")),
        "{:?}",
        admitted[3]
    );
    assert_eq!(admitted[4], Admitted::Started);
    let runs = fx.store.list_runs(r.id, 10).await.unwrap();
    assert_eq!(runs.len(), 5, "every fire has its run: {runs:?}");
    assert_eq!(fx.store.count_running(Some(r.id)).await.unwrap(), 3);
    let stored = fx.store.get_routine(r.id).await.unwrap().unwrap();
    assert_eq!(stored.runtime.run_count, 3);
    assert_eq!(stored.runtime.last_run_at, Some(at(5)));
}

/// A fire whose run id is taken (a fire by hand sent again with the id its
/// caller chose) records nothing, alone or in a batch, and the rest of the
/// batch is admitted as if it had not been there.
pub async fn a_fire_whose_run_id_is_taken_is_taken(fx: &Fixture) {
    let r = routine("ada", "chosen-id");
    fx.store.create_routine(&r).await.unwrap();
    let plain = Admission {
        max_concurrent: Some(10),
        ..Admission::default()
    };
    let first = run_for(&r, None, at(1));
    assert_eq!(
        admit(fx, plain.clone(), vec![first.clone()]).await,
        Admitted::Started
    );
    let mut again = first.clone();
    again.started_at = at(2);
    assert_eq!(
        admit(fx, plain.clone(), vec![again.clone()]).await,
        Admitted::Taken
    );
    let other = run_for(&r, None, at(3));
    let twice = run_for(&r, None, at(4));
    let fires = vec![
        (plain.clone(), vec![other.clone()]),
        (plain.clone(), vec![again]),
        (plain.clone(), vec![twice.clone()]),
        (plain, vec![twice.clone()]),
    ];
    let admitted = fx.store.admit_runs(&fires).await.unwrap();
    assert_eq!(
        admitted,
        [
            Admitted::Started,
            Admitted::Taken,
            Admitted::Started,
            Admitted::Taken
        ]
    );
    let runs = fx.store.list_runs(r.id, 10).await.unwrap();
    assert_eq!(runs.len(), 3, "{runs:?}");
    let kept = fx.store.get_run(first.id).await.unwrap().unwrap();
    assert_eq!(kept.started_at, at(1), "the first run is left as it was");
    let stored = fx.store.get_routine(r.id).await.unwrap().unwrap();
    assert_eq!(stored.runtime.run_count, 3);
    assert_eq!(stored.runtime.last_run_at, Some(at(4)));
    assert_eq!(fx.store.count_running(Some(r.id)).await.unwrap(), 3);
}
