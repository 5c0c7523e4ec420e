//! A thread's turns and messages, one row each.
//!
//! Every turn has a `position` in its thread that is never reused; a thread
//! shows the turns its `view` lists (ranges of positions), so undo, `/clear`
//! and compaction change a short list instead of rewriting history, and
//! persisting a turn writes only that turn. A turn in progress is a row from
//! its first moment; its messages are added as they happen.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sqlx::Row;
use sqlx::any::AnyRow;
use uuid::Uuid;

use crate::codec::{Cols, json, micros};
use crate::exec::Conn;
use crate::{Store, StoreError};

/// Consecutive turn positions `first..=last` that a thread shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "[i64; 2]", into = "[i64; 2]")]
pub struct TurnRange {
    /// The first position shown.
    pub first: i64,
    /// The last position shown.
    pub last: i64,
}

impl From<[i64; 2]> for TurnRange {
    fn from([first, last]: [i64; 2]) -> Self {
        TurnRange { first, last }
    }
}

impl From<TurnRange> for [i64; 2] {
    fn from(r: TurnRange) -> Self {
        [r.first, r.last]
    }
}

/// The view of turns at these positions, in this order: consecutive
/// ascending positions share one range, so a plain thread is one range.
pub fn view_of(positions: impl IntoIterator<Item = i64>) -> Vec<TurnRange> {
    let mut view: Vec<TurnRange> = Vec::new();
    for p in positions {
        match view.last_mut() {
            Some(r) if r.last.checked_add(1) == Some(p) => r.last = p,
            _ => view.push(TurnRange { first: p, last: p }),
        }
    }
    view
}

/// The positions a view shows, in order.
pub fn positions_of(view: &[TurnRange]) -> impl Iterator<Item = i64> + '_ {
    view.iter().flat_map(|r| r.first..=r.last)
}

/// One stored turn with its messages.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredTurn {
    /// Its place in the thread (never reused).
    pub position: i64,
    /// The turn number shown to the person.
    pub number: i64,
    /// Turn state name.
    pub state: String,
    /// When it started.
    pub started_at: DateTime<Utc>,
    /// The turn without its messages, as the agent serialized it.
    pub data: Value,
    /// Its messages in order, as the agent serialized them (with `role` and `content`).
    pub messages: Vec<Value>,
}

const TURN_COLUMNS: &str = "position, number, state, data, started_at";

fn turn(row: &AnyRow) -> Result<StoredTurn, StoreError> {
    let c = Cols(row);
    Ok(StoredTurn {
        position: c.int("position")?,
        number: c.int("number")?,
        state: c.text("state")?,
        started_at: c.time("started_at")?,
        data: c.json("data")?,
        messages: Vec::new(),
    })
}

/// Writes a turn and all its messages: a new one (`insert`; a taken
/// position is a unique violation), or replacing what the turn had.
pub(crate) async fn write_turn(
    conn: &mut Conn,
    thread_id: Uuid,
    turn: &StoredTurn,
    insert: bool,
) -> Result<(), StoreError> {
    let thread = thread_id.to_string();
    let sql = if insert {
        "INSERT INTO thread_turns (thread_id, position, number, state, data, started_at) \
         VALUES ($1, $2, $3, $4, $5, $6)"
    } else {
        "INSERT INTO thread_turns (thread_id, position, number, state, data, started_at) \
         VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (thread_id, position) DO UPDATE SET \
         number = excluded.number, state = excluded.state, data = excluded.data, started_at = excluded.started_at"
    };
    sqlx::query(sql)
        .bind(&thread)
        .bind(turn.position)
        .bind(turn.number)
        .bind(&turn.state)
        .bind(json(&turn.data, "turn")?)
        .bind(micros(turn.started_at))
        .execute(&mut *conn)
        .await?;
    sqlx::query("DELETE FROM thread_messages WHERE thread_id = $1 AND position = $2")
        .bind(&thread)
        .bind(turn.position)
        .execute(&mut *conn)
        .await?;
    for (seq, message) in turn.messages.iter().enumerate() {
        let seq = i64::try_from(seq).unwrap_or(i64::MAX);
        write_message(conn, &thread, turn.position, seq, message).await?;
    }
    Ok(())
}

async fn write_message(
    conn: &mut Conn,
    thread: &str,
    position: i64,
    seq: i64,
    message: &Value,
) -> Result<(), StoreError> {
    let field = |name: &str| message.get(name).and_then(Value::as_str).unwrap_or("");
    sqlx::query(
        "INSERT INTO thread_messages (thread_id, position, seq, role, content, data) \
         VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (thread_id, position, seq) DO UPDATE SET \
         role = excluded.role, content = excluded.content, data = excluded.data",
    )
    .bind(thread)
    .bind(position)
    .bind(seq)
    .bind(field("role"))
    .bind(field("content"))
    .bind(json(message, "message")?)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

#[cairn_store_macros::on_store_runtime]
impl Store {
    /// Records one message of a turn in progress at `seq` (its index among
    /// the turn's messages), replacing one already there. The turn must exist.
    pub async fn put_turn_message(
        &self,
        thread_id: Uuid,
        position: i64,
        seq: i64,
        message: &Value,
    ) -> Result<(), StoreError> {
        let mut conn = self.pool().acquire().await?;
        write_message(&mut *conn, &thread_id.to_string(), position, seq, message).await
    }

    /// The turns of `view`, in the view's order, each with its messages.
    /// Positions with no stored turn are skipped.
    pub async fn load_turns(
        &self,
        thread_id: Uuid,
        view: &[TurnRange],
    ) -> Result<Vec<StoredTurn>, StoreError> {
        let thread = thread_id.to_string();
        let mut turns = Vec::new();
        for range in view {
            let sql = format!(
                "SELECT {TURN_COLUMNS} FROM thread_turns WHERE thread_id = $1 AND position BETWEEN $2 AND $3 ORDER BY position"
            );
            let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(&thread)
                .bind(range.first)
                .bind(range.last)
                .fetch_all(self.pool())
                .await?;
            let start = turns.len();
            for row in &rows {
                turns.push(turn(row)?);
            }
            let messages = sqlx::query(
                "SELECT position, data FROM thread_messages WHERE thread_id = $1 AND position BETWEEN $2 AND $3 ORDER BY position, seq",
            )
            .bind(&thread)
            .bind(range.first)
            .bind(range.last)
            .fetch_all(self.pool())
            .await?;
            let mut slot = start;
            for row in &messages {
                let c = Cols(row);
                let position = c.int("position")?;
                while turns.get(slot).is_some_and(|t| t.position < position) {
                    slot += 1;
                }
                if let Some(t) = turns.get_mut(slot).filter(|t| t.position == position) {
                    t.messages.push(c.json("data")?);
                }
            }
        }
        Ok(turns)
    }

    /// The highest turn position a thread has used (0 when none).
    pub async fn last_turn_position(&self, thread_id: Uuid) -> Result<i64, StoreError> {
        let top: Option<i64> =
            sqlx::query("SELECT MAX(position) AS top FROM thread_turns WHERE thread_id = $1")
                .bind(thread_id.to_string())
                .fetch_one(self.pool())
                .await?
                .try_get("top")?;
        Ok(top.unwrap_or(0))
    }

    /// Deletes a thread's turns after `position`: turns that were undone and
    /// that no checkpoint can bring back. Returns how many went.
    pub async fn drop_turns_after(
        &self,
        thread_id: Uuid,
        position: i64,
    ) -> Result<u64, StoreError> {
        let done = sqlx::query("DELETE FROM thread_turns WHERE thread_id = $1 AND position > $2")
            .bind(thread_id.to_string())
            .bind(position)
            .execute(self.pool())
            .await?;
        Ok(done.rows_affected())
    }
}

/// Migration 4's conversion: threads kept as one JSON array of turns (and
/// checkpoints holding copies of them) become turn and message rows, views,
/// and checkpoints holding views. Turns are matched by number and start
/// time, so a turn both in the thread and in checkpoints is stored once.
pub(crate) async fn convert_json_threads(conn: &mut Conn) -> Result<(), StoreError> {
    let threads = sqlx::query("SELECT id, turns FROM threads WHERE turns <> '[]'")
        .fetch_all(&mut *conn)
        .await?;
    for row in &threads {
        let c = Cols(row);
        let id = c.uuid("id")?;
        let turns: Value = c.json("turns")?;
        let mut known: Vec<(i64, String, i64)> = Vec::new();
        let view = store_json_turns(conn, id, &turns, &mut known).await?;
        let checkpoints = sqlx::query(
            "SELECT stack, position, data FROM thread_checkpoints WHERE thread_id = $1",
        )
        .bind(id.to_string())
        .fetch_all(&mut *conn)
        .await?;
        for cp in &checkpoints {
            let c = Cols(cp);
            let mut data: Value = c.json("data")?;
            let turns = data
                .get("turns")
                .cloned()
                .unwrap_or(Value::Array(Vec::new()));
            let cp_view = store_json_turns(conn, id, &turns, &mut known).await?;
            if let Some(map) = data.as_object_mut() {
                map.remove("turns");
                map.insert(
                    "view".into(),
                    serde_json::to_value(cp_view).unwrap_or_default(),
                );
            }
            sqlx::query("UPDATE thread_checkpoints SET data = $1 WHERE thread_id = $2 AND stack = $3 AND position = $4")
                .bind(json(&data, "checkpoint")?)
                .bind(id.to_string())
                .bind(c.text("stack")?)
                .bind(c.int("position")?)
                .execute(&mut *conn)
                .await?;
        }
        sqlx::query("UPDATE threads SET view = $1, turns = '[]' WHERE id = $2")
            .bind(json(&view, "view")?)
            .bind(id.to_string())
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

/// Stores the turns of a JSON array not stored yet (`known` holds number,
/// start time and position of those that are) and returns their view.
async fn store_json_turns(
    conn: &mut Conn,
    thread: Uuid,
    turns: &Value,
    known: &mut Vec<(i64, String, i64)>,
) -> Result<Vec<TurnRange>, StoreError> {
    let corrupt = |message: String| StoreError::Corrupt {
        what: format!("threads.turns of {thread}"),
        message,
    };
    let items = turns
        .as_array()
        .ok_or_else(|| corrupt("not a JSON array".into()))?;
    let mut positions = Vec::with_capacity(items.len());
    for item in items {
        let number = item.get("number").and_then(Value::as_i64).unwrap_or(0);
        let started = item
            .get("started_at")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if let Some((_, _, p)) = known.iter().find(|(n, s, _)| *n == number && *s == started) {
            positions.push(*p);
            continue;
        }
        let position = known.iter().map(|k| k.2).max().unwrap_or(0) + 1;
        let mut data = item.clone();
        let messages = match data.as_object_mut().and_then(|m| m.remove("messages")) {
            Some(Value::Array(messages)) => messages,
            _ => Vec::new(),
        };
        let started_at = DateTime::parse_from_rfc3339(&started)
            .map(|t| t.with_timezone(&Utc))
            .map_err(|e| corrupt(format!("turn {number}: started_at: {e}")))?;
        let stored = StoredTurn {
            position,
            number,
            state: item
                .get("state")
                .and_then(Value::as_str)
                .unwrap_or("completed")
                .to_string(),
            started_at,
            data,
            messages,
        };
        write_turn(conn, thread, &stored, true).await?;
        known.push((number, started, position));
        positions.push(position);
    }
    Ok(view_of(positions))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_positions_share_a_range() {
        let view = view_of([1, 2, 3, 7, 4, 5]);
        assert_eq!(
            view,
            [
                TurnRange { first: 1, last: 3 },
                TurnRange { first: 7, last: 7 },
                TurnRange { first: 4, last: 5 }
            ]
        );
        assert_eq!(positions_of(&view).collect::<Vec<_>>(), [1, 2, 3, 7, 4, 5]);
        assert_eq!(serde_json::to_string(&view).unwrap(), "[[1,3],[7,7],[4,5]]");
        assert!(view_of([]).is_empty());
    }
}
