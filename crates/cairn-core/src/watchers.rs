//! [`Watchers`]: observers told of each event as it happens, on the thread
//! that made it. Nothing queues between the two, so a burst (thousands of
//! routine runs in one slot) cannot outrun a watcher and make it miss
//! events, as it does a broadcast channel's slow receiver; in exchange a
//! watcher must return at once: record, count or queue, never wait.

use std::sync::{Arc, RwLock};

/// One observer of events of type `T`.
pub type Watcher<T> = Arc<dyn Fn(T) + Send + Sync>;

/// The observers of one source, told in the order they were added.
pub struct Watchers<T> {
    list: RwLock<Vec<Watcher<T>>>,
}

impl<T> Default for Watchers<T> {
    fn default() -> Self {
        Self {
            list: RwLock::new(Vec::new()),
        }
    }
}

impl<T> std::fmt::Debug for Watchers<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watchers")
            .field("count", &self.read().len())
            .finish()
    }
}

impl<T> Watchers<T> {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Vec<Watcher<T>>> {
        // Only `add` writes, with one push: a poisoned list is still whole.
        self.list.read().unwrap_or_else(|p| p.into_inner())
    }
}

impl<T: Clone> Watchers<T> {
    /// Adds `watcher` for every later event. A watcher must not add
    /// another from inside its call: it is called under this list's lock.
    pub fn add(&self, watcher: Watcher<T>) {
        self.list
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .push(watcher);
    }

    /// Tells every watcher of the event `make` builds; built only when
    /// someone watches, and cloned for all but the last.
    pub fn tell(&self, make: impl FnOnce() -> T) {
        let list = self.read();
        let Some((last, rest)) = list.split_last() else {
            return;
        };
        let event = make();
        for watcher in rest {
            watcher(event.clone());
        }
        last(event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn every_watcher_gets_every_event_in_order_and_none_is_built_for_nobody() {
        let watchers = Watchers::<String>::default();
        let mut built = 0;
        watchers.tell(|| {
            built += 1;
            "unseen".to_string()
        });
        assert_eq!(built, 0, "no watcher: the event is never built");
        let seen = Arc::new(Mutex::new(Vec::new()));
        for name in ["a", "b"] {
            let seen = Arc::clone(&seen);
            watchers.add(Arc::new(move |e: String| {
                seen.lock().unwrap().push(format!("{name}:{e}"));
            }));
        }
        for i in 0..3 {
            watchers.tell(|| i.to_string());
        }
        assert_eq!(
            *seen.lock().unwrap(),
            ["a:0", "b:0", "a:1", "b:1", "a:2", "b:2"]
        );
    }
}
