//! What arrives over the Socket Mode WebSocket: envelopes (`hello`,
//! `disconnect`, and `events_api`, `interactive` or `slash_commands`
//! with an `envelope_id` to acknowledge) and, inside them, the Events
//! API's message events and Block Kit's `block_actions`, with the fields
//! the adapter reads; and which messages are for the bot.

use std::collections::{HashSet, VecDeque};

use serde::Deserialize;
use serde_json::Value;

use super::api::Identity;
use super::format;

/// One frame from the socket.
#[derive(Debug, Deserialize)]
pub struct Envelope {
    /// `hello`, `disconnect`, `events_api`, `interactive`, `slash_commands`.
    #[serde(rename = "type")]
    pub kind: String,
    /// What to send back to acknowledge it, when it needs that.
    #[serde(default)]
    pub envelope_id: Option<String>,
    /// The event or interaction.
    #[serde(default)]
    pub payload: Value,
    /// Why Slack is closing the connection (`disconnect`).
    #[serde(default)]
    pub reason: Option<String>,
}

/// An `events_api` payload (`event_callback`).
#[derive(Debug, Deserialize)]
pub struct EventCallback {
    /// The workspace.
    #[serde(default)]
    pub team_id: Option<String>,
    /// The event.
    pub event: Value,
}

/// A `message` or `app_mention` event.
#[derive(Debug, Clone, Deserialize)]
pub struct MessageEvent {
    /// `message` or `app_mention`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Set on edits, deletions, joins, bots' messages; `file_share` and
    /// `thread_broadcast` are people writing.
    #[serde(default)]
    pub subtype: Option<String>,
    /// Who wrote it.
    #[serde(default)]
    pub user: Option<String>,
    /// Set when a bot (this one included) posted it.
    #[serde(default)]
    pub bot_id: Option<String>,
    /// Its text, escaped, with `<@U…>` mentions.
    #[serde(default)]
    pub text: String,
    /// Its id in the channel.
    pub ts: String,
    /// The thread it is in: its first message's `ts`.
    #[serde(default)]
    pub thread_ts: Option<String>,
    /// Where.
    pub channel: String,
    /// `im` for a direct message, `channel`, `group`, `mpim`.
    #[serde(default)]
    pub channel_type: Option<String>,
    /// Files shared with it.
    #[serde(default)]
    pub files: Vec<File>,
}

/// A file shared in a message.
#[derive(Debug, Clone, Deserialize)]
pub struct File {
    /// Its name.
    #[serde(default)]
    pub name: Option<String>,
    /// Its MIME type.
    #[serde(default)]
    pub mimetype: Option<String>,
    /// Where the bot token downloads it.
    #[serde(default)]
    pub url_private: Option<String>,
    /// Bytes.
    #[serde(default)]
    pub size: Option<u64>,
}

impl File {
    /// Whether it is a picture the model can look at.
    pub fn is_image(&self) -> bool {
        self.mimetype
            .as_deref()
            .is_some_and(|m| m.starts_with("image/"))
    }
}

/// A `block_actions` payload: a button pressed.
#[derive(Debug, Deserialize)]
pub struct BlockActions {
    /// Who pressed.
    pub user: Id,
    /// Where.
    #[serde(default)]
    pub channel: Option<Id>,
    /// The buttons (one per press).
    #[serde(default)]
    pub actions: Vec<Action>,
}

/// An object known by its id.
#[derive(Debug, Deserialize)]
pub struct Id {
    /// The id.
    pub id: String,
}

/// One action of a `block_actions`.
#[derive(Debug, Deserialize)]
pub struct Action {
    /// The button's `value`.
    #[serde(default)]
    pub value: Option<String>,
}

/// A `slash_commands` payload: the app's command (say `/cairn new`),
/// since Slack keeps a message starting with `/` for commands it knows.
#[derive(Debug, Deserialize)]
pub struct SlashCommand {
    /// What follows the command: cairn's chat command, without its `/`.
    #[serde(default)]
    pub text: String,
    /// Who typed it.
    pub user_id: String,
    /// Where.
    pub channel_id: String,
    /// The workspace.
    #[serde(default)]
    pub team_id: Option<String>,
    /// Its id.
    #[serde(default)]
    pub trigger_id: String,
}

impl SlashCommand {
    /// As a message with cairn's chat command (`/new`; `/help` alone).
    pub fn as_message(&self) -> (MessageEvent, String) {
        let typed = self.text.trim().trim_start_matches('/');
        let text = if typed.is_empty() {
            "/help".to_string()
        } else {
            format!("/{typed}")
        };
        let event = MessageEvent {
            kind: "slash_command".into(),
            subtype: None,
            user: Some(self.user_id.clone()),
            bot_id: None,
            text: text.clone(),
            ts: self.trigger_id.clone(),
            thread_ts: None,
            channel: self.channel_id.clone(),
            channel_type: None,
            files: Vec::new(),
        };
        (event, text)
    }
}

impl MessageEvent {
    /// Whether a person wrote it (not an edit, a deletion, a join, or a
    /// bot, this one above all).
    pub fn from_a_person(&self, me: &Identity) -> bool {
        let subtype_ok = matches!(
            self.subtype.as_deref(),
            None | Some("file_share" | "thread_broadcast")
        );
        subtype_ok
            && self.bot_id.is_none()
            && self
                .user
                .as_deref()
                .is_some_and(|u| u != me.user_id && !u.is_empty())
    }

    /// Whether it is a direct message.
    pub fn direct(&self) -> bool {
        self.channel_type.as_deref() == Some("im")
            || (self.channel_type.is_none() && self.channel.starts_with('D'))
    }

    /// The thread the answer goes to: the message's own in a channel (a
    /// new one under it when it has none); in a direct message only when
    /// the person wrote in one.
    pub fn reply_thread(&self) -> Option<String> {
        if self.direct() {
            self.thread_ts.clone()
        } else {
            Some(self.thread_ts.clone().unwrap_or_else(|| self.ts.clone()))
        }
    }
}

/// The text for the agent when the message is for the bot: always in a
/// direct message; in a channel only when it mentions the bot or is in a
/// thread the bot is in (`threads`, by channel and thread `ts`).
pub fn addressed(me: &Identity, event: &MessageEvent, threads: &Threads) -> Option<String> {
    if !event.direct() {
        let mentioned = event.text.contains(&format!("<@{}>", me.user_id));
        let in_thread = event
            .thread_ts
            .as_deref()
            .is_some_and(|t| threads.has(&event.channel, t));
        if !mentioned && !in_thread {
            return None;
        }
    }
    Some(format::plain(&event.text, &me.user_id))
}

/// Keys remembered at most this many at once.
const REMEMBERED: usize = 4_096;

/// A bounded set: the oldest key goes first when it is full.
#[derive(Debug, Default)]
pub struct Recent {
    order: VecDeque<String>,
    keys: HashSet<String>,
}

impl Recent {
    /// Remembers `key`; `false` when it already was.
    pub fn insert(&mut self, key: String) -> bool {
        if self.keys.contains(&key) {
            return false;
        }
        if self.order.len() >= REMEMBERED
            && let Some(old) = self.order.pop_front()
        {
            self.keys.remove(&old);
        }
        self.order.push_back(key.clone());
        self.keys.insert(key);
        true
    }

    fn contains(&self, key: &str) -> bool {
        self.keys.contains(key)
    }
}

/// The channel threads the bot answered in, which it listens to without
/// being mentioned again.
#[derive(Debug, Default)]
pub struct Threads(Recent);

impl Threads {
    /// The bot answers in `thread` of `channel`.
    pub fn join(&mut self, channel: &str, thread: &str) {
        self.0.insert(format!("{channel}/{thread}"));
    }

    /// Whether the bot answered in `thread` of `channel`.
    pub fn has(&self, channel: &str, thread: &str) -> bool {
        self.0.contains(&format!("{channel}/{thread}"))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::inbound::parse_button;

    fn me() -> Identity {
        serde_json::from_value(json!({"user_id": "UBOT", "team_id": "T1"})).unwrap()
    }

    fn event(value: Value) -> MessageEvent {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn channels_are_heard_only_when_the_bot_is_mentioned_or_in_its_thread() {
        let mut threads = Threads::default();
        let dm = event(
            json!({"type": "message", "user": "U1", "text": "hi", "ts": "1.1",
            "channel": "D1", "channel_type": "im"}),
        );
        assert_eq!(addressed(&me(), &dm, &threads).as_deref(), Some("hi"));
        assert_eq!(dm.reply_thread(), None);
        let chatter = event(json!({"type": "message", "user": "U1", "text": "hello all",
            "ts": "2.1", "channel": "C1", "channel_type": "channel"}));
        assert_eq!(addressed(&me(), &chatter, &threads), None);
        let mention = event(json!({"type": "app_mention", "user": "U1",
            "text": "<@UBOT> what time", "ts": "3.1", "channel": "C1"}));
        assert_eq!(
            addressed(&me(), &mention, &threads).as_deref(),
            Some("what time")
        );
        assert_eq!(mention.reply_thread().as_deref(), Some("3.1"));
        let follow = event(json!({"type": "message", "user": "U1", "text": "and then?",
            "ts": "3.5", "thread_ts": "3.1", "channel": "C1", "channel_type": "channel"}));
        assert_eq!(addressed(&me(), &follow, &threads), None);
        threads.join("C1", "3.1");
        assert_eq!(
            addressed(&me(), &follow, &threads).as_deref(),
            Some("and then?")
        );
        assert_eq!(follow.reply_thread().as_deref(), Some("3.1"));
    }

    #[test]
    fn the_bots_own_messages_and_edits_are_not_a_persons() {
        let own = event(
            json!({"type": "message", "user": "UBOT", "text": "x", "ts": "1",
            "channel": "D1"}),
        );
        assert!(!own.from_a_person(&me()));
        let bot = event(
            json!({"type": "message", "subtype": "bot_message", "bot_id": "B1",
            "text": "x", "ts": "1", "channel": "D1"}),
        );
        assert!(!bot.from_a_person(&me()));
        let edit = event(
            json!({"type": "message", "subtype": "message_changed", "ts": "1",
            "channel": "D1"}),
        );
        assert!(!edit.from_a_person(&me()));
        let file = event(
            json!({"type": "message", "subtype": "file_share", "user": "U1",
            "ts": "1", "channel": "D1", "files": [{"name": "a.png", "mimetype": "image/png"}]}),
        );
        assert!(file.from_a_person(&me()));
        assert!(file.files[0].is_image());
    }

    #[test]
    fn recent_keys_are_bounded_and_buttons_read_safely() {
        let mut recent = Recent::default();
        assert!(recent.insert("a".into()));
        assert!(!recent.insert("a".into()));
        for n in 0..REMEMBERED {
            recent.insert(n.to_string());
        }
        assert!(
            recent.insert("a".into()),
            "the oldest key was not forgotten"
        );
        assert!(recent.order.len() <= REMEMBERED);
        assert!(parse_button("ap:abc:y").is_some());
        assert!(parse_button("ap:abc:x").is_none());
        assert!(parse_button("other").is_none());
    }

    #[test]
    fn a_slash_command_carries_a_chat_command() {
        let command: SlashCommand = serde_json::from_value(json!({"command": "/cairn",
            "text": "pair ABCDE-FGHJK", "user_id": "U1", "channel_id": "D1", "trigger_id": "9.9"}))
        .unwrap();
        let (event, text) = command.as_message();
        assert_eq!(text, "/pair ABCDE-FGHJK");
        assert!(event.direct());
        let bare: SlashCommand = serde_json::from_value(json!({"user_id": "U1",
            "channel_id": "C1"}))
        .unwrap();
        assert_eq!(bare.as_message().1, "/help");
    }
}
