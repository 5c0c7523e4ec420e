//! The front door for "tell the person": every producer (routine runs, the
//! heartbeat, watchers, background tasks, the agent, the CLI) calls
//! [`Notifier::send`], which records the notification before anything is
//! delivered and wakes the dispatcher.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use cairn_agent::safety::leak::{LeakGuard, LeakOrigin, LeakPlace};
use cairn_core::notification::{DeliveryStatus, NewNotification, Notification};
use cairn_core::watchers::{Watcher, Watchers};
use cairn_store::{Store, StoreError};
use chrono::{DateTime, Utc};
use tokio::sync::Notify;
use uuid::Uuid;

use super::channel::Channel;
use super::channels;
use super::config::{ChannelConfigError, ChannelSpec, INBOX};

/// The output channels by name. `inbox` always exists; a name configured
/// with `type = "inbox"` is an inbox too.
#[derive(Clone, Default)]
pub struct ChannelSet {
    outputs: BTreeMap<String, Arc<dyn Channel>>,
    inboxes: Vec<String>,
}

impl std::fmt::Debug for ChannelSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChannelSet")
            .field("outputs", &self.outputs.keys().collect::<Vec<_>>())
            .field("inboxes", &self.inboxes)
            .finish()
    }
}

impl ChannelSet {
    /// Only the inbox.
    pub fn new() -> ChannelSet {
        ChannelSet::default()
    }

    /// The channels of parsed `[channels]` settings, sharing one HTTP client.
    /// Every channel that cannot be built is reported.
    pub fn build(
        specs: &BTreeMap<String, ChannelSpec>,
        http: &reqwest::Client,
    ) -> Result<ChannelSet, Vec<ChannelConfigError>> {
        let mut set = ChannelSet::new();
        let mut errors = Vec::new();
        for (name, spec) in specs {
            match channels::build(spec, http) {
                Ok(Some(channel)) => set.insert(name.clone(), channel),
                Ok(None) => set.insert_inbox(name.clone()),
                Err(message) => errors.push(ChannelConfigError {
                    key: format!("channels.{name}"),
                    message,
                }),
            }
        }
        if errors.is_empty() {
            Ok(set)
        } else {
            Err(errors)
        }
    }

    /// Adds an output channel under `name`.
    pub fn insert(&mut self, name: impl Into<String>, channel: Arc<dyn Channel>) {
        self.outputs.insert(name.into(), channel);
    }

    /// Makes `name` another name of the inbox.
    pub fn insert_inbox(&mut self, name: impl Into<String>) {
        self.inboxes.push(name.into());
    }

    /// The output channel called `name`, if there is one.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Channel>> {
        self.outputs.get(name)
    }

    /// Whether `name` is the inbox. A conversation channel
    /// (`conversation:<session id>`) is too: its notifications wait unread in
    /// the inbox until that conversation takes them.
    pub fn is_inbox(&self, name: &str) -> bool {
        name == INBOX
            || self.inboxes.iter().any(|n| n == name)
            || cairn_core::notification::conversation_session(name).is_some()
    }

    /// Whether a channel called `name` exists.
    pub fn contains(&self, name: &str) -> bool {
        self.is_inbox(name) || self.outputs.contains_key(name)
    }

    /// Every channel name, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = std::iter::once(INBOX.to_string())
            .chain(self.inboxes.iter().cloned())
            .chain(self.outputs.keys().cloned())
            .collect();
        names.sort();
        names.dedup();
        names
    }
}

/// Delivery policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotifySettings {
    /// Where notifications go when their producer names no channel.
    pub default_channel: String,
    /// Attempts before a notification is given up (and put in the inbox).
    pub max_attempts: u32,
    /// Age after which a notification is given up even with attempts left.
    pub max_age: Duration,
    /// Delay before the first retry; it doubles each time.
    pub retry_base: Duration,
    /// Longest delay between attempts.
    pub retry_max: Duration,
    /// How long a claimed delivery is held by one process before another
    /// may take it over (the holder died).
    pub lease: Duration,
}

impl Default for NotifySettings {
    fn default() -> Self {
        Self {
            default_channel: INBOX.to_string(),
            max_attempts: 8,
            max_age: Duration::from_secs(24 * 3600),
            retry_base: Duration::from_secs(5),
            retry_max: Duration::from_secs(300),
            lease: Duration::from_secs(120),
        }
    }
}

/// Records notifications and wakes the dispatcher.
#[derive(Debug, Clone)]
pub struct Notifier {
    store: Store,
    /// Shared by every clone, so a reload reaches them all.
    current: Arc<std::sync::RwLock<(Arc<ChannelSet>, NotifySettings)>>,
    wake: Arc<Notify>,
    given_up: tokio::sync::broadcast::Sender<GivenUp>,
    /// Told of each notification recorded or delivered, at the rate of a
    /// burst's runs: watchers, not a channel a burst would outrun.
    activity: Arc<Watchers<Activity>>,
    /// Pending notifications recorded through this notifier, when a command
    /// asked to keep them (see [`Notifier::keep_recorded`]).
    kept: Arc<std::sync::Mutex<Option<Vec<Uuid>>>>,
    /// A notification holding a secret is kept (redacted) and not sent.
    leaks: Option<LeakGuard>,
}

/// A notification was recorded or delivered, for live observers (the
/// gateway's event stream); give-ups come through
/// [`Notifier::subscribe_given_up`].
#[derive(Debug, Clone, PartialEq)]
pub enum Activity {
    /// Recorded (for the inbox or an unknown channel, already in its final
    /// state). Shared with the run that recorded it: a notification is
    /// much larger than the other variant, and a burst records thousands.
    Recorded(Arc<Notification>),
    /// A channel accepted it.
    Delivered {
        /// The notification.
        id: Uuid,
        /// Its channel.
        channel: String,
    },
}

/// A notification the dispatcher gave up on (it is in the inbox with the reason).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GivenUp {
    /// The notification.
    pub id: Uuid,
    /// Its channel.
    pub channel: String,
    /// Why it could not be delivered.
    pub error: String,
}

impl Notifier {
    /// A notifier over this store, these channels and this policy.
    pub fn new(store: Store, channels: Arc<ChannelSet>, settings: NotifySettings) -> Notifier {
        Notifier {
            store,
            current: Arc::new(std::sync::RwLock::new((channels, settings))),
            wake: Arc::new(Notify::new()),
            given_up: tokio::sync::broadcast::channel(64).0,
            activity: Arc::default(),
            kept: Arc::new(std::sync::Mutex::new(None)),
            leaks: None,
        }
    }

    /// This notifier, keeping (redacted, in the inbox) and never sending a
    /// notification that holds a secret `leaks` watches.
    pub fn with_leaks(mut self, leaks: LeakGuard) -> Self {
        self.leaks = Some(leaks);
        self
    }

    /// The leak detection its notifications pass, if any.
    pub fn leaks(&self) -> Option<&LeakGuard> {
        self.leaks.as_ref()
    }

    /// From now on, remembers the pending notifications recorded through
    /// this notifier (and its clones), for a command that must see them
    /// delivered, or handed to a daemon, before it exits.
    pub fn keep_recorded(&self) {
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        kept.get_or_insert_with(Vec::new);
    }

    /// The pending notifications recorded since [`keep_recorded`](Self::keep_recorded)
    /// or the last call, oldest first.
    pub fn take_recorded(&self) -> Vec<Uuid> {
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        kept.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// Notifications given up on from now on (for the `notification.failed` event).
    pub fn subscribe_given_up(&self) -> tokio::sync::broadcast::Receiver<GivenUp> {
        self.given_up.subscribe()
    }

    /// Tells `watcher` of every notification recorded or delivered from
    /// now on, as it happens (on the recording task: it must return at
    /// once), by this notifier and every clone of it.
    pub fn watch_activity(&self, watcher: Watcher<Activity>) {
        self.activity.add(watcher);
    }

    /// Announces a recorded or delivered notification (nobody watching is fine).
    pub(crate) fn announce(&self, activity: Activity) {
        self.activity.tell(|| activity);
    }

    /// Announces a notification given up on (nobody listening is fine).
    pub(crate) fn announce_given_up(&self, given_up: GivenUp) {
        let _ = self.given_up.send(given_up);
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The channels.
    pub fn channels(&self) -> Arc<ChannelSet> {
        let current = self.current.read().unwrap_or_else(|p| p.into_inner());
        Arc::clone(&current.0)
    }

    /// The delivery policy.
    pub fn settings(&self) -> NotifySettings {
        let current = self.current.read().unwrap_or_else(|p| p.into_inner());
        current.1.clone()
    }

    /// Replaces the channels and the delivery policy in this notifier and
    /// every clone of it (`cairn daemon` on SIGHUP). Deliveries already
    /// under way finish with what they started with.
    pub fn reload(&self, channels: Arc<ChannelSet>, settings: NotifySettings) {
        let mut current = self.current.write().unwrap_or_else(|p| p.into_inner());
        *current = (channels, settings);
        drop(current);
        // Pending notifications may now have a channel to go to.
        self.wake.notify_one();
    }

    /// Woken whenever a notification is recorded for delivery.
    pub fn wake(&self) -> &Arc<Notify> {
        &self.wake
    }

    /// Records a notification. For the inbox it is delivered by being
    /// recorded; for an unknown channel it goes to the inbox with the reason;
    /// otherwise it is pending and the dispatcher is woken.
    pub async fn send(
        &self,
        new: NewNotification,
        now: DateTime<Utc>,
    ) -> Result<Notification, StoreError> {
        let mut n = self.prepare_unchecked(new, now);
        if let Some(leaks) = &self.leaks {
            // Awaited here: the record is written before this returns.
            let names = leaks
                .check(
                    LeakPlace::Channel,
                    &n.channel,
                    &leak_text(&n),
                    &leak_origin(&n),
                )
                .await;
            withhold(leaks, &mut n, &names);
        }
        self.store.insert_notification(&n).await?;
        self.recorded(Arc::new(n.clone()));
        Ok(n)
    }

    /// The notification [`send`](Self::send) would record, for a caller
    /// that records it in a transaction of its own (a routine run's end);
    /// once committed, that caller hands it to [`recorded`](Self::recorded).
    pub fn prepare(&self, new: NewNotification, now: DateTime<Utc>) -> Notification {
        let mut n = self.prepare_unchecked(new, now);
        if let Some(leaks) = &self.leaks {
            let names = leaks.check_detached(
                LeakPlace::Channel,
                &n.channel,
                &leak_text(&n),
                &leak_origin(&n),
            );
            withhold(leaks, &mut n, &names);
        }
        n
    }

    /// [`Self::prepare`] before leak detection.
    fn prepare_unchecked(&self, new: NewNotification, now: DateTime<Utc>) -> Notification {
        let (channels, settings) = {
            let current = self.current.read().unwrap_or_else(|p| p.into_inner());
            (Arc::clone(&current.0), current.1.clone())
        };
        let channel = new
            .channel
            .clone()
            .filter(|c| !c.trim().is_empty())
            .unwrap_or_else(|| settings.default_channel.clone());
        let mut n = Notification::pending(new, Uuid::now_v7(), channel, now);
        if channels.is_inbox(&n.channel) {
            n.status = DeliveryStatus::Delivered;
            n.next_attempt_at = None;
            n.delivered_at = Some(now);
            n.in_inbox = true;
        } else if !channels.contains(&n.channel) {
            n.status = DeliveryStatus::Failed;
            n.next_attempt_at = None;
            n.in_inbox = true;
            n.last_error = Some(unknown_channel(&n.channel, &channels));
            tracing::warn!(id = %n.id, channel = %n.channel, "notification for an unknown channel kept in the inbox");
        }
        n
    }

    /// After a notification is committed: counts it, wakes the dispatcher
    /// when it is pending, and announces it.
    pub fn recorded(&self, n: Arc<Notification>) {
        let (channel, outcome) = recorded_labels(&n, &self.channels());
        metrics::counter!("cairn_notifications_total", "channel" => channel, "outcome" => outcome)
            .increment(1);
        if n.status == DeliveryStatus::Pending {
            self.wake.notify_one();
            let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(kept) = kept.as_mut() {
                kept.push(n.id);
            }
        }
        self.announce(Activity::Recorded(n));
    }
}

/// The `channel` and `outcome` labels of a recorded notification. Channel
/// names come from the configuration, so the label set stays small: a name
/// no channel has is counted as `unknown`. At recording, a notification has
/// failed either for an unknown channel or because it held a secret (its
/// channel known): the latter is `withheld`.
fn recorded_labels(n: &Notification, channels: &ChannelSet) -> (String, &'static str) {
    match n.status {
        DeliveryStatus::Delivered => (n.channel.clone(), "inbox"),
        DeliveryStatus::Failed if channels.contains(&n.channel) => (n.channel.clone(), "withheld"),
        DeliveryStatus::Failed => ("unknown".to_string(), "unknown_channel"),
        DeliveryStatus::Pending => (n.channel.clone(), "queued"),
    }
}

/// Why a notification for `name` cannot be delivered.
pub fn unknown_channel(name: &str, channels: &ChannelSet) -> String {
    format!(
        "no channel named \"{name}\" (configured: {}); kept in the inbox",
        channels.names().join(", ")
    )
}

/// What leak detection reads of a notification.
fn leak_text(n: &Notification) -> String {
    [n.title.as_str(), n.body.as_str()].join("\n")
}

/// Whose a notification is, for a leak record: a routine run's names the
/// run (its `source`, `routine:<run id>`).
fn leak_origin(n: &Notification) -> LeakOrigin {
    LeakOrigin {
        run_id: n
            .source
            .strip_prefix("routine:")
            .filter(|run| !run.contains(':'))
            .map(str::to_string),
        ..LeakOrigin::default()
    }
}

/// A notification holding the secrets `names`: its text redacted (as
/// stored), kept in the inbox unsent, saying which secret.
fn withhold(leaks: &LeakGuard, n: &mut Notification, names: &[String]) {
    if names.is_empty() {
        return;
    }
    n.title = leaks.redact(&n.title).into_owned();
    n.body = leaks.redact(&n.body).into_owned();
    if n.status == DeliveryStatus::Pending {
        n.status = DeliveryStatus::Failed;
        n.next_attempt_at = None;
        n.in_inbox = true;
        n.last_error = Some(format!(
            "not sent: it held the secret {}; see `cairn secret leaks`",
            names.join(", ")
        ));
    }
    tracing::warn!(id = %n.id, channel = %n.channel, "a notification holding a secret was kept unsent");
}

#[cfg(test)]
mod tests {
    use cairn_agent::safety::leak::WatchedSecret;
    use cairn_core::notification::NewNotification;

    use super::*;

    fn notification(channel: &str) -> Notification {
        let new = NewNotification {
            user_id: "me".into(),
            channel: Some(channel.into()),
            title: "t".into(),
            body: "the key is s3cr3t-7781".into(),
            priority: Default::default(),
            tags: Vec::new(),
            data: None,
            source: "cli".into(),
        };
        Notification::pending(new, Uuid::nil(), channel.into(), Utc::now())
    }

    #[test]
    fn a_withheld_notification_is_counted_on_its_channel_not_as_unknown() {
        let mut channels = ChannelSet::default();
        channels.insert("log", Arc::new(crate::notify::channels::log::Log));
        let guard = LeakGuard::new(&[WatchedSecret::new("GH", "s3cr3t-7781".into())]);
        let mut n = notification("log");
        assert_eq!(recorded_labels(&n, &channels), ("log".into(), "queued"));
        withhold(&guard, &mut n, &["GH".to_string()]);
        assert_eq!(n.status, DeliveryStatus::Failed);
        assert_eq!(recorded_labels(&n, &channels), ("log".into(), "withheld"));

        let mut lost = notification("nowhere");
        lost.status = DeliveryStatus::Failed;
        assert_eq!(
            recorded_labels(&lost, &channels),
            ("unknown".into(), "unknown_channel")
        );
    }
}
