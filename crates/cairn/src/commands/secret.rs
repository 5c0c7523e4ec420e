//! `cairn secret …`: secrets. On this branch only `leaks` (the vault's
//! `set`, `list`, `rm` and `rotate-key` join it when merged).

use std::process::ExitCode;

use clap::Subcommand;

/// `cairn secret` subcommands.
#[derive(Debug, Subcommand)]
pub enum SecretCommand {
    /// The secrets found on their way out (a tool call, a channel message, a
    /// hook's input, a request to the LLM), newest first: by name, never value.
    Leaks {
        /// Show at most this many.
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
}

/// Runs one `cairn secret` subcommand.
pub fn run(command: &SecretCommand, as_json: bool) -> anyhow::Result<ExitCode> {
    match command {
        SecretCommand::Leaks { limit } => super::secret_leaks::run(*limit, as_json),
    }
}
