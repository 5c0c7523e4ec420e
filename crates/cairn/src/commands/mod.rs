//! Command implementations, one module per top-level command.

pub(crate) mod backup;
mod channel;
mod chat;
mod config;
mod cost;
mod daemon;
pub(crate) mod db;
pub(crate) mod delivery;
mod doctor;
pub(crate) mod export;
pub(crate) mod init;
mod job;
mod manual;
mod mcp;
mod memory;
mod notify;
mod routine;
mod routine_create;
mod routine_files;
mod routine_ops;
mod schedule;
pub(crate) mod secret;
mod secret_leaks;
mod service;
mod skill;
mod status;
mod telegram;
mod token;
mod tool;
mod version;

use std::process::ExitCode;

use crate::cli::{Cli, Command, ConfigCommand, ScheduleCommand};

pub(crate) use token::pairing_line;

/// Runs the parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Version => version::run(cli.json),
        Command::Config(ConfigCommand::Show) => config::show(cli.json),
        Command::Config(ConfigCommand::Reference) => {
            print!("{}", cairn_core::config::reference::markdown());
            Ok(ExitCode::SUCCESS)
        }
        Command::Init(args) => init::run(&args, cli.json),
        Command::Completions { shell } => manual::completions(shell),
        Command::Man { dir } => manual::man(dir.as_deref()),
        Command::Backup(args) => backup::backup(&args, cli.json),
        Command::Restore(args) => backup::restore(&args, cli.json),
        Command::Db(command) => db::run(&command, cli.json),
        Command::Export(args) => export::export(&args, cli.json),
        Command::Import(args) => export::import(&args, cli.json),
        Command::Doctor(args) => doctor::run_with(cli.json, args.offline),
        Command::Job(command) => job::run(&command, cli.json),
        Command::Cost => cost::run(cli.json),
        Command::Chat(args) => chat::run(&args, cli.json),
        Command::Notify(command) => notify::run(&command, cli.json),
        Command::Inbox(args) => notify::inbox(&args, cli.json),
        Command::Routine(command) => routine::run(&command, cli.json),
        Command::Daemon(args) => daemon::run(&args),
        Command::Pair => token::pair(),
        Command::Token(command) => token::run(&command, cli.json),
        Command::Secret(command) => secret::run(&command, cli.json),
        Command::Telegram(command) => telegram::run(&command, cli.json),
        Command::Channel(command) => channel::run(&command, cli.json),
        Command::Status => status::run(cli.json),
        Command::Service(command) => service::run(&command, cli.json),
        Command::Tool(command) => tool::run(&command, cli.json),
        Command::Memory(args) => memory::run(&args, cli.json),
        Command::Mcp(command) => mcp::run(&command, cli.json),
        Command::Skill(args) => skill::run(&args, cli.json),
        Command::Schedule(ScheduleCommand::Explain(args)) => {
            // The configured zone is only needed when --tz is absent.
            let zone = match args.tz {
                Some(_) => chrono_tz::UTC,
                None => crate::settings::load()?.user.timezone,
            };
            schedule::explain(&args, cli.json, zone)
        }
    }
}

/// A runtime for commands that talk to the database or the network.
pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}
