//! What persisting one chat turn costs in a 5-, 50- and 500-turn thread, on
//! SQLite: wall time and bytes written (the process's `wchar`), doing the
//! writes a chat turn does — an undo checkpoint, the turn stored with the
//! person's message before the model is called, the answer recorded, the
//! turn finished. It should cost the same whatever the thread's length.
//! Prints JSON. Run: `cargo bench -p cairn-store --bench persist_turn`
//! (figures, when recorded, in docs/performance.md).
#![expect(clippy::unwrap_used, reason = "benchmark set-up unwraps freely")]
#![expect(
    clippy::disallowed_methods,
    reason = "a benchmark reads /proc between timed sections"
)]

use std::time::Instant;

use cairn_store::{CheckpointRow, Store, StoredTurn, ThreadRow, view_of};
use chrono::Utc;
use serde_json::{Value, json};
use uuid::Uuid;

fn turn(position: i64, state: &str, messages: usize) -> StoredTurn {
    let all = [
        json!({"role": "user", "content": "x".repeat(200)}),
        json!({"role": "assistant", "content": "y".repeat(600)}),
    ];
    StoredTurn {
        position,
        number: position,
        state: state.into(),
        started_at: Utc::now(),
        data: json!({"number": position, "kind": "exchange", "user_input": "x".repeat(200),
            "response": "y".repeat(600), "tool_calls": [], "state": state,
            "started_at": Utc::now(), "completed_at": Utc::now(), "error": null,
            "usage": {"input_tokens": 10, "output_tokens": 10, "cost_micros": 0}}),
        messages: all[..messages].to_vec(),
    }
}

/// Bytes this process has handed to `write(2)` so far.
fn written() -> u64 {
    let io = std::fs::read_to_string("/proc/self/io").unwrap();
    let line = io.lines().find(|l| l.starts_with("wchar:")).unwrap();
    line["wchar:".len()..].trim().parse().unwrap()
}

#[tokio::main]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let mut out = Vec::new();
    for n in [5i64, 50, 500] {
        let url = format!("sqlite://{}/b{n}.db", dir.path().display());
        let (store, _) = Store::open(&url).await.unwrap();
        let mut session = store
            .get_or_create_session("u", "c", Utc::now())
            .await
            .unwrap();
        let mut row = ThreadRow {
            id: Uuid::new_v4(),
            session_id: session.id,
            external_id: None,
            title: None,
            state: "completed".into(),
            view: view_of(1..=n),
            created_at: Utc::now(),
            updated_at: Utc::now(),
        };
        store.create_thread(&row).await.unwrap();
        let existing: Vec<StoredTurn> = (1..=n).map(|p| turn(p, "completed", 2)).collect();
        store.save_thread(&row, &existing, &[]).await.unwrap();

        let reps = 20;
        let (w0, t0) = (written(), Instant::now());
        for r in 0..reps {
            let position = n + 1 + r;
            let checkpoint = CheckpointRow {
                id: Uuid::now_v7().to_string(),
                data: json!({"id": "c", "turn_number": position, "description": "d", "view": row.view}),
            };
            store
                .push_checkpoint(row.id, &checkpoint, 20)
                .await
                .unwrap();
            store.drop_turns_after(row.id, position - 1).await.unwrap();
            // Keep the thread at n turns shown, as the "before" figures did.
            row.view = view_of((position - n + 1)..=position);
            store
                .save_thread(&row, &[turn(position, "processing", 1)], &[])
                .await
                .unwrap();
            session.last_active_at = Utc::now();
            store.update_session(&session).await.unwrap();
            let answer: Value = json!({"role": "assistant", "content": "y".repeat(600)});
            store
                .put_turn_message(row.id, position, 1, &answer)
                .await
                .unwrap();
            store
                .save_thread(&row, &[], &[turn(position, "completed", 2)])
                .await
                .unwrap();
            store.update_session(&session).await.unwrap();
        }
        let micros = t0.elapsed().as_micros() as f64 / reps as f64;
        let bytes = (written() - w0) / reps as u64;
        out.push(json!({"turns_in_thread": n, "micros_per_turn": micros.round(), "bytes_written_per_turn": bytes}));
    }
    println!(
        "{}",
        serde_json::to_string_pretty(&json!({"persist_one_turn": out})).unwrap()
    );
}
