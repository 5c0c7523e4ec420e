//! The Landlock half of the sandbox: probing the kernel and restricting the
//! calling thread. (cairn targets Linux: the sandbox, like the file tools'
//! `O_PATH` walk, uses Linux-only system calls.)

use std::path::PathBuf;
use std::sync::OnceLock;

use ::landlock::{
    ABI, Access, AccessFs, LandlockStatus, RestrictSelf, Ruleset, RulesetAttr, RulesetCreatedAttr,
    RulesetStatus, Scope, path_beneath_rules,
};

use super::Confinement;

/// What the restricted thread, and every process it starts, may use.
#[derive(Debug, Clone)]
pub(super) struct Rules {
    /// Read and execute below these.
    pub read: Vec<PathBuf>,
    /// Read, write, create, remove and execute below these.
    pub write: Vec<PathBuf>,
    /// Read and write these device files.
    pub devices: Vec<PathBuf>,
}

/// The ABI the rules are written for, tested on Linux 6.18 (ABI 7): file
/// access with truncation, renames across directories and device ioctls
/// (ABI 2 to 5), signal and abstract-socket scoping (ABI 6). An older
/// kernel enforces the part it knows (best effort), never nothing.
const TARGET: ABI = ABI::V7;

/// The kernel's Landlock support, asked once per process (no restriction:
/// an empty request is answered without a system call that restricts).
pub(super) fn probe() -> Confinement {
    static KERNEL: OnceLock<Confinement> = OnceLock::new();
    KERNEL
        .get_or_init(
            || match RestrictSelf::default().no_new_privs(false).apply() {
                Ok(status) => match status.landlock {
                    LandlockStatus::Available { effective_abi, .. } => Confinement::Landlock {
                        abi: effective_abi.to_string(),
                    },
                    LandlockStatus::NotEnabled => Confinement::Unavailable {
                        reason: "is built into this kernel but not enabled (add `landlock` to \
                             the `lsm=` boot parameter)"
                            .into(),
                    },
                    LandlockStatus::NotImplemented => Confinement::Unavailable {
                        reason: "is not in this kernel (it needs Linux 5.13 or later built \
                             with CONFIG_SECURITY_LANDLOCK)"
                            .into(),
                    },
                },
                Err(error) => Confinement::Unavailable {
                    reason: format!("could not be probed: {error}"),
                },
            },
        )
        .clone()
}

/// Restricts the calling thread (and what it starts) to `rules`, with
/// `no_new_privs`. Irreversible: call it on a thread that ends after.
pub(super) fn restrict_this_thread(rules: &Rules) -> Result<(), String> {
    let text = |e: ::landlock::RulesetError| e.to_string();
    let status = Ruleset::default()
        .handle_access(AccessFs::from_all(TARGET))
        .map_err(text)?
        .scope(Scope::from_all(TARGET))
        .map_err(text)?
        .create()
        .map_err(text)?
        .add_rules(path_beneath_rules(&rules.read, AccessFs::from_read(TARGET)))
        .map_err(text)?
        .add_rules(path_beneath_rules(&rules.write, AccessFs::from_all(TARGET)))
        .map_err(text)?
        .add_rules(path_beneath_rules(
            &rules.devices,
            AccessFs::from_file(TARGET),
        ))
        .map_err(text)?
        .restrict_self()
        .map_err(text)?;
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err("the kernel enforced none of the rules".into());
    }
    if !status.no_new_privs {
        return Err("no_new_privs could not be set".into());
    }
    Ok(())
}
