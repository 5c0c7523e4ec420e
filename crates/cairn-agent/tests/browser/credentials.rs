//! A credential bound to a host, through a real browser: the page's host
//! receives the header cairn adds, a server on another port of the same
//! address does not, and the tools' descriptions name the host, never the
//! value.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::http::HeaderMap;
use cairn_agent::tools::browser::BrowserConfig;
use cairn_agent::tools::http::HttpConfig;
use cairn_core::config::credentials::HostCredential;
use serde_json::json;

use super::Rig;

const VALUE: &str = "cred-value-4417";

/// A server on 127.0.0.1 answering a page and keeping each request's
/// `x-api-key` header (`None` when it had none): `(host:port, seen)`.
async fn server() -> (String, Arc<Mutex<Vec<Option<String>>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let app = Router::new().fallback(move |headers: HeaderMap| {
        let log = Arc::clone(&log);
        async move {
            let key = headers
                .get("x-api-key")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            log.lock().unwrap().push(key);
            axum::response::Html("<html><head><title>T</title></head><body>hello</body></html>")
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let host = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (host, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_credential_bound_to_a_host_reaches_that_host_only() {
    let (bound, bound_seen) = server().await;
    let (other, other_seen) = server().await;
    let http = HttpConfig {
        allowed_private_networks: vec!["127.0.0.1".into()],
        credentials: vec![HostCredential {
            host: bound.clone(),
            header: Some("X-Api-Key".into()),
            query: None,
            value: VALUE.into(),
        }],
        ..HttpConfig::default()
    };
    let test = "a_credential_bound_to_a_host_reaches_that_host_only";
    let Some(rig) = Rig::new(test, http, BrowserConfig::default()).await else {
        return;
    };

    // The model is told which host has one, not what it is.
    for tool in ["browser_open", "browser_click", "browser_type"] {
        let spec = rig.runner.registry().get(tool).unwrap().spec().clone();
        let description = spec.description().to_string();
        assert!(
            description.contains(&format!("`{bound}`")),
            "{tool}: {description}"
        );
        assert!(!description.contains(VALUE), "{description}");
    }

    rig.ok(
        "browser_open",
        json!({"url": format!("http://{bound}/page")}),
    )
    .await;
    rig.ok(
        "browser_open",
        json!({"url": format!("http://{other}/page")}),
    )
    .await;
    let bound_seen = bound_seen.lock().unwrap().clone();
    let other_seen = other_seen.lock().unwrap().clone();
    assert!(!bound_seen.is_empty() && !other_seen.is_empty());
    // Every request to the bound host carries it (the page, its favicon).
    assert!(
        bound_seen.iter().all(|k| k.as_deref() == Some(VALUE)),
        "{bound_seen:?}"
    );
    assert!(other_seen.iter().all(Option::is_none), "{other_seen:?}");
    rig.browsers.shutdown().await;
}
