//! `cairn service install|uninstall|status`: cairn as a systemd user
//! service (`~/.config/systemd/user/cairn.service`), running this binary's
//! `daemon` with this `CAIRN_HOME`, restarted by systemd if it fails.
//!
//! systemd starts the service with almost no environment, so `install`
//! also writes `cairn.env` beside the unit (0600, named by
//! `EnvironmentFile=`): the `CAIRN_*` and `*_API_KEY` variables set at
//! install time and every variable config.toml names as `${VAR}`, so an
//! LLM or channel configured through them works under the service too.
//! Only their names are shown, and those config.toml names but this
//! shell does not set are listed as missing. The modes are set, not
//! left to the umask: the unit 0644, `cairn.env` 0600, and the directories
//! made for them 0700 (an existing one is closed to others' writes).

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

/// The environment file's name, beside the unit.
pub const ENV_FILE: &str = "cairn.env";

/// The variables the service keeps from the installing shell: `CAIRN_*`
/// (but `CAIRN_HOME`, which the unit sets) and provider keys (`*_API_KEY`),
/// sorted by name.
pub fn captured(vars: impl IntoIterator<Item = (String, String)>) -> Vec<(String, String)> {
    let mut kept: Vec<(String, String)> = vars
        .into_iter()
        .filter(|(name, _)| {
            (name.starts_with("CAIRN_") && name != "CAIRN_HOME") || name.ends_with("_API_KEY")
        })
        .collect();
    kept.sort();
    kept
}

/// Every variable config.toml's strings name as `${VAR}` (keys, comments
/// and other text left out; `${secret:NAME}` is the vault's, not a
/// variable), each once, sorted by name.
pub fn referenced(config_toml: &str) -> Result<Vec<String>, toml::de::Error> {
    fn walk(value: &toml::Value, names: &mut Vec<String>) {
        match value {
            toml::Value::String(s) => {
                let vars = cairn_core::text::var_names(s);
                let vars = vars
                    .into_iter()
                    .filter(|n| !n.starts_with(cairn_core::text::SECRET_PREFIX));
                for name in vars {
                    if !names.iter().any(|n| n == name) {
                        names.push(name.to_string());
                    }
                }
            }
            toml::Value::Array(items) => items.iter().for_each(|v| walk(v, names)),
            toml::Value::Table(table) => table.values().for_each(|v| walk(v, names)),
            _ => {}
        }
    }
    let table: toml::Table = toml::from_str(config_toml)?;
    let mut names = Vec::new();
    table.values().for_each(|v| walk(v, &mut names));
    names.sort();
    Ok(names)
}

/// The variables the service gets: [`captured`]'s and those config.toml
/// names (`referenced`) that are set, sorted; and the referenced ones that
/// are not set.
pub fn service_vars(
    env: &std::collections::BTreeMap<String, String>,
    referenced: &[String],
) -> (Vec<(String, String)>, Vec<String>) {
    let mut vars = captured(env.clone());
    let mut missing = Vec::new();
    for name in referenced {
        match env.get(name) {
            Some(value) if !vars.iter().any(|(n, _)| n == name) => {
                vars.push((name.clone(), value.clone()));
            }
            Some(_) => {}
            None => missing.push(name.clone()),
        }
    }
    vars.sort();
    (vars, missing)
}

/// The environment file's text: one `NAME="value"` a line, with `\`, `"`
/// and line breaks escaped as systemd reads them.
pub fn env_file_text(vars: &[(String, String)]) -> String {
    let mut text = String::from(
        "# Written by `cairn service install`: the CAIRN_* and *_API_KEY variables set then,\n\
         # and those config.toml names as ${VAR}.\n",
    );
    for (name, value) in vars {
        let escaped = value
            .replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "\\n");
        text.push_str(&format!("{name}=\"{escaped}\"\n"));
    }
    text
}

/// The unit's text.
pub fn unit_text(exe: &Path, home: &Path, env_file: &Path, stop_deadline: Duration) -> String {
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
         EnvironmentFile=-{}\n\
         Restart=on-failure\n\
         RestartSec=5\n\
         KillSignal=SIGTERM\n\
         TimeoutStopSec={stop}\n\
         \n\
         [Install]\n\
         WantedBy=default.target\n",
        quote(&exe.display().to_string()),
        quote(&format!("CAIRN_HOME={}", home.display())),
        quote(&env_file.display().to_string()),
    )
}

/// Writes the unit; refuses to replace one without `force`. Returns what to tell the person.
pub async fn install(
    home: &Path,
    env: &cairn_core::config::Environment,
    stop_deadline: Duration,
    force: bool,
) -> anyhow::Result<String> {
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
        unit_dir(dir).await?;
    }
    let env_file = path.with_file_name(ENV_FILE);
    let named = config_references(&home).await?;
    let (vars, missing) = service_vars(env.vars(), &named);
    write_with_mode(&env_file, &env_file_text(&vars), 0o600).await?;
    let unit = unit_text(&exe, &home, &env_file, stop_deadline);
    write_with_mode(&path, &unit, 0o644).await?;
    let names: Vec<&str> = vars.iter().map(|(name, _)| name.as_str()).collect();
    let captured = if names.is_empty() {
        "no CAIRN_* or *_API_KEY variables, nor any config.toml names, are set: the service gets none".to_string()
    } else {
        format!("with {}", names.join(", "))
    };
    let missing = if missing.is_empty() {
        String::new()
    } else {
        format!(
            "missing: config.toml names {}, not set in this shell: export {} and run `cairn service install --force` again, or add {} to {}\n",
            missing.join(", "),
            if missing.len() == 1 { "it" } else { "them" },
            if missing.len() == 1 { "it" } else { "them" },
            env_file.display()
        )
    };
    Ok(format!(
        "wrote {}\n\
         wrote {} (0600) {captured}; edit it to change them\n\
         {missing}\
         start it now and at every login:  systemctl --user daemon-reload && systemctl --user enable --now cairn\n\
         follow its logs:                  journalctl --user -u cairn -f\n\
         keep it running after logout:     loginctl enable-linger $USER",
        path.display(),
        env_file.display(),
    ))
}

/// The variables `home`'s config.toml names (none without the file).
async fn config_references(home: &Path) -> anyhow::Result<Vec<String>> {
    let file = crate::settings::config_path(home);
    match tokio::fs::read_to_string(&file).await {
        Ok(text) => {
            referenced(&text).map_err(|e| BadInput(format!("{}: {e}", file.display())).into())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", file.display())),
    }
}

/// Makes the unit directory and its missing parents 0700, whatever the
/// umask (XDG's rule for directories it creates); an existing one others
/// may write is closed to them (0755 at most), so nobody but its owner can
/// put a unit of theirs in systemd's path.
async fn unit_dir(dir: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mut missing = Vec::new();
    let mut at = Some(dir);
    while let Some(level) = at {
        if tokio::fs::try_exists(level).await.unwrap_or(false) {
            break;
        }
        missing.push(level.to_path_buf());
        at = level.parent();
    }
    for level in missing.iter().rev() {
        match tokio::fs::DirBuilder::new().mode(0o700).create(level).await {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e).with_context(|| format!("cannot create {}", level.display())),
        }
        tokio::fs::set_permissions(level, std::fs::Permissions::from_mode(0o700))
            .await
            .with_context(|| format!("cannot set the mode of {}", level.display()))?;
    }
    let mode = tokio::fs::metadata(dir)
        .await
        .with_context(|| format!("cannot read {}", dir.display()))?
        .permissions()
        .mode();
    if mode & 0o022 != 0 {
        tokio::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode & 0o755))
            .await
            .with_context(|| format!("cannot close {} to others", dir.display()))?;
    }
    Ok(())
}

/// Writes `text` to `path` with exactly `mode`, whatever the umask: into a
/// new file beside it, then renamed over it (a file or symlink already
/// there is replaced, never written through).
async fn write_with_mode(path: &Path, text: &str, mode: u32) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let written = async {
        let mut file = tokio::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)
            .await?;
        // The umask may have taken bits `mode` asks for (0644 under 077).
        tokio::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode)).await?;
        tokio::io::AsyncWriteExt::write_all(&mut file, text.as_bytes()).await?;
        tokio::io::AsyncWriteExt::flush(&mut file).await?;
        tokio::fs::rename(&tmp, path).await
    }
    .await;
    if let Err(e) = written {
        let _ = tokio::fs::remove_file(&tmp).await;
        return Err(e).with_context(|| format!("cannot write {}", path.display()));
    }
    Ok(())
}

/// Removes the unit. Returns what to tell the person.
pub async fn uninstall() -> anyhow::Result<String> {
    let path = unit_path()?;
    // The environment file goes with the unit (it may be gone already).
    let _ = tokio::fs::remove_file(path.with_file_name(ENV_FILE)).await;
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
            Path::new("/home/me/.config/systemd/user/cairn.env"),
            Duration::from_secs(30),
        );
        assert!(
            text.contains("EnvironmentFile=-\"/home/me/.config/systemd/user/cairn.env\"\n"),
            "{text}"
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

    #[test]
    fn every_variable_config_toml_names_is_kept_and_the_unset_ones_named() {
        let named = referenced(
            "# ${IN_A_COMMENT}\n[llm]\napi_key = \"${MY_LLM_TOKEN}\"\n\
             [channels.phone]\ntype = \"telegram\"\nbot_token = \"${TG}\"\nallowed = [\"${TG}\", \"x${GONE}\"]\n\
             [channels.team]\ntype = \"slack\"\nbot_token = \"${secret:SLACK}\"\n",
        )
        .unwrap();
        // A vault reference is no variable of the service's.
        assert_eq!(named, ["GONE", "MY_LLM_TOKEN", "TG"]);
        let env = [
            ("MY_LLM_TOKEN", "sk-1"),
            ("TG", "42:abc"),
            ("PATH", "/bin"),
            ("CAIRN_LLM_MODEL", "m"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .into();
        let (vars, missing) = service_vars(&env, &named);
        let names: Vec<&str> = vars.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["CAIRN_LLM_MODEL", "MY_LLM_TOKEN", "TG"]);
        assert_eq!(missing, ["GONE"]);
    }

    #[test]
    fn the_environment_file_keeps_cairn_and_key_variables_escaped() {
        let vars = captured(
            [
                ("PATH", "/usr/bin"),
                ("CAIRN_HOME", "/h"),
                ("OPENAI_API_KEY", "sk-\"quoted\"\\x"),
                ("CAIRN_LLM_MODEL", "gpt\nx"),
                ("HOME", "/home/me"),
            ]
            .map(|(k, v)| (k.to_string(), v.to_string())),
        );
        let names: Vec<&str> = vars.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, vec!["CAIRN_LLM_MODEL", "OPENAI_API_KEY"]);
        let text = env_file_text(&vars);
        assert!(text.contains("CAIRN_LLM_MODEL=\"gpt\\nx\"\n"), "{text}");
        assert!(
            text.contains("OPENAI_API_KEY=\"sk-\\\"quoted\\\"\\\\x\"\n"),
            "{text}"
        );
    }
}
