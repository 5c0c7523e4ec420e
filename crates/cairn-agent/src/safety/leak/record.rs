//! Where a leak found goes: the store's `secret_leaks` (`cairn secret
//! leaks`) and an attention notification.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use cairn_core::clock::Clock;
use cairn_core::notification::{NewNotification, Outcome, Priority};
use cairn_store::{SecretLeak, Store};
use chrono::{DateTime, Duration, Utc};
use uuid::Uuid;

use super::FoundLeak;
use crate::repair::RepairNotifier;

/// Records the leaks a [`super::LeakGuard`] finds.
#[async_trait]
pub trait LeakRecorder: Send + Sync {
    /// Records one; failures are the recorder's to log.
    async fn record(&self, leak: FoundLeak);
}

/// One notification per secret, place and target in this span: a secret
/// in a file sent with every request would otherwise ring on each.
const QUIET: Duration = Duration::minutes(10);

/// A secret, the place and the target it was going to: told once per [`QUIET`].
type Told = (String, &'static str, String);

/// Records in the store and tells the person (at most once per [`QUIET`]
/// for the same secret going to the same place).
pub struct StoreLeakRecorder {
    store: Store,
    notifier: Arc<dyn RepairNotifier>,
    clock: Arc<dyn Clock>,
    user_id: String,
    told: Mutex<HashMap<Told, DateTime<Utc>>>,
}

impl std::fmt::Debug for StoreLeakRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StoreLeakRecorder")
    }
}

impl StoreLeakRecorder {
    /// Records into `store`, telling `user_id` through `notifier`.
    pub fn new(
        store: Store,
        notifier: Arc<dyn RepairNotifier>,
        clock: Arc<dyn Clock>,
        user_id: impl Into<String>,
    ) -> Self {
        Self {
            store,
            notifier,
            clock,
            user_id: user_id.into(),
            told: Mutex::default(),
        }
    }

    /// Whether the person should hear of this one (not told of the same lately).
    fn tell(&self, leak: &FoundLeak, now: DateTime<Utc>) -> bool {
        let key = (
            leak.secret.clone(),
            leak.place.as_str(),
            leak.target.clone(),
        );
        let mut told = self.told.lock().unwrap_or_else(|p| p.into_inner());
        told.retain(|_, at| now - *at < QUIET);
        if told.contains_key(&key) {
            return false;
        }
        told.insert(key, now);
        true
    }
}

#[async_trait]
impl LeakRecorder for StoreLeakRecorder {
    async fn record(&self, leak: FoundLeak) {
        let now = self.clock.now();
        let row = SecretLeak {
            id: Uuid::now_v7(),
            at: now,
            secret: leak.secret.clone(),
            place: leak.place.as_str().to_string(),
            target: leak.target.clone(),
            agent: leak.origin.agent.clone(),
            session_id: leak.origin.session_id.clone(),
            run_id: leak.origin.run_id.clone(),
            context: leak.context.clone(),
        };
        if let Err(error) = self.store.record_secret_leak(&row).await {
            tracing::warn!(%error, secret = %leak.secret, "could not record a secret leak");
        }
        if !self.tell(&leak, now) {
            return;
        }
        let (title, what) = match leak.place {
            super::LeakPlace::Tool => (
                format!(
                    "Secret {} blocked in a call of {}",
                    leak.secret, leak.target
                ),
                "The call was not made.",
            ),
            super::LeakPlace::Channel => (
                format!(
                    "Secret {} blocked in a message to {}",
                    leak.secret, leak.target
                ),
                "The message was not sent.",
            ),
            super::LeakPlace::Hook => (
                format!(
                    "Secret {} blocked in the input of hook {}",
                    leak.secret, leak.target
                ),
                "The hook did not run.",
            ),
            super::LeakPlace::Llm => (
                format!("Secret {} kept from the model", leak.secret),
                "It was replaced by its name before the request left.",
            ),
        };
        let body = format!("{what}\n{}\nSee `cairn secret leaks`.", leak.context);
        self.notifier
            .notify(NewNotification {
                user_id: self.user_id.clone(),
                channel: None,
                title,
                body,
                priority: Priority::High,
                tags: vec![
                    "secret-leak".to_string(),
                    Outcome::Attention.tag().to_string(),
                ],
                data: None,
                source: "leak-detection".to_string(),
            })
            .await;
    }
}
