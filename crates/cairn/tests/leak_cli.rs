//! Secrets the model never sees (issue 47), through the built binary and
//! the fake LLM: a credential bound to a host is added by cairn to that
//! host's requests only; a secret on its way out in a tool call (an HTTP
//! request, a fetched page, a shell command line) or a channel message is
//! stopped and listed by `cairn secret leaks`; a secret the person pastes
//! reaches the model as `[secret:NAME]`.
#![expect(clippy::unwrap_used, reason = "test helpers unwrap freely")]
#![expect(
    clippy::disallowed_methods,
    reason = "test fixtures may use blocking std::fs"
)]

mod common;

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use cairn_llm::testing::{FakeLlmServer, Scripted};
use common::Receiver;
use serde_json::{Value, json};

/// The secret: in the environment only, bound by the config to port A.
const VALUE: &str = "s3cr3t-7781";

struct Env {
    home: tempfile::TempDir,
    llm: FakeLlmServer,
}

impl Env {
    fn new(config: &str) -> Env {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join("config.toml"), config).unwrap();
        Env {
            home,
            llm: FakeLlmServer::start_on_thread().unwrap(),
        }
    }

    fn home(&self) -> &Path {
        self.home.path()
    }

    fn workspace(&self) -> PathBuf {
        self.home().join("workspace")
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
            .env("CAIRN_LLM_MAX_RETRIES", "0")
            .env("GH", VALUE);
        cmd
    }

    /// One `cairn chat -m` turn where the model makes `call` and then
    /// answers; the tool result the model was given.
    fn call(&self, name: &str, args: Value) -> String {
        let before = self.llm.requests().len();
        self.llm.push(Scripted::tool_call(name, args));
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
        let messages = requests[before + 1].body["messages"]
            .as_array()
            .unwrap()
            .clone();
        let last = messages.iter().rev().find(|m| m["role"] == "tool").unwrap();
        last["content"].as_str().unwrap().to_string()
    }

    fn leaks(&self) -> Vec<Value> {
        let out = self
            .cairn()
            .args(["secret", "leaks", "--json"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<Vec<Value>>(&out.stdout).unwrap()
    }
}

fn config(bound: &Receiver, channel: &Receiver) -> String {
    let host = bound
        .url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap();
    format!(
        "[tools.policy]\nautonomy = \"full\"\n\n\
         [tools.shell]\nallow_unconfined = true\nallowed_programs = [\"touch\", \"echo\"]\n\n\
         [tools.http]\nallowed_private_networks = [\"127.0.0.1\"]\n\n\
         [[tools.http.credentials]]\nhost = \"{host}\"\nheader = \"Authorization\"\nvalue = \"Bearer ${{GH}}\"\n\n\
         [channels.hook]\ntype = \"webhook\"\nurl = \"{}\"\n",
        channel.url
    )
}

fn header<'a>(request: &'a common::Request, name: &str) -> Option<&'a str> {
    request
        .0
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

#[test]
fn a_bound_credential_reaches_its_host_only_and_leaks_are_stopped_and_listed() {
    let bound = Receiver::start(Vec::new());
    let other = Receiver::start(Vec::new());
    let channel = Receiver::start(Vec::new());
    let env = Env::new(&config(&bound, &channel));

    // The bound host gets the credential, added by cairn.
    let result = env.call("http_request", json!({"url": bound.url}));
    assert!(result.contains("HTTP 200"), "{result}");
    let seen = bound.requests.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        header(&seen[0], "authorization"),
        Some(format!("Bearer {VALUE}").as_str())
    );
    // The model was told a credential exists for it, not what it is.
    let tools = env.llm.requests()[0].body["tools"].to_string();
    let host = bound
        .url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap();
    assert!(tools.contains(&format!("`{host}`")), "{tools}");

    // Another host, the value in the query, in clear or base64: refused
    // before anything is sent.
    let leak = format!("{}?k={VALUE}", other.url);
    let result = env.call("http_request", json!({"url": leak}));
    assert!(
        result.contains("blocked") && result.contains("`GH`"),
        "{result}"
    );
    let encoded = format!("{}?k=czNjcjN0LTc3ODE=", other.url);
    let result = env.call("web_fetch", json!({"url": encoded}));
    assert!(
        result.contains("blocked") && result.contains("`GH`"),
        "{result}"
    );
    assert!(
        other.requests.lock().unwrap().is_empty(),
        "port B saw a request"
    );

    // A shell command line holding it never runs.
    let marker = env.workspace().join("marker");
    let result = env.call(
        "shell",
        json!({"command": format!("touch {} && echo {VALUE}", marker.display())}),
    );
    assert!(result.contains("blocked"), "{result}");
    assert!(!marker.exists(), "the command ran");

    // A channel message holding it is kept, redacted, and not sent.
    let out = env
        .cairn()
        .args(["notify", "test", "hook", "--message"])
        .arg(format!("the key is {VALUE}"))
        .arg("--json")
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !shown.contains(VALUE) && !stderr.contains(VALUE),
        "{shown}{stderr}"
    );
    assert!(shown.contains("[secret:GH]"), "{shown}{stderr}");
    assert!(
        channel.requests.lock().unwrap().is_empty(),
        "the channel got it"
    );

    // What the person pastes reaches the model by name.
    env.llm.push(Scripted::text("noted"));
    let out = env
        .cairn()
        .args(["chat", "-m"])
        .arg(format!("my token is {VALUE}"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let last = env.llm.requests().last().unwrap().body.to_string();
    assert!(last.contains("my token is [secret:GH]"), "{last}");

    // The model never saw the value, in any request.
    for request in env.llm.requests() {
        let body = request.body.to_string();
        assert!(!body.contains(VALUE), "{body}");
    }
    // Every leak is listed by name, never by value.
    let leaks = env.leaks();
    let places: Vec<(String, String)> = leaks
        .iter()
        .map(|l| {
            assert_eq!(l["secret"], "GH", "{l}");
            assert!(!l.to_string().contains(VALUE), "{l}");
            (
                l["place"].as_str().unwrap().to_string(),
                l["target"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    for expected in [
        ("tool", "http_request"),
        ("tool", "web_fetch"),
        ("tool", "shell"),
        ("channel", "hook"),
        ("llm", "the person's message"),
    ] {
        assert!(
            places.contains(&(expected.0.to_string(), expected.1.to_string())),
            "{expected:?} missing from {places:?}"
        );
    }
    // Nor is it kept anywhere in the database.
    let db = std::fs::read(env.home().join("cairn.db")).unwrap_or_default();
    let wal = std::fs::read(env.home().join("cairn.db-wal")).unwrap_or_default();
    for bytes in [db, wal] {
        assert!(
            !bytes.windows(VALUE.len()).any(|w| w == VALUE.as_bytes()),
            "the value is in the database"
        );
    }
}

#[test]
fn a_bad_credential_is_named_by_file_line_and_field() {
    let env = Env::new(
        "[tools.http]\nmax_redirects = 3\n\n[[tools.http.credentials]]\nhost = \"https://x.test/\"\nvalue = \"v\"\n",
    );
    let out = env.cairn().args(["chat", "-m", "hi"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "config.toml:1: tools.http.credentials[0].host: `https://x.test/` is not a host"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("tools.http.credentials[0].header: give `header`"),
        "{stderr}"
    );
    assert!(env.llm.requests().is_empty());
}

#[test]
fn a_hook_whose_input_holds_a_secret_does_not_run_and_stops_the_call() {
    let channel = Receiver::start(Vec::new());
    let env = Env::new(&format!(
        "{}\n[[hooks]]\nevent = \"before_tool\"\ncommand = \"touch hook-ran\"\n",
        config(&channel, &channel)
    ));
    std::fs::create_dir_all(env.workspace()).unwrap();
    // A hook on a clean call runs.
    let result = env.call("time_now", json!({}));
    assert!(!result.contains("blocked"), "{result}");
    assert!(
        env.workspace().join("hook-ran").exists(),
        "the hook never runs"
    );
    std::fs::remove_file(env.workspace().join("hook-ran")).unwrap();

    let result = env.call("time_now", json!({"note": format!("key {VALUE}")}));
    assert!(
        result.contains("blocked") && result.contains("`GH`"),
        "{result}"
    );
    assert!(!env.workspace().join("hook-ran").exists(), "the hook ran");
    let leaks = env.leaks();
    assert!(
        leaks
            .iter()
            .any(|l| l["place"] == "hook" && l["target"] == "hooks[0]"),
        "{leaks:?}"
    );
}
