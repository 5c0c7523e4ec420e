//! The test venv's interpreter (`CAIRN_TEST_PYTHON`, from
//! `scripts/test-venv.sh`): a test that needs it skips with a message when
//! it is not set, and fails instead under `CAIRN_REQUIRE_PYTHON=1` (CI).

use std::path::PathBuf;

/// The interpreter, or `None` (after saying so) when `test` must skip.
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
