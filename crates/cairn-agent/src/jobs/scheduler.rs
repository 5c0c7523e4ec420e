//! [`JobScheduler`]: a FIFO queue in front of at most `max_parallel_jobs`
//! workers, with cancellation, leases and stuck detection; children
//! (sub-agents, subtasks) are held here too, outside the slots.
//!
//! One mutex guards the queue and the running set; checking for a free
//! slot, moving a job into the running set and spawning its worker happen
//! under it in one step, so two submissions can never both take the last slot.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use cairn_core::clock::Clock;
use cairn_core::job::{CancelOutcome, JobOutcome, JobRecord, JobState};
use cairn_llm::LlmProvider;
use cairn_store::Store;
use chrono::{DateTime, Utc};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::worker::{self, JobShared, StopReason};
use super::{JobError, JobSpec, JobsConfig, RefusedTool};
use crate::hooks::HookRegistry;
use crate::repair::{InboxNotifier, RepairNotifier};
use crate::runner::{Approver, DenyAll, ToolRunner};
use crate::tools::ToolContext;

/// Everything a worker needs; shared by the scheduler's handles and tasks.
pub(super) struct Inner {
    pub(super) store: Store,
    pub(super) provider: Arc<dyn LlmProvider>,
    pub(super) runner: Arc<ToolRunner>,
    pub(super) hooks: Arc<HookRegistry>,
    pub(super) approver: Arc<dyn Approver>,
    pub(super) ctx: ToolContext,
    pub(super) clock: Arc<dyn Clock>,
    pub(super) config: JobsConfig,
    pub(super) shutdown: CancellationToken,
    pub(super) slots: Mutex<Slots>,
    /// Outcomes the store could not take yet; retried with each lease renewal.
    pub(super) unfinished: Mutex<Vec<(Uuid, JobOutcome)>>,
    /// Every job this scheduler ran to its end (for the `job.finished` event).
    pub(super) finished: tokio::sync::broadcast::Sender<JobRecord>,
    /// Signs of progress of running jobs (for the gateway's event stream).
    pub(super) progress: tokio::sync::broadcast::Sender<super::JobProgress>,
    /// Tells people about jobs self-repair gave up on.
    pub(super) notifier: Arc<dyn RepairNotifier>,
    pub(super) maintenance: Mutex<Option<JoinHandle<()>>>,
}

pub(super) struct Queued {
    /// Boxed: records are large and the queue also holds small resume tickets.
    pub(super) record: Box<JobRecord>,
    pub(super) shared: Arc<JobShared>,
}

pub(super) struct Running {
    pub(super) shared: Arc<JobShared>,
    /// The job whose turn started this child ([`JobScheduler::run_child`]);
    /// `None` for a job, and for a child of a turn that is not a job's.
    pub(super) parent: Option<Uuid>,
    /// A child: it runs in its parent's task, not in a slot.
    pub(super) child: bool,
}

#[derive(Default)]
pub(super) struct Slots {
    pub(super) queue: VecDeque<Queued>,
    pub(super) running: HashMap<Uuid, Running>,
}

impl Slots {
    /// Slots taken: running jobs, children aside.
    pub(super) fn busy(&self) -> usize {
        self.running.values().filter(|r| !r.child).count()
    }

    /// Jobs and children that are not to be called stuck: children (their
    /// parent's turn waits for them, under their own time limit) and
    /// whatever waits for a running child.
    pub(super) fn waiting(&self) -> std::collections::HashSet<Uuid> {
        self.running
            .iter()
            .filter(|(_, r)| r.child)
            .flat_map(|(id, r)| [Some(*id), r.parent])
            .flatten()
            .collect()
    }
}

pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section leaves the data consistent, so a poisoned lock is still usable.
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl Inner {
    pub(super) fn lease(&self) -> chrono::Duration {
        chrono::Duration::from_std(self.config.lease).unwrap_or(chrono::Duration::seconds(90))
    }

    pub(super) fn retry_finish(&self, id: Uuid, outcome: JobOutcome) {
        lock(&self.unfinished).push((id, outcome));
    }

    /// Starts queued work while slots are free. Called with the lock held.
    pub(super) fn pump(self: &Arc<Self>, slots: &mut Slots) {
        while slots.busy() < self.config.max_parallel_jobs && !self.shutdown.is_cancelled() {
            match slots.queue.pop_front() {
                None => break,
                Some(Queued { record, shared }) => {
                    let id = record.id;
                    slots.running.insert(
                        id,
                        Running {
                            shared: shared.clone(),
                            parent: None,
                            child: false,
                        },
                    );
                    let inner = Arc::clone(self);
                    tokio::spawn(async move {
                        let record = worker::run(&inner, *record, &shared).await;
                        inner.release(id);
                        shared.done.send_replace(Some(record));
                    });
                }
            }
        }
    }

    pub(super) fn release(self: &Arc<Self>, id: Uuid) {
        let mut slots = lock(&self.slots);
        slots.running.remove(&id);
        self.pump(&mut slots);
    }

    /// A new job's row for `spec`, made `now` and leased to this scheduler
    /// (a queued job's and a sub-agent's alike).
    pub(super) fn record_of(&self, spec: &JobSpec, now: DateTime<Utc>) -> JobRecord {
        let mut record = JobRecord::new(
            Uuid::now_v7(),
            spec.title.clone(),
            spec.description.clone(),
            spec.owner.clone(),
            now,
        );
        record.origin = spec.origin.clone();
        record.max_iterations = spec
            .max_iterations
            .unwrap_or(self.config.default_max_iterations);
        record.timeout = spec.timeout.unwrap_or(self.config.default_timeout);
        record.lease_owner = Some(self.config.lease_owner.clone());
        record.lease_until = Some(self.lease_until());
        record
    }

    pub(super) fn lease_until(&self) -> DateTime<Utc> {
        self.clock.now() + self.lease()
    }
}

/// A submitted job; await [`JobHandle::wait`] for its final record.
#[derive(Debug, Clone)]
pub struct JobHandle {
    id: Uuid,
    done: watch::Receiver<Option<JobRecord>>,
    refused: Arc<Mutex<Vec<RefusedTool>>>,
}

impl JobHandle {
    pub(super) fn new(
        id: Uuid,
        done: watch::Receiver<Option<JobRecord>>,
        refused: Arc<Mutex<Vec<RefusedTool>>>,
    ) -> Self {
        Self { id, done, refused }
    }

    /// The job's id.
    pub fn id(&self) -> Uuid {
        self.id
    }

    /// The tool calls the job could not make (declined for want of an
    /// approval, or denied by the policy), once each tool, in order; complete
    /// once [`JobHandle::wait`] has returned. Not stored: only the process
    /// that ran the job knows them.
    pub fn refused_tools(&self) -> Vec<RefusedTool> {
        lock(&self.refused).clone()
    }

    /// Waits until the job has ended and returns its final record.
    pub async fn wait(mut self) -> Result<JobRecord, JobError> {
        match self.done.wait_for(Option::is_some).await {
            Ok(record) => record.clone().ok_or(JobError::ShuttingDown),
            Err(_) => Err(JobError::ShuttingDown),
        }
    }
}

/// Builds a [`JobScheduler`]; see [`JobScheduler::builder`].
pub struct JobSchedulerBuilder {
    store: Store,
    provider: Arc<dyn LlmProvider>,
    runner: Arc<ToolRunner>,
    ctx: ToolContext,
    hooks: Arc<HookRegistry>,
    approver: Arc<dyn Approver>,
    config: JobsConfig,
    notifier: Option<Arc<dyn RepairNotifier>>,
}

impl JobSchedulerBuilder {
    /// Where self-repair's notifications go (default: the store's inbox).
    #[must_use]
    pub fn notifier(mut self, notifier: Arc<dyn RepairNotifier>) -> Self {
        self.notifier = Some(notifier);
        self
    }

    /// Limits and timings (default: [`JobsConfig::default`]).
    #[must_use]
    pub fn config(mut self, config: JobsConfig) -> Self {
        self.config = config;
        self
    }

    /// Hooks every job's loop runs (default: none).
    #[must_use]
    pub fn hooks(mut self, hooks: Arc<HookRegistry>) -> Self {
        self.hooks = hooks;
        self
    }

    /// Answers the policy's "ask" for jobs (default: [`DenyAll`]).
    #[must_use]
    pub fn approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.approver = approver;
        self
    }

    /// The scheduler; call [`JobScheduler::start`] before relying on leases and cross-process cancel.
    pub fn build(self) -> JobScheduler {
        let clock = self.ctx.clock.clone();
        let notifier = self.notifier.unwrap_or_else(|| {
            Arc::new(InboxNotifier::new(self.store.clone(), Arc::clone(&clock)))
        });
        JobScheduler {
            inner: Arc::new(Inner {
                notifier,
                store: self.store,
                provider: self.provider,
                runner: self.runner,
                hooks: self.hooks,
                approver: self.approver,
                ctx: self.ctx,
                clock,
                config: self.config,
                shutdown: CancellationToken::new(),
                slots: Mutex::new(Slots::default()),
                unfinished: Mutex::new(Vec::new()),
                finished: tokio::sync::broadcast::channel(64).0,
                progress: tokio::sync::broadcast::channel(256).0,
                maintenance: Mutex::new(None),
            }),
        }
    }
}

/// Runs full jobs: queue, concurrency limit, time limits, cancellation, subtasks.
#[derive(Clone)]
pub struct JobScheduler {
    pub(super) inner: Arc<Inner>,
}

impl std::fmt::Debug for JobScheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobScheduler")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

impl JobScheduler {
    /// Jobs this scheduler runs to their end from now on, as they end.
    pub fn subscribe_finished(&self) -> tokio::sync::broadcast::Receiver<JobRecord> {
        self.inner.finished.subscribe()
    }

    /// Progress of running jobs from now on: each model call and tool call.
    /// A slow receiver misses some (they are signs of life, not a record).
    pub fn subscribe_progress(&self) -> tokio::sync::broadcast::Receiver<super::JobProgress> {
        self.inner.progress.subscribe()
    }

    /// A builder over a store, the provider jobs call (wrapped by the cost
    /// guard in production), the tool runner (registry + policy) and the base
    /// tool context (workspace, limits, time zone, clock).
    pub fn builder(
        store: Store,
        provider: Arc<dyn LlmProvider>,
        runner: Arc<ToolRunner>,
        ctx: ToolContext,
    ) -> JobSchedulerBuilder {
        JobSchedulerBuilder {
            store,
            provider,
            runner,
            ctx,
            hooks: Arc::new(HookRegistry::new()),
            approver: Arc::new(DenyAll),
            config: JobsConfig::default(),
            notifier: None,
        }
    }

    /// The scheduler's limits and timings.
    pub fn config(&self) -> &JobsConfig {
        &self.inner.config
    }

    /// The store jobs are kept in.
    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    /// Fails jobs orphaned by dead processes, then starts the background
    /// maintenance (cancel polling, lease renewal, reaping). Returns the reaped ids.
    pub async fn start(&self) -> Result<Vec<Uuid>, JobError> {
        let reaped = self
            .inner
            .store
            .reap_orphan_jobs(self.inner.clock.now())
            .await?;
        if !reaped.is_empty() {
            tracing::warn!(
                count = reaped.len(),
                "failed jobs left running by a stopped process"
            );
        }
        let mut handle = lock(&self.inner.maintenance);
        if handle.is_none() {
            *handle = Some(tokio::spawn(super::upkeep::maintain(Arc::clone(
                &self.inner,
            ))));
        }
        Ok(reaped)
    }

    /// Persists a job as pending and runs it when a slot is free (first in, first out).
    pub async fn submit(&self, spec: JobSpec) -> Result<JobHandle, JobError> {
        spec.validate()?;
        self.enqueue(spec).await
    }

    async fn enqueue(&self, spec: JobSpec) -> Result<JobHandle, JobError> {
        let inner = &self.inner;
        if inner.shutdown.is_cancelled() {
            return Err(JobError::ShuttingDown);
        }
        let now = inner.clock.now();
        let mut record = inner.record_of(&spec, now);
        record.use_planning = spec.use_planning;
        inner.store.create_job(&record).await?;

        let cancel = inner.shutdown.child_token();
        let shared = Arc::new(JobShared::new(cancel, now, spec.allowed_tools));
        let handle = shared.handle(record.id);
        let mut slots = lock(&inner.slots);
        if inner.shutdown.is_cancelled() {
            drop(slots);
            let outcome = shutdown_outcome(inner);
            inner.store.finish_job(record.id, &outcome).await?;
            return Err(JobError::ShuttingDown);
        }
        slots.queue.push_back(Queued {
            record: Box::new(record),
            shared,
        });
        inner.pump(&mut slots);
        Ok(handle)
    }

    /// Cancels a job: a queued one at once, a running one here immediately
    /// (its token fires, tools stop), one held by another process through
    /// the store's request flag.
    pub async fn cancel(&self, id: Uuid) -> Result<CancelOutcome, JobError> {
        let inner = &self.inner;
        let queued = {
            let mut slots = lock(&inner.slots);
            if let Some(running) = slots.running.get(&id) {
                running.shared.stop(StopReason::User);
                return Ok(CancelOutcome::Requested);
            }
            let position = slots.queue.iter().position(|q| q.record.id == id);
            position.and_then(|p| slots.queue.remove(p))
        };
        let outcome = match inner.store.request_job_cancel(id, inner.clock.now()).await {
            Ok(outcome) => outcome,
            Err(cairn_store::StoreError::NotFound { .. }) => return Err(JobError::NotFound(id)),
            Err(error) => {
                if let Some(waiter) = queued {
                    // Not cancelled after all: back to its place at the head.
                    lock(&inner.slots).queue.push_front(waiter);
                }
                return Err(error.into());
            }
        };
        if let Some(Queued { record, shared }) = queued {
            let stored = inner.store.get_job(id).await.ok().flatten();
            shared.done.send_replace(Some(stored.unwrap_or(*record)));
        }
        Ok(outcome)
    }

    /// Waits for a job to end and returns its final record (from the store if
    /// it is not held here).
    pub async fn wait(&self, id: Uuid) -> Result<JobRecord, JobError> {
        let handle = {
            let slots = lock(&self.inner.slots);
            slots
                .running
                .get(&id)
                .map(|r| r.shared.handle(id))
                .or_else(|| {
                    slots
                        .queue
                        .iter()
                        .find(|q| q.record.id == id)
                        .map(|q| q.shared.handle(id))
                })
        };
        match handle {
            Some(handle) => handle.wait().await,
            None => self.get(id).await?.ok_or(JobError::NotFound(id)),
        }
    }

    /// A job's record as stored (for `/status`).
    pub async fn get(&self, id: Uuid) -> Result<Option<JobRecord>, JobError> {
        Ok(self.inner.store.get_job(id).await?)
    }

    /// The ids of `owner`'s jobs `digits` names (its start or end; at most 10).
    pub async fn ids_like(&self, digits: &str, owner: &str) -> Result<Vec<Uuid>, JobError> {
        Ok(self.inner.store.job_ids_like(digits, Some(owner)).await?)
    }

    /// Stored jobs matching the filter, newest first (for `/jobs`).
    pub async fn list(&self, filter: &cairn_store::JobFilter) -> Result<Vec<JobRecord>, JobError> {
        Ok(self.inner.store.list_jobs(filter).await?)
    }

    /// Ids of the jobs running here now.
    pub fn running(&self) -> Vec<Uuid> {
        lock(&self.inner.slots).running.keys().copied().collect()
    }

    /// Ids of the jobs waiting for a slot here, in the order they will start.
    pub fn queued(&self) -> Vec<Uuid> {
        lock(&self.inner.slots)
            .queue
            .iter()
            .map(|q| q.record.id)
            .collect()
    }

    /// Stops taking jobs, fails the queued ones, interrupts the running ones
    /// (they end `failed`, "interrupted") and waits for their workers.
    pub async fn shutdown(&self) {
        let inner = &self.inner;
        let (queued, running) = {
            let mut slots = lock(&inner.slots);
            let running: Vec<Arc<JobShared>> = slots
                .running
                .values()
                .map(|r| {
                    r.shared.stop(StopReason::Shutdown);
                    r.shared.clone()
                })
                .collect();
            inner.shutdown.cancel();
            (slots.queue.drain(..).collect::<Vec<_>>(), running)
        };
        for Queued { mut record, shared } in queued {
            let outcome = shutdown_outcome(inner);
            if let Err(error) = inner.store.finish_job(record.id, &outcome).await {
                tracing::warn!(job = %record.id, %error, "could not record a queued job's end");
            }
            record.state = outcome.state;
            record.error = outcome.error;
            record.completed_at = Some(outcome.completed_at);
            shared.done.send_replace(Some(*record));
        }
        for shared in running {
            let mut done = shared.done.subscribe();
            let _ = done.wait_for(Option::is_some).await;
        }
        let handle = lock(&inner.maintenance).take();
        if let Some(handle) = handle {
            let _ = handle.await;
        }
    }
}

fn shutdown_outcome(inner: &Inner) -> JobOutcome {
    JobOutcome {
        state: JobState::Failed,
        result: None,
        error: Some("interrupted: cairn shut down before the job started".to_string()),
        iterations: 0,
        input_tokens: 0,
        output_tokens: 0,
        cost_micros: 0,
        completed_at: inner.clock.now(),
    }
}
