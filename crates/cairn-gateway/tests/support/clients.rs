//! Running the client programs the tests drive (found by
//! `cairn_test_support::{python, npm}`).

/// Runs `cmd` off the runtime's threads (the gateway it talks to runs on them).
pub async fn run(mut cmd: std::process::Command) -> std::process::Output {
    tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap()
}

/// A program's stdout and stderr, for failure messages.
pub fn text(output: &std::process::Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}
