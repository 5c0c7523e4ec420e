//! Who is asking: the peer address, or, when `gateway.trust_forwarded_for`
//! is set, the right-most `X-Forwarded-For` address that is not one of
//! `gateway.trusted_proxies`. Each proxy appends the address it got the
//! request from, so the entries right of the first untrusted one were
//! written by proxies we trust; everything left of it is whatever the
//! client chose to send. Rate limits are kept per client.

use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::HeaderMap;
use axum::http::request::Parts;
use cairn_core::ip_range::IpRange;

use crate::error::ApiError;
use crate::state::AppState;

/// The client's address as rate limits see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClientIp(pub IpAddr);

impl FromRequestParts<AppState> for ClientIp {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let Some(ConnectInfo(peer)) = parts.extensions.get::<ConnectInfo<SocketAddr>>() else {
            return Err(ApiError::internal(
                "the client's address is unknown",
                &"the server was started without connect info",
            ));
        };
        let settings = state.settings();
        Ok(ClientIp(if settings.trust_forwarded_for {
            client_address(peer.ip(), &parts.headers, &settings.trusted_proxies)
        } else {
            peer.ip()
        }))
    }
}

/// The client behind `peer`: walking from the right through the peer and
/// then the `X-Forwarded-For` entries (every such header, in order), the
/// first address that is not a trusted proxy. When all are trusted, the
/// left-most; an entry that is not an address ends the walk at the last
/// proxy that handed it on.
pub fn client_address(peer: IpAddr, headers: &HeaderMap, trusted: &[IpRange]) -> IpAddr {
    let is_trusted = |ip: IpAddr| trusted.iter().any(|r| r.contains(ip));
    if !is_trusted(peer) {
        return peer;
    }
    let entries: Vec<&str> = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .collect();
    let mut client = peer;
    for entry in entries.iter().rev() {
        match parse_entry(entry) {
            Some(ip) if is_trusted(ip) => client = ip,
            Some(ip) => return ip,
            None => return client,
        }
    }
    client
}

/// An address as proxies write it: bare, or IPv6 in brackets, either with
/// a port (`[::1]:8080`, `10.0.0.1:80`).
fn parse_entry(entry: &str) -> Option<IpAddr> {
    if let Ok(ip) = entry.parse() {
        return Some(ip);
    }
    entry
        .parse::<SocketAddr>()
        .ok()
        .map(|a| a.ip())
        .or_else(|| {
            entry
                .strip_prefix('[')
                .and_then(|e| e.strip_suffix(']'))
                .and_then(|e| e.parse().ok())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranges(list: &[&str]) -> Vec<IpRange> {
        list.iter().map(|r| r.parse().unwrap()).collect()
    }

    #[test]
    fn the_client_is_the_right_most_untrusted_address() {
        let loopback = ranges(&IpRange::LOOPBACK);
        let proxies = ranges(&["127.0.0.0/8", "::1", "10.0.0.0/8"]);
        // (peer, X-Forwarded-For headers, trusted proxies, client)
        let table: &[(&str, &[&str], &[IpRange], &str)] = &[
            // No header: the peer.
            ("127.0.0.1", &[], &loopback, "127.0.0.1"),
            // One proxy: the address it saw.
            ("127.0.0.1", &["203.0.113.7"], &loopback, "203.0.113.7"),
            // A client-forged left-most entry is skipped.
            (
                "127.0.0.1",
                &["1.1.1.1, 203.0.113.7"],
                &loopback,
                "203.0.113.7",
            ),
            (
                "127.0.0.1",
                &["1.1.1.1", "203.0.113.7"],
                &loopback,
                "203.0.113.7",
            ),
            // Two trusted proxies in a row.
            (
                "127.0.0.1",
                &["6.6.6.6, 198.51.100.2, 10.1.2.3"],
                &proxies,
                "198.51.100.2",
            ),
            // A forged trusted-looking entry left of the real client changes nothing.
            (
                "127.0.0.1",
                &["10.9.9.9, 198.51.100.2"],
                &proxies,
                "198.51.100.2",
            ),
            // A peer that is not a trusted proxy is the client, header or not.
            ("192.0.2.1", &["1.1.1.1"], &loopback, "192.0.2.1"),
            // Every entry trusted: the left-most.
            ("127.0.0.1", &["10.0.0.1, 127.0.0.2"], &proxies, "10.0.0.1"),
            // Garbage ends the walk at the proxy that handed it on.
            (
                "127.0.0.1",
                &["1.1.1.1, junk, 10.0.0.4"],
                &proxies,
                "10.0.0.4",
            ),
            ("127.0.0.1", &["junk"], &loopback, "127.0.0.1"),
            // Ports and brackets as some proxies write them.
            (
                "127.0.0.1",
                &["[2001:db8::9]:443"],
                &loopback,
                "2001:db8::9",
            ),
            ("127.0.0.1", &["203.0.113.9:5555"], &loopback, "203.0.113.9"),
            ("::1", &["[2001:db8::7]"], &loopback, "2001:db8::7"),
            // An IPv4-mapped loopback peer is loopback.
            (
                "::ffff:127.0.0.1",
                &["203.0.113.7"],
                &loopback,
                "203.0.113.7",
            ),
            // No trusted proxies: the peer, always.
            ("127.0.0.1", &["203.0.113.7"], &[], "127.0.0.1"),
        ];
        for (peer, values, trusted, want) in table {
            let mut headers = HeaderMap::new();
            for v in *values {
                headers.append("x-forwarded-for", v.parse().unwrap());
            }
            let got = client_address(peer.parse().unwrap(), &headers, trusted);
            assert_eq!(got, want.parse::<IpAddr>().unwrap(), "{peer} {values:?}");
        }
    }
}
