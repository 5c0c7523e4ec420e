//! Who may talk to the agent through an inbound channel, the same for
//! every app: the user ids the configuration allows, those the owner
//! allowed since (`cairn <app> allow`, kept in the store), and those who
//! spent a `cairn pair` code (`/pair <code>`) under the one wrong-code
//! limit. A stranger is told once how to be allowed, and nothing of
//! theirs goes further.

use std::collections::BTreeSet;
use std::sync::Arc;

use cairn_core::clock::Clock;
use cairn_store::{ChannelPairing, Store};

/// Turns a typed pairing code into the hash the store keeps (the
/// gateway's codes and key, given by the binary).
pub trait PairingCodes: Send + Sync {
    /// The code's keyed hash; `None` when it is not the shape of a code.
    fn hash(&self, typed: &str) -> Option<String>;

    /// Wrong codes, from every client together, that void every code.
    fn wrong_codes_limit(&self) -> u32;
}

/// The people of one channel.
pub struct People {
    /// The channel's name (`[channels.NAME]`), which keys its allowed
    /// users and strangers in the store.
    pub channel: String,
    /// The app's name as a person knows it ("Telegram").
    pub app: &'static str,
    /// The command the owner runs to allow a user id, without the id.
    pub allow_command: String,
    /// User ids allowed by the configuration.
    pub allowed: BTreeSet<String>,
    /// The database.
    pub store: Store,
    /// Checks `/pair` codes.
    pub pairing: Option<Arc<dyn PairingCodes>>,
    /// Wall time for strangers and pairing.
    pub clock: Arc<dyn Clock>,
}

impl People {
    /// Whether `user` may talk to the agent.
    pub async fn allowed(&self, user: &str) -> bool {
        if self.allowed.contains(user) {
            return true;
        }
        match self.store.channel_user_allowed(&self.channel, user).await {
            Ok(allowed) => allowed,
            Err(e) => {
                tracing::warn!(channel = %self.channel, error = %e, "cannot read the allowed users");
                false
            }
        }
    }

    /// What to answer a message `text` from `user`, who is not allowed:
    /// the pairing's outcome for `/pair <code>`; the way to be allowed
    /// the first time a stranger writes; `None` after that (they are
    /// told once).
    pub async fn stranger(&self, user: &str, text: &str) -> Option<String> {
        if let Some(code) = text.trim().strip_prefix("/pair") {
            return Some(self.pair(user, code.trim()).await);
        }
        tracing::info!(channel = %self.channel, user, "a message from someone not allowed was ignored");
        match self
            .store
            .note_channel_stranger(&self.channel, user, self.clock.now())
            .await
        {
            Ok(true) => Some(self.how_to_be_allowed(user)),
            Ok(false) => None,
            Err(e) => {
                tracing::warn!(channel = %self.channel, error = %e, "cannot record a stranger");
                None
            }
        }
    }

    /// How a stranger is told how to be allowed.
    pub fn how_to_be_allowed(&self, user: &str) -> String {
        format!(
            "This agent answers only the people its owner allowed. Your {app} user id is {user}. \
             To be allowed, ask the owner to run `{allow} {user}`, \
             or send /pair <code> with a code from `cairn pair` on the owner's machine.",
            app = self.app,
            allow = self.allow_command,
        )
    }

    /// `/pair <code>` from someone not allowed yet.
    async fn pair(&self, user: &str, typed: &str) -> String {
        let Some(pairing) = &self.pairing else {
            return format!(
                "Pairing is not available here; ask the owner to run `{}`.",
                self.allow_command
            );
        };
        let Some(hash) = pairing.hash(typed) else {
            return "That is not a pairing code: send /pair ABCDE-FGHJK with the code `cairn pair` printed.".into();
        };
        let limit = pairing.wrong_codes_limit();
        match self
            .store
            .pair_channel_user(&hash, &self.channel, user, self.clock.now(), limit)
            .await
        {
            Ok(ChannelPairing::Allowed) => {
                tracing::info!(channel = %self.channel, user, app = self.app, "a user paired");
                "Paired: you can talk to the agent now.".into()
            }
            Ok(ChannelPairing::Wrong { .. }) => {
                "The code is wrong, spent or expired (`cairn pair` prints a fresh one).".into()
            }
            Ok(ChannelPairing::Locked) => format!(
                "Pairing is locked after {limit} wrong codes; the owner runs `cairn pair` for a new code."
            ),
            Err(e) => {
                tracing::warn!(channel = %self.channel, error = %e, "pairing failed");
                "Pairing failed on the owner's side; try again later.".into()
            }
        }
    }
}
