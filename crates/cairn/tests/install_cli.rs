//! Black-box tests of the first-run commands: shell completions that every
//! shell parses, manual pages, and `cairn init` against the fake LLM and a
//! local webhook receiver.
#![expect(clippy::unwrap_used, reason = "test code unwraps freely")]
#![expect(
    clippy::disallowed_methods,
    reason = "test fixtures may use blocking std::fs"
)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use assert_cmd::Command;
use cairn_llm::testing::{FakeLlmServer, Scripted};
use predicates::prelude::PredicateBooleanExt;
use predicates::str::contains;

mod common;
use common::Receiver;

const KEY: &str = "sk-init-test-0123456789";

fn cairn(home: &Path) -> Command {
    let mut cmd = Command::cargo_bin("cairn").unwrap();
    cmd.env_clear()
        .env("CAIRN_HOME", home)
        .env("TEST_LLM_KEY", KEY)
        .env("CAIRN_LLM_MAX_RETRIES", "0");
    cmd
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// Whether `shell` runs here; CI installs them all (CAIRN_REQUIRE_SHELLS=1).
fn have(shell: &str) -> bool {
    let found = std::process::Command::new(shell)
        .args(["-c", "exit 0"])
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        cairn_test_support::missing(
            &format!("{shell}'s completion script"),
            "CAIRN_REQUIRE_SHELLS",
            &format!("{shell} is not installed"),
        );
    }
    found
}

#[test]
fn completion_scripts_parse_in_every_shell() {
    let dir = tempfile::tempdir().unwrap();
    for (shell, check) in [
        ("bash", vec!["-n"]),
        ("zsh", vec!["-n"]),
        ("fish", vec!["--no-execute"]),
    ] {
        let out = cairn(dir.path())
            .args(["completions", shell])
            .output()
            .unwrap();
        assert!(out.status.success());
        let script = String::from_utf8(out.stdout).unwrap();
        assert!(script.contains("routine"), "{shell}: {script}");
        if !have(shell) {
            continue;
        }
        let file = dir.path().join(format!("cairn.{shell}"));
        std::fs::write(&file, &script).unwrap();
        let status = std::process::Command::new(shell)
            .args(&check)
            .arg(&file)
            .output()
            .unwrap();
        assert!(
            status.status.success(),
            "{shell} does not parse its script: {}",
            String::from_utf8_lossy(&status.stderr)
        );
    }
    for shell in ["elvish", "powershell"] {
        cairn(dir.path())
            .args(["completions", shell])
            .assert()
            .success()
            .stdout(contains("backup"));
    }
    cairn(dir.path())
        .args(["completions", "tcsh"])
        .assert()
        .code(2);
}

#[test]
fn manual_pages_cover_every_command() {
    let dir = tempfile::tempdir().unwrap();
    cairn(dir.path())
        .arg("man")
        .assert()
        .success()
        .stdout(contains(".TH cairn 1"))
        .stdout(contains("backup"));
    let pages = dir.path().join("man");
    cairn(dir.path())
        .args(["man", "--dir"])
        .arg(&pages)
        .assert()
        .success();
    for page in [
        "cairn.1",
        "cairn-init.1",
        "cairn-db-copy.1",
        "cairn-routine-apply.1",
    ] {
        let text = std::fs::read_to_string(pages.join(page)).unwrap();
        assert!(text.starts_with(".ie"), "{page}");
    }
}

#[test]
fn init_writes_a_private_config_that_names_the_key_and_doctor_passes() {
    let llm = FakeLlmServer::start_on_thread().unwrap();
    llm.push(Scripted::text("ok"));
    let receiver = Receiver::start(vec![]);
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let args = [
        "init",
        "--yes",
        "--provider",
        "compatible",
        "--base-url",
        &llm.base_url_openai(),
        "--model",
        "test-model",
        "--api-key-env",
        "TEST_LLM_KEY",
        "--timezone",
        "Europe/Paris",
        "--channel",
        &format!("webhook:{}", receiver.url),
    ];
    let out = cairn(&home).args(args).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Both checks ran before the file was written, then doctor passed.
    assert!(stdout.contains("llm      ok"), "{stdout}");
    assert!(stdout.contains("channel  ok"), "{stdout}");
    assert!(stdout.contains("ok    llm"), "doctor's llm line: {stdout}");
    assert!(!stdout.contains("FAIL"), "{stdout}");
    assert!(!stdout.contains(KEY), "the key is never printed");
    let requests = llm.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(
        requests[0].header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(receiver.count(), 1, "the channel got its test");

    let config = home.join("config.toml");
    assert_eq!(mode(&config), 0o600);
    assert_eq!(mode(&home), 0o700);
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(text.contains("api_key = \"${TEST_LLM_KEY}\""), "{text}");
    assert!(!text.contains(KEY), "{text}");
    assert!(text.contains("timezone = \"Europe/Paris\""), "{text}");
    assert!(text.contains("default_channel = \"webhook\""), "{text}");

    // The written file is what everything else reads.
    cairn(&home).arg("doctor").assert().success();
    cairn(&home)
        .args(["--json", "config", "show"])
        .assert()
        .success()
        .stdout(contains("test-model"))
        .stdout(contains(KEY).not());

    // A second init leaves the first file alone.
    cairn(&home)
        .args(args)
        .assert()
        .code(2)
        .stderr(contains("exists"));
    assert_eq!(std::fs::read_to_string(&config).unwrap(), text);
}

#[test]
fn init_writes_nothing_when_the_llm_check_fails() {
    let llm = FakeLlmServer::start_on_thread().unwrap();
    llm.push(Scripted::auth_error());
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    cairn(&home)
        .args(["init", "--yes", "--provider", "compatible", "--base-url"])
        .arg(llm.base_url_openai())
        .args(["--model", "m", "--api-key-env", "TEST_LLM_KEY"])
        .assert()
        .code(1)
        .stdout(contains("llm      FAIL"))
        .stderr(contains("was not written"));
    assert!(!home.join("config.toml").exists());
}

#[test]
fn init_reads_its_answers_from_piped_lines_and_can_store_the_key() {
    let llm = FakeLlmServer::start_on_thread().unwrap();
    llm.push(Scripted::text("ok"));
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    // provider, base URL, model, key variable, vault/env, zone, channel, service.
    let answers = format!(
        "compatible\n{}\ntest-model\nTEST_LLM_KEY\nstore\nUTC\n\nn\n",
        llm.base_url_openai()
    );
    cairn(&home)
        .arg("init")
        .write_stdin(answers)
        .assert()
        .success()
        .stdout(contains("wrote"));
    // "store" puts the key in the vault (issue 47), never in the file.
    let text = std::fs::read_to_string(home.join("config.toml")).unwrap();
    assert!(
        text.contains("api_key = \"${secret:LLM_API_KEY}\""),
        "{text}"
    );
    assert!(!text.contains(KEY), "{text}");
    cairn(&home)
        .args(["secret", "list"])
        .assert()
        .success()
        .stdout(contains("LLM_API_KEY"));
    assert!(text.contains("default_channel = \"inbox\""), "{text}");
    assert_eq!(mode(&home.join("config.toml")), 0o600);

    // An answer that cannot be right stops it, naming the problem.
    let other = tmp.path().join("other");
    cairn(&other)
        .arg("init")
        .write_stdin("pigeon\n")
        .assert()
        .code(2)
        .stderr(contains("unknown provider \"pigeon\""));
    assert!(!other.join("config.toml").exists());
}

/// `cairn init` at a terminal (a pty made by util-linux `script`): a key
/// variable that is not set is explained, with how to export it, and asked
/// again; the answers before it are kept and init goes on to write.
#[test]
fn init_at_a_terminal_asks_again_for_a_key_variable_that_is_not_set() {
    let script = std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !script {
        cairn_test_support::missing(
            "init at a terminal",
            "CAIRN_REQUIRE_SHELLS",
            "util-linux `script` is not installed",
        );
        return;
    }
    let llm = FakeLlmServer::start_on_thread().unwrap();
    llm.push(Scripted::text("ok"));
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let bin = assert_cmd::cargo::cargo_bin("cairn");
    let mut child = std::process::Command::new("script")
        .args(["-qec", &format!("{} init", bin.display()), "/dev/null"])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("TERM", "dumb")
        .env("CAIRN_HOME", &home)
        .env("TEST_LLM_KEY", KEY)
        .env("CAIRN_LLM_MAX_RETRIES", "0")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // provider, base URL, model, an unset variable and env; then, asked
    // again, the set one, env, zone, channel, service.
    let answers = format!(
        "compatible\n{}\ntest-model\nNOT_EXPORTED\nenv\nTEST_LLM_KEY\nenv\nUTC\n\nn\n",
        llm.base_url_openai()
    );
    let mut stdin = child.stdin.take().unwrap();
    std::io::Write::write_all(&mut stdin, answers.as_bytes()).unwrap();
    // Held open until init ends: script ends the session at end of input.
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut out).unwrap();
        out
    });
    let status = child.wait().unwrap();
    drop(stdin);
    let out = reader.join().unwrap();
    assert!(status.success(), "{out}");
    assert!(out.contains("NOT_EXPORTED is not set"), "{out}");
    assert!(out.contains("export NOT_EXPORTED="), "{out}");
    assert_eq!(
        out.matches("Environment variable holding the API key")
            .count(),
        2,
        "{out}"
    );
    let text = std::fs::read_to_string(home.join("config.toml")).unwrap();
    assert!(text.contains("api_key = \"${TEST_LLM_KEY}\""), "{text}");
    assert!(text.contains("model = \"test-model\""), "{text}");
}
