//! `GET /metrics`: guarded by a bearer token unless public, and carrying
//! the series the daemon's parts record.
#![expect(clippy::unwrap_used, reason = "test code unwraps freely")]

mod support;

use cairn_automation::notify::channels::webhook::signature;
use cairn_core::clock::{Clock, SystemClock};
use cairn_core::routine::{Routine, RoutineSpec, SpecFormat};
use std::sync::Arc;

use cairn_agent::cost_guard::{CostGuard, GuardedProvider};
use cairn_core::config::CostConfig;
use cairn_llm::testing::Scripted;
use cairn_llm::{ChatMessage, ChatRequest, LlmProvider, build_provider};
use serde_json::json;
use support::{TestGateway, settings};

#[tokio::test]
async fn metrics_need_a_token_unless_public() {
    let gw = TestGateway::start().await;
    assert_eq!(
        gw.http
            .get(gw.url("/metrics"))
            .send()
            .await
            .unwrap()
            .status(),
        401
    );
    gw.stop().await;
    let mut s = settings();
    s.metrics_public = true;
    let gw = TestGateway::start_with(s, |g| g).await;
    assert_eq!(
        gw.http
            .get(gw.url("/metrics"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    gw.stop().await;
}

#[tokio::test]
async fn traffic_shows_up_in_the_series() {
    let gw = TestGateway::start().await;
    gw.http.get(gw.url("/healthz")).send().await.unwrap();
    // An agent turn with a tool call (denied: nobody approves on a webhook).
    gw.llm.push_all([
        Scripted::text_with_tool_calls("", [("writer", json!({}))]),
        Scripted::text("hi"),
    ]);
    let turn = gw
        .post("/webhook")
        .json(&json!({"message": "hello"}))
        .send()
        .await
        .unwrap();
    assert_eq!(turn.status(), 200);
    // A routine fire whose notification goes to the inbox.
    let spec = RoutineSpec::parse(
        "name: m\ntrigger: {type: webhook, path: m, secret: k}\naction: {type: notification, message: x}\n",
        SpecFormat::Yaml,
    )
    .unwrap();
    let r = Routine::new(spec, "ada", SystemClock.now());
    gw.store.create_routine(&r).await.unwrap();
    let fired = gw
        .http
        .post(gw.url("/hooks/routine/m"))
        .header("X-Signature-256", signature("k", b"{}"))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(fired.status(), 202);
    gw.engine.idle().await;
    // The daemon's LLM calls go through the cost guard, which counts them.
    let guard = CostGuard::load(
        gw.store.clone(),
        &CostConfig {
            daily_budget_cents: None,
            hourly_action_limit: None,
        },
        Arc::new(SystemClock),
    )
    .await
    .unwrap();
    let guarded = GuardedProvider::new(
        build_provider(&gw.llm.openai_settings()).unwrap(),
        Arc::new(guard),
    );
    gw.llm.push(Scripted::text("counted"));
    guarded
        .complete(&ChatRequest::new(vec![ChatMessage::user("x")]))
        .await
        .unwrap();

    let response = gw.get("/metrics").send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    let text = response.text().await.unwrap();
    for series in [
        r#"cairn_http_requests_total{method="GET",route="/healthz",status="200"}"#,
        r#"route="/hooks/routine/{*path}",status="202""#,
        "cairn_http_request_duration_seconds_bucket",
        r#"cairn_routine_fires_total{status="started"}"#,
        "cairn_routine_runs_finished_total",
        "cairn_notifications_total",
        "cairn_llm_calls_total",
        "cairn_llm_tokens_total",
        "cairn_llm_cost_microdollars_total",
        r#"cairn_tool_calls_total{tool="writer""#,
    ] {
        assert!(text.contains(series), "{series} missing from:\n{text}");
    }
    gw.stop().await;
}

/// The distinct values of `label` in the request counter's series.
fn label_values(text: &str, label: &str) -> std::collections::BTreeSet<String> {
    let key = format!("{label}=\"");
    text.lines()
        .filter(|l| l.starts_with("cairn_http_requests_total{"))
        .filter_map(|l| l.split(&key).nth(1)?.split('"').next().map(str::to_string))
        .collect()
}

#[tokio::test]
async fn junk_methods_and_paths_do_not_grow_the_label_set() {
    let gw = TestGateway::start().await;
    for n in 0..50 {
        let method = reqwest::Method::from_bytes(format!("JUNK{n}").as_bytes()).unwrap();
        for path in ["/healthz".to_string(), format!("/no/such/{n}")] {
            let response = gw
                .http
                .request(method.clone(), gw.url(&path))
                .send()
                .await
                .unwrap();
            assert!(response.status().is_client_error(), "{}", response.status());
        }
        gw.http
            .get(gw.url(&format!("/nothing-{n}")))
            .send()
            .await
            .unwrap();
    }
    let text = gw
        .get("/metrics")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let methods = label_values(&text, "method");
    assert!(methods.contains("OTHER"), "{methods:?}");
    assert!(
        methods.iter().all(|m| !m.starts_with("JUNK")),
        "methods: {methods:?}"
    );
    let routes = label_values(&text, "route");
    assert!(
        routes.contains(cairn_gateway::metrics::UNMATCHED),
        "{routes:?}"
    );
    assert!(
        routes
            .iter()
            .all(|r| !r.contains("nothing-") && !r.contains("/no/such")),
        "routes: {routes:?}"
    );
    gw.stop().await;
}
