//! Black-box tests of the agent's reach from `cairn chat`: images sent to
//! both wire protocols, model routing by message class, and `cairn doctor`'s
//! routing check, against the fake LLM server.
#![expect(clippy::unwrap_used, reason = "test code unwraps freely")]
#![expect(
    clippy::disallowed_methods,
    reason = "test fixtures may use blocking std::fs"
)]

use assert_cmd::Command;
use cairn_llm::testing::{FakeLlmServer, Scripted};
use predicates::str::contains;
use serde_json::Value;

/// A 1×1 GIF and its base64.
const GIF: &[u8] = b"GIF89a\x01\x00\x01\x00\x00\x00\x00;";
const GIF_BASE64: &str = "R0lGODlhAQABAAAAADs=";

struct Env {
    server: FakeLlmServer,
    home: tempfile::TempDir,
    provider: &'static str,
}

impl Env {
    fn new(provider: &'static str) -> Env {
        Env {
            server: FakeLlmServer::start_on_thread().unwrap(),
            home: tempfile::tempdir().unwrap(),
            provider,
        }
    }

    fn config(&self, toml: &str) {
        std::fs::write(self.home.path().join("config.toml"), toml).unwrap();
    }

    fn cairn(&self) -> Command {
        let base = match self.provider {
            "anthropic" => self.server.base_url_anthropic(),
            _ => self.server.base_url_openai(),
        };
        let mut cmd = Command::cargo_bin("cairn").unwrap();
        cmd.env_clear()
            .env("CAIRN_HOME", self.home.path())
            .env("CAIRN_LLM_PROVIDER", self.provider)
            .env("CAIRN_LLM_BASE_URL", base)
            .env("CAIRN_LLM_MODEL", "test-model")
            .env("CAIRN_LLM_API_KEY", "sk-test-0123456789")
            .env("CAIRN_LLM_MAX_RETRIES", "0");
        cmd
    }

    fn image(&self, name: &str, bytes: &[u8]) -> String {
        let path = self.home.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        path.display().to_string()
    }

    /// A successful command's JSON output.
    fn json(&self, args: &[&str]) -> Value {
        let out = self
            .cairn()
            .args(args)
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        serde_json::from_slice(&out).unwrap()
    }

    fn last_user_content(&self, n: usize) -> Value {
        let messages = self.server.requests()[n].body["messages"].clone();
        messages
            .as_array()
            .unwrap()
            .iter()
            .rev()
            .find(|m| m["role"] == "user")
            .unwrap()["content"]
            .clone()
    }
}

#[test]
fn chat_image_goes_out_as_an_image_url_data_part() {
    let env = Env::new("openai");
    env.server.push(Scripted::text("A tiny picture."));
    let file = env.image("pixel.gif", GIF);
    env.cairn()
        .args(["chat", "-m", "What is this?", "--image", &file])
        .assert()
        .success()
        .stdout("A tiny picture.\n");
    let content = env.last_user_content(0);
    assert_eq!(content[0]["type"], "text");
    assert_eq!(content[0]["text"], "What is this?");
    assert_eq!(content[1]["type"], "image_url");
    assert_eq!(
        content[1]["image_url"]["url"],
        format!("data:image/gif;base64,{GIF_BASE64}")
    );
    // Stored once, by content, in the workspace's media folder.
    let media: Vec<_> = std::fs::read_dir(env.home.path().join("workspace/media"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(media.len(), 1);
    assert!(
        media[0].ends_with(".gif") && media[0].len() == 64 + 4,
        "{media:?}"
    );

    // The next turn still shows the model the image, read back from the media folder.
    env.server.push(Scripted::text("Still a pixel."));
    env.cairn()
        .args(["chat", "-m", "And now?"])
        .assert()
        .success();
    let history = env.server.requests()[1].body["messages"].to_string();
    assert!(history.contains(GIF_BASE64), "{history}");
}

#[test]
fn chat_image_goes_out_as_an_anthropic_image_block() {
    let env = Env::new("anthropic");
    env.server.push(Scripted::text("A pixel."));
    let file = env.image("pixel.gif", GIF);
    env.cairn()
        .args(["chat", "-m", "Describe it", "--image", &file])
        .assert()
        .success();
    let content = env.last_user_content(0);
    assert_eq!(content[0]["type"], "image");
    assert_eq!(content[0]["source"]["type"], "base64");
    assert_eq!(content[0]["source"]["media_type"], "image/gif");
    assert_eq!(content[0]["source"]["data"], GIF_BASE64);
    assert_eq!(content[1]["text"], "Describe it");
}

#[test]
fn images_are_checked_and_refused_without_vision() {
    let env = Env::new("openai");
    let text = env.image("notes.txt", b"just text");
    env.cairn()
        .args(["chat", "-m", "look", "--image", &text])
        .assert()
        .failure()
        .stderr(contains("not a PNG, JPEG, WebP or GIF image"));
    let file = env.image("pixel.gif", GIF);
    env.cairn()
        .args(["chat", "-m", "look", "--image", &file])
        .env("CAIRN_LLM_VISION", "false")
        .assert()
        .failure()
        .stderr(contains("configured without vision (llm.vision = false)"));
    assert!(
        env.server.requests().is_empty(),
        "nothing reached the model"
    );
}

const ROUTING: &str = r#"
[[routing.rules]]
hint = "reasoning"
keywords = ["prove", "step by step"]
min_length = 30
priority = 10

[routing.models.reasoning]
model = "big-thinker"
"#;

fn model_of(env: &Env, n: usize) -> String {
    env.server.requests()[n].body["model"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn a_keyword_routes_to_the_routed_model_and_other_messages_to_the_default() {
    let env = Env::new("openai");
    env.config(ROUTING);
    env.server.push_all([
        Scripted::text("Because..."),
        Scripted::text("Hi!"),
        Scripted::text("Sure."),
    ]);
    let report = env.json(&[
        "chat",
        "--json",
        "-m",
        "Please prove that the square root of two is irrational",
    ]);
    assert_eq!(model_of(&env, 0), "big-thinker");
    assert_eq!(report["model"], "big-thinker");
    assert_eq!(report["route"], "reasoning");

    env.cairn()
        .args(["chat", "-m", "Hello there, how is the weather today?"])
        .assert()
        .success();
    assert_eq!(model_of(&env, 1), "test-model");

    // Too short for the rule's min_length: the keyword alone does not route.
    env.cairn()
        .args(["chat", "-m", "prove it"])
        .assert()
        .success();
    assert_eq!(model_of(&env, 2), "test-model");

    // /status says which route answered last.
    env.cairn()
        .args(["chat", "-m", "/status"])
        .assert()
        .success()
        .stdout(contains("Last answer: test-model (default route)"));
}

#[test]
fn status_names_the_route_that_answered() {
    let env = Env::new("openai");
    env.config(ROUTING);
    env.server.push(Scripted::text("Step one..."));
    env.cairn()
        .args([
            "chat",
            "-m",
            "Explain step by step how a cairn is built, please",
        ])
        .assert()
        .success();
    env.cairn()
        .args(["chat", "-m", "/status"])
        .assert()
        .success()
        .stdout(contains("Last answer: big-thinker (route `reasoning`)"));
}

/// Two rules, one route to Anthropic; the `code` hint has no route.
const ROUTES_TO_ANTHROPIC: &str = r#"
[[routing.rules]]
hint = "reasoning"
keywords = ["prove"]

[[routing.rules]]
hint = "code"
patterns = ["```"]

[routing.models.reasoning]
provider = "anthropic"
model = "claude-sonnet-4-5"
"#;

/// `cairn doctor --json`'s routing check.
fn routing_check(env: &Env) -> Value {
    let out = env
        .cairn()
        .args(["doctor", "--json"])
        .output()
        .unwrap()
        .stdout;
    let report: Value = serde_json::from_slice(&out).unwrap();
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "routing")
        .unwrap()
        .clone()
}

#[test]
fn doctor_checks_hints_and_route_providers() {
    let env = Env::new("openai");
    env.config(ROUTES_TO_ANTHROPIC);
    env.cairn().args(["doctor", "--json"]).assert().failure();
    let routing = routing_check(&env);
    assert_eq!(routing["status"], "fail");
    let message = routing["message"].as_str().unwrap();
    assert!(
        message.contains("routing.models.reasoning.provider: \"anthropic\" is not configured"),
        "{message}"
    );
    // The same mistake stops chat at start-up, naming it.
    env.cairn()
        .args(["chat", "-m", "hi"])
        .assert()
        .failure()
        .stderr(contains("routing.models.reasoning.provider"));

    // With the provider configured as a fallback, only the unrouted hint is left.
    env.config(&format!(
        "[[llm.fallbacks]]\nprovider = \"anthropic\"\nmodel = \"claude-haiku\"\napi_key = \"sk-ant-test\"\n{ROUTES_TO_ANTHROPIC}"
    ));
    let routing = routing_check(&env);
    assert_eq!(routing["status"], "warn", "{routing}");
    assert!(
        routing["message"]
            .as_str()
            .unwrap()
            .contains("hint \"code\" has no [routing.models.code]"),
        "{routing}"
    );
}

#[test]
fn a_route_to_another_provider_is_answered_and_priced_there() {
    // Main provider: OpenAI-compatible; the route goes to an Anthropic
    // fallback on a second fake server.
    let env = Env::new("openai");
    let other = FakeLlmServer::start_on_thread().unwrap();
    env.config(&format!(
        r#"
[[llm.fallbacks]]
provider = "anthropic"
model = "claude-haiku"
base_url = "{}"
api_key = "sk-ant-test"

[[routing.rules]]
hint = "reasoning"
keywords = ["prove"]

[routing.models.reasoning]
provider = "claude"
model = "claude-sonnet-4-5"
"#,
        other.base_url_anthropic()
    ));
    other.push(Scripted::text("Proof.").with_usage(1_000_000, 0));
    let report = env.json(&["chat", "--json", "-m", "prove the theorem"]);
    assert!(
        env.server.requests().is_empty(),
        "the main provider was not asked"
    );
    let sent = &other.requests()[0];
    assert_eq!(sent.path, "/v1/messages");
    assert_eq!(sent.body["model"], "claude-sonnet-4-5");
    assert_eq!(report["model"], "claude-sonnet-4-5");
    // Priced as claude-sonnet-4-5 ($3 per million input tokens), by the
    // model that answered, and counted by the cost guard.
    assert_eq!(report["usage"]["cost_micros"], 3_000_000);
    let cost = env.json(&["cost", "--json"]);
    assert_eq!(cost["spent_micros"], 3_000_000, "{cost}");
}

/// A Brave-compatible stand-in on 127.0.0.1 (a thread, one answer per
/// connection); returns its base URL and the request heads it saw.
fn brave_stand_in() -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let heads = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = std::sync::Arc::clone(&heads);
    std::thread::spawn(move || {
        for mut socket in listener.incoming().map_while(Result::ok) {
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && socket.read(&mut byte).unwrap_or(0) == 1 {
                head.push(byte[0]);
            }
            seen.lock()
                .unwrap()
                .push(String::from_utf8_lossy(&head).to_string());
            let body = r#"{"web":{"results":[{"title":"Cairn","url":"https://example.org/cairn","description":"A pile of stones."}]}}"#;
            let _ = write!(
                socket,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (base, heads)
}

#[test]
fn web_search_reads_its_key_from_the_environment() {
    let env = Env::new("openai");
    let (base, heads) = brave_stand_in();
    env.config(&format!(
        "[tools.web_search]\nprovider = \"brave\"\napi_key = \"${{SEARCH_TEST_KEY}}\"\nbase_url = \"{base}\"\n"
    ));
    env.server.push_all([
        Scripted::tool_call("web_search", serde_json::json!({"query": "cairn"})),
        Scripted::text("Stones."),
    ]);
    env.cairn()
        .env("SEARCH_TEST_KEY", "BSA-from-env")
        .args(["chat", "-m", "search cairn"])
        .assert()
        .success()
        .stdout("Stones.\n");
    let head = heads.lock().unwrap()[0].to_ascii_lowercase();
    assert!(
        head.contains("x-subscription-token: bsa-from-env"),
        "{head}"
    );
    let tool = env.server.requests()[1].body["messages"].to_string();
    assert!(tool.contains("A pile of stones."), "{tool}");

    // An unset variable makes only the search unavailable: the chat runs,
    // and the search answers with the file, line, key and variable.
    env.server.push_all([
        Scripted::tool_call("web_search", serde_json::json!({"query": "cairn"})),
        Scripted::text("Cannot search."),
    ]);
    env.cairn()
        .args(["chat", "-m", "search again"])
        .assert()
        .success()
        .stdout("Cannot search.\n");
    assert_eq!(
        heads.lock().unwrap().len(),
        1,
        "nothing reached the search service"
    );
    // (The scrubber takes the word after `api_key: ` for a value and hides it.)
    let tool = env.server.requests()[3].body["messages"].to_string();
    assert!(
        tool.contains("config.toml:1: tools.web_search.api_key: ")
            && tool.contains(" variable SEARCH_TEST_KEY is not set"),
        "{tool}"
    );
}

#[test]
fn a_fallback_key_is_read_from_the_environment() {
    let env = Env::new("openai");
    let other = FakeLlmServer::start_on_thread().unwrap();
    env.config(&format!(
        r#"
[[llm.fallbacks]]
provider = "anthropic"
model = "claude-haiku"
base_url = "{}"
api_key = "${{FALLBACK_TEST_KEY}}"

[[routing.rules]]
hint = "reasoning"
keywords = ["prove"]

[routing.models.reasoning]
provider = "anthropic"
model = "claude-sonnet-4-5"
"#,
        other.base_url_anthropic()
    ));
    other.push(Scripted::text("Proof."));
    env.cairn()
        .env("FALLBACK_TEST_KEY", "sk-ant-from-env")
        .args(["chat", "-m", "prove it"])
        .assert()
        .success()
        .stdout("Proof.\n");
    let sent = &other.requests()[0];
    assert_eq!(
        sent.headers.get("x-api-key").map(String::as_str),
        Some("sk-ant-from-env")
    );

    // An unset variable stops start-up, naming it and the key.
    env.cairn()
        .args(["chat", "-m", "prove it again"])
        .assert()
        .failure()
        .stderr(contains(
            "llm.fallbacks[0].api_key: environment variable FALLBACK_TEST_KEY is not set",
        ));
}

#[test]
fn a_route_on_the_main_provider_is_priced_by_its_model() {
    let env = Env::new("openai");
    env.config(
        r#"
[[routing.rules]]
hint = "reasoning"
keywords = ["prove"]

[routing.models.reasoning]
model = "gpt-4.1"
"#,
    );
    env.server.push_all([
        Scripted::text("Proof.").with_usage(1_000_000, 0),
        Scripted::text("Hello.").with_usage(1_000_000, 0),
    ]);
    let cost_of = |message: &str| -> Value {
        let out = env
            .cairn()
            .env("CAIRN_LLM_MODEL", "gpt-4.1-mini")
            .args(["chat", "--json", "-m", message])
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        serde_json::from_slice(&out).unwrap()
    };
    // gpt-4.1: $2 per million input tokens; gpt-4.1-mini: $0.40.
    let routed = cost_of("prove it for me");
    assert_eq!(model_of(&env, 0), "gpt-4.1");
    assert_eq!(routed["usage"]["cost_micros"], 2_000_000, "{routed}");
    let default = cost_of("hello there");
    assert_eq!(model_of(&env, 1), "gpt-4.1-mini");
    assert_eq!(default["usage"]["cost_micros"], 400_000, "{default}");
    let cost = env.json(&["cost", "--json"]);
    assert_eq!(cost["spent_micros"], 2_400_000, "{cost}");
}

#[test]
fn an_image_comes_back_with_a_restored_backup() {
    let env = Env::new("openai");
    env.server.push(Scripted::text("A pixel."));
    let file = env.image("pixel.gif", GIF);
    env.cairn()
        .args(["chat", "-m", "keep this", "--image", &file])
        .assert()
        .success();
    let archive = env.home.path().join("backup.tar.gz");
    env.cairn().arg("backup").arg(&archive).assert().success();

    // The turn names the image by hash; the bytes come back from the
    // archive's workspace, so the restored history still shows it.
    let restored = tempfile::tempdir().unwrap();
    let home = restored.path().join("home");
    env.cairn()
        .env("CAIRN_HOME", &home)
        .arg("restore")
        .arg(&archive)
        .assert()
        .success();
    env.server.push(Scripted::text("Still a pixel."));
    env.cairn()
        .env("CAIRN_HOME", &home)
        .args(["chat", "-m", "what did I send?"])
        .assert()
        .success();
    let history = env.server.requests()[1].body["messages"].to_string();
    assert!(history.contains(GIF_BASE64), "{history}");
}
