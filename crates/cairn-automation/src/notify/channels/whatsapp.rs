//! `type = "whatsapp"`: the WhatsApp Cloud API. Messages come in as
//! Meta's webhooks through the gateway (`/whatsapp`) and answers go out
//! through the Graph API. WhatsApp lets a business write first only with
//! a template Meta approved, so the channel answers the chats people
//! start and posts no notifications.

use secrecy::SecretString;
use serde::Deserialize;

/// `[channels.NAME]` with `type = "whatsapp"`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WhatsAppSpec {
    /// The Graph API access token.
    pub access_token: SecretString,
    /// The business phone number's id, which answers are sent from.
    pub phone_number_id: String,
    /// The token Meta sends back when the webhook is verified.
    #[serde(default)]
    pub verify_token: Option<SecretString>,
    /// The app secret that signs each webhook (`X-Hub-Signature-256`).
    #[serde(default)]
    pub app_secret: Option<SecretString>,
    /// Whether messages are received (the gateway serves `/whatsapp`).
    #[serde(default)]
    pub inbound: bool,
    /// Phone numbers, with their country code and digits only, that may
    /// talk to the agent.
    #[serde(default, deserialize_with = "super::user_ids")]
    pub allowed_users: Vec<String>,
    /// The Graph API's address (tests point it at a local server).
    #[serde(default = "default_api_url")]
    pub api_url: String,
}

fn default_api_url() -> String {
    "https://graph.facebook.com/v21.0".to_string()
}
