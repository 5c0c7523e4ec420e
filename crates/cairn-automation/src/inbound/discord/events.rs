//! What goes over the Discord gateway: payloads (`op`, `d`, `s`, `t`),
//! the ones cairn sends (Identify, Resume, Heartbeat), and the dispatches
//! it reads (READY, MESSAGE_CREATE, INTERACTION_CREATE) with the fields
//! the adapter uses; and which messages are for the bot.

use serde::Deserialize;
use serde_json::{Value, json};

use super::format;

/// Gateway opcodes.
pub mod op {
    /// An event (`t` names it, `s` numbers it).
    pub const DISPATCH: u8 = 0;
    /// A heartbeat, either way (Discord may ask for one at once).
    pub const HEARTBEAT: u8 = 1;
    /// Starts a new session.
    pub const IDENTIFY: u8 = 2;
    /// Takes up a dropped session where it stopped.
    pub const RESUME: u8 = 6;
    /// Discord asks for a new connection (and a resume).
    pub const RECONNECT: u8 = 7;
    /// The session cannot go on (`d`: whether it may be resumed).
    pub const INVALID_SESSION: u8 = 9;
    /// The first payload: the heartbeat interval.
    pub const HELLO: u8 = 10;
    /// A heartbeat was received.
    pub const HEARTBEAT_ACK: u8 = 11;
}

/// The intents cairn asks for: GUILDS (1), GUILD_MESSAGES (512),
/// DIRECT_MESSAGES (4096) and MESSAGE_CONTENT (32768, a privileged intent
/// switched on in the developer portal).
pub const INTENTS: u64 = 1 | 512 | 4096 | 32768;

/// One payload on the gateway.
#[derive(Debug, Deserialize)]
pub struct Payload {
    /// The opcode.
    pub op: u8,
    /// Its data.
    #[serde(default)]
    pub d: Value,
    /// A dispatch's sequence number.
    #[serde(default)]
    pub s: Option<u64>,
    /// A dispatch's event name.
    #[serde(default)]
    pub t: Option<String>,
}

/// Op 2: a new session with `token`.
pub fn identify(token: &str) -> Value {
    json!({"op": op::IDENTIFY, "d": {
        "token": token,
        "intents": INTENTS,
        "properties": {"os": std::env::consts::OS, "browser": "cairn", "device": "cairn"},
    }})
}

/// Op 6: the session `session_id` taken up after event `seq`.
pub fn resume(token: &str, session_id: &str, seq: Option<u64>) -> Value {
    json!({"op": op::RESUME, "d": {"token": token, "session_id": session_id, "seq": seq}})
}

/// Op 1 with the last sequence number seen.
pub fn heartbeat(seq: Option<u64>) -> Value {
    json!({"op": op::HEARTBEAT, "d": seq})
}

/// READY's fields cairn keeps.
#[derive(Debug, Deserialize)]
pub struct Ready {
    /// The session, to resume.
    pub session_id: String,
    /// Where to connect to resume it.
    pub resume_gateway_url: String,
    /// The bot itself.
    pub user: Author,
}

/// A user who wrote or pressed.
#[derive(Debug, Clone, Deserialize)]
pub struct Author {
    /// Their snowflake.
    pub id: String,
    /// Whether it is a bot (this one included).
    #[serde(default)]
    pub bot: bool,
}

/// A MESSAGE_CREATE's message.
#[derive(Debug, Clone, Deserialize)]
pub struct Message {
    /// Its snowflake.
    pub id: String,
    /// Where.
    pub channel_id: String,
    /// The server; absent in a direct message.
    #[serde(default)]
    pub guild_id: Option<String>,
    /// Who wrote it.
    pub author: Author,
    /// Its text (empty without the Message Content intent).
    #[serde(default)]
    pub content: String,
    /// The users it mentions.
    #[serde(default)]
    pub mentions: Vec<Author>,
    /// Its files.
    #[serde(default)]
    pub attachments: Vec<Attachment>,
    /// The message it replies to.
    #[serde(default)]
    pub referenced_message: Option<Referenced>,
    /// 0 a message, 19 a reply; the others are system notices.
    #[serde(default, rename = "type")]
    pub kind: u8,
}

/// The message a reply answers.
#[derive(Debug, Clone, Deserialize)]
pub struct Referenced {
    /// Who wrote it.
    #[serde(default)]
    pub author: Option<Author>,
}

/// A file sent with a message.
#[derive(Debug, Clone, Deserialize)]
pub struct Attachment {
    /// Its name.
    #[serde(default)]
    pub filename: String,
    /// Its MIME type.
    #[serde(default)]
    pub content_type: Option<String>,
    /// Bytes.
    #[serde(default)]
    pub size: Option<u64>,
    /// Where it is (a signed CDN URL).
    pub url: String,
}

impl Attachment {
    /// Whether it is a picture the model can look at.
    pub fn is_image(&self) -> bool {
        self.content_type
            .as_deref()
            .is_some_and(|m| m.starts_with("image/"))
    }
}

/// An INTERACTION_CREATE (cairn reads button presses, type 3).
#[derive(Debug, Deserialize)]
pub struct Interaction {
    /// Its snowflake, for the callback.
    pub id: String,
    /// Its token, for the callback (good for 15 minutes).
    pub token: String,
    /// 3: a message component.
    #[serde(rename = "type")]
    pub kind: u8,
    /// The component's `custom_id`.
    #[serde(default)]
    pub data: Value,
    /// Who pressed, in a server.
    #[serde(default)]
    pub member: Option<Member>,
    /// Who pressed, in a direct message.
    #[serde(default)]
    pub user: Option<Author>,
    /// The message with the button.
    #[serde(default)]
    pub message: Option<Value>,
}

/// A server member.
#[derive(Debug, Deserialize)]
pub struct Member {
    /// The user.
    pub user: Author,
}

/// Interaction type 3: a button (or other component) pressed.
pub const MESSAGE_COMPONENT: u8 = 3;

impl Interaction {
    /// Who pressed.
    pub fn presser(&self) -> Option<&str> {
        self.member
            .as_ref()
            .map(|m| m.user.id.as_str())
            .or(self.user.as_ref().map(|u| u.id.as_str()))
    }

    /// The pressed component's `custom_id`.
    pub fn custom_id(&self) -> Option<&str> {
        self.data["custom_id"].as_str()
    }
}

impl Message {
    /// Whether a person wrote it: not a bot (this one or another), not a
    /// system notice (a join, a pin).
    pub fn from_a_person(&self, bot: &str) -> bool {
        !self.author.bot && self.author.id != bot && matches!(self.kind, 0 | 19)
    }

    /// Whether it is a direct message.
    pub fn direct(&self) -> bool {
        self.guild_id.is_none()
    }
}

/// The text for the agent when the message is for the bot (`bot`, its
/// id): always in a direct message; in a server channel only when it
/// mentions the bot or replies to one of its messages. The mention is
/// removed.
pub fn addressed(bot: &str, message: &Message) -> Option<String> {
    if !message.from_a_person(bot) {
        return None;
    }
    if !message.direct() {
        let mentioned = message.mentions.iter().any(|u| u.id == bot)
            || message.content.contains(&format!("<@{bot}>"))
            || message.content.contains(&format!("<@!{bot}>"));
        let replied = message
            .referenced_message
            .as_ref()
            .and_then(|r| r.author.as_ref())
            .is_some_and(|a| a.id == bot);
        if !mentioned && !replied {
            return None;
        }
    }
    Some(format::plain(&message.content, bot))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inbound::parse_button;

    const BOT: &str = "900";

    fn message(value: Value) -> Message {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn server_channels_are_heard_only_when_the_bot_is_mentioned_or_replied_to() {
        let dm = message(json!({"id": "1", "channel_id": "10", "author": {"id": "5"},
            "content": "hi"}));
        assert_eq!(addressed(BOT, &dm).as_deref(), Some("hi"));
        let chatter = message(json!({"id": "2", "channel_id": "20", "guild_id": "7",
            "author": {"id": "5"}, "content": "hello all", "mentions": []}));
        assert_eq!(addressed(BOT, &chatter), None);
        let mention = message(json!({"id": "3", "channel_id": "20", "guild_id": "7",
            "author": {"id": "5"}, "content": "<@900> what time", "mentions": [{"id": "900", "bot": true}]}));
        assert_eq!(addressed(BOT, &mention).as_deref(), Some("what time"));
        let reply = message(
            json!({"id": "4", "channel_id": "20", "guild_id": "7", "type": 19,
            "author": {"id": "5"}, "content": "and then?",
            "referenced_message": {"id": "3", "author": {"id": "900", "bot": true}}}),
        );
        assert_eq!(addressed(BOT, &reply).as_deref(), Some("and then?"));
        let other_reply = message(json!({"id": "5", "channel_id": "20", "guild_id": "7",
            "type": 19, "author": {"id": "5"}, "content": "yes", "referenced_message": null}));
        assert_eq!(addressed(BOT, &other_reply), None);
    }

    #[test]
    fn bots_and_system_notices_are_not_a_person() {
        let own = message(json!({"id": "1", "channel_id": "10",
            "author": {"id": "900", "bot": true}, "content": "x"}));
        assert_eq!(addressed(BOT, &own), None);
        let other_bot = message(json!({"id": "1", "channel_id": "10",
            "author": {"id": "800", "bot": true}, "content": "x"}));
        assert_eq!(addressed(BOT, &other_bot), None);
        let join = message(json!({"id": "1", "channel_id": "10", "type": 7,
            "author": {"id": "5"}, "content": ""}));
        assert_eq!(addressed(BOT, &join), None);
    }

    #[test]
    fn payloads_and_buttons_read_safely() {
        let p: Payload =
            serde_json::from_str(r#"{"op":10,"d":{"heartbeat_interval":41250},"s":null,"t":null}"#)
                .unwrap();
        assert_eq!(
            (p.op, p.d["heartbeat_interval"].as_u64()),
            (op::HELLO, Some(41250))
        );
        assert_eq!(identify("T")["d"]["intents"], 37377);
        assert_eq!(resume("T", "s1", Some(4))["d"]["seq"], 4);
        assert_eq!(heartbeat(None).to_string(), r#"{"d":null,"op":1}"#);
        assert!(parse_button("ap:abc:y").is_some());
        assert!(parse_button("ap:abc:x").is_none());
        assert!(parse_button("other").is_none());
        let press: Interaction = serde_json::from_value(json!({"id": "1", "token": "t",
            "type": 3, "data": {"custom_id": "ap:abc:n", "component_type": 2},
            "member": {"user": {"id": "5"}}}))
        .unwrap();
        assert_eq!(
            (press.presser(), press.custom_id()),
            (Some("5"), Some("ap:abc:n"))
        );
    }
}
