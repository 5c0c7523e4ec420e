//! Credentials bound to hosts (`[[tools.http.credentials]]`): added by
//! `http_request` and `web_fetch` to their host's requests only, decided
//! again on every redirect hop; the tools say a credential exists for the
//! host, never what it is.
#![expect(clippy::unwrap_used, reason = "test helpers outside #[test] fns")]

mod support;

use std::sync::{Arc, Mutex};

use cairn_agent::tools::http::{HostCredential, HttpConfig, HttpRequestTool};
use cairn_agent::tools::net::NetClient;
use cairn_agent::tools::web_fetch::WebFetchTool;
use cairn_agent::tools::{Tool, ToolContext, ToolError};
use serde_json::json;
use support::RunGated;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

const VALUE: &str = "cred-value-5521";

/// One request as a server saw it: its request line and lower-cased head.
type Seen = Arc<Mutex<Vec<String>>>;

/// A server answering `/to/<url>` with a 302 (or `/see/<url>` with a 303)
/// to that URL, anything else with 200 "ok"; it records every request.
async fn server() -> (String, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let seen: Seen = Arc::default();
    let kept = Arc::clone(&seen);
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let kept = Arc::clone(&kept);
            tokio::spawn(async move {
                let Some((buf, end)) = support::read_head(&mut socket).await else {
                    return;
                };
                let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                let head_kept = String::from_utf8_lossy(&buf[..end]).to_string();
                kept.lock().unwrap().push(head_kept);
                let path = head.split_whitespace().nth(1).unwrap_or("").to_string();
                let raw_path = String::from_utf8_lossy(&buf[..end])
                    .split_whitespace()
                    .nth(1)
                    .unwrap_or("")
                    .to_string();
                let response = match (path.strip_prefix("/to/"), path.strip_prefix("/see/")) {
                    (Some(_), _) => format!(
                        "HTTP/1.1 302 Found\r\nlocation: {}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                        &raw_path[4..]
                    ),
                    (_, Some(_)) => format!(
                        "HTTP/1.1 303 See Other\r\nlocation: {}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                        &raw_path[5..]
                    ),
                    _ => "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok"
                        .to_string(),
                };
                let _ = socket.write_all(response.as_bytes()).await;
            });
        }
    });
    (base, seen)
}

fn config(bound: &str, header: Option<&str>, query: Option<&str>) -> HttpConfig {
    HttpConfig {
        block_private_networks: false,
        credentials: vec![HostCredential {
            host: bound.trim_start_matches("http://").to_string(),
            header: header.map(Into::into),
            query: query.map(Into::into),
            value: VALUE.to_string().into(),
        }],
        ..HttpConfig::default()
    }
}

fn ctx() -> ToolContext {
    ToolContext::new("/tmp", "s")
}

fn taken(seen: &Seen) -> Vec<String> {
    std::mem::take(&mut *seen.lock().unwrap())
}

#[tokio::test]
async fn a_header_credential_follows_its_host_and_no_other_across_redirects() {
    let (a, seen_a) = server().await;
    let (b, seen_b) = server().await;
    let tool = HttpRequestTool::new(config(&a, Some("X-Key"), None)).unwrap();
    let header = format!("x-key: {VALUE}").to_ascii_lowercase();

    // A redirect within the host keeps it.
    tool.run_gated(json!({"url": format!("{a}/to/{a}/land")}), &ctx())
        .await
        .unwrap();
    let hops = taken(&seen_a);
    assert_eq!(hops.len(), 2);
    assert!(
        hops.iter()
            .all(|h| h.to_ascii_lowercase().contains(&header)),
        "{hops:?}"
    );

    // To another host it is lost, and so is the model's own Authorization.
    tool.run_gated(
        json!({"url": format!("{a}/to/{b}/land"), "headers": {"Authorization": "Bearer mine-0000"}}),
        &ctx(),
    )
    .await
    .unwrap();
    let at_a = taken(&seen_a);
    let at_b = taken(&seen_b);
    assert!(at_a[0].to_ascii_lowercase().contains(&header), "{at_a:?}");
    assert!(at_a[0].contains("Bearer mine-0000"), "{at_a:?}");
    assert_eq!(at_b.len(), 1);
    assert!(
        !at_b[0].contains(VALUE) && !at_b[0].contains("mine-0000"),
        "{at_b:?}"
    );

    // From another host back to it, the last hop gets it.
    tool.run_gated(json!({"url": format!("{b}/to/{a}/land")}), &ctx())
        .await
        .unwrap();
    assert!(!taken(&seen_b)[0].contains(VALUE));
    assert!(taken(&seen_a)[0].to_ascii_lowercase().contains(&header));

    // A 303 turns a POST into a GET without its body.
    tool.run_gated(
        json!({"url": format!("{a}/see/{a}/land"), "method": "POST", "body": "data"}),
        &ctx(),
    )
    .await
    .unwrap();
    let hops = taken(&seen_a);
    assert!(
        hops[0].starts_with("POST ") && hops[1].starts_with("GET "),
        "{hops:?}"
    );

    // Past max_redirects: refused, as without credentials.
    let tool = HttpRequestTool::new(HttpConfig {
        max_redirects: 0,
        ..config(&a, Some("X-Key"), None)
    })
    .unwrap();
    let err = tool
        .run_gated(json!({"url": format!("{a}/to/{a}/land")}), &ctx())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ToolError::Http(m) if m.contains("more than 0 redirects")),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_query_credential_is_added_for_its_host_and_never_carried_to_another() {
    let (a, seen_a) = server().await;
    let (b, seen_b) = server().await;
    let net = Arc::new(NetClient::new(config(&a, None, Some("api_key"))).unwrap());
    let fetch = WebFetchTool::new(Arc::clone(&net));
    fetch
        .run_gated(json!({"url": format!("{a}/page?x=1")}), &ctx())
        .await
        .unwrap();
    let seen = taken(&seen_a);
    assert!(
        seen[0].starts_with(&format!("GET /page?x=1&api_key={VALUE} ")),
        "{seen:?}"
    );

    // A server echoing the query into a redirect to another host: refused.
    let err = fetch
        .run_gated(json!({"url": format!("{a}/to/{b}/land?k={VALUE}")}), &ctx())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ToolError::NotPermitted(m) if m.contains("would carry the credential")),
        "{err:?}"
    );
    assert!(taken(&seen_b).is_empty());

    // The tools name the host; neither shows the value.
    let host = a.trim_start_matches("http://");
    for description in [
        fetch.spec().description().to_string(),
        HttpRequestTool::over(net).spec().description().to_string(),
    ] {
        assert!(description.contains(&format!("`{host}`")), "{description}");
        assert!(!description.contains(VALUE));
    }
}
