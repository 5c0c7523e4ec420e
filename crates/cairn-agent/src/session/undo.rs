//! Undo and redo of turns, by checkpoints of the thread's view (which stored
//! turns it shows) taken before each turn: a checkpoint is a short list of
//! position ranges, never a copy of the turns.
//!
//! Invariant: undo and redo move one checkpoint from one stack to the other,
//! so their total size stays constant; only a new checkpoint (which also
//! clears redo) and the trim to `max_checkpoints` change it.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use cairn_store::TurnRange;

/// The thread's view at one moment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// Unique id (for restore).
    pub id: String,
    /// The turn about to run when it was taken.
    pub turn_number: u32,
    /// What it is, for listings ("before turn 3: …").
    pub description: String,
    /// The stored turns shown at that moment.
    pub view: Vec<TurnRange>,
}

impl Checkpoint {
    /// A checkpoint of `view` taken before turn `turn_number`.
    pub fn new(
        turn_number: u32,
        description: impl Into<String>,
        view: Vec<TurnRange>,
    ) -> Checkpoint {
        Checkpoint {
            id: Uuid::now_v7().to_string(),
            turn_number,
            description: description.into(),
            view,
        }
    }

    /// The highest turn position the checkpoint shows (0 for none).
    pub fn last_position(&self) -> i64 {
        self.view.iter().map(|r| r.last).max().unwrap_or(0)
    }
}

/// The undo and redo stacks of one thread.
#[derive(Debug, Clone, PartialEq)]
pub struct UndoManager {
    undo: VecDeque<Checkpoint>,
    redo: Vec<Checkpoint>,
    max: usize,
}

impl UndoManager {
    /// Empty stacks keeping at most `max` undo checkpoints (at least one).
    pub fn new(max: usize) -> UndoManager {
        UndoManager {
            undo: VecDeque::new(),
            redo: Vec::new(),
            max: max.max(1),
        }
    }

    /// Stacks loaded from storage (oldest first each), trimmed to `max`.
    pub fn from_parts(undo: Vec<Checkpoint>, redo: Vec<Checkpoint>, max: usize) -> UndoManager {
        let mut manager = UndoManager {
            undo: undo.into(),
            redo,
            max: max.max(1),
        };
        manager.trim();
        manager
    }

    /// Records the state before a new turn; the redo history is gone.
    pub fn checkpoint(&mut self, checkpoint: Checkpoint) {
        self.redo.clear();
        self.undo.push_back(checkpoint);
        self.trim();
    }

    /// Steps back: `current` goes onto the redo stack; returns the state to restore.
    pub fn undo(&mut self, current: Checkpoint) -> Option<Checkpoint> {
        let previous = self.undo.pop_back()?;
        self.redo.push(current);
        Some(previous)
    }

    /// Steps forward again: `current` goes back onto the undo stack; returns the state to restore.
    pub fn redo(&mut self, current: Checkpoint) -> Option<Checkpoint> {
        let next = self.redo.pop()?;
        self.undo.push_back(current);
        Some(next)
    }

    /// Goes back to a checkpoint by id, dropping every later checkpoint and the redo stack.
    pub fn restore(&mut self, id: &str) -> Option<Checkpoint> {
        let index = self.undo.iter().position(|c| c.id == id)?;
        self.undo.truncate(index + 1);
        self.redo.clear();
        self.undo.pop_back()
    }

    /// Forgets everything (after `/clear`).
    pub fn clear(&mut self) {
        self.undo.clear();
        self.redo.clear();
    }

    /// Undo checkpoints, oldest first.
    pub fn undo_stack(&self) -> impl Iterator<Item = &Checkpoint> {
        self.undo.iter()
    }

    /// Redo checkpoints, in the order they were undone.
    pub fn redo_stack(&self) -> &[Checkpoint] {
        &self.redo
    }

    /// How many steps can be undone.
    pub fn undo_len(&self) -> usize {
        self.undo.len()
    }

    /// How many steps can be redone.
    pub fn redo_len(&self) -> usize {
        self.redo.len()
    }

    /// The configured maximum.
    pub fn max(&self) -> usize {
        self.max
    }

    fn trim(&mut self) {
        while self.undo.len() > self.max {
            self.undo.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn cp(n: u32) -> Checkpoint {
        Checkpoint::new(n, format!("before turn {n}"), Vec::new())
    }

    #[test]
    fn undo_then_redo_returns_to_the_same_state() {
        let mut m = UndoManager::new(20);
        m.checkpoint(cp(1));
        m.checkpoint(cp(2));
        let back = m.undo(cp(3)).unwrap();
        assert_eq!(back.turn_number, 2);
        let forward = m.redo(back.clone()).unwrap();
        assert_eq!(forward.turn_number, 3);
        assert_eq!((m.undo_len(), m.redo_len()), (2, 0));
    }

    #[test]
    fn a_new_checkpoint_clears_redo_and_the_oldest_are_trimmed() {
        let mut m = UndoManager::new(2);
        for n in 1..=4 {
            m.checkpoint(cp(n));
        }
        assert_eq!(
            m.undo_stack().map(|c| c.turn_number).collect::<Vec<_>>(),
            [3, 4]
        );
        m.undo(cp(5));
        assert_eq!(m.redo_len(), 1);
        m.checkpoint(cp(6));
        assert_eq!(m.redo_len(), 0);
    }

    #[test]
    fn restore_drops_later_checkpoints() {
        let mut m = UndoManager::new(20);
        let (a, b, c) = (cp(1), cp(2), cp(3));
        let id = b.id.clone();
        m.checkpoint(a);
        m.checkpoint(b);
        m.checkpoint(c);
        assert_eq!(m.restore(&id).unwrap().turn_number, 2);
        assert_eq!(m.undo_len(), 1);
        assert!(m.restore("missing").is_none());
    }

    #[test]
    fn nothing_to_undo_or_redo() {
        let mut m = UndoManager::new(20);
        assert!(m.undo(cp(1)).is_none());
        assert!(m.redo(cp(1)).is_none());
        assert_eq!(
            (m.undo_len(), m.redo_len()),
            (0, 0),
            "a failed step changes nothing"
        );
    }

    #[derive(Debug, Clone)]
    enum Op {
        Checkpoint,
        Undo,
        Redo,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![Just(Op::Checkpoint), Just(Op::Undo), Just(Op::Redo)]
    }

    proptest! {
        /// The seed's invariant: undo and redo keep undo + redo constant.
        #[test]
        fn undo_and_redo_conserve_the_total(max in 1usize..8, ops in proptest::collection::vec(op(), 0..60)) {
            let mut m = UndoManager::new(max);
            for (i, op) in ops.into_iter().enumerate() {
                let before = m.undo_len() + m.redo_len();
                let n = u32::try_from(i).unwrap_or(0);
                match op {
                    Op::Checkpoint => {
                        m.checkpoint(cp(n));
                        prop_assert_eq!(m.redo_len(), 0);
                        prop_assert!(m.undo_len() <= max);
                    }
                    Op::Undo => {
                        m.undo(cp(n));
                        prop_assert_eq!(m.undo_len() + m.redo_len(), before);
                    }
                    Op::Redo => {
                        m.redo(cp(n));
                        prop_assert_eq!(m.undo_len() + m.redo_len(), before);
                    }
                }
            }
        }
    }
}
