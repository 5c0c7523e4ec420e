//! The browser's proxy: every connection Chromium makes (pages, workers,
//! WebSockets, which `Fetch` does not pause, and Chromium's own) goes
//! through it, and it connects only where `[tools.http]` lets a request go,
//! to an address it resolved and checked itself (so a name that resolves
//! elsewhere for Chromium than for the check changes nothing). `CONNECT`
//! tunnels (https, wss, ws) and plain http requests, one request a
//! connection. Its refusals are logged, not reported to the model: most
//! are Chromium's own background connections; a page's requests are
//! reported by the `Fetch` verdicts ([`super::guard`]).

use cairn_core::live::Live;
use std::net::SocketAddr;
use std::time::Duration;

use reqwest::Url;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use crate::tools::net::NetClient;

/// Most bytes of a request's head.
const MAX_HEAD: usize = 64 * 1024;

/// How long a client may take to send its head, and a connection to open.
const STEP_LIMIT: Duration = Duration::from_secs(30);

/// A running proxy on a loopback port; stopped when dropped.
#[derive(Debug)]
pub(super) struct Proxy {
    port: u16,
    task: JoinHandle<()>,
}

impl Proxy {
    /// Starts one over the rules of `net` (as they are when each connection comes).
    pub async fn start(net: Live<NetClient>) -> std::io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let port = listener.local_addr()?.port();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let net = net.get();
                tokio::spawn(async move { serve(client, &net).await });
            }
        });
        Ok(Self { port, task })
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A request's head, parsed as far as the proxy needs.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Head {
    /// `CONNECT`, `GET`, …
    pub method: String,
    /// The host and port to reach.
    pub host: String,
    /// Its port.
    pub port: u16,
    /// What to send upstream first: nothing for a tunnel, else the head rewritten.
    pub upstream: Vec<u8>,
    /// A URL to check against the rules.
    pub url: Url,
}

/// Reads the head of one request, parses it and, when the rules allow,
/// connects and relays; a refusal is logged and answered 403.
async fn serve(mut client: TcpStream, net: &NetClient) {
    let Ok(Ok((head, rest))) = tokio::time::timeout(STEP_LIMIT, read_head(&mut client)).await
    else {
        return;
    };
    let head = match parse(&head) {
        Ok(head) => head,
        Err(why) => {
            tracing::debug!(%why, "the browser's proxy refused a request it cannot read");
            let _ = client
                .write_all(
                    b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                )
                .await;
            return;
        }
    };
    let addrs = match allowed(net, &head).await {
        Ok(addrs) => addrs,
        Err(why) => {
            tracing::debug!(host = %head.host, port = head.port, %why, "the browser's proxy refused a connection");
            let _ = client
                .write_all(
                    b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                )
                .await;
            return;
        }
    };
    let Some(mut upstream) = connect(&addrs).await else {
        let _ = client
            .write_all(
                b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            )
            .await;
        return;
    };
    if head.method == "CONNECT" {
        if client
            .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            .await
            .is_err()
        {
            return;
        }
    } else if upstream.write_all(&head.upstream).await.is_err() {
        return;
    }
    if !rest.is_empty() && upstream.write_all(&rest).await.is_err() {
        return;
    }
    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
}

/// The addresses the rules let this request reach.
async fn allowed(net: &NetClient, head: &Head) -> Result<Vec<SocketAddr>, String> {
    net.check_url(&head.url)?;
    net.permitted_addrs(&head.host, head.port).await
}

/// The first of `addrs` that answers.
async fn connect(addrs: &[SocketAddr]) -> Option<TcpStream> {
    for addr in addrs {
        if let Ok(Ok(stream)) = tokio::time::timeout(STEP_LIMIT, TcpStream::connect(addr)).await {
            return Some(stream);
        }
    }
    None
}

/// The head (up to the blank line) and what came after it.
async fn read_head(client: &mut TcpStream) -> std::io::Result<(Vec<u8>, Vec<u8>)> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = client.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buffer.extend_from_slice(&chunk[..n]);
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buffer.split_off(end + 4);
            return Ok((buffer, rest));
        }
        if buffer.len() > MAX_HEAD {
            return Err(std::io::ErrorKind::InvalidData.into());
        }
    }
}

/// Parses a proxy request's head: `CONNECT host:port` or an absolute
/// `http://` URL, whose head is rewritten for the origin (origin-form
/// target, no proxy headers, one request a connection).
pub(super) fn parse(head: &[u8]) -> Result<Head, String> {
    let text = String::from_utf8_lossy(head);
    let mut lines = text.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(format!("a malformed request line `{request_line}`"));
    };
    if method == "CONNECT" {
        let url = Url::parse(&format!("https://{target}/"))
            .map_err(|e| format!("a bad CONNECT target `{target}`: {e}"))?;
        let host = url.host_str().unwrap_or_default().to_string();
        let port = url.port_or_known_default().unwrap_or(443);
        return Ok(Head {
            method: method.to_string(),
            host,
            port,
            upstream: Vec::new(),
            url,
        });
    }
    let url = Url::parse(target).map_err(|e| format!("a bad request target `{target}`: {e}"))?;
    if url.scheme() != "http" {
        return Err(format!(
            "a proxied request for `{target}`, which is not http"
        ));
    }
    let host = url.host_str().unwrap_or_default().to_string();
    let port = url.port_or_known_default().unwrap_or(80);
    let mut path = url.path().to_string();
    if let Some(query) = url.query() {
        path.push('?');
        path.push_str(query);
    }
    let mut upstream = format!("{method} {path} {version}\r\n");
    for line in lines.filter(|l| !l.is_empty()) {
        let name = line
            .split(':')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        if !matches!(
            name.as_str(),
            "proxy-connection" | "proxy-authorization" | "connection" | "keep-alive"
        ) {
            upstream.push_str(line);
            upstream.push_str("\r\n");
        }
    }
    upstream.push_str("Connection: close\r\n\r\n");
    Ok(Head {
        method: method.to_string(),
        host,
        port,
        upstream: upstream.into_bytes(),
        url,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::http::HttpConfig;

    #[test]
    fn tunnels_and_plain_requests_are_parsed_and_rewritten_for_the_origin() {
        let tunnel =
            parse(b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n").unwrap();
        assert_eq!(
            (tunnel.method.as_str(), tunnel.host.as_str(), tunnel.port),
            ("CONNECT", "example.com", 443)
        );
        assert!(tunnel.upstream.is_empty());
        let ws = parse(b"CONNECT 127.0.0.2:80 HTTP/1.1\r\n\r\n").unwrap();
        assert_eq!((ws.host.as_str(), ws.port), ("127.0.0.2", 80));

        let plain = parse(
            b"GET http://127.0.0.1:8080/a/b?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nProxy-Connection: keep-alive\r\nCookie: k=v\r\n\r\n",
        )
        .unwrap();
        assert_eq!((plain.host.as_str(), plain.port), ("127.0.0.1", 8080));
        assert_eq!(
            String::from_utf8(plain.upstream).unwrap(),
            "GET /a/b?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nCookie: k=v\r\nConnection: close\r\n\r\n"
        );
        assert!(parse(b"GET /relative HTTP/1.1\r\n\r\n").is_err());
        assert!(parse(b"GET ftp://x/ HTTP/1.1\r\n\r\n").is_err());
        assert!(parse(b"nonsense\r\n\r\n").is_err());
    }

    #[tokio::test]
    async fn it_connects_only_where_the_rules_allow() {
        let origin = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = origin.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = origin.accept().await {
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf).await;
                let _ = s
                    .write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi",
                    )
                    .await;
            }
        });
        let ask = |net: NetClient| async move {
            let proxy = Proxy::start(Live::new(std::sync::Arc::new(net)))
                .await
                .unwrap();
            let mut s = TcpStream::connect(("127.0.0.1", proxy.port()))
                .await
                .unwrap();
            s.write_all(
                format!("GET http://127.0.0.1:{port}/x HTTP/1.1\r\nHost: h\r\n\r\n").as_bytes(),
            )
            .await
            .unwrap();
            let mut answer = String::new();
            s.read_to_string(&mut answer).await.unwrap();
            answer
        };
        let answer = ask(NetClient::new(HttpConfig::default()).unwrap()).await;
        assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
        let open = HttpConfig {
            allowed_private_networks: vec!["127.0.0.1".into()],
            ..HttpConfig::default()
        };
        let answer = ask(NetClient::new(open).unwrap()).await;
        assert!(answer.ends_with("\r\n\r\nhi"), "{answer}");
    }
}
