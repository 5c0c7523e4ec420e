//! The clean environment of a sandboxed process.
//!
//! Nothing is inherited from the daemon but `PATH` and `LANG`. In order, later
//! entries winning:
//! 1. `PATH` (the daemon's, else [`DEFAULT_PATH`], without the entries that
//!    would find a program the agent wrote: see [`safe_path`]), `LANG` (the daemon's, else
//!    `C.UTF-8`), `TERM=dumb`, and git's config-driven commands turned off
//!    ([`GIT_OVERRIDES`], through `GIT_CONFIG_COUNT`/`KEY_n`/`VALUE_n`, which
//!    outrank a repository's own `.git/config`);
//! 2. the variables the caller set on the command (the shell tool's
//!    `pass_env` names and `env` entries);
//! 3. `HOME` = the workspace (an MCP server's own folder for a confined
//!    server) and `TMPDIR` = the private directory, always.
//!
//! The git settings are a cheap first line only: a repository can still name
//! filter or diff drivers; the sandbox confines whatever they run.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

/// `PATH` when the daemon has none.
pub const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Git settings that would run a command named by a repository's config
/// (`core.fsmonitor`, hooks, pager, editor, ssh, credential helpers, `ext::`
/// remotes), each set to something inert.
pub const GIT_OVERRIDES: &[(&str, &str)] = &[
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.pager", "cat"),
    ("core.editor", "false"),
    ("sequence.editor", "false"),
    ("core.sshCommand", "ssh"),
    ("credential.helper", ""),
    ("protocol.ext.allow", "never"),
];

/// Replaces `command`'s environment with the clean one described above and
/// makes `home` its working directory and `HOME` (the workspace, or an MCP
/// server's own folder); `PATH` never reaches into `workspace`.
pub fn apply(command: &mut tokio::process::Command, workspace: &Path, home: &Path, tmp: &Path) {
    let caller: Vec<(OsString, Option<OsString>)> = command
        .as_std()
        .get_envs()
        .map(|(k, v)| (k.to_os_string(), v.map(OsStr::to_os_string)))
        .collect();
    command.env_clear();
    let inherited = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    let path = inherited("PATH").unwrap_or_else(|| DEFAULT_PATH.into());
    command.env("PATH", safe_path(&path, workspace));
    command.env(
        "LANG",
        inherited("LANG").unwrap_or_else(|| "C.UTF-8".into()),
    );
    command.env("TERM", "dumb");
    command.env("GIT_CONFIG_COUNT", GIT_OVERRIDES.len().to_string());
    for (i, (key, value)) in GIT_OVERRIDES.iter().enumerate() {
        command.env(format!("GIT_CONFIG_KEY_{i}"), key);
        command.env(format!("GIT_CONFIG_VALUE_{i}"), value);
    }
    for (name, value) in caller {
        match value {
            Some(value) => command.env(name, value),
            None => command.env_remove(name),
        };
    }
    command.env("HOME", home);
    command.env("TMPDIR", tmp);
    command.current_dir(home);
}

/// `path` (a `PATH` value) without the entries through which a program the
/// agent wrote could be found: empty and relative ones (`.`, `node_modules/.bin`,
/// resolved against the working directory) and those inside `workspace`
/// (symlinks followed). Falls back to [`DEFAULT_PATH`] when nothing is left.
/// Reads the file system: call it off the async runtime.
pub fn safe_path(path: &OsStr, workspace: &Path) -> OsString {
    let workspace = resolved(workspace);
    let kept: Vec<PathBuf> = std::env::split_paths(path)
        .filter(|dir| dir.is_absolute() && !resolved(dir).starts_with(&workspace))
        .collect();
    if kept.is_empty() {
        return DEFAULT_PATH.into();
    }
    std::env::join_paths(kept).unwrap_or_else(|_| DEFAULT_PATH.into())
}

/// `path` with its symlinks resolved where it exists, else with `.` and `..` folded.
#[expect(
    clippy::disallowed_methods,
    reason = "sync by design: runs on a sandbox thread or in spawn_blocking"
)]
fn resolved(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| super::normalize_lexically(path))
}

#[cfg(test)]
mod tests {
    #![expect(clippy::disallowed_methods, reason = "test fixtures")]

    use super::*;

    fn envs(command: &tokio::process::Command) -> Vec<(String, String)> {
        command
            .as_std()
            .get_envs()
            .filter_map(|(k, v)| {
                Some((
                    k.to_string_lossy().into_owned(),
                    v?.to_string_lossy().into_owned(),
                ))
            })
            .collect()
    }

    #[test]
    fn caller_variables_win_over_the_base_but_not_home_or_tmpdir() {
        let mut command = tokio::process::Command::new("env");
        command
            .env("TERM", "xterm")
            .env("HOME", "/root")
            .env("X", "1");
        apply(
            &mut command,
            Path::new("/ws"),
            Path::new("/ws"),
            Path::new("/tmp/p"),
        );
        let env = envs(&command);
        let get = |k: &str| {
            env.iter()
                .find(|(name, _)| name == k)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(get("TERM"), Some("xterm"));
        assert_eq!(get("X"), Some("1"));
        assert_eq!(get("HOME"), Some("/ws"));
        assert_eq!(get("TMPDIR"), Some("/tmp/p"));
        assert_eq!(get("GIT_CONFIG_KEY_0"), Some("core.fsmonitor"));
        assert_eq!(get("GIT_CONFIG_VALUE_0"), Some("false"));
        assert!(get("PATH").is_some() && get("LANG").is_some());
        assert_eq!(command.as_std().get_current_dir(), Some(Path::new("/ws")));
    }

    #[test]
    fn path_entries_that_reach_the_workspace_are_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().join("ws");
        std::fs::create_dir_all(workspace.join("bin")).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(workspace.join("bin"), &link).unwrap();
        let path = format!(
            ".::node_modules/.bin:/usr/bin:{}:{}:{}/../ws/bin:/bin",
            workspace.join("bin").display(),
            link.display(),
            workspace.display()
        );
        let safe = safe_path(OsStr::new(&path), &workspace);
        assert_eq!(safe, OsString::from("/usr/bin:/bin"));
        assert_eq!(
            safe_path(OsStr::new(".:bin"), &workspace),
            OsString::from(DEFAULT_PATH)
        );
    }
}
