//! The daemon's allocator, and its thread caches handed back when a thread
//! runs out of work.
//!
//! jemalloc keeps, per thread, a cache of freed objects for that thread's
//! next allocations. Large caches spare a burst's runs the arena's lock
//! (one arena, so every fill and flush of a small cache takes it), but an
//! idle thread keeps what its cache holds for good: nothing purges it. So
//! the caches are large (`.cargo/config.toml`) and each thread hands its
//! cache back when it parks with enough freed since it last did
//! (docs/decisions.md, "Thread caches handed back at park").

/// jemalloc, its background threads purging freed pages: after a burst of
/// runs the daemon gives the memory back within seconds, where glibc's
/// allocator kept the peak (measured in docs/decisions.md).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod caches;

#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub(crate) use caches::{hand_back, parked};

/// Elsewhere the system's allocator has no thread caches to hand back.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub(crate) fn parked() {}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub(crate) fn hand_back() -> Result<(), std::convert::Infallible> {
    Ok(())
}
