//! The shell tool: allowlist, protected paths, refused syntax, timeout, output caps.
#![cfg(unix)]
#![expect(
    clippy::disallowed_methods,
    reason = "test fixtures may use blocking std::fs"
)]

mod support;

use std::time::Duration;

use cairn_agent::tools::shell::{ShellConfig, ShellTool};
use cairn_agent::tools::{ToolContext, ToolError, ToolOutput};
use serde_json::json;
use support::RunGated;

fn config(programs: &[&str]) -> ShellConfig {
    ShellConfig {
        allowed_programs: programs.iter().map(|p| p.to_string()).collect(),
        ..ShellConfig::default()
    }
}

async fn run(tool: &ShellTool, ctx: &ToolContext, command: &str) -> Result<ToolOutput, ToolError> {
    tool.run_gated(json!({ "command": command }), ctx).await
}

fn refused(result: Result<ToolOutput, ToolError>) -> String {
    match result {
        Err(ToolError::NotPermitted(reason)) => reason,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn runs_allowlisted_programs_in_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("hello.txt"), "hi there\n").unwrap();
    let ctx = ToolContext::new(dir.path(), "s");
    let tool = ShellTool::new(ShellConfig::default());
    let out = run(&tool, &ctx, "cat hello.txt").await.unwrap();
    assert!(out.success);
    assert_eq!(out.content, "hi there\n");
    let out = run(&tool, &ctx, "echo 'a  b' \"c|d\"").await.unwrap();
    assert_eq!(out.content, "a  b c|d\n");
    let out = run(&tool, &ctx, "ls").await.unwrap();
    assert_eq!(out.content, "hello.txt\n");
}

#[tokio::test]
async fn failures_report_stderr_and_exit_status() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolContext::new(dir.path(), "s");
    let tool = ShellTool::new(ShellConfig::default());
    let out = run(&tool, &ctx, "cat missing.txt").await.unwrap();
    assert!(!out.success);
    assert!(out.content.contains("[stderr]"));
    assert!(out.content.contains("missing.txt"));
    assert!(out.content.ends_with("[exit status 1]"));
    let out = run(&tool, &ctx, "false").await.unwrap();
    assert_eq!(out.content, "(no output)\n[exit status 1]");
}

#[tokio::test]
async fn allowlist_denylist_and_syntax_refusals_have_reasons() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolContext::new(dir.path(), "s");
    let tool = ShellTool::new(ShellConfig::default());
    assert!(
        refused(run(&tool, &ctx, "rm -rf .").await).contains("`rm` is not in the shell allowlist")
    );
    assert!(
        refused(run(&tool, &ctx, "sh -c ls").await).contains("`sh` is not in the shell allowlist")
    );
    assert!(refused(run(&tool, &ctx, "cat /etc/shadow").await).contains("protected path"));
    assert!(refused(run(&tool, &ctx, "ls ../../../../root").await).contains("protected path"));
    let cases = [
        ("ls $(whoami)", "command substitution"),
        ("ls `whoami`", "command substitution"),
        ("(ls)", "subshells"),
        ("ls > out.txt", "redirections"),
        ("cat < /etc/hostname", "redirections"),
        ("ls | sh", "pipes"),
        ("ls; rm x", "sequences"),
        ("ls && rm x", "chaining"),
        ("echo $HOME", "variable expansion"),
        ("ls *.txt", "glob"),
    ];
    for (command, reason) in cases {
        let message = refused(run(&tool, &ctx, command).await);
        assert!(message.contains(reason), "{command}: {message}");
    }
    assert!(!dir.path().join("out.txt").exists());
    let err = run(&tool, &ctx, "echo 'unterminated").await.unwrap_err();
    assert!(
        matches!(err, ToolError::InvalidArguments(m) if m.contains("unterminated single quote"))
    );
}

#[tokio::test]
async fn shell_syntax_when_explicitly_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolContext::new(dir.path(), "s");
    let tool = ShellTool::new(ShellConfig {
        allow_shell_syntax: true,
        ..config(&["echo", "wc", "cat"])
    });
    let out = run(
        &tool,
        &ctx,
        "echo one two | wc -w > count.txt && cat count.txt",
    )
    .await
    .unwrap();
    assert_eq!(out.content.trim(), "2");
    assert!(refused(run(&tool, &ctx, "echo x | sh").await).contains("`sh`"));
    assert!(refused(run(&tool, &ctx, "echo $(id)").await).contains("command substitution"));
}

#[tokio::test]
async fn timeout_kills_the_process() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolContext::new(dir.path(), "s");
    let tool = ShellTool::new(ShellConfig {
        timeout: Duration::from_millis(200),
        ..config(&["sleep"])
    });
    let err = run(&tool, &ctx, "sleep 5").await.unwrap_err();
    assert_eq!(err, ToolError::Timeout(Duration::from_millis(200)));
    // The model may ask for a shorter limit, never a longer one.
    let tool = ShellTool::new(config(&["sleep"]));
    let err = tool
        .run_gated(json!({"command": "sleep 5", "timeout_secs": 1}), &ctx)
        .await
        .unwrap_err();
    assert_eq!(err, ToolError::Timeout(Duration::from_secs(1)));
}

/// A grandchild in the background is killed with its process group.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn timeout_kills_the_whole_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolContext::new(dir.path(), "s");
    let tool = ShellTool::new(ShellConfig {
        allow_shell_syntax: true,
        timeout: Duration::from_millis(500),
        ..config(&["sleep", "echo", "wait"])
    });
    let err = run(&tool, &ctx, "sleep 30 & echo $! > pid.txt; wait")
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::Timeout(_)));
    let pid = std::fs::read_to_string(dir.path().join("pid.txt")).unwrap();
    let stat = format!("/proc/{}/stat", pid.trim());
    // Killing is immediate, reaping by init is not: poll until it is gone or a zombie.
    let mut alive = true;
    for _ in 0..100 {
        match std::fs::read_to_string(&stat) {
            Err(_) => alive = false,
            Ok(s)
                if s.rsplit(')')
                    .next()
                    .is_some_and(|rest| rest.trim_start().starts_with('Z')) =>
            {
                alive = false
            }
            Ok(_) => {}
        }
        if !alive {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!alive, "background sleep survived the timeout");
}

#[tokio::test]
async fn cancellation_kills_the_process() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolContext::new(dir.path(), "s");
    let tool = ShellTool::new(config(&["sleep"]));
    let token = ctx.cancel.clone();
    let handle = tokio::spawn(async move { run(&tool, &ctx, "sleep 30").await });
    token.cancel();
    assert_eq!(handle.await.unwrap().unwrap_err(), ToolError::Cancelled);
}

#[tokio::test]
async fn output_is_capped_per_stream() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolContext::new(dir.path(), "s");
    let tool = ShellTool::new(ShellConfig {
        max_output_bytes: 1000,
        ..ShellConfig::default()
    });
    let out = run(&tool, &ctx, "seq 1 100000").await.unwrap();
    assert!(out.success, "the child was drained, not blocked");
    assert!(out.content.starts_with("1\n2\n3\n"));
    assert!(
        out.content.contains("[stdout cut at 1000 of 588895 bytes]"),
        "{}",
        &out.content[out.content.len() - 80..]
    );
}

#[tokio::test]
async fn environment_is_not_inherited() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolContext::new(dir.path(), "s");
    let tool = ShellTool::new(ShellConfig {
        allow_shell_syntax: true,
        ..config(&["echo"])
    });
    // Cargo sets CARGO_MANIFEST_DIR for test processes; it is not in the passthrough list.
    assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());
    let out = run(&tool, &ctx, "echo \"[$CARGO_MANIFEST_DIR][$TERM]\"")
        .await
        .unwrap();
    assert_eq!(out.content, "[][dumb]\n");
}
