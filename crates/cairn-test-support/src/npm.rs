//! The pinned npm packages of `scripts/test-npm.sh`: a variable names where
//! they are, or the tests install them by running the script (exit 3: npm or
//! node is missing). Required under `CAIRN_REQUIRE_NPM=1`.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// MCP's server-everything program (`CAIRN_TEST_MCP_EVERYTHING`, or
/// `scripts/test-npm.sh`), or `None` (after saying so).
pub fn everything(test: &str) -> Option<PathBuf> {
    static FOUND: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    found(&FOUND, test, "CAIRN_TEST_MCP_EVERYTHING", None)
}

/// The `node_modules` folder holding the gateway's client packages
/// (`CAIRN_TEST_NODE_PATH`, or `scripts/test-npm.sh gateway`), or `None`
/// (after saying so).
pub fn node_path(test: &str) -> Option<PathBuf> {
    static FOUND: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    found(&FOUND, test, "CAIRN_TEST_NODE_PATH", Some("gateway"))
}

fn found(
    cell: &OnceLock<Result<PathBuf, String>>,
    test: &str,
    var: &str,
    set: Option<&str>,
) -> Option<PathBuf> {
    match cell.get_or_init(|| install(var, set)) {
        Ok(path) => Some(path.clone()),
        Err(why) => {
            crate::missing(test, "CAIRN_REQUIRE_NPM", why);
            None
        }
    }
}

/// The path `var` names, else what the script prints for `set`.
fn install(var: &str, set: Option<&str>) -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os(var).filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(path));
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/test-npm.sh");
    let out = std::process::Command::new("bash")
        .arg(&script)
        .args(set)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    match out.status.code() {
        Some(0) => Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())),
        Some(3) => Err(format!(
            "npm is unavailable: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        _ => panic!(
            "scripts/test-npm.sh {} failed: {}",
            set.unwrap_or_default(),
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}
