//! The sandbox holds where argument checks do not: the four escapes of issue 21,
//! each run as an approved `shell` command with the protected-path patterns
//! emptied (so only the OS confinement stands in the way), and the sandbox's
//! own guarantees (descriptors, environment, git's fsmonitor).
//!
//! Needs a kernel with Landlock: it fails without one unless
//! `CAIRN_TEST_NO_LANDLOCK=1` says the kernel lacks it.
#![cfg(target_os = "linux")]
#![expect(clippy::unwrap_used, reason = "test helpers outside #[test] fns")]
#![expect(
    clippy::disallowed_methods,
    reason = "test fixtures may use blocking std::fs"
)]

mod support;

use std::path::{Path, PathBuf};
use std::process::Stdio;

use cairn_agent::sandbox::{Sandbox, SandboxSettings};
use cairn_agent::tools::shell::{ShellConfig, ShellTool};
use cairn_agent::tools::{ToolContext, ToolOutput};
use serde_json::json;
use support::RunGated;

/// Whether this kernel confines; prints it, and fails when it does not
/// unless the environment says the kernel lacks Landlock.
fn landlock_here() -> bool {
    let sandbox = Sandbox::new(SandboxSettings::default());
    println!("landlock: {}", sandbox.confinement());
    if sandbox.is_confined() {
        return true;
    }
    assert!(
        std::env::var_os("CAIRN_TEST_NO_LANDLOCK").is_some(),
        "Landlock is unavailable ({}); set CAIRN_TEST_NO_LANDLOCK=1 only on a kernel without it",
        sandbox.confinement()
    );
    cairn_test_support::skipped(
        module_path!(),
        &format!("Landlock is unavailable ({})", sandbox.confinement()),
    );
    false
}

/// A home laid out like cairn's: the database beside the workspace.
struct Home {
    home: tempfile::TempDir,
    elsewhere: tempfile::TempDir,
}

impl Home {
    fn new() -> Self {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(
            home.path().join("cairn.db"),
            "SQLite format 3\0 row: owner notes DB-ROW-MARKER",
        )
        .unwrap();
        std::fs::create_dir(home.path().join("workspace")).unwrap();
        Self {
            home,
            elsewhere: tempfile::tempdir().unwrap(),
        }
    }

    fn workspace(&self) -> PathBuf {
        self.home.path().join("workspace")
    }
}

fn shell(programs: &[&str]) -> ShellTool {
    ShellTool::new(ShellConfig {
        allowed_programs: programs.iter().map(|p| p.to_string()).collect(),
        // Only the sandbox stands in the way: no protected-path patterns.
        forbidden_paths: Vec::new(),
        ..ShellConfig::default()
    })
}

async fn run(tool: &ShellTool, workspace: &Path, command: &str) -> ToolOutput {
    let ctx = ToolContext::new(workspace, "s");
    tool.run_gated(json!({ "command": command }), &ctx)
        .await
        .unwrap_or_else(|e| panic!("`{command}` was refused by the tool, not confined: {e}"))
}

/// `grep -r -a` from the workspace up into the home does not reach the database.
#[tokio::test]
async fn escape_reading_the_database_is_confined() {
    if !landlock_here() {
        return;
    }
    let h = Home::new();
    let out = run(
        &shell(&["grep"]),
        &h.workspace(),
        "grep -r -a DB-ROW-MARKER ..",
    )
    .await;
    println!("{}", out.content);
    assert!(!out.content.contains("owner notes"), "{}", out.content);
    assert!(out.content.contains("Permission denied"), "{}", out.content);
}

/// `sort -o` cannot write outside the workspace.
#[tokio::test]
async fn escape_writing_elsewhere_is_confined() {
    if !landlock_here() {
        return;
    }
    let h = Home::new();
    std::fs::write(h.workspace().join("in.txt"), "b\na\n").unwrap();
    let target = h.elsewhere.path().join("out.txt");
    let tool = shell(&["sort"]);
    let out = run(
        &tool,
        &h.workspace(),
        &format!("sort -o {} in.txt", target.display()),
    )
    .await;
    println!("{}", out.content);
    assert!(!out.success);
    assert!(!target.exists(), "sort wrote outside the workspace");
    // Inside the workspace, and in its private TMPDIR, writing works.
    let out = run(&tool, &h.workspace(), "sort -o sorted.txt in.txt").await;
    assert!(out.success, "{}", out.content);
    assert_eq!(
        std::fs::read_to_string(h.workspace().join("sorted.txt")).unwrap(),
        "a\nb\n"
    );
}

/// The daemon's environment (this test process's) is out of reach; the
/// command's own is readable and clean.
#[tokio::test]
async fn escape_reading_the_daemon_environment_is_confined() {
    if !landlock_here() {
        return;
    }
    let h = Home::new();
    // Cargo gives test processes this variable; the sandbox never passes it on.
    assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());
    let tool = shell(&["cat"]);
    let daemon = format!("cat /proc/{}/environ", std::process::id());
    let out = run(&tool, &h.workspace(), &daemon).await;
    println!("{}", out.content);
    assert!(
        !out.content.contains("CARGO_MANIFEST_DIR"),
        "{}",
        out.content
    );
    assert!(out.content.contains("Permission denied"), "{}", out.content);
    let own = run(&tool, &h.workspace(), "cat /proc/self/environ").await;
    let vars: Vec<&str> = own.content.split('\0').filter(|v| !v.is_empty()).collect();
    let home = format!("HOME={}", h.workspace().canonicalize().unwrap().display());
    assert!(vars.contains(&home.as_str()), "{vars:?}");
    assert!(vars.iter().any(|v| v.starts_with("TMPDIR=")), "{vars:?}");
    assert!(!vars.iter().any(|v| v.starts_with("CARGO_")), "{vars:?}");
}

/// Writes `.git/config` with an fsmonitor command that marks the workspace and
/// a file elsewhere; returns both marker paths.
fn plant_fsmonitor(h: &Home) -> (PathBuf, PathBuf) {
    let ws = h.workspace();
    let git = |args: &[&str]| {
        let status = std::process::Command::new("git")
            .args(args)
            .current_dir(&ws)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    };
    git(&["init", "-q"]);
    std::fs::write(ws.join("a.txt"), "a").unwrap();
    let inside = ws.join("fsmonitor-ran");
    let outside = h.elsewhere.path().join("pwned");
    let config = std::fs::read_to_string(ws.join(".git/config")).unwrap();
    std::fs::write(
        ws.join(".git/config"),
        format!(
            "{config}[core]\n\tfsmonitor = \"touch {} ; touch {} ; false\"\n",
            inside.display(),
            outside.display()
        ),
    )
    .unwrap();
    (inside, outside)
}

/// `git status` after `core.fsmonitor` is written into `.git/config`: the
/// command does not run (git's config is overridden), and nothing is written
/// outside the workspace.
#[tokio::test]
async fn escape_through_git_fsmonitor_is_confined() {
    if !landlock_here() {
        return;
    }
    let h = Home::new();
    let (inside, outside) = plant_fsmonitor(&h);
    let out = run(&shell(&["git"]), &h.workspace(), "git status --short").await;
    println!("{}", out.content);
    assert!(out.success, "{}", out.content);
    assert!(out.content.contains("a.txt"), "{}", out.content);
    assert!(!inside.exists(), "the fsmonitor command ran");
    assert!(!outside.exists(), "the fsmonitor command wrote outside");
}

/// Even with git's overrides removed, the fsmonitor command git runs is
/// confined like git itself: it runs, and cannot write outside.
#[tokio::test]
async fn fsmonitor_runs_confined_without_the_git_overrides() {
    if !landlock_here() {
        return;
    }
    let h = Home::new();
    let (inside, outside) = plant_fsmonitor(&h);
    let sandbox = Sandbox::new(SandboxSettings::default());
    let mut command = tokio::process::Command::new("git");
    command
        .args(["status", "--short"])
        .env("GIT_CONFIG_COUNT", "0")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut confined = sandbox.spawn(command, &h.workspace()).await.unwrap();
    confined.child.wait().await.unwrap();
    assert!(inside.exists(), "the fsmonitor command did not run at all");
    assert!(!outside.exists(), "the fsmonitor command wrote outside");
}

/// A descriptor the daemon holds without close-on-exec does not reach the
/// child: its only descriptors are 0, 1, 2 (and the one `ls` opens itself).
#[tokio::test]
async fn children_inherit_only_stdio() {
    let dir = tempfile::tempdir().unwrap();
    let leak = dir.path().join("leaked-descriptor");
    let file = std::fs::File::create(&leak).unwrap();
    rustix::io::fcntl_setfd(&file, rustix::io::FdFlags::empty()).unwrap();
    let sandbox = Sandbox::new(SandboxSettings::default());
    let mut command = tokio::process::Command::new("ls");
    command
        .args(["-l", "/proc/self/fd/"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let confined = sandbox.spawn(command, dir.path()).await.unwrap();
    let out = confined.child.wait_with_output().await.unwrap();
    let listing = String::from_utf8_lossy(&out.stdout).into_owned();
    println!("{listing}");
    let fds: Vec<(&str, &str)> = listing
        .lines()
        .filter_map(|l| l.split_once(" -> "))
        .map(|(left, target)| (left.rsplit(' ').next().unwrap_or(""), target))
        .collect();
    assert!(!listing.contains("leaked-descriptor"), "{listing}");
    for (fd, target) in &fds {
        assert!(
            ["0", "1", "2"].contains(fd) || target.ends_with("/fd"),
            "fd {fd} -> {target} was inherited"
        );
    }
    assert!(fds.len() >= 3, "{listing}");
    drop(file);
}

/// The private temporary directory is the command's TMPDIR, writable, and
/// gone once the command is done.
#[tokio::test]
async fn each_start_gets_a_private_tmpdir_removed_after() {
    let dir = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::new(SandboxSettings::default());
    let mut command = tokio::process::Command::new("sh");
    command
        .args(["-c", "echo x > \"$TMPDIR/f\" && echo \"$TMPDIR\""])
        .stdout(Stdio::piped());
    let mut confined = sandbox.spawn(command, dir.path()).await.unwrap();
    let mut stdout = confined.child.stdout.take().unwrap();
    let mut text = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut stdout, &mut text)
        .await
        .unwrap();
    assert!(confined.child.wait().await.unwrap().success());
    let tmp = PathBuf::from(text.trim());
    assert!(tmp.join("f").exists(), "{text}");
    drop(confined);
    for _ in 0..100 {
        if !tmp.exists() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("{} was not removed", tmp.display());
}

/// From Landlock ABI 6, a confined command cannot signal the daemon (or any
/// process outside its domain); the daemon can still kill it.
#[tokio::test]
async fn cannot_signal_the_daemon() {
    if !landlock_here() {
        return;
    }
    let sandbox = Sandbox::new(SandboxSettings::default());
    let abi: u32 = match sandbox.confinement() {
        cairn_agent::sandbox::Confinement::Landlock { abi } => abi.parse().unwrap(),
        other => panic!("{other}"),
    };
    if abi < 6 {
        println!("Landlock ABI {abi} has no signal scoping: not checked");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut command = tokio::process::Command::new("sh");
    command
        .args(["-c", &format!("kill -0 {}", std::process::id())])
        .stderr(Stdio::piped());
    let confined = sandbox.spawn(command, dir.path()).await.unwrap();
    let out = confined.child.wait_with_output().await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the daemon was signalled");
    assert!(stderr.contains("not permitted"), "{stderr}");
}

/// A program outside the workspace and the readable paths does not run.
#[tokio::test]
async fn programs_outside_the_readable_paths_do_not_run() {
    if !landlock_here() {
        return;
    }
    let h = Home::new();
    let program = h.elsewhere.path().join("tool.sh");
    std::fs::write(&program, "#!/bin/sh\necho ran\n").unwrap();
    std::fs::set_permissions(
        &program,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let tool = shell(&["*"]);
    let ctx = ToolContext::new(h.workspace(), "s");
    let err = tool
        .run_gated(json!({ "command": program.to_str().unwrap() }), &ctx)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("tools.shell.read_paths"), "{err}");
}
