//! Sessions, threads and checkpoints.

use std::sync::Arc;

use serde_json::json;
use uuid::Uuid;

use cairn_store::{CheckpointRow, Store, StoreError, ThreadRow, TurnRange};

use crate::fixture::Fixture;
use crate::routines::at;

pub fn thread_row(session_id: Uuid, external: Option<&str>, secs: i64) -> ThreadRow {
    ThreadRow {
        id: Uuid::now_v7(),
        session_id,
        external_id: external.map(str::to_string),
        title: None,
        state: "idle".into(),
        view: vec![],
        created_at: at(secs),
        updated_at: at(secs),
    }
}

pub fn checkpoint(n: usize) -> CheckpointRow {
    CheckpointRow {
        id: format!("c{n}"),
        data: json!({"n": n}),
    }
}

pub async fn concurrent_first_messages_create_one_session(fx: &Fixture) {
    let mut stores = vec![fx.store.clone()];
    for _ in 0..3 {
        stores.push(Store::connect(&fx.url).await.unwrap());
    }
    let stores = Arc::new(stores);
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..16 {
        let stores = Arc::clone(&stores);
        tasks.spawn(async move {
            stores[i % 4]
                .get_or_create_session("ada", "terminal", at(i as i64))
                .await
                .unwrap()
                .id
        });
    }
    let ids = tasks.join_all().await;
    assert!(ids.iter().all(|id| *id == ids[0]), "{ids:?}");
    assert_eq!(fx.store.list_sessions().await.unwrap().len(), 1);
    // Another channel is another session.
    let other = fx
        .store
        .get_or_create_session("ada", "ws", at(1))
        .await
        .unwrap();
    assert_ne!(other.id, ids[0]);
    assert!(fx.store.session_exists("ada", "ws").await.unwrap());
    assert!(
        !fx.store
            .session_exists("ada", "slack:T1:C1:1.2")
            .await
            .unwrap()
    );
    assert!(!fx.store.session_exists("bob", "ws").await.unwrap());
    for s in &stores[1..] {
        s.close().await;
    }
}

pub async fn session_updates_persist(fx: &Fixture) {
    let mut s = fx
        .store
        .get_or_create_session("ada", "terminal", at(0))
        .await
        .unwrap();
    assert_eq!(s.active_thread_id, None);
    let t = thread_row(s.id, None, 1);
    fx.store.create_thread(&t).await.unwrap();
    s.active_thread_id = Some(t.id);
    s.metadata = json!({"always": ["file_write"]});
    s.last_active_at = at(50);
    fx.store.update_session(&s).await.unwrap();
    let again = fx
        .store
        .get_or_create_session("ada", "terminal", at(99))
        .await
        .unwrap();
    assert_eq!(again, s, "an existing session is returned unchanged");
    let mut ghost = s.clone();
    ghost.id = Uuid::now_v7();
    assert!(matches!(
        fx.store.update_session(&ghost).await,
        Err(StoreError::NotFound { .. })
    ));
}

pub async fn threads_round_trip(fx: &Fixture) {
    let s = fx
        .store
        .get_or_create_session("ada", "terminal", at(0))
        .await
        .unwrap();
    let mut t = thread_row(s.id, Some("ext-1"), 1);
    fx.store.create_thread(&t).await.unwrap();
    t.title = Some("groceries".into());
    t.state = "completed".into();
    t.view = vec![TurnRange { first: 1, last: 2 }];
    t.updated_at = at(5);
    fx.store.save_thread(&t, &[], &[]).await.unwrap();
    assert_eq!(fx.store.get_thread(t.id).await.unwrap().as_ref(), Some(&t));
    assert_eq!(
        fx.store.find_thread(s.id, "ext-1").await.unwrap().as_ref(),
        Some(&t)
    );
    assert_eq!(fx.store.find_thread(s.id, "ext-2").await.unwrap(), None);

    // External ids are unique per session; threads without one never collide.
    assert!(matches!(
        fx.store
            .create_thread(&thread_row(s.id, Some("ext-1"), 2))
            .await,
        Err(StoreError::Conflict(_))
    ));
    fx.store
        .create_thread(&thread_row(s.id, None, 3))
        .await
        .unwrap();
    fx.store
        .create_thread(&thread_row(s.id, None, 4))
        .await
        .unwrap();
    // The same external id in another session (another channel) is another thread.
    let other = fx
        .store
        .get_or_create_session("ada", "ws", at(0))
        .await
        .unwrap();
    fx.store
        .create_thread(&thread_row(other.id, Some("ext-1"), 2))
        .await
        .unwrap();

    let listed = fx.store.list_threads(s.id).await.unwrap();
    assert_eq!(listed.len(), 3);
    assert_eq!(listed[0].id, t.id, "most recently changed first");
    assert_eq!(listed[0].title.as_deref(), Some("groceries"));
}

pub async fn checkpoints_push_trim_and_replace(fx: &Fixture) {
    let s = fx
        .store
        .get_or_create_session("ada", "terminal", at(0))
        .await
        .unwrap();
    let t = thread_row(s.id, None, 1);
    fx.store.create_thread(&t).await.unwrap();
    for n in 0..5 {
        fx.store
            .push_checkpoint(t.id, &checkpoint(n), 3)
            .await
            .unwrap();
    }
    let (undo, redo) = fx.store.load_checkpoints(t.id).await.unwrap();
    assert_eq!(
        undo.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(),
        ["c2", "c3", "c4"]
    );
    assert!(redo.is_empty());

    fx.store
        .replace_checkpoints(t.id, &[checkpoint(2)], &[checkpoint(4), checkpoint(3)])
        .await
        .unwrap();
    let (undo, redo) = fx.store.load_checkpoints(t.id).await.unwrap();
    assert_eq!(undo, vec![checkpoint(2)]);
    assert_eq!(redo, vec![checkpoint(4), checkpoint(3)]);

    // A new checkpoint clears the redo stack.
    fx.store
        .push_checkpoint(t.id, &checkpoint(9), 3)
        .await
        .unwrap();
    let (undo, redo) = fx.store.load_checkpoints(t.id).await.unwrap();
    assert_eq!(undo, vec![checkpoint(2), checkpoint(9)]);
    assert!(redo.is_empty());
}

pub async fn deleting_a_session_removes_its_threads(fx: &Fixture) {
    let s = fx
        .store
        .get_or_create_session("ada", "terminal", at(0))
        .await
        .unwrap();
    let t = thread_row(s.id, None, 1);
    fx.store.create_thread(&t).await.unwrap();
    fx.store
        .push_checkpoint(t.id, &checkpoint(1), 20)
        .await
        .unwrap();
    assert!(fx.store.delete_session(s.id).await.unwrap());
    assert_eq!(fx.store.get_thread(t.id).await.unwrap(), None);
    assert_eq!(
        fx.store.load_checkpoints(t.id).await.unwrap(),
        (vec![], vec![])
    );
    assert!(!fx.store.delete_session(s.id).await.unwrap());
}

/// Two writers pushing onto one thread at once (two `cairn chat` on one
/// PostgreSQL database) each get their own position.
pub async fn concurrent_checkpoint_pushes_take_distinct_positions(fx: &Fixture) {
    let s = fx
        .store
        .get_or_create_session("ada", "terminal", at(0))
        .await
        .unwrap();
    let t = thread_row(s.id, None, 1);
    fx.store.create_thread(&t).await.unwrap();
    let mut pushes = tokio::task::JoinSet::new();
    for n in 0..20 {
        let store = fx.store.clone();
        pushes.spawn(async move { store.push_checkpoint(t.id, &checkpoint(n), 100).await });
    }
    while let Some(result) = pushes.join_next().await {
        result.unwrap().unwrap();
    }
    let (undo, _) = fx.store.load_checkpoints(t.id).await.unwrap();
    assert_eq!(undo.len(), 20);
}
