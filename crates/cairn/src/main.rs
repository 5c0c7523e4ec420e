//! The `cairn` binary: command-line interface, config loading and wiring.

mod cli;
mod commands;
mod exit;
mod settings;
mod wiring;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    // The daemon logs each fire and delivery; one-shot commands only warn.
    let default = match cli.command {
        cli::Command::Daemon(_) => "info,sqlx=warn",
        _ => "warn",
    };
    init_logging(default);
    match commands::run(cli) {
        Ok(code) => code,
        Err(err) => exit::report(&err),
    }
}

/// Logs go to stderr, filtered by `CAIRN_LOG` (e.g. `info`, `cairn_store=debug`);
/// `default` when it is unset.
fn init_logging(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("CAIRN_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}
