//! The store's own tokio runtime, and [`hop`], which runs a store call with
//! that runtime current.
//!
//! sqlx arms timers (the pool's acquire timeout, the idle/lifetime reaper,
//! close-on-drop timeouts) and spawns tasks (returning connections to the
//! pool) on whatever runtime is current when it polls. Under a caller's
//! paused clock those timers would run on virtual time: with SQLite the
//! connection worker is a separate thread, so the paused runtime sees nothing
//! to do while a query is in flight and jumps straight to sqlx's timeout.
//! Polling every store call with this runtime current puts sqlx's timers and
//! tasks on real time, whatever clock the caller runs on. The change
//! signal's listener runs here too, for the same reason.
//!
//! The caller's paused clock is also held still while a call is in flight
//! (see [`OnStoreRuntime`]), so a store call takes no virtual time: engine
//! tests can run days of schedules on the real store in milliseconds.
//!
//! No method wraps itself: `#[cairn_store_macros::on_store_runtime]` on an
//! impl block puts each public async method's body inside [`hop`], and the
//! test `coverage` fails if an impl block with a public async method lacks
//! it. Queries reach the pool only through `Store::pool`, which checks (in
//! debug builds, so in every test) that a hop is being polled.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll};

use tokio::runtime::{EnterGuard, Handle, Runtime, RuntimeFlavor};

#[cfg(test)]
mod coverage;

/// One runtime per process, shared by every store; it is never dropped
/// (dropping a runtime inside async code panics, and stores live until exit).
static RUNTIME: OnceLock<Result<Runtime, String>> = OnceLock::new();

/// What the store's runtime thread runs each time it runs out of work.
static PARK_HOOK: OnceLock<fn()> = OnceLock::new();

/// Sets what the store's runtime thread runs each time it runs out of work,
/// before it parks (the binary hands the allocator's thread cache back). The
/// first call wins.
pub fn on_thread_park(hook: fn()) {
    let _ = PARK_HOOK.set(hook);
}

/// The store runtime's handle, built on first use (one worker thread, idle
/// unless sqlx or the change signal has a timer or task due).
pub(crate) fn handle() -> Result<&'static Handle, &'static str> {
    let runtime = RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("cairn-store")
            .on_thread_park(|| {
                if let Some(hook) = PARK_HOOK.get() {
                    hook();
                }
            })
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the store's runtime thread: {e}"))
    });
    match runtime {
        Ok(runtime) => Ok(runtime.handle()),
        Err(message) => Err(message),
    }
}

thread_local! {
    /// How many hops this thread is polling or dropping (they nest: a
    /// method may call another).
    static INSIDE: Cell<u32> = const { Cell::new(0) };
}

/// Whether a hop is being polled (or dropped) on this thread.
pub(crate) fn inside() -> bool {
    INSIDE.with(Cell::get) > 0
}

/// The store runtime entered, and this thread marked inside a hop, while it lasts.
struct Entered {
    /// `None` only if the runtime could not start; then no store exists
    /// (`Store::connect` fails with the reason) and nothing is entered.
    _runtime: Option<EnterGuard<'static>>,
}

impl Entered {
    fn new() -> Entered {
        INSIDE.with(|n| n.set(n.get().saturating_add(1)));
        Entered {
            _runtime: handle().ok().map(Handle::enter),
        }
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        INSIDE.with(|n| n.set(n.get().saturating_sub(1)));
    }
}

/// Runs `work` on the store's runtime, as a task of its own: for work
/// that is nearly all store calls in a row (a group commit's
/// transactions). On the store's thread each statement's answer is taken
/// up at once, not after whatever else waits on the caller's runtime.
/// Whoever waits for it does so through [`as_store_call`]; a paused
/// caller clock is held still until the work ends, also while nobody
/// waits for it (a group commit's closing batch): work the caller's
/// runtime did itself kept that clock still by keeping it busy.
pub fn spawn_on_store_thread<F>(work: F)
where
    F: Future<Output = ()> + Send + 'static,
{
    let hold_clock = hold_caller_clock();
    let work = async move {
        work.await;
        drop(hold_clock);
    };
    match handle() {
        Ok(handle) => drop(handle.spawn(work)),
        // No store runtime, so no store: the caller's runtime will do.
        Err(_) => drop(tokio::spawn(work)),
    }
}

/// Waits for `work` as for a store call: a paused caller clock is held
/// still meanwhile, so virtual time does not jump ahead while the store's
/// thread works (see [`OnStoreRuntime`]).
pub fn as_store_call<F: Future>(work: F) -> impl Future<Output = F::Output> {
    hop(work)
}

/// Runs `work` as a store call: see [`OnStoreRuntime`]. The output type
/// comes first so that `#[on_store_runtime]` can name the method's.
pub(crate) fn hop<T, F: Future<Output = T>>(work: F) -> OnStoreRuntime<F> {
    OnStoreRuntime {
        work: Some(work),
        hold_clock: None,
        started: false,
    }
}

pin_project_lite::pin_project! {
    /// A store call polled (and dropped) with the store runtime current.
    ///
    /// On a current-thread caller runtime it also keeps a blocking task alive
    /// until the call ends: tokio does not auto-advance a paused clock while a
    /// blocking task runs, so virtual time cannot jump ahead (firing a caller's
    /// timeouts) just because SQLite answers from another thread. Only a
    /// current-thread runtime can pause its clock, and cairn's daemon and CLI
    /// run multi-thread ones, so in production this is one flavor check.
    pub(crate) struct OnStoreRuntime<F> {
        // `None` once finished, so that it drops here, on the store runtime.
        #[pin]
        work: Option<F>,
        // Held until the call ends; dropping it lets the blocking task finish.
        hold_clock: Option<std::sync::mpsc::Sender<()>>,
        started: bool,
    }

    impl<F> PinnedDrop for OnStoreRuntime<F> {
        fn drop(this: Pin<&mut Self>) {
            // A call cancelled mid-flight returns its connection through sqlx tasks: spawn them here.
            let _entered = Entered::new();
            this.project().work.set(None);
        }
    }
}

/// Starts holding the caller's clock if it is a current-thread runtime (one
/// that may be paused).
fn hold_caller_clock() -> Option<std::sync::mpsc::Sender<()>> {
    let caller = Handle::try_current().ok()?;
    if caller.runtime_flavor() != RuntimeFlavor::CurrentThread {
        return None;
    }
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    // Returns when `tx` is dropped; the handle is not needed.
    drop(caller.spawn_blocking(move || {
        let _ = rx.recv();
    }));
    Some(tx)
}

impl<F: Future> Future for OnStoreRuntime<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let mut this = self.project();
        if !*this.started {
            // Before entering: the caller's runtime is the one to hold.
            *this.started = true;
            *this.hold_clock = hold_caller_clock();
        }
        let _entered = Entered::new();
        let Some(work) = this.work.as_mut().as_pin_mut() else {
            return Poll::Pending;
        };
        let ready = work.poll(cx);
        if ready.is_ready() {
            // Drop the finished call (and the connection it held) here, on the store runtime.
            this.work.set(None);
            *this.hold_clock = None;
        }
        ready
    }
}
