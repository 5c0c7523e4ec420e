//! The store's own tokio runtime, and [`OnStoreRuntime`], which runs a store
//! call with that runtime current.
//!
//! sqlx arms timers (the pool's acquire timeout, the idle/lifetime reaper,
//! close-on-drop timeouts) and spawns tasks (returning connections to the
//! pool) on whatever runtime is current when it polls. Under a caller's
//! paused clock those timers would run on virtual time: with SQLite the
//! connection worker is a separate thread, so the paused runtime sees nothing
//! to do while a query is in flight and jumps straight to sqlx's timeout.
//! Polling every store call with this runtime current puts sqlx's timers and
//! tasks on real time, whatever clock the caller runs on.
//!
//! The caller's paused clock is also held still while a call is in flight
//! (see [`OnStoreRuntime`]), so a store call takes no virtual time: engine
//! tests can run days of schedules on the real store in milliseconds.

use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll};

use tokio::runtime::{Handle, Runtime, RuntimeFlavor};

/// One runtime per process, shared by every store; it is never dropped
/// (dropping a runtime inside async code panics, and stores live until exit).
static RUNTIME: OnceLock<Result<Runtime, String>> = OnceLock::new();

/// The store runtime's handle, built on first use (one worker thread, idle
/// unless sqlx has a timer or task due).
pub(crate) fn handle() -> Result<Handle, String> {
    let runtime = RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("cairn-store")
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the store's runtime thread: {e}"))
    });
    match runtime {
        Ok(runtime) => Ok(runtime.handle().clone()),
        Err(message) => Err(message.clone()),
    }
}

/// A store call polled (and dropped) with the store runtime current.
///
/// On a current-thread caller runtime it also keeps a blocking task alive
/// until the call ends: tokio does not auto-advance a paused clock while a
/// blocking task runs, so virtual time cannot jump ahead (firing a caller's
/// timeouts) just because SQLite answers from another thread. Multi-thread
/// runtimes cannot pause time, so production pays nothing for this.
pub(crate) struct OnStoreRuntime<F> {
    handle: Handle,
    /// `None` only once dropped; boxed so the wrapper is `Unpin` without `unsafe`.
    work: Option<Pin<Box<F>>>,
    /// Held until the call ends; dropping it lets the blocking task finish.
    hold_clock: Option<std::sync::mpsc::Sender<()>>,
}

impl<F: Future> OnStoreRuntime<F> {
    pub(crate) fn new(handle: Handle, work: F) -> Self {
        Self {
            handle,
            work: Some(Box::pin(work)),
            hold_clock: None,
        }
    }

    /// Starts holding the caller's (possibly paused) clock on first poll.
    fn hold_caller_clock(&mut self) {
        if self.hold_clock.is_some() {
            return;
        }
        let Ok(caller) = Handle::try_current() else {
            return;
        };
        if caller.runtime_flavor() != RuntimeFlavor::CurrentThread {
            return;
        }
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        // Returns when `tx` is dropped; the handle is not needed.
        drop(caller.spawn_blocking(move || {
            let _ = rx.recv();
        }));
        self.hold_clock = Some(tx);
    }
}

impl<F: Future> Future for OnStoreRuntime<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        this.hold_caller_clock();
        let _store_runtime = this.handle.enter();
        let Some(work) = this.work.as_mut() else {
            return Poll::Pending;
        };
        let ready = work.as_mut().poll(cx);
        if ready.is_ready() {
            // Drop the finished call (and the connection it held) here, on the store runtime.
            this.work = None;
            this.hold_clock = None;
        }
        ready
    }
}

impl<F> Drop for OnStoreRuntime<F> {
    fn drop(&mut self) {
        // A call cancelled mid-flight returns its connection through sqlx tasks: spawn them here.
        let _store_runtime = self.handle.enter();
        self.work = None;
    }
}
