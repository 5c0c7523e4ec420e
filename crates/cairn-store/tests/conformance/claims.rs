//! Claims made ahead of their slot: until the claim is begun, a pause, a
//! disable or an edit of a routine gives its run back; after, nothing does.

use cairn_core::routine::{Pause, Routine, RoutineRun, RunStatus};
use cairn_store::{Admission, Admitted, AsRead};
use uuid::Uuid;

use crate::fixture::Fixture;
use crate::routines::{at, routine, run_for};
use crate::runs::scheduled;

/// A routine due at `at(60)`, stored.
async fn due(fx: &Fixture, name: &str) -> Routine {
    let mut r = routine("ada", name);
    r.runtime.next_fire_at = Some(at(60));
    fx.store.create_routine(&r).await.unwrap();
    r
}

/// Its slot `at(60)` claimed ahead as part of `claim`.
fn ahead_of(r: &Routine, claim: Uuid) -> (Admission, Vec<RoutineRun>) {
    let run = run_for(r, Some(at(60)), at(60));
    let mut admission = scheduled(r, &run, Some(at(120)));
    if let Some(slot) = admission.slot.as_mut() {
        slot.as_read = Some(AsRead {
            updated_at: r.updated_at,
            consecutive_failures: 0,
            state: r.runtime.state.clone(),
            ahead: Some(claim),
        });
    }
    (admission, vec![run])
}

pub async fn a_claim_ahead_gives_runs_back_until_it_is_begun(fx: &Fixture) {
    let store = &fx.store;
    let (paused, disabled, edited, kept) = (
        due(fx, "paused").await,
        due(fx, "disabled").await,
        due(fx, "edited").await,
        due(fx, "kept").await,
    );
    // A routine with a run going is left to its slot.
    let busy = due(fx, "busy").await;
    store
        .start_run(&run_for(&busy, None, at(30)))
        .await
        .unwrap();
    let claim = Uuid::now_v7();
    let all = [&paused, &disabled, &edited, &kept, &busy];
    let fires: Vec<_> = all.iter().map(|r| ahead_of(r, claim)).collect();
    let rounds = store.admit_rounds(&fires).await.unwrap();
    let verdicts: Vec<_> = rounds.iter().map(|r| r.admitted.clone()).collect();
    assert_eq!(
        verdicts,
        [
            Admitted::Started,
            Admitted::Started,
            Admitted::Started,
            Admitted::Started,
            Admitted::Taken
        ]
    );
    let busy_now = store.get_routine(busy.id).await.unwrap().unwrap();
    assert_eq!(
        busy_now.runtime.next_fire_at,
        Some(at(60)),
        "left to its slot"
    );
    let ids: Vec<Uuid> = rounds.iter().flat_map(|r| &r.runs).map(|r| r.id).collect();

    // Before the claim is begun.
    let pause = Pause {
        at: at(59),
        by: "ada".into(),
        note: None,
    };
    assert!(store.pause_routine(paused.id, &pause).await.unwrap());
    assert!(
        store
            .set_routine_enabled(disabled.id, false, at(59))
            .await
            .unwrap()
    );
    let mut changed = store.get_routine(edited.id).await.unwrap().unwrap();
    changed.spec.description = "changed".into();
    changed.updated_at = at(59);
    store.update_routine(&changed).await.unwrap();
    // The edit kept the slot the claim had moved: the slot goes back too,
    // to run as edited.
    for r in [&paused, &disabled, &edited] {
        assert!(
            store.list_runs(r.id, 10).await.unwrap().is_empty(),
            "{}",
            r.spec.name
        );
        let now = store.get_routine(r.id).await.unwrap().unwrap();
        assert_eq!(now.runtime.run_count, 0, "{}", r.spec.name);
        assert_eq!(now.runtime.next_fire_at, Some(at(60)), "{}", r.spec.name);
    }
    let disabled_now = store.get_routine(disabled.id).await.unwrap().unwrap();
    assert!(!disabled_now.spec.enabled);

    // Begun: three given back; after it a pause leaves the run alone.
    assert_eq!(store.begin_claim(claim, at(60)).await.unwrap(), Some(3));
    let left = store.still_running(&ids).await.unwrap();
    assert_eq!(left.len(), 1);
    assert!(left.contains(&rounds[3].runs[0].id));
    assert!(store.pause_routine(kept.id, &pause).await.unwrap());
    let runs = store.list_runs(kept.id, 10).await.unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].status, RunStatus::Running);
    let kept_now = store.get_routine(kept.id).await.unwrap().unwrap();
    assert_eq!(kept_now.runtime.next_fire_at, Some(at(120)));
    assert_eq!(
        store.begin_claim(claim, at(60)).await.unwrap(),
        None,
        "begun once"
    );
}
