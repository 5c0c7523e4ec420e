//! Credentials bound to hosts (`[[tools.http.credentials]]`): cairn adds
//! each to the requests whose host it is bound to, and to no other.
//!
//! With credentials configured, redirects are followed here, one hop at a
//! time, rather than by the HTTP client: each hop's URL passes the network
//! rules, then gets the credentials of its own host, so a redirect to
//! another host loses them. The model's own `Authorization` and `Cookie`
//! headers are dropped on a change of host too, as the client would. A hop
//! whose URL carries a credential's value to a host it is not bound to
//! (a server echoing the query into its `Location`) is refused.

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use reqwest::{Method, Response, StatusCode, Url};
use secrecy::ExposeSecret;

use super::{NetClient, ToolError};

/// Headers a request keeps only while the host stays the same.
const SENSITIVE: [HeaderName; 4] = [
    reqwest::header::AUTHORIZATION,
    reqwest::header::COOKIE,
    reqwest::header::PROXY_AUTHORIZATION,
    reqwest::header::WWW_AUTHENTICATE,
];

impl NetClient {
    /// The hosts that have a credential bound (for tool descriptions: the
    /// model learns that one exists, never its value).
    pub fn credential_hosts(&self) -> Vec<String> {
        let mut hosts: Vec<String> = Vec::new();
        for c in &self.rules.config.credentials {
            if !hosts.contains(&c.host) {
                hosts.push(c.host.clone());
            }
        }
        hosts
    }

    /// Sends `method url` (already checked) with the caller's `headers` and
    /// `body`, following redirects under the rules; each hop carries the
    /// credentials bound to its own host.
    pub async fn exchange(
        &self,
        method: Method,
        url: Url,
        headers: HeaderMap,
        body: Option<Vec<u8>>,
    ) -> Result<Response, ToolError> {
        let Some(manual) = &self.manual else {
            let mut request = self.client.request(method, url).headers(headers);
            if let Some(body) = body {
                request = request.body(body);
            }
            return self.send(request).await;
        };
        let (mut method, mut url, mut headers, mut body) = (method, url, headers, body);
        let max = self.rules.config.max_redirects;
        let mut hops = 0;
        loop {
            let (bound_url, bound_headers) = self.bind(&url, &headers);
            let mut request = manual
                .request(method.clone(), bound_url)
                .headers(bound_headers);
            if let Some(body) = &body {
                request = request.body(body.clone());
            }
            let response = self.send(request).await?;
            let Some(next) = redirect_target(&response, &url) else {
                return Ok(response);
            };
            if hops >= max {
                return Err(ToolError::Http(format!("more than {max} redirects")));
            }
            self.rules.check(&next).map_err(ToolError::NotPermitted)?;
            self.refuse_carried_value(&next)?;
            let status = response.status();
            if status == StatusCode::SEE_OTHER && method != Method::HEAD
                || matches!(status, StatusCode::MOVED_PERMANENTLY | StatusCode::FOUND)
                    && method == Method::POST
            {
                method = Method::GET;
                body = None;
                headers.remove(reqwest::header::CONTENT_TYPE);
                headers.remove(reqwest::header::CONTENT_LENGTH);
            }
            if (next.host_str(), next.port_or_known_default())
                != (url.host_str(), url.port_or_known_default())
            {
                for name in &SENSITIVE {
                    headers.remove(name);
                }
            }
            url = next;
            hops += 1;
        }
    }

    /// What the browser adds to its request for `url` (each hop is paused
    /// and asked again): the URL with the bound query parameters and the
    /// bound headers; `None` when no credential is bound to its host.
    pub fn browser_binding(&self, url: &Url) -> Option<(Url, Vec<(String, String)>)> {
        let (bound_url, headers) = self.bind(url, &HeaderMap::new());
        if headers.is_empty() && bound_url == *url {
            return None;
        }
        let headers = headers
            .iter()
            .map(|(name, value)| {
                let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
                (name.as_str().to_string(), value)
            })
            .collect();
        Some((bound_url, headers))
    }

    /// `url` and `headers` with the credentials bound to `url`'s host added.
    fn bind(&self, url: &Url, headers: &HeaderMap) -> (Url, HeaderMap) {
        let (mut url, mut headers) = (url.clone(), headers.clone());
        let host = url.host_str().unwrap_or_default().to_string();
        let port = url.port_or_known_default();
        for c in &self.rules.config.credentials {
            if !c.matches(&host, port) {
                continue;
            }
            let value = c.value.expose_secret();
            if let Some(name) = &c.header
                && let (Ok(name), Ok(mut value)) = (
                    HeaderName::from_bytes(name.as_bytes()),
                    HeaderValue::from_str(value),
                )
            {
                value.set_sensitive(true);
                headers.insert(name, value);
            }
            if let Some(name) = &c.query {
                url.query_pairs_mut().append_pair(name, value);
            }
        }
        (url, headers)
    }

    /// Refuses a hop whose URL holds a credential's value while its host is
    /// not the one the credential is bound to.
    fn refuse_carried_value(&self, next: &Url) -> Result<(), ToolError> {
        let host = next.host_str().unwrap_or_default();
        let port = next.port_or_known_default();
        let text = next.as_str();
        let decoded: String = next
            .query_pairs()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("&");
        for c in &self.rules.config.credentials {
            let value = c.value.expose_secret();
            if !c.matches(host, port) && (text.contains(value) || decoded.contains(value)) {
                return Err(ToolError::NotPermitted(format!(
                    "a redirect to `{host}` would carry the credential bound to `{}`",
                    c.host
                )));
            }
        }
        Ok(())
    }
}

/// Where a redirect response points, resolved against the URL it answered.
fn redirect_target(response: &Response, from: &Url) -> Option<Url> {
    if !matches!(
        response.status(),
        StatusCode::MOVED_PERMANENTLY
            | StatusCode::FOUND
            | StatusCode::SEE_OTHER
            | StatusCode::TEMPORARY_REDIRECT
            | StatusCode::PERMANENT_REDIRECT
    ) {
        return None;
    }
    let location = response.headers().get(reqwest::header::LOCATION)?;
    from.join(location.to_str().ok()?).ok()
}
