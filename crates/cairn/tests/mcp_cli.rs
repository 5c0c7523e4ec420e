//! Black-box tests of MCP in the binary: `cairn mcp list|tools|test`,
//! `doctor`, a chat calling an MCP server's tool, the first request's size
//! with hundreds of MCP tools, and `cairn mcp serve` driven by the official
//! Python `mcp` client. The servers are the Python SDK test server of
//! cairn-mcp (test venv: `CAIRN_TEST_PYTHON`).
#![expect(clippy::unwrap_used, reason = "test helpers unwrap freely")]
#![expect(
    clippy::disallowed_methods,
    reason = "test fixtures may use blocking std::fs"
)]

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use cairn_llm::testing::{FakeLlmServer, Scripted};
use cairn_test_support::python::python;
use serde_json::json;

fn py_server() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../cairn-mcp/tests/servers/py_server.py")
}

/// A `[[mcp.servers]]` entry for the Python test server, plus `extra` lines.
fn py_entry(name: &str, python: &Path, extra: &str) -> String {
    format!(
        "[[mcp.servers]]\nname = \"{name}\"\ncommand = \"{}\"\nargs = [\"{}\", \"stdio\"]\n{extra}\n",
        python.display(),
        py_server().display()
    )
}

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

    fn cairn(&self) -> Command {
        let mut cmd = Command::cargo_bin("cairn").unwrap();
        cmd.env_clear()
            .env("CAIRN_HOME", self.home.path())
            .env("PATH", std::env::var("PATH").unwrap_or_default());
        cmd
    }

    fn chat(&self) -> Command {
        let mut cmd = self.cairn();
        cmd.env("CAIRN_LLM_PROVIDER", "openai")
            .env("CAIRN_LLM_BASE_URL", self.llm.base_url_openai())
            .env("CAIRN_LLM_MODEL", "test-model")
            .env("CAIRN_LLM_API_KEY", "sk-test-0123456789")
            .env("CAIRN_LLM_MAX_RETRIES", "0");
        cmd
    }

    fn json(&self, args: &[&str]) -> serde_json::Value {
        let out = self.cairn().args(args).arg("--json").assert().success();
        serde_json::from_slice(&out.get_output().stdout).unwrap()
    }
}

#[test]
fn list_tools_and_test_report_each_server() {
    let Some(python) = python("list_tools_and_test_report_each_server") else {
        return;
    };
    let config = format!(
        "{}{}",
        py_entry("py", &python, "allow = [\"echo\"]\ndeny = [\"wipe\"]"),
        "[[mcp.servers]]\nname = \"broken\"\ncommand = \"/nonexistent/program\"\n"
    );
    let env = Env::new(&config);
    let list = env.json(&["mcp", "list"]);
    assert_eq!(list[0]["name"], "py");
    assert_eq!(list[0]["state"], "ready", "{list}");
    assert_eq!(list[0]["tools"], 11, "wipe is denied: {list}");
    assert_eq!(list[1]["state"], "failed", "{list}");
    assert!(
        list[1]["last_error"]
            .as_str()
            .unwrap()
            .contains("/nonexistent/program"),
        "{list}"
    );

    let out = env.cairn().args(["mcp", "list"]).assert().success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    let row = text.lines().find(|l| l.starts_with("py ")).unwrap_or("");
    assert!(
        row.contains("ready") && row.contains(" 11 ") && row.contains("stdio: "),
        "{text}"
    );
    assert!(text.contains("last error:"), "{text}");

    let tools = env.json(&["mcp", "tools", "py"]);
    let row = |name: &str| -> serde_json::Value {
        tools["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} in {tools}"))
    };
    assert_eq!(row("mcp__py__echo")["policy"], "allow");
    // A read-only hint never lowers the default risk: still asked.
    assert_eq!(row("mcp__py__add")["policy"], "ask");
    assert_eq!(row("mcp__py__add")["risk"], "write");
    assert!(
        tools["tools"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["name"] != "mcp__py__wipe")
    );
    assert_eq!(tools["resources"][0]["uri"], "memo://greeting", "{tools}");
    assert_eq!(tools["prompts"][0]["name"], "summarize", "{tools}");

    let test = env.json(&["mcp", "test", "py"]);
    assert_eq!(test["tools"], 11);
    assert!(test["connect_ms"].as_u64().is_some(), "{test}");
    let out = env.cairn().args(["mcp", "test", "broken"]).assert().code(1);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(stderr.contains("\"broken\""), "{stderr}");
    env.cairn()
        .args(["mcp", "test", "nope"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("configured: py, broken"));

    let out = env.cairn().args(["doctor", "--json"]).assert();
    let doctor: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let mcp = doctor["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "mcp")
        .unwrap();
    assert_eq!(mcp["status"], "warn", "{mcp}");
    let message = mcp["message"].as_str().unwrap();
    assert!(message.contains("py: ready, 11 tools"), "{message}");
    assert!(message.contains("broken: not answering"), "{message}");
}

#[test]
fn a_bad_server_entry_is_named_with_file_and_line() {
    let env =
        Env::new("[tools]\n\n[[mcp.servers]]\nname = \"x\"\ncommand = \"y\"\ncolour = \"red\"\n");
    let out = env.cairn().args(["mcp", "list"]).assert().code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(
        stderr.contains("config.toml:3: mcp.servers[0]: unknown field `colour`"),
        "{stderr}"
    );
}

/// A server the owner wants confined is never started unconfined by surprise.
#[test]
fn a_sandboxed_server_is_not_started_where_it_cannot_be_confined() {
    let env = Env::new(
        "[tools.shell]\nlandlock = false\n\n\
         [[mcp.servers]]\nname = \"boxed\"\ncommand = \"cat\"\nsandbox = true\n",
    );
    let out = env.cairn().args(["mcp", "test", "boxed"]).assert().code(1);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(
        stderr.contains("`sandbox = true` but processes cannot be confined here")
            && stderr.contains("tools.shell.allow_unconfined"),
        "{stderr}"
    );
}

#[test]
fn a_chat_calls_an_mcp_tool_and_the_model_sees_the_result() {
    let Some(python) = python("a_chat_calls_an_mcp_tool_and_the_model_sees_the_result") else {
        return;
    };
    let env = Env::new(&py_entry("py", &python, "allow = [\"echo\"]"));
    env.llm.push_all([
        Scripted::tool_call("mcp__py__echo", json!({"text": "from the chat"})),
        Scripted::text("The server echoed."),
    ]);
    env.chat()
        .args(["chat", "-m", "echo please"])
        .assert()
        .success()
        .stdout("The server echoed.\n");
    let requests = env.llm.requests();
    let first = requests[0].body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        first.contains("mcp__py__{"),
        "the prompt names the server's tools: {first}"
    );
    let second = requests[1].body.to_string();
    assert!(second.contains("echo: from the chat"), "{second}");
}

/// GUIDE's 6 KB bar for the first request holds however many MCP tools
/// there are; their names are then asked for with `tool_schema`.
#[test]
fn the_first_request_stays_within_6_kb_with_300_mcp_tools() {
    let Some(python) = python("the_first_request_stays_within_6_kb_with_300_mcp_tools") else {
        return;
    };
    let env = Env::new(&py_entry(
        "many",
        &python,
        "start = \"startup\"\nenv = { CAIRN_TEST_MCP_TOOLS = \"300\" }",
    ));
    env.llm.push_all([
        Scripted::tool_call("tool_schema", json!({"names": ["mcp__many__tool_1*"]})),
        Scripted::tool_call("tool_schema", json!({"names": ["mcp__many__tool_123"]})),
        Scripted::tool_call("mcp__many__tool_123", json!({"x": "hi"})),
        Scripted::text("Hello."),
    ]);
    env.chat()
        .args(["chat", "-m", "hi", "--yes"])
        .assert()
        .success();
    let requests = env.llm.requests();
    let body = serde_json::to_string(&requests[0].body).unwrap();
    eprintln!("first request with 312 MCP tools: {} bytes", body.len());
    assert!(body.len() <= 6 * 1024, "{} bytes: {body}", body.len());
    let system = requests[0].body["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.contains("- mcp__many__*: 312 tools of MCP server \"many\""),
        "{system}"
    );
    let listed = requests[1].body.to_string();
    assert!(
        listed.contains("mcp__many__tool_123"),
        "the pattern lists names: {listed}"
    );
    let offered: Vec<String> = requests[3].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect();
    assert!(
        offered.contains(&"mcp__many__tool_123".to_string()),
        "{offered:?}"
    );
    assert!(requests[3].body.to_string().contains("tool 123: hi"));
}

const PY_CLIENT: &str = r#"
import asyncio, json, sys
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

async def main():
    params = StdioServerParameters(command=sys.argv[1], args=["mcp", "serve"], env={"CAIRN_HOME": sys.argv[2]})
    out = {}
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = await session.list_tools()
            out["tools"] = sorted(t.name for t in tools.tools)
            def text(result):
                return {"error": bool(result.is_error), "text": "".join(c.text for c in result.content if c.type == "text")}
            out["fire"] = text(await session.call_tool("routine_fire", {"name": "ping"}))
            out["runs"] = text(await session.call_tool("routine_runs", {"name": "ping"}))
            out["show"] = text(await session.call_tool("routine_show", {"name": "ping"}))
            out["hook"] = text(await session.call_tool("routine_show", {"name": "hook"}))
            out["send"] = text(await session.call_tool("send_notification", {"channel": "inbox", "message": "hello over MCP"}))
            out["inbox"] = text(await session.call_tool("inbox_list", {"all": True}))
            out["recall"] = text(await session.call_tool("memory_recall", {"query": "cat"}))
            out["store"] = text(await session.call_tool("memory_store", {"content": "dogs bark", "category": "core"}))
            out["shell"] = text(await session.call_tool("shell", {"command": "ls"}))
    print(json.dumps(out))

asyncio.run(main())
"#;

#[test]
fn cairn_mcp_serve_answers_the_official_python_client() {
    let Some(python) = python("cairn_mcp_serve_answers_the_official_python_client") else {
        return;
    };
    let env = Env::new("[tools.policy]\nallow = [\"routine_fire\"]\n");
    let file = env.home.path().join("ping.yaml");
    std::fs::write(
        &file,
        "name: ping\ntrigger: {type: manual}\naction: {type: notification, message: pong from the routine}\n",
    )
    .unwrap();
    let hook = env.home.path().join("hook.yaml");
    std::fs::write(
        &hook,
        "name: hook\ntrigger: {type: webhook, path: hook, secret: hook-S3CR}\naction: {type: notification, message: hooked}\n",
    )
    .unwrap();
    for file in [&file, &hook] {
        env.cairn()
            .args(["routine", "apply", "-f"])
            .arg(file)
            .assert()
            .success();
    }
    env.cairn()
        .args(["memory", "add", "the cat is called Tom"])
        .assert()
        .success();
    let bin = assert_cmd::cargo::cargo_bin("cairn");
    let out = std::process::Command::new(&python)
        .args(["-c", PY_CLIENT])
        .arg(&bin)
        .arg(env.home.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let tools: Vec<&str> = got["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(
        tools,
        [
            "inbox_list",
            "memory_recall",
            "memory_store",
            "routine_fire",
            "routine_list",
            "routine_runs",
            "routine_show",
            "send_notification"
        ]
    );
    assert_eq!(got["fire"]["error"], false, "{got}");
    assert_eq!(got["runs"]["error"], false, "{got}");
    assert!(
        got["runs"]["text"].as_str().unwrap().contains("manual"),
        "{got}"
    );
    assert!(
        got["show"]["text"]
            .as_str()
            .unwrap()
            .contains("pong from the routine"),
        "{got}"
    );
    assert!(
        got["recall"]["text"].as_str().unwrap().contains("Tom"),
        "{got}"
    );
    // memory_store writes: it would ask, and nobody can approve over stdio.
    assert_eq!(got["store"]["error"], true, "{got}");
    assert!(
        got["store"]["text"]
            .as_str()
            .unwrap()
            .contains("nobody can approve over MCP"),
        "{got}"
    );
    assert_eq!(got["shell"]["error"], true, "{got}");
    assert!(
        got["shell"]["text"]
            .as_str()
            .unwrap()
            .contains("unknown tool"),
        "{got}"
    );
    // A webhook's literal secret is never shown, as in `cairn routine show`.
    let hook = got["hook"]["text"].as_str().unwrap();
    assert!(!hook.contains("S3CR") && hook.contains("hooked"), "{hook}");
    // A notification is delivered before the answer, which says so.
    assert_eq!(got["send"]["error"], false, "{got}");
    assert!(
        got["send"]["text"]
            .as_str()
            .unwrap()
            .contains("kept in the inbox"),
        "{got}"
    );
    assert!(
        got["inbox"]["text"]
            .as_str()
            .unwrap()
            .contains("hello over MCP"),
        "{got}"
    );
    // The fired run is recorded like any other, and what it recorded for
    // delivery was delivered before `serve` exited.
    let runs = env.json(&["routine", "runs", "ping"]);
    assert_eq!(runs.as_array().unwrap().len(), 1, "{runs}");
    assert_eq!(runs[0]["status"], "ok", "{runs}");
    let inbox = env.json(&["notify", "list"]);
    assert!(
        inbox.to_string().contains("pong from the routine"),
        "{inbox}"
    );
    assert!(
        !inbox.to_string().contains("\"pending\""),
        "nothing left pending: {inbox}"
    );
}
