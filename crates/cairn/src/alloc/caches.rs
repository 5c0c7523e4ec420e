//! jemalloc's thread caches handed back (see the parent module).

use std::cell::Cell;

use tikv_jemalloc_ctl::thread::{ThreadLocal, deallocatedp};
use tikv_jemalloc_ctl::{Access, AsName};

/// Bytes a thread frees before its next park hands its cache back. A
/// cache holds what its thread freed since it was last emptied, so an
/// idle thread keeps at most about this much. 64 KiB kept less at idle
/// than 256 and cost signed webhooks nothing; in a burst of 2,000 runs
/// the busier worker hands back some forty-five times, not at each park.
const HAND_BACK_AFTER: u64 = 64 * 1024;

thread_local! {
    /// This thread's count of bytes it ever freed (jemalloc's counter,
    /// read through a pointer: no call at each park).
    static FREED: Option<ThreadLocal<u64>> = deallocatedp::read().ok();
    /// `FREED` when this thread last handed its cache back.
    static AT_LAST: Cell<u64> = const { Cell::new(0) };
}

pub(crate) fn parked() {
    let Some(freed) = FREED.with(|f| f.map(ThreadLocal::get)) else {
        return;
    };
    if freed.saturating_sub(AT_LAST.get()) >= HAND_BACK_AFTER {
        AT_LAST.set(freed);
        // Fails only if jemalloc lacks the control, which the test
        // below rules out; the cache then simply stays.
        let _ = hand_back();
    }
}

/// Empties this thread's cache into the arena: turning the cache off
/// flushes it, turning it on starts an empty one (`thread.tcache.flush`
/// takes no value, so the safe interface cannot call it). A cache that
/// is off (`MALLOC_CONF=tcache:false`) stays off.
pub(crate) fn hand_back() -> Result<(), tikv_jemalloc_ctl::Error> {
    let enabled = b"thread.tcache.enabled\0".name();
    let on: bool = enabled.read()?;
    if on {
        enabled.write(false)?;
        enabled.write(true)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_hands_its_cache_back_and_keeps_one() {
        std::thread::spawn(|| {
            let enabled = b"thread.tcache.enabled\0".name();
            let on: bool = enabled.read().unwrap();
            assert!(on);
            let freed = || FREED.with(|f| f.map(ThreadLocal::get)).unwrap();
            let start = freed();
            AT_LAST.set(start);
            drop((0..100).map(|i| vec![i as u8; 64]).collect::<Vec<_>>());
            assert!(freed() >= start + 6400, "{start} then {}", freed());

            parked();
            assert_eq!(
                AT_LAST.get(),
                start,
                "under the bound, nothing is handed back"
            );
            drop(vec![0u8; HAND_BACK_AFTER as usize]);
            parked();
            assert!(AT_LAST.get() >= start + HAND_BACK_AFTER);

            hand_back().unwrap();
            let on: bool = enabled.read().unwrap();
            assert!(on, "the thread keeps a cache");

            enabled.write(false).unwrap();
            hand_back().unwrap();
            let on: bool = enabled.read().unwrap();
            assert!(!on, "a cache turned off stays off");
        })
        .join()
        .unwrap();
    }
}
