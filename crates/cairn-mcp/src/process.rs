//! Starting a stdio MCP server's process.
//!
//! The server is a program the owner named in config.toml, not one the
//! agent chose, and it usually needs the network and its own caches
//! (`~/.npm` for `npx`, `~/.cache/uv`): so it is not confined by default.
//! It never inherits cairn's environment, though: it gets a clean one —
//! `PATH`, `LANG`, `HOME`, `USER`, `LOGNAME`, `TMPDIR` (where set) — plus
//! the server's own `env`, so no API key, database URL or other `CAIRN_*`
//! setting reaches it unless the owner passes it by name. With
//! `sandbox = true` it starts through the shell sandbox instead
//! ([`cairn_agent::sandbox::Sandbox::spawn_at`]): Landlock-confined to the
//! workspace and its own folder (its `HOME`), the sandbox's clean
//! environment plus its `env`; where Landlock is unavailable such a server
//! is not started, unless `tools.shell.allow_unconfined` accepts unconfined
//! processes.
//!
//! Either way it never runs the workspace's code, which the agent may have
//! written (`node_modules/.bin/<server>` found by `npx`, a `./<command>`):
//! its working directory is its own folder (`CAIRN_HOME/mcp/<server>`,
//! 0700) or the configured `cwd`, never in the workspace; its `PATH` has no
//! relative entry and none in the workspace
//! ([`cairn_agent::sandbox::env::safe_path`]); and `command` is resolved to
//! an absolute path on that `PATH` before the start, refused when it lies in
//! the workspace.
//!
//! The process leads its own process group, so closing the connection ends
//! what it started too (`npx` starts `node`).

use std::collections::{BTreeMap, VecDeque};
use std::ffi::{OsStr, OsString};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use cairn_agent::sandbox::Confined;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::remote::RemoteError;

/// Variables a server inherits from cairn's environment (when set).
pub const INHERITED: &[&str] = &["PATH", "LANG", "HOME", "USER", "LOGNAME", "TMPDIR"];

/// `PATH` when cairn has none.
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Lines of standard error kept to explain a failure.
const STDERR_LINES: usize = 20;

/// Characters kept of each standard-error line.
const STDERR_LINE_CHARS: usize = 300;

/// A started server process.
pub struct ServerProcess {
    child: Proc,
    /// Its standard input (cairn writes requests).
    pub stdin: Option<ChildStdin>,
    /// Its standard output (cairn reads answers).
    pub stdout: Option<ChildStdout>,
    /// The last lines it wrote to standard error.
    pub stderr: StderrTail,
}

enum Proc {
    Plain(Child),
    Confined(Confined),
}

impl ServerProcess {
    fn child(&mut self) -> &mut Child {
        match &mut self.child {
            Proc::Plain(child) => child,
            Proc::Confined(confined) => &mut confined.child,
        }
    }

    /// Waits for the process to exit; says how, with its last standard error.
    pub async fn wait(&mut self) -> String {
        let status = self.child().wait().await;
        let how = match status {
            Ok(status) => format!("the process exited ({status})"),
            Err(e) => format!("the process could not be waited for: {e}"),
        };
        self.stderr.explain(&how)
    }

    /// Kills the process and everything it started.
    pub async fn kill(&mut self) {
        self.kill_group();
        let _ = self.child().kill().await;
    }

    /// Signals the process group while its leader has not been reaped (so
    /// its id cannot name another process yet).
    fn kill_group(&mut self) {
        if !matches!(self.child().try_wait(), Ok(None)) {
            return;
        }
        if let Some(pid) = self
            .child()
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .and_then(rustix::process::Pid::from_raw)
        {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        // cairn is going away without closing the connection: what the
        // server started (`npx` starts `node`) goes too.
        self.kill_group();
    }
}

/// The last lines a process wrote to standard error, credentials scrubbed.
#[derive(Clone, Default)]
pub struct StderrTail(Arc<Mutex<VecDeque<String>>>);

impl StderrTail {
    fn push(&self, line: &str) {
        let line: String = cairn_agent::scrub(line.trim_end())
            .chars()
            .take(STDERR_LINE_CHARS)
            .collect();
        if line.is_empty() {
            return;
        }
        let mut lines = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if lines.len() == STDERR_LINES {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    /// `what`, followed by the last few lines of standard error, if any.
    pub fn explain(&self, what: &str) -> String {
        let lines = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let last: Vec<&str> = lines
            .iter()
            .rev()
            .take(3)
            .rev()
            .map(String::as_str)
            .collect();
        if last.is_empty() {
            what.to_string()
        } else {
            format!("{what}; stderr: {}", last.join(" | "))
        }
    }
}

/// The [`INHERITED`] variables of `cairn_env` (cairn's environment, read
/// once at start-up), with `PATH` defaulted.
pub fn inherited(cairn_env: &(impl cairn_core::text::Vars + ?Sized)) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = INHERITED
        .iter()
        .filter_map(|name| {
            cairn_env
                .var(name)
                .filter(|v| !v.is_empty())
                .map(|v| ((*name).to_string(), v.to_string()))
        })
        .collect();
    out.entry("PATH".into())
        .or_insert_with(|| DEFAULT_PATH.into());
    out
}

/// The environment a server starts with: [`INHERITED`] from `cairn_env`
/// (`PATH` defaulted), then the server's `env`.
pub fn environment(
    cairn_env: &BTreeMap<String, String>,
    env: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut out = inherited(cairn_env);
    out.extend(env.iter().map(|(k, v)| (k.clone(), v.clone())));
    out
}

/// What a stdio server is started with.
pub struct Launch<'a> {
    /// The program: a name found on `PATH`, or a path.
    pub command: &'a str,
    /// Its arguments.
    pub args: &'a [String],
    /// The server's configured variables.
    pub env: &'a BTreeMap<String, String>,
    /// cairn's own variables it gets ([`inherited`]).
    pub inherited: &'a BTreeMap<String, String>,
    /// Its working directory (and `HOME` when sandboxed): its own folder
    /// ([`own_dir`]) or the configured `cwd`; refused inside the workspace.
    pub cwd: &'a Path,
    /// The agent's workspace, which the server never runs from.
    pub workspace: &'a Path,
    /// Start it through the shell sandbox.
    pub sandbox: bool,
}

/// The private folder of server `name` under `root` (`CAIRN_HOME/mcp`),
/// made 0700 (both levels) whatever the umask; a symlink there is refused.
pub async fn own_dir(root: &Path, name: &str) -> Result<PathBuf, RemoteError> {
    let dir = root.join(name);
    for level in [root, dir.as_path()] {
        let made = tokio::fs::DirBuilder::new().mode(0o700).create(level).await;
        if let Err(e) = made
            && e.kind() != std::io::ErrorKind::AlreadyExists
        {
            return Err(RemoteError::Connect(format!(
                "cannot create the server's folder {}: {e}",
                level.display()
            )));
        }
        let meta = tokio::fs::symlink_metadata(level)
            .await
            .map_err(|e| RemoteError::Connect(format!("cannot read {}: {e}", level.display())))?;
        if !meta.is_dir() {
            return Err(RemoteError::Connect(format!(
                "{} is not a directory (a symlink or a file is there); remove it",
                level.display()
            )));
        }
        if meta.permissions().mode() & 0o777 != 0o700 {
            tokio::fs::set_permissions(level, std::fs::Permissions::from_mode(0o700))
                .await
                .map_err(|e| {
                    RemoteError::Connect(format!("cannot make {} private: {e}", level.display()))
                })?;
        }
    }
    Ok(dir)
}

/// The program to start and the `PATH` to give it: `path` without the
/// entries that reach into the workspace, `command` resolved on it (a name)
/// or against the working directory (a relative path); refused when the
/// working directory or the program lies in the workspace.
async fn prepare(launch: &Launch<'_>, path: OsString) -> Result<(PathBuf, OsString), RemoteError> {
    let (command, cwd, workspace) = (
        launch.command.to_string(),
        launch.cwd.to_path_buf(),
        launch.workspace.to_path_buf(),
    );
    tokio::task::spawn_blocking(move || {
        let safe = cairn_agent::sandbox::env::safe_path(&path, &workspace);
        let workspace_real = real(&workspace);
        if real(&cwd).starts_with(&workspace_real) {
            return Err(RemoteError::Connect(format!(
                "its working directory {} is inside the workspace {}, where the agent writes; \
                 MCP servers never run from there (leave `cwd` out: it runs in its own folder)",
                cwd.display(),
                workspace.display()
            )));
        }
        let program = resolve(&command, &safe, &cwd)?;
        if real(&program).starts_with(&workspace_real) {
            return Err(RemoteError::Connect(format!(
                "its program {} is inside the workspace {}, where the agent writes; \
                 cairn never runs a program from there",
                program.display(),
                workspace.display()
            )));
        }
        Ok((program, safe))
    })
    .await
    .map_err(|e| RemoteError::Connect(format!("cannot prepare the start: {e}")))?
}

/// `path` with its symlinks resolved where it exists, else as written.
#[expect(
    clippy::disallowed_methods,
    reason = "sync by design: runs in spawn_blocking"
)]
fn real(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| cairn_agent::sandbox::normalize_lexically(path))
}

/// `command` as an absolute path: a name is looked up in the directories of
/// `path` (an executable file), a relative path is taken from `cwd`.
#[expect(
    clippy::disallowed_methods,
    reason = "sync by design: runs in spawn_blocking"
)]
pub fn resolve(command: &str, path: &OsStr, cwd: &Path) -> Result<PathBuf, RemoteError> {
    if command.contains('/') {
        let program = Path::new(command);
        return Ok(if program.is_absolute() {
            program.to_path_buf()
        } else {
            cwd.join(program)
        });
    }
    std::env::split_paths(path)
        .map(|dir| dir.join(command))
        .find(|file| {
            std::fs::metadata(file)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .ok_or_else(|| {
            RemoteError::Connect(format!(
                "`{command}` was not found on PATH ({}; entries that are relative or in the \
                 workspace are left out); name it by its absolute path",
                path.to_string_lossy()
            ))
        })
}

/// Starts the server with piped standard streams.
pub async fn start(launch: &Launch<'_>) -> Result<ServerProcess, RemoteError> {
    let piped = |program: &Path| {
        let mut command = Command::new(program);
        command
            .args(launch.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .process_group(0);
        command
    };
    let child = if launch.sandbox {
        // The sandbox rebuilds the environment and keeps what is set here.
        let path = launch
            .env
            .get("PATH")
            .map(OsString::from)
            .or_else(|| {
                launch
                    .inherited
                    .get("PATH")
                    .filter(|v| !v.is_empty())
                    .map(OsString::from)
            })
            .unwrap_or_else(|| DEFAULT_PATH.into());
        let (program, path) = prepare(launch, path).await?;
        let mut command = piped(&program);
        for (k, v) in launch.env {
            command.env(k, v);
        }
        command.env("PATH", path);
        let sandbox = cairn_agent::sandbox::host()
            .map_err(|e| RemoteError::Connect(format!("`sandbox = true`: {e}")))?;
        // The owner asked for confinement: without Landlock it is not
        // started unconfined unless they accept that for the shell too.
        if !sandbox.is_confined() && !sandbox.settings().allow_unconfined {
            return Err(RemoteError::Connect(format!(
                "`sandbox = true` but processes cannot be confined here ({}); set \
                     tools.shell.allow_unconfined = true to start it unconfined, or sandbox = false",
                sandbox.confinement()
            )));
        }
        let confined = sandbox
            .spawn_at(command, launch.workspace, launch.cwd)
            .await
            .map_err(|e| RemoteError::Connect(format!("{}: {e}", launch.command)))?;
        Proc::Confined(confined)
    } else {
        let mut env = environment(launch.inherited, launch.env);
        let path = env
            .get("PATH")
            .cloned()
            .unwrap_or_else(|| DEFAULT_PATH.into());
        let (program, path) = prepare(launch, path.into()).await?;
        env.insert("PATH".into(), path.to_string_lossy().into_owned());
        let mut command = piped(&program);
        command.env_clear().envs(env).current_dir(launch.cwd);
        Proc::Plain(command.spawn().map_err(|e| {
            RemoteError::Connect(format!("cannot start {}: {e}", program.display()))
        })?)
    };
    let mut process = ServerProcess {
        child,
        stdin: None,
        stdout: None,
        stderr: StderrTail::default(),
    };
    process.stdin = process.child().stdin.take();
    process.stdout = process.child().stdout.take();
    if let Some(stderr) = process.child().stderr.take() {
        let tail = process.stderr.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::debug!(target: "cairn_mcp::stderr", "{line}");
                tail.push(&line);
            }
        });
    }
    Ok(process)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_basics_and_the_servers_own_variables_pass() {
        let ours: BTreeMap<String, String> = [
            ("PATH", "/bin"),
            ("HOME", "/home/me"),
            ("CAIRN_LLM_API_KEY", "sk-secret"),
            ("OPENAI_API_KEY", "sk-other"),
            ("DATABASE_URL", "postgres://u:p@h/db"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .into();
        let own: BTreeMap<String, String> =
            [("GITHUB_TOKEN".to_string(), "ghp_x".to_string())].into();
        let env = environment(&ours, &own);
        assert_eq!(
            env.keys().collect::<Vec<_>>(),
            ["GITHUB_TOKEN", "HOME", "PATH"]
        );
        let no_path = environment(&BTreeMap::new(), &BTreeMap::new());
        assert_eq!(no_path["PATH"], DEFAULT_PATH);
    }

    #[tokio::test]
    #[expect(clippy::disallowed_methods, reason = "test fixtures")]
    async fn a_program_the_agent_could_write_never_starts() {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().join("ws");
        let bin = workspace.join("node_modules/.bin");
        std::fs::create_dir_all(&bin).unwrap();
        let mark = dir.path().join("ran");
        let script = format!("#!/bin/sh\ntouch {}\n", mark.display());
        for file in [workspace.join("mcp-local"), bin.join("mcp-local")] {
            std::fs::write(&file, &script).unwrap();
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let own = own_dir(&dir.path().join("mcp"), "local").await.unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!((mode(&own), mode(own.parent().unwrap())), (0o700, 0o700));
        let env: BTreeMap<String, String> = [(
            "PATH".to_string(),
            format!(".:node_modules/.bin:{}:/usr/bin:/bin", bin.display()),
        )]
        .into();
        let absolute = workspace.join("mcp-local").display().to_string();
        let cases = [
            ("mcp-local", own.as_path(), "was not found on PATH"),
            (absolute.as_str(), own.as_path(), "is inside the workspace"),
            ("true", workspace.as_path(), "working directory"),
        ];
        for (command, cwd, why) in cases {
            let launch = Launch {
                command,
                args: &[],
                env: &env,
                inherited: &BTreeMap::new(),
                cwd,
                workspace: &workspace,
                sandbox: false,
            };
            match start(&launch).await {
                Err(e) => assert!(e.to_string().contains(why), "{command}: {e}"),
                Ok(_) => panic!("{command} started"),
            }
        }
        assert!(!mark.exists(), "a planted program ran");
    }

    #[test]
    fn the_stderr_tail_keeps_the_last_lines_scrubbed() {
        let tail = StderrTail::default();
        for i in 0..30 {
            tail.push(&format!("line {i}"));
        }
        tail.push("token sk-abcdefghijklmnopqrstuvwxyz0123456789");
        let text = tail.explain("it exited");
        assert!(
            text.starts_with("it exited; stderr: line 28 | line 29 | token"),
            "{text}"
        );
        assert!(!text.contains("sk-abcdefghijklmnop"), "{text}");
    }
}
