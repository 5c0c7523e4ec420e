//! Black-box tests of the foundation commands: doctor, config show, version, help.
#![expect(clippy::unwrap_used, reason = "test helpers unwrap freely")]
#![expect(
    clippy::disallowed_methods,
    reason = "test fixtures may use blocking std::fs"
)]

use std::path::Path;

use assert_cmd::Command;
use predicates::str::contains;

/// The built binary with a clean environment and the given home.
fn cairn(home: &Path) -> Command {
    let mut cmd = Command::cargo_bin("cairn").unwrap();
    cmd.env_clear().env("CAIRN_HOME", home);
    cmd
}

fn json_of(output: &[u8]) -> serde_json::Value {
    serde_json::from_slice(output)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(output)))
}

fn check<'a>(report: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap()
}

fn stdout_of(cmd: &mut Command) -> Vec<u8> {
    cmd.assert().success().get_output().stdout.clone()
}

#[test]
fn doctor_creates_the_database_once() {
    let home = tempfile::tempdir().unwrap();
    let report = json_of(&stdout_of(cairn(home.path()).args(["doctor", "--json"])));
    assert_eq!(report["ok"], true);
    let db = home.path().join("cairn.db");
    assert!(db.exists());
    assert!(home.path().join("workspace").is_dir());
    let message = check(&report, "database")["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(message.contains("applied migrations [1"), "{message}");
    let before = std::fs::read(&db).unwrap();

    let report = json_of(&stdout_of(cairn(home.path()).args(["doctor", "--json"])));
    let message = check(&report, "database")["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(message.contains("schema up to date"), "{message}");
    assert_eq!(
        std::fs::read(&db).unwrap(),
        before,
        "second run changed the database file"
    );
}

#[test]
fn doctor_text_output_lists_each_check() {
    let home = tempfile::tempdir().unwrap();
    cairn(home.path())
        .arg("doctor")
        .assert()
        .success()
        .stdout(contains("ok    config"))
        .stdout(contains("ok    database"))
        .stdout(contains("warn  llm"));
}

#[test]
fn config_show_json_reports_sources() {
    let home = tempfile::tempdir().unwrap();
    let v = json_of(&stdout_of(
        cairn(home.path()).args(["config", "show", "--json"]),
    ));
    assert_eq!(v["settings"]["heartbeat.interval_secs"]["value"], 1800);
    assert_eq!(
        v["settings"]["heartbeat.interval_secs"]["source"],
        "default"
    );
    assert_eq!(v["file_exists"], false);

    let v = json_of(&stdout_of(
        cairn(home.path())
            .env("HEARTBEAT_INTERVAL_SECS", "60")
            .args(["config", "show", "--json"]),
    ));
    let hb = &v["settings"]["heartbeat.interval_secs"];
    assert_eq!(hb["value"], 60);
    assert_eq!(hb["source"], "env");
    assert_eq!(hb["env"], "HEARTBEAT_INTERVAL_SECS");

    std::fs::write(
        home.path().join("config.toml"),
        "[agent]\nname = \"pebble\"\n",
    )
    .unwrap();
    let v = json_of(&stdout_of(
        cairn(home.path()).args(["config", "show", "--json"]),
    ));
    assert_eq!(v["settings"]["agent.name"]["value"], "pebble");
    assert_eq!(v["settings"]["agent.name"]["source"], "file");
    assert_eq!(v["settings"]["agent.name"]["line"], 2);
}

#[test]
fn config_show_redacts_secrets() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        "[[llm.fallbacks]]\nprovider = \"anthropic\"\napi_key = \"sk-ant-in-file\"\n",
    )
    .unwrap();
    for args in [&["config", "show", "--json"][..], &["config", "show"][..]] {
        let out = stdout_of(
            cairn(home.path())
                .env("OPENAI_API_KEY", "sk-live-very-secret")
                .env(
                    "DATABASE_URL",
                    "postgres://cairn:db-password@127.0.0.1:1/cairn",
                )
                .args(args),
        );
        let text = String::from_utf8(out).unwrap();
        for secret in ["sk-live-very-secret", "db-password", "sk-ant-in-file"] {
            assert!(!text.contains(secret), "{secret} leaked:\n{text}");
        }
        assert!(text.contains("********"));
    }
}

#[test]
fn config_show_redacts_search_api_keys() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        "[tools.web_search]\nprovider = \"brave\"\napi_key = \"BSA-S3CR-key\"\n\
         base_url = \"https://user:pw-S3CR@search.example.org\"\n",
    )
    .unwrap();
    for args in [&["config", "show", "--json"][..], &["config", "show"][..]] {
        let text = String::from_utf8(stdout_of(cairn(home.path()).args(args))).unwrap();
        assert!(!text.contains("S3CR"), "a search key leaked:\n{text}");
    }
    let v = json_of(&stdout_of(
        cairn(home.path()).args(["config", "show", "--json"]),
    ));
    let search = &v["sections"]["tools"]["value"]["web_search"];
    assert_eq!(search["provider"], "brave");
    assert_eq!(search["api_key"], "********");
}

#[test]
fn config_show_redacts_ntfy_topics_and_every_header_value() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        "[channels.push]\ntype = \"ntfy\"\ntopic = \"topic-S3CR\"\n\n\
         [channels.ops]\ntype = \"webhook\"\nurl = \"https://example.org/hook\"\n\
         headers = {\"X-Team\" = \"team-S3CR\", \"X-Api\" = \"api-S3CR\"}\n",
    )
    .unwrap();
    for args in [&["config", "show", "--json"][..], &["config", "show"][..]] {
        let text = String::from_utf8(stdout_of(cairn(home.path()).args(args))).unwrap();
        assert!(!text.contains("S3CR"), "a topic or header leaked:\n{text}");
    }
    let v = json_of(&stdout_of(
        cairn(home.path()).args(["config", "show", "--json"]),
    ));
    let channels = &v["sections"]["channels"]["value"];
    // The names stay readable; only the values are hidden.
    assert_eq!(channels["push"]["type"], "ntfy");
    assert_eq!(channels["push"]["topic"], "********");
    assert_eq!(channels["ops"]["headers"]["X-Team"], "********");
    assert_eq!(channels["ops"]["url"], "https://example.org/hook");
}

#[test]
fn config_show_redacts_mcp_server_env_and_header_values() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        "[[mcp.servers]]\nname = \"gh\"\ncommand = \"npx\"\nargs = [\"-y\", \"server-github\"]\n\
         env = {\"GH_PAT\" = \"pat-S3CR\", \"DB_PASS\" = \"pass-S3CR\"}\n\n\
         [[mcp.servers]]\nname = \"remote\"\nurl = \"https://example.org/mcp\"\n\
         headers = {\"Authorization\" = \"Bearer S3CR\", \"X-Api\" = \"api-S3CR\"}\n",
    )
    .unwrap();
    for args in [&["config", "show", "--json"][..], &["config", "show"][..]] {
        let text = String::from_utf8(stdout_of(cairn(home.path()).args(args))).unwrap();
        assert!(
            !text.contains("S3CR"),
            "an env or header value leaked:\n{text}"
        );
    }
    let v = json_of(&stdout_of(
        cairn(home.path()).args(["config", "show", "--json"]),
    ));
    let servers = &v["sections"]["mcp.servers"]["value"];
    assert_eq!(servers[0]["env"]["DB_PASS"], "********");
    assert_eq!(servers[0]["args"][1], "server-github");
    assert_eq!(servers[1]["headers"]["X-Api"], "********");
    assert_eq!(servers[1]["url"], "https://example.org/mcp");
}

#[test]
fn bad_config_fails_doctor_naming_file_line_and_key() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("config.toml");

    std::fs::write(&file, "[heartbeat]\ninterval_secs = \"often\"\n").unwrap();
    cairn(home.path())
        .arg("doctor")
        .assert()
        .code(1)
        .stdout(contains(format!(
            "{}:2: heartbeat.interval_secs",
            file.display()
        )))
        .stdout(contains("expected a non-negative integer"));

    std::fs::write(&file, "[heartbeat\ninterval_secs = 5\n").unwrap();
    cairn(home.path())
        .arg("doctor")
        .assert()
        .code(1)
        .stdout(contains(format!("{}:1:", file.display())))
        .stdout(contains("TOML syntax error"));

    std::fs::write(&file, "[heartbeat]\nintervall_secs = 5\n").unwrap();
    cairn(home.path())
        .args(["doctor", "--json"])
        .assert()
        .code(1)
        .stdout(contains("unknown key `heartbeat.intervall_secs`"));

    // Other commands refuse the same file, on stderr.
    cairn(home.path())
        .args(["config", "show"])
        .assert()
        .code(1)
        .stderr(contains(
            "config.toml:2: unknown key `heartbeat.intervall_secs` (did you mean `heartbeat.interval_secs`?)",
        ));
    assert!(
        !home.path().join("cairn.db").exists(),
        "nothing is created from a bad config"
    );
}

#[test]
fn bad_environment_value_names_the_variable() {
    let home = tempfile::tempdir().unwrap();
    cairn(home.path())
        .env("ROUTINES_ENABLED", "perhaps")
        .args(["config", "show"])
        .assert()
        .code(1)
        .stderr(contains("ROUTINES_ENABLED"))
        .stderr(contains("true or false"));
}

#[test]
fn unusable_database_url_fails_doctor() {
    let home = tempfile::tempdir().unwrap();
    cairn(home.path())
        .env("DATABASE_URL", "mysql://nobody@127.0.0.1/x")
        .arg("doctor")
        .assert()
        .code(1)
        .stdout(contains("FAIL  database"))
        .stdout(contains("unsupported database URL"));
}

#[test]
fn version_and_help() {
    let home = tempfile::tempdir().unwrap();
    cairn(home.path())
        .arg("version")
        .assert()
        .success()
        .stdout(contains(env!("CARGO_PKG_VERSION")));
    let v = json_of(&stdout_of(cairn(home.path()).args(["version", "--json"])));
    assert_eq!(v["version"], env!("CARGO_PKG_VERSION"));
    cairn(home.path())
        .arg("--help")
        .assert()
        .success()
        .stdout(contains("doctor"))
        .stdout(contains("config"));
    cairn(home.path())
        .arg("frobnicate")
        .assert()
        .code(2)
        .stderr(contains("frobnicate"));
}

#[test]
fn doctor_checks_the_tools_table() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        "[tools.policy]\nautonomy = \"reckless\"\n",
    )
    .unwrap();
    cairn(home.path())
        .arg("doctor")
        .assert()
        .code(1)
        .stdout(contains("FAIL  tools"))
        .stdout(contains("config.toml:1: tools"))
        .stdout(contains("reckless"));
}

/// `cairn … | head` closing the pipe early ends the command quietly (as
/// SIGPIPE would: status 141), not with a panic and its backtrace.
#[test]
fn a_reader_closing_stdout_early_ends_the_command_quietly() {
    let home = tempfile::tempdir().unwrap();
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("cairn"))
        .env_clear()
        .env("CAIRN_HOME", home.path())
        .args(["config", "show"])
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(141), "stderr: {stderr}");
    assert!(!stderr.contains("panicked"), "stderr: {stderr}");
}
