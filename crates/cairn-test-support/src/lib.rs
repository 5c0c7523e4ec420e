//! What cairn's tests share, used only as a dev-dependency.
//!
//! One rule for every outside part a test needs (a PostgreSQL server, the
//! test venv's Python, the pinned npm packages, the shells): when its
//! variable is unset the test is skipped with a message on stderr, unless
//! the matching `CAIRN_REQUIRE_*` flag is `1` (CI), which makes that a
//! failure. Any other value of a flag, or none, means "not required".
#![allow(clippy::unwrap_used, clippy::disallowed_methods)] // test support: failures panic

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
/// skipped and why.
pub fn missing(test: &str, flag: &str, why: &str) {
    assert!(!required(flag), "{flag}=1 but {why}");
    eprintln!("SKIPPED {test}: {why}");
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
