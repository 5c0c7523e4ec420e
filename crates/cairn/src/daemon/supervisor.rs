//! The daemon's supervisor: each component runs in its own task; one that
//! returns (with or without an error) or panics is restarted after a backoff
//! that starts at [`SupervisorSettings::initial_backoff`], doubles up to
//! [`SupervisorSettings::max_backoff`] and goes back to the start once a run
//! has lasted [`SupervisorSettings::healthy_after`]. Every change is recorded
//! in the gateway's [`Components`], which `/readyz`, `/api/status` and the
//! state file all read.
//!
//! Adding a component is one call:
//! `supervisor.spawn("name", move |cancel| { let x = x.clone(); async move { x.run(cancel).await } })`;
//! its future must return soon after `cancel` fires.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use cairn_core::clock::Clock;
use cairn_gateway::{ComponentState, Components};
use futures::FutureExt;
use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How components are restarted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SupervisorSettings {
    /// The first wait before a restart.
    pub initial_backoff: Duration,
    /// The longest wait (`[daemon] restart_max_backoff_secs`).
    pub max_backoff: Duration,
    /// A run that lasts this long counts as healthy: the backoff starts over.
    pub healthy_after: Duration,
}

impl Default for SupervisorSettings {
    fn default() -> Self {
        Self {
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(300),
            healthy_after: Duration::from_secs(60),
        }
    }
}

/// What a component's body returns: `Ok` when it ended because it was asked
/// to (any other end is a failure to restart after).
pub type ComponentResult = anyhow::Result<()>;

/// Makes one run of a component, given the token that stops it.
type Factory = Arc<dyn Fn(CancellationToken) -> BoxFuture<'static, ComponentResult> + Send + Sync>;

/// Runs components and restarts them; cheap to clone.
#[derive(Clone)]
pub struct Supervisor {
    components: Arc<Components>,
    clock: Arc<dyn Clock>,
    settings: SupervisorSettings,
    cancel: CancellationToken,
    tasks: TaskTracker,
}

impl Supervisor {
    /// A supervisor recording into `components`.
    pub fn new(
        components: Arc<Components>,
        clock: Arc<dyn Clock>,
        settings: SupervisorSettings,
    ) -> Self {
        Self {
            components,
            clock,
            settings,
            cancel: CancellationToken::new(),
            tasks: TaskTracker::new(),
        }
    }

    /// The health records.
    pub fn components(&self) -> &Arc<Components> {
        &self.components
    }

    /// Cancelled when the supervisor stops its components.
    pub fn cancel_token(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// Records `name` as turned off by configuration (it is not run).
    pub fn disabled(&self, name: &str) {
        self.components
            .set(name, ComponentState::Disabled, self.clock.now(), None);
    }

    /// Records `name` as failed for good with `error` (it is not run): a
    /// component whose configuration names an unset `${VAR}`.
    pub fn unavailable(&self, name: &str, error: String) {
        self.components
            .set(name, ComponentState::Failed, self.clock.now(), Some(error));
    }

    /// Runs `run` as the component `name` until shutdown, restarting it
    /// whenever it ends or panics.
    pub fn spawn<F, Fut>(&self, name: &str, run: F)
    where
        F: Fn(CancellationToken) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ComponentResult> + Send + 'static,
    {
        drop(self.spawn_stoppable(name, run));
    }

    /// [`Supervisor::spawn`], and a handle that stops this one component
    /// alone (a reload replacing it) before the shutdown does.
    pub fn spawn_stoppable<F, Fut>(&self, name: &str, run: F) -> Stoppable
    where
        F: Fn(CancellationToken) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ComponentResult> + Send + 'static,
    {
        // Debug builds only: the binary's tests make one component panic
        // once, to see it restarted and reported.
        #[cfg(debug_assertions)]
        let panic_once = std::sync::atomic::AtomicBool::new(
            std::env::var("CAIRN_TEST_PANIC_COMPONENT").is_ok_and(|n| n == name),
        );
        let factory: Factory = Arc::new(move |cancel| {
            #[cfg(debug_assertions)]
            if panic_once.swap(false, std::sync::atomic::Ordering::SeqCst) {
                return async { panic!("CAIRN_TEST_PANIC_COMPONENT asked for a panic") }.boxed();
            }
            run(cancel).boxed()
        });
        self.components
            .set(name, ComponentState::Starting, self.clock.now(), None);
        let this = self.clone();
        let name = name.to_string();
        let cancel = self.cancel.child_token();
        let own = cancel.clone();
        let task = self
            .tasks
            .spawn(async move { this.supervise(name, factory, own).await });
        Stoppable { cancel, task }
    }

    /// Stops every component and waits up to `deadline` for them; `false`
    /// when some did not stop in time (they are left to the process's exit).
    pub async fn shutdown(&self, deadline: Duration) -> bool {
        self.cancel.cancel();
        self.tasks.close();
        tokio::time::timeout(deadline, self.tasks.wait())
            .await
            .is_ok()
    }

    /// Runs and restarts one component until `cancel` (the shutdown's, or
    /// its own [`Stoppable`]'s).
    async fn supervise(&self, name: String, factory: Factory, cancel: CancellationToken) {
        let s = &self.settings;
        let mut backoff = s.initial_backoff;
        loop {
            let now = self.clock.now();
            self.components.update(&name, now, |h| {
                h.state = ComponentState::Running;
                h.since = now;
                h.started_at = Some(now);
                h.retry_at = None;
            });
            let began = tokio::time::Instant::now();
            // Its own task, so a panic ends that task and not the supervisor.
            let mut run = tokio::spawn(factory(cancel.child_token()));
            let healthy = tokio::time::sleep(s.healthy_after);
            tokio::pin!(healthy);
            let mut was_healthy = false;
            let outcome = loop {
                tokio::select! {
                    outcome = &mut run => break outcome,
                    () = &mut healthy, if !was_healthy => {
                        was_healthy = true;
                        backoff = s.initial_backoff;
                        let now = self.clock.now();
                        self.components.update(&name, now, |h| h.last_success = Some(now));
                    }
                }
            };
            let error = match outcome {
                Ok(Ok(())) if cancel.is_cancelled() => None,
                Ok(Ok(())) => Some("it stopped on its own".to_string()),
                Ok(Err(e)) => Some(format!("{e:#}")),
                Err(e) => Some(match e.try_into_panic() {
                    Ok(payload) => format!("panicked: {}", panic_message(payload.as_ref())),
                    Err(e) => format!("its task was cancelled: {e}"),
                }),
            };
            let now = self.clock.now();
            if cancel.is_cancelled() {
                let state = if error.is_some() {
                    ComponentState::Failed
                } else {
                    ComponentState::Stopped
                };
                self.components.update(&name, now, |h| {
                    h.state = state;
                    h.since = now;
                    if error.is_some() {
                        h.last_error = error;
                    }
                });
                return;
            }
            if began.elapsed() >= s.healthy_after {
                backoff = s.initial_backoff;
            }
            let error = error.unwrap_or_default();
            tracing::error!(component = %name, error = %error, retry_in = ?backoff, "component stopped; restarting it after a backoff");
            let retry_at = now + chrono::Duration::from_std(backoff).unwrap_or_default();
            self.components.update(&name, now, |h| {
                h.state = ComponentState::BackingOff;
                h.since = now;
                h.last_error = Some(error);
                h.restarts = h.restarts.saturating_add(1);
                h.retry_at = Some(retry_at);
            });
            tokio::select! {
                () = cancel.cancelled() => {
                    let now = self.clock.now();
                    self.components.update(&name, now, |h| {
                        h.state = ComponentState::Stopped;
                        h.since = now;
                        h.retry_at = None;
                    });
                    return;
                }
                () = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(s.max_backoff);
        }
    }
}

/// Stops one component started by [`Supervisor::spawn_stoppable`].
#[derive(Debug)]
pub struct Stoppable {
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Stoppable {
    /// Asks it to stop and waits until it has (its state is then `stopped`).
    pub async fn stop(self) {
        self.cancel.cancel();
        if let Err(e) = self.task.await {
            tracing::warn!(error = %e, "a component's supervisor ended badly");
        }
    }
}

/// The text a panic was raised with.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_string()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use cairn_core::clock::ManualClock;

    use super::*;

    fn supervisor(max: u64) -> Supervisor {
        Supervisor::new(
            Arc::new(Components::new()),
            Arc::new(ManualClock::new(chrono::Utc::now())),
            SupervisorSettings {
                initial_backoff: Duration::from_secs(1),
                max_backoff: Duration::from_secs(max),
                healthy_after: Duration::from_secs(60),
            },
        )
    }

    /// Lets the spawned tasks run without moving the paused clock.
    async fn settle() {
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_panicking_component_is_restarted_with_doubling_backoff_up_to_the_max() {
        let sup = supervisor(4);
        let starts = Arc::new(AtomicU32::new(0));
        let starts2 = Arc::clone(&starts);
        let t0 = tokio::time::Instant::now();
        let times = Arc::new(std::sync::Mutex::new(Vec::new()));
        let times2 = Arc::clone(&times);
        sup.spawn("flaky", move |_cancel| {
            starts2.fetch_add(1, Ordering::SeqCst);
            times2.lock().unwrap().push(t0.elapsed().as_secs());
            async move { panic!("boom") }
        });
        settle().await;
        let h = sup.components().get("flaky").unwrap();
        assert_eq!(h.state, ComponentState::BackingOff);
        assert_eq!(h.restarts, 1);
        assert_eq!(h.last_error.as_deref(), Some("panicked: boom"));
        assert!(h.retry_at.is_some());
        tokio::time::sleep(Duration::from_secs(20)).await;
        // Restarts at 1, 1+2, 3+4, 7+4, 11+4, 15+4 s: doubling, capped at 4 s.
        assert_eq!(*times.lock().unwrap(), vec![0, 1, 3, 7, 11, 15, 19]);
        assert_eq!(starts.load(Ordering::SeqCst), 7);
        assert!(sup.shutdown(Duration::from_secs(1)).await);
        let h = sup.components().get("flaky").unwrap();
        assert_eq!(h.state, ComponentState::Stopped);
        assert_eq!(h.last_error.as_deref(), Some("panicked: boom"));
    }

    #[tokio::test(start_paused = true)]
    async fn the_backoff_starts_over_after_a_healthy_period() {
        let sup = supervisor(300);
        let t0 = tokio::time::Instant::now();
        let times = Arc::new(std::sync::Mutex::new(Vec::new()));
        let times2 = Arc::clone(&times);
        // Fails at once three times, then runs 100 s (healthy) and fails,
        // then fails at once again.
        let runs = Arc::new(AtomicU32::new(0));
        sup.spawn("engine", move |_cancel| {
            let n = runs.fetch_add(1, Ordering::SeqCst);
            times2.lock().unwrap().push(t0.elapsed().as_secs());
            async move {
                if n == 3 {
                    tokio::time::sleep(Duration::from_secs(100)).await;
                }
                anyhow::bail!("lost the database")
            }
        });
        tokio::time::sleep(Duration::from_secs(110)).await;
        // 0 → +1 → +2 → +4 = 7, runs 100 s to 107, then +1 s (reset) = 108.
        assert_eq!(*times.lock().unwrap(), vec![0, 1, 3, 7, 108]);
        let h = sup.components().get("engine").unwrap();
        assert_eq!(h.restarts, 5);
        assert_eq!(h.last_error.as_deref(), Some("lost the database"));
        assert!(h.last_success.is_some());
        sup.shutdown(Duration::from_secs(1)).await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_component_that_returns_is_restarted_and_shutdown_stops_it() {
        let sup = supervisor(300);
        let runs = Arc::new(AtomicU32::new(0));
        let runs2 = Arc::clone(&runs);
        sup.spawn("pruner", move |cancel| {
            let n = runs2.fetch_add(1, Ordering::SeqCst);
            async move {
                if n == 0 {
                    return Ok(());
                }
                cancel.cancelled().await;
                Ok(())
            }
        });
        settle().await;
        let h = sup.components().get("pruner").unwrap();
        assert_eq!(h.state, ComponentState::BackingOff);
        assert_eq!(h.last_error.as_deref(), Some("it stopped on its own"));
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let h = sup.components().get("pruner").unwrap();
        assert_eq!(h.state, ComponentState::Running);
        assert_eq!(runs.load(Ordering::SeqCst), 2);
        assert!(sup.shutdown(Duration::from_secs(5)).await);
        assert_eq!(
            sup.components().get("pruner").unwrap().state,
            ComponentState::Stopped
        );
    }

    #[tokio::test(start_paused = true)]
    async fn one_component_stops_alone_and_starts_again_under_its_name() {
        let sup = supervisor(300);
        let runs = Arc::new(AtomicU32::new(0));
        let body = |runs: Arc<AtomicU32>| {
            move |cancel: CancellationToken| {
                runs.fetch_add(1, Ordering::SeqCst);
                async move {
                    cancel.cancelled().await;
                    Ok(())
                }
            }
        };
        let first = sup.spawn_stoppable("channel.tg", body(Arc::clone(&runs)));
        sup.spawn("engine", body(Arc::new(AtomicU32::new(0))));
        settle().await;
        first.stop().await;
        let state = |name| sup.components().get(name).unwrap().state;
        assert_eq!(state("channel.tg"), ComponentState::Stopped);
        assert_eq!(state("engine"), ComponentState::Running);
        // Stopped on purpose: not restarted.
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        let _second = sup.spawn_stoppable("channel.tg", body(Arc::clone(&runs)));
        settle().await;
        assert_eq!(state("channel.tg"), ComponentState::Running);
        assert_eq!(runs.load(Ordering::SeqCst), 2);
        assert!(sup.shutdown(Duration::from_secs(1)).await);
        assert_eq!(state("channel.tg"), ComponentState::Stopped);
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_gives_up_on_a_component_that_ignores_cancel() {
        let sup = supervisor(300);
        sup.spawn("stubborn", |_cancel| async {
            std::future::pending::<()>().await;
            Ok(())
        });
        settle().await;
        assert!(!sup.shutdown(Duration::from_secs(2)).await);
    }
}
