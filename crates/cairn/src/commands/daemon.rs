//! `cairn daemon`: the always-on half in the foreground, supervised (see
//! `crate::daemon`): the routine engine fires routines, the dispatcher
//! delivers notifications, the gateway serves the HTTP API, idle chat
//! sessions are pruned; SIGINT or SIGTERM stops it gracefully, SIGHUP
//! reloads the configuration.

use std::process::ExitCode;

use crate::cli::DaemonArgs;

/// Runs until a stop signal.
pub fn run(args: &DaemonArgs) -> anyhow::Result<ExitCode> {
    crate::daemon::run(args)
}
