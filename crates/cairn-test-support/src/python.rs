//! The test venv's interpreter (`CAIRN_TEST_PYTHON`, from
//! `scripts/test-venv.sh`); required under `CAIRN_REQUIRE_PYTHON=1`.

use std::path::PathBuf;

/// The venv's interpreter, or `None` (after saying so) when `test` must skip.
pub fn python(test: &str) -> Option<PathBuf> {
    crate::env_or_skip(
        test,
        "CAIRN_TEST_PYTHON",
        "CAIRN_REQUIRE_PYTHON",
        "export CAIRN_TEST_PYTHON=$(scripts/test-venv.sh)",
    )
    .map(PathBuf::from)
}

/// The interpreter with cronsim for the differential cron test
/// (`CAIRN_CRONSIM_PYTHON`); required under `CAIRN_REQUIRE_DIFFERENTIAL=1`.
pub fn cronsim_python(test: &str) -> Option<PathBuf> {
    crate::env_or_skip(
        test,
        "CAIRN_CRONSIM_PYTHON",
        "CAIRN_REQUIRE_DIFFERENTIAL",
        "export CAIRN_CRONSIM_PYTHON=$(scripts/cronsim-venv.sh)",
    )
    .map(PathBuf::from)
}
