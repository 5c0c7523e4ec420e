//! `web_fetch` and `web_search` through the agent loop: the fake LLM asks
//! for the tool, the tool reaches a stand-in server on 127.0.0.1, and the
//! model's next request carries what the tool returned.
#![expect(clippy::unwrap_used, reason = "test code unwraps freely")]

mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cairn_agent::tools::http::HttpConfig;
use cairn_agent::tools::web_search::WebSearchConfig;
use cairn_agent::tools::{ToolContext, ToolsConfig, builtin_registry};
use cairn_agent::{
    AgentLoop, AutonomyLevel, HookRegistry, LoopConfig, LoopDelegate, PolicyGate, ToolPolicyConfig,
    ToolRunner,
};
use cairn_core::chat::ChatMessage;
use cairn_llm::build_provider;
use cairn_llm::testing::{FakeLlmServer, Scripted};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

/// One canned answer of the stand-in server.
#[derive(Clone)]
struct Canned {
    status: &'static str,
    headers: Vec<(String, String)>,
    body: Arc<Vec<u8>>,
}

fn canned(status: &'static str, content_type: &str, body: impl Into<Vec<u8>>) -> Canned {
    Canned {
        status,
        headers: vec![("content-type".into(), content_type.into())],
        body: Arc::new(body.into()),
    }
}

/// An HTTP/1.1 stand-in on 127.0.0.1: answers by path (query ignored) and
/// records each request's head.
struct StandIn {
    base: String,
    heads: Arc<Mutex<Vec<String>>>,
}

impl StandIn {
    async fn start(routes: HashMap<&'static str, Canned>) -> StandIn {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let heads = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&heads);
        let routes = Arc::new(routes);
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let routes = Arc::clone(&routes);
                let seen = Arc::clone(&seen);
                tokio::spawn(async move {
                    let Some((buf, head_end)) = support::read_head(&mut socket).await else {
                        return;
                    };
                    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
                    seen.lock().unwrap().push(head.clone());
                    let target = head.split_whitespace().nth(1).unwrap_or("/");
                    let path = target.split('?').next().unwrap_or("/");
                    let answer = routes
                        .get(path)
                        .cloned()
                        .unwrap_or_else(|| canned("404 Not Found", "text/plain", "none"));
                    let mut out = format!(
                        "HTTP/1.1 {}\r\ncontent-length: {}\r\nconnection: close\r\n",
                        answer.status,
                        answer.body.len()
                    );
                    for (name, value) in &answer.headers {
                        out.push_str(&format!("{name}: {value}\r\n"));
                    }
                    out.push_str("\r\n");
                    if socket.write_all(out.as_bytes()).await.is_ok() {
                        // A client that stops reading (the size bound) ends this write.
                        let _ = socket.write_all(&answer.body).await;
                    }
                });
            }
        });
        StandIn { base, heads }
    }

    fn heads(&self) -> Vec<String> {
        self.heads.lock().unwrap().clone()
    }
}

/// Declines everything; the web tools are read-only and never ask.
struct Nobody;

#[async_trait::async_trait]
impl cairn_agent::runner::Approver for Nobody {
    async fn approve(
        &self,
        _: &cairn_agent::runner::ApprovalRequest,
    ) -> cairn_agent::runner::ApprovalAnswer {
        cairn_agent::runner::ApprovalAnswer::No
    }
}

#[async_trait::async_trait]
impl LoopDelegate for Nobody {
    fn approver(&self) -> &dyn cairn_agent::runner::Approver {
        self
    }
}

/// The built-in tools over `tools`, the loop over the fake LLM, one turn
/// in which the model makes `call` and then answers; returns the text of
/// the tool result the model received.
async fn tool_result_seen_by_model(tools: ToolsConfig, call: (&str, Value)) -> String {
    let llm = FakeLlmServer::start().await.unwrap();
    llm.push(Scripted::tool_call(call.0, call.1));
    llm.push(Scripted::text("Done."));
    let registry = builtin_registry(&tools).unwrap();
    let policy = PolicyGate::new(&ToolPolicyConfig {
        autonomy: AutonomyLevel::Supervised,
        ..Default::default()
    });
    let runner = Arc::new(ToolRunner::new(Arc::new(registry), Arc::new(policy)));
    let agent = AgentLoop::new(
        build_provider(&llm.openai_settings()).unwrap(),
        runner,
        Arc::new(HookRegistry::new()),
        LoopConfig::default(),
    );
    let workspace = tempfile::tempdir().unwrap();
    let ctx = ToolContext::new(workspace.path(), "s");
    let mut messages = vec![ChatMessage::system("test"), ChatMessage::user("go")];
    let outcome = agent.run(&Nobody, &mut messages, &ctx).await;
    assert_eq!(outcome.text, "Done.");
    let sent = &llm.requests()[1].body["messages"];
    let tool = sent
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    tool["content"].as_str().unwrap().to_string()
}

/// Loopback allowed for the stand-in; every other private range still refused.
fn loopback_only() -> HttpConfig {
    HttpConfig {
        allowed_private_networks: vec!["127.0.0.1".into()],
        ..HttpConfig::default()
    }
}

const ARTICLE: &str = r#"<!doctype html>
<html><head><title>Cairn notes</title>
<style>.nav { display: flex } /* STYLE-MARKER */</style>
<script>window.SCRIPT_MARKER = true;</script></head>
<body>
<nav><a href="/home">NAV-MARKER home</a> <a href="/about">About</a></nav>
<h1>Stacking stones</h1>
<p>A cairn is a human-made pile of stones, often used as a trail marker.</p>
<footer>FOOTER-MARKER all rights reserved</footer>
<script>console.log("SCRIPT-TWO")</script>
</body></html>"#;

#[tokio::test]
async fn web_fetch_gives_the_model_the_text_without_scripts_styles_or_navigation() {
    let site = StandIn::start(HashMap::from([(
        "/article",
        canned("200 OK", "text/html; charset=utf-8", ARTICLE),
    )]))
    .await;
    let tools = ToolsConfig {
        http: loopback_only(),
        ..ToolsConfig::default()
    };
    let url = format!("{}/article", site.base);
    let seen = tool_result_seen_by_model(tools, ("web_fetch", json!({"url": url}))).await;
    assert!(seen.contains("# Stacking stones"), "{seen}");
    assert!(
        seen.contains("A cairn is a human-made pile of stones, often used as a trail marker."),
        "{seen}"
    );
    assert!(seen.contains(&format!("url: {url}")), "{seen}");
    assert!(seen.contains("status: 200 OK"), "{seen}");
    assert!(
        seen.contains("content-type: text/html; charset=utf-8"),
        "{seen}"
    );
    assert!(seen.contains("title: Cairn notes"), "{seen}");
    assert!(seen.contains("cut: no"), "{seen}");
    for gone in [
        "STYLE-MARKER",
        "SCRIPT_MARKER",
        "SCRIPT-TWO",
        "NAV-MARKER",
        "FOOTER-MARKER",
        "display: flex",
    ] {
        assert!(!seen.contains(gone), "{gone} reached the model: {seen}");
    }
    // A browser-like GET went out.
    let head = &site.heads()[0];
    assert!(head.starts_with("GET /article HTTP/1.1"), "{head}");
    assert!(
        head.to_ascii_lowercase().contains("accept: text/html"),
        "{head}"
    );
}

#[tokio::test]
async fn web_fetch_refuses_a_redirect_to_a_private_address() {
    let mut redirect = canned("302 Found", "text/plain", "");
    redirect
        .headers
        .push(("location".into(), "http://10.20.30.40/admin".into()));
    let site = StandIn::start(HashMap::from([("/go", redirect)])).await;
    let tools = ToolsConfig {
        http: loopback_only(),
        ..ToolsConfig::default()
    };
    let seen = tool_result_seen_by_model(
        tools,
        ("web_fetch", json!({"url": format!("{}/go", site.base)})),
    )
    .await;
    assert!(seen.contains("not permitted"), "{seen}");
    assert!(seen.contains("10.20.30.40 is private or local"), "{seen}");
    assert_eq!(site.heads().len(), 1, "only the first hop was requested");
}

#[tokio::test]
async fn web_fetch_cuts_a_20_mb_page_at_the_bound() {
    let mut page = b"<html><body><p>".to_vec();
    page.resize(20 * 1024 * 1024, b'x');
    let site = StandIn::start(HashMap::from([(
        "/big",
        canned("200 OK", "text/html", page),
    )]))
    .await;
    let tools = ToolsConfig {
        http: loopback_only(),
        ..ToolsConfig::default()
    };
    let seen = tool_result_seen_by_model(
        tools,
        (
            "web_fetch",
            json!({"url": format!("{}/big", site.base), "max_chars": 5000}),
        ),
    )
    .await;
    assert!(
        seen.contains("cut: yes (the download stopped at 1048576 bytes (tools.http.max_response_bytes); the content was cut at 5000 characters (max_chars))"),
        "{}",
        &seen[..seen.len().min(600)]
    );
    assert!(
        seen.len() < 6_000,
        "{} characters reached the model",
        seen.len()
    );
}

#[tokio::test]
async fn web_fetch_passes_json_through_and_says_pdfs_are_not_read() {
    let site = StandIn::start(HashMap::from([
        (
            "/data",
            canned("200 OK", "application/json", r#"{"answer": 42}"#),
        ),
        (
            "/doc",
            canned("200 OK", "application/pdf", "%PDF-1.7 binary"),
        ),
    ]))
    .await;
    let tools = ToolsConfig {
        http: loopback_only(),
        ..ToolsConfig::default()
    };
    let seen = tool_result_seen_by_model(
        tools.clone(),
        ("web_fetch", json!({"url": format!("{}/data", site.base)})),
    )
    .await;
    assert!(seen.contains("\n\n{\"answer\": 42}"), "{seen}");
    let seen = tool_result_seen_by_model(
        tools,
        ("web_fetch", json!({"url": format!("{}/doc", site.base)})),
    )
    .await;
    assert!(seen.contains("[PDF not supported"), "{seen}");
}

fn search(provider: &str, base: &str, key: Option<&str>) -> ToolsConfig {
    let mut config = json!({"provider": provider});
    match provider {
        "searxng" => config["url"] = json!(base),
        _ => config["base_url"] = json!(base),
    }
    if let Some(key) = key {
        config["api_key"] = json!(key);
    }
    let web_search: WebSearchConfig = serde_json::from_value(config).unwrap();
    ToolsConfig {
        web_search: Some(web_search),
        ..ToolsConfig::default()
    }
}

#[tokio::test]
async fn web_search_results_from_a_searxng_stand_in_reach_the_model() {
    let answer = json!({"query": "cairn", "results": [
        {"title": "Cairn - Wikipedia", "url": "https://en.wikipedia.org/wiki/Cairn", "content": "A cairn is a man-made pile of stones."},
        {"title": "Cairn terrier", "url": "https://example.org/terrier", "content": "A dog breed."}
    ]});
    let searx = StandIn::start(HashMap::from([(
        "/search",
        canned("200 OK", "application/json", answer.to_string()),
    )]))
    .await;
    let seen = tool_result_seen_by_model(
        search("searxng", &searx.base, None),
        ("web_search", json!({"query": "cairn stones", "count": 1})),
    )
    .await;
    assert!(seen.contains("1. Cairn - Wikipedia"), "{seen}");
    assert!(
        seen.contains("https://en.wikipedia.org/wiki/Cairn"),
        "{seen}"
    );
    assert!(
        seen.contains("A cairn is a man-made pile of stones."),
        "{seen}"
    );
    assert!(
        !seen.contains("terrier"),
        "count 1 keeps one result: {seen}"
    );
    let head = &searx.heads()[0];
    assert!(
        head.starts_with("GET /search?q=cairn+stones&format=json "),
        "{head}"
    );
}

#[tokio::test]
async fn web_search_results_from_a_brave_stand_in_reach_the_model() {
    let answer = json!({"web": {"results": [
        {"title": "Rust", "url": "https://www.rust-lang.org/", "description": "A <strong>language</strong> empowering everyone"}
    ]}});
    let brave = StandIn::start(HashMap::from([(
        "/res/v1/web/search",
        canned("200 OK", "application/json", answer.to_string()),
    )]))
    .await;
    let seen = tool_result_seen_by_model(
        search("brave", &brave.base, Some("BSA-test-key")),
        ("web_search", json!({"query": "rust"})),
    )
    .await;
    assert!(
        seen.contains("1. Rust\n   https://www.rust-lang.org/\n   A language empowering everyone"),
        "{seen}"
    );
    let head = brave.heads()[0].to_ascii_lowercase();
    assert!(
        head.contains("x-subscription-token: bsa-test-key"),
        "{head}"
    );
    assert!(head.contains("count=5"), "{head}");
}

#[tokio::test]
async fn web_search_reports_a_rejected_key_clearly() {
    let refusal = json!({"type": "ErrorResponse", "error": {"code": "SUBSCRIPTION_TOKEN_INVALID", "detail": "The provided subscription token is invalid.", "status": 401}});
    let brave = StandIn::start(HashMap::from([(
        "/res/v1/web/search",
        canned("401 Unauthorized", "application/json", refusal.to_string()),
    )]))
    .await;
    let seen = tool_result_seen_by_model(
        search("brave", &brave.base, Some("BSA-wrong")),
        ("web_search", json!({"query": "rust"})),
    )
    .await;
    assert!(
        seen.contains("brave answered HTTP 401 Unauthorized: the API key was rejected: check tools.web_search.api_key (The provided subscription token is invalid.)"),
        "{seen}"
    );
    assert!(!seen.contains("BSA-wrong"), "{seen}");
}

#[tokio::test]
async fn without_a_search_provider_the_tool_is_not_offered() {
    let registry = builtin_registry(&ToolsConfig::default()).unwrap();
    assert!(registry.get("web_search").is_none());
    assert!(registry.get("web_fetch").is_some());
    let registry = builtin_registry(&search("searxng", "http://127.0.0.1:9", None)).unwrap();
    assert!(registry.get("web_search").is_some());
}
