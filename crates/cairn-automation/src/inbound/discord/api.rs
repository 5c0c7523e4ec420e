//! The Discord REST API (v10) calls the inbound adapter makes, each with
//! `Authorization: Bot <token>` and a `DiscordBot (…)` User-Agent, as
//! Discord asks of bots. Rate limits are honoured two ways: a bucket
//! Discord said is empty (`X-RateLimit-Remaining: 0`) is waited out
//! (`X-RateLimit-Reset-After`) before the next call on it, and a 429 is
//! waited out (`retry_after`, else `Retry-After`) and the call made
//! again. The token travels in a header only and is scrubbed from every
//! error all the same; interaction tokens, which are in the path, never
//! reach an error (URLs are stripped).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::{Method, Url};
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::Value;
use tokio::time::Instant;

/// Why a call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// Rate limited for longer than a call waits: wait this long.
    #[error("Discord asked to wait {0:?} (rate limited)")]
    RetryAfter(Duration),
    /// Discord answered with an error status.
    #[error("Discord refused {what}: HTTP {status}: {message}")]
    Refused {
        /// The call.
        what: String,
        /// The HTTP status (401: the token is wrong).
        status: u16,
        /// Discord's `message`, scrubbed.
        message: String,
    },
    /// No answer, or not Discord's.
    #[error("cannot reach the Discord API ({what}): {message}")]
    Unreachable {
        /// The call.
        what: String,
        /// What went wrong, scrubbed.
        message: String,
    },
}

/// A Discord user (the bot itself, from `GET /users/@me`).
#[derive(Debug, Clone, Deserialize)]
pub struct User {
    /// Its snowflake.
    pub id: String,
    /// Its name.
    #[serde(default)]
    pub username: String,
    /// Whether it is a bot.
    #[serde(default)]
    pub bot: bool,
}

/// Waits this short are taken inside a call; longer ones are returned.
const RETRY_INLINE: Duration = Duration::from_secs(30);
/// 429s waited out in one call at most.
const RETRIES: u32 = 3;
/// The largest attachment the adapter downloads.
pub const DOWNLOAD_LIMIT: u64 = 20 * 1024 * 1024;
/// The hosts Discord serves attachments from.
const CDN_HOSTS: [&str; 2] = ["cdn.discordapp.com", "media.discordapp.net"];

/// What Discord said of its rate limit buckets.
#[derive(Debug, Default)]
struct Buckets {
    /// A route (method and path shape) → the bucket Discord named for it.
    routes: HashMap<String, String>,
    /// A bucket and its major parameter (a channel, an interaction) →
    /// when it has calls again, once Discord said none are left.
    empty_until: HashMap<String, Instant>,
}

/// Buckets remembered at most; past that the memory starts afresh.
const BUCKETS_KEPT: usize = 4_096;

impl Buckets {
    /// When a call on `route` for `major` may be made, if not now.
    fn wait_until(&self, route: &str, major: &str) -> Option<Instant> {
        let bucket = self.routes.get(route)?;
        let until = *self.empty_until.get(&format!("{bucket}:{major}"))?;
        (until > Instant::now()).then_some(until)
    }

    /// Takes in an answer's rate limit headers.
    fn learn(&mut self, route: &str, major: &str, headers: &reqwest::header::HeaderMap) {
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let Some(bucket) = header("x-ratelimit-bucket") else {
            return;
        };
        if self.routes.len() >= BUCKETS_KEPT || self.empty_until.len() >= BUCKETS_KEPT {
            *self = Self::default();
        }
        self.routes.insert(route.to_string(), bucket.to_string());
        let key = format!("{bucket}:{major}");
        let remaining = header("x-ratelimit-remaining").and_then(|v| v.parse::<u64>().ok());
        let reset_after = header("x-ratelimit-reset-after").and_then(seconds);
        match (remaining, reset_after) {
            (Some(0), Some(after)) => {
                self.empty_until.insert(key, Instant::now() + after);
            }
            _ => {
                self.empty_until.remove(&key);
            }
        }
    }
}

/// Seconds as Discord writes them (`0.35`, `2`), bounded to an hour.
fn seconds(text: &str) -> Option<Duration> {
    let s = text.trim().parse::<f64>().ok()?;
    (s.is_finite() && s >= 0.0).then(|| Duration::from_secs_f64(s.min(3_600.0)))
}

/// One call: its method, path, and what names its bucket.
pub struct Call<'a> {
    /// The HTTP method.
    pub method: Method,
    /// The path under the API's address, segment by segment (encoded here).
    pub path: &'a [&'a str],
    /// The route's shape for rate limits (`POST /channels/{}/messages`).
    pub route: &'a str,
    /// Its major parameter (the channel's id), which splits a bucket.
    pub major: &'a str,
    /// The JSON body.
    pub body: Option<Value>,
}

/// A client of one Discord bot.
#[derive(Clone)]
pub struct DiscordApi {
    token: SecretString,
    base: Url,
    http: reqwest::Client,
    buckets: Arc<Mutex<Buckets>>,
}

impl std::fmt::Debug for DiscordApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiscordApi")
            .field("base", &self.base.as_str())
            .finish_non_exhaustive()
    }
}

impl DiscordApi {
    /// A client of the bot with `token` at `api_url`
    /// (`https://discord.com/api/v10`).
    pub fn new(token: SecretString, api_url: &str, http: reqwest::Client) -> Result<Self, String> {
        let base = Url::parse(api_url.trim_end_matches('/'))
            .map_err(|e| format!("api_url: not a URL: {e}"))?;
        if base.cannot_be_a_base() {
            return Err("api_url: not an http(s) URL".into());
        }
        Ok(Self {
            token,
            base,
            http,
            buckets: Arc::default(),
        })
    }

    /// The token, for the gateway's Identify and Resume.
    pub(super) fn token(&self) -> &str {
        self.token.expose_secret()
    }

    fn scrub(&self, text: &str) -> String {
        let token = self.token.expose_secret();
        if token.is_empty() {
            text.to_string()
        } else {
            text.replace(token, "<token>")
        }
    }

    fn unreachable(&self, what: &str, message: &str) -> ApiError {
        ApiError::Unreachable {
            what: what.to_string(),
            message: self.scrub(message),
        }
    }

    fn buckets(&self) -> std::sync::MutexGuard<'_, Buckets> {
        self.buckets.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn url(&self, path: &[&str]) -> Url {
        let mut url = self.base.clone();
        if let Ok(mut segments) = url.path_segments_mut() {
            segments.pop_if_empty().extend(path);
        }
        url
    }

    /// Makes `call`: waits for its bucket, and waits out short 429s.
    pub async fn call(&self, call: &Call<'_>) -> Result<Value, ApiError> {
        let mut tries = 0;
        loop {
            let until = self.buckets().wait_until(call.route, call.major);
            if let Some(until) = until {
                tracing::debug!(
                    route = call.route,
                    "Discord bucket empty: waiting for its reset"
                );
                tokio::time::sleep_until(until).await;
            }
            match self.call_once(call).await {
                Err(ApiError::RetryAfter(wait)) if tries < RETRIES && wait <= RETRY_INLINE => {
                    tries += 1;
                    tracing::debug!(route = call.route, ?wait, "Discord rate limit: waiting");
                    tokio::time::sleep(wait).await;
                }
                other => return other,
            }
        }
    }

    async fn call_once(&self, call: &Call<'_>) -> Result<Value, ApiError> {
        let what = call.route;
        let mut request = self
            .http
            .request(call.method.clone(), self.url(call.path))
            .header(
                reqwest::header::AUTHORIZATION,
                format!("Bot {}", self.token.expose_secret()),
            )
            .header(
                reqwest::header::USER_AGENT,
                concat!(
                    "DiscordBot (https://github.com/cairn, ",
                    env!("CARGO_PKG_VERSION"),
                    ")"
                ),
            )
            .timeout(Duration::from_secs(30));
        if let Some(body) = &call.body {
            request = request.json(body);
        }
        let response = request
            .send()
            .await
            .map_err(|e| self.unreachable(what, &e.without_url().to_string()))?;
        let status = response.status();
        self.buckets()
            .learn(call.route, call.major, response.headers());
        let header_wait = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(seconds);
        let text = response
            .text()
            .await
            .map_err(|e| self.unreachable(what, &e.without_url().to_string()))?;
        let answer: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if status.as_u16() == 429 {
            // The body's `retry_after` is the precise one (seconds, a float).
            let wait = answer["retry_after"]
                .as_f64()
                .and_then(|s| seconds(&s.to_string()))
                .or(header_wait)
                .unwrap_or(Duration::from_secs(1));
            return Err(ApiError::RetryAfter(wait));
        }
        if !status.is_success() {
            let message = answer["message"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| status.canonical_reason().unwrap_or("error").to_string());
            return Err(ApiError::Refused {
                what: what.to_string(),
                status: status.as_u16(),
                message: self.scrub(&message),
            });
        }
        Ok(answer)
    }

    /// The bot's own user (checks the token).
    pub async fn me(&self) -> Result<User, ApiError> {
        let answer = self
            .call(&Call {
                method: Method::GET,
                path: &["users", "@me"],
                route: "GET /users/@me",
                major: "",
                body: None,
            })
            .await?;
        serde_json::from_value(answer)
            .map_err(|e| self.unreachable("GET /users/@me", &format!("an unexpected answer: {e}")))
    }

    /// The gateway's address (`GET /gateway/bot`).
    pub async fn gateway_url(&self) -> Result<String, ApiError> {
        let answer = self
            .call(&Call {
                method: Method::GET,
                path: &["gateway", "bot"],
                route: "GET /gateway/bot",
                major: "",
                body: None,
            })
            .await?;
        answer["url"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| self.unreachable("GET /gateway/bot", "no url in the answer"))
    }

    /// The direct message channel with `user` (opened if need be).
    pub async fn open_dm(&self, user: &str) -> Result<String, ApiError> {
        let what = "POST /users/@me/channels";
        let answer = self
            .call(&Call {
                method: Method::POST,
                path: &["users", "@me", "channels"],
                route: what,
                major: "",
                body: Some(serde_json::json!({ "recipient_id": user })),
            })
            .await?;
        answer["id"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| self.unreachable(what, "no id in the answer"))
    }

    /// Posts a message (`body`: `content`, `components`, …) in `channel`;
    /// returns its id.
    pub async fn post_message(&self, channel: &str, body: Value) -> Result<String, ApiError> {
        let answer = self
            .call(&Call {
                method: Method::POST,
                path: &["channels", channel, "messages"],
                route: "POST /channels/{}/messages",
                major: channel,
                body: Some(body),
            })
            .await?;
        answer["id"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| self.unreachable("POST /channels/{}/messages", "no id in the answer"))
    }

    /// Replaces a message's content and removes its buttons.
    pub async fn edit_message(
        &self,
        channel: &str,
        message: &str,
        content: &str,
    ) -> Result<(), ApiError> {
        self.call(&Call {
            method: Method::PATCH,
            path: &["channels", channel, "messages", message],
            route: "PATCH /channels/{}/messages/{}",
            major: channel,
            body: Some(serde_json::json!({"content": content, "components": []})),
        })
        .await
        .map(drop)
    }

    /// Adds the bot's reaction `emoji` to a message.
    pub async fn react(&self, channel: &str, message: &str, emoji: &str) -> Result<(), ApiError> {
        self.call(&Call {
            method: Method::PUT,
            path: &[
                "channels",
                channel,
                "messages",
                message,
                "reactions",
                emoji,
                "@me",
            ],
            route: "PUT /channels/{}/messages/{}/reactions/{}/@me",
            major: channel,
            body: None,
        })
        .await
        .map(drop)
    }

    /// Shows the bot typing in `channel` (for ten seconds).
    pub async fn typing(&self, channel: &str) -> Result<(), ApiError> {
        self.call(&Call {
            method: Method::POST,
            path: &["channels", channel, "typing"],
            route: "POST /channels/{}/typing",
            major: channel,
            body: None,
        })
        .await
        .map(drop)
    }

    /// Answers an interaction (a button press) with `body`.
    pub async fn interaction_callback(
        &self,
        id: &str,
        token: &str,
        body: Value,
    ) -> Result<(), ApiError> {
        self.call(&Call {
            method: Method::POST,
            path: &["interactions", id, token, "callback"],
            route: "POST /interactions/{}/{}/callback",
            major: id,
            body: Some(body),
        })
        .await
        .map(drop)
    }

    /// Whether an attachment may be fetched from `url`: Discord's CDN
    /// over HTTPS, or the API's own host (a stand-in's).
    fn may_fetch(&self, url: &Url) -> bool {
        let Some(host) = url.host_str() else {
            return false;
        };
        let same_as_api = self.base.host_str() == Some(host)
            && self.base.port_or_known_default() == url.port_or_known_default();
        same_as_api || (url.scheme() == "https" && CDN_HOSTS.contains(&host))
    }

    /// Downloads an attachment (at most [`DOWNLOAD_LIMIT`] bytes); its
    /// URL is signed, so no token is sent.
    pub async fn download(&self, url: &str) -> Result<Vec<u8>, ApiError> {
        const WHAT: &str = "attachment download";
        let parsed =
            Url::parse(url).map_err(|e| self.unreachable(WHAT, &format!("bad URL: {e}")))?;
        if !self.may_fetch(&parsed) {
            return Err(self.unreachable(WHAT, "the file is not on Discord's CDN"));
        }
        let response = self
            .http
            .get(parsed)
            .timeout(Duration::from_secs(60))
            .send()
            .await
            .map_err(|e| self.unreachable(WHAT, &e.without_url().to_string()))?;
        if !response.status().is_success() {
            return Err(self.unreachable(WHAT, &format!("HTTP {}", response.status().as_u16())));
        }
        let too_big =
            || self.unreachable(WHAT, &format!("the file is over {DOWNLOAD_LIMIT} bytes"));
        if response
            .content_length()
            .is_some_and(|n| n > DOWNLOAD_LIMIT)
        {
            return Err(too_big());
        }
        let bytes = response
            .bytes()
            .await
            .map_err(|e| self.unreachable(WHAT, &e.without_url().to_string()))?;
        if bytes.len() as u64 > DOWNLOAD_LIMIT {
            return Err(too_big());
        }
        Ok(bytes.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use reqwest::header::{HeaderMap, HeaderValue};

    use super::*;

    fn api() -> DiscordApi {
        DiscordApi::new(
            SecretString::from("T0KEN"),
            "http://127.0.0.1:9000/api/v10",
            cairn_llm::tls::client().unwrap(),
        )
        .unwrap()
    }

    #[test]
    fn attachments_come_only_from_discords_cdn_or_the_api_host() {
        let api = api();
        let ok = |u: &str| api.may_fetch(&Url::parse(u).unwrap());
        assert!(ok("https://cdn.discordapp.com/attachments/1/2/a.png?ex=1"));
        assert!(ok("https://media.discordapp.net/attachments/1/2/a.png"));
        assert!(ok("http://127.0.0.1:9000/files/a.png"));
        assert!(!ok("http://cdn.discordapp.com/a.png"));
        assert!(!ok("https://cdn.discordapp.com.evil.example/a.png"));
        assert!(!ok("http://127.0.0.1:9001/a.png"));
        assert_eq!(api.scrub("Bot T0KEN refused"), "Bot <token> refused");
    }

    #[test]
    fn paths_are_encoded_segment_by_segment() {
        let url = api().url(&["channels", "1", "messages", "2", "reactions", "👀", "@me"]);
        assert_eq!(
            url.as_str(),
            "http://127.0.0.1:9000/api/v10/channels/1/messages/2/reactions/%F0%9F%91%80/@me"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_empty_bucket_is_waited_out_for_its_major_parameter_only() {
        let mut buckets = Buckets::default();
        let mut headers = HeaderMap::new();
        headers.insert("x-ratelimit-bucket", HeaderValue::from_static("abcd"));
        headers.insert("x-ratelimit-remaining", HeaderValue::from_static("0"));
        headers.insert("x-ratelimit-reset-after", HeaderValue::from_static("1.5"));
        buckets.learn("POST /channels/{}/messages", "1", &headers);
        let until = buckets
            .wait_until("POST /channels/{}/messages", "1")
            .unwrap();
        assert_eq!(until - Instant::now(), Duration::from_millis(1500));
        assert!(
            buckets
                .wait_until("POST /channels/{}/messages", "2")
                .is_none()
        );
        assert!(
            buckets
                .wait_until("PATCH /channels/{}/messages/{}", "1")
                .is_none()
        );
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(
            buckets
                .wait_until("POST /channels/{}/messages", "1")
                .is_none()
        );
        // Calls left again: no wait.
        headers.insert("x-ratelimit-remaining", HeaderValue::from_static("4"));
        buckets.learn("POST /channels/{}/messages", "1", &headers);
        assert!(buckets.empty_until.is_empty());
        assert_eq!(seconds("0.35"), Some(Duration::from_millis(350)));
        assert_eq!(seconds("-1"), None);
    }
}
