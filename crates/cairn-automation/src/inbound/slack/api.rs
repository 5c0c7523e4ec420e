//! The Slack Web API calls the inbound adapter makes: each a POST of JSON
//! to `{api_url}{method}` with a bearer token, the bot's (`xoxb-…`) but
//! for `apps.connections.open`, which takes the app-level token
//! (`xapp-…`). Slack answers `{"ok": false, "error": …}` on a refusal and
//! HTTP 429 with `Retry-After` when rate limited; a short wait is honoured
//! here, a longer one is the caller's. Tokens travel in headers, never in
//! URLs, and are scrubbed from every error all the same.

use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::{Value, json};

/// Why a call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// Rate limited: wait this long (the answer's `Retry-After`).
    #[error("Slack asked to wait {0:?} (rate limited)")]
    RetryAfter(Duration),
    /// The Web API answered `ok: false`.
    #[error("Slack refused {method}: {error}")]
    Refused {
        /// The method called.
        method: String,
        /// Its `error` (`invalid_auth`, `channel_not_found`, …).
        error: String,
    },
    /// No answer, or not the Web API's.
    #[error("cannot reach the Slack Web API ({method}): {message}")]
    Unreachable {
        /// The method called.
        method: String,
        /// What went wrong, scrubbed.
        message: String,
    },
}

/// `auth.test`'s answer: who the bot is.
#[derive(Debug, Clone, Deserialize)]
pub struct Identity {
    /// The bot's user id: its own messages are ignored, `<@id>` mentions it.
    pub user_id: String,
    /// The workspace's id, part of each chat's session.
    pub team_id: String,
    /// The bot user's name.
    #[serde(default)]
    pub user: Option<String>,
    /// The bot's id (`B…`), on the messages it posts.
    #[serde(default)]
    pub bot_id: Option<String>,
}

/// Waits this short are taken inside a call; longer ones are returned.
const RETRY_INLINE: Duration = Duration::from_secs(30);

/// The largest file the adapter downloads.
pub const DOWNLOAD_LIMIT: u64 = 20 * 1024 * 1024;

/// A client of one Slack app.
#[derive(Clone)]
pub struct SlackApi {
    bot_token: SecretString,
    app_token: SecretString,
    base: String,
    http: reqwest::Client,
}

impl std::fmt::Debug for SlackApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlackApi")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

impl SlackApi {
    /// A client of the app with these tokens at `api_url`.
    pub fn new(
        bot_token: SecretString,
        app_token: SecretString,
        api_url: &str,
        http: reqwest::Client,
    ) -> Self {
        Self {
            bot_token,
            app_token,
            base: format!("{}/", api_url.trim_end_matches('/')),
            http,
        }
    }

    fn scrub(&self, text: &str) -> String {
        let mut text = text.to_string();
        for token in [&self.bot_token, &self.app_token] {
            let token = token.expose_secret();
            if !token.is_empty() {
                text = text.replace(token, "<token>");
            }
        }
        text
    }

    fn unreachable(&self, method: &str, message: &str) -> ApiError {
        ApiError::Unreachable {
            method: method.to_string(),
            message: self.scrub(message),
        }
    }

    /// Calls `method` with `body` under `token`; a 429 asking for a short
    /// wait is waited out and the call made again, twice at most.
    async fn call(
        &self,
        method: &str,
        token: &SecretString,
        body: &Value,
    ) -> Result<Value, ApiError> {
        let mut tries = 0;
        loop {
            match self.call_once(method, token, body).await {
                Err(ApiError::RetryAfter(wait)) if tries < 2 && wait <= RETRY_INLINE => {
                    tries += 1;
                    tracing::debug!(method, ?wait, "Slack rate limit: waiting");
                    tokio::time::sleep(wait).await;
                }
                other => return other,
            }
        }
    }

    async fn call_once(
        &self,
        method: &str,
        token: &SecretString,
        body: &Value,
    ) -> Result<Value, ApiError> {
        let response = self
            .http
            .post(format!("{}{method}", self.base))
            .bearer_auth(token.expose_secret())
            .json(body)
            .timeout(Duration::from_secs(30))
            .send()
            .await
            .map_err(|e| self.unreachable(method, &e.without_url().to_string()))?;
        let status = response.status();
        if status.as_u16() == 429 {
            let wait = response
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .unwrap_or(1);
            return Err(ApiError::RetryAfter(Duration::from_secs(wait)));
        }
        let text = response
            .text()
            .await
            .map_err(|e| self.unreachable(method, &e.without_url().to_string()))?;
        let answer: Value = serde_json::from_str(&text).map_err(|_| {
            self.unreachable(
                method,
                &format!("HTTP {} without the Web API's answer", status.as_u16()),
            )
        })?;
        if answer["ok"].as_bool() != Some(true) {
            return Err(ApiError::Refused {
                method: method.to_string(),
                error: self.scrub(answer["error"].as_str().unwrap_or("no error given")),
            });
        }
        Ok(answer)
    }

    async fn bot(&self, method: &str, body: Value) -> Result<Value, ApiError> {
        self.call(method, &self.bot_token, &body).await
    }

    /// The bot's identity (checks the bot token).
    pub async fn auth_test(&self) -> Result<Identity, ApiError> {
        let answer = self.bot("auth.test", json!({})).await?;
        serde_json::from_value(answer).map_err(|e| {
            self.unreachable(
                "auth.test",
                &format!("an answer of an unexpected shape: {e}"),
            )
        })
    }

    /// A fresh Socket Mode WebSocket URL (each is good for one connection).
    pub async fn open_connection(&self) -> Result<String, ApiError> {
        let answer = self
            .call("apps.connections.open", &self.app_token, &json!({}))
            .await?;
        answer["url"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| self.unreachable("apps.connections.open", "no url in the answer"))
    }

    /// Posts `text` (mrkdwn) to `channel`, in the thread `thread` if any,
    /// with optional Block Kit `blocks`; returns the message's `ts`.
    pub async fn post_message(
        &self,
        channel: &str,
        thread: Option<&str>,
        text: &str,
        blocks: Option<Value>,
    ) -> Result<String, ApiError> {
        let mut body = json!({"channel": channel, "text": text});
        if let Some(thread) = thread {
            body["thread_ts"] = thread.into();
        }
        if let Some(blocks) = blocks {
            body["blocks"] = blocks;
        }
        let answer = self.bot("chat.postMessage", body).await?;
        answer["ts"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| self.unreachable("chat.postMessage", "no ts in the answer"))
    }

    /// Replaces a message's text and removes its blocks (an approval's
    /// buttons): Slack keeps the old blocks unless given an empty list.
    pub async fn update(&self, channel: &str, ts: &str, text: &str) -> Result<(), ApiError> {
        let body = json!({"channel": channel, "ts": ts, "text": text, "blocks": []});
        self.bot("chat.update", body).await.map(drop)
    }

    /// Adds the reaction `name` (`eyes`) to a message.
    pub async fn react(&self, channel: &str, ts: &str, name: &str) -> Result<(), ApiError> {
        let body = json!({"channel": channel, "timestamp": ts, "name": name});
        match self.bot("reactions.add", body).await {
            Err(ApiError::Refused { error, .. }) if error == "already_reacted" => Ok(()),
            other => other.map(drop),
        }
    }

    /// A message only `user` sees in `channel`.
    pub async fn post_ephemeral(
        &self,
        channel: &str,
        user: &str,
        text: &str,
    ) -> Result<(), ApiError> {
        let body = json!({"channel": channel, "user": user, "text": text});
        self.bot("chat.postEphemeral", body).await.map(drop)
    }

    /// Whether the bot token may be sent to `url`: Slack's own hosts, or
    /// the API's host (a stand-in's), over HTTPS unless it is the API's.
    fn may_fetch(&self, url: &reqwest::Url) -> bool {
        let Some(host) = url.host_str() else {
            return false;
        };
        let api = reqwest::Url::parse(&self.base).ok();
        let same_as_api = api.as_ref().is_some_and(|a| {
            a.host_str() == Some(host) && a.port_or_known_default() == url.port_or_known_default()
        });
        same_as_api
            || (url.scheme() == "https" && (host == "slack.com" || host.ends_with(".slack.com")))
    }

    /// Downloads a file's `url_private` with the bot token (at most
    /// [`DOWNLOAD_LIMIT`] bytes).
    pub async fn download(&self, url: &str) -> Result<Vec<u8>, ApiError> {
        const WHAT: &str = "file download";
        let parsed = reqwest::Url::parse(url)
            .map_err(|e| self.unreachable(WHAT, &format!("bad URL: {e}")))?;
        if !self.may_fetch(&parsed) {
            return Err(self.unreachable(WHAT, "the file is not on a Slack host"));
        }
        let response = self
            .http
            .get(parsed)
            .bearer_auth(self.bot_token.expose_secret())
            .timeout(Duration::from_secs(60))
            .send()
            .await
            .map_err(|e| self.unreachable(WHAT, &e.without_url().to_string()))?;
        if !response.status().is_success() {
            return Err(self.unreachable(WHAT, &format!("HTTP {}", response.status().as_u16())));
        }
        if response
            .content_length()
            .is_some_and(|n| n > DOWNLOAD_LIMIT)
        {
            return Err(self.unreachable(WHAT, &format!("the file is over {DOWNLOAD_LIMIT} bytes")));
        }
        let bytes = response
            .bytes()
            .await
            .map_err(|e| self.unreachable(WHAT, &e.without_url().to_string()))?;
        if bytes.len() as u64 > DOWNLOAD_LIMIT {
            return Err(self.unreachable(WHAT, &format!("the file is over {DOWNLOAD_LIMIT} bytes")));
        }
        Ok(bytes.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bot_token_goes_only_to_slack_or_the_api_host() {
        let api = SlackApi::new(
            SecretString::from("xoxb-1"),
            SecretString::from("xapp-1"),
            "http://127.0.0.1:9000/api",
            cairn_llm::tls::client().unwrap(),
        );
        let ok = |u: &str| api.may_fetch(&reqwest::Url::parse(u).unwrap());
        assert!(ok("https://files.slack.com/files-pri/T1-F1/a.png"));
        assert!(ok("http://127.0.0.1:9000/files/a.png"));
        assert!(!ok("http://files.slack.com/a.png"));
        assert!(!ok("https://evil.example/slack.com/a.png"));
        assert!(!ok("https://notslack.com/a.png"));
        assert!(!ok("http://127.0.0.1:9001/a.png"));
        assert_eq!(
            api.scrub("bad xoxb-1 and xapp-1"),
            "bad <token> and <token>"
        );
    }
}
