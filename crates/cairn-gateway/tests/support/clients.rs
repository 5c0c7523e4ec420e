//! Where the client programs the tests drive come from: the test venv's
//! Python (`CAIRN_TEST_PYTHON`, from `scripts/test-venv.sh`) and the pinned
//! npm packages (`CAIRN_TEST_NODE_PATH`, from `scripts/test-npm.sh gateway`,
//! which the tests run themselves when it is unset). A test without them is
//! skipped, saying so, unless `CAIRN_REQUIRE_PYTHON=1` / `CAIRN_REQUIRE_NPM=1`
//! (CI) make that a failure.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The venv's interpreter, or `None` (after saying so) when `test` must skip.
pub fn python(test: &str) -> Option<PathBuf> {
    match std::env::var_os("CAIRN_TEST_PYTHON") {
        Some(path) if !path.is_empty() => Some(PathBuf::from(path)),
        _ => {
            let required = std::env::var("CAIRN_REQUIRE_PYTHON").is_ok_and(|v| v == "1");
            assert!(
                !required,
                "CAIRN_REQUIRE_PYTHON=1 but CAIRN_TEST_PYTHON is not set; run: export CAIRN_TEST_PYTHON=$(scripts/test-venv.sh)"
            );
            eprintln!(
                "SKIPPED {test}: set CAIRN_TEST_PYTHON (export CAIRN_TEST_PYTHON=$(scripts/test-venv.sh))"
            );
            None
        }
    }
}

/// The `node_modules` folder holding the pinned `openai` package, or `None`
/// (after saying so) when npm or node is missing.
pub fn node_path(test: &str) -> Option<PathBuf> {
    static FOUND: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let found = FOUND.get_or_init(|| {
        if let Some(path) = std::env::var_os("CAIRN_TEST_NODE_PATH").filter(|p| !p.is_empty()) {
            return Ok(PathBuf::from(path));
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/test-npm.sh");
        let out = std::process::Command::new("bash")
            .arg(&script)
            .arg("gateway")
            .output()
            .unwrap();
        match out.status.code() {
            Some(0) => Ok(PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())),
            Some(3) => Err(String::from_utf8_lossy(&out.stderr).trim().to_string()),
            _ => panic!(
                "scripts/test-npm.sh gateway failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ),
        }
    });
    match found {
        Ok(path) => Some(path.clone()),
        Err(why) => {
            let required = std::env::var("CAIRN_REQUIRE_NPM").is_ok_and(|v| v == "1");
            assert!(
                !required,
                "CAIRN_REQUIRE_NPM=1 but npm is unavailable: {why}"
            );
            eprintln!("SKIPPED {test}: {why}");
            None
        }
    }
}

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
