//! Each agent's cost line end to end: a daemon with `main` and `family`
//! (each its model, priced differently), called through `/v1`; `cairn cost`
//! and the costs page show both lines, and `family` over its share is
//! refused while `main` still answers.
#![expect(
    clippy::unwrap_used,
    clippy::disallowed_methods,
    reason = "test code unwraps freely and may use blocking std::fs"
)]

use cairn_llm::testing::{FakeLlmServer, Scripted};
use serde_json::{Value, json};

mod common;
use common::agents::*;

fn ask(base: &str, token: &str, model: &str) -> (u16, Value) {
    let body = json!({"model": model, "messages": [{"role": "user", "content": "hello"}]});
    call(base, token, "/v1/chat/completions", Some(body))
}

/// `main` asks test-model at $1 per million input tokens, `family` asks
/// family-model at $10, with a share of 5 cents of the $1.00 budget.
const CONFIG: &str = r#"[cost]
daily_budget_cents = 100

[llm.prices."test-model"]
input_micros_per_mtok = 1000000
output_micros_per_mtok = 0

[llm.prices."family-model"]
input_micros_per_mtok = 10000000
output_micros_per_mtok = 0

[[agents]]
id = "family"
model = "family-model"
daily_budget_cents = 5
"#;

fn line<'a>(status: &'a Value, agent: &str) -> &'a Value {
    status["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == agent)
        .unwrap_or_else(|| panic!("no line for {agent}: {status}"))
}

#[test]
fn each_agent_spends_on_its_own_line_and_one_over_its_share_is_refused() {
    let temp = tempfile::tempdir().unwrap();
    let home = temp.path();
    std::fs::write(home.join("config.toml"), CONFIG).unwrap();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    let (_daemon, base, token) = daemon(home, &llm);

    // family: 3,000 tokens at $10/M = $0.03, twice: $0.06, over its $0.05.
    // main: 100,000 tokens at $1/M = $0.10.
    llm.push(Scripted::text("family one").with_usage(3_000, 0));
    let (status, answer) = ask(&base, &token, "cairn:family");
    assert_eq!(status, 200, "{answer}");
    llm.push(Scripted::text("main one").with_usage(100_000, 0));
    let (status, answer) = ask(&base, &token, "cairn");
    assert_eq!(status, 200, "{answer}");
    llm.push(Scripted::text("family two").with_usage(3_000, 0));
    let (status, answer) = ask(&base, &token, "cairn:family");
    assert_eq!(status, 200, "{answer}");

    llm.push(Scripted::text("never sent to family"));
    let (status, refused) = ask(&base, &token, "cairn:family");
    assert_eq!(status, 429, "{refused}");
    assert_eq!(refused["error"]["code"], "insufficient_quota", "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(
            "agent family's daily LLM budget share of $0.05 reached ($0.06 spent today, UTC)"
        ),
        "{refused}"
    );
    // Main still answers: the global budget ($0.16 of $1.00) has room.
    let (status, answer) = ask(&base, &token, "cairn");
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["choices"][0]["message"]["content"],
        "never sent to family"
    );

    let models: Vec<Value> = llm
        .requests()
        .into_iter()
        .map(|r| r.body["model"].clone())
        .collect();
    assert_eq!(
        models,
        ["family-model", "test-model", "family-model", "test-model"],
        "the refused call reached no model"
    );

    // `cairn cost --json`, another process on the same database.
    let out = cairn(home, &llm).args(["cost", "--json"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    // main's second call: "hello" and the system prompt, counted by the
    // fake server's default usage (10 tokens in) at $1/M.
    let main = line(&status, "main");
    assert_eq!(main["spent_micros"], 100_010, "{status}");
    assert_eq!(main["calls"], 2, "{status}");
    assert_eq!(main["daily_budget_cents"], Value::Null, "{status}");
    let family = line(&status, "family");
    assert_eq!(family["spent_micros"], 60_000, "{status}");
    assert_eq!(family["calls"], 2, "{status}");
    assert_eq!(family["daily_budget_cents"], 5, "{status}");
    assert_eq!(family["exceeded"], true, "{status}");
    assert_eq!(status["spent_micros"], 160_010, "the total is both lines");

    let out = cairn(home, &llm).arg("cost").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("\n  main    $0.10001  2 calls\n"), "{text}");
    assert!(
        text.contains(
            "\n  family  $0.06  2 calls  share reached: its calls are refused until 00:00 UTC\n"
        ),
        "{text}"
    );

    // The costs page's data.
    let (code, costs) = call(&base, &token, "/ui/api/costs", None);
    assert_eq!(code, 200, "{costs}");
    let family = line(&costs["limits"], "family");
    assert_eq!(
        (&family["spent_micros"], &family["daily_budget_cents"]),
        (&json!(60_000), &json!(5))
    );
    let rows: Vec<(&str, u64)> = costs["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["agent"].as_str().unwrap(),
                a["spent_micros"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(rows, [("family", 60_000), ("main", 100_010)], "{costs}");
}
