//! The browser tools through the daemon, driven by the fake LLM over
//! `/v1`: script-written text and a screenshot reach the model (the text
//! in a tool result, the PNG as an image part), the profile keeps a cookie
//! across a restart, no Chromium process outlives the daemon (SIGTERM and
//! SIGKILL), and without a browser the tools are not offered and `doctor`
//! says how to install one.
//!
//! Skipped, saying why, without chromium, unless `CAIRN_REQUIRE_BROWSER=1`
//! (CI) makes that a failure.
#![expect(
    clippy::unwrap_used,
    clippy::disallowed_methods,
    reason = "test code unwraps freely and may use blocking std::fs"
)]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::Duration;

use cairn_llm::testing::{FakeLlmServer, Scripted};
use common::agents::{cairn, call, daemon};
use serde_json::{Value, json};

/// Debian's chromium (or `CAIRN_TEST_CHROMIUM`), or `None` after recording the skip.
fn chromium(test: &str) -> Option<PathBuf> {
    let path = std::env::var_os("CAIRN_TEST_CHROMIUM")
        .filter(|p| !p.is_empty())
        .map_or_else(|| PathBuf::from("/usr/bin/chromium"), PathBuf::from);
    if path.exists() {
        return Some(path);
    }
    cairn_test_support::missing(
        test,
        "CAIRN_REQUIRE_BROWSER",
        "chromium is needed (Debian: apt-get install -y chromium; or set CAIRN_TEST_CHROMIUM)",
    );
    None
}

/// A small site on 127.0.0.1: `/js` (text its script writes), `/cookie`
/// (sets a lasting cookie) and `/whoami` (shows the cookie it gets).
fn site() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request_line = String::new();
            let _ = reader.read_line(&mut request_line);
            let mut cookie = String::from("no cookie");
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line
                    .strip_prefix("Cookie: ")
                    .or(line.strip_prefix("cookie: "))
                {
                    cookie = v.trim().to_string();
                }
            }
            let path = request_line.split_whitespace().nth(1).unwrap_or("/");
            let (extra, body) = match path {
                "/js" => (
                    "",
                    "<title>Status</title><p id=out>Loading</p><script>window.addEventListener('load', \
                     () => { document.getElementById('out').textContent = 'All systems green 4417'; });</script>"
                        .to_string(),
                ),
                "/cookie" => (
                    "Set-Cookie: seen=yes-2231; Max-Age=86400; Path=/\r\n",
                    "<title>Cookie</title><p>cookie set</p>".to_string(),
                ),
                "/whoami" => ("", format!("<title>Who</title><p>cookie: {cookie}</p>")),
                _ => ("", "<title>Nothing</title>".to_string()),
            };
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\n{extra}content-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    base
}

/// config.toml: the site reachable, chromium as the browser, images for
/// the model, and a second agent.
fn config(home: &Path, chromium: &Path) {
    std::fs::write(
        home.join("config.toml"),
        format!(
            "[llm]\nvision = true\n\n[tools.http]\nallowed_private_networks = [\"127.0.0.1\"]\n\n\
             [tools.browser]\nexecutable = \"{}\"\n\n[[agents]]\nid = \"family\"\n",
            chromium.display()
        ),
    )
    .unwrap();
}

/// One `/v1` turn of main: the model's scripted tool calls, then its answer.
fn turn(llm: &FakeLlmServer, base: &str, token: &str, calls: &[(&str, Value)]) {
    turn_of("cairn", llm, base, token, calls);
}

/// One `/v1` turn of the agent `model` names.
fn turn_of(model: &str, llm: &FakeLlmServer, base: &str, token: &str, calls: &[(&str, Value)]) {
    for (tool, args) in calls {
        llm.push(Scripted::tool_call(*tool, args.clone()));
    }
    llm.push(Scripted::text("done"));
    let body =
        json!({"model": model, "messages": [{"role": "user", "content": "look at the page"}]});
    let (status, answer) = call(base, token, "/v1/chat/completions", Some(body));
    assert_eq!(status, 200, "{answer}");
}

/// The texts of the tool results in the last request.
fn tool_results(llm: &FakeLlmServer) -> Vec<String> {
    let last = llm.requests().last().unwrap().body.clone();
    last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The live processes whose command line names `dir`.
fn processes_using(dir: &Path) -> Vec<String> {
    let needle = dir.display().to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|entry| {
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
            let zombie = stat.split(") ").nth(1).is_some_and(|s| s.starts_with('Z'));
            (text.contains(&needle) && !zombie).then_some(text)
        })
        .collect()
}

/// Waits up to five seconds for no process to name `dir`.
fn all_gone(dir: &Path) -> Vec<String> {
    for _ in 0..50 {
        if processes_using(dir).is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    processes_using(dir)
}

fn signal(child: &std::process::Child, name: &str) {
    let ok = std::process::Command::new("kill")
        .args([format!("-{name}"), child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -{name}");
}

#[test]
fn script_written_text_and_a_screenshot_reach_the_model() {
    let test = "script_written_text_and_a_screenshot_reach_the_model";
    let Some(chromium) = chromium(test) else {
        return;
    };
    let temp = tempfile::tempdir().unwrap();
    let home = temp.path();
    config(home, &chromium);
    let site = site();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    let (mut daemon, base, token) = daemon(home, &llm);
    let url = format!("{site}/js");
    turn(
        &llm,
        &base,
        &token,
        &[
            ("web_fetch", json!({"url": url})),
            ("browser_open", json!({"url": url})),
            ("browser_screenshot", json!({})),
        ],
    );
    let requests: Vec<Value> = llm.requests().into_iter().map(|r| r.body).collect();
    assert_eq!(requests.len(), 4, "three tool calls, then the answer");
    assert!(
        requests[0].to_string().contains("browser_"),
        "the first request names the browser tools"
    );
    let results = tool_results(&llm);
    assert_eq!(results.len(), 3, "{results:?}");
    assert!(
        results[0].contains("Loading") && !results[0].contains("All systems green"),
        "web_fetch: {}",
        results[0]
    );
    assert!(
        results[1].contains("All systems green 4417"),
        "browser_open: {}",
        results[1]
    );
    assert!(
        results[2].contains("saved as media/"),
        "browser_screenshot: {}",
        results[2]
    );
    // The PNG follows the tool results as an image part of a user message.
    let last = &requests[3]["messages"];
    let image = last
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .find(|part| part["type"] == "image_url")
        .unwrap_or_else(|| panic!("no image part in {last}"));
    let data = image["image_url"]["url"].as_str().unwrap();
    assert!(
        data.starts_with("data:image/png;base64,iVBORw0KGgo"),
        "{}",
        &data[..40]
    );
    let media: Vec<_> = std::fs::read_dir(home.join("workspace/media"))
        .unwrap()
        .collect();
    assert_eq!(media.len(), 1, "the screenshot is kept in the workspace");

    // Another agent has a browser of its own, with its own profile.
    turn_of(
        "cairn:family",
        &llm,
        &base,
        &token,
        &[("browser_open", json!({"url": url}))],
    );
    assert!(tool_results(&llm)[0].contains("All systems green 4417"));
    assert!(!processes_using(&home.join("browser/family/profile")).is_empty());
    assert!(!processes_using(&home.join("browser/main/profile")).is_empty());

    let status = cairn(home, &llm)
        .args(["--json", "status"])
        .output()
        .unwrap();
    let status: Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(
        status["daemon"]["components"]["browser"]["state"], "running",
        "{status}"
    );
    signal(&daemon.0, "TERM");
    assert!(daemon.0.wait().unwrap().success());
    assert_eq!(all_gone(&home.join("browser")), Vec::<String>::new());
}

#[test]
fn the_profile_keeps_a_cookie_across_a_restart_and_no_chromium_outlives_the_daemon() {
    let test = "the_profile_keeps_a_cookie_across_a_restart_and_no_chromium_outlives_the_daemon";
    let Some(chromium) = chromium(test) else {
        return;
    };
    let temp = tempfile::tempdir().unwrap();
    let home = temp.path();
    config(home, &chromium);
    let site = site();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    let profile = home.join("browser/main/profile");

    let (mut first, base, token) = daemon(home, &llm);
    turn(
        &llm,
        &base,
        &token,
        &[("browser_open", json!({"url": format!("{site}/cookie")}))],
    );
    assert!(
        tool_results(&llm)[0].contains("cookie set"),
        "{:?}",
        tool_results(&llm)
    );
    assert!(!processes_using(&profile).is_empty(), "the browser runs");
    signal(&first.0, "TERM");
    assert!(first.0.wait().unwrap().success());
    assert_eq!(
        all_gone(&home.join("browser")),
        Vec::<String>::new(),
        "after SIGTERM"
    );

    // The token made for the first daemon is in the database still.
    let (mut second, base, _) = daemon(home, &llm);
    turn(
        &llm,
        &base,
        &token,
        &[("browser_open", json!({"url": format!("{site}/whoami")}))],
    );
    let results = tool_results(&llm);
    assert!(results[0].contains("cookie: seen=yes-2231"), "{results:?}");
    assert!(!processes_using(&profile).is_empty(), "the browser runs");
    signal(&second.0, "KILL");
    let _ = second.0.wait();
    assert_eq!(
        all_gone(&home.join("browser")),
        Vec::<String>::new(),
        "after SIGKILL"
    );
}

#[test]
fn without_a_browser_the_tools_are_not_offered_and_doctor_says_how_to_get_one() {
    let temp = tempfile::tempdir().unwrap();
    let home = temp.path();
    let empty = tempfile::tempdir().unwrap();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    let out = cairn(home, &llm)
        .env("PATH", empty.path())
        .arg("doctor")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.contains("browser"))
        .unwrap_or_default();
    assert!(line.starts_with("warn"), "{stdout}");
    assert!(
        stdout.contains("the browser_* tools are not offered"),
        "{stdout}"
    );
    assert!(stdout.contains("apt-get install chromium"), "{stdout}");

    let (_daemon, base, token) = {
        // The daemon finds no browser on its PATH.
        let mut cmd = cairn(home, &llm);
        cmd.env("PATH", empty.path());
        common::agents::daemon_with(cmd, home, &llm)
    };
    turn(&llm, &base, &token, &[]);
    let first = llm.requests()[0].body.to_string();
    assert!(!first.contains("browser_"), "{first}");
    let status = cairn(home, &llm)
        .args(["--json", "status"])
        .output()
        .unwrap();
    let status: Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(
        status["daemon"]["components"]["browser"]["state"], "disabled",
        "{status}"
    );
}
