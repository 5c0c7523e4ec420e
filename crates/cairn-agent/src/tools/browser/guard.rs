//! The verdict on one request a page makes, as `Fetch.requestPaused`
//! reports it: `[tools.http]`'s rules ([`NetClient`]) for http(s) and
//! WebSocket URLs (the host resolved and every address checked, like a
//! request of `http_request`), content that never leaves the browser
//! (`data:`, `blob:`, `about:`) let through, every other scheme refused
//! (`file:` above all).

use reqwest::Url;

use crate::tools::net::NetClient;

/// What becomes of a paused request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// It may go.
    Allow,
    /// It fails, for this reason.
    Refuse(String),
}

/// The verdict on a request for `url`.
pub async fn decide(net: &NetClient, url: &str) -> Verdict {
    let Ok(mut parsed) = Url::parse(url) else {
        return Verdict::Refuse(format!("`{url}` is not a URL"));
    };
    match parsed.scheme() {
        "data" | "blob" | "about" => return Verdict::Allow,
        "http" | "https" => {}
        // The rules speak of http(s); a WebSocket is judged as its handshake.
        "ws" => {
            let _ = parsed.set_scheme("http");
        }
        "wss" => {
            let _ = parsed.set_scheme("https");
        }
        other => {
            return Verdict::Refuse(format!(
                "scheme `{other}` is not allowed in the browser; use http or https"
            ));
        }
    }
    if let Err(why) = net.check_url(&parsed) {
        return Verdict::Refuse(why);
    }
    let host = parsed.host_str().unwrap_or_default();
    let port = parsed.port_or_known_default().unwrap_or(80);
    match net.permitted_addrs(host, port).await {
        Ok(_) => Verdict::Allow,
        Err(why) => Verdict::Refuse(why),
    }
}

/// Adds to `params` (of `Fetch.continueRequest`) the credentials bound to
/// `url`'s host: the page's `request` headers with the bound ones set, and
/// the URL with a bound query parameter. Chromium keeps such overrides for
/// this hop only, and pauses every redirect hop again, so each hop gets its
/// own host's credentials and no other's.
pub fn bind_credentials(
    net: &NetClient,
    url: &str,
    request: &serde_json::Value,
    params: &mut serde_json::Value,
) {
    let Some((bound, added)) = Url::parse(url).ok().and_then(|u| net.browser_binding(&u)) else {
        return;
    };
    let mut headers: Vec<serde_json::Value> = Vec::new();
    if let Some(map) = request["headers"].as_object() {
        for (name, value) in map {
            if added.iter().any(|(n, _)| n.eq_ignore_ascii_case(name)) {
                continue;
            }
            headers.push(serde_json::json!({"name": name, "value": value}));
        }
    }
    for (name, value) in added {
        headers.push(serde_json::json!({"name": name, "value": value}));
    }
    params["headers"] = serde_json::Value::Array(headers);
    if bound.as_str() != url {
        params["url"] = serde_json::Value::String(bound.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::http::HttpConfig;

    fn net(config: HttpConfig) -> NetClient {
        NetClient::new(config).unwrap()
    }

    #[test]
    fn a_bound_credential_is_added_to_its_hosts_requests_only() {
        use cairn_core::config::credentials::HostCredential;
        let credential = |host: &str, header: Option<&str>, query: Option<&str>| HostCredential {
            host: host.into(),
            header: header.map(Into::into),
            query: query.map(Into::into),
            value: secrecy::SecretString::from("v-123456789"),
        };
        let rules = net(HttpConfig {
            credentials: vec![
                credential("api.example.com", Some("Authorization"), None),
                credential("q.example.com:8443", None, Some("key")),
            ],
            ..HttpConfig::default()
        });
        let request = serde_json::json!({"headers": {"authorization": "mine", "Accept": "*/*"}});
        let mut params = serde_json::json!({"requestId": "1"});
        bind_credentials(&rules, "https://api.example.com/x", &request, &mut params);
        assert_eq!(
            params,
            serde_json::json!({"requestId": "1", "headers": [
                {"name": "Accept", "value": "*/*"},
                {"name": "authorization", "value": "v-123456789"},
            ]})
        );
        let mut params = serde_json::json!({"requestId": "2"});
        bind_credentials(
            &rules,
            "https://q.example.com:8443/s?a=1",
            &request,
            &mut params,
        );
        assert_eq!(
            params["url"],
            "https://q.example.com:8443/s?a=1&key=v-123456789"
        );
        for other in [
            "https://evil.example.com/",
            "https://q.example.com/s",
            "http://api.example.com.evil/",
        ] {
            let mut params = serde_json::json!({"requestId": "3"});
            bind_credentials(&rules, other, &request, &mut params);
            assert_eq!(params, serde_json::json!({"requestId": "3"}), "{other}");
        }
    }

    #[tokio::test]
    async fn local_content_goes_other_schemes_and_private_addresses_do_not() {
        let rules = net(HttpConfig::default());
        for url in [
            "data:text/html,<p>hi</p>",
            "blob:https://example.com/0a1b",
            "about:blank",
        ] {
            assert_eq!(decide(&rules, url).await, Verdict::Allow, "{url}");
        }
        for (url, why) in [
            ("file:///etc/passwd", "scheme `file`"),
            ("chrome://settings", "scheme `chrome`"),
            ("http://127.0.0.1:8080/secret", "private or local"),
            ("ws://127.0.0.1:9/socket", "private or local"),
            ("wss://[::1]/socket", "private or local"),
            (
                "http://169.254.169.254/latest/meta-data",
                "private or local",
            ),
            ("http://localhost:3000/", "local"),
            ("http://[64:ff9b::7f00:1]/", "private or local"),
            ("not a url", "not a URL"),
        ] {
            match decide(&rules, url).await {
                Verdict::Refuse(text) => assert!(text.contains(why), "{url}: {text}"),
                Verdict::Allow => panic!("{url} was allowed"),
            }
        }
    }

    #[tokio::test]
    async fn allowed_networks_and_hosts_are_the_http_tools_own() {
        let open = net(HttpConfig {
            allowed_private_networks: vec!["127.0.0.1".into()],
            ..HttpConfig::default()
        });
        assert_eq!(
            decide(&open, "http://127.0.0.1:8080/").await,
            Verdict::Allow
        );
        assert_eq!(decide(&open, "ws://127.0.0.1:8080/").await, Verdict::Allow);
        assert!(matches!(
            decide(&open, "http://127.0.0.2:8080/").await,
            Verdict::Refuse(_)
        ));
        let only = net(HttpConfig {
            allowed_hosts: vec!["example.com".into()],
            ..HttpConfig::default()
        });
        match decide(&only, "https://tracker.example.org/pixel").await {
            Verdict::Refuse(text) => assert!(text.contains("not in the allowed hosts"), "{text}"),
            Verdict::Allow => panic!("a host outside allowed_hosts went"),
        }
        let unblocked = net(HttpConfig {
            block_private_networks: false,
            ..HttpConfig::default()
        });
        assert_eq!(decide(&unblocked, "http://10.0.0.1/").await, Verdict::Allow);
    }
}
