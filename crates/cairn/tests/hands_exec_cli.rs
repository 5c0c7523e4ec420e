//! The daemon's own hands, through the built binary (issue 42): what cairn
//! itself starts never runs the workspace's code (MCP stdio servers), hooks
//! run from beside the home and fail closed, `cairn doctor` dry-runs them,
//! `cairn service install` sets its modes whatever the umask, and a shell
//! command's own exit status never disables `shell`.
#![expect(clippy::unwrap_used, reason = "test helpers unwrap freely")]
#![expect(
    clippy::disallowed_methods,
    reason = "test fixtures may use blocking std::fs"
)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use cairn_llm::testing::{FakeLlmServer, Scripted};
use serde_json::{Value, json};

/// A home at `<parent>/.cairn`, so a file in `<parent>` sits beside it.
struct Env {
    parent: tempfile::TempDir,
    llm: FakeLlmServer,
}

impl Env {
    fn new() -> Env {
        let parent = tempfile::tempdir().unwrap();
        std::fs::create_dir(parent.path().join(".cairn")).unwrap();
        Env {
            parent,
            llm: FakeLlmServer::start_on_thread().unwrap(),
        }
    }

    fn home(&self) -> PathBuf {
        self.parent.path().join(".cairn")
    }

    fn workspace(&self) -> PathBuf {
        self.home().join("workspace")
    }

    fn config(&self, toml: &str) {
        std::fs::write(self.home().join("config.toml"), toml).unwrap();
    }

    /// An executable file beside the home.
    fn script(&self, name: &str, text: &str) -> PathBuf {
        let path = self.parent.path().join(name);
        executable(&path, text);
        path
    }

    fn cairn(&self) -> Command {
        let mut cmd = Command::cargo_bin("cairn").unwrap();
        cmd.env_clear()
            .env("CAIRN_HOME", self.home())
            .env("CAIRN_TIMEZONE", "UTC")
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("CAIRN_LLM_PROVIDER", "openai")
            .env("CAIRN_LLM_BASE_URL", self.llm.base_url_openai())
            .env("CAIRN_LLM_MODEL", "test-model")
            .env("CAIRN_LLM_API_KEY", "sk-test-0123456789")
            .env("CAIRN_LLM_MAX_RETRIES", "0");
        cmd
    }

    fn json(&self, args: &[&str]) -> Value {
        let out = self.cairn().args(args).output().unwrap();
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "{args:?}: not JSON ({e}): {}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
    }

    /// One `cairn chat -m` turn where the model makes `calls` and then
    /// answers; returns the tool results of this turn the model was given
    /// (the conversation goes on from one chat to the next).
    fn chat(&self, calls: &[(&str, Value)]) -> Vec<String> {
        let before = self.llm.requests().len();
        self.llm.push(Scripted::tool_calls(
            calls.iter().map(|(n, a)| (*n, a.clone())),
        ));
        self.llm.push(Scripted::text("done"));
        let out = self.cairn().args(["chat", "-m", "go"]).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let requests = self.llm.requests();
        assert_eq!(
            requests.len(),
            before + 2,
            "one tool round, then the answer"
        );
        let results: Vec<String> = requests[before + 1].body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| m["content"].as_str().unwrap_or_default().to_string())
            .collect();
        results[results.len() - calls.len()..].to_vec()
    }
}

fn executable(path: &Path, text: &str) {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// Whether this machine confines commands (else `CAIRN_TEST_NO_LANDLOCK`
/// says it cannot, as in sandbox_cli.rs).
fn landlock() -> bool {
    std::env::var_os("CAIRN_TEST_NO_LANDLOCK").is_none()
}

/// Runs `shell` unapproved, confined where Landlock is (and accepted
/// unconfined where it is not, so the tests say the same everywhere), with
/// `touch` allowed so a call that ran leaves a file.
const FULL: &str = "[tools.policy]\nautonomy = \"full\"\n\n[tools.shell]\nallow_unconfined = true\n\
                    allowed_programs = [\"touch\", \"grep\", \"cat\"]\n";

/// A planted `node_modules/.bin/<server>` (the package `npx` would take
/// from the workspace) and a planted `./<command>` never run when the
/// configured stdio servers start, even with `.` and `node_modules/.bin`
/// on cairn's own `PATH`.
#[test]
fn programs_planted_in_the_workspace_never_start_as_mcp_servers() {
    let env = Env::new();
    let marks = tempfile::tempdir().unwrap();
    let plant = |relative: &str, mark: &str| {
        let text = format!("#!/bin/sh\ntouch {}\n", marks.path().join(mark).display());
        executable(&env.workspace().join(relative), &text);
    };
    plant("node_modules/.bin/mcp-server-github", "npx-ran");
    plant(
        "node_modules/@modelcontextprotocol/server-github/index.js",
        "package-ran",
    );
    std::fs::write(
        env.workspace()
            .join("node_modules/@modelcontextprotocol/server-github/package.json"),
        r#"{"name": "@modelcontextprotocol/server-github", "version": "9.9.9", "bin": {"mcp-server-github": "index.js"}}"#,
    )
    .unwrap();
    plant("mcp-local", "local-ran");
    let mut config = String::from("[[mcp.servers]]\nname = \"local\"\ncommand = \"mcp-local\"\n");
    let npx = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .any(|dir| dir.join("npx").is_file());
    if npx {
        // The docs' own example; offline, so the real package is never fetched.
        config.push_str(
            "\n[[mcp.servers]]\nname = \"github\"\ncommand = \"npx\"\n\
             args = [\"-y\", \"@modelcontextprotocol/server-github\"]\n\
             env = { npm_config_offline = \"true\" }\nconnect_timeout_secs = 20\n",
        );
    } else {
        println!("npx is not on PATH: the npx case is not exercised");
    }
    env.config(&config);
    let npm_home = tempfile::tempdir().unwrap();
    let out = env
        .cairn()
        .env(
            "PATH",
            format!(
                ".:node_modules/.bin:{}",
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .env("HOME", npm_home.path())
        .args(["mcp", "list", "--json"])
        .output()
        .unwrap();
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    let ran: Vec<_> = std::fs::read_dir(marks.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(ran.is_empty(), "planted programs ran: {ran:?}; {list}");
    let local = &list[0];
    assert_ne!(local["state"], "ready", "{list}");
    assert!(
        local["last_error"]
            .as_str()
            .unwrap_or_default()
            .contains("`mcp-local` was not found on PATH"),
        "{list}"
    );
    // Each server's own folder, private, is where it runs.
    let own = env.home().join("mcp/local");
    assert_eq!((mode(&own), mode(own.parent().unwrap())), (0o700, 0o700));
    if npx {
        assert_ne!(list[1]["state"], "ready", "{list}");
        assert!(env.home().join("mcp/github").is_dir());
    }
}

/// `cairn service install` under umask 000: the directories it makes are
/// 0700, the unit 0644, `cairn.env` 0600; an existing unit directory others
/// could write is closed to them.
#[test]
fn service_install_sets_its_modes_whatever_the_umask() {
    let env = Env::new();
    let user_home = tempfile::tempdir().unwrap();
    let install = |extra: &[(&str, &Path)], force: bool| {
        let mut cmd = std::process::Command::new("/bin/sh");
        cmd.env_clear()
            .env("CAIRN_HOME", env.home())
            .env("HOME", user_home.path())
            .env("CAIRN_LLM_API_KEY", "sk-test-0123456789")
            .args(["-c", "umask 000; exec \"$0\" service install \"$@\""])
            .arg(assert_cmd::cargo::cargo_bin("cairn"));
        if force {
            cmd.arg("--force");
        }
        for (k, v) in extra {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    install(&[], false);
    let config = user_home.path().join(".config");
    let dir = config.join("systemd/user");
    for made in [&config, &config.join("systemd"), &dir] {
        assert_eq!(mode(made), 0o700, "{}", made.display());
    }
    assert_eq!(mode(&dir.join("cairn.service")), 0o644);
    assert_eq!(mode(&dir.join("cairn.env")), 0o600);

    // A unit directory left open by an earlier install, and a unit 0666.
    let xdg = tempfile::tempdir().unwrap();
    let open = xdg.path().join("systemd/user");
    std::fs::create_dir_all(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::write(open.join("cairn.service"), "old").unwrap();
    std::fs::set_permissions(
        open.join("cairn.service"),
        std::fs::Permissions::from_mode(0o666),
    )
    .unwrap();
    install(&[("XDG_CONFIG_HOME", xdg.path())], true);
    assert_eq!(mode(&open), 0o755);
    assert_eq!(mode(&open.join("cairn.service")), 0o644);
    assert_eq!(mode(&open.join("cairn.env")), 0o600);
}

/// `before_tool` hooks on `shell`: one beside the home (outside it, in its
/// parent directory) runs and its exit 2 blocks the call; a missing script
/// and one that times out block it too.
#[test]
fn before_tool_hooks_run_beside_the_home_and_fail_closed() {
    let env = Env::new();
    let check = env.script(
        "check.sh",
        "#!/bin/sh\ncat > /dev/null\necho 'no shell today (check.sh beside the home)' >&2\nexit 2\n",
    );
    let missing = env.parent.path().join("missing.sh");
    let touch = json!({"command": "touch ran"});
    let cases = [
        (
            format!("command = \"{}\"", check.display()),
            "no shell today (check.sh beside the home)",
        ),
        (
            format!("command = \"{}\"", missing.display()),
            "gave no verdict",
        ),
        (
            "command = \"sleep 30\"\ntimeout_secs = 1".to_string(),
            "timeout",
        ),
    ];
    for (hook, why) in cases {
        env.config(&format!(
            "{FULL}\n[[hooks]]\nevent = \"before_tool\"\nmatcher = \"^shell$\"\n{hook}\n"
        ));
        let results = env.chat(&[("shell", touch.clone())]);
        assert!(results[0].contains(why), "{hook}: {results:?}");
        assert!(
            !env.workspace().join("ran").exists(),
            "{hook}: the command ran"
        );
    }
    // Without the hook, the same call runs (the verdict was the hook's).
    env.config(FULL);
    env.chat(&[("shell", touch)]);
    assert!(env.workspace().join("ran").exists());
}

/// `cairn doctor` starts each hook once on a sample event marked
/// `"dry_run": true` and reports each: ok, or failed (a failing
/// `before_tool` hook fails the check).
#[test]
fn doctor_dry_runs_each_hook() {
    let env = Env::new();
    let ok = env.script("check.sh", "#!/bin/sh\ncat > dry.json\nexit 0\n");
    let missing = env.parent.path().join("missing.sh");
    env.config(&format!(
        "[[hooks]]\nevent = \"before_tool\"\ncommand = \"{}\"\n\n\
         [[hooks]]\nevent = \"after_tool\"\ncommand = \"{}\"\n\n\
         [[hooks]]\nevent = \"before_tool\"\ncommand = \"{}\"\n",
        ok.display(),
        missing.display(),
        missing.display()
    ));
    let report = env.json(&["doctor", "--json"]);
    let hooks = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "hooks")
        .unwrap();
    let message = hooks["message"].as_str().unwrap();
    assert_eq!(hooks["status"], "fail", "{message}");
    assert!(message.contains("\"dry_run\": true"), "{message}");
    assert!(
        message.contains(&format!("hooks[0] (before_tool, `{}`): ok", ok.display())),
        "{message}"
    );
    assert!(message.contains("hooks[1] (after_tool"), "{message}");
    assert!(
        message.contains("hooks[2] (before_tool")
            && message.contains("the calls it matches are blocked"),
        "{message}"
    );
    assert_eq!(message.matches(": failed, ").count(), 2, "{message}");
    let event: Value =
        serde_json::from_str(&std::fs::read_to_string(env.workspace().join("dry.json")).unwrap())
            .unwrap();
    assert_eq!(event["dry_run"], true, "{event}");
    assert_eq!(event["event"], "before_tool", "{event}");
}

/// Five `grep -c nomatch` (exit 1), and a file the sandbox keeps from `cat`
/// (Permission denied), are results the model sees: `shell` stays enabled
/// with no failure recorded.
#[test]
fn a_commands_own_exit_status_leaves_shell_enabled() {
    let env = Env::new();
    env.config(&format!("{FULL}\n[repair]\ntool_failure_limit = 5\n"));
    std::fs::create_dir_all(env.workspace()).unwrap();
    std::fs::write(env.workspace().join("notes.txt"), "nothing here\n").unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::write(elsewhere.path().join("secret.txt"), "x").unwrap();
    let mut calls: Vec<(&str, Value)> = (0..5)
        .map(|i| {
            (
                "shell",
                json!({"command": format!("grep -c nomatch{i} notes.txt")}),
            )
        })
        .collect();
    if landlock() {
        let cat = format!("cat {}/secret.txt", elsewhere.path().display());
        calls.push(("shell", json!({ "command": cat })));
    }
    let results = env.chat(&calls);
    assert_eq!(results.len(), calls.len());
    for result in &results[..5] {
        assert!(result.contains("[exit status 1]"), "{result}");
    }
    if landlock() {
        assert!(results[5].contains("Permission denied"), "{}", results[5]);
    }
    let list = env.json(&["tool", "list", "--json"]);
    let shell = list
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "shell")
        .unwrap();
    assert_eq!(shell["enabled"], true, "{shell}");
    assert_eq!(shell["consecutive_failures"], 0, "{shell}");
}
