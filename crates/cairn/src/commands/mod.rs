//! Command implementations, one module per top-level command.

mod schedule;
mod version;

use std::process::ExitCode;

use crate::cli::{Cli, Command, ScheduleCommand};

/// Runs the parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Version => version::run(cli.json),
        Command::Schedule(ScheduleCommand::Explain(args)) => schedule::explain(&args, cli.json),
    }
}
