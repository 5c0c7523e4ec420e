//! The Telegram Bot API calls the inbound adapter makes, each a POST of
//! JSON to `{api_url}/bot{token}/{method}`. The token is part of the path,
//! so every error is stripped of URLs and scrubbed of the token.

use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// Why a call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// Flood control: wait this long (the answer's `retry_after`).
    #[error("Telegram asked to wait {0:?} (flood control)")]
    RetryAfter(Duration),
    /// The Bot API answered `ok: false`.
    #[error("Telegram refused {method}: {description}")]
    Refused {
        /// The method called.
        method: String,
        /// Its `error_code` (an HTTP status).
        code: u16,
        /// Its `description`.
        description: String,
    },
    /// No answer, or not the Bot API's.
    #[error("cannot reach the Telegram Bot API ({method}): {message}")]
    Unreachable {
        /// The method called.
        method: String,
        /// What went wrong, scrubbed.
        message: String,
    },
}

/// The Bot API's envelope.
#[derive(Deserialize)]
struct Envelope {
    ok: bool,
    #[serde(default)]
    result: Option<Value>,
    #[serde(default)]
    error_code: Option<u16>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    parameters: Option<Parameters>,
}

#[derive(Deserialize)]
struct Parameters {
    #[serde(default)]
    retry_after: Option<u64>,
}

/// `getMe`'s answer.
#[derive(Debug, Clone, Deserialize)]
pub struct Bot {
    /// The bot's user id.
    pub id: i64,
    /// Its display name.
    pub first_name: String,
    /// Its `@username`, without the `@`.
    #[serde(default)]
    pub username: Option<String>,
}

/// One update from `getUpdates` (the kinds the adapter reads).
#[derive(Debug, Clone, Deserialize)]
pub struct Update {
    /// Its id; the next poll asks for ids above it.
    pub update_id: i64,
    /// A new message.
    #[serde(default)]
    pub message: Option<Message>,
    /// A button pressed.
    #[serde(default)]
    pub callback_query: Option<CallbackQuery>,
}

/// A message (the fields the adapter reads).
#[derive(Debug, Clone, Deserialize)]
pub struct Message {
    /// Its id in the chat.
    pub message_id: i64,
    /// Who sent it.
    #[serde(default)]
    pub from: Option<User>,
    /// Where.
    pub chat: Chat,
    /// Its text.
    #[serde(default)]
    pub text: Option<String>,
    /// A photo's or document's caption.
    #[serde(default)]
    pub caption: Option<String>,
    /// A photo, in several sizes (largest last).
    #[serde(default)]
    pub photo: Vec<PhotoSize>,
    /// A file.
    #[serde(default)]
    pub document: Option<Document>,
    /// The message this one answers.
    #[serde(default)]
    pub reply_to_message: Option<Box<Message>>,
}

/// A Telegram user.
#[derive(Debug, Clone, Deserialize)]
pub struct User {
    /// Their id.
    pub id: i64,
    /// Whether it is a bot.
    #[serde(default)]
    pub is_bot: bool,
}

/// A chat.
#[derive(Debug, Clone, Deserialize)]
pub struct Chat {
    /// Its id.
    pub id: i64,
    /// `private`, `group`, `supergroup` or `channel`.
    #[serde(rename = "type")]
    pub kind: String,
}

/// One size of a photo.
#[derive(Debug, Clone, Deserialize)]
pub struct PhotoSize {
    /// What `getFile` takes.
    pub file_id: String,
    /// Bytes, when known.
    #[serde(default)]
    pub file_size: Option<u64>,
}

/// A file sent as a document.
#[derive(Debug, Clone, Deserialize)]
pub struct Document {
    /// What `getFile` takes.
    pub file_id: String,
    /// Its name, when the sender's app gave one.
    #[serde(default)]
    pub file_name: Option<String>,
    /// Bytes, when known.
    #[serde(default)]
    pub file_size: Option<u64>,
}

/// A button press.
#[derive(Debug, Clone, Deserialize)]
pub struct CallbackQuery {
    /// Its id, for `answerCallbackQuery`.
    pub id: String,
    /// Who pressed.
    pub from: User,
    /// The message the button is on.
    #[serde(default)]
    pub message: Option<Message>,
    /// The button's data.
    #[serde(default)]
    pub data: Option<String>,
}

#[derive(Deserialize)]
struct SentMessage {
    message_id: i64,
}

#[derive(Deserialize)]
struct FileInfo {
    #[serde(default)]
    file_path: Option<String>,
}

/// A client of one bot.
#[derive(Clone)]
pub struct BotApi {
    token: SecretString,
    base: String,
    http: reqwest::Client,
}

impl std::fmt::Debug for BotApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BotApi")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

/// Telegram's limit on the files a bot may download.
pub const DOWNLOAD_LIMIT: u64 = 20 * 1024 * 1024;

impl BotApi {
    /// A client of the bot with `token` at `api_url`.
    pub fn new(token: SecretString, api_url: &str, http: reqwest::Client) -> Self {
        Self {
            token,
            base: api_url.trim_end_matches('/').to_string(),
            http,
        }
    }

    fn scrub(&self, text: &str) -> String {
        let token = self.token.expose_secret();
        if token.is_empty() {
            text.to_string()
        } else {
            text.replace(token, "<bot token>")
        }
    }

    /// Calls `method` with `body`; `timeout` bounds the whole request
    /// (long polls need more than the client's default).
    pub async fn call<T: DeserializeOwned>(
        &self,
        method: &str,
        body: Value,
        timeout: Option<Duration>,
    ) -> Result<T, ApiError> {
        let url = format!("{}/bot{}/{method}", self.base, self.token.expose_secret());
        let mut request = self.http.post(url).json(&body);
        if let Some(t) = timeout {
            request = request.timeout(t);
        }
        let unreachable = |message: String| ApiError::Unreachable {
            method: method.to_string(),
            message: self.scrub(&message),
        };
        let response = request
            .send()
            .await
            .map_err(|e| unreachable(e.without_url().to_string()))?;
        let status = response.status();
        let text = response
            .text()
            .await
            .map_err(|e| unreachable(e.without_url().to_string()))?;
        let envelope: Envelope = serde_json::from_str(&text).map_err(|_| {
            unreachable(format!(
                "HTTP {} without the Bot API's answer",
                status.as_u16()
            ))
        })?;
        if let Some(secs) = envelope.parameters.as_ref().and_then(|p| p.retry_after) {
            return Err(ApiError::RetryAfter(Duration::from_secs(secs)));
        }
        if !envelope.ok {
            return Err(ApiError::Refused {
                method: method.to_string(),
                code: envelope.error_code.unwrap_or(status.as_u16()),
                description: self
                    .scrub(envelope.description.as_deref().unwrap_or("no description")),
            });
        }
        serde_json::from_value(envelope.result.unwrap_or(Value::Null))
            .map_err(|e| unreachable(format!("an answer of an unexpected shape: {e}")))
    }

    /// The bot's identity (checks the token).
    pub async fn get_me(&self) -> Result<Bot, ApiError> {
        self.call("getMe", json!({}), None).await
    }

    /// Stops a webhook, which would keep `getUpdates` from working.
    pub async fn delete_webhook(&self) -> Result<(), ApiError> {
        self.call::<Value>("deleteWebhook", json!({}), None)
            .await
            .map(drop)
    }

    /// Registers the commands the app offers in its menu.
    pub async fn set_my_commands(&self, commands: &[(&str, &str)]) -> Result<(), ApiError> {
        let list: Vec<Value> = commands
            .iter()
            .map(|(c, d)| json!({"command": c, "description": d}))
            .collect();
        self.call::<Value>("setMyCommands", json!({ "commands": list }), None)
            .await
            .map(drop)
    }

    /// Updates from `offset` on, waiting up to `wait` for one.
    pub async fn get_updates(&self, offset: i64, wait: Duration) -> Result<Vec<Update>, ApiError> {
        let body = json!({
            "offset": offset,
            "timeout": wait.as_secs(),
            "allowed_updates": ["message", "callback_query"],
        });
        self.call("getUpdates", body, Some(wait + Duration::from_secs(10)))
            .await
    }

    /// Sends `text` (HTML when `html`) to `chat`, with an optional inline
    /// keyboard; returns the message id.
    pub async fn send_message(
        &self,
        chat: i64,
        text: &str,
        html: bool,
        keyboard: Option<Value>,
    ) -> Result<i64, ApiError> {
        let mut body = json!({"chat_id": chat, "text": text});
        if html {
            body["parse_mode"] = "HTML".into();
        }
        if let Some(k) = keyboard {
            body["reply_markup"] = k;
        }
        let sent: SentMessage = self.call("sendMessage", body, None).await?;
        Ok(sent.message_id)
    }

    /// Replaces a message's text (and removes its keyboard).
    pub async fn edit_message(
        &self,
        chat: i64,
        message: i64,
        text: &str,
        html: bool,
    ) -> Result<(), ApiError> {
        let mut body = json!({"chat_id": chat, "message_id": message, "text": text});
        if html {
            body["parse_mode"] = "HTML".into();
        }
        match self.call::<Value>("editMessageText", body, None).await {
            // The same text again is not an error worth reporting.
            Err(ApiError::Refused { description, .. })
                if description.contains("message is not modified") =>
            {
                Ok(())
            }
            other => other.map(drop),
        }
    }

    /// Shows "typing…" in `chat` for a few seconds.
    pub async fn typing(&self, chat: i64) -> Result<(), ApiError> {
        self.call::<Value>(
            "sendChatAction",
            json!({"chat_id": chat, "action": "typing"}),
            None,
        )
        .await
        .map(drop)
    }

    /// Sets the bot's one reaction on a message (`setMessageReaction`).
    pub async fn react(&self, chat: i64, message: i64, emoji: &str) -> Result<(), ApiError> {
        self.call::<Value>(
            "setMessageReaction",
            json!({
                "chat_id": chat,
                "message_id": message,
                "reaction": [{"type": "emoji", "emoji": emoji}],
            }),
            None,
        )
        .await
        .map(drop)
    }

    /// Acknowledges a button press, with a short toast.
    pub async fn answer_callback(&self, id: &str, text: &str) -> Result<(), ApiError> {
        self.call::<Value>(
            "answerCallbackQuery",
            json!({"callback_query_id": id, "text": text}),
            None,
        )
        .await
        .map(drop)
    }

    /// Downloads a file by id (at most [`DOWNLOAD_LIMIT`] bytes).
    pub async fn download(&self, file_id: &str) -> Result<Vec<u8>, ApiError> {
        let info: FileInfo = self
            .call("getFile", json!({"file_id": file_id}), None)
            .await?;
        let unreachable = |message: String| ApiError::Unreachable {
            method: "file download".into(),
            message: self.scrub(&message),
        };
        let path = info
            .file_path
            .ok_or_else(|| unreachable("getFile gave no file_path".into()))?;
        let url = format!(
            "{}/file/bot{}/{path}",
            self.base,
            self.token.expose_secret()
        );
        let response = self
            .http
            .get(url)
            .send()
            .await
            .map_err(|e| unreachable(e.without_url().to_string()))?;
        if !response.status().is_success() {
            return Err(unreachable(format!("HTTP {}", response.status().as_u16())));
        }
        if response
            .content_length()
            .is_some_and(|n| n > DOWNLOAD_LIMIT)
        {
            return Err(unreachable(format!(
                "the file is over {DOWNLOAD_LIMIT} bytes"
            )));
        }
        let bytes = response
            .bytes()
            .await
            .map_err(|e| unreachable(e.without_url().to_string()))?;
        Ok(bytes.to_vec())
    }
}
