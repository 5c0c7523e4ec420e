//! The files a hook's command line names, which the sandbox must let it read
//! and execute: each word that is an absolute path to a file (`--rules=/x`
//! too), its first word found on `PATH` when it is a bare name, and the
//! interpreter of each such file that starts with `#!` (with the program
//! `/usr/bin/env` is asked for). Directories are never granted this way.
//!
//! Everything here reads the file system: call it off the async runtime.

#![expect(
    clippy::disallowed_methods,
    reason = "sync by design: runs in spawn_blocking"
)]

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::sandbox::env::{DEFAULT_PATH, safe_path};

/// Bytes read of a file to find its `#!` line.
const SHEBANG_BYTES: u64 = 256;

/// The files `command` names and their interpreters, without duplicates.
/// Bare names are looked up on the daemon's `PATH` without the entries
/// that reach into `workspace` (as the hook's shell will look them up).
pub(super) fn files(command: &str, workspace: &Path) -> Vec<PathBuf> {
    let path = std::env::var_os("PATH")
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| DEFAULT_PATH.into());
    let path = safe_path(&path, workspace);
    let mut out: Vec<PathBuf> = Vec::new();
    let add = |file: PathBuf, out: &mut Vec<PathBuf>| {
        if !out.contains(&file) {
            out.push(file);
        }
    };
    for (index, word) in words(command).enumerate() {
        let candidates = [Some(word), word.split_once('=').map(|(_, v)| v)];
        for candidate in candidates.into_iter().flatten() {
            let file = if candidate.starts_with('/') {
                Some(PathBuf::from(candidate))
            } else if index == 0 && !candidate.contains('/') {
                on_path(candidate, &path)
            } else {
                None
            };
            let Some(file) = file.filter(|f| is_file(f)) else {
                continue;
            };
            for interpreter in interpreters(&file, &path) {
                add(interpreter, &mut out);
            }
            add(file, &mut out);
        }
    }
    out
}

/// A file in `workspace` that `command` would run or read as code: a word
/// that is an absolute path below it, a relative word that names a file
/// there (the hook's shell starts in the workspace), or an interpreter of
/// those. The agent can write the workspace, so the daemon runs none of it.
pub(super) fn in_workspace(command: &str, workspace: &Path) -> Option<PathBuf> {
    let root = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_path_buf());
    let inside = |file: &Path| {
        let real = std::fs::canonicalize(file).unwrap_or_else(|_| file.to_path_buf());
        real.starts_with(&root) || file.starts_with(workspace)
    };
    for word in words(command) {
        for candidate in [Some(word), word.split_once('=').map(|(_, v)| v)]
            .into_iter()
            .flatten()
        {
            let file = if candidate.starts_with('/') {
                PathBuf::from(candidate)
            } else {
                workspace.join(candidate)
            };
            if std::fs::symlink_metadata(&file).is_ok() && inside(&file) {
                return Some(file);
            }
        }
    }
    files(command, workspace).into_iter().find(|f| inside(f))
}

/// The command's words, stripped of quotes and of the shell's punctuation
/// around them (`;`, `&&`, `|`, redirections, parentheses).
fn words(command: &str) -> impl Iterator<Item = &str> {
    command
        .split(|c: char| c.is_whitespace() || matches!(c, ';' | '&' | '|' | '(' | ')'))
        .map(|w| w.trim_matches(|c: char| matches!(c, '\'' | '"' | '<' | '>' | '`')))
        .filter(|w| !w.is_empty())
}

fn is_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file())
}

/// The first executable file called `name` in a directory of `path`.
fn on_path(name: &str, path: &std::ffi::OsStr) -> Option<PathBuf> {
    std::env::split_paths(path)
        .map(|dir| dir.join(name))
        .find(|f| {
            std::fs::metadata(f).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// The interpreter `file`'s `#!` line names (and the program it asks
/// `env` for), when they are files.
fn interpreters(file: &Path, path: &std::ffi::OsStr) -> Vec<PathBuf> {
    let mut head = Vec::new();
    let read = std::fs::File::open(file).and_then(|f| f.take(SHEBANG_BYTES).read_to_end(&mut head));
    if read.is_err() || !head.starts_with(b"#!") {
        return Vec::new();
    }
    let line = String::from_utf8_lossy(&head[2..]);
    let line = line.lines().next().unwrap_or_default();
    let mut parts = line.split_whitespace();
    let Some(interpreter) = parts.next().map(PathBuf::from) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if interpreter.ends_with("env")
        && let Some(program) = parts
            .find(|p| !p.starts_with('-'))
            .and_then(|p| on_path(p, path))
    {
        out.push(program);
    }
    if is_file(&interpreter) {
        out.push(interpreter);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_values_and_interpreters_are_named_and_directories_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("check.sh");
        std::fs::write(&script, "#!/bin/sh\nexit 0\n").unwrap();
        let rules = dir.path().join("rules.txt");
        std::fs::write(&rules, "x").unwrap();
        let command = format!(
            "'{}' --rules={} {} >/dev/null; echo done",
            script.display(),
            rules.display(),
            dir.path().display()
        );
        let found = files(&command, Path::new("/nonexistent-workspace"));
        let sh = std::fs::canonicalize("/bin/sh").ok();
        assert!(found.contains(&script), "{found:?}");
        assert!(found.contains(&rules), "{found:?}");
        assert!(!found.contains(&dir.path().to_path_buf()), "{found:?}");
        assert!(
            found.contains(&PathBuf::from("/bin/sh")) || sh.is_none(),
            "{found:?}"
        );
        assert!(!found.iter().any(|f| f.ends_with("null")), "{found:?}");
        // A bare first word is found on PATH.
        let found = files("sh -c true", Path::new("/nonexistent-workspace"));
        assert!(found.iter().any(|f| f.ends_with("sh")), "{found:?}");
    }

    #[test]
    fn a_file_in_the_workspace_is_found_however_it_is_named() {
        let workspace = tempfile::tempdir().unwrap();
        let script = workspace.path().join("check.sh");
        std::fs::write(&script, "#!/bin/sh\nexit 0\n").unwrap();
        let ws = workspace.path();
        for command in [
            format!("{}", script.display()),
            "./check.sh".to_string(),
            "sh check.sh".to_string(),
            "bash -c 'x' --file=check.sh".to_string(),
        ] {
            assert_eq!(
                in_workspace(&command, ws),
                Some(ws.join(command_file(&command))),
                "{command}"
            );
        }
        // Outside it, or naming nothing there: allowed.
        assert_eq!(in_workspace("/bin/sh -c 'exit 0'", ws), None);
        assert_eq!(in_workspace("echo hello", ws), None);
    }

    /// The workspace file each case above names, as `in_workspace` joins it.
    fn command_file(command: &str) -> PathBuf {
        if command.starts_with('/') {
            PathBuf::from(command.split_whitespace().next().unwrap())
                .file_name()
                .map(PathBuf::from)
                .unwrap()
        } else if command.starts_with("./") {
            PathBuf::from("./check.sh")
        } else {
            PathBuf::from("check.sh")
        }
    }
}
