//! Exit codes and error reporting: errors go to stderr, the code says what kind of failure it was.

use std::fmt;
use std::process::ExitCode;

/// Bad input from the person at the keyboard (a malformed expression, an unknown zone): exit 2.
#[derive(Debug)]
pub struct BadInput(pub String);

impl fmt::Display for BadInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadInput {}

/// Prints the error chain to stderr and picks the exit code: 2 for bad input, 1 otherwise.
pub fn report(err: &anyhow::Error) -> ExitCode {
    eprintln!("error: {err:#}");
    if err.downcast_ref::<BadInput>().is_some() {
        ExitCode::from(2)
    } else {
        ExitCode::from(1)
    }
}
