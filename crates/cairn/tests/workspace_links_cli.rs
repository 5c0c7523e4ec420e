//! Black-box tests of the daemon's own reads and writes in a workspace where
//! the agent planted links (issue 42): identity files, the memory snapshot,
//! daily notes, a routine's `state.md` and `cairn restore` never read or
//! write through a symbolic link or a hard link to a file outside.
#![expect(clippy::unwrap_used, reason = "test fixtures outside #[test] fns")]
#![expect(
    clippy::disallowed_methods,
    reason = "test fixtures may use blocking std::fs"
)]

use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use cairn_llm::testing::{FakeLlmServer, Scripted};
use predicates::str::contains;

/// A home, its workspace, a directory outside both, and the fake LLM.
struct Env {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    outside: PathBuf,
    llm: FakeLlmServer,
}

impl Env {
    fn new() -> Env {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(home.join("workspace")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        Env {
            _tmp: tmp,
            home,
            outside,
            llm: FakeLlmServer::start_on_thread().unwrap(),
        }
    }

    fn workspace(&self) -> PathBuf {
        self.home.join("workspace")
    }

    fn cairn(&self) -> Command {
        let mut cmd = Command::cargo_bin("cairn").unwrap();
        cmd.env_clear()
            .env("CAIRN_HOME", &self.home)
            .env("CAIRN_TIMEZONE", "UTC")
            .env("CAIRN_LLM_PROVIDER", "openai")
            .env("CAIRN_LLM_BASE_URL", self.llm.base_url_openai())
            .env("CAIRN_LLM_MODEL", "test-model")
            .env("CAIRN_LLM_API_KEY", "sk-test-0123456789")
            .env("CAIRN_LLM_MAX_RETRIES", "0");
        cmd
    }

    /// A file outside holding `text`, mode 0644.
    fn victim(&self, name: &str, text: &str) -> PathBuf {
        let path = self.outside.join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        path
    }

    /// Every file outside, with its content and mode.
    fn outside_state(&self) -> Vec<(String, String, u32)> {
        let mut out = Vec::new();
        let mut stack = vec![self.outside.clone()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                let meta = std::fs::symlink_metadata(&path).unwrap();
                if meta.is_dir() {
                    stack.push(path);
                    continue;
                }
                out.push((
                    path.strip_prefix(&self.outside)
                        .unwrap()
                        .display()
                        .to_string(),
                    std::fs::read_to_string(&path).unwrap_or_default(),
                    meta.mode() & 0o777,
                ));
            }
        }
        out.sort();
        out
    }

    /// Everything the fake LLM was sent, as one string.
    fn sent(&self) -> String {
        self.llm
            .requests()
            .iter()
            .map(|r| r.body.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

fn today() -> String {
    chrono::Utc::now().format("%Y-%m-%d").to_string()
}

fn tomorrow() -> String {
    (chrono::Utc::now() + chrono::Duration::days(1))
        .format("%Y-%m-%d")
        .to_string()
}

/// `USER.md -> <a file outside>`, `AGENTS.md -> ../config.toml` and
/// `IDENTITY.md -> /proc/self/environ`: nothing of theirs reaches the model
/// (not the marker, not config.toml, not the API key in the environment),
/// an ordinary identity file still does, and one warning names each file,
/// however many requests the turn makes.
#[test]
fn identity_files_behind_symbolic_links_stay_out_of_the_prompt() {
    let env = Env::new();
    let ws = env.workspace();
    std::fs::write(
        env.home.join("config.toml"),
        "# CONFIG-MARKER-5b1e\n[agent]\nname = \"pebble\"\n",
    )
    .unwrap();
    let secret = env.victim("secret.txt", "OUTSIDE-MARKER-7f3a");
    symlink(&secret, ws.join("USER.md")).unwrap();
    symlink("../config.toml", ws.join("AGENTS.md")).unwrap();
    symlink("/proc/self/environ", ws.join("IDENTITY.md")).unwrap();
    std::fs::write(ws.join("SOUL.md"), "Be kind.").unwrap();
    env.llm
        .push(Scripted::tool_call("time_now", serde_json::json!({})));
    env.llm.push(Scripted::text("Hello."));
    env.llm.push(Scripted::text("Hello again."));
    // Two turns in one process, the first with two requests.
    let out = env
        .cairn()
        .arg("chat")
        .write_stdin("hi\nagain\n/quit\n")
        .assert()
        .success()
        .stdout(contains("Hello again."))
        .get_output()
        .clone();
    assert_eq!(env.llm.requests().len(), 3);
    let sent = env.sent();
    assert!(sent.contains("Be kind."), "{sent}");
    for leaked in [
        "OUTSIDE-MARKER-7f3a",
        "CONFIG-MARKER-5b1e",
        "sk-test-0123456789",
    ] {
        assert!(!sent.contains(leaked), "{leaked} reached the model");
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    for name in ["USER.md", "AGENTS.md", "IDENTITY.md"] {
        let warnings = stderr
            .lines()
            .filter(|l| l.contains("WARN") && l.contains(name))
            .count();
        assert_eq!(warnings, 1, "{name}: {stderr}");
    }
    assert!(stderr.contains("symbolic link"), "{stderr}");
}

/// A hard link to a file outside in place of an identity file is refused.
#[test]
fn an_identity_file_hard_linked_from_outside_is_refused() {
    let env = Env::new();
    let secret = env.victim("secret.txt", "HARDLINK-MARKER-c40d");
    std::fs::hard_link(&secret, env.workspace().join("TOOLS.md")).unwrap();
    env.llm.push(Scripted::text("Hello."));
    env.cairn()
        .args(["chat", "-m", "hi"])
        .assert()
        .success()
        .stderr(contains("TOOLS.md"))
        .stderr(contains("hard links"));
    assert!(!env.sent().contains("HARDLINK-MARKER-c40d"));
}

/// `MEMORY_SNAPSHOT.md.tmp` and `MEMORY_SNAPSHOT.md` planted as links:
/// hygiene and export write the snapshot inside the workspace and change
/// nothing outside; a snapshot behind a link is not loaded into an empty store.
#[test]
fn the_memory_snapshot_is_never_written_or_read_through_a_link() {
    let env = Env::new();
    let ws = env.workspace();
    let victim = env.victim("victim", "victim's own text");
    symlink(&victim, ws.join("MEMORY_SNAPSHOT.md.tmp")).unwrap();
    env.cairn()
        .args(["memory", "add", "Prefers espresso", "--key", "coffee"])
        .assert()
        .success();
    let before = env.outside_state();
    env.cairn()
        .args(["memory", "hygiene", "--json"])
        .assert()
        .success();
    assert_eq!(env.outside_state(), before);
    let snapshot = std::fs::read_to_string(ws.join("MEMORY_SNAPSHOT.md")).unwrap();
    assert!(snapshot.contains("Prefers espresso"), "{snapshot}");

    // The snapshot itself a link (dangling, then to the victim): replaced, not followed.
    std::fs::remove_file(ws.join("MEMORY_SNAPSHOT.md")).unwrap();
    symlink(env.outside.join("new-file"), ws.join("MEMORY_SNAPSHOT.md")).unwrap();
    env.cairn().args(["memory", "export"]).assert().success();
    std::fs::remove_file(ws.join("MEMORY_SNAPSHOT.md")).unwrap();
    symlink(&victim, ws.join("MEMORY_SNAPSHOT.md")).unwrap();
    env.cairn().args(["memory", "hygiene"]).assert().success();
    assert_eq!(env.outside_state(), before);
    assert!(
        !std::fs::symlink_metadata(ws.join("MEMORY_SNAPSHOT.md"))
            .unwrap()
            .is_symlink()
    );

    // An empty store does not hydrate from a snapshot behind a link.
    let planted = env.victim(
        "planted.md",
        "# Memory snapshot\n\n## planted\n\nPLANTED-MEMORY\n",
    );
    std::fs::remove_file(ws.join("MEMORY_SNAPSHOT.md")).unwrap();
    symlink(&planted, ws.join("MEMORY_SNAPSHOT.md")).unwrap();
    for file in ["cairn.db", "cairn.db-wal", "cairn.db-shm"] {
        let _ = std::fs::remove_file(env.home.join(file));
    }
    let listed = env
        .cairn()
        .args(["memory", "list", "--json"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&listed).unwrap(),
        serde_json::json!([])
    );
}

/// The daily-notes file of today planted as a link: `/compact` (which
/// archives the old turns and appends their summary to the daily notes)
/// writes nothing outside.
#[test]
fn compaction_never_appends_to_daily_notes_through_a_link() {
    let env = Env::new();
    let ws = env.workspace();
    let victim = env.victim("victim", "victim's own text");
    std::fs::create_dir_all(ws.join("daily")).unwrap();
    for day in [today(), tomorrow()] {
        symlink(&victim, ws.join(format!("daily/{day}.md"))).unwrap();
    }
    let before = env.outside_state();
    for n in 0..6 {
        env.llm.push(Scripted::text(format!("answer {n}")));
    }
    env.llm.push(Scripted::text("SUMMARY-OF-THE-CHAT"));
    let lines: String = (0..6).map(|n| format!("message {n}\n")).collect();
    env.cairn()
        .arg("chat")
        .write_stdin(format!("{lines}/compact\n/quit\n"))
        .assert()
        .success();
    assert!(
        env.sent().contains("Summarize this conversation"),
        "the compaction never asked for a summary"
    );
    assert_eq!(env.outside_state(), before);
}

/// A lightweight routine whose `state.md` is a link to a file outside, and
/// whose context file is a hard link to one: neither is sent to the model,
/// and the state it answers is written inside the workspace.
#[test]
fn a_routine_state_file_behind_a_link_is_neither_read_nor_written_through() {
    let env = Env::new();
    let ws = env.workspace();
    let victim = env.victim("victim", "STATE-MARKER-91aa");
    let context = env.victim("context", "CONTEXT-MARKER-02bd");
    std::fs::create_dir_all(ws.join("routines/watch")).unwrap();
    symlink(&victim, ws.join("routines/watch/state.md")).unwrap();
    std::fs::hard_link(&context, ws.join("notes.md")).unwrap();
    let file = env.home.join("watch.yaml");
    std::fs::write(
        &file,
        "name: watch\ntrigger: {type: manual}\naction: {type: lightweight, prompt: Look., context_paths: [notes.md]}\n",
    )
    .unwrap();
    env.cairn()
        .args(["routine", "apply", "-f"])
        .arg(&file)
        .assert()
        .success();
    let before = env.outside_state();
    env.llm
        .push(Scripted::text("ROUTINE_OK\n```state\n{\"seen\": 3}\n```\n"));
    env.cairn()
        .args(["routine", "fire", "watch"])
        .assert()
        .success();
    let sent = env.sent();
    assert!(sent.contains("Look."), "{sent}");
    assert!(!sent.contains("STATE-MARKER-91aa"), "{sent}");
    assert!(!sent.contains("CONTEXT-MARKER-02bd"), "{sent}");
    assert_eq!(env.outside_state(), before);
    assert_eq!(
        std::fs::read_to_string(ws.join("routines/watch/state.md")).unwrap(),
        "{\"seen\": 3}"
    );
}

/// `cairn restore --force` into a home whose workspace holds links (to a
/// file, to a directory, a hard link) and whose config.toml is a link:
/// every file outside keeps its content and mode, nothing lands outside,
/// the links are replaced by the archive's files, and the output says so.
#[test]
fn restore_replaces_links_and_never_writes_or_chmods_through_them() {
    let env = Env::new();
    let ws = env.workspace();
    std::fs::write(env.home.join("config.toml"), "[agent]\nname = \"pebble\"\n").unwrap();
    std::fs::write(ws.join("USER.md"), "from the archive").unwrap();
    std::fs::create_dir_all(ws.join("media")).unwrap();
    std::fs::write(ws.join("media/a.txt"), "media from the archive").unwrap();
    std::fs::write(ws.join("TOOLS.md"), "tools from the archive").unwrap();
    let archive = env._tmp.path().join("backup.tar.gz");
    env.cairn().arg("backup").arg(&archive).assert().success();

    let victim = env.victim("victim", "victim's own text");
    let linked = env.victim("linked", "hard-linked text");
    let config = env.victim("config.toml", "[agent]\nname = \"dotfile\"\n");
    std::fs::create_dir_all(env.outside.join("dir")).unwrap();
    let replace = |name: &str| {
        let path = ws.join(name);
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(&path).unwrap(),
            Ok(_) => std::fs::remove_file(&path).unwrap(),
            Err(_) => {}
        }
        path
    };
    symlink(&victim, replace("USER.md")).unwrap();
    symlink(env.outside.join("dir"), replace("media")).unwrap();
    std::fs::hard_link(&linked, replace("TOOLS.md")).unwrap();
    std::fs::remove_file(env.home.join("config.toml")).unwrap();
    symlink(&config, env.home.join("config.toml")).unwrap();
    let before = env.outside_state();

    env.cairn()
        .args(["restore", "--force"])
        .arg(&archive)
        .assert()
        .success()
        .stdout(contains("replaced"))
        .stdout(contains("USER.md"))
        .stdout(contains("media"))
        .stdout(contains("config.toml"));
    assert_eq!(env.outside_state(), before);
    assert_eq!(std::fs::metadata(&linked).unwrap().nlink(), 1);
    let read = |p: &Path| std::fs::read_to_string(p).unwrap();
    assert_eq!(read(&ws.join("USER.md")), "from the archive");
    assert_eq!(read(&ws.join("media/a.txt")), "media from the archive");
    assert_eq!(read(&ws.join("TOOLS.md")), "tools from the archive");
    assert!(read(&env.home.join("config.toml")).contains("pebble"));
    for path in [
        ws.join("USER.md"),
        ws.join("media"),
        env.home.join("config.toml"),
    ] {
        assert!(
            !std::fs::symlink_metadata(&path).unwrap().is_symlink(),
            "{path:?}"
        );
    }
    assert_eq!(
        std::fs::metadata(ws.join("media/a.txt")).unwrap().mode() & 0o777,
        0o600
    );
}
