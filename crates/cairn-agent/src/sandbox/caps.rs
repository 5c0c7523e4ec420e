//! Dropping every capability before a sandboxed start.
//!
//! A daemon running as root keeps its capabilities across `execve`, and some
//! reach past Landlock: `CAP_SYS_ADMIN` or `CAP_PERFMON` lets a process read
//! another's `/proc/<pid>/environ` and `maps` whatever the LSM says (the
//! kernel's `mm_access` allows it), `CAP_SYS_RAWIO` opens `/proc/kcore`. The
//! sandbox thread empties its bounding set (so root regains nothing at
//! `execve`) and its own sets; an unprivileged daemon has none to drop.

use rustix::io::Errno;
use rustix::thread::{
    CapabilitySet, CapabilitySets, capabilities, remove_capability_from_bounding_set,
    set_capabilities,
};

/// Leaves the calling thread, and what it starts, without capabilities.
/// Irreversible: call it on a thread that ends after.
pub(super) fn drop_all() -> Result<(), String> {
    let current = capabilities(None).map_err(|e| format!("cannot read capabilities: {e}"))?;
    if current.permitted.is_empty() && current.effective.is_empty() {
        return Ok(());
    }
    for (name, capability) in CapabilitySet::all().iter_names() {
        match remove_capability_from_bounding_set(capability) {
            // EINVAL: a capability this kernel does not know.
            Ok(()) | Err(Errno::INVAL) => {}
            Err(e) => return Err(format!("cannot drop {name} from the bounding set: {e}")),
        }
    }
    let none = CapabilitySets {
        effective: CapabilitySet::empty(),
        permitted: CapabilitySet::empty(),
        inheritable: CapabilitySet::empty(),
    };
    set_capabilities(None, none).map_err(|e| format!("cannot drop capabilities: {e}"))
}
