//! The `cairn` binary: command-line interface, config loading and wiring.

mod cli;
mod commands;
mod exit;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    match commands::run(cli) {
        Ok(code) => code,
        Err(err) => exit::report(&err),
    }
}
