//! `cairn version`

use std::process::ExitCode;

/// Prints the version (and build target) of this binary.
pub fn run(json: bool) -> anyhow::Result<ExitCode> {
    let version = env!("CARGO_PKG_VERSION");
    if json {
        let value = serde_json::json!({
            "name": "cairn",
            "version": version,
            "os": std::env::consts::OS,
            "arch": std::env::consts::ARCH,
        });
        println!("{value}");
    } else {
        println!(
            "cairn {version} ({}-{})",
            std::env::consts::ARCH,
            std::env::consts::OS
        );
    }
    Ok(ExitCode::SUCCESS)
}
