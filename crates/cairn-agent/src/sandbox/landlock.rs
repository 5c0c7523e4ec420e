//! The Landlock half of the sandbox: probing the kernel and restricting the
//! calling thread (Linux only; elsewhere confinement is unavailable).

use std::path::PathBuf;

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

#[cfg(target_os = "linux")]
mod imp {
    use std::sync::OnceLock;

    use ::landlock::{
        ABI, Access, AccessFs, LandlockStatus, RestrictSelf, Ruleset, RulesetAttr,
        RulesetCreatedAttr, RulesetStatus, Scope, path_beneath_rules,
    };

    use super::{Confinement, Rules};

    /// The ABI the rules are written for, tested on Linux 6.18 (ABI 7): file
    /// access with truncation, renames across directories and device ioctls
    /// (ABI 2 to 5), signal and abstract-socket scoping (ABI 6). An older
    /// kernel enforces the part it knows (best effort), never nothing.
    const TARGET: ABI = ABI::V7;

    /// The kernel's Landlock support, asked once per process (no restriction:
    /// an empty request is answered without a system call that restricts).
    pub(in crate::sandbox) fn probe() -> Confinement {
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
    pub(in crate::sandbox) fn restrict_this_thread(rules: &Rules) -> Result<(), String> {
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
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use super::{Confinement, Rules};

    /// Landlock is Linux's.
    pub(in crate::sandbox) fn probe() -> Confinement {
        Confinement::Unavailable {
            reason: "is Linux-only".into(),
        }
    }

    /// Never called: [`probe`] says unavailable.
    pub(in crate::sandbox) fn restrict_this_thread(_: &Rules) -> Result<(), String> {
        Err("Landlock is Linux-only".into())
    }
}

pub(super) use imp::{probe, restrict_this_thread};
