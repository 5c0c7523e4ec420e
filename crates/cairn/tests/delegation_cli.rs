//! `agent_delegate` through the daemon: an agent that may not use `shell`
//! hands two tasks to sub-agents in one step; they run side by side, each
//! with only its task and never with `shell`; the agent's next request
//! carries both answers; each sub-agent is a job `cairn job` lists; their
//! model calls went through the cost guard like the agent's own.
#![expect(
    clippy::unwrap_used,
    clippy::disallowed_methods,
    reason = "test code unwraps freely and may use blocking std::fs"
)]

use std::process::Command;

use cairn_llm::testing::{FakeLlmServer, Scripted};
use serde_json::{Value, json};

mod common;
use common::agents::*;

fn ask(base: &str, token: &str, model: &str, text: &str) -> (u16, Value) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let body = json!({"model": model, "messages": [{"role": "user", "content": text}]});
        let response = cairn_llm::tls::client()
            .unwrap()
            .post(format!("{base}/v1/chat/completions"))
            .json(&body)
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or_default())
    })
}

fn json_out(cmd: &mut Command) -> Value {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn messages(body: &Value) -> Vec<(String, String)> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let content = m["content"].as_str().unwrap_or_default().to_string();
            (m["role"].as_str().unwrap().to_string(), content)
        })
        .collect()
}

#[test]
fn an_agent_s_two_sub_agents_run_side_by_side_with_no_more_than_its_tools() {
    let temp = tempfile::tempdir().unwrap();
    let home = temp.path();
    std::fs::write(
        home.join("config.toml"),
        "[[agents]]\nid = \"family\"\nname = \"Pip\"\ntools = { deny = [\"shell\"] }\n",
    )
    .unwrap();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    let (_daemon, base, token) = daemon(home, &llm);

    llm.push_all([
        Scripted::tool_calls([
            (
                "agent_delegate",
                json!({"task": "Check the disk with the shell.", "tools": ["shell", "time_now"]}),
            ),
            ("agent_delegate", json!({"task": "Say what day it is."})),
        ]),
        Scripted::text("first child").held_until(2),
        Scripted::text("second child").held_until(2),
        Scripted::text("Both sub-agents answered."),
    ]);
    let (status, answer) = ask(&base, &token, "cairn:family", "Split this in two.");
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["choices"][0]["message"]["content"],
        "Both sub-agents answered."
    );
    let requests: Vec<Value> = llm.requests().into_iter().map(|r| r.body).collect();
    assert_eq!(requests.len(), 4, "{requests:#?}");
    assert_eq!(llm.most_in_flight(), 2, "the sub-agents ran side by side");
    assert!(!tools(&requests[0]).contains(&"shell".to_string()));

    // Each sub-agent: a system message and its task, never the parent's words or shell.
    let mut tasks = Vec::new();
    for child in &requests[1..3] {
        let seen = messages(child);
        assert_eq!(seen.len(), 2, "{seen:?}");
        assert!(
            seen.iter()
                .all(|(_, text)| !text.contains("Split this in two")),
            "{seen:?}"
        );
        let offered = tools(child);
        assert!(!offered.contains(&"shell".to_string()), "{offered:?}");
        if seen[1].1.contains("disk") {
            assert_eq!(offered, ["time_now"], "asked for shell and time_now");
        } else {
            // Every tool family may use: most load on demand, named in the prompt.
            assert!(offered.contains(&"tool_schema".to_string()), "{offered:?}");
            let prompt = &seen[0].1;
            assert!(prompt.contains("agent_delegate"), "{prompt}");
            assert!(!prompt.contains("shell"), "{prompt}");
        }
        tasks.push(seen[1].1.clone());
    }
    tasks.sort();
    assert_eq!(
        tasks,
        ["Check the disk with the shell.", "Say what day it is."]
    );

    // The parent's next request carries both answers.
    let results: Vec<String> = messages(&requests[3])
        .into_iter()
        .filter(|(role, _)| role == "tool")
        .map(|(_, text)| text)
        .collect();
    let all = results.join("\n");
    assert_eq!(results.len(), 2, "{all}");
    assert!(
        all.contains("first child") && all.contains("second child"),
        "{all}"
    );
    assert!(
        all.contains("Not given to the sub-agent") && all.contains("shell"),
        "{all}"
    );

    // Each sub-agent is a job of its own.
    let jobs = json_out(cairn(home, &llm).args(["job", "list", "--json"]));
    let jobs = jobs.as_array().unwrap();
    assert_eq!(jobs.len(), 2, "{jobs:?}");
    for job in jobs {
        assert_eq!(job["state"], "completed", "{job}");
        assert!(
            job["origin"].as_str().unwrap().starts_with("delegate:"),
            "{job}"
        );
        assert!(all.contains(job["id"].as_str().unwrap()), "{all}");
    }
    // Every model call, the sub-agents' too, went through the cost guard.
    let cost = json_out(cairn(home, &llm).args(["cost", "--json"]));
    assert_eq!(cost["hourly_calls"], 4, "{cost}");
}
