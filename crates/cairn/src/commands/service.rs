//! `cairn service install|uninstall|status` (the work is in `crate::daemon::service`).

use std::process::ExitCode;

use crate::cli::ServiceCommand;
use crate::daemon::service;

/// Runs one `cairn service` command.
pub fn run(command: &ServiceCommand, json: bool) -> anyhow::Result<ExitCode> {
    let rt = super::runtime()?;
    match command {
        ServiceCommand::Install { force } => {
            let config = crate::settings::load()?;
            let message = rt.block_on(service::install(
                config.home(),
                config.env(),
                config.daemon.shutdown_deadline,
                *force,
            ))?;
            println!("{message}");
        }
        ServiceCommand::Uninstall => println!("{}", rt.block_on(service::uninstall())?),
        ServiceCommand::Status => {
            let status = rt.block_on(service::status())?;
            if json {
                println!("{}", serde_json::to_string_pretty(&status)?);
            } else {
                let installed = if status.installed {
                    "installed"
                } else {
                    "not installed (cairn service install)"
                };
                println!("unit: {} ({installed})", status.unit.display());
                match &status.active {
                    Some(active) => println!("systemctl --user is-active cairn: {active}"),
                    None => println!("systemctl: not found on PATH, cannot ask whether it runs"),
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
