//! Turns and messages as rows, views, and the conversion of JSON threads.

use serde_json::{Value, json};
use uuid::Uuid;

use cairn_store::{StoreError, StoredTurn, ThreadRow, TurnRange, view_of};

use crate::fixture::Fixture;
use crate::routines::at;
use crate::sessions::thread_row;

pub fn stored(position: i64, text: &str) -> StoredTurn {
    StoredTurn {
        position,
        number: position,
        state: "completed".into(),
        started_at: at(position),
        data: json!({"number": position, "user_input": text}),
        messages: vec![
            json!({"role": "user", "content": text}),
            json!({"role": "assistant", "content": format!("re: {text}")}),
        ],
    }
}

async fn new_thread(fx: &Fixture) -> ThreadRow {
    let s = fx
        .store
        .get_or_create_session("ada", "terminal", at(0))
        .await
        .unwrap();
    let t = thread_row(s.id, None, 1);
    fx.store.create_thread(&t).await.unwrap();
    t
}

pub async fn turns_are_rows_shown_through_the_view(fx: &Fixture) {
    let mut t = new_thread(fx).await;
    let turns: Vec<StoredTurn> = (1..=3).map(|p| stored(p, &format!("m{p}"))).collect();
    t.view = view_of([3, 1, 2]);
    fx.store.save_thread(&t, &turns, &[]).await.unwrap();
    assert_eq!(
        fx.store.get_thread(t.id).await.unwrap().unwrap().view,
        t.view
    );

    let loaded = fx.store.load_turns(t.id, &t.view).await.unwrap();
    assert_eq!(
        loaded.iter().map(|t| t.position).collect::<Vec<_>>(),
        [3, 1, 2],
        "in the view's order"
    );
    assert_eq!(loaded[1], turns[0], "data and messages round-trip");
    assert_eq!(fx.store.last_turn_position(t.id).await.unwrap(), 3);

    // A view hides turns without deleting them.
    let hidden = fx
        .store
        .load_turns(t.id, &[TurnRange { first: 2, last: 2 }])
        .await
        .unwrap();
    assert_eq!(hidden.len(), 1);
    assert!(fx.store.load_turns(t.id, &[]).await.unwrap().is_empty());

    // A new turn at a taken position (another process wrote one) is refused
    // whole: neither the turn nor the view changes.
    let mut other = t.clone();
    other.view = view_of([1, 2, 3, 4]);
    let result = fx
        .store
        .save_thread(&other, &[stored(4, "fine"), stored(2, "clash")], &[])
        .await;
    assert!(matches!(result, Err(StoreError::Conflict(_))), "{result:?}");
    assert_eq!(
        fx.store.get_thread(t.id).await.unwrap().unwrap().view,
        t.view
    );
    assert_eq!(fx.store.last_turn_position(t.id).await.unwrap(), 3);
    assert_eq!(
        fx.store.load_turns(t.id, &view_of([2])).await.unwrap()[0].data["user_input"],
        "m2"
    );
}

pub async fn messages_of_a_running_turn_are_recorded_as_they_come(fx: &Fixture) {
    let mut t = new_thread(fx).await;
    let mut running = stored(1, "run the tools");
    running.state = "processing".into();
    running.messages.truncate(1);
    t.view = view_of([1]);
    fx.store
        .save_thread(&t, &[running.clone()], &[])
        .await
        .unwrap();

    // An assistant message with two calls, then the second result before the first.
    let call =
        json!({"role": "assistant", "content": "", "tool_calls": [{"id": "a"}, {"id": "b"}]});
    fx.store.put_turn_message(t.id, 1, 1, &call).await.unwrap();
    let second = json!({"role": "tool", "content": "B", "tool_call_id": "b"});
    fx.store
        .put_turn_message(t.id, 1, 3, &second)
        .await
        .unwrap();
    let loaded = fx.store.load_turns(t.id, &t.view).await.unwrap();
    assert_eq!(
        loaded[0].messages,
        vec![running.messages[0].clone(), call.clone(), second.clone()]
    );

    // Recording the same slot again replaces it; the end of the turn rewrites all.
    let first = json!({"role": "tool", "content": "A", "tool_call_id": "a"});
    fx.store.put_turn_message(t.id, 1, 2, &first).await.unwrap();
    fx.store.put_turn_message(t.id, 1, 2, &first).await.unwrap();
    let loaded = fx.store.load_turns(t.id, &t.view).await.unwrap();
    assert_eq!(
        loaded[0].messages[1..],
        [call.clone(), first.clone(), second.clone()]
    );

    let mut done = running.clone();
    done.state = "completed".into();
    done.messages = vec![
        running.messages[0].clone(),
        call,
        first,
        second,
        json!({"role": "assistant", "content": "ok"}),
    ];
    fx.store
        .save_thread(&t, &[], &[done.clone()])
        .await
        .unwrap();
    assert_eq!(
        fx.store.load_turns(t.id, &t.view).await.unwrap(),
        vec![done]
    );

    // A message for a turn that does not exist is refused.
    assert!(
        fx.store
            .put_turn_message(t.id, 9, 0, &json!({"role": "user", "content": "x"}))
            .await
            .is_err()
    );
}

pub async fn undone_turns_can_be_dropped(fx: &Fixture) {
    let mut t = new_thread(fx).await;
    let turns: Vec<StoredTurn> = (1..=4).map(|p| stored(p, "x")).collect();
    t.view = view_of([1, 2]);
    fx.store.save_thread(&t, &turns, &[]).await.unwrap();
    assert_eq!(fx.store.drop_turns_after(t.id, 2).await.unwrap(), 2);
    assert_eq!(fx.store.last_turn_position(t.id).await.unwrap(), 2);
    let all = fx
        .store
        .load_turns(t.id, &[TurnRange { first: 1, last: 9 }])
        .await
        .unwrap();
    assert_eq!(all.len(), 2);
    // Deleting the session removes turns and messages with it.
    assert!(fx.store.delete_session(t.session_id).await.unwrap());
    assert!(
        fx.store
            .load_turns(t.id, &[TurnRange { first: 1, last: 9 }])
            .await
            .unwrap()
            .is_empty()
    );
}

fn json_turn(number: i64, started: &str) -> Value {
    json!({
        "number": number, "kind": "exchange", "user_input": format!("q{number}"),
        "response": format!("a{number}"),
        "messages": [{"role": "user", "content": format!("q{number}")},
                     {"role": "assistant", "content": format!("a{number}")}],
        "tool_calls": [], "state": "completed", "started_at": started,
        "completed_at": started, "error": null,
        "usage": {"input_tokens": 1, "output_tokens": 1, "cost_micros": 0}
    })
}

/// A database as cairn 0.1 left it (threads as one JSON array, checkpoints
/// as copies of turns) is converted by migration 4: every turn becomes rows
/// once, the thread and its checkpoints keep views.
pub async fn json_threads_are_converted_to_rows(fx: &Fixture) {
    let old = fx.sibling().await;
    old.store.migrate_up_to(3).await.unwrap();
    let raw = sqlx::AnyPool::connect(&old.url).await.unwrap();
    let (session, thread) = (Uuid::new_v4().to_string(), Uuid::new_v4().to_string());
    sqlx::query("INSERT INTO sessions (id, user_id, channel, metadata, created_at, last_active_at) VALUES ($1, 'ada', 'terminal', '{}', 0, 0)")
        .bind(&session)
        .execute(&raw)
        .await
        .unwrap();
    let (t1, t2, t3) = (
        json_turn(1, "2026-11-01T10:00:00Z"),
        json_turn(2, "2026-11-01T10:01:00Z"),
        json_turn(3, "2026-11-01T10:02:00Z"),
    );
    // Turn 3 was undone: only the redo checkpoint still shows it.
    sqlx::query("INSERT INTO threads (id, session_id, title, state, turns, created_at, updated_at) VALUES ($1, $2, 'old', 'completed', $3, 0, 0)")
        .bind(&thread)
        .bind(&session)
        .bind(json!([t1, t2]).to_string())
        .execute(&raw)
        .await
        .unwrap();
    for (stack, id, turns) in [
        ("undo", "c1", json!([t1])),
        ("redo", "c3", json!([t1, t2, t3])),
    ] {
        let data = json!({"id": id, "turn_number": 2, "description": "d", "turns": turns});
        sqlx::query("INSERT INTO thread_checkpoints (thread_id, stack, position, id, data) VALUES ($1, $2, 0, $3, $4)")
            .bind(&thread)
            .bind(stack)
            .bind(id)
            .bind(data.to_string())
            .execute(&raw)
            .await
            .unwrap();
    }
    raw.close().await;

    let report = old.store.migrate().await.unwrap();
    let newer: Vec<i64> = cairn_store::MIGRATIONS
        .iter()
        .map(|m| m.version)
        .filter(|v| *v >= 4)
        .collect();
    assert_eq!(report.applied, newer, "from 4 on");
    let id: Uuid = thread.parse().unwrap();
    let row = old.store.get_thread(id).await.unwrap().unwrap();
    assert_eq!(row.view, view_of([1, 2]));
    let turns = old.store.load_turns(id, &row.view).await.unwrap();
    let mut expected = t2.clone();
    let messages = expected
        .as_object_mut()
        .unwrap()
        .remove("messages")
        .unwrap();
    assert_eq!(turns[1].data, expected);
    assert_eq!(Value::Array(turns[1].messages.clone()), messages);
    assert_eq!(
        old.store.last_turn_position(id).await.unwrap(),
        3,
        "each turn stored once"
    );
    let (undo, redo) = old.store.load_checkpoints(id).await.unwrap();
    assert_eq!(
        undo[0].data,
        json!({"id": "c1", "turn_number": 2, "description": "d", "view": [[1, 1]]})
    );
    assert_eq!(redo[0].data["view"], json!([[1, 3]]));
    let redone = old
        .store
        .load_turns(
            id,
            &serde_json::from_value::<Vec<TurnRange>>(redo[0].data["view"].clone()).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(redone[2].data["user_input"], "q3");
    old.cleanup().await;
}
