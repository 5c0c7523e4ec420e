//! The vault's key in a real OS keyring (issue 47, `secrets.keyring =
//! true`): a private D-Bus session bus and gnome-keyring's Secret Service,
//! unlocked with a password on stdin, then `cairn secret set` (no
//! install.key), `${secret:LLM}` read by `chat` against the fake LLM,
//! `doctor`, `rotate-key`, a backup restored into another home (its key
//! found through the backup's keyring entry, or given with `--key-file`),
//! a keyring that cannot be reached, and a vault moved between the keyring
//! and install.key.
//!
//! Skipped, saying why, without `dbus-daemon`, `dbus-send`,
//! `gnome-keyring-daemon` or `secret-tool`, unless `CAIRN_REQUIRE_KEYRING=1`
//! (CI) makes that a failure (Debian: dbus, gnome-keyring, libsecret-tools).
#![expect(
    clippy::unwrap_used,
    clippy::disallowed_methods,
    reason = "test code unwraps freely and may use blocking std::fs"
)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use cairn_llm::testing::{FakeLlmServer, Scripted};
use serde_json::Value;

const LLM_KEY: &str = "sk-keyring-6613-key";

/// The programs the test needs, or `None` after recording the skip.
fn tools(test: &str) -> Option<()> {
    for tool in [
        "dbus-daemon",
        "dbus-send",
        "gnome-keyring-daemon",
        "secret-tool",
    ] {
        let found = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
            .unwrap_or(false);
        if !found {
            cairn_test_support::missing(
                test,
                "CAIRN_REQUIRE_KEYRING",
                &format!(
                    "{tool} is needed (Debian: apt-get install -y dbus gnome-keyring libsecret-tools)"
                ),
            );
            return None;
        }
    }
    Some(())
}

/// A session bus and an unlocked gnome-keyring on it, both killed (by
/// their pids) when dropped.
struct Session {
    address: String,
    _dir: tempfile::TempDir,
    bus: Child,
    keyring: Child,
}

impl Session {
    fn start() -> Session {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("bus");
        let mut bus = Command::new("dbus-daemon")
            .args(["--session", "--nofork", "--print-address=1"])
            .arg(format!("--address=unix:path={}", socket.display()))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(bus.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let address = line.trim().to_string();
        assert!(address.starts_with("unix:"), "dbus-daemon said {line:?}");
        // Its own HOME and data directory: the login keyring it makes is
        // this test's alone.
        let mut keyring = Command::new("gnome-keyring-daemon")
            .args(["--foreground", "--unlock", "--components=secrets"])
            .env("DBUS_SESSION_BUS_ADDRESS", &address)
            .env("HOME", dir.path())
            .env("XDG_DATA_HOME", dir.path().join("data"))
            .env("XDG_RUNTIME_DIR", dir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // The unlock password, then end of input.
        keyring
            .stdin
            .take()
            .unwrap()
            .write_all(b"test-password")
            .unwrap();
        let session = Session {
            address,
            _dir: dir,
            bus,
            keyring,
        };
        session.wait_for_secret_service();
        session
    }

    /// Until org.freedesktop.secrets has an owner on the bus.
    fn wait_for_secret_service(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let out = Command::new("dbus-send")
                .args([
                    "--session",
                    "--print-reply",
                    "--dest=org.freedesktop.DBus",
                    "/org/freedesktop/DBus",
                    "org.freedesktop.DBus.NameHasOwner",
                    "string:org.freedesktop.secrets",
                ])
                .env("DBUS_SESSION_BUS_ADDRESS", &self.address)
                .output()
                .unwrap();
            if String::from_utf8_lossy(&out.stdout).contains("boolean true") {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "gnome-keyring-daemon did not take org.freedesktop.secrets in 30 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `cairn` with a home, this session's bus and nothing else.
    fn cairn(&self, home: &Path) -> Command {
        let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("cairn"));
        cmd.env_clear()
            .env("CAIRN_HOME", home)
            .env("CAIRN_TIMEZONE", "UTC")
            .env("CAIRN_GATEWAY_PORT", "0")
            .env("DBUS_SESSION_BUS_ADDRESS", &self.address)
            .stdin(Stdio::null());
        cmd
    }

    fn run(&self, home: &Path, args: &[&str]) -> Output {
        self.cairn(home).args(args).output().unwrap()
    }

    /// `printf VALUE | cairn secret set NAME`.
    fn set(&self, cmd: &mut Command, name: &str, value: &str) -> Output {
        let mut child = cmd
            .args(["secret", "set", name])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(value.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    }

    /// The bytes the keyring holds for `user` under service `cairn`, as
    /// another client (libsecret's secret-tool) reads them.
    fn lookup(&self, user: &str) -> Option<Vec<u8>> {
        let out = Command::new("secret-tool")
            .args(["lookup", "service", "cairn", "username", user])
            .env("DBUS_SESSION_BUS_ADDRESS", &self.address)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        out.status.success().then_some(out.stdout)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.keyring.kill();
        let _ = self.keyring.wait();
        let _ = self.bus.kill();
        let _ = self.bus.wait();
    }
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn ok(out: Output) -> Output {
    assert!(out.status.success(), "{}", text(&out));
    out
}

/// A home keeping its vault key in the keyring, its LLM key `${secret:LLM}`.
fn home(parent: &Path, name: &str, llm: &FakeLlmServer) -> PathBuf {
    let home = parent.join(name);
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join("config.toml"),
        format!(
            "[secrets]\nkeyring = true\n\n[llm]\nprovider = \"openai\"\nbase_url = \"{}\"\n\
             model = \"test-model\"\napi_key = \"${{secret:LLM}}\"\nmax_retries = 0\n",
            llm.base_url_openai()
        ),
    )
    .unwrap();
    home
}

fn bearer(llm: &FakeLlmServer) -> String {
    llm.last_request()
        .unwrap()
        .header("authorization")
        .unwrap_or_default()
        .to_string()
}

/// `chat -m hi` answers, having sent the vault's LLM key.
fn chat_works(session: &Session, home: &Path, llm: &FakeLlmServer) {
    llm.push(Scripted::text("hello from the model"));
    let out = ok(session.run(home, &["chat", "-m", "hi"]));
    assert!(
        text(&out).contains("hello from the model"),
        "{}",
        text(&out)
    );
    assert_eq!(bearer(llm), format!("Bearer {LLM_KEY}"));
}

fn vault_check(session: &Session, home: &Path) -> Value {
    let out = session.run(home, &["--json", "doctor"]);
    let doctor: Value = serde_json::from_slice(&out.stdout).unwrap();
    doctor["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "vault")
        .cloned()
        .unwrap()
}

fn entry(home: &Path) -> String {
    format!("vault-key:{}", home.display())
}

#[test]
fn the_vault_key_lives_in_the_keyring_through_chat_rotation_and_restore() {
    let Some(()) = tools("keyring_cli::the_vault_key_lives_in_the_keyring") else {
        return;
    };
    let session = Session::start();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    let temp = tempfile::tempdir().unwrap();
    let home = home(temp.path(), "home", &llm);

    ok(session.set(&mut session.cairn(&home), "LLM", LLM_KEY));
    assert!(
        !home.join("install.key").exists(),
        "install.key was written"
    );
    let key = session.lookup(&entry(&home)).expect("no keyring entry");
    assert_eq!(key.len(), 32);
    chat_works(&session, &home, &llm);

    // doctor names the source and the key's fingerprint, never the key.
    let check = vault_check(&session, &home);
    assert_eq!(check["status"], "ok", "{check}");
    let said = check["message"].as_str().unwrap();
    assert!(
        said.contains("OS keyring") && said.contains("reachable"),
        "{said}"
    );
    let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
    assert!(!said.contains(&hex), "{said}");

    // A new key: in the keyring, the value re-sealed and still read.
    let out = ok(session.run(&home, &["secret", "rotate-key"]));
    assert!(
        text(&out).contains("re-encrypted 1 secret"),
        "{}",
        text(&out)
    );
    let rotated = session.lookup(&entry(&home)).unwrap();
    assert_eq!(rotated.len(), 32);
    assert_ne!(rotated, key);
    assert!(
        session
            .lookup(&format!("vault-key-next:{}", home.display()))
            .is_none()
    );
    assert!(!home.join("install.key").exists());
    chat_works(&session, &home, &llm);

    // A backup restored into another home: its key found through the
    // backup's keyring entry and copied to the new home's.
    let archive = temp.path().join("b.tar.gz");
    ok(session.run(&home, &["backup", archive.to_str().unwrap()]));
    let fresh = temp.path().join("fresh");
    ok(session.run(&fresh, &["restore", archive.to_str().unwrap()]));
    assert_eq!(session.lookup(&entry(&fresh)).unwrap(), rotated);
    assert!(!fresh.join("install.key").exists());
    chat_works(&session, &fresh, &llm);

    // Another key given: refused, naming the vault, nothing written.
    let other = temp.path().join("other.key");
    std::fs::write(&other, [9u8; 32]).unwrap();
    let wrong = temp.path().join("wrong");
    let restore_with = |home: &Path, key: &Path| {
        session.run(
            home,
            &[
                "restore",
                archive.to_str().unwrap(),
                "--key-file",
                key.to_str().unwrap(),
            ],
        )
    };
    let out = restore_with(&wrong, &other);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("vault"), "{}", text(&out));
    assert!(!wrong.exists() || std::fs::read_dir(&wrong).unwrap().next().is_none());
    assert!(session.lookup(&entry(&wrong)).is_none());

    // The key read out of the keyring by another client and given as a
    // file: restored, and put in the keyring for that home.
    let exported = temp.path().join("exported.key");
    std::fs::write(&exported, &rotated).unwrap();
    let by_file = temp.path().join("by-file");
    ok(restore_with(&by_file, &exported));
    assert_eq!(session.lookup(&entry(&by_file)).unwrap(), rotated);
    chat_works(&session, &by_file, &llm);
}

#[test]
fn an_unreachable_keyring_is_named_and_a_vault_moves_between_sources() {
    let Some(()) = tools("keyring_cli::an_unreachable_keyring_is_named") else {
        return;
    };
    let session = Session::start();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    let temp = tempfile::tempdir().unwrap();
    let home = home(temp.path(), "home", &llm);

    // No Secret Service at that address: refused, naming the setting; nothing stored.
    let mut cmd = session.cairn(&home);
    cmd.env(
        "DBUS_SESSION_BUS_ADDRESS",
        format!("unix:path={}", temp.path().join("no-bus").display()),
    );
    let out = session.set(&mut cmd, "LLM", LLM_KEY);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("secrets.keyring = true")
            && text(&out).contains("OS keyring cannot be used"),
        "{}",
        text(&out)
    );
    assert!(!home.join("install.key").exists());
    let listed = ok(session.run(&home, &["--json", "secret", "list"]));
    assert_eq!(String::from_utf8_lossy(&listed.stdout).trim(), "[]");

    // Sealed in the keyring, then the setting turned off: chat and doctor
    // say where the key is and how to move it; rotate-key moves it.
    ok(session.set(&mut session.cairn(&home), "LLM", LLM_KEY));
    let off = |args: &[&str]| {
        session
            .cairn(&home)
            .env("CAIRN_SECRETS_KEYRING", "false")
            .args(args)
            .output()
            .unwrap()
    };
    let out = off(&["chat", "-m", "hi"]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("kept in the OS keyring")
            && text(&out).contains("cairn secret rotate-key"),
        "{}",
        text(&out)
    );
    let out = ok(off(&["secret", "rotate-key"]));
    assert!(
        text(&out).contains("re-encrypted 1 secret") && text(&out).contains("install.key"),
        "{}",
        text(&out)
    );
    assert_eq!(std::fs::read(home.join("install.key")).unwrap().len(), 32);
    llm.push(Scripted::text("from install.key"));
    ok(off(&["chat", "-m", "hi"]));
    assert_eq!(bearer(&llm), format!("Bearer {LLM_KEY}"));

    // And back: the keyring's stale key is not the vault's; rotate-key
    // moves the vault into the keyring again (install.key stays, unused by it).
    let out = session.run(&home, &["chat", "-m", "hi"]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("install.key") && text(&out).contains("rotate-key"),
        "{}",
        text(&out)
    );
    let check = vault_check(&session, &home);
    assert_eq!(check["status"], "fail", "{check}");
    ok(session.run(&home, &["secret", "rotate-key"]));
    chat_works(&session, &home, &llm);
    assert_eq!(vault_check(&session, &home)["status"], "ok");

    // A rotation that stopped before re-encrypting (its next key left in
    // the keyring) is undone by the next command: the vault still opens.
    let planted = Command::new("secret-tool")
        .args(["store", "--label=stale", "service", "cairn", "username"])
        .arg(format!("vault-key-next:{}", home.display()))
        .env("DBUS_SESSION_BUS_ADDRESS", &session.address)
        .stdin(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            c.stdin.take().unwrap().write_all(&[5u8; 32])?;
            c.wait()
        })
        .unwrap();
    assert!(planted.success());
    chat_works(&session, &home, &llm);
    assert!(
        session
            .lookup(&format!("vault-key-next:{}", home.display()))
            .is_none()
    );
}
