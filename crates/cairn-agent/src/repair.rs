//! Self-repair: what cairn does about tools that keep failing and jobs that
//! stopped making progress, and how it tells the person.
//!
//! - [`ToolHealth`] counts each tool's consecutive failures in the store (a
//!   success resets them; refusals, by the policy gate or by a tool's own
//!   rules such as a path outside the workspace or a blocked address, and
//!   declined approvals are not failures). At [`RepairConfig::tool_failure_limit`] (5) the tool is
//!   disabled for every process on the database: the runner leaves it out
//!   of the tool list sent to the model and refuses calls to it, until
//!   `cairn tool enable NAME`. Exactly one notification says so.
//! - [`JobScheduler::repair_stuck`](crate::jobs::JobScheduler::repair_stuck)
//!   restarts jobs without progress and gives up on them after
//!   [`RepairConfig::max_attempts`].
//! - [`repair_tools`] lists the disabled tools for the self-repair routine's
//!   run summary.
//!
//! Notifications go through a [`RepairNotifier`]: the daemon plugs in the
//! notifications router; without one they are recorded in the inbox
//! ([`InboxNotifier`]), so nothing is lost.

use std::collections::HashSet;
use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use cairn_core::clock::Clock;
use cairn_core::notification::{DeliveryStatus, NewNotification, Notification, Outcome, Priority};
use cairn_store::{Store, StoreError, ToolHealthRow};
use serde::Serialize;
use uuid::Uuid;

pub use cairn_core::config::RepairConfig;

use crate::tools::ToolStatus;

/// Sends the notifications of self-repair (a disabled tool, a job given up).
#[async_trait]
pub trait RepairNotifier: Send + Sync {
    /// Sends one notification; failures are the notifier's to log.
    async fn notify(&self, notification: NewNotification);
}

/// Records notifications straight into the inbox (delivered there), for
/// processes without the notifications router.
#[derive(Clone)]
pub struct InboxNotifier {
    store: Store,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for InboxNotifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InboxNotifier")
    }
}

impl InboxNotifier {
    /// A notifier writing to `store`'s inbox.
    pub fn new(store: Store, clock: Arc<dyn Clock>) -> Self {
        Self { store, clock }
    }
}

#[async_trait]
impl RepairNotifier for InboxNotifier {
    async fn notify(&self, new: NewNotification) {
        let now = self.clock.now();
        // Kept in the inbox: delivered the moment it is recorded.
        let mut n = Notification::pending(new, Uuid::now_v7(), "inbox".to_string(), now);
        n.status = DeliveryStatus::Delivered;
        n.next_attempt_at = None;
        n.delivered_at = Some(now);
        n.in_inbox = true;
        if let Err(error) = self.store.insert_notification(&n).await {
            tracing::warn!(%error, title = %n.title, "could not record a self-repair notification");
        }
    }
}

/// A notification from self-repair, for `user_id`: something (a job given
/// up, a tool disabled) needs the person, so its outcome is attention (🔔).
pub(crate) fn notice(user_id: &str, title: String, body: String, source: &str) -> NewNotification {
    NewNotification {
        user_id: user_id.to_string(),
        channel: None,
        title,
        body,
        priority: Priority::High,
        tags: vec![
            "self-repair".to_string(),
            Outcome::Attention.tag().to_string(),
        ],
        data: None,
        source: source.to_string(),
    }
}

/// Longest error text kept per tool.
const ERROR_CHARS: usize = 500;

/// Tool health shared through the store; attach it to the runner with
/// [`ToolRunner::attach_health`](crate::runner::ToolRunner::attach_health).
pub struct ToolHealth {
    store: Store,
    limit: Option<u64>,
    notifier: Arc<dyn RepairNotifier>,
    clock: Arc<dyn Clock>,
    user_id: String,
    /// Disabled tools as last read from the store.
    disabled: RwLock<HashSet<String>>,
    /// Tools with failures since their last success (so a success of any
    /// other tool writes nothing).
    failing: RwLock<HashSet<String>>,
}

impl std::fmt::Debug for ToolHealth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolHealth")
            .field("limit", &self.limit)
            .field("disabled", &self.disabled())
            .finish_non_exhaustive()
    }
}

fn read<T: Clone>(lock: &RwLock<T>) -> T {
    lock.read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone()
}

impl ToolHealth {
    /// Health over `store`, disabling a tool after `limit` consecutive
    /// failures (`None`: never), telling `user_id` through `notifier`.
    pub fn new(
        store: Store,
        limit: Option<u64>,
        notifier: Arc<dyn RepairNotifier>,
        clock: Arc<dyn Clock>,
        user_id: impl Into<String>,
    ) -> Self {
        Self {
            store,
            limit,
            notifier,
            clock,
            user_id: user_id.into(),
            disabled: RwLock::default(),
            failing: RwLock::default(),
        }
    }

    /// Reads the disabled and failing tools again (another process may
    /// have disabled or re-enabled one). Called before every model call.
    pub async fn refresh(&self) -> Result<(), StoreError> {
        let rows = self.store.list_tool_health().await?;
        self.load(&rows);
        Ok(())
    }

    fn load(&self, rows: &[ToolHealthRow]) {
        let disabled = rows
            .iter()
            .filter(|r| r.disabled)
            .map(|r| r.name.clone())
            .collect();
        let failing = rows
            .iter()
            .filter(|r| r.consecutive_failures > 0)
            .map(|r| r.name.clone())
            .collect();
        *self
            .disabled
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = disabled;
        *self
            .failing
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = failing;
    }

    /// Whether `name` (canonical) is disabled, as last read.
    pub fn is_disabled(&self, name: &str) -> bool {
        self.disabled
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains(name)
    }

    /// The disabled tools, as last read, by name.
    pub fn disabled(&self) -> Vec<String> {
        let mut names: Vec<String> = read(&self.disabled).into_iter().collect();
        names.sort();
        names
    }

    /// Records how a call of `name` ended: tool errors (failed, timed out)
    /// count, a success resets, everything else (refusals, bad arguments,
    /// cancellation) is not the tool's fault and changes nothing.
    pub async fn observe(&self, name: &str, status: ToolStatus, text: &str) {
        let now = self.clock.now();
        match status {
            ToolStatus::Failed | ToolStatus::TimedOut => {
                let error: String = text.chars().take(ERROR_CHARS).collect();
                match self
                    .store
                    .record_tool_failure(name, &error, self.limit, now)
                    .await
                {
                    Ok(failure) => {
                        self.failing
                            .write()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .insert(name.to_string());
                        if failure.health.disabled {
                            self.disabled
                                .write()
                                .unwrap_or_else(std::sync::PoisonError::into_inner)
                                .insert(name.to_string());
                        }
                        if failure.newly_disabled {
                            self.announce(&failure.health).await;
                        }
                    }
                    Err(error) => {
                        tracing::warn!(tool = name, %error, "could not record a tool failure");
                    }
                }
            }
            ToolStatus::Success => {
                let was_failing = self
                    .failing
                    .write()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .remove(name);
                if was_failing && let Err(error) = self.store.record_tool_success(name, now).await {
                    tracing::warn!(tool = name, %error, "could not reset a tool's failures");
                }
            }
            _ => {}
        }
    }

    async fn announce(&self, health: &ToolHealthRow) {
        tracing::warn!(
            tool = %health.name,
            failures = health.consecutive_failures,
            "tool disabled after consecutive failures"
        );
        let title = format!("Tool `{}` disabled", health.name);
        let body = format!(
            "`{}` failed {} times in a row and is disabled for the agent. Last error: {}\n\
             Re-enable it with `cairn tool enable {}` once the cause is fixed.",
            health.name,
            health.consecutive_failures,
            health.last_error.as_deref().unwrap_or("(none recorded)"),
            health.name
        );
        self.notifier
            .notify(notice(&self.user_id, title, body, "self-repair"))
            .await;
    }
}

/// A disabled tool, for the self-repair run summary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DisabledTool {
    /// The tool.
    pub name: String,
    /// Failures in a row.
    pub consecutive_failures: u64,
    /// The last error.
    pub last_error: Option<String>,
}

/// The tools disabled for failing (what self-repair reports each run:
/// they stay disabled until a person runs `cairn tool enable`).
pub async fn repair_tools(store: &Store) -> Result<Vec<DisabledTool>, StoreError> {
    Ok(store
        .list_tool_health()
        .await?
        .into_iter()
        .filter(|r| r.disabled)
        .map(|r| DisabledTool {
            name: r.name,
            consecutive_failures: r.consecutive_failures,
            last_error: r.last_error,
        })
        .collect())
}
