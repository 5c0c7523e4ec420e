//! `cairn schedule explain`: kind, normalized form, description and next fire times of an expression.

use std::process::ExitCode;

use crate::cli::ExplainArgs;
use crate::exit::BadInput;

/// Explains one expression (implementation lands with the schedules work).
pub fn explain(args: &ExplainArgs, _json: bool) -> anyhow::Result<ExitCode> {
    Err(BadInput(format!("schedule parsing is not built yet: {}", args.expr)).into())
}
