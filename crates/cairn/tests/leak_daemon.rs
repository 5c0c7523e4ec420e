//! Leak detection in a running daemon (issue 47), black-box: a secret
//! stored or changed with `cairn secret set` while the daemon runs is
//! watched, and used, without a reload; a streamed reply never shows any
//! part of a secret; and a leak names its agent and its routine run.
#![expect(
    clippy::unwrap_used,
    clippy::disallowed_methods,
    reason = "test code unwraps freely and may use blocking std::fs"
)]

mod common;

use std::io::Write;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use cairn_llm::testing::{FakeLlmServer, Scripted};
use common::Receiver;
use common::agents::{ask, cairn, daemon};
use serde_json::{Value, json};

/// `printf VALUE | cairn secret set NAME`.
fn set_secret(home: &Path, llm: &FakeLlmServer, name: &str, value: &str) {
    let mut child = cairn(home, llm)
        .args(["secret", "set", name])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(value.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `cairn secret leaks --json`.
fn leaks(home: &Path, llm: &FakeLlmServer) -> Vec<Value> {
    let out = cairn(home, llm)
        .args(["secret", "leaks", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The answer `cairn` gives when the model says `text`.
fn answer(base: &str, token: &str, llm: &FakeLlmServer, text: &str) -> String {
    llm.push(Scripted::text(text));
    let (status, body) = ask(base, token, "cairn");
    assert_eq!(status, 200, "{body}");
    body["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .to_string()
}

fn host_of(url: &str) -> &str {
    url.trim_start_matches("http://").split('/').next().unwrap()
}

#[test]
fn a_secret_set_while_the_daemon_runs_is_watched_and_used_at_once() {
    const NEW: &str = "fresh-secret-5521";
    let temp = tempfile::tempdir().unwrap();
    let home = temp.path();
    let bound = Receiver::start(Vec::new());
    std::fs::write(
        home.join("config.toml"),
        format!(
            "[tools.policy]\nautonomy = \"full\"\n\n\
             [tools.http]\nallowed_private_networks = [\"127.0.0.1\"]\n\n\
             [[tools.http.credentials]]\nhost = \"{}\"\nheader = \"Authorization\"\n\
             value = \"Bearer ${{secret:TOKEN}}\"\n",
            host_of(&bound.url)
        ),
    )
    .unwrap();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    set_secret(home, &llm, "TOKEN", "old-token-1234");
    let (_daemon, base, token) = daemon(home, &llm);

    // Not in the vault yet: nothing to watch for.
    let said = answer(&base, &token, &llm, &format!("it is {NEW}"));
    assert_eq!(said, format!("it is {NEW}"));

    set_secret(home, &llm, "TOKEN", "new-token-5678");
    set_secret(home, &llm, "NEW", NEW);
    // Bounded: the daemon hears the store's change signal, no timer.
    let deadline = Instant::now() + Duration::from_secs(30);
    let said = loop {
        let said = answer(&base, &token, &llm, &format!("it is {NEW}"));
        if !said.contains(NEW) || Instant::now() > deadline {
            break said;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        said.contains("withheld") && said.contains("NEW") && !said.contains(NEW),
        "{said}"
    );

    // The changed credential is the one sent, from the same moment.
    llm.push(Scripted::tool_call(
        "http_request",
        json!({"url": bound.url}),
    ));
    llm.push(Scripted::text("done"));
    let (status, body) = ask(&base, &token, "cairn");
    assert_eq!(status, 200, "{body}");
    let seen = bound.requests.lock().unwrap().clone();
    let sent: Vec<&str> = seen
        .iter()
        .filter_map(|(headers, _)| {
            headers
                .iter()
                .find(|(k, _)| k == "authorization")
                .map(|(_, v)| v.as_str())
        })
        .collect();
    assert_eq!(sent, ["Bearer new-token-5678"]);

    // Recorded by name, as the main agent's.
    let found = leaks(home, &llm);
    let reply = found
        .iter()
        .find(|l| l["secret"] == "NEW" && l["place"] == "channel")
        .unwrap_or_else(|| panic!("{found:?}"));
    assert_eq!(reply["agent"], "main", "{reply}");
    assert!(!reply.to_string().contains(NEW), "{reply}");
}

#[test]
fn a_streamed_reply_never_shows_a_part_of_a_secret() {
    // Its space splits it across two of the fake model's deltas.
    const VALUE: &str = "s3cr3t 7781-zq";
    let temp = tempfile::tempdir().unwrap();
    let home = temp.path();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    set_secret(home, &llm, "GH", VALUE);
    let (_daemon, base, token) = daemon(home, &llm);

    let intro = "Here is a long enough introduction so that some of it is shown first: ";
    llm.push(Scripted::text(format!("{intro}{VALUE} and more after it.")));
    let body = json!({"model": "cairn", "stream": true,
        "messages": [{"role": "user", "content": "the key?"}]});
    let rt = tokio::runtime::Runtime::new().unwrap();
    let received = rt.block_on(async {
        let response = cairn_llm::tls::client()
            .unwrap()
            .post(format!("{base}/v1/chat/completions"))
            .bearer_auth(&token)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        response.text().await.unwrap()
    });
    // What the client read: the content of every chunk.
    let shown: String = received
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_string)
        })
        .collect();
    assert!(!received.contains("s3cr3t"), "{received}");
    assert!(shown.starts_with("Here is a long"), "{shown}");
    assert!(
        shown.contains("withheld") && shown.contains("GH"),
        "{shown}"
    );
    let found = leaks(home, &llm);
    assert!(
        found
            .iter()
            .any(|l| l["secret"] == "GH" && l["place"] == "channel"),
        "{found:?}"
    );
}

#[test]
fn a_leak_in_a_routine_run_names_the_run() {
    const VALUE: &str = "routine-secret-9034";
    let temp = tempfile::tempdir().unwrap();
    let home = temp.path();
    std::fs::write(
        home.join("config.toml"),
        "[tools.http]\nallowed_private_networks = [\"127.0.0.1\"]\n",
    )
    .unwrap();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    set_secret(home, &llm, "RS", VALUE);
    let other = Receiver::start(Vec::new());
    let file = home.join("leaky.yaml");
    std::fs::write(
        &file,
        format!(
            "name: leaky\ntrigger: {{type: manual}}\naction:\n  type: tool_call\n  tool: http_request\n  \
             params: {{url: \"{}?k={VALUE}\"}}\n  allowed_tools: [http_request]\n",
            other.url
        ),
    )
    .unwrap();
    let run = |args: &[&str]| {
        let out = cairn(home, &llm).args(args).output().unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    run(&["routine", "apply", "-f", file.to_str().unwrap()]);
    // The run fails: its call was refused.
    let fired = cairn(home, &llm)
        .args(["routine", "fire", "leaky"])
        .output()
        .unwrap();
    assert!(!fired.status.success());
    let runs: Value =
        serde_json::from_slice(&run(&["--json", "routine", "runs", "leaky"])).unwrap();
    let run_id = runs[0]["id"].as_str().unwrap().to_string();
    assert!(other.requests.lock().unwrap().is_empty(), "it was sent");
    let found = leaks(home, &llm);
    let leak = found
        .iter()
        .find(|l| l["secret"] == "RS" && l["place"] == "tool")
        .unwrap_or_else(|| panic!("{found:?}"));
    assert_eq!(leak["run_id"], run_id.as_str(), "{leak}");
    assert_eq!(leak["agent"], "main", "{leak}");
}

#[test]
fn the_daemon_takes_its_llm_key_from_the_vault_with_no_variable_set() {
    const KEY: &str = "sk-vault-held-7741";
    let temp = tempfile::tempdir().unwrap();
    let home = temp.path();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    std::fs::write(
        home.join("config.toml"),
        format!(
            "[llm]\nprovider = \"openai\"\nbase_url = \"{}\"\nmodel = \"test-model\"\n\
             api_key = \"${{secret:LLM}}\"\nmax_retries = 0\n",
            llm.base_url_openai()
        ),
    )
    .unwrap();
    set_secret(home, &llm, "LLM", KEY);
    let mut cmd = cairn(home, &llm);
    cmd.env_remove("CAIRN_LLM_API_KEY");
    let (_daemon, base, token) = common::agents::daemon_with(cmd, home, &llm);

    let said = answer(&base, &token, &llm, "served");
    assert_eq!(said, "served");
    let request = llm.last_request().unwrap();
    assert_eq!(
        request.header("authorization").unwrap_or_default(),
        format!("Bearer {KEY}")
    );
}
