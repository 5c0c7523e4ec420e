//! Meta's webhooks for WhatsApp, from the gateway to the adapter.
//!
//! The gateway serves `/whatsapp` (and `/whatsapp/<channel>`) but knows no
//! channel: each running WhatsApp adapter registers its endpoint in the
//! daemon's [`Endpoints`] (its verify token, its app secret and the sending
//! half of a queue) and takes it away when it stops, so a reload that
//! restarts the adapter swaps the secrets too. The gateway answers Meta's
//! verification here and puts each delivery whose `X-Hub-Signature-256`
//! holds on the queue, answering 200 at once; the turn runs after, in the
//! adapter. Apps reached through a socket of their own (Slack, Discord)
//! need none of this.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use subtle::ConstantTimeEq;
use tokio::sync::mpsc;

use crate::routines::webhook::{self, Delivery};

/// The header carrying the body's signature under the app secret.
pub const SIGNATURE_HEADER: &str = "x-hub-signature-256";

/// Deliveries a channel holds before the gateway answers 503 (Meta then
/// delivers again later).
const QUEUE: usize = 256;

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
    /// The channel's queue is full.
    #[error("the channel is busy; deliver again later")]
    Busy,
}

struct Endpoint {
    verify_token: SecretString,
    app_secret: SecretString,
    deliveries: mpsc::Sender<Vec<u8>>,
    generation: u64,
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

    /// Serves the channel `name` with these secrets; its verified
    /// deliveries (raw bodies) arrive on the receiver until the
    /// registration is dropped.
    pub fn register(
        &self,
        name: &str,
        verify_token: SecretString,
        app_secret: SecretString,
    ) -> (Registration, mpsc::Receiver<Vec<u8>>) {
        let (tx, rx) = mpsc::channel(QUEUE);
        let generation = self.generations.fetch_add(1, Ordering::SeqCst);
        self.lock().insert(
            name.to_string(),
            Endpoint {
                verify_token,
                app_secret,
                deliveries: tx,
                generation,
            },
        );
        let registration = Registration {
            endpoints: self.clone(),
            name: name.to_string(),
            generation,
        };
        (registration, rx)
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

    /// A delivery (`POST`): queued for the channel when `signature`
    /// (`sha256=<hex>`) is the HMAC-SHA256 of `body` under its app secret.
    pub fn deliver(
        &self,
        channel: Option<&str>,
        signature: Option<&str>,
        body: Vec<u8>,
    ) -> Result<(), HookError> {
        self.with(channel, |endpoint| {
            check_signature(endpoint.app_secret.expose_secret(), signature, &body)?;
            endpoint
                .deliveries
                .try_send(body)
                .map_err(|_| HookError::Busy)
        })
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
#[derive(Debug, Clone, Default, Deserialize)]
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
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Text {
    /// The text.
    #[serde(default)]
    pub body: String,
}

/// Media sent by a person: fetched by id through the Graph API.
#[derive(Debug, Clone, Default, Deserialize)]
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
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Interactive {
    /// `button_reply` or `list_reply`.
    #[serde(rename = "type", default)]
    pub kind: String,
    /// The reply button pressed.
    #[serde(default)]
    pub button_reply: Option<ButtonReply>,
}

/// A reply button pressed.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ButtonReply {
    /// The id we gave the button.
    pub id: String,
    /// Its title.
    #[serde(default)]
    pub title: String,
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

    type Running = (Registration, mpsc::Receiver<Vec<u8>>);

    fn endpoints(names: &[&str]) -> (Endpoints, Vec<Running>) {
        let e = Endpoints::default();
        let regs = names
            .iter()
            .map(|n| e.register(n, format!("vt-{n}").into(), format!("as-{n}").into()))
            .collect();
        (e, regs)
    }

    #[test]
    fn only_the_right_signature_over_the_raw_body_is_delivered() {
        let (e, mut regs) = endpoints(&["wa"]);
        let body = br#"{"object":"whatsapp_business_account","entry":[]}"#.to_vec();
        let good = sign("as-wa", &body);
        for (sig, why) in [
            (None, "missing"),
            (Some("sha256=00".to_string()), "malformed"),
            (Some(sign("another secret", &body)), "does not match"),
            (Some(sign("as-wa", b"another body")), "does not match"),
            (Some(good.replacen("sha256=", "sha1=", 1)), "malformed"),
        ] {
            let got = e.deliver(None, sig.as_deref(), body.clone());
            assert!(
                matches!(&got, Err(HookError::Unsigned(m)) if m.contains(why)),
                "{sig:?}: {got:?}"
            );
        }
        assert!(regs[0].1.try_recv().is_err(), "an unsigned body was queued");
        e.deliver(
            Some("wa"),
            Some(&good.to_uppercase().replacen("SHA256=", "sha256=", 1)),
            body.clone(),
        )
        .unwrap();
        assert_eq!(regs[0].1.try_recv().unwrap(), body);
    }

    #[test]
    fn verification_answers_the_challenge_only_for_the_token_and_subscribe() {
        let (e, _regs) = endpoints(&["wa"]);
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

    #[test]
    fn channels_are_named_when_there_are_several_and_go_when_stopped() {
        let (e, mut regs) = endpoints(&["a", "b"]);
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
        let (old, _) = regs.remove(0);
        let next = e.register("a", "new".to_string().into(), "s".to_string().into());
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
