//! Meta's webhooks for WhatsApp, from the gateway to the adapter.
//!
//! The gateway serves `/whatsapp` (and `/whatsapp/<channel>`) but knows no
//! channel: each running WhatsApp adapter registers its endpoint in the
//! daemon's [`Endpoints`] (its verify token, its app secret, the store and
//! a wake-up) and takes it away when it stops, so a reload that restarts
//! the adapter swaps the secrets too. The gateway answers Meta's
//! verification here; each delivery whose `X-Hub-Signature-256` holds is
//! kept in the store before Meta is answered 200 (Meta does not deliver
//! again what it saw answered, so a daemon dying before the turn must
//! find it there), then the adapter is woken to handle what is kept. Apps
//! reached through a socket of their own (Slack, Discord) need none of
//! this.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use cairn_core::clock::Clock;
use cairn_store::Store;
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};
use subtle::ConstantTimeEq;
use tokio::sync::Notify;

use super::super::people::People;
use crate::routines::webhook::{self, Delivery};

/// The header carrying the body's signature under the app secret.
pub const SIGNATURE_HEADER: &str = "x-hub-signature-256";

/// Why the gateway refuses a request to `/whatsapp`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HookError {
    /// No running WhatsApp channel of that name (or, without a name, not
    /// exactly one).
    #[error("{0}")]
    Unknown(String),
    /// Verification with another token, or not a subscription.
    #[error("the verify token does not match, or hub.mode is not subscribe")]
    Forbidden,
    /// A delivery without a signature, or one that does not hold.
    #[error("{0}")]
    Unsigned(String),
    /// The delivery could not be kept (the database is unreachable):
    /// Meta delivers it again later.
    #[error("the delivery cannot be kept now; deliver again later")]
    Unkept,
}

struct Endpoint {
    verify_token: SecretString,
    app_secret: SecretString,
    keep: Keep,
    generation: u64,
}

/// Where a channel's verified deliveries go: their messages for its
/// number into the store (a stranger's without what they wrote), then a
/// wake-up of its adapter.
#[derive(Clone)]
pub struct Keep {
    /// The channel's name, which keys its deliveries in the store.
    pub channel: String,
    /// The business number's id; messages to other numbers are left.
    pub phone_number_id: String,
    /// Who may talk: nothing a stranger wrote is kept.
    pub people: Arc<People>,
    /// The database.
    pub store: Store,
    /// Wall time of a delivery.
    pub clock: Arc<dyn Clock>,
    /// Woken after each kept delivery.
    pub wake: Arc<Notify>,
}

/// The running WhatsApp channels' endpoints, by channel name: built by
/// the daemon, shared by the gateway and the adapters.
#[derive(Clone, Default)]
pub struct Endpoints {
    map: Arc<Mutex<BTreeMap<String, Endpoint>>>,
    generations: Arc<AtomicU64>,
}

impl std::fmt::Debug for Endpoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoints")
            .field("channels", &self.lock().keys().collect::<Vec<_>>())
            .finish()
    }
}

/// A registered endpoint; dropping it takes the endpoint away (unless a
/// successor registered the same name since).
pub struct Registration {
    endpoints: Endpoints,
    name: String,
    generation: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut map = self.endpoints.lock();
        if map
            .get(&self.name)
            .is_some_and(|e| e.generation == self.generation)
        {
            map.remove(&self.name);
        }
    }
}

impl Endpoints {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Endpoint>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Serves the channel `keep.channel` with these secrets: its verified
    /// deliveries are kept as `keep` says until the registration is
    /// dropped.
    pub fn register(
        &self,
        verify_token: SecretString,
        app_secret: SecretString,
        keep: Keep,
    ) -> Registration {
        let generation = self.generations.fetch_add(1, Ordering::SeqCst);
        let name = keep.channel.clone();
        self.lock().insert(
            name.clone(),
            Endpoint {
                verify_token,
                app_secret,
                keep,
                generation,
            },
        );
        Registration {
            endpoints: self.clone(),
            name,
            generation,
        }
    }

    /// Runs `f` on the endpoint `channel` names, or on the only one.
    fn with<T>(
        &self,
        channel: Option<&str>,
        f: impl FnOnce(&Endpoint) -> Result<T, HookError>,
    ) -> Result<T, HookError> {
        let map = self.lock();
        let endpoint = match channel {
            Some(name) => map.get(name).ok_or_else(|| {
                HookError::Unknown(format!("no WhatsApp channel named {name} runs here"))
            })?,
            None => {
                let mut all = map.values();
                match (all.next(), all.next()) {
                    (Some(one), None) => one,
                    (None, _) => {
                        return Err(HookError::Unknown(
                            "no WhatsApp channel runs here".to_string(),
                        ));
                    }
                    (Some(_), Some(_)) => {
                        return Err(HookError::Unknown(
                            "several WhatsApp channels run here: use /whatsapp/<channel>"
                                .to_string(),
                        ));
                    }
                }
            }
        };
        f(endpoint)
    }

    /// Meta's verification (`GET`): the challenge to answer when `mode` is
    /// `subscribe` and `token` is the channel's verify token.
    pub fn verify(
        &self,
        channel: Option<&str>,
        mode: Option<&str>,
        token: Option<&str>,
        challenge: Option<&str>,
    ) -> Result<String, HookError> {
        self.with(channel, |endpoint| {
            let expected = endpoint.verify_token.expose_secret().as_bytes();
            let given = token.unwrap_or_default().as_bytes();
            // Constant time: the token must not leak a byte at a time.
            let matches: bool = expected.ct_eq(given).into();
            match (mode, challenge) {
                (Some("subscribe"), Some(challenge)) if matches && !expected.is_empty() => {
                    Ok(challenge.to_string())
                }
                _ => Err(HookError::Forbidden),
            }
        })
    }

    /// A delivery (`POST`): kept for the channel, and its adapter woken,
    /// when `signature` (`sha256=<hex>`) is the HMAC-SHA256 of `body` under
    /// its app secret. `Ok` only once it is in the store.
    pub async fn deliver(
        &self,
        channel: Option<&str>,
        signature: Option<&str>,
        body: &[u8],
    ) -> Result<(), HookError> {
        let keep = self.with(channel, |endpoint| {
            check_signature(endpoint.app_secret.expose_secret(), signature, body)?;
            Ok(endpoint.keep.clone())
        })?;
        let payload: Payload = match serde_json::from_slice(body) {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(channel = %keep.channel, error = %e, "a WhatsApp webhook of an unexpected shape was ignored");
                return Ok(());
            }
        };
        let mut messages = Vec::new();
        for message in payload.messages_for(&keep.phone_number_id) {
            if keep.people.allowed(&message.from).await {
                messages.push(message);
            } else {
                messages.push(message.as_strangers());
            }
        }
        if messages.is_empty() {
            // Statuses of our messages, or another number's.
            return Ok(());
        }
        let kept = serde_json::to_string(&messages).map_err(|_| HookError::Unkept)?;
        keep.store
            .keep_channel_delivery(&keep.channel, &kept, keep.clock.now())
            .await
            .map_err(|e| {
                tracing::warn!(channel = %keep.channel, error = %e, "cannot keep a WhatsApp delivery; Meta will deliver it again");
                HookError::Unkept
            })?;
        keep.wake.notify_one();
        Ok(())
    }
}

/// Whether `signature` is `sha256=<hex HMAC-SHA256(secret, body)>`,
/// compared in constant time.
pub fn check_signature(
    secret: &str,
    signature: Option<&str>,
    body: &[u8],
) -> Result<(), HookError> {
    if secret.is_empty() {
        return Err(HookError::Unsigned("the channel has no app secret".into()));
    }
    let delivery = Delivery {
        body,
        signature,
        timestamp: None,
        bearer_ok: false,
    };
    let now = chrono::DateTime::<chrono::Utc>::UNIX_EPOCH;
    webhook::verify(secret, &delivery, now)
        .map(drop)
        .map_err(|e| match e {
            webhook::WebhookError::MissingSignature => {
                HookError::Unsigned("missing X-Hub-Signature-256 header".into())
            }
            webhook::WebhookError::MalformedSignature => HookError::Unsigned(
                "malformed X-Hub-Signature-256 header: expected sha256=<64 hex digits>".into(),
            ),
            _ => HookError::Unsigned("X-Hub-Signature-256 does not match the body".into()),
        })
}

/// A webhook's body (the parts the adapter reads).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Payload {
    /// `whatsapp_business_account`.
    #[serde(default)]
    pub object: String,
    /// One per business account.
    #[serde(default)]
    pub entry: Vec<Entry>,
}

/// One business account's changes.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Entry {
    /// What changed.
    #[serde(default)]
    pub changes: Vec<Change>,
}

/// One change: `field` `messages` carries messages and statuses.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Change {
    /// The subscribed field.
    #[serde(default)]
    pub field: String,
    /// Its value.
    #[serde(default)]
    pub value: Value,
}

/// A `messages` change's value.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Value {
    /// Which business number received them.
    #[serde(default)]
    pub metadata: Option<Metadata>,
    /// Messages people sent (statuses of ours are not read).
    #[serde(default)]
    pub messages: Vec<Message>,
}

/// The receiving number.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Metadata {
    /// Its id (`phone_number_id`).
    #[serde(default)]
    pub phone_number_id: String,
}

/// A message a person sent.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct Message {
    /// The sender's number (WhatsApp id).
    #[serde(default)]
    pub from: String,
    /// Its id (`wamid.…`).
    #[serde(default)]
    pub id: String,
    /// `text`, `image`, `document`, `interactive`, `button`, `audio`…
    #[serde(rename = "type", default)]
    pub kind: String,
    /// A text message's text.
    #[serde(default)]
    pub text: Option<Text>,
    /// An image.
    #[serde(default)]
    pub image: Option<Media>,
    /// A file.
    #[serde(default)]
    pub document: Option<Media>,
    /// A button pressed on one of our interactive messages.
    #[serde(default)]
    pub interactive: Option<Interactive>,
}

/// A text's body.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct Text {
    /// The text.
    #[serde(default)]
    pub body: String,
}

/// Media sent by a person: fetched by id through the Graph API.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct Media {
    /// The media id.
    pub id: String,
    /// Its caption.
    #[serde(default)]
    pub caption: Option<String>,
    /// A document's file name.
    #[serde(default)]
    pub filename: Option<String>,
}

/// An interactive reply.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct Interactive {
    /// `button_reply` or `list_reply`.
    #[serde(rename = "type", default)]
    pub kind: String,
    /// The reply button pressed.
    #[serde(default)]
    pub button_reply: Option<ButtonReply>,
}

/// A reply button pressed.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct ButtonReply {
    /// The id we gave the button.
    pub id: String,
    /// Its title.
    #[serde(default)]
    pub title: String,
}

impl Message {
    /// What of a stranger's message may be kept: who and which message,
    /// and a `/pair` request; nothing else they wrote or sent.
    pub fn as_strangers(self) -> Message {
        let pairing = self
            .text
            .filter(|t| t.body.trim_start().starts_with("/pair"));
        Message {
            from: self.from,
            id: self.id,
            kind: self.kind,
            text: pairing,
            ..Message::default()
        }
    }
}

impl Payload {
    /// The messages sent to the number `phone_number_id`, in order.
    pub fn messages_for(self, phone_number_id: &str) -> Vec<Message> {
        self.entry
            .into_iter()
            .flat_map(|e| e.changes)
            .filter(|c| c.field == "messages")
            .filter(|c| {
                // An app may serve several numbers through one webhook.
                c.value
                    .metadata
                    .as_ref()
                    .is_none_or(|m| m.phone_number_id == phone_number_id)
            })
            .flat_map(|c| c.value.messages)
            // One without a sender or an id cannot be answered or told apart.
            .filter(|m| !m.from.is_empty() && !m.id.is_empty())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use hmac::{Hmac, KeyInit, Mac};
    use sha2::Sha256;

    use super::*;

    fn sign(secret: &str, body: &[u8]) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
        mac.update(body);
        let hex: String = mac
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        format!("sha256={hex}")
    }

    /// Endpoints for `names`, keeping deliveries in a fresh SQLite store.
    async fn endpoints(names: &[&str]) -> (Endpoints, Vec<Registration>, Store, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}/cairn.db", dir.path().display());
        let (store, _) = Store::open(&url).await.unwrap();
        let e = Endpoints::default();
        let regs = names
            .iter()
            .map(|n| {
                e.register(
                    format!("vt-{n}").into(),
                    format!("as-{n}").into(),
                    keep(n, &store),
                )
            })
            .collect();
        (e, regs, store, dir)
    }

    fn keep(name: &str, store: &Store) -> Keep {
        let clock: Arc<dyn Clock> = Arc::new(cairn_core::clock::SystemClock);
        Keep {
            channel: name.to_string(),
            phone_number_id: "PN".to_string(),
            people: Arc::new(People {
                channel: name.to_string(),
                app: "WhatsApp",
                allow_command: format!("cairn channel allow {name}"),
                allowed: ["15551234567".to_string()].into(),
                store: store.clone(),
                pairing: None,
                clock: Arc::clone(&clock),
            }),
            store: store.clone(),
            clock: Arc::new(cairn_core::clock::SystemClock),
            wake: Arc::new(Notify::new()),
        }
    }

    #[tokio::test]
    async fn only_the_right_signature_over_the_raw_body_is_kept_and_nothing_a_stranger_wrote() {
        let (e, _regs, store, _dir) = endpoints(&["wa"]).await;
        let message = |from: &str, id: &str, text: &str| serde_json::json!({"from": from, "id": id, "type": "text", "text": {"body": text}});
        let body = serde_json::to_vec(&serde_json::json!({
            "object": "whatsapp_business_account",
            "entry": [{"changes": [{"field": "messages", "value": {
                "metadata": {"phone_number_id": "PN"},
                "messages": [
                    message("15551234567", "wamid.1", "hello"),
                    message("15559990000", "wamid.2", "a stranger's secret"),
                    message("15559990000", "wamid.3", "/pair ABCDE-FGHJK"),
                    {"from": "15559990000", "id": "wamid.4", "type": "image", "image": {"id": "IMG"}},
                ]}}]}],
        }))
        .unwrap();
        let good = sign("as-wa", &body);
        for (sig, why) in [
            (None, "missing"),
            (Some("sha256=00".to_string()), "malformed"),
            (Some(sign("another secret", &body)), "does not match"),
            (Some(sign("as-wa", b"another body")), "does not match"),
            (Some(good.replacen("sha256=", "sha1=", 1)), "malformed"),
        ] {
            let got = e.deliver(None, sig.as_deref(), &body).await;
            assert!(
                matches!(&got, Err(HookError::Unsigned(m)) if m.contains(why)),
                "{sig:?}: {got:?}"
            );
        }
        assert!(
            store
                .kept_channel_deliveries("wa", 10)
                .await
                .unwrap()
                .is_empty(),
            "an unsigned body was kept"
        );
        e.deliver(
            Some("wa"),
            Some(&good.to_uppercase().replacen("SHA256=", "sha256=", 1)),
            &body,
        )
        .await
        .unwrap();
        let kept = store.kept_channel_deliveries("wa", 10).await.unwrap();
        assert_eq!(kept.len(), 1);
        let messages: Vec<Message> = serde_json::from_str(&kept[0].1).unwrap();
        let seen: Vec<(&str, Option<&str>, bool)> = messages
            .iter()
            .map(|m| {
                (
                    m.id.as_str(),
                    m.text.as_ref().map(|t| t.body.as_str()),
                    m.image.is_some(),
                )
            })
            .collect();
        assert_eq!(
            seen,
            [
                ("wamid.1", Some("hello"), false),
                ("wamid.2", None, false),
                ("wamid.3", Some("/pair ABCDE-FGHJK"), false),
                ("wamid.4", None, false),
            ]
        );
        assert!(!kept[0].1.contains("secret"));
        // A delivery of statuses only keeps nothing.
        let statuses = br#"{"object":"whatsapp_business_account","entry":[]}"#;
        e.deliver(None, Some(&sign("as-wa", statuses)), statuses)
            .await
            .unwrap();
        assert_eq!(
            store.kept_channel_deliveries("wa", 10).await.unwrap().len(),
            1
        );
    }

    #[tokio::test]
    async fn verification_answers_the_challenge_only_for_the_token_and_subscribe() {
        let (e, _regs, _store, _dir) = endpoints(&["wa"]).await;
        let verify = |mode, token| e.verify(None, Some(mode), Some(token), Some("1158201444"));
        assert_eq!(verify("subscribe", "vt-wa").unwrap(), "1158201444");
        assert_eq!(verify("subscribe", "vt-w"), Err(HookError::Forbidden));
        assert_eq!(verify("subscribe", "vt-wa2"), Err(HookError::Forbidden));
        assert_eq!(verify("unsubscribe", "vt-wa"), Err(HookError::Forbidden));
        assert_eq!(
            e.verify(None, Some("subscribe"), None, Some("1")),
            Err(HookError::Forbidden)
        );
    }

    #[tokio::test]
    async fn channels_are_named_when_there_are_several_and_go_when_stopped() {
        let (e, mut regs, store, _dir) = endpoints(&["a", "b"]).await;
        assert!(matches!(
            e.verify(None, Some("subscribe"), Some("vt-a"), Some("c")),
            Err(HookError::Unknown(m)) if m.contains("/whatsapp/<channel>")
        ));
        assert_eq!(
            e.verify(Some("b"), Some("subscribe"), Some("vt-b"), Some("c"))
                .unwrap(),
            "c"
        );
        // Each channel its own secrets.
        assert_eq!(
            e.verify(Some("b"), Some("subscribe"), Some("vt-a"), Some("c")),
            Err(HookError::Forbidden)
        );
        // A restarted channel's successor keeps its place when the old one goes.
        let old = regs.remove(0);
        let next = e.register(
            "new".to_string().into(),
            "s".to_string().into(),
            keep("a", &store),
        );
        drop(old);
        assert!(
            e.verify(Some("a"), Some("subscribe"), Some("new"), Some("c"))
                .is_ok()
        );
        drop(next);
        assert!(matches!(
            e.verify(Some("a"), Some("subscribe"), Some("new"), Some("c")),
            Err(HookError::Unknown(_))
        ));
        // One left: the bare path is it.
        assert!(
            e.verify(None, Some("subscribe"), Some("vt-b"), Some("c"))
                .is_ok()
        );
    }

    #[test]
    fn messages_of_other_numbers_and_statuses_are_left_out() {
        let payload: Payload = serde_json::from_value(serde_json::json!({
            "object": "whatsapp_business_account",
            "entry": [{"id": "WABA", "changes": [
                {"field": "messages", "value": {
                    "messaging_product": "whatsapp",
                    "metadata": {"display_phone_number": "15550001111", "phone_number_id": "109876"},
                    "contacts": [{"profile": {"name": "Ann"}, "wa_id": "15551234567"}],
                    "messages": [{"from": "15551234567", "id": "wamid.1", "timestamp": "1", "type": "text", "text": {"body": "hi"}}]
                }},
                {"field": "messages", "value": {
                    "metadata": {"phone_number_id": "999"},
                    "messages": [{"from": "1", "id": "wamid.2", "type": "text", "text": {"body": "not ours"}}]
                }},
                {"field": "messages", "value": {
                    "metadata": {"phone_number_id": "109876"},
                    "statuses": [{"id": "wamid.3", "status": "read"}],
                    "messages": [{"id": "wamid.4", "type": "system", "system": {"body": "number changed"}}]
                }}
            ]}]
        }))
        .unwrap();
        let messages = payload.messages_for("109876");
        assert_eq!(messages.len(), 1);
        assert_eq!(messages[0].text.as_ref().unwrap().body, "hi");
    }
}
