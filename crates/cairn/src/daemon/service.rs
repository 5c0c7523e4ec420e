//! `cairn service install|uninstall|status`: cairn as a systemd user
//! service (`~/.config/systemd/user/cairn.service`), running this binary's
//! `daemon` with this `CAIRN_HOME`, restarted by systemd if it fails.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;

use crate::exit::BadInput;

/// The unit's name.
pub const UNIT: &str = "cairn.service";

/// Where the unit goes: `$XDG_CONFIG_HOME/systemd/user`, else `~/.config/systemd/user`.
pub fn unit_path() -> anyhow::Result<PathBuf> {
    let config = match std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => {
            let home = std::env::var_os("HOME").filter(|v| !v.is_empty()).context(
                "neither XDG_CONFIG_HOME nor HOME is set: cannot tell where systemd user units go",
            )?;
            PathBuf::from(home).join(".config")
        }
    };
    Ok(config.join("systemd").join("user").join(UNIT))
}

/// Quotes one word for a unit file: double quotes, with `\`, `"` and `%`
/// (systemd's specifier sign) escaped.
fn quote(text: &str) -> String {
    let escaped = text
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('%', "%%");
    format!("\"{escaped}\"")
}

/// The unit's text.
pub fn unit_text(exe: &Path, home: &Path, stop_deadline: Duration) -> String {
    // systemd's own stop timeout is a little longer than the daemon's
    // deadline, so the daemon ends on its own terms.
    let stop = stop_deadline.as_secs() + 15;
    format!(
        "# Written by `cairn service install`; `cairn service uninstall` removes it.\n\
         [Unit]\n\
         Description=cairn, a personal AI agent runtime\n\
         \n\
         [Service]\n\
         Type=simple\n\
         ExecStart={} daemon\n\
         Environment={}\n\
         Restart=on-failure\n\
         RestartSec=5\n\
         KillSignal=SIGTERM\n\
         TimeoutStopSec={stop}\n\
         \n\
         [Install]\n\
         WantedBy=default.target\n",
        quote(&exe.display().to_string()),
        quote(&format!("CAIRN_HOME={}", home.display())),
    )
}

/// Writes the unit; refuses to replace one without `force`. Returns what to tell the person.
pub async fn install(home: &Path, stop_deadline: Duration, force: bool) -> anyhow::Result<String> {
    let path = unit_path()?;
    let exe = std::env::current_exe().context("cannot tell where this cairn binary is")?;
    let home = absolute(home)?;
    if !force && tokio::fs::try_exists(&path).await.unwrap_or(false) {
        return Err(BadInput(format!(
            "{} already exists; add --force to replace it",
            path.display()
        ))
        .into());
    }
    if let Some(dir) = path.parent() {
        tokio::fs::create_dir_all(dir)
            .await
            .with_context(|| format!("cannot create {}", dir.display()))?;
    }
    tokio::fs::write(&path, unit_text(&exe, &home, stop_deadline))
        .await
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(format!(
        "wrote {}\n\
         start it now and at every login:  systemctl --user daemon-reload && systemctl --user enable --now cairn\n\
         follow its logs:                  journalctl --user -u cairn -f\n\
         keep it running after logout:     loginctl enable-linger $USER",
        path.display()
    ))
}

/// Removes the unit. Returns what to tell the person.
pub async fn uninstall() -> anyhow::Result<String> {
    let path = unit_path()?;
    match tokio::fs::remove_file(&path).await {
        Ok(()) => Ok(format!(
            "removed {}\n\
             if it was running:  systemctl --user disable --now cairn && systemctl --user daemon-reload",
            path.display()
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(BadInput(format!(
            "no unit to remove: {} does not exist",
            path.display()
        ))
        .into()),
        Err(e) => Err(e).with_context(|| format!("cannot remove {}", path.display())),
    }
}

/// What `cairn service status` found.
#[derive(Debug, serde::Serialize)]
pub struct ServiceStatus {
    /// The unit's path.
    pub unit: PathBuf,
    /// Whether it exists.
    pub installed: bool,
    /// `systemctl --user is-active cairn`'s answer; `None` without systemctl.
    pub active: Option<String>,
}

/// Looks at the unit file and, when systemctl is on `PATH`, asks it.
pub async fn status() -> anyhow::Result<ServiceStatus> {
    let unit = unit_path()?;
    let installed = tokio::fs::try_exists(&unit).await.unwrap_or(false);
    let active = match find_on_path("systemctl").await {
        Some(systemctl) => {
            let out = tokio::process::Command::new(systemctl)
                .args(["--user", "is-active", "cairn"])
                .output()
                .await
                .context("cannot run systemctl")?;
            Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
        }
        None => None,
    };
    Ok(ServiceStatus {
        unit,
        installed,
        active,
    })
}

/// The first `name` in a `PATH` directory.
async fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    for dir in std::env::split_paths(&path) {
        let candidate = dir.join(name);
        if tokio::fs::metadata(&candidate)
            .await
            .is_ok_and(|m| m.is_file())
        {
            return Some(candidate);
        }
    }
    None
}

fn absolute(path: &Path) -> anyhow::Result<PathBuf> {
    if path.is_absolute() {
        return Ok(path.to_path_buf());
    }
    Ok(std::env::current_dir()
        .context("cannot read the current directory")?
        .join(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unit_quotes_paths_and_escapes_specifiers() {
        let text = unit_text(
            Path::new("/opt/my tools/cairn"),
            Path::new("/home/me/100%/cairn"),
            Duration::from_secs(30),
        );
        assert!(
            text.contains("ExecStart=\"/opt/my tools/cairn\" daemon\n"),
            "{text}"
        );
        assert!(
            text.contains("Environment=\"CAIRN_HOME=/home/me/100%%/cairn\"\n"),
            "{text}"
        );
        assert!(text.contains("Restart=on-failure\n"));
        assert!(text.contains("TimeoutStopSec=45\n"));
    }
}
