//! What cairn's tests share, used only as a dev-dependency.
//!
//! One rule for every outside part a test needs (a PostgreSQL server, the
//! test venv's Python, the pinned npm packages, the shells): when its
//! variable is unset the test is skipped with a message on stderr, unless
//! the matching `CAIRN_REQUIRE_*` flag is `1` (CI), which makes that a
//! failure. Any other value of a flag, or none, means "not required".
#![expect(clippy::disallowed_methods, reason = "test support: failures panic")]

#[cfg(feature = "agent")]
pub mod agent;
pub mod npm;
pub mod postgres;
pub mod python;

/// Whether the flag `name` requires its part: set to `1`.
pub fn required(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| v == "1")
}

/// A missing part: panics when `flag` requires it, else says that `test` is
/// skipped and why, and counts it (see [`skipped`]).
pub fn missing(test: &str, flag: &str, why: &str) {
    assert!(!required(flag), "{flag}=1 but {why}");
    skipped(test, why);
}

/// Says on stderr that `test` is skipped and why, and appends a line to the
/// run's skip list, so that a green run that did nothing shows: the file
/// `CAIRN_TEST_SKIPS` names, else `target/test-skips.txt` of the workspace
/// (`.ci/run` prints it and fails unless it is empty).
pub fn skipped(test: &str, why: &str) {
    use std::io::Write as _;
    eprintln!("SKIPPED {test}: {why}");
    let file = std::env::var_os("CAIRN_TEST_SKIPS")
        .filter(|f| !f.is_empty())
        .map(std::path::PathBuf::from)
        .unwrap_or_else(skips_file_in_target);
    if let Some(dir) = file.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    // One short line per append: whole even when test processes write at once.
    let line = format!("{test}: {}\n", why.replace('\n', " "));
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&file)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = written {
        eprintln!("cannot count the skip in {}: {e}", file.display());
    }
}

/// `target/test-skips.txt` of the workspace (or of `CARGO_TARGET_DIR`).
fn skips_file_in_target() -> std::path::PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .filter(|d| !d.is_empty())
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    target.join("test-skips.txt")
}

/// The non-empty value of the variable `var`, or `None` after [`missing`]
/// (`hint` says how to set it).
pub fn env_or_skip(test: &str, var: &str, flag: &str, hint: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(value) if !value.is_empty() => Some(value),
        _ => {
            missing(test, flag, &format!("{var} is not set ({hint})"));
            None
        }
    }
}
