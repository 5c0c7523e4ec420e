//! The `cairn` binary: command-line interface, config loading and wiring.

mod alloc;
mod cli;
mod commands;
mod daemon;
mod environment;
mod exit;
mod home;
mod log_writer;
mod routing;
mod settings;
mod vault;
mod wiring;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    cairn_store::on_thread_park(alloc::parked);
    let cli = cli::Cli::parse();
    // The daemon logs each fire and delivery; one-shot commands only warn.
    let default = match cli.command {
        cli::Command::Daemon(_) => "info,sqlx=warn",
        _ => "warn",
    };
    init_logging(default, cli.log_format);
    // Clients come from `cairn_llm::tls`; any other still gets ring, not a panic.
    cairn_llm::tls::install_default_provider();
    quiet_on_a_closed_stdout();
    match commands::run(cli) {
        Ok(code) => code,
        Err(err) => exit::report(&err),
    }
}

/// `cairn status | head` closes the pipe before everything is printed, and
/// `println!` then panics ("failed printing to stdout: Broken pipe"). The
/// reader chose to stop: exit as quietly as a process ended by SIGPIPE
/// would (status 141), with no panic message. Other panics are reported
/// as before.
fn quiet_on_a_closed_stdout() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info.payload_as_str().unwrap_or_default();
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(141);
        }
        report(info);
    }));
}

/// Logs go to stderr, redacted ([`log_writer`]), filtered by `CAIRN_LOG` (e.g. `info`, `cairn_store=debug`);
/// `default` when it is unset. `--log-format json` writes one JSON object a line.
fn init_logging(default: &str, format: cli::LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("CAIRN_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(log_writer::RedactedStderr::default);
    match format {
        cli::LogFormat::Human => builder.init(),
        cli::LogFormat::Json => builder.json().init(),
    }
}
