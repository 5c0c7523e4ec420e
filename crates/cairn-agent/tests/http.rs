//! http_request against a local server on 127.0.0.1: success, size limit, timeout,
//! and the private-address guard.
#![expect(clippy::unwrap_used, reason = "test helpers outside #[test] fns")]

mod support;

use std::time::Duration;

use cairn_agent::tools::http::{HttpConfig, HttpRequestTool};
use cairn_agent::tools::{ToolContext, ToolError};
use serde_json::json;
use support::RunGated;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A tiny HTTP/1.1 server: routes by path, echoes method and body on /echo.
async fn serve() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let Some((mut buf, head_end)) = support::read_head(&mut socket).await else {
                    return;
                };
                let mut chunk = [0u8; 4096];
                let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
                let length: usize = head
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length:")
                            .map(|v| v.trim().parse().unwrap())
                    })
                    .unwrap_or(0);
                while buf.len() < head_end + length {
                    let n = socket.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        break;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                }
                let body_in = String::from_utf8_lossy(&buf[head_end..]).to_string();
                let mut parts = head.split_whitespace();
                let method = parts.next().unwrap_or("").to_string();
                let path = parts.next().unwrap_or("").to_string();
                let (status, ctype, body) = match path.as_str() {
                    "/hello" => ("200 OK", "text/plain", "hello from test".to_string()),
                    "/big" => ("200 OK", "text/plain", "x".repeat(200_000)),
                    "/missing" => ("404 Not Found", "text/plain", "nope".to_string()),
                    "/secret" => (
                        "200 OK",
                        "application/json",
                        r#"{"api_key": "abc123secret"}"#.to_string(),
                    ),
                    "/echo" => {
                        let auth = head
                            .lines()
                            .find(|l| l.to_ascii_lowercase().starts_with("x-test:"))
                            .unwrap_or("");
                        ("200 OK", "text/plain", format!("{method} {body_in} {auth}"))
                    }
                    "/slow" => {
                        tokio::time::sleep(Duration::from_secs(5)).await;
                        ("200 OK", "text/plain", "late".to_string())
                    }
                    "/redirect" => ("302 Found", "text/plain", String::new()),
                    _ => ("400 Bad Request", "text/plain", String::new()),
                };
                let location = if path == "/redirect" {
                    "location: http://127.0.0.1:1/x\r\n"
                } else {
                    ""
                };
                let response = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: {ctype}\r\ncontent-length: {}\r\n{location}connection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(response.as_bytes()).await;
            });
        }
    });
    format!("http://{addr}")
}

fn local_config() -> HttpConfig {
    HttpConfig {
        block_private_networks: false,
        ..HttpConfig::default()
    }
}

fn ctx() -> ToolContext {
    ToolContext::new("/tmp", "s")
}

#[tokio::test]
async fn get_returns_status_headers_and_body() {
    let base = serve().await;
    let tool = HttpRequestTool::new(local_config()).unwrap();
    let out = tool
        .run_gated(json!({"url": format!("{base}/hello")}), &ctx())
        .await
        .unwrap();
    assert!(out.success);
    assert!(
        out.content
            .starts_with("HTTP 200 OK\ncontent-type: text/plain\n"),
        "{}",
        out.content
    );
    assert!(out.content.ends_with("\n\nhello from test"));
    let out = tool
        .run_gated(json!({"url": format!("{base}/missing")}), &ctx())
        .await
        .unwrap();
    assert!(!out.success);
    assert!(out.content.starts_with("HTTP 404 Not Found"));
}

#[tokio::test]
async fn post_sends_method_headers_and_json_body() {
    let base = serve().await;
    let tool = HttpRequestTool::new(local_config()).unwrap();
    let args = json!({
        "url": format!("{base}/echo"),
        "method": "post",
        "headers": {"X-Test": "yes"},
        "body": {"a": 1}
    });
    let out = tool.run_gated(args, &ctx()).await.unwrap();
    assert!(
        out.content.ends_with("POST {\"a\":1} x-test: yes"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn response_size_is_limited() {
    let base = serve().await;
    let tool = HttpRequestTool::new(HttpConfig {
        max_response_bytes: 1000,
        ..local_config()
    })
    .unwrap();
    let out = tool
        .run_gated(json!({"url": format!("{base}/big")}), &ctx())
        .await
        .unwrap();
    assert!(
        out.content
            .contains("[http_request: body cut at 1000 bytes]")
    );
    assert!(out.content.len() < 1200);
}

#[tokio::test]
async fn slow_server_times_out() {
    let base = serve().await;
    let tool = HttpRequestTool::new(HttpConfig {
        timeout: Duration::from_millis(200),
        ..local_config()
    })
    .unwrap();
    let err = tool
        .run_gated(json!({"url": format!("{base}/slow")}), &ctx())
        .await
        .unwrap_err();
    assert_eq!(err, ToolError::Timeout(Duration::from_millis(200)));
}

#[tokio::test]
async fn cancellation_aborts_the_request() {
    let base = serve().await;
    let tool = HttpRequestTool::new(local_config()).unwrap();
    let c = ctx();
    c.cancel.cancel();
    let err = tool
        .run_gated(json!({"url": format!("{base}/slow")}), &c)
        .await
        .unwrap_err();
    assert_eq!(err, ToolError::Cancelled);
}

#[tokio::test]
async fn private_addresses_are_refused_by_default() {
    let base = serve().await;
    let tool = HttpRequestTool::new(HttpConfig::default()).unwrap();
    for url in [
        format!("{base}/hello"),
        "http://localhost:9/".into(),
        "http://[::1]:9/".into(),
        "http://169.254.169.254/".into(),
    ] {
        let err = tool
            .run_gated(json!({"url": url}), &ctx())
            .await
            .unwrap_err();
        assert!(
            matches!(&err, ToolError::NotPermitted(m) if m.contains("private or local") || m.contains("is local")),
            "{url}: {err:?}"
        );
    }
}

#[tokio::test]
async fn redirects_are_checked_hop_by_hop() {
    let base = serve().await;
    let tool = HttpRequestTool::new(HttpConfig {
        max_redirects: 0,
        ..local_config()
    })
    .unwrap();
    let err = tool
        .run_gated(json!({"url": format!("{base}/redirect")}), &ctx())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ToolError::Http(m) if m.contains("more than 0 redirects")),
        "{err:?}"
    );
}

#[tokio::test]
async fn bad_arguments_are_typed_errors() {
    let tool = HttpRequestTool::new(local_config()).unwrap();
    let bad = [
        json!({}),
        json!({"url": "not a url"}),
        json!({"url": "http://127.0.0.1:1/", "method": "TRACE"}),
        json!({"url": "http://127.0.0.1:1/", "headers": ["x"]}),
    ];
    for args in bad {
        let err = tool.run_gated(args.clone(), &ctx()).await.unwrap_err();
        assert!(
            matches!(err, ToolError::InvalidArguments(_)),
            "{args}: {err:?}"
        );
    }
    let err = tool
        .run_gated(json!({"url": "ftp://example.com/x"}), &ctx())
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::NotPermitted(m) if m.contains("scheme")));
}
