//! Messages of one chat that arrive together handled in the order sent.
//!
//! An adapter hands each message to its own task, so polling goes on (and
//! approvals are pressed or typed) while a turn runs. Messages that arrive
//! in one batch, though (sent while the daemon was down, or faster than it
//! polls), must reach the agent in their order and each be answered, as if
//! sent one after the other: [`InOrder`] chains a batch's tasks per chat,
//! each starting once the one before it has ended (or was aborted).
//! Messages of later batches are not held back: one sent during a turn
//! still reaches the chat service at once, to approve or interrupt it.

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;

use tokio::sync::oneshot;
use tokio::task::JoinSet;

/// For each chat of one batch, the end of the last task handed out for it.
pub struct InOrder<K> {
    last: HashMap<K, oneshot::Receiver<()>>,
}

impl<K: Hash + Eq> Default for InOrder<K> {
    fn default() -> Self {
        Self {
            last: HashMap::new(),
        }
    }
}

impl<K: Hash + Eq> InOrder<K> {
    /// Spawns `work` on `tasks`, to start after every task spawned before
    /// it for `chat` by this [`InOrder`] has ended.
    pub fn spawn<F>(&mut self, tasks: &mut JoinSet<()>, chat: K, work: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let (ended, done) = oneshot::channel::<()>();
        let before = self.last.insert(chat, done);
        tasks.spawn(async move {
            if let Some(before) = before {
                // Err: the task before was aborted or panicked; go on.
                let _ = before.await;
            }
            work.await;
            let _ = ended.send(());
        });
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_chats_tasks_run_in_order_and_other_chats_do_not_wait() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = JoinSet::new();
        let mut order = InOrder::default();
        // The first of chat 1 is the slowest: the second must still wait for it.
        for (chat, name, ms) in [(1, "1a", 30), (1, "1b", 0), (2, "2a", 10), (1, "1c", 0)] {
            let seen = Arc::clone(&seen);
            order.spawn(&mut tasks, chat, async move {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                seen.lock().unwrap().push(name);
            });
        }
        while tasks.join_next().await.is_some() {}
        assert_eq!(*seen.lock().unwrap(), ["2a", "1a", "1b", "1c"]);
    }

    #[tokio::test(start_paused = true)]
    async fn an_aborted_task_does_not_hold_up_the_next() {
        let mut tasks = JoinSet::new();
        let mut order = InOrder::default();
        let ran = Arc::new(Mutex::new(false));
        order.spawn(&mut tasks, 1, std::future::pending());
        tasks.abort_all();
        while tasks.join_next().await.is_some() {}
        let flag = Arc::clone(&ran);
        order.spawn(&mut tasks, 1, async move {
            *flag.lock().unwrap() = true;
        });
        while tasks.join_next().await.is_some() {}
        assert!(*ran.lock().unwrap());
    }
}
