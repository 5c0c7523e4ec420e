//! The Graph API calls the WhatsApp adapter makes: messages (text,
//! interactive reply buttons, reactions) sent from the business number
//! with `POST {api_url}/{phone_number_id}/messages`, and media fetched by
//! id (`GET {api_url}/{media_id}` gives a short-lived URL, fetched with the
//! same bearer token). Rate limits (HTTP 429 or Meta's throttling codes)
//! are waited out and tried again a few times; the token travels in a
//! header only, and errors carry no URL.

use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::{Value, json};

/// The most bytes of media the adapter downloads.
pub const DOWNLOAD_LIMIT: u64 = 25 * 1024 * 1024;

/// Tries of a rate-limited call before its error is given up to.
const TRIES: u32 = 4;

/// Why a call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GraphError {
    /// The Graph API answered with an error.
    #[error("the Graph API refused {what} (HTTP {status}, code {code}): {message}")]
    Refused {
        /// What was asked.
        what: String,
        /// The HTTP status.
        status: u16,
        /// Meta's error code.
        code: i64,
        /// Meta's message.
        message: String,
    },
    /// No answer, or not the Graph API's.
    #[error("cannot reach the Graph API ({what}): {message}")]
    Unreachable {
        /// What was asked.
        what: String,
        /// What went wrong.
        message: String,
    },
}

impl GraphError {
    /// Whether Meta asks to slow down: HTTP 429, or its throttling codes
    /// (4 app, 80007 account, 130429 throughput, 131048 spam, 131056 pair).
    fn throttled(&self) -> bool {
        matches!(self, Self::Refused { status, code, .. }
            if *status == 429 || [4, 80007, 130_429, 131_048, 131_056].contains(code))
    }
}

#[derive(Deserialize)]
struct ErrorEnvelope {
    error: ErrorBody,
}

#[derive(Deserialize)]
struct ErrorBody {
    #[serde(default)]
    message: String,
    #[serde(default)]
    code: i64,
}

#[derive(Deserialize)]
struct Sent {
    #[serde(default)]
    messages: Vec<SentId>,
}

#[derive(Deserialize)]
struct SentId {
    id: String,
}

#[derive(Deserialize)]
struct MediaInfo {
    url: String,
    #[serde(default)]
    file_size: Option<u64>,
}

/// A client of one business number.
#[derive(Clone)]
pub struct GraphApi {
    token: SecretString,
    base: String,
    phone_number_id: String,
    http: reqwest::Client,
    /// The first wait after a throttled call (doubled for each next try).
    backoff: Duration,
}

impl std::fmt::Debug for GraphApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GraphApi")
            .field("base", &self.base)
            .field("phone_number_id", &self.phone_number_id)
            .finish_non_exhaustive()
    }
}

impl GraphApi {
    /// A client sending from `phone_number_id` with `token` at `api_url`.
    pub fn new(
        token: SecretString,
        api_url: &str,
        phone_number_id: &str,
        http: reqwest::Client,
    ) -> Self {
        Self {
            token,
            base: api_url.trim_end_matches('/').to_string(),
            phone_number_id: phone_number_id.to_string(),
            http,
            backoff: Duration::from_secs(1),
        }
    }

    /// Waits `backoff` after the first throttled call (tests shorten it).
    #[must_use]
    pub fn with_backoff(mut self, backoff: Duration) -> Self {
        self.backoff = backoff;
        self
    }

    fn scrub(&self, text: &str) -> String {
        let token = self.token.expose_secret();
        if token.is_empty() {
            text.to_string()
        } else {
            text.replace(token, "<access token>")
        }
    }

    /// One request, tried again while Meta throttles it.
    async fn call(
        &self,
        what: &str,
        request: reqwest::RequestBuilder,
    ) -> Result<Value, GraphError> {
        let mut wait = self.backoff;
        let mut tries = 0;
        loop {
            tries += 1;
            let Some(attempt) = request.try_clone() else {
                return Err(self.unreachable(what, "the request cannot be repeated".into()));
            };
            match self.once(what, attempt).await {
                Err((e, after)) if e.throttled() && tries < TRIES => {
                    let pause = after.unwrap_or(wait).min(Duration::from_secs(60));
                    tracing::warn!(error = %e, retry_in = ?pause, "the Graph API asks to slow down");
                    tokio::time::sleep(pause).await;
                    wait = (wait * 2).min(Duration::from_secs(30));
                }
                other => return other.map_err(|(e, _)| e),
            }
        }
    }

    fn unreachable(&self, what: &str, message: String) -> GraphError {
        GraphError::Unreachable {
            what: what.to_string(),
            message: self.scrub(&message),
        }
    }

    /// The answer, or the error with the wait a `Retry-After` asked for.
    async fn once(
        &self,
        what: &str,
        request: reqwest::RequestBuilder,
    ) -> Result<Value, (GraphError, Option<Duration>)> {
        let response = request
            .bearer_auth(self.token.expose_secret())
            .send()
            .await
            .map_err(|e| (self.unreachable(what, e.without_url().to_string()), None))?;
        let status = response.status();
        let after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse().ok())
            .map(Duration::from_secs);
        let text = response
            .text()
            .await
            .map_err(|e| (self.unreachable(what, e.without_url().to_string()), None))?;
        if status.is_success() {
            return serde_json::from_str(&text).map_err(|_| {
                let message = format!("HTTP {} without the Graph API's answer", status.as_u16());
                (self.unreachable(what, message), None)
            });
        }
        let (code, message) = match serde_json::from_str::<ErrorEnvelope>(&text) {
            Ok(envelope) => (envelope.error.code, self.scrub(&envelope.error.message)),
            Err(_) => (0, "no error description".to_string()),
        };
        let error = GraphError::Refused {
            what: what.to_string(),
            status: status.as_u16(),
            code,
            message,
        };
        Err((error, after))
    }

    /// Sends a message of `kind` with `content` to `to`, optionally as a
    /// reply to `context`; returns its id.
    async fn send(
        &self,
        to: &str,
        kind: &str,
        content: Value,
        context: Option<&str>,
    ) -> Result<String, GraphError> {
        let mut body = json!({
            "messaging_product": "whatsapp",
            "recipient_type": "individual",
            "to": to,
            "type": kind,
        });
        body[kind] = content;
        if let Some(id) = context {
            body["context"] = json!({ "message_id": id });
        }
        let url = format!("{}/{}/messages", self.base, self.phone_number_id);
        let what = format!("sending a {kind} message");
        let answer = self.call(&what, self.http.post(url).json(&body)).await?;
        let sent: Sent = serde_json::from_value(answer).map_err(|e| {
            self.unreachable(&what, format!("an answer of an unexpected shape: {e}"))
        })?;
        sent.messages
            .into_iter()
            .next()
            .map(|m| m.id)
            .ok_or_else(|| self.unreachable(&what, "no message id in the answer".into()))
    }

    /// The business number's name and number as Meta shows them (checks
    /// the access token and the phone number id).
    pub async fn phone_number(&self) -> Result<String, GraphError> {
        let url = format!(
            "{}/{}?fields=display_phone_number,verified_name",
            self.base, self.phone_number_id
        );
        let what = "reading the phone number";
        let answer = self.call(what, self.http.get(url)).await?;
        let field = |key: &str| answer[key].as_str().unwrap_or("?").to_string();
        Ok(format!(
            "{} ({})",
            field("verified_name"),
            field("display_phone_number")
        ))
    }

    /// Sends `text` to `to` (as a reply to `context`, when given).
    pub async fn send_text(
        &self,
        to: &str,
        text: &str,
        context: Option<&str>,
    ) -> Result<String, GraphError> {
        let content = json!({ "preview_url": false, "body": text });
        self.send(to, "text", content, context).await
    }

    /// Sends `text` with up to three reply buttons, each `(id, title)`.
    pub async fn send_buttons(
        &self,
        to: &str,
        text: &str,
        buttons: &[(String, &str)],
    ) -> Result<String, GraphError> {
        let buttons: Vec<Value> = buttons
            .iter()
            .map(|(id, title)| json!({"type": "reply", "reply": {"id": id, "title": title}}))
            .collect();
        let content = json!({
            "type": "button",
            "body": { "text": text },
            "action": { "buttons": buttons },
        });
        self.send(to, "interactive", content, None).await
    }

    /// Sets our reaction on the message `message` of `to`'s chat.
    pub async fn react(&self, to: &str, message: &str, emoji: &str) -> Result<(), GraphError> {
        let content = json!({ "message_id": message, "emoji": emoji });
        self.send(to, "reaction", content, None).await.map(drop)
    }

    /// Downloads the media `id` (at most [`DOWNLOAD_LIMIT`] bytes).
    pub async fn download(&self, id: &str) -> Result<Vec<u8>, GraphError> {
        let what = "fetching media";
        let info = self
            .call(what, self.http.get(format!("{}/{id}", self.base)))
            .await?;
        let info: MediaInfo = serde_json::from_value(info).map_err(|e| {
            self.unreachable(what, format!("an answer of an unexpected shape: {e}"))
        })?;
        let too_big = || self.unreachable(what, format!("the file is over {DOWNLOAD_LIMIT} bytes"));
        if info.file_size.is_some_and(|n| n > DOWNLOAD_LIMIT) {
            return Err(too_big());
        }
        let response = self
            .http
            .get(&info.url)
            .bearer_auth(self.token.expose_secret())
            .send()
            .await
            .map_err(|e| self.unreachable(what, e.without_url().to_string()))?;
        if !response.status().is_success() {
            let message = format!("HTTP {}", response.status().as_u16());
            return Err(self.unreachable(what, message));
        }
        if response
            .content_length()
            .is_some_and(|n| n > DOWNLOAD_LIMIT)
        {
            return Err(too_big());
        }
        let bytes = response
            .bytes()
            .await
            .map_err(|e| self.unreachable(what, e.without_url().to_string()))?;
        if bytes.len() as u64 > DOWNLOAD_LIMIT {
            return Err(too_big());
        }
        Ok(bytes.to_vec())
    }
}
