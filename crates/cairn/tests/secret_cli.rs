//! Black-box tests of the vault (issue 47): `cairn secret set|list|rm|
//! rotate-key`, `${secret:NAME}` references working with no environment
//! variable (chat, a routine), `cairn init` storing the key, backups
//! carrying the vault sealed, and no value in clear anywhere in the home.
#![expect(
    clippy::unwrap_used,
    clippy::disallowed_methods,
    reason = "test code unwraps freely and may use blocking std::fs"
)]

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Output, Stdio};

use cairn_llm::testing::{FakeLlmServer, Scripted};
use serde_json::Value;

const GH: &str = "s3cr3t-7781";
const LLM_KEY: &str = "sk-vault-5521-key";

/// `cairn` with a home and nothing else in its environment.
fn cairn(home: &Path) -> Command {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("cairn"));
    cmd.env_clear()
        .env("CAIRN_HOME", home)
        .env("CAIRN_TIMEZONE", "UTC")
        .env("CAIRN_GATEWAY_PORT", "0");
    cmd
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

fn run(home: &Path, args: &[&str]) -> Output {
    cairn(home)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// `printf VALUE | cairn secret set NAME`.
fn set(home: &Path, name: &str, value: &str) -> Output {
    let mut child = cairn(home)
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

fn list(home: &Path) -> Value {
    serde_json::from_slice(&ok(run(home, &["--json", "secret", "list"])).stdout).unwrap()
}

/// Every file under `dir` that holds `needle` (gzip archives unpacked first).
fn files_holding(dir: &Path, needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(files_holding(&path, needle));
            continue;
        }
        let mut bytes = std::fs::read(&path).unwrap();
        if bytes.starts_with(&[0x1f, 0x8b]) {
            let mut plain = Vec::new();
            flate2::read::GzDecoder::new(bytes.as_slice())
                .read_to_end(&mut plain)
                .unwrap();
            bytes.extend(plain);
        }
        if bytes.windows(needle.len()).any(|w| w == needle.as_bytes()) {
            found.push(path.display().to_string());
        }
    }
    found
}

#[test]
fn a_stored_secret_is_listed_by_name_and_never_kept_in_clear() {
    let temp = tempfile::tempdir().unwrap();
    let home = temp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join("config.toml"),
        "[tools.web_search]\nprovider = \"brave\"\napi_key = \"${secret:GH}\"\n",
    )
    .unwrap();
    let out = ok(set(&home, "GH", GH));
    assert!(!text(&out).contains(GH), "{}", text(&out));
    // A value on the command line is refused, and not echoed.
    let out = run(&home, &["secret", "set", "OTHER", "v4lue-on-argv"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("never taken from the command line"));
    assert!(!text(&out).contains("v4lue-on-argv"), "{}", text(&out));
    assert_eq!(
        run(&home, &["secret", "set", "1bad"]).status.code(),
        Some(2)
    );

    let listed = list(&home);
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed[0]["name"], "GH");
    assert_eq!(
        listed[0]["used_by"],
        serde_json::json!(["tools.web_search.api_key"])
    );
    assert!(!listed.to_string().contains(GH));
    // config show and doctor resolve it and never print it.
    for args in [
        &["config", "show"][..],
        &["--json", "config", "show"],
        &["doctor"],
    ] {
        let out = run(&home, args);
        assert!(!text(&out).contains(GH), "{args:?}: {}", text(&out));
    }
    // Resolving it marked it used.
    assert!(list(&home)[0]["last_used_at"].is_string());

    let archive = temp.path().join("home").join("backup.tar.gz");
    ok(run(&home, &["backup", archive.to_str().unwrap()]));
    assert!(std::fs::metadata(&archive).unwrap().len() > 0);
    let found = files_holding(&home, GH);
    assert!(found.is_empty(), "the value is in clear in {found:?}");
}

/// A home whose LLM key is `${secret:LLM}`, with the fake LLM's address.
fn home_with_vault_key(llm: &FakeLlmServer) -> tempfile::TempDir {
    let temp = tempfile::tempdir().unwrap();
    std::fs::write(
        temp.path().join("config.toml"),
        format!(
            "[llm]\nprovider = \"openai\"\nbase_url = \"{}\"\nmodel = \"test-model\"\n\
             api_key = \"${{secret:LLM}}\"\nmax_retries = 0\n",
            llm.base_url_openai()
        ),
    )
    .unwrap();
    temp
}

fn bearer(llm: &FakeLlmServer) -> String {
    llm.last_request()
        .unwrap()
        .header("authorization")
        .unwrap_or_default()
        .to_string()
}

#[test]
fn the_llm_key_comes_from_the_vault_for_chat_and_routines_and_survives_a_rotation() {
    let llm = FakeLlmServer::start_on_thread().unwrap();
    let temp = home_with_vault_key(&llm);
    let home = temp.path();
    // Not stored yet: the error names the key and the secret.
    let out = run(home, &["chat", "-m", "hi"]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("llm.api_key: secret LLM is not in the vault"),
        "{}",
        text(&out)
    );
    ok(set(home, "LLM", LLM_KEY));

    llm.push(Scripted::text("hello from the model"));
    let out = ok(run(home, &["chat", "-m", "hi"]));
    assert!(
        text(&out).contains("hello from the model"),
        "{}",
        text(&out)
    );
    assert_eq!(bearer(&llm), format!("Bearer {LLM_KEY}"));

    std::fs::write(
        home.join("r.yaml"),
        "name: summary\ntrigger: {type: manual}\naction: {type: lightweight, prompt: Summarise.}\n",
    )
    .unwrap();
    ok(run(
        home,
        &[
            "routine",
            "apply",
            "--file",
            home.join("r.yaml").to_str().unwrap(),
        ],
    ));
    llm.reset();
    llm.push(Scripted::text("all quiet"));
    let out = run(home, &["routine", "fire", "summary"]);
    assert_eq!(llm.requests().len(), 1, "{}", text(&out));
    assert_eq!(bearer(&llm), format!("Bearer {LLM_KEY}"));

    // A new key: every value re-encrypted, still resolved.
    let before = std::fs::read(home.join("install.key")).unwrap();
    let out = ok(run(home, &["secret", "rotate-key"]));
    assert!(
        text(&out).contains("re-encrypted 1 secret"),
        "{}",
        text(&out)
    );
    assert_ne!(std::fs::read(home.join("install.key")).unwrap(), before);
    assert!(!home.join("install.key.next").exists());
    llm.push(Scripted::text("still here"));
    ok(run(home, &["chat", "-m", "again"]));
    assert_eq!(bearer(&llm), format!("Bearer {LLM_KEY}"));

    // Removed: the chat stops, naming it again.
    ok(run(home, &["secret", "rm", "LLM"]));
    let out = run(home, &["secret", "rm", "LLM"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let out = run(home, &["chat", "-m", "hi"]);
    assert!(
        text(&out).contains("secret LLM is not in the vault"),
        "{}",
        text(&out)
    );
}

#[test]
fn a_backup_restores_with_its_key_and_not_with_another() {
    let llm = FakeLlmServer::start_on_thread().unwrap();
    let temp = home_with_vault_key(&llm);
    let home = temp.path();
    ok(set(home, "LLM", LLM_KEY));
    let scratch = tempfile::tempdir().unwrap();
    let archive = scratch.path().join("b.tar.gz");
    ok(run(home, &["backup", archive.to_str().unwrap()]));

    // Without a key, and with another one: refused, naming the vault; nothing written.
    let fresh = scratch.path().join("fresh");
    let out = run(&fresh, &["restore", archive.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("vault"), "{}", text(&out));
    let other = scratch.path().join("other.key");
    std::fs::write(&other, [9u8; 32]).unwrap();
    let out = run(
        &fresh,
        &[
            "restore",
            archive.to_str().unwrap(),
            "--key-file",
            other.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("vault"), "{}", text(&out));
    assert!(!fresh.exists() || std::fs::read_dir(&fresh).unwrap().next().is_none());

    // With the home's key: the secret works there.
    let key = home.join("install.key");
    ok(run(
        &fresh,
        &[
            "restore",
            archive.to_str().unwrap(),
            "--key-file",
            key.to_str().unwrap(),
        ],
    ));
    assert_eq!(list(&fresh)[0]["name"], "LLM");
    llm.push(Scripted::text("restored"));
    ok(run(&fresh, &["chat", "-m", "hi"]));
    assert_eq!(bearer(&llm), format!("Bearer {LLM_KEY}"));
}

#[test]
fn init_stores_the_key_in_the_vault_and_a_named_unset_variable_is_explained() {
    let llm = FakeLlmServer::start_on_thread().unwrap();
    llm.push(Scripted::text("ok"));
    let temp = tempfile::tempdir().unwrap();
    let home = temp.path().join("home");
    let init = |home: &Path, extra: &[&str]| {
        cairn(home)
            .env("OPENAI_API_KEY", LLM_KEY)
            .args(["init", "--yes", "--provider", "openai", "--base-url"])
            .arg(llm.base_url_openai())
            .args(["--model", "test-model"])
            .args(extra)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    ok(init(&home, &[]));
    let written = std::fs::read_to_string(home.join("config.toml")).unwrap();
    assert!(
        written.contains("api_key = \"${secret:LLM_API_KEY}\""),
        "{written}"
    );
    assert!(!written.contains(LLM_KEY));
    assert_eq!(list(&home)[0]["name"], "LLM_API_KEY");
    // The CLI works with nothing exported.
    llm.push(Scripted::text("from the vault"));
    ok(run(&home, &["chat", "-m", "hi"]));
    assert_eq!(bearer(&llm), format!("Bearer {LLM_KEY}"));

    // A variable named but not set: said how to export it; no line of a
    // file that does not exist is named, nothing is written.
    let other = temp.path().join("other");
    let out = init(&other, &["--api-key-env", "NOT_EXPORTED"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let said = text(&out);
    assert!(
        said.contains("NOT_EXPORTED is not set") && said.contains("export NOT_EXPORTED="),
        "{said}"
    );
    assert!(!said.contains("config.toml:"), "{said}");
    assert!(!other.join("config.toml").exists());
}
