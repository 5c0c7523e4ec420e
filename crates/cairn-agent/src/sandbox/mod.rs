//! Starting processes confined by the OS: the one way cairn starts a program
//! for the agent (the `shell` tool today; user hooks and MCP stdio servers
//! later go through the same [`Sandbox::spawn`]).
//!
//! A confined process, where the kernel has Linux Landlock:
//! - writes only in the workspace, a private temporary directory made for
//!   the start (its `TMPDIR`, removed when the [`Confined`] is dropped) and,
//!   for an MCP server, its own folder ([`Sandbox::spawn_at`]);
//! - reads and executes only there, in system paths ([`SYSTEM_READ_PATHS`],
//!   a few devices) and the configured `read_paths` (directories, or single
//!   files such as a hook's script, each a rule of its own); never cairn's
//!   home or database outside the workspace ([`SandboxSettings::protected`]:
//!   a workspace or read path that is or contains one is refused);
//! - cannot ptrace, so cannot read `/proc/<pid>/environ`, `mem` or `fd/` of
//!   any process outside its domain (the daemon included), and from Landlock
//!   ABI 6 cannot signal them or reach their abstract Unix sockets;
//! - holds no capability, even under a root daemon ([`caps`]: some reach past
//!   Landlock, such as reading any process's environment with `CAP_SYS_ADMIN`);
//! - gets a clean environment ([`env`]) and no descriptor beyond 0, 1, 2.
//!
//! Landlock restricts a thread and what it starts, and `unsafe` (so
//! `pre_exec`) is forbidden here: each start runs on a short-lived thread of
//! its own that restricts itself (with `no_new_privs`), spawns the child into
//! the caller's tokio runtime and ends. No other thread is ever restricted.
//!
//! Where Landlock is unavailable (an old kernel, or `landlock = false`), the
//! process starts unconfined but with the same environment and descriptors;
//! [`Sandbox::unattended_refusal`] then refuses runs nobody approves unless
//! the owner set `allow_unconfined`.
//!
//! Architecture invariant: nothing else in cairn starts a process for the
//! agent, and no thread but a sandbox thread is restricted.

mod caps;
pub mod env;
mod landlock;

use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, OnceLock, RwLock};

use crate::names::{DEFAULT_ALIASES, normalize_name};

/// System paths a confined process may read and execute (those missing are
/// skipped). `/proc` is safe to read because Landlock's ptrace rule closes
/// other processes' private files; `/dev` is not listed as a whole (disks).
pub const SYSTEM_READ_PATHS: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/opt",
    "/proc",
    "/sys",
    // Where /etc/resolv.conf points under systemd-resolved.
    "/run/systemd/resolve",
    "/dev/random",
    "/dev/urandom",
];

/// Devices a confined process may read and write.
pub const SYSTEM_DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full"];

/// How processes are confined, from `[tools.shell]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxSettings {
    /// Use Landlock where the kernel has it (`false`: behave as if it had not).
    pub landlock: bool,
    /// Runs nobody approves may start unconfined processes where Landlock is
    /// unavailable.
    pub allow_unconfined: bool,
    /// Read-only paths beside [`SYSTEM_READ_PATHS`]: directories (read and
    /// execute below them) or files (read and execute that file alone).
    pub read_paths: Vec<PathBuf>,
    /// Paths no confined process may read (cairn's home, its database): a
    /// workspace or read path that contains one is refused.
    pub protected: Vec<PathBuf>,
}

impl Default for SandboxSettings {
    fn default() -> Self {
        Self {
            landlock: true,
            allow_unconfined: false,
            read_paths: Vec::new(),
            protected: Vec::new(),
        }
    }
}

/// What confines the processes this sandbox starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Confinement {
    /// Landlock, at this ABI version of the kernel.
    Landlock {
        /// The ABI version in force (`7` on Linux 6.15 to 6.18).
        abi: String,
    },
    /// Nothing: processes run with the daemon's rights.
    Unavailable {
        /// Why (the kernel, or the setting that turned it off).
        reason: String,
    },
}

impl std::fmt::Display for Confinement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Landlock { abi } => write!(f, "Landlock (ABI {abi})"),
            Self::Unavailable { reason } => write!(f, "unavailable: {reason}"),
        }
    }
}

/// Why a process was not started.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The settings forbid it (a protected path under a granted one).
    #[error("{0}")]
    Refused(String),
    /// Landlock could not be applied; nothing was started.
    #[error("cannot confine the process: {0}")]
    Confine(String),
    /// The workspace or the private temporary directory is unusable.
    #[error("{0}")]
    Setup(String),
    /// The program could not be started.
    #[error("cannot start the program: {0}")]
    Spawn(#[source] std::io::Error),
}

/// A started process and its private temporary directory (removed on drop).
#[derive(Debug)]
pub struct Confined {
    /// The process.
    pub child: tokio::process::Child,
    _tmp: PrivateTmp,
}

/// Starts processes confined to a workspace; see the module documentation.
#[derive(Debug, Clone)]
pub struct Sandbox {
    settings: SandboxSettings,
    confinement: Confinement,
}

impl Sandbox {
    /// A sandbox with these settings, probing the kernel once per process.
    pub fn new(settings: SandboxSettings) -> Self {
        let confinement = if settings.landlock {
            landlock::probe()
        } else {
            Confinement::Unavailable {
                reason: "turned off by tools.shell.landlock = false".to_string(),
            }
        };
        Self {
            settings,
            confinement,
        }
    }

    /// What confines the processes it starts.
    pub fn confinement(&self) -> &Confinement {
        &self.confinement
    }

    /// True when Landlock confines the processes it starts.
    pub fn is_confined(&self) -> bool {
        matches!(self.confinement, Confinement::Landlock { .. })
    }

    /// The settings it was made with.
    pub fn settings(&self) -> &SandboxSettings {
        &self.settings
    }

    /// Why a run nobody approves (`what`: "autonomy `full`", "a routine's
    /// allowed_tools") must not start processes here, or `None` when it may:
    /// Landlock confines them, or the owner allowed unconfined runs.
    pub fn unattended_refusal(&self, what: &str) -> Option<String> {
        match &self.confinement {
            Confinement::Landlock { .. } => None,
            Confinement::Unavailable { .. } if self.settings.allow_unconfined => None,
            Confinement::Unavailable { reason } => Some(format!(
                "{what} would run `shell` commands nobody approves, and they cannot be confined \
                 here (Landlock {reason}); set tools.shell.allow_unconfined = true to accept \
                 unconfined commands, or leave `shell` to approved calls"
            )),
        }
    }

    /// Starts `command` confined to `workspace` (its working directory and
    /// HOME), with the clean environment of [`env::apply`]; the variables the
    /// caller set on `command` are kept. Needs a tokio runtime.
    pub async fn spawn(
        &self,
        command: tokio::process::Command,
        workspace: &Path,
    ) -> Result<Confined, SandboxError> {
        self.spawn_at(command, workspace, workspace).await
    }

    /// Like [`Sandbox::spawn`], with `home` (writable, outside the
    /// workspace or equal to it) as the working directory and HOME: an MCP
    /// server runs from its own folder, never from the workspace whose
    /// programs the agent may have written.
    pub async fn spawn_at(
        &self,
        command: tokio::process::Command,
        workspace: &Path,
        home: &Path,
    ) -> Result<Confined, SandboxError> {
        let handle = tokio::runtime::Handle::current();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let this = self.clone();
        let (workspace, home) = (workspace.to_path_buf(), home.to_path_buf());
        std::thread::Builder::new()
            .name("cairn-sandbox".into())
            .spawn(move || {
                // The receiver may be gone (the call was cancelled): dropping the
                // result then kills the child and removes its directory.
                let _ = tx.send(this.start(command, &workspace, &home, &handle));
            })
            .map_err(|e| SandboxError::Setup(format!("cannot start the sandbox thread: {e}")))?;
        rx.await.map_err(|_| {
            SandboxError::Setup("the sandbox thread ended without starting the process".into())
        })?
    }

    /// Runs on the sandbox's own thread: everything here may block, and the
    /// Landlock domain it enters ends with the thread.
    fn start(
        &self,
        mut command: tokio::process::Command,
        workspace: &Path,
        home: &Path,
        runtime: &tokio::runtime::Handle,
    ) -> Result<Confined, SandboxError> {
        let usable = |dir: &Path, what: &str| {
            canonical(dir).map_err(|e| {
                SandboxError::Setup(format!("the {what} {} is not usable: {e}", dir.display()))
            })
        };
        let workspace = usable(workspace, "workspace")?;
        let home = usable(home, "process's home")?;
        let tmp = PrivateTmp::create()?;
        let read: Vec<PathBuf> = SYSTEM_READ_PATHS
            .iter()
            .map(PathBuf::from)
            .chain(self.settings.read_paths.iter().cloned())
            .collect();
        self.check_protected(&workspace, &read)?;
        if home != workspace {
            self.check_protected(&home, &[])?;
        }
        env::apply(&mut command, &workspace, &home, &tmp.path);
        if let Confinement::Landlock { .. } = self.confinement {
            let rules = landlock::Rules {
                read,
                write: vec![workspace.clone(), home.clone(), tmp.path.clone()],
                devices: SYSTEM_DEVICES.iter().map(PathBuf::from).collect(),
            };
            landlock::restrict_this_thread(&rules).map_err(SandboxError::Confine)?;
        }
        caps::drop_all().map_err(SandboxError::Confine)?;
        // Descriptors someone opened without close-on-exec (a library, the
        // daemon's own parent) must not reach the child.
        close_fds::set_fds_cloexec_threadsafe(3, &[]);
        let _entered = runtime.enter();
        let child = command.spawn().map_err(SandboxError::Spawn)?;
        Ok(Confined { child, _tmp: tmp })
    }

    /// Refuses when a path granted to the process contains a protected one.
    fn check_protected(&self, workspace: &Path, read: &[PathBuf]) -> Result<(), SandboxError> {
        for protected in &self.settings.protected {
            let protected = canonical(protected).unwrap_or_else(|_| normalize_lexically(protected));
            if protected.starts_with(workspace) {
                return Err(SandboxError::Refused(format!(
                    "the workspace {} contains {}, which commands must not read; \
                     choose a workspace that does not hold cairn's home or database",
                    workspace.display(),
                    protected.display()
                )));
            }
            if let Some(root) = read
                .iter()
                .filter_map(|r| canonical(r).ok())
                .find(|r| protected.starts_with(r))
            {
                let how = if root == protected { "is" } else { "contains" };
                return Err(SandboxError::Refused(format!(
                    "the read path {} {how} {}, which commands must not read",
                    root.display(),
                    protected.display()
                )));
            }
        }
        Ok(())
    }
}

#[expect(
    clippy::disallowed_methods,
    reason = "sync by design: runs on the sandbox's own thread"
)]
fn canonical(path: &Path) -> std::io::Result<PathBuf> {
    std::fs::canonicalize(path)
}

/// A directory only the process (and its user) can use, removed on drop.
#[derive(Debug)]
struct PrivateTmp {
    path: PathBuf,
}

impl PrivateTmp {
    fn create() -> Result<Self, SandboxError> {
        use std::os::unix::fs::DirBuilderExt;
        let path =
            std::env::temp_dir().join(format!("cairn-sandbox-{}", uuid::Uuid::new_v4().simple()));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .map_err(|e| {
                SandboxError::Setup(format!(
                    "cannot create the private temporary directory {}: {e}",
                    path.display()
                ))
            })?;
        Ok(Self { path })
    }
}

impl Drop for PrivateTmp {
    fn drop(&mut self) {
        let path = std::mem::take(&mut self.path);
        #[expect(
            clippy::disallowed_methods,
            reason = "on the blocking pool when a runtime is there, else on this (non-async) thread"
        )]
        let remove = move || {
            if let Err(error) = std::fs::remove_dir_all(&path)
                && error.kind() != std::io::ErrorKind::NotFound
            {
                tracing::warn!(path = %path.display(), %error, "could not remove a sandbox's temporary directory");
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn_blocking(remove)),
            Err(_) => remove(),
        }
    }
}

/// Resolves `.` and `..` without touching the file system; like the kernel, `..`
/// at the root stays at the root.
pub fn normalize_lexically(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// True for the tools that start processes (`shell`, by name or alias), the
/// ones whose unattended use [`Sandbox::unattended_refusal`] governs.
pub fn starts_processes(tool: &str) -> bool {
    let name = normalize_name(tool);
    name == "shell"
        || DEFAULT_ALIASES
            .iter()
            .any(|(alias, target)| *target == "shell" && *alias == name)
}

/// Why this process's [`host`] sandbox is not at hand: both are bugs of an
/// entry point, never of configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    /// Consulted before its start-up [`install`]ed it.
    #[error(
        "this process never installed its host sandbox (a bug in cairn: its start-up must install it before anything consults it)"
    )]
    NotInstalled,
    /// [`install`]ed a second time.
    #[error(
        "this process's host sandbox is already installed (a bug in cairn: it is installed once, at start-up)"
    )]
    AlreadyInstalled,
}

/// The sandbox of this process, for the checks that have no tool at hand
/// (routine definitions, unattended runs, sandboxed MCP servers): the one
/// [`install`]ed at start-up, as [`reconfigure`]d since. Never a default: a
/// guess at the settings could allow what the owner's configuration refuses.
pub fn host() -> Result<Arc<Sandbox>, HostError> {
    let host = HOST.get().ok_or(HostError::NotInstalled)?;
    Ok(Arc::clone(
        &host
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    ))
}

/// Makes `sandbox` this process's [`host`] sandbox: once, by the start-up of
/// the daemon or of the command that needs it.
pub fn install(sandbox: Arc<Sandbox>) -> Result<(), HostError> {
    HOST.set(RwLock::new(sandbox))
        .map_err(|_| HostError::AlreadyInstalled)
}

/// Replaces the installed [`host`] sandbox (a reloaded `[tools.shell]`).
pub fn reconfigure(sandbox: Arc<Sandbox>) -> Result<(), HostError> {
    let host = HOST.get().ok_or(HostError::NotInstalled)?;
    *host
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = sandbox;
    Ok(())
}

static HOST: OnceLock<RwLock<Arc<Sandbox>>> = OnceLock::new();

/// The first of `tools` that starts processes, for refusals that name it.
pub fn first_process_tool(tools: &[String]) -> Option<&str> {
    tools
        .iter()
        .map(String::as_str)
        .find(|t| starts_processes(t))
}

#[cfg(test)]
mod tests {
    #![expect(
        clippy::disallowed_methods,
        reason = "test fixtures may use blocking std::fs"
    )]

    use super::*;

    #[test]
    fn shell_and_its_aliases_start_processes() {
        for name in ["shell", "Shell", "bash", "run-command", "terminal"] {
            assert!(starts_processes(name), "{name}");
        }
        for name in ["file_read", "http_request", "shelly"] {
            assert!(!starts_processes(name), "{name}");
        }
    }

    #[test]
    fn unattended_runs_need_confinement_or_consent() {
        let off = Sandbox::new(SandboxSettings {
            landlock: false,
            ..SandboxSettings::default()
        });
        assert!(!off.is_confined());
        let refusal = off.unattended_refusal("autonomy `full`").unwrap();
        assert!(
            refusal.contains("tools.shell.allow_unconfined = true"),
            "{refusal}"
        );
        assert!(
            refusal.contains("tools.shell.landlock = false"),
            "{refusal}"
        );
        let allowed = Sandbox::new(SandboxSettings {
            landlock: false,
            allow_unconfined: true,
            ..SandboxSettings::default()
        });
        assert_eq!(allowed.unattended_refusal("x"), None);
    }

    #[tokio::test]
    async fn a_workspace_holding_a_protected_path_is_refused() {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join("cairn.db"), "db").unwrap();
        let sandbox = Sandbox::new(SandboxSettings {
            protected: vec![home.path().join("cairn.db")],
            ..SandboxSettings::default()
        });
        let command = tokio::process::Command::new("true");
        match sandbox.spawn(command, home.path()).await {
            Err(SandboxError::Refused(m)) => assert!(m.contains("cairn.db"), "{m}"),
            other => panic!("{other:?}"),
        }
    }
}
