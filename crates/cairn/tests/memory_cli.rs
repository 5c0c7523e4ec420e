//! Black-box tests of `cairn memory`: a fresh home, keyword-only and with the
//! fake embeddings server, export and start-up hydration, hygiene.
#![expect(
    clippy::unwrap_used,
    clippy::disallowed_methods,
    reason = "test code unwraps freely and may use blocking std::fs"
)]

use std::path::Path;

use assert_cmd::Command;
use cairn_llm::testing::FakeEmbeddingsServer;
use predicates::str::contains;

/// The built binary with a clean environment and the given home.
fn cairn(home: &Path) -> Command {
    let mut cmd = Command::cargo_bin("cairn").unwrap();
    cmd.env_clear().env("CAIRN_HOME", home);
    cmd
}

fn json_of(cmd: &mut Command) -> serde_json::Value {
    let output = cmd.assert().success().get_output().stdout.clone();
    serde_json::from_slice(&output)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&output)))
}

#[test]
fn add_search_list_forget_and_stats_keyword_only() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    cairn(h)
        .args([
            "memory",
            "add",
            "Prefers espresso, no sugar",
            "--key",
            "coffee",
        ])
        .assert()
        .success();
    cairn(h)
        .args([
            "memory",
            "add",
            "Réunion d'équipe le lundi",
            "--category",
            "custom",
        ])
        .assert()
        .success();
    cairn(h)
        .args(["memory", "add", "x", "--category", "nonsense"])
        .assert()
        .failure()
        .stderr(contains("unknown category"));

    let found = json_of(cairn(h).args(["memory", "search", "reunion", "--json"]));
    assert_eq!(found["mode"], "keyword_only");
    assert!(found["note"].as_str().unwrap().contains("keyword-only"));
    assert_eq!(found["hits"][0]["content"], "Réunion d'équipe le lundi");
    assert_eq!(found["hits"][0]["matched_by"], "keyword");
    assert_eq!(found["hits"][0]["score"], 1.0);
    cairn(h)
        .args(["memory", "search", "coffee"])
        .assert()
        .success()
        .stdout(contains("mode: keyword_only"))
        .stdout(contains("coffee: Prefers espresso"));

    let listed = json_of(cairn(h).args(["memory", "list", "--category", "core", "--json"]));
    assert_eq!(listed.as_array().unwrap().len(), 1);
    assert_eq!(listed[0]["key"], "coffee");
    let stats = json_of(cairn(h).args(["memory", "stats", "--json"]));
    assert_eq!(stats["total"], 2);
    assert_eq!(stats["by_category"]["custom"], 1);
    assert_eq!(stats["mode"], "keyword_only");

    cairn(h)
        .args(["memory", "forget", "--key", "coffee"])
        .assert()
        .success();
    cairn(h)
        .args(["memory", "forget", "--key", "coffee"])
        .assert()
        .code(1)
        .stderr(contains("no such memory"));
    let id = listed[0]["id"].as_str().unwrap();
    cairn(h).args(["memory", "forget", id]).assert().code(1);
    let stats = json_of(cairn(h).args(["memory", "stats", "--json"]));
    assert_eq!(stats["total"], 1);
}

#[test]
fn with_embeddings_search_is_hybrid_and_reindex_embeds_everything() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let embed = FakeEmbeddingsServer::start_on_thread().unwrap();
    let with_embed = |cmd: &mut Command| {
        cmd.env("CAIRN_MEMORY_EMBEDDINGS_PROVIDER", "openai-compatible")
            .env("CAIRN_MEMORY_EMBEDDINGS_BASE_URL", embed.base_url())
            .env("CAIRN_MEMORY_EMBEDDINGS_MODEL", "fake-embed");
    };
    // Stored without embeddings first.
    cairn(h)
        .args(["memory", "add", "Dentist appointment on Friday"])
        .assert()
        .success();
    let mut cmd = cairn(h);
    with_embed(&mut cmd);
    cmd.args(["memory", "reindex"])
        .assert()
        .success()
        .stdout(contains("embedded 1 memories"))
        .stderr(contains("reindexing [####################] 1/1"));
    let mut cmd = cairn(h);
    with_embed(&mut cmd);
    cmd.args(["memory", "add", "Gardening: tomatoes in May"])
        .assert()
        .success();
    let mut cmd = cairn(h);
    with_embed(&mut cmd);
    let found = json_of(cmd.args(["memory", "search", "dentist appointment", "--json"]));
    assert_eq!(found["mode"], "hybrid");
    assert_eq!(found["note"], serde_json::Value::Null);
    let hits = found["hits"].as_array().unwrap();
    assert_eq!(hits.len(), 1, "{found}");
    assert_eq!(hits[0]["matched_by"], "both");
    assert!(hits[0]["vector_score"].as_f64().unwrap() > 0.5);
    let mut cmd = cairn(h);
    with_embed(&mut cmd);
    let stats = json_of(cmd.args(["memory", "stats", "--json"]));
    assert_eq!(stats["embedded"], 2);
    assert_eq!(stats["mode"], "hybrid");
    // Without a provider, reindex says what is missing.
    cairn(h)
        .args(["memory", "reindex"])
        .assert()
        .failure()
        .stderr(contains("memory.embeddings_provider"));
}

#[test]
fn export_then_an_empty_store_hydrates_the_same_core_memories() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    cairn(h)
        .args(["memory", "add", "Prefers espresso", "--key", "coffee"])
        .assert()
        .success();
    cairn(h)
        .args(["memory", "add", "Lives in Lyon\n## with two cats"])
        .assert()
        .success();
    cairn(h)
        .args([
            "memory",
            "add",
            "passing chat",
            "--category",
            "conversation",
        ])
        .assert()
        .success();
    let exported = json_of(cairn(h).args(["memory", "export", "--json"]));
    let path = exported["path"].as_str().unwrap();
    assert!(path.ends_with("workspace/MEMORY_SNAPSHOT.md"), "{path}");
    let snapshot = std::fs::read_to_string(path).unwrap();
    assert!(
        snapshot.contains("## coffee\n\nPrefers espresso"),
        "{snapshot}"
    );
    assert!(!snapshot.contains("passing chat"));

    let core = |h: &Path| {
        let mut docs: Vec<(String, String)> =
            json_of(cairn(h).args(["memory", "list", "--category", "core", "--json"]))
                .as_array()
                .unwrap()
                .iter()
                .map(|d| {
                    (
                        d["key"].to_string(),
                        d["content"].as_str().unwrap().to_string(),
                    )
                })
                .collect();
        docs.sort();
        docs
    };
    let before = core(h);
    assert_eq!(before.len(), 2);
    for file in ["cairn.db", "cairn.db-wal", "cairn.db-shm"] {
        let _ = std::fs::remove_file(h.join(file));
    }
    // The next start-up finds an empty store and the snapshot.
    assert_eq!(core(h), before);
    let all = json_of(cairn(h).args(["memory", "list", "--json"]));
    assert_eq!(all.as_array().unwrap().len(), 2);
    assert!(
        all.as_array()
            .unwrap()
            .iter()
            .all(|d| d["source"] == "snapshot")
    );
}

#[test]
fn hygiene_runs_now_and_writes_the_snapshot() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    cairn(h)
        .args(["memory", "add", "Prefers espresso", "--key", "coffee"])
        .assert()
        .success();
    let report = json_of(cairn(h).args(["memory", "hygiene", "--json"]));
    assert_eq!(report["ran"], true);
    assert_eq!(report["archived"], 0);
    let path = report["snapshot"].as_str().unwrap();
    assert!(
        std::fs::read_to_string(path)
            .unwrap()
            .contains("Prefers espresso")
    );
    let off = json_of(
        cairn(h)
            .env("CAIRN_MEMORY_HYGIENE_ENABLED", "false")
            .args(["memory", "hygiene", "--json"]),
    );
    assert_eq!(off["ran"], false);
}
