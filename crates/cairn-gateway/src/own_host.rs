//! The host names the dashboard and pairing answer for. A page on another
//! site can point its own name at 127.0.0.1 (DNS rebinding) and then talk
//! to the gateway as its own origin: its `Origin` and `Host` agree, so the
//! origin check alone lets it in. The browser always sends the name it
//! looked up in `Host`, so the dashboard (`/`, `/ui/…`) and `POST /pair`
//! answer only when that name is the gateway's own: `gateway.host`,
//! `localhost`, `127.0.0.1`, `[::1]` or one of `gateway.allowed_hosts`,
//! with any port. Another name gets 421 Misdirected Request before any
//! handler runs, so it counts toward nothing (wrong codes, attempts).
//!
//! `X-Forwarded-Host` is never read: a rebinding page may send any header
//! it likes, and it reaches the gateway from a loopback address, which is
//! a trusted proxy by default. Behind a reverse proxy, pass the original
//! `Host` on (as the origin check needs anyway) and list the public name in
//! `gateway.allowed_hosts`.

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use cairn_core::config::GatewayConfig;

use crate::error::ApiError;
use crate::state::AppState;

/// Names every gateway answers for besides `gateway.host` and `gateway.allowed_hosts`.
const ALWAYS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// Whether `path` is the dashboard's or pairing's.
pub fn guarded(path: &str) -> bool {
    path == "/" || path == "/pair" || path == "/ui" || path.starts_with("/ui/")
}

/// The host name of a `Host` value (or a configured name): without its
/// port, IPv6 brackets or a trailing dot, lowercased.
fn name_of(host: &str) -> String {
    let host = host.trim();
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or_default(),
        None => match host.rsplit_once(':') {
            Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
            _ => host,
        },
    };
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// Whether a request naming `host` is meant for this gateway.
pub fn is_own(settings: &GatewayConfig, host: &str) -> bool {
    let name = name_of(host);
    !name.is_empty()
        && (ALWAYS.contains(&name.as_str())
            || name == name_of(&settings.host)
            || settings.allowed_hosts.iter().any(|h| name_of(h) == name))
}

/// Middleware: a dashboard or pairing request whose `Host` is not this
/// gateway's gets 421 and goes no further.
pub async fn guard(State(state): State<AppState>, req: Request, next: Next) -> Response {
    if !guarded(req.uri().path()) {
        return next.run(req).await;
    }
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| req.uri().authority().map(|a| a.as_str()));
    if host.is_some_and(|h| is_own(state.settings(), h)) {
        return next.run(req).await;
    }
    // Debug only: a rebinding page can send these as fast as it likes.
    tracing::debug!(host = ?host, path = %req.uri().path(), "a dashboard or pairing request for another host name was refused");
    ApiError::new(
        StatusCode::MISDIRECTED_REQUEST,
        "misdirected_request",
        "the dashboard and pairing answer only for this gateway's own host names \
         (gateway.host, localhost, loopback addresses and gateway.allowed_hosts); \
         add the name this page was opened with to gateway.allowed_hosts",
    )
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_names_with_or_without_a_port_and_nothing_else() {
        let mut settings = GatewayConfig {
            host: "192.0.2.10".into(),
            allowed_hosts: vec!["Cairn.Example.org:8443".into(), "[2001:db8::1]".into()],
            ..cairn_core::config::Config::load(&Default::default())
                .unwrap()
                .gateway
        };
        for host in [
            "127.0.0.1:42700",
            "127.0.0.1",
            "localhost:42700",
            "LOCALHOST",
            "[::1]:42700",
            "[::1]",
            "192.0.2.10:42700",
            "cairn.example.org",
            "cairn.example.org.:443",
            "[2001:db8::1]:80",
        ] {
            assert!(is_own(&settings, host), "{host}");
        }
        for host in [
            "evil-rebind.test",
            "evil-rebind.test:42700",
            "127.0.0.1.evil-rebind.test",
            "localhost.evil-rebind.test",
            "",
            ":42700",
            "[::2]",
        ] {
            assert!(!is_own(&settings, host), "{host}");
        }
        settings.allowed_hosts.clear();
        assert!(!is_own(&settings, "cairn.example.org"));
        for path in ["/", "/pair", "/ui/session", "/ui/assets/app.css"] {
            assert!(guarded(path), "{path}");
        }
        for path in [
            "/api/status",
            "/v1/models",
            "/webhook",
            "/whatsapp",
            "/uix",
            "/pairs",
        ] {
            assert!(!guarded(path), "{path}");
        }
    }
}
