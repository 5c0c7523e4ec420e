//! Fires that are not scheduled slots: by hand, chat messages, cairn's
//! own events, signed webhooks.

use super::execute::Start;
use super::*;

impl RoutineEngine {
    /// Fires a routine now, outside its schedule: `routine fire`, the API, a
    /// tool. Cooldown does not apply; concurrency limits do. `run_id`
    /// chooses the run's id (a caller that printed it already).
    pub async fn fire_manual(
        &self,
        routine: &Routine,
        payload: Option<serde_json::Value>,
        run_id: Option<Uuid>,
    ) -> Result<Fired, FireError> {
        can_fire(routine)?;
        let fire = Unscheduled {
            trigger_type: "manual",
            detail: "fired by hand".to_string(),
            payload,
            cooled: false,
            depth: 0,
            refuse: None,
            quiet: None,
        };
        self.fire_unscheduled(routine, fire, run_id).await
    }

    /// Fires a built-in routine outside its schedule because its task has
    /// work now (self-repair when a job went quiet): recorded with trigger
    /// `system` and `detail`. Cooldown does not apply; concurrency limits do.
    pub async fn fire_upkeep(&self, routine: &Routine, detail: String) -> Result<Fired, FireError> {
        can_fire(routine)?;
        let fire = Unscheduled {
            trigger_type: "system",
            detail,
            payload: None,
            cooled: false,
            depth: 0,
            refuse: None,
            quiet: None,
        };
        self.fire_unscheduled(routine, fire, None).await
    }

    /// [`offer_message`](Self::offer_message) in a task of this engine, so
    /// the chat's answer does not wait and [`shutdown`](Self::shutdown)
    /// still waits for the fires.
    pub fn offer_in_background(&self, channel: &str, text: &str) {
        let (engine, channel, text) = (self.clone(), channel.to_string(), text.to_string());
        self.inner.tasks.spawn(async move {
            let fired = engine.offer_message(&channel, &text).await;
            if !fired.is_empty() {
                tracing::info!(routines = fired.len(), "chat message fired event routines");
            }
        });
    }

    /// Offers an inbound chat message to the event routines; returns what fired.
    pub async fn offer_message(&self, channel: &str, text: &str) -> Vec<Fired> {
        // One counter read: a routine applied a moment ago already matches.
        if let Err(e) = self.refresh_triggered().await {
            tracing::warn!(error = %e, "cannot refresh event routines");
        }
        let matcher = Arc::clone(&self.inner.triggered.read().await.matcher);
        let ids = matcher.matches(channel, text);
        let mut fired = Vec::new();
        for id in ids {
            let routine = match self.inner.store.get_routine(id).await {
                // A paused routine fires nothing: its messages pass it by.
                Ok(Some(r)) if r.spec.enabled && r.runtime.paused.is_none() => r,
                Ok(_) => continue,
                Err(e) => {
                    tracing::warn!(error = %e, "event routine lookup failed");
                    continue;
                }
            };
            let fire = Unscheduled {
                trigger_type: "event",
                detail: format!("message on {channel}: {}", clip(text, 200)),
                payload: Some(serde_json::json!({ "channel": channel, "text": text })),
                cooled: true,
                depth: 0,
                refuse: None,
                quiet: None,
            };
            match self.fire_unscheduled(&routine, fire, None).await {
                Ok(f) => fired.push(f),
                Err(e) => {
                    tracing::warn!(routine = %routine.spec.name, error = %e, "event fire failed")
                }
            }
        }
        fired
    }

    /// Announces a system event to the `system_event` routines; returns what fired.
    pub async fn emit(&self, event: SystemEvent) -> Vec<Fired> {
        if event.depth > MAX_EVENT_DEPTH {
            tracing::warn!(event = %event.name, depth = event.depth, "system event chain cut: routines may be firing each other");
            return Vec::new();
        }
        let routines: Vec<Routine> = self
            .inner
            .triggered
            .read()
            .await
            .system
            .iter()
            .filter(|r| {
                r.spec.enabled && r.runtime.paused.is_none() && event.fires(&r.spec.trigger)
            })
            .cloned()
            .collect();
        let mut fired = Vec::new();
        for routine in routines {
            let fire = Unscheduled {
                trigger_type: "system_event",
                detail: event.name.clone(),
                payload: Some(event.payload()),
                cooled: true,
                depth: event.depth + 1,
                refuse: None,
                quiet: None,
            };
            match self.fire_unscheduled(&routine, fire, None).await {
                Ok(f) => fired.push(f),
                Err(e) => {
                    tracing::warn!(routine = %routine.spec.name, error = %e, "system event fire failed")
                }
            }
        }
        fired
    }

    /// Emits `job.finished` and `notification.failed` as they happen, until `cancel`.
    pub fn forward_events(
        &self,
        mut jobs: Option<tokio::sync::broadcast::Receiver<cairn_core::job::JobRecord>>,
        mut given_up: Option<tokio::sync::broadcast::Receiver<crate::notify::GivenUp>>,
        cancel: CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        use tokio::sync::broadcast::error::RecvError;
        let engine = self.clone();
        tokio::spawn(async move {
            async fn next<T: Clone>(
                rx: &mut Option<tokio::sync::broadcast::Receiver<T>>,
            ) -> Option<T> {
                let Some(r) = rx.as_mut() else {
                    return std::future::pending().await;
                };
                loop {
                    match r.recv().await {
                        Ok(item) => return Some(item),
                        Err(RecvError::Lagged(n)) => {
                            tracing::warn!(
                                missed = n,
                                "system events were dropped: too many at once"
                            );
                        }
                        Err(RecvError::Closed) => {
                            *rx = None;
                            return std::future::pending().await;
                        }
                    }
                }
            }
            loop {
                let event = tokio::select! {
                    () = cancel.cancelled() => return,
                    Some(job) = next(&mut jobs) => SystemEvent::job_finished(&job),
                    Some(n) = next(&mut given_up) => SystemEvent::notification_failed(&n),
                };
                engine.emit(event).await;
            }
        })
    }

    /// The webhook routine at `path` (its `path`, else its id, else its
    /// name), if any.
    pub async fn webhook_routine(&self, path: &str) -> Option<Routine> {
        let triggered = self.inner.triggered.read().await;
        triggered
            .webhooks
            .iter()
            .find(|r| match &r.spec.trigger {
                Trigger::Webhook { path: Some(p), .. } => {
                    p.trim_matches('/') == path.trim_matches('/')
                }
                _ => false,
            })
            .or_else(|| triggered.webhooks.iter().find(|r| r.id.to_string() == path))
            .or_else(|| triggered.webhooks.iter().find(|r| r.spec.name == path))
            .cloned()
    }

    /// Fires the webhook routine at `path` with a delivery. A routine with
    /// a secret needs its signature to match (over `<timestamp>.<body>`
    /// when a timestamp came, which must be recent and new: a replay is
    /// refused); one without needs the caller to have checked a bearer
    /// token. Refusals (a replay, a guardrail) are recorded as skipped
    /// runs at most once a [`QUIET_REFUSALS`] window per reason.
    pub async fn fire_webhook(
        &self,
        path: &str,
        delivery: &Delivery<'_>,
    ) -> Result<Fired, WebhookFireError> {
        self.refresh_triggered().await.map_err(FireError::from)?;
        let routine = self
            .webhook_routine(path)
            .await
            .ok_or_else(|| WebhookError::Unknown(path.to_string()))?;
        if !routine.spec.enabled {
            return Err(WebhookError::Disabled(routine.spec.name.clone()).into());
        }
        let now = self.inner.clock.now();
        let mut refuse = None;
        match &routine.spec.trigger {
            Trigger::Webhook {
                secret: Some(secret),
                ..
            } => {
                let secret = webhook::resolve_secret(&routine.spec.name, secret, &self.inner.env)?;
                let verified = webhook::verify(&secret, delivery, now)?;
                if let Some(key) = verified.replay_key {
                    let scope = format!("routine-webhook:{}", routine.id);
                    let fresh = self
                        .inner
                        .store
                        .first_sighting(&scope, &key, now, REPLAY_MEMORY)
                        .await
                        .map_err(FireError::from)?;
                    if !fresh {
                        refuse = Some(REPLAY_REASON.to_string());
                    }
                }
            }
            _ if delivery.bearer_ok => {}
            _ => return Err(WebhookError::MissingSignature.into()),
        }
        let body = delivery.body;
        let payload = serde_json::from_slice::<serde_json::Value>(body).unwrap_or_else(|_| {
            serde_json::Value::String(String::from_utf8_lossy(body).into_owned())
        });
        let fire = Unscheduled {
            trigger_type: "webhook",
            detail: format!("webhook {path} ({} bytes)", body.len()),
            payload: Some(payload),
            cooled: true,
            depth: 0,
            refuse,
            quiet: Some(QUIET_REFUSALS),
        };
        Ok(self.fire_unscheduled(&routine, fire, None).await?)
    }

    /// Admits and starts an unscheduled fire (`run_id` chooses the run's id).
    async fn fire_unscheduled(
        &self,
        routine: &Routine,
        unscheduled: Unscheduled,
        run_id: Option<Uuid>,
    ) -> Result<Fired, FireError> {
        let Unscheduled {
            trigger_type,
            detail,
            payload,
            cooled,
            depth,
            refuse,
            quiet,
        } = unscheduled;
        let mut run = self.new_run(routine, trigger_type, None, self.inner.clock.now());
        if let Some(id) = run_id {
            run.id = id;
        }
        run.trigger_detail = Some(detail);
        let fire = FireContext {
            trigger_type: trigger_type.to_string(),
            detail: run.trigger_detail.clone(),
            payload,
            scheduled_for: None,
        };
        let g = &routine.spec.guardrails;
        if cooled && g.dedup_window.is_some() {
            run.dedup_key = fire.payload.as_ref().map(dedup_key);
        }
        let admission = Admission {
            dedup_window: if cooled { g.dedup_window } else { None },
            cooldown: if cooled { Some(g.cooldown) } else { None },
            max_concurrent: Some(g.max_concurrent),
            global_max: Some(self.max_concurrent()),
            queue_max: Some(self.max_waiting()),
            max_runs: g.max_runs,
            refuse,
            quiet,
            fire: Some(queued_fire(fire.payload.as_ref(), depth)),
            ..Admission::default()
        };
        let admitted = self
            .inner
            .admissions
            .admit(&self.inner.store, admission, vec![run.clone()])
            .await?;
        match &admitted {
            Admitted::Started => {
                metrics::counter!("cairn_routine_fires_total", "status" => "started").increment(1);
                tracing::info!(routine = %routine.spec.name, trigger = %run.trigger_type, "routine fired");
                self.start(Start {
                    routine: routine.clone(),
                    run: run.clone(),
                    fire,
                    depth,
                    note: None,
                });
            }
            Admitted::Waiting(reason) => {
                metrics::counter!("cairn_routine_fires_total", "status" => "waiting").increment(1);
                tracing::info!(routine = %routine.spec.name, %reason, "routine fire waits for a place");
                // Boxed: most fires start, and every fire's future would carry it.
                Box::pin(self.start_waiting(None)).await;
            }
            Admitted::Skipped(reason) => {
                metrics::counter!("cairn_routine_fires_total", "status" => "skipped").increment(1);
                tracing::info!(routine = %routine.spec.name, %reason, "routine fire skipped");
                if reason.contains(cairn_store::QUEUE_FULL) {
                    self.note_queue_full(routine, 1, reason);
                }
            }
            Admitted::Refused(reason) => {
                metrics::counter!("cairn_routine_fires_total", "status" => "refused").increment(1);
                tracing::debug!(routine = %routine.spec.name, %reason, "routine fire refused (recorded a moment ago)");
            }
            Admitted::Taken => return Err(FireError::Gone(routine.spec.name.clone())),
        }
        Ok(Fired {
            routine_id: routine.id,
            routine: routine.spec.name.clone(),
            run_id: run.id,
            admitted,
        })
    }
}

/// What a queued unscheduled fire keeps for its start: its payload and
/// its depth in a chain of system events (see [`fire_of_queued`]).
fn queued_fire(payload: Option<&serde_json::Value>, depth: u32) -> serde_json::Value {
    serde_json::json!({ "payload": payload, "depth": depth })
}

/// The payload and depth [`queued_fire`] kept.
pub(super) fn fire_of_queued(kept: Option<&serde_json::Value>) -> (Option<serde_json::Value>, u32) {
    let Some(kept) = kept else {
        return (None, 0);
    };
    let payload = kept.get("payload").filter(|p| !p.is_null()).cloned();
    let depth = kept
        .get("depth")
        .and_then(serde_json::Value::as_u64)
        .map_or(0, |d| u32::try_from(d).unwrap_or(u32::MAX));
    (payload, depth)
}

/// Refuses a disabled or paused routine, naming it.
fn can_fire(routine: &Routine) -> Result<(), FireError> {
    if !routine.spec.enabled {
        return Err(FireError::Disabled(routine.spec.name.clone()));
    }
    if let Some(pause) = &routine.runtime.paused {
        return Err(FireError::Paused(
            routine.spec.name.clone(),
            cairn_store::paused_reason(pause),
        ));
    }
    Ok(())
}

/// A fire that is not a scheduled slot.
struct Unscheduled {
    /// `manual`, `event`, `system_event`, `system` or `webhook`.
    trigger_type: &'static str,
    /// The run's trigger detail.
    detail: String,
    /// What the action is handed.
    payload: Option<serde_json::Value>,
    /// Whether cooldown and dedup apply (not to manual fires).
    cooled: bool,
    /// Links of system-event firings that led here.
    depth: u32,
    /// A refusal already decided (a replayed webhook delivery).
    refuse: Option<String>,
    /// Record a refusal at most once in this window per reason.
    quiet: Option<std::time::Duration>,
}

/// Refusals of webhook fires are recorded as skipped runs at most once in
/// this window per routine and reason: a flood of replays or of deliveries
/// during a cooldown leaves one record a minute, not one each.
pub const QUIET_REFUSALS: std::time::Duration = std::time::Duration::from_secs(60);

/// How long a timestamped delivery is remembered: twice
/// [`webhook::TIMESTAMP_WINDOW`], so the memory outlasts the window on both
/// sides of its timestamp and a replay is caught whenever it comes.
const REPLAY_MEMORY: chrono::Duration = chrono::Duration::minutes(10);

/// The reason a replayed delivery is refused with.
pub const REPLAY_REASON: &str =
    "replay: this signed delivery (same X-Cairn-Timestamp and signature) was already received";

/// Why a webhook fire failed.
#[derive(Debug, thiserror::Error)]
pub enum WebhookFireError {
    /// Verification failed (unknown routine, signature).
    #[error(transparent)]
    Webhook(#[from] WebhookError),
    /// Recording failed.
    #[error(transparent)]
    Fire(#[from] FireError),
}
