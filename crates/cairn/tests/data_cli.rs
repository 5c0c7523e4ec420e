//! Black-box tests of keeping and moving data: a backup taken while the
//! daemon runs, restored into a fresh home; `db copy` from SQLite to the CI
//! PostgreSQL with a daemon then running on it; export and import.
#![expect(clippy::unwrap_used, reason = "test code unwraps freely")]
#![expect(
    clippy::disallowed_methods,
    reason = "test fixtures may use blocking std::fs"
)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use cairn_llm::testing::{FakeEmbeddingsServer, FakeLlmServer, Scripted};
use cairn_test_support::postgres::PgSchema;
use predicates::str::contains;
use serde_json::Value;

mod common;
use common::DaemonChild;

/// A cairn home with its extra environment.
struct Home {
    path: PathBuf,
    env: Vec<(String, String)>,
}

impl Home {
    fn new(path: PathBuf) -> Home {
        Home {
            path,
            env: Vec::new(),
        }
    }

    fn with(mut self, key: &str, value: &str) -> Home {
        self.env.push((key.to_string(), value.to_string()));
        self
    }

    fn command(&self) -> std::process::Command {
        let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("cairn"));
        cmd.env_clear()
            .env("CAIRN_HOME", &self.path)
            .env("CAIRN_TIMEZONE", "UTC")
            .env("CAIRN_GATEWAY_PORT", "0")
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        cmd
    }

    fn cairn(&self) -> Command {
        Command::from_std(self.command())
    }

    fn json(&self, args: &[&str]) -> Value {
        let out = self.cairn().arg("--json").args(args).output().unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// Routine names, memory texts and live token names: what must survive a move.
    fn inventory(&self) -> (Vec<String>, Vec<String>, Vec<String>) {
        let strings = |v: Value, field: &str| -> Vec<String> {
            let mut out: Vec<String> = v
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x[field].as_str().unwrap().to_string())
                .collect();
            out.sort();
            out
        };
        (
            strings(self.json(&["routine", "list"]), "name"),
            strings(self.json(&["memory", "list"]), "content"),
            strings(self.json(&["token", "list"]), "name"),
        )
    }

    /// Routines, memories, a token, a run and a workspace file.
    fn fill(&self) {
        let dir = self.path.join("defs");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("a.yaml"),
            "name: morning-check\ntrigger: {type: cron, schedule: \"every weekday at 9am\"}\n\
             action: {type: notification, title: Morning, message: Check the plants.}\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("b.yaml"),
            "name: by-hand\ntrigger: {type: manual}\naction: {type: notification, title: Hi, message: By hand.}\n",
        )
        .unwrap();
        self.cairn()
            .args(["routine", "apply", "-f"])
            .arg(&dir)
            .assert()
            .success();
        std::fs::remove_dir_all(&dir).unwrap();
        for text in ["Prefers espresso", "Lives in Lyon"] {
            self.cairn()
                .args(["memory", "add", text])
                .assert()
                .success();
        }
        self.cairn()
            .args(["token", "create", "--name", "laptop"])
            .assert()
            .success();
        self.cairn()
            .args(["routine", "fire", "by-hand"])
            .assert()
            .success();
        let notes = self.path.join("workspace/notes");
        std::fs::create_dir_all(&notes).unwrap();
        std::fs::write(notes.join("plants.md"), "water on Mondays\n").unwrap();
    }

    fn runs(&self, routine: &str) -> usize {
        self.json(&["routine", "runs", routine])
            .as_array()
            .unwrap()
            .len()
    }
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn a_backup_taken_while_the_daemon_runs_restores_into_a_fresh_home() {
    let tmp = tempfile::tempdir().unwrap();
    let old = Home::new(tmp.path().join("old"));
    std::fs::create_dir_all(&old.path).unwrap();
    std::fs::write(old.path.join("config.toml"), "[agent]\nname = \"pebble\"\n").unwrap();
    old.fill();
    let daemon = DaemonChild::start(old.command());
    daemon.wait_running(|| old.command());
    // With the daemon's own upkeep routines, which it wrote at start.
    let before = old.inventory();
    assert!(before.0.contains(&"heartbeat".to_string()), "{before:?}");

    let archive = tmp.path().join("cairn.tar.gz");
    let out = old.json(&["backup", archive.to_str().unwrap()]);
    assert_eq!(out["backend"], "sqlite");
    assert_eq!(out["workspace_files"], 1);
    assert_eq!(mode(&archive), 0o600);
    // Work goes on while and after the snapshot is taken.
    old.cairn()
        .args(["memory", "add", "Added after the backup"])
        .assert()
        .success();
    daemon.stop();

    let new = Home::new(tmp.path().join("new"));
    new.cairn()
        .arg("restore")
        .arg(&archive)
        .assert()
        .success()
        .stdout(contains("restored"));
    assert_eq!(new.inventory(), before);
    assert_eq!(new.runs("by-hand"), 1);
    assert_eq!(
        std::fs::read_to_string(new.path.join("workspace/notes/plants.md")).unwrap(),
        "water on Mondays\n"
    );
    assert_eq!(mode(&new.path.join("workspace/notes/plants.md")), 0o600);
    assert_eq!(mode(&new.path.join("config.toml")), 0o600);
    assert_eq!(mode(&new.path), 0o700);
    assert!(
        std::fs::read_to_string(new.path.join("config.toml"))
            .unwrap()
            .contains("pebble")
    );
    // The restored home runs.
    new.cairn().arg("doctor").assert().success();
    let daemon = DaemonChild::start(new.command());
    daemon.wait_running(|| new.command());
    daemon.stop();

    // A home with something in it is refused, unless --force.
    new.cairn()
        .arg("restore")
        .arg(&archive)
        .assert()
        .code(2)
        .stderr(contains("not empty"));
    new.cairn()
        .args(["memory", "add", "Only in the new home"])
        .assert()
        .success();
    new.cairn()
        .args(["restore", "--force"])
        .arg(&archive)
        .assert()
        .success();
    assert_eq!(new.inventory(), before);
}

#[test]
fn a_backup_from_a_newer_schema_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let archive = tmp.path().join("future.tar.gz");
    let manifest = serde_json::json!({
        "format": 1, "cairn_version": "9.0.0", "schema_version": 9999, "backend": "sqlite",
        "created_at": "2030-01-01T00:00:00Z", "database": "sqlite-file", "tables": [],
        "config": false, "workspace_files": 0
    })
    .to_string();
    let file = std::fs::File::create(&archive).unwrap();
    let mut tar = tar::Builder::new(flate2::write::GzEncoder::new(
        file,
        flate2::Compression::default(),
    ));
    let mut header = tar::Header::new_gnu();
    header.set_size(manifest.len() as u64);
    header.set_mode(0o600);
    tar.append_data(&mut header, "manifest.json", manifest.as_bytes())
        .unwrap();
    tar.into_inner().unwrap().finish().unwrap();
    let home = Home::new(tmp.path().join("home"));
    home.cairn()
        .arg("restore")
        .arg(&archive)
        .assert()
        .code(2)
        .stderr(contains("schema version 9999"));
    assert!(!home.path.exists(), "nothing was written");
}

#[test]
fn db_copy_moves_sqlite_to_postgres_and_the_daemon_runs_there() {
    let Some(pg) = PgSchema::create("db_copy_moves_sqlite_to_postgres_and_the_daemon_runs_there")
    else {
        return;
    };
    let embed = FakeEmbeddingsServer::start_on_thread().unwrap();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    llm.push(Scripted::text("All quiet."));
    let tmp = tempfile::tempdir().unwrap();
    let home = Home::new(tmp.path().join("home"))
        .with("CAIRN_MEMORY_EMBEDDINGS_PROVIDER", "openai-compatible")
        .with("CAIRN_MEMORY_EMBEDDINGS_BASE_URL", &embed.base_url())
        .with("CAIRN_MEMORY_EMBEDDINGS_MODEL", "fake-embed")
        .with("CAIRN_LLM_PROVIDER", "openai")
        .with("CAIRN_LLM_BASE_URL", &llm.base_url_openai())
        .with("CAIRN_LLM_MODEL", "test-model")
        .with("CAIRN_LLM_API_KEY", "sk-test-0123456789")
        .with("CAIRN_LLM_MAX_RETRIES", "0");
    home.fill();
    home.cairn()
        .args(["chat", "-m", "hello"])
        .assert()
        .success()
        .stdout(contains("All quiet."));
    let before = home.inventory();
    let stats = home.json(&["memory", "stats"]);
    assert_eq!(stats["embedded"], 2, "{stats}");

    let out = home.json(&["db", "copy", "--to", &pg.url]);
    let tables = out["tables"].as_array().unwrap();
    let rows = |name: &str| {
        tables.iter().find(|t| t["table"] == name).unwrap()["rows"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(rows("routines"), 2);
    assert_eq!(rows("memory_docs"), 2);
    assert_eq!(rows("api_tokens"), 1);
    assert!(rows("thread_turns") >= 1 && rows("notifications") >= 1);

    let moved = home.with("DATABASE_URL", &pg.url);
    assert_eq!(moved.inventory(), before);
    assert_eq!(moved.runs("by-hand"), 1);
    assert_eq!(moved.json(&["memory", "stats"])["embedded"], 2);
    let hits = moved.json(&["memory", "search", "espresso"]);
    assert_eq!(hits["hits"].as_array().map_or(0, Vec::len), 1, "{hits}");
    let daemon = DaemonChild::start(moved.command());
    daemon.wait_running(|| moved.command());
    moved
        .cairn()
        .args(["routine", "fire", "by-hand"])
        .assert()
        .success();
    assert_eq!(moved.runs("by-hand"), 2, "history goes on where it was");

    // A backup of PostgreSQL is its portable export; it restores into SQLite.
    let archive = tmp.path().join("pg.tar.gz");
    let out = moved.json(&["backup", archive.to_str().unwrap()]);
    assert_eq!(
        (out["backend"].as_str(), out["database"].as_str()),
        (Some("postgres"), Some("jsonl"))
    );
    daemon.stop();
    let after = moved.inventory();
    let restored = Home::new(tmp.path().join("restored"));
    restored
        .cairn()
        .arg("restore")
        .arg(&archive)
        .assert()
        .success();
    assert_eq!(restored.inventory(), after);
    assert_eq!(restored.runs("by-hand"), 2);
    assert_eq!(
        restored.json(&["memory", "search", "espresso"])["hits"]
            .as_array()
            .map_or(0, Vec::len),
        1
    );

    // The target now holds data: a second copy is refused unless --force.
    let unmoved = Home {
        path: moved.path.clone(),
        env: moved
            .env
            .iter()
            .filter(|(k, _)| k != "DATABASE_URL")
            .cloned()
            .collect(),
    };
    unmoved
        .cairn()
        .args(["db", "copy", "--to", &pg.url])
        .assert()
        .code(2)
        .stderr(contains("not empty"));
    unmoved
        .cairn()
        .args(["db", "copy", "--force", "--to", &pg.url])
        .assert()
        .success();
    assert_eq!(
        moved.runs("by-hand"),
        1,
        "--force replaced the target's rows"
    );
}

#[test]
fn export_then_import_round_trips_routines_and_memories() {
    let tmp = tempfile::tempdir().unwrap();
    let old = Home::new(tmp.path().join("old"));
    old.fill();
    let dir = tmp.path().join("export");
    let out = old.json(&["export", dir.to_str().unwrap()]);
    assert_eq!(out["memories"], 2);
    assert!(dir.join("routines/morning-check.yaml").exists());
    assert_eq!(mode(&dir.join("memories.jsonl")), 0o600);

    let new = Home::new(tmp.path().join("new"));
    new.cairn().arg("import").arg(&dir).assert().success();
    let (routines, memories, _) = new.inventory();
    let (old_routines, old_memories, _) = old.inventory();
    assert_eq!((routines, memories), (old_routines, old_memories));
    // The files are what `routine apply` reads: nothing changes.
    new.cairn()
        .args(["routine", "apply", "-f"])
        .arg(dir.join("routines"))
        .assert()
        .success()
        .stdout(contains("unchanged"));
    // Importing twice adds nothing.
    new.cairn()
        .arg("import")
        .arg(&dir)
        .assert()
        .success()
        .stdout(contains("0 memories added, 2 already there"));
}
