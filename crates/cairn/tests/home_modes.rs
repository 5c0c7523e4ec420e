//! Black-box tests of the home's permissions: a new `CAIRN_HOME` is 0700
//! and its private files 0600 whatever the umask; the daemon tightens a
//! home made earlier with wider modes and says so; `cairn doctor` warns
//! about one readable by others, with the command that fixes it.
#![cfg(unix)]
#![expect(clippy::unwrap_used, reason = "test helpers unwrap freely")]
#![expect(
    clippy::disallowed_methods,
    reason = "test fixtures may use blocking std::fs"
)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::Command;

/// The built binary under the usual umask 022 (which would leave new
/// files readable by everyone), with a clean environment and `home`.
fn cairn(home: &Path) -> std::process::Command {
    let mut cmd = std::process::Command::new("sh");
    cmd.arg("-c")
        .arg("umask 022 && exec \"$0\" \"$@\"")
        .arg(assert_cmd::cargo::cargo_bin("cairn"))
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("CAIRN_HOME", home)
        .env("CAIRN_TIMEZONE", "UTC")
        .env("CAIRN_GATEWAY_PORT", "0");
    cmd
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn a_new_home_is_the_owners_alone_whatever_the_umask() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("fresh").join("home");
    Command::from_std(cairn(&home))
        .args(["doctor", "--json"])
        .assert()
        .success();
    assert_eq!(mode(&home), 0o700, "CAIRN_HOME");
    let db = home.join("cairn.db");
    for file in [
        db.clone(),
        home.join("cairn.db-wal"),
        home.join("cairn.db-shm"),
    ] {
        if file.exists() || file == db {
            assert_eq!(mode(&file), 0o600, "{}", file.display());
        }
    }
    let report = Command::from_std(cairn(&home))
        .args(["doctor", "--json"])
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&report.stdout).unwrap();
    let permissions = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "permissions")
        .unwrap();
    assert_eq!(permissions["status"], "ok", "{permissions}");
}

struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_daemon_tightens_a_wide_home_and_says_so_and_doctor_warns_before() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    // A home as an earlier cairn (or a careless copy) left it.
    std::fs::create_dir(&home).unwrap();
    std::fs::write(home.join("config.toml"), "[agent]\nname = \"pebble\"\n").unwrap();
    // A well-formed key (32 bytes): the daemon refuses a damaged one.
    std::fs::write(home.join("install.key"), [7u8; 32]).unwrap();
    Command::from_std(cairn(&home))
        .args(["doctor"])
        .assert()
        .success();
    set_mode(&home, 0o755);
    for f in ["config.toml", "install.key", "cairn.db"] {
        set_mode(&home.join(f), 0o644);
    }

    let out = Command::from_std(cairn(&home))
        .args(["doctor"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "a warning is not a failure: {text}");
    let line = text
        .lines()
        .find(|l| l.contains("permissions"))
        .unwrap_or_else(|| panic!("no permissions check: {text}"));
    assert!(line.starts_with("warn"), "{text}");
    assert!(
        text.contains(&format!("chmod 700 {}", home.display()))
            && text.contains(&format!("{}/cairn.db", home.display()))
            && text.contains("chmod 600"),
        "{text}"
    );

    let mut daemon = Daemon(
        cairn(&home)
            .arg("daemon")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let state = home.join("daemon_state.json");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !state.exists() {
        assert!(Instant::now() < deadline, "the daemon did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(mode(&home), 0o700);
    for f in [
        "config.toml",
        "install.key",
        "cairn.db",
        "cairn.db-wal",
        "cairn.db-shm",
        "daemon.lock",
        "daemon_state.json",
    ] {
        assert_eq!(mode(&home.join(f)), 0o600, "{f}");
    }
    let pid = daemon.0.id().to_string();
    std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    let out = std::mem::replace(
        &mut daemon.0,
        std::process::Command::new("true").spawn().unwrap(),
    )
    .wait_with_output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    for f in ["config.toml", "install.key", "cairn.db"] {
        assert!(
            stderr.lines().any(|l| l.contains("tightened")
                && l.contains(&format!("{}/{f}", home.display()))
                && l.contains("0644")),
            "{f} not reported:\n{stderr}"
        );
    }
    assert!(
        stderr.contains("tightened") && stderr.contains("0755"),
        "{stderr}"
    );

    let out = Command::from_std(cairn(&home))
        .args(["doctor"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines()
            .any(|l| l.starts_with("ok") && l.contains("permissions")),
        "{text}"
    );
}
