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

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use cairn_core::routine::RoutineRun;
use cairn_store::{Admission, Admitted, EncodedEnd, FinishRun, Finished, Store, StoreError};
use tokio::sync::oneshot;
use uuid::Uuid;

/// Entries committed per transaction at most (keeps one transaction short).
pub(super) const MAX_BATCH: usize = 256;

/// An entry waiting for its commit; `None` means "the batch failed,
/// commit yourself" so every caller gets its own precise error.
type Waiting<I, O> = (I, oneshot::Sender<Option<O>>);

/// Entries waiting, and whether a committer task is writing them.
struct Queue<I, O> {
    waiting: Vec<Waiting<I, O>>,
    committing: bool,
}

/// The queue and the right to run the next transaction.
pub(super) struct GroupCommit<I, O> {
    queue: Arc<Mutex<Queue<I, O>>>,
    /// Held by the committer for each transaction, and by [`Self::hold`].
    turn: Arc<tokio::sync::Mutex<()>>,
    /// Told when a committer stops (see [`Self::settled`]).
    stopped: Arc<tokio::sync::Notify>,
}

impl<I, O> Default for GroupCommit<I, O> {
    fn default() -> Self {
        Self {
            queue: Arc::new(Mutex::new(Queue {
                waiting: Vec::new(),
                committing: false,
            })),
            turn: Arc::default(),
            stopped: Arc::default(),
        }
    }
}

/// Locks the queue (a panic elsewhere leaves it usable: entries are plain data).
fn lock<I, O>(queue: &Mutex<Queue<I, O>>) -> std::sync::MutexGuard<'_, Queue<I, O>> {
    queue.lock().unwrap_or_else(|p| p.into_inner())
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
        self.turn.lock().await
    }

    /// Waits until no committer is at work: what was submitted is written,
    /// the empty batch closing the busy spell included (its put-off
    /// prunes), which runs after the last entry has its answer.
    pub(super) async fn settled(&self) {
        loop {
            let stopped = self.stopped.notified();
            tokio::pin!(stopped);
            // Listening before looking, so a stop in between is heard.
            stopped.as_mut().enable();
            if !lock(&self.queue).committing {
                return;
            }
            stopped.await;
        }
    }

    /// Commits `item`, batched with whatever else is waiting. `commit`
    /// writes a batch in one transaction and answers each entry in order;
    /// it is told whether more entries wait to go right after this batch.
    /// When the queue has emptied, the committer calls it once more with
    /// no entries before it stops, for what its batches put off.
    pub(super) async fn submit<F, Fut>(&self, item: I, commit: F) -> Result<O, StoreError>
    where
        F: Fn(Vec<I>, bool) -> Fut + Clone + Send + 'static,
        Fut: Future<Output = Result<Vec<O>, StoreError>> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let start = {
            let mut queue = lock(&self.queue);
            queue.waiting.push((item.clone(), tx));
            !std::mem::replace(&mut queue.committing, true)
        };
        if start {
            // One task writes batch after batch while entries wait: the next
            // transaction begins as soon as one is written, not when a
            // waiting caller gets its turn on a runtime busy with the runs
            // it just answered. A task of its own also means a caller that
            // goes away (an HTTP client hanging up) never strands a batch.
            // On the store's thread: a transaction is a dozen statements,
            // each answer taken up at once there, where on the runtime it
            // waited behind the requests and runs ready meanwhile.
            cairn_store::spawn_on_store_thread(commit_all(
                self.queue.clone(),
                self.turn.clone(),
                self.stopped.clone(),
                commit.clone(),
            ));
        }
        if let Ok(Some(done)) = cairn_store::as_store_call(rx).await {
            return Ok(done);
        }
        // The batch failed (or its committer went away): on our own, with
        // our own error. Boxed: every entry's future would otherwise carry
        // room for a whole transaction it nearly never makes.
        Box::pin(commit(vec![item], false))
            .await?
            .pop()
            .ok_or_else(|| StoreError::Conflict("a commit answered nothing".to_string()))
    }
}

/// The committer: takes up to [`MAX_BATCH`] waiting entries, writes them in
/// one transaction and answers each, until none waits.
async fn commit_all<I, O, F, Fut>(
    queue: Arc<Mutex<Queue<I, O>>>,
    turn: Arc<tokio::sync::Mutex<()>>,
    stopped: Arc<tokio::sync::Notify>,
    commit: F,
) where
    F: Fn(Vec<I>, bool) -> Fut,
    Fut: Future<Output = Result<Vec<O>, StoreError>>,
{
    let mut out = CountedOut {
        queue: &queue,
        stopped: &stopped,
        done: false,
    };
    // Whether the empty batch closing a busy spell has been committed.
    let mut closed = false;
    loop {
        let _turn = turn.lock().await;
        let (batch, more): (Vec<Waiting<I, O>>, bool) = {
            let mut queue = lock(&queue);
            if queue.waiting.is_empty() && closed {
                // Counted out under the lock that pushes: an entry pushed
                // after this starts a committer of its own.
                queue.committing = false;
                out.done = true;
                stopped.notify_waiters();
                return;
            }
            let take = queue.waiting.len().min(MAX_BATCH);
            let batch = queue.waiting.drain(..take).collect();
            (batch, !queue.waiting.is_empty())
        };
        closed = batch.is_empty();
        let (items, replies): (Vec<I>, Vec<_>) = batch.into_iter().unzip();
        let size = items.len();
        match commit(items, more).await {
            Ok(results) => {
                for (reply, done) in replies.into_iter().zip(results) {
                    let _ = reply.send(Some(done));
                }
            }
            Err(e) if size == 0 => {
                tracing::warn!(error = %e, "the commit closing a busy spell failed; what it carried waits for the next");
            }
            Err(e) => {
                tracing::warn!(error = %e, entries = size, "a batched commit failed; committing one by one");
                for reply in replies {
                    let _ = reply.send(None);
                }
            }
        }
    }
}

/// Counts a committer out however its task ends: one that panicked in a
/// commit must not leave entries waiting for it, nor the next ones
/// believing a committer is at work.
struct CountedOut<'a, I, O> {
    queue: &'a Mutex<Queue<I, O>>,
    stopped: &'a tokio::sync::Notify,
    /// Counted out the ordinary way (nothing waited).
    done: bool,
}

impl<I, O> Drop for CountedOut<'_, I, O> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let mut queue = lock(self.queue);
        queue.committing = false;
        // Their callers hear "on your own" and commit themselves.
        queue.waiting.clear();
        self.stopped.notify_waiters();
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
        let store = store.clone();
        self.submit((admission, runs), move |fires, _more| {
            let store = store.clone();
            async move {
                if fires.is_empty() {
                    return Ok(Vec::new());
                }
                store.admit_runs(&fires).await
            }
        })
        .await
    }
}

/// Ends of runs, each with its notification, and the retention prunes
/// they put off.
#[derive(Default)]
pub(super) struct FinishQueue {
    commits: GroupCommit<EncodedEnd, Finished>,
    /// Routines whose runs ended in a burst's batch (a large one, or one
    /// with more waiting behind it), with the runs they keep: pruned by
    /// the next small batch or the empty one closing the busy spell. A
    /// burst's ends are written without the prune's deletes (a routine at
    /// its retention deletes one old run an end, spread over the table and
    /// its indexes), which come after its last end.
    put_off: Arc<Mutex<HashMap<Uuid, u32>>>,
}

/// A batch this large is a burst's: its prunes are put off.
const PUT_OFF_FROM: usize = MAX_BATCH / 2;

impl FinishQueue {
    /// Holds the next commit back while the guard lives (see [`GroupCommit::hold`]).
    pub(super) async fn hold(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.commits.hold().await
    }

    /// Waits until every end is written and what they put off is pruned
    /// (see [`GroupCommit::settled`]).
    pub(super) async fn settled(&self) {
        self.commits.settled().await;
    }

    /// Ends one run (and records its notification), batched with whatever
    /// else is waiting; what ending it did. Its values are encoded here, on
    /// the run's own task, not by the one writer (see [`EncodedEnd`]).
    pub(super) async fn finish(
        &self,
        store: &Store,
        run: FinishRun,
    ) -> Result<Finished, StoreError> {
        let run = EncodedEnd::new(run)?;
        let store = store.clone();
        let put_off = self.put_off.clone();
        self.commits
            .submit(run, move |batch, more| {
                let (store, put_off) = (store.clone(), put_off.clone());
                async move { finish_batch(&store, &put_off, batch, more).await }
            })
            .await
    }
}

/// One batch of ends: a burst's puts its prunes off; any other does its
/// own and those put off (given back to the next one if it fails), the
/// empty batch closing a busy spell only those.
async fn finish_batch(
    store: &Store,
    put_off: &Mutex<HashMap<Uuid, u32>>,
    mut batch: Vec<EncodedEnd>,
    more: bool,
) -> Result<Vec<Finished>, StoreError> {
    let lock = || put_off.lock().unwrap_or_else(|p| p.into_inner());
    if more || batch.len() >= PUT_OFF_FROM {
        {
            let mut put_off = lock();
            for end in &mut batch {
                if let Some(keep) = end.take_retain() {
                    put_off.insert(end.end().routine_id, keep);
                }
            }
        }
        return store.finish_encoded(&batch, &[]).await;
    }
    let prune: Vec<(Uuid, u32)> = {
        let mut put_off = lock();
        put_off.drain().collect()
    };
    if batch.is_empty() && prune.is_empty() {
        return Ok(Vec::new());
    }
    let done = store.finish_encoded(&batch, &prune).await;
    if done.is_err() {
        let mut put_off = lock();
        for (routine, keep) in prune {
            put_off.entry(routine).or_insert(keep);
        }
    }
    done
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
                    .submit(item, move |items: Vec<u32>, _more| {
                        let batches = batches.clone();
                        async move {
                            if !items.is_empty() {
                                batches.lock().unwrap().push(items.clone());
                            }
                            Ok(items.into_iter().map(|i| i * 10).collect())
                        }
                    })
                    .await
            }));
        }
        // Every submitter has queued its entry and waits for the leader.
        while lock(&queue.queue).waiting.len() < 5 {
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

    /// An entry has its answer before the empty batch closing the busy
    /// spell runs; `settled` waits for that batch too.
    #[tokio::test]
    async fn settled_waits_for_the_batch_closing_a_busy_spell() {
        use futures::FutureExt;
        let queue: Arc<GroupCommit<u32, u32>> = Arc::default();
        let gate = Arc::new(tokio::sync::Semaphore::new(0));
        let closed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (g, c) = (gate.clone(), closed.clone());
        let answer = queue
            .submit(7, move |items: Vec<u32>, _more| {
                let (gate, closed) = (g.clone(), c.clone());
                async move {
                    if items.is_empty() {
                        // The closing batch waits for the test's word.
                        let _permit = gate.acquire().await;
                        closed.store(true, std::sync::atomic::Ordering::SeqCst);
                    }
                    Ok(items)
                }
            })
            .await
            .unwrap();
        assert_eq!(answer, 7);
        assert!(
            queue.settled().now_or_never().is_none(),
            "the closing batch has not run"
        );
        gate.add_permits(1);
        queue.settled().await;
        assert!(closed.load(std::sync::atomic::Ordering::SeqCst));
    }

    /// A batch with entries left behind it is told so; the one that
    /// empties the queue is told none wait, and an empty one follows.
    #[tokio::test]
    async fn each_batch_knows_whether_more_wait_behind_it() {
        let queue: Arc<GroupCommit<usize, usize>> = Arc::default();
        let batches: Arc<Mutex<Vec<(usize, bool)>>> = Arc::default();
        let held = queue.hold().await;
        let total = MAX_BATCH + 44;
        let mut submitted = Vec::new();
        for item in 0..total {
            let (queue, batches) = (queue.clone(), batches.clone());
            submitted.push(tokio::spawn(async move {
                queue
                    .submit(item, move |items: Vec<usize>, more| {
                        let batches = batches.clone();
                        async move {
                            batches.lock().unwrap().push((items.len(), more));
                            Ok(items)
                        }
                    })
                    .await
            }));
        }
        while lock(&queue.queue).waiting.len() < total {
            tokio::task::yield_now().await;
        }
        drop(held);
        for (item, task) in (0..total).zip(submitted) {
            assert_eq!(task.await.unwrap().unwrap(), item);
        }
        // And the empty one closing the busy spell.
        assert_eq!(
            *batches.lock().unwrap(),
            vec![(MAX_BATCH, true), (44, false), (0, false)]
        );
    }

    /// A commit that panics fails its batch, whose callers commit on their
    /// own; the queue goes on committing what comes after.
    #[tokio::test]
    async fn a_panicking_commit_leaves_the_queue_working() {
        let queue: Arc<GroupCommit<u32, u32>> = Arc::default();
        let panicked = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let commit = move |items: Vec<u32>, _more: bool| {
            let panicked = panicked.clone();
            async move {
                if !panicked.swap(true, std::sync::atomic::Ordering::SeqCst) {
                    panic!("the first commit panics");
                }
                Ok(items.into_iter().map(|i| i * 10).collect())
            }
        };
        let within = std::time::Duration::from_secs(10);
        let first = tokio::time::timeout(within, queue.submit(1, commit.clone())).await;
        assert_eq!(first.expect("answered").unwrap(), 10);
        let second = tokio::time::timeout(within, queue.submit(2, commit)).await;
        assert_eq!(second.expect("a committer started again").unwrap(), 20);
    }
}
