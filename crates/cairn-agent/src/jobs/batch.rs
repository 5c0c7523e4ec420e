//! Subtasks: [`JobScheduler::spawn_batch`] runs jobs in parallel on behalf
//! of a parent and returns their results in the order they were given.

use std::sync::Arc;

use cairn_core::job::JobRecord;
use tokio::sync::oneshot;
use uuid::Uuid;

use super::scheduler::{Inner, Waiter, lock};
use super::{JobError, JobScheduler, JobSpec};

impl JobScheduler {
    /// Runs subtasks of `parent` in parallel (within the global limit) and
    /// returns their final records in the order given. While a parent running
    /// here waits, its slot is lent to its subtasks (so a full scheduler
    /// cannot deadlock on parents waiting for children), and cancelling the
    /// parent cancels them.
    pub async fn spawn_batch(
        &self,
        parent: Uuid,
        specs: Vec<JobSpec>,
    ) -> Result<Vec<JobRecord>, JobError> {
        for spec in &specs {
            spec.validate()?;
        }
        let parent_cancel = {
            let mut slots = lock(&self.inner.slots);
            let parent_of = slots.running.get_mut(&parent).map(|running| {
                running.lending = true;
                (
                    running.shared.cancel.clone(),
                    running.shared.allowed_tools.clone(),
                )
            });
            self.inner.pump(&mut slots);
            parent_of
        };
        // A subtask may approve what its parent may, no more and no less.
        let (parent_cancel, parent_allowed) = match parent_cancel {
            Some((cancel, allowed)) => (Some(cancel), allowed),
            None => (None, None),
        };
        let mut lend = Lend {
            inner: &self.inner,
            parent,
            armed: parent_cancel.is_some(),
        };
        if parent_cancel.is_none() && self.inner.store.get_job(parent).await?.is_none() {
            return Err(JobError::NotFound(parent));
        }
        let mut handles = Vec::with_capacity(specs.len());
        for mut spec in specs {
            if parent_allowed.is_some() {
                spec.allowed_tools.clone_from(&parent_allowed);
            }
            match self
                .enqueue(spec, Some(parent), parent_cancel.clone())
                .await
            {
                Ok(handle) => handles.push(handle),
                Err(error) => {
                    for handle in &handles {
                        let _ = self.cancel(handle.id()).await;
                    }
                    return Err(error);
                }
            }
        }
        let mut results = Vec::with_capacity(handles.len());
        for handle in handles {
            results.push(handle.wait().await?);
        }
        lend.reclaim().await;
        Ok(results)
    }
}

/// A parent's slot lent to its subtasks; taken back when they are done.
struct Lend<'a> {
    inner: &'a Arc<Inner>,
    parent: Uuid,
    armed: bool,
}

impl Lend<'_> {
    /// Takes the slot back, waiting at the head of the queue if all are busy.
    async fn reclaim(&mut self) {
        if !self.armed {
            return;
        }
        self.armed = false;
        let waiting = {
            let mut slots = lock(&self.inner.slots);
            let free = slots.busy() < self.inner.config.max_parallel_jobs;
            match slots.running.get_mut(&self.parent) {
                Some(running) if free => {
                    running.lending = false;
                    None
                }
                Some(_) => {
                    let (tx, rx) = oneshot::channel();
                    let parent = self.parent;
                    slots.queue.push_front(Waiter::Resume { parent, tx });
                    Some(rx)
                }
                None => None,
            }
        };
        if let Some(rx) = waiting {
            let _ = rx.await;
        }
    }
}

impl Drop for Lend<'_> {
    fn drop(&mut self) {
        // Abandoned (the parent was cancelled mid-wait): take the slot back at
        // once; the parent is about to end and free it anyway.
        if self.armed
            && let Some(running) = lock(&self.inner.slots).running.get_mut(&self.parent)
        {
            running.lending = false;
        }
    }
}
