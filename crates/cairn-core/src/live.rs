//! [`Live`]: a value a running process replaces as a whole (a configuration
//! reload) while readers keep the one they took for as long as they need it
//! (a chat turn finishes on the settings it started with).

use std::sync::{Arc, RwLock};

/// A shared, replaceable `Arc<T>`; clones share the slot.
#[derive(Debug)]
pub struct Live<T: ?Sized> {
    slot: Arc<RwLock<Arc<T>>>,
}

impl<T: ?Sized> Clone for Live<T> {
    fn clone(&self) -> Self {
        Self {
            slot: Arc::clone(&self.slot),
        }
    }
}

impl<T: ?Sized> Live<T> {
    /// A slot holding `value`.
    pub fn new(value: Arc<T>) -> Self {
        Self {
            slot: Arc::new(RwLock::new(value)),
        }
    }

    /// The value in force now; later replacements do not reach it.
    pub fn get(&self) -> Arc<T> {
        // A writer only swaps an `Arc`: a poisoned lock still holds a whole value.
        Arc::clone(&self.slot.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// Puts `value` in force for every later [`Live::get`] of every clone.
    pub fn set(&self, value: Arc<T>) {
        *self.slot.write().unwrap_or_else(|p| p.into_inner()) = value;
    }

    /// A slot of its own holding the value in force now: replacing the
    /// original's no longer reaches it.
    pub fn pinned(&self) -> Self {
        Self::new(self.get())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_the_slot_and_pinned_copies_do_not() {
        let live = Live::new(Arc::new(1));
        let shared = live.clone();
        let pinned = live.pinned();
        let taken = live.get();
        live.set(Arc::new(2));
        assert_eq!(*shared.get(), 2);
        assert_eq!(*pinned.get(), 1);
        assert_eq!(*taken, 1);
    }
}
