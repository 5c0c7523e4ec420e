//! Group commit: writes that arrive while another transaction of their
//! kind runs are committed together in the next one. Admissions of
//! unscheduled fires and the ends of runs go through it.
//!
//! Each admission is still checked against its guardrails one after
//! another inside that transaction (`Store::admit_runs` evaluates them in
//! order, so a later fire sees the runs recorded by an earlier one: dedup,
//! cooldown and concurrency hold exactly as with one transaction per fire),
//! and a caller hears its answer only after the commit, so a fire
//! acknowledged has its run recorded. Under load this turns one write
//! transaction per webhook into one per burst.

use std::future::Future;
use std::sync::Mutex;

use cairn_core::routine::RoutineRun;
use cairn_store::{Admission, Admitted, FinishRun, Finished, Store, StoreError};
use tokio::sync::oneshot;

/// Entries committed per transaction at most (keeps one transaction short).
pub(super) const MAX_BATCH: usize = 256;

/// An entry waiting for its commit; `None` means "the batch failed,
/// commit yourself" so every caller gets its own precise error.
type Waiting<I, O> = (I, oneshot::Sender<Option<O>>);

/// The queue and the right to run the next transaction.
pub(super) struct GroupCommit<I, O> {
    pending: Mutex<Vec<Waiting<I, O>>>,
    leader: tokio::sync::Mutex<()>,
}

impl<I, O> Default for GroupCommit<I, O> {
    fn default() -> Self {
        Self {
            pending: Mutex::new(Vec::new()),
            leader: tokio::sync::Mutex::new(()),
        }
    }
}

impl<I, O> GroupCommit<I, O>
where
    I: Clone + Send + 'static,
    O: Send + 'static,
{
    /// Holds the next commit back while the guard lives: entries submitted
    /// meanwhile queue up and go together after it, [`MAX_BATCH`] a
    /// transaction.
    pub(super) async fn hold(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.leader.lock().await
    }

    /// Commits `item`, batched with whatever else is waiting. `commit`
    /// writes a batch in one transaction and answers each entry in order.
    pub(super) async fn submit<F, Fut>(&self, item: I, commit: F) -> Result<O, StoreError>
    where
        F: Fn(Vec<I>) -> Fut,
        Fut: Future<Output = Result<Vec<O>, StoreError>> + Send + 'static,
    {
        let (tx, mut rx) = oneshot::channel();
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((item.clone(), tx));
        loop {
            let leader = self.leader.lock().await;
            // A previous leader may have committed us while we waited.
            match rx.try_recv() {
                Ok(Some(done)) => return Ok(done),
                Ok(None) | Err(oneshot::error::TryRecvError::Closed) => break,
                Err(oneshot::error::TryRecvError::Empty) => {}
            }
            let batch: Vec<Waiting<I, O>> = {
                let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
                let take = pending.len().min(MAX_BATCH);
                pending.drain(..take).collect()
            };
            if batch.is_empty() {
                // A leader's task holds ours and will answer.
                drop(leader);
                match rx.await {
                    Ok(Some(done)) => return Ok(done),
                    _ => break,
                }
            }
            // In a task of its own: a leader whose caller goes away (an HTTP
            // client hanging up) must still commit or fail the whole batch
            // and answer everyone in it.
            let (items, replies): (Vec<I>, Vec<_>) = batch.into_iter().unzip();
            let size = items.len();
            let writing = commit(items);
            let batch_done = tokio::spawn(async move {
                match writing.await {
                    Ok(results) => {
                        for (reply, done) in replies.into_iter().zip(results) {
                            let _ = reply.send(Some(done));
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, entries = size, "a batched commit failed; committing one by one");
                        for reply in replies {
                            let _ = reply.send(None);
                        }
                    }
                }
            });
            let _ = batch_done.await;
            drop(leader);
            if let Ok(answer) = rx.try_recv() {
                match answer {
                    Some(done) => return Ok(done),
                    None => break,
                }
            }
        }
        // The batch failed (or its leader went away): on our own, with our own error.
        commit(vec![item])
            .await?
            .pop()
            .ok_or_else(|| StoreError::Conflict("a commit answered nothing".to_string()))
    }
}

/// Admissions of unscheduled fires.
pub(super) type AdmitQueue = GroupCommit<(Admission, Vec<RoutineRun>), Admitted>;

impl AdmitQueue {
    /// Admits one fire, batched with whatever else is waiting.
    pub(super) async fn admit(
        &self,
        store: &Store,
        admission: Admission,
        runs: Vec<RoutineRun>,
    ) -> Result<Admitted, StoreError> {
        self.submit((admission, runs), |fires| {
            let store = store.clone();
            async move { store.admit_runs(&fires).await }
        })
        .await
    }
}

/// Ends of runs, each with its notification.
pub(super) type FinishQueue = GroupCommit<FinishRun, Finished>;

impl FinishQueue {
    /// Ends one run (and records its notification), batched with whatever
    /// else is waiting; what ending it did.
    pub(super) async fn finish(
        &self,
        store: &Store,
        run: FinishRun,
    ) -> Result<Finished, StoreError> {
        self.submit(run, |batch| {
            let store = store.clone();
            async move { store.finish_runs(&batch).await }
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    /// Entries submitted while the queue is held wait, then go together in
    /// one commit once it is let go.
    #[tokio::test]
    async fn a_held_queue_commits_what_waited_in_one_batch_after() {
        let queue: Arc<GroupCommit<u32, u32>> = Arc::default();
        let batches: Arc<Mutex<Vec<Vec<u32>>>> = Arc::default();
        let held = queue.hold().await;
        let mut submitted = Vec::new();
        for item in 0..5 {
            let (queue, batches) = (queue.clone(), batches.clone());
            submitted.push(tokio::spawn(async move {
                queue
                    .submit(item, move |items: Vec<u32>| {
                        let batches = batches.clone();
                        async move {
                            batches.lock().unwrap().push(items.clone());
                            Ok(items.into_iter().map(|i| i * 10).collect())
                        }
                    })
                    .await
            }));
        }
        // Every submitter has queued its entry and waits for the leader.
        while queue.pending.lock().unwrap().len() < 5 {
            tokio::task::yield_now().await;
        }
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(
            batches.lock().unwrap().is_empty(),
            "nothing committed while held"
        );
        drop(held);
        for (item, task) in (0..5).zip(submitted) {
            assert_eq!(task.await.unwrap().unwrap(), item * 10);
        }
        assert_eq!(*batches.lock().unwrap(), vec![vec![0, 1, 2, 3, 4]]);
    }
}
