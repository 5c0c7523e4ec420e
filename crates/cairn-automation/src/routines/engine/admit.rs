//! Group commit for unscheduled fires: fires that arrive while another
//! admission transaction runs are admitted together in the next one.
//!
//! Each fire is still checked against its guardrails one after another
//! inside that transaction (`Store::admit_runs` evaluates them in order, so
//! a later fire sees the runs recorded by an earlier one: dedup, cooldown
//! and concurrency hold exactly as with one transaction per fire), and a
//! caller hears its answer only after the commit, so a fire acknowledged
//! has its run recorded. Under load this turns one write transaction per
//! webhook into one per burst.

use std::sync::Mutex;

use cairn_core::routine::RoutineRun;
use cairn_store::{Admission, Admitted, Store, StoreError};
use tokio::sync::oneshot;

/// Fires admitted per transaction at most (keeps one transaction short).
const MAX_BATCH: usize = 256;

/// A fire waiting for its admission; `None` means "the batch failed,
/// admit yourself" so every caller gets its own precise error.
type Waiting = (
    Admission,
    Vec<RoutineRun>,
    oneshot::Sender<Option<Admitted>>,
);

/// The queue and the right to run the next admission transaction.
#[derive(Default)]
pub(super) struct AdmitQueue {
    pending: Mutex<Vec<Waiting>>,
    leader: tokio::sync::Mutex<()>,
}

impl AdmitQueue {
    /// Admits one fire, batched with whatever else is waiting.
    pub(super) async fn admit(
        &self,
        store: &Store,
        admission: Admission,
        runs: Vec<RoutineRun>,
    ) -> Result<Admitted, StoreError> {
        let (tx, mut rx) = oneshot::channel();
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((admission.clone(), runs.clone(), tx));
        loop {
            let leader = self.leader.lock().await;
            // A previous leader may have admitted us while we waited.
            match rx.try_recv() {
                Ok(Some(admitted)) => return Ok(admitted),
                Ok(None) | Err(oneshot::error::TryRecvError::Closed) => break,
                Err(oneshot::error::TryRecvError::Empty) => {}
            }
            let batch: Vec<Waiting> = {
                let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
                let take = pending.len().min(MAX_BATCH);
                pending.drain(..take).collect()
            };
            if batch.is_empty() {
                // A leader's task holds ours and will answer.
                drop(leader);
                match rx.await {
                    Ok(Some(admitted)) => return Ok(admitted),
                    _ => break,
                }
            }
            // In a task of its own: a leader whose caller goes away (an HTTP
            // client hanging up) must still commit or fail the whole batch
            // and answer everyone in it.
            let store = store.clone();
            let batch_done = tokio::spawn(async move {
                let fires: Vec<(Admission, Vec<RoutineRun>)> = batch
                    .iter()
                    .map(|(a, r, _)| (a.clone(), r.clone()))
                    .collect();
                match store.admit_runs(&fires).await {
                    Ok(results) => {
                        for ((_, _, reply), admitted) in batch.into_iter().zip(results) {
                            let _ = reply.send(Some(admitted));
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, fires = batch.len(), "a batched admission failed; admitting one by one");
                        for (_, _, reply) in batch {
                            let _ = reply.send(None);
                        }
                    }
                }
            });
            let _ = batch_done.await;
            drop(leader);
            if let Ok(answer) = rx.try_recv() {
                match answer {
                    Some(admitted) => return Ok(admitted),
                    None => break,
                }
            }
        }
        // The batch failed (or its leader went away): on our own, with our own error.
        Ok(store
            .admit_runs(&[(admission, runs)])
            .await?
            .pop()
            .unwrap_or(Admitted::Taken))
    }
}
