//! `cairn completions SHELL` and `cairn man`: both written from the clap
//! grammar itself, so they list exactly the commands this binary has.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use clap::CommandFactory;

use crate::cli::Cli;

/// Prints the completion script for `shell` on stdout.
pub fn completions(shell: clap_complete::Shell) -> anyhow::Result<ExitCode> {
    let mut command = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, "cairn", &mut script);
    print_all(&script)
}

/// Writes `bytes` to stdout; a reader that stops early (`| head`) is no error.
fn print_all(bytes: &[u8]) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(ExitCode::SUCCESS),
    }
}

/// Prints cairn(1) on stdout, or writes a page per command into `dir`.
#[expect(
    clippy::disallowed_methods,
    reason = "one-shot command with no runtime: creates the output directory"
)]
pub fn man(dir: Option<&Path>) -> anyhow::Result<ExitCode> {
    let command = Cli::command();
    match dir {
        None => {
            let mut page = Vec::new();
            clap_mangen::Man::new(command).render(&mut page)?;
            return print_all(&page);
        }
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            clap_mangen::generate_to(command, dir)
                .with_context(|| format!("cannot write manual pages into {}", dir.display()))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
