//! Finding, creating, loading, saving and pruning sessions and their threads.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use cairn_core::chat::ChatMessage;
use cairn_store::{
    CheckpointRow, SessionRow, Store, StoreError, StoredTurn, ThreadRow, ThreadSummary, TurnRange,
};
use chrono::{DateTime, Utc};
use tokio::sync::{Mutex, RwLock};
use uuid::Uuid;

use super::model::{Thread, ThreadState, Turn, TurnState};
use super::undo::{Checkpoint, UndoManager};
use cairn_core::clock::Clock;

/// Sessions above this count in memory are worth a warning (a leak, or a flood).
pub const SESSION_COUNT_WARNING: usize = 1_000;

/// Why a session operation failed.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Stored turns or checkpoints could not be read back.
    #[error("thread {thread} has unreadable {what}: {message}")]
    Corrupt {
        /// The thread.
        thread: Uuid,
        /// Turns or checkpoints.
        what: &'static str,
        /// The decoding error.
        message: String,
    },
    /// No thread of this session matches.
    #[error("no thread {0} in this session (see /threads)")]
    NoSuchThread(String),
    /// Several threads match an id prefix.
    #[error("\"{0}\" matches several threads; give more of the id")]
    AmbiguousThread(String),
}

/// Identifies a session: one per user and channel.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SessionKey {
    /// The user.
    pub user_id: String,
    /// The channel.
    pub channel: String,
}

/// A session held in memory, with the threads loaded so far.
#[derive(Debug)]
pub struct LiveSession {
    /// The stored session.
    pub row: SessionRow,
    threads: HashMap<Uuid, Thread>,
}

impl LiveSession {
    /// The session row and one loaded thread, borrowed together.
    pub fn split(&mut self, thread: Uuid) -> Option<(&mut SessionRow, &mut Thread)> {
        let thread = self.threads.get_mut(&thread)?;
        Some((&mut self.row, thread))
    }
}

/// Keeps sessions in memory over the store.
pub struct SessionManager {
    store: Store,
    clock: Arc<dyn Clock>,
    max_checkpoints: usize,
    idle_timeout: Duration,
    sessions: RwLock<HashMap<SessionKey, Arc<Mutex<LiveSession>>>>,
}

impl std::fmt::Debug for SessionManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionManager")
            .field("max_checkpoints", &self.max_checkpoints)
            .field("idle_timeout", &self.idle_timeout)
            .finish_non_exhaustive()
    }
}

impl SessionManager {
    /// A manager over `store`; threads keep `max_checkpoints` undo steps.
    pub fn new(
        store: Store,
        clock: Arc<dyn Clock>,
        max_checkpoints: usize,
        idle_timeout: Duration,
    ) -> Self {
        Self {
            store,
            clock,
            max_checkpoints,
            idle_timeout,
            sessions: RwLock::new(HashMap::new()),
        }
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The clock.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// The session for `key` if it is in memory; never loads or creates one
    /// (for pollers, which must not keep idle sessions alive or add rows).
    pub async fn loaded(&self, key: &SessionKey) -> Option<Arc<Mutex<LiveSession>>> {
        self.sessions.read().await.get(key).map(Arc::clone)
    }

    /// The session for `key`, loaded or created. Concurrent first messages
    /// get the same session: a read lock for the common case, then a write
    /// lock with a second look before creating (and the store's unique key
    /// makes it one row even across processes).
    pub async fn session(&self, key: &SessionKey) -> Result<Arc<Mutex<LiveSession>>, SessionError> {
        if let Some(found) = self.sessions.read().await.get(key) {
            return Ok(Arc::clone(found));
        }
        let mut sessions = self.sessions.write().await;
        if let Some(found) = sessions.get(key) {
            return Ok(Arc::clone(found));
        }
        let row = self
            .store
            .get_or_create_session(&key.user_id, &key.channel, self.clock.now())
            .await?;
        let live = Arc::new(Mutex::new(LiveSession {
            row,
            threads: HashMap::new(),
        }));
        sessions.insert(key.clone(), Arc::clone(&live));
        if sessions.len() > SESSION_COUNT_WARNING {
            tracing::warn!(
                count = sessions.len(),
                "more than {SESSION_COUNT_WARNING} sessions in memory"
            );
        }
        Ok(live)
    }

    /// How many sessions are in memory.
    pub async fn len(&self) -> usize {
        self.sessions.read().await.len()
    }

    /// Whether no session is in memory.
    pub async fn is_empty(&self) -> bool {
        self.sessions.read().await.is_empty()
    }

    /// Drops sessions idle longer than the timeout from memory (they stay in
    /// the store) and returns their ids and keys. A session busy with a turn
    /// is skipped, never waited for.
    pub async fn prune_idle(&self) -> Vec<(Uuid, SessionKey)> {
        let cutoff = self.clock.now()
            - chrono::Duration::from_std(self.idle_timeout).unwrap_or(chrono::Duration::MAX);
        let mut sessions = self.sessions.write().await;
        let mut pruned = Vec::new();
        sessions.retain(|key, live| match live.try_lock() {
            Ok(session) if session.row.last_active_at < cutoff => {
                pruned.push((session.row.id, key.clone()));
                false
            }
            _ => true,
        });
        if !pruned.is_empty() {
            tracing::info!(
                pruned = pruned.len(),
                remaining = sessions.len(),
                "pruned idle sessions"
            );
        }
        pruned
    }

    /// The thread a message goes to: the one the channel names (created on
    /// first use), else the session's active thread, else a new one.
    pub async fn resolve_thread(
        &self,
        session: &mut LiveSession,
        external: Option<&str>,
    ) -> Result<Uuid, SessionError> {
        let id = match external {
            Some(ext) => match session
                .threads
                .values()
                .find(|t| t.external_id.as_deref() == Some(ext))
            {
                Some(t) => t.id,
                None => match self.store.find_thread(session.row.id, ext).await? {
                    Some(row) => self.load(session, row).await?,
                    None => self.create_thread(session, Some(ext.to_string())).await?,
                },
            },
            None => match session.row.active_thread_id {
                Some(id) if session.threads.contains_key(&id) => id,
                Some(id) => match self.store.get_thread(id).await? {
                    Some(row) => self.load(session, row).await?,
                    None => self.create_thread(session, None).await?,
                },
                None => self.create_thread(session, None).await?,
            },
        };
        if let Some((row, thread)) = session.split(id) {
            self.settle(row, thread).await?;
        }
        Ok(id)
    }

    /// Starts a new thread and makes it the active one.
    pub async fn new_thread(&self, session: &mut LiveSession) -> Result<Uuid, SessionError> {
        let id = self.create_thread(session, None).await?;
        Ok(id)
    }

    /// Makes the thread whose id starts with `prefix` the active one.
    pub async fn switch_thread(
        &self,
        session: &mut LiveSession,
        prefix: &str,
    ) -> Result<ThreadSummary, SessionError> {
        let all = self.store.list_threads(session.row.id).await?;
        let prefix = prefix.trim().to_ascii_lowercase();
        let matches: Vec<&ThreadSummary> = all
            .iter()
            .filter(|t| t.id.to_string().starts_with(&prefix))
            .collect();
        let found = match matches.as_slice() {
            [one] => (*one).clone(),
            [] => return Err(SessionError::NoSuchThread(prefix)),
            _ => return Err(SessionError::AmbiguousThread(prefix)),
        };
        session.row.active_thread_id = Some(found.id);
        session.row.last_active_at = self.clock.now();
        self.store.update_session(&session.row).await?;
        Ok(found)
    }

    /// The session's threads, most recent first.
    pub async fn list_threads(
        &self,
        session: &LiveSession,
    ) -> Result<Vec<ThreadSummary>, SessionError> {
        Ok(self.store.list_threads(session.row.id).await?)
    }

    /// Saves a thread (state, title, which turns it shows), stores the turns
    /// not stored yet, and notes the session's activity time.
    pub async fn save(
        &self,
        session: &mut SessionRow,
        thread: &mut Thread,
    ) -> Result<(), SessionError> {
        self.write(session, thread, None).await
    }

    /// [`SessionManager::save`], also writing the turn at `index` (a turn
    /// that started, changed or ended) with all its messages.
    pub async fn save_turn(
        &self,
        session: &mut SessionRow,
        thread: &mut Thread,
        index: usize,
    ) -> Result<(), SessionError> {
        self.write(session, thread, Some(index)).await
    }

    async fn write(
        &self,
        session: &mut SessionRow,
        thread: &mut Thread,
        index: Option<usize>,
    ) -> Result<(), SessionError> {
        // New turns get the next positions; if another process took them
        // meanwhile (a second `cairn chat` on the same session), the insert
        // is refused whole and the positions are taken again after its.
        let fresh: Vec<usize> = (0..thread.turns.len())
            .filter(|&i| thread.turns[i].position == 0)
            .collect();
        let mut attempt = 0;
        loop {
            let mut inserted = Vec::new();
            for &i in &fresh {
                thread.turns[i].position = thread.next_position;
                thread.next_position += 1;
                inserted.push(stored(thread.id, &thread.turns[i])?);
            }
            let replaced = match index.filter(|i| !fresh.contains(i)) {
                Some(i) => vec![stored(thread.id, &thread.turns[i])?],
                None => Vec::new(),
            };
            match self
                .store
                .save_thread(&row_of(thread)?, &inserted, &replaced)
                .await
            {
                Err(StoreError::Conflict(_)) if attempt == 0 => {
                    attempt += 1;
                    thread.next_position = self.store.last_turn_position(thread.id).await? + 1;
                }
                other => break other?,
            }
        }
        session.last_active_at = self.clock.now();
        self.store.update_session(session).await?;
        Ok(())
    }

    /// Records one message of a running turn as soon as it exists, at its
    /// final index among the turn's messages, so a crash keeps it.
    pub async fn record_message(
        &self,
        thread: Uuid,
        position: i64,
        index: usize,
        message: &ChatMessage,
    ) -> Result<(), SessionError> {
        let value = serde_json::to_value(message).map_err(|e| SessionError::Corrupt {
            thread,
            what: "messages",
            message: e.to_string(),
        })?;
        let seq = i64::try_from(index).unwrap_or(i64::MAX);
        Ok(self
            .store
            .put_turn_message(thread, position, seq, &value)
            .await?)
    }

    /// A thread left mid-turn by a caller that went away (its future was
    /// dropped) or by a process that died: its running turn is reloaded with
    /// the messages recorded so far and marked interrupted, so `/resume` can
    /// continue it. Call with the session locked: then no turn is running.
    pub async fn settle(
        &self,
        session: &mut SessionRow,
        thread: &mut Thread,
    ) -> Result<(), SessionError> {
        if !matches!(
            thread.state,
            ThreadState::Processing | ThreadState::AwaitingApproval
        ) {
            return Ok(());
        }
        thread.state = ThreadState::Interrupted;
        let Some(index) = thread
            .turns
            .iter()
            .rposition(|t| t.state == TurnState::Processing)
        else {
            return self.save(session, thread).await;
        };
        let position = thread.turns[index].position;
        if position != 0 {
            let range = [TurnRange {
                first: position,
                last: position,
            }];
            if let Some(stored) = self.store.load_turns(thread.id, &range).await?.pop() {
                thread.turns[index] = turn_of(thread.id, stored)?;
            }
        }
        thread.turns[index].state = TurnState::Interrupted;
        self.save_turn(session, thread, index).await
    }

    /// The turns a checkpoint's view shows, from the store.
    pub async fn turns_in(
        &self,
        thread: Uuid,
        view: &[TurnRange],
    ) -> Result<Vec<Turn>, SessionError> {
        self.store
            .load_turns(thread, view)
            .await?
            .into_iter()
            .map(|t| turn_of(thread, t))
            .collect()
    }

    /// Persists a new undo checkpoint (the redo stack is cleared with it),
    /// then deletes the turns that only the cleared redo stack could reach:
    /// those after every position the thread or its undo stack shows.
    pub async fn save_checkpoint(
        &self,
        thread: &Thread,
        checkpoint: &Checkpoint,
    ) -> Result<(), SessionError> {
        let row = checkpoint_row(thread.id, checkpoint)?;
        self.store
            .push_checkpoint(thread.id, &row, thread.undo.max())
            .await?;
        let reachable = thread
            .undo
            .undo_stack()
            .map(Checkpoint::last_position)
            .chain(thread.turns.iter().map(|t| t.position))
            .max()
            .unwrap_or(0);
        self.store.drop_turns_after(thread.id, reachable).await?;
        Ok(())
    }

    /// Persists both checkpoint stacks as they are now (after undo, redo, restore).
    pub async fn save_undo_stacks(&self, thread: &Thread) -> Result<(), SessionError> {
        let undo = thread
            .undo
            .undo_stack()
            .map(|c| checkpoint_row(thread.id, c))
            .collect::<Result<Vec<_>, _>>()?;
        let redo = thread
            .undo
            .redo_stack()
            .iter()
            .map(|c| checkpoint_row(thread.id, c))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(self
            .store
            .replace_checkpoints(thread.id, &undo, &redo)
            .await?)
    }

    async fn create_thread(
        &self,
        session: &mut LiveSession,
        external: Option<String>,
    ) -> Result<Uuid, SessionError> {
        let now = self.clock.now();
        let thread = Thread::new(session.row.id, external.clone(), self.max_checkpoints, now);
        self.store.create_thread(&row_of(&thread)?).await?;
        if external.is_none() {
            session.row.active_thread_id = Some(thread.id);
            session.row.last_active_at = now;
            self.store.update_session(&session.row).await?;
        }
        let id = thread.id;
        session.threads.insert(id, thread);
        Ok(id)
    }

    async fn load(&self, session: &mut LiveSession, row: ThreadRow) -> Result<Uuid, SessionError> {
        let corrupt = |what, e: serde_json::Error| SessionError::Corrupt {
            thread: row.id,
            what,
            message: e.to_string(),
        };
        let turns = self.turns_in(row.id, &row.view).await?;
        let next_position = self.store.last_turn_position(row.id).await? + 1;
        let (undo, redo) = self.store.load_checkpoints(row.id).await?;
        let decode = |rows: Vec<CheckpointRow>| {
            rows.into_iter()
                .map(|r| {
                    serde_json::from_value::<Checkpoint>(r.data)
                        .map_err(|e| corrupt("checkpoints", e))
                })
                .collect::<Result<Vec<_>, _>>()
        };
        let thread = Thread {
            id: row.id,
            session_id: row.session_id,
            external_id: row.external_id,
            title: row.title,
            // A thread stored mid-turn is settled (interrupted) when next used.
            state: ThreadState::parse(&row.state),
            turns,
            undo: UndoManager::from_parts(decode(undo)?, decode(redo)?, self.max_checkpoints),
            next_position,
            created_at: row.created_at,
            updated_at: row.updated_at,
        };
        let id = thread.id;
        session.threads.insert(id, thread);
        Ok(id)
    }
}

fn row_of(thread: &Thread) -> Result<ThreadRow, SessionError> {
    Ok(ThreadRow {
        id: thread.id,
        session_id: thread.session_id,
        external_id: thread.external_id.clone(),
        title: thread.title.clone(),
        state: thread.state.as_str().to_string(),
        view: thread.view(),
        created_at: thread.created_at,
        updated_at: thread.updated_at,
    })
}

/// A turn as the store keeps it: the turn without its messages, and the messages.
fn stored(thread: Uuid, turn: &Turn) -> Result<StoredTurn, SessionError> {
    let corrupt = |e: serde_json::Error| SessionError::Corrupt {
        thread,
        what: "turns",
        message: e.to_string(),
    };
    let mut data = serde_json::to_value(turn).map_err(corrupt)?;
    let messages = match data.as_object_mut().and_then(|m| m.remove("messages")) {
        Some(serde_json::Value::Array(messages)) => messages,
        _ => Vec::new(),
    };
    let state = data
        .get("state")
        .and_then(|s| s.as_str())
        .unwrap_or_default()
        .to_string();
    Ok(StoredTurn {
        position: turn.position,
        number: i64::from(turn.number),
        state,
        started_at: turn.started_at,
        data,
        messages,
    })
}

/// A stored turn read back.
/// A stored turn as the agent's [`Turn`] (its messages put back in), for
/// readers of history outside a live session (the gateway's thread API).
pub fn turn_of(thread: Uuid, stored: StoredTurn) -> Result<Turn, SessionError> {
    let mut data = stored.data;
    if let Some(map) = data.as_object_mut() {
        map.insert("messages".into(), serde_json::Value::Array(stored.messages));
    }
    let mut turn: Turn = serde_json::from_value(data).map_err(|e| SessionError::Corrupt {
        thread,
        what: "turns",
        message: format!("turn at position {}: {e}", stored.position),
    })?;
    turn.position = stored.position;
    Ok(turn)
}

fn checkpoint_row(thread: Uuid, checkpoint: &Checkpoint) -> Result<CheckpointRow, SessionError> {
    Ok(CheckpointRow {
        id: checkpoint.id.clone(),
        data: serde_json::to_value(checkpoint).map_err(|e| SessionError::Corrupt {
            thread,
            what: "checkpoints",
            message: e.to_string(),
        })?,
    })
}

/// When a thread last changed, for listings.
pub fn age(now: DateTime<Utc>, then: DateTime<Utc>) -> String {
    format!("{} ago", cairn_core::duration::age(now, then))
}
