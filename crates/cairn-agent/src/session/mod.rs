//! Sessions, threads and turns: who is talking, which conversation, and what happened in it.
//!
//! A session is one per (user, channel); a session has threads; a thread has
//! turns. Everything is persisted in the store, so a restart of the daemon
//! or of `cairn chat` resumes a thread with its history and its undo stack.

pub mod manager;
pub mod model;
pub mod undo;

pub use manager::{LiveSession, SessionError, SessionKey, SessionManager, turn_of};
pub use model::{Thread, ThreadState, Turn, TurnKind, TurnState, TurnUsage, title_from};
pub use undo::{Checkpoint, UndoManager};
