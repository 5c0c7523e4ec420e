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
//! Over a connection that delivers one message at a time (a WebSocket),
//! [`InOrder::spawn_passing`] keeps each chat's messages in order up to
//! the chat service, which then takes them one turn at a time.

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;

use tokio::sync::oneshot;
use tokio::sync::oneshot::error::TryRecvError;
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

/// Held by a task of [`InOrder::spawn_passing`] until the next message
/// of its chat may go on; dropping it passes it on.
#[derive(Debug)]
pub struct Baton(oneshot::Sender<()>);

impl Baton {
    /// Lets the chat's next message go on (as dropping it does).
    pub fn pass(self) {
        let _ = self.0.send(());
    }
}

impl<K: Hash + Eq> InOrder<K> {
    /// Spawns `work` on `tasks`, to start once every task spawned before
    /// it for `chat` has passed on its [`Baton`] (or ended): `work` drops
    /// its own once its message is in the chat service's hands, so the
    /// chat's messages reach the service in order while a turn that runs
    /// long holds none back. For a connection that lives on (a
    /// WebSocket), where the chats of finished tasks are forgotten.
    pub fn spawn_passing<F, W>(&mut self, tasks: &mut JoinSet<()>, chat: K, work: W)
    where
        W: FnOnce(Baton) -> F,
        F: Future<Output = ()> + Send + 'static,
    {
        self.last
            .retain(|_, passed| matches!(passed.try_recv(), Err(TryRecvError::Empty)));
        let (baton, passed) = oneshot::channel::<()>();
        let before = self.last.insert(chat, passed);
        let work = work(Baton(baton));
        tasks.spawn(async move {
            if let Some(before) = before {
                // Err: passed on by dropping, or the task was aborted; go on.
                let _ = before.await;
            }
            work.await;
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

    #[tokio::test(start_paused = true)]
    async fn a_passed_baton_lets_the_next_go_on_before_the_turn_ends() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = JoinSet::new();
        let mut order = InOrder::default();
        // 1a takes long to be taken in, then its turn runs longer still.
        for (name, intake, turn) in [("1a", 30, 100), ("1b", 0, 10), ("1c", 0, 0)] {
            let seen = Arc::clone(&seen);
            order.spawn_passing(&mut tasks, 1, move |baton| async move {
                tokio::time::sleep(Duration::from_millis(intake)).await;
                seen.lock().unwrap().push(format!("{name} in"));
                baton.pass();
                tokio::time::sleep(Duration::from_millis(turn)).await;
                seen.lock().unwrap().push(format!("{name} done"));
            });
        }
        while tasks.join_next().await.is_some() {}
        assert_eq!(
            *seen.lock().unwrap(),
            ["1a in", "1b in", "1c in", "1c done", "1b done", "1a done"]
        );
        // Finished chats are forgotten.
        order.spawn_passing(&mut tasks, 2, |_| async {});
        assert_eq!(order.last.len(), 1);
        while tasks.join_next().await.is_some() {}
    }
}
