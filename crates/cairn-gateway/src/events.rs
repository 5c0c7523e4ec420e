//! The event bus behind `GET /api/events` and the WebSocket's
//! notifications: what the daemon does (routine runs, jobs, tool calls,
//! notifications) as numbered events.
//!
//! Ids increase from 1 for the life of the process. The last
//! [`EventBus::CAPACITY`] events are kept so a client that reconnects with
//! `Last-Event-ID` gets what it missed; one that was away longer is told
//! that events were lost. Nothing is persisted: the store has the records.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use cairn_agent::agent_loop::LoopEvent;
use cairn_agent::jobs::{JobProgress, JobRecord, JobScheduler};
use cairn_automation::notify::{Activity, GivenUp, Notifier};
use cairn_automation::routines::engine::{RoutineEngine, RunEvent};
use cairn_core::clock::Clock;
use cairn_core::notification::Notification;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Map, Value, json};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

/// A routine run began.
pub const ROUTINE_RUN_STARTED: &str = "routine.run.started";
/// A routine run ended.
pub const ROUTINE_RUN_FINISHED: &str = "routine.run.finished";
/// A running job made progress.
pub const JOB_PROGRESS: &str = "job.progress";
/// A job ended.
pub const JOB_FINISHED: &str = "job.finished";
/// A tool started running.
pub const TOOL_STARTED: &str = "tool.started";
/// A tool call ended.
pub const TOOL_FINISHED: &str = "tool.finished";
/// A notification was recorded.
pub const NOTIFICATION_RECORDED: &str = "notification.recorded";
/// A channel accepted a notification.
pub const NOTIFICATION_DELIVERED: &str = "notification.delivered";
/// A notification could not be delivered (it is in the inbox).
pub const NOTIFICATION_FAILED: &str = "notification.failed";
/// Sent first to a client whose `Last-Event-ID` is older than the buffer.
pub const EVENTS_LOST: &str = "events.lost";
/// A component's state, restarts or last error changed.
pub const COMPONENT_CHANGED: &str = "component.changed";

/// One event: `{"id","type","at",...data}` on the wire.
#[derive(Debug, Clone)]
pub struct Event {
    /// Its number, increasing from 1 in this process.
    pub id: u64,
    /// What happened (`routine.run.finished`, …): one of this module's
    /// constants, so a burst's thousands of events allocate no name.
    pub kind: &'static str,
    /// When it was published.
    pub at: DateTime<Utc>,
    /// The event's own fields, as the source gave them.
    data: Data,
}

/// An event's fields. A run's start and end and a recorded notification
/// are kept as their sources sent them and written out only when a
/// subscriber reads them: a burst publishes thousands that nobody reads.
#[derive(Debug, Clone)]
enum Data {
    Fields(Map<String, Value>),
    Run(RunEvent),
    Recorded(Arc<Notification>),
}

impl Event {
    /// The event's own fields.
    pub fn data(&self) -> Map<String, Value> {
        let fields = match &self.data {
            Data::Fields(map) => return map.clone(),
            Data::Run(RunEvent::Started {
                routine,
                run_id,
                trigger,
            }) => json!({"routine": routine, "run_id": run_id, "trigger": trigger}),
            Data::Run(RunEvent::Finished {
                routine,
                run_id,
                status,
                summary,
            }) => {
                json!({"routine": routine, "run_id": run_id, "status": status.as_str(), "summary": summary})
            }
            Data::Recorded(n) => json!({
                "notification_id": n.id, "user_id": n.user_id, "channel": n.channel,
                "title": n.title, "body": n.body, "priority": n.priority.as_str(),
                "status": n.status.as_str(), "source": n.source,
            }),
        };
        match fields {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }

    /// The JSON text of the event.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".to_string())
    }
}

impl Serialize for Event {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let data = self.data();
        let mut map = s.serialize_map(Some(3 + data.len()))?;
        map.serialize_entry("id", &self.id)?;
        map.serialize_entry("type", &self.kind)?;
        map.serialize_entry("at", &self.at)?;
        for (k, v) in &data {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

struct Ring {
    next_id: u64,
    buffer: VecDeque<Arc<Event>>,
}

/// Numbered events: a replay buffer plus a broadcast for live subscribers.
pub struct EventBus {
    clock: Arc<dyn Clock>,
    ring: Mutex<Ring>,
    live: broadcast::Sender<Arc<Event>>,
}

impl std::fmt::Debug for EventBus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventBus").finish_non_exhaustive()
    }
}

/// What a subscriber gets first: the buffered events after its last id.
#[derive(Debug)]
pub struct Replay {
    /// Some events after the client's last id are no longer buffered (or
    /// the id is from before a restart): the client should re-read state.
    pub lost: bool,
    /// The buffered events after the client's last id, oldest first.
    pub events: Vec<Arc<Event>>,
    /// Everything published after `events`.
    pub live: broadcast::Receiver<Arc<Event>>,
}

impl EventBus {
    /// Events kept for replay.
    pub const CAPACITY: usize = 1024;

    /// An empty bus; the first event gets id 1.
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        Self {
            clock,
            ring: Mutex::new(Ring {
                next_id: 1,
                buffer: VecDeque::with_capacity(Self::CAPACITY),
            }),
            live: broadcast::channel(Self::CAPACITY).0,
        }
    }

    /// Publishes an event of `kind` with the fields of `data` (an object;
    /// anything else is kept under `data`).
    pub fn publish(&self, kind: &'static str, data: Value) -> Arc<Event> {
        let data = match data {
            Value::Object(map) => map,
            Value::Null => Map::new(),
            other => Map::from_iter([("data".to_string(), other)]),
        };
        self.publish_data(kind, Data::Fields(data))
    }

    fn publish_data(&self, kind: &'static str, data: Data) -> Arc<Event> {
        let mut ring = self.ring.lock().unwrap_or_else(|p| p.into_inner());
        let event = Arc::new(Event {
            id: ring.next_id,
            kind,
            at: self.clock.now(),
            data,
        });
        ring.next_id += 1;
        if ring.buffer.len() == Self::CAPACITY {
            ring.buffer.pop_front();
        }
        ring.buffer.push_back(Arc::clone(&event));
        // Sent under the lock so live subscribers see ids in order and a
        // subscriber taken under the same lock never sees an event twice.
        let _ = self.live.send(Arc::clone(&event));
        event
    }

    /// Subscribes after `last_id` (none: live events only).
    pub fn subscribe(&self, last_id: Option<u64>) -> Replay {
        let ring = self.ring.lock().unwrap_or_else(|p| p.into_inner());
        let live = self.live.subscribe();
        let Some(last) = last_id else {
            return Replay {
                lost: false,
                events: Vec::new(),
                live,
            };
        };
        let oldest = ring.buffer.front().map_or(ring.next_id, |e| e.id);
        if last >= ring.next_id {
            // An id this process never gave: from before a restart.
            return Replay {
                lost: true,
                events: ring.buffer.iter().cloned().collect(),
                live,
            };
        }
        Replay {
            lost: last.saturating_add(1) < oldest,
            events: ring
                .buffer
                .iter()
                .filter(|e| e.id > last)
                .cloned()
                .collect(),
            live,
        }
    }

    /// The id the next event will get.
    pub fn next_id(&self) -> u64 {
        self.ring.lock().unwrap_or_else(|p| p.into_inner()).next_id
    }

    /// Forwards what the routine engine, the notifier and the job scheduler
    /// report into this bus. Runs and notifications, which come at a
    /// burst's rate (three events for each of thousands of runs in one
    /// slot), are published on the task that made them, for as long as
    /// their source lives: a task receiving them from a channel fell behind
    /// and missed some. Give-ups and jobs are received until `stop` is
    /// cancelled.
    pub fn feed(
        self: &Arc<Self>,
        sources: Sources,
        stop: CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        if let Some(engine) = &sources.engine {
            let bus = Arc::clone(self);
            engine.watch_runs(Arc::new(move |run| bus.run_event(run)));
        }
        if let Some(notifier) = &sources.notifier {
            let bus = Arc::clone(self);
            notifier.watch_activity(Arc::new(move |a| bus.notification_activity(a)));
        }
        let bus = Arc::clone(self);
        let mut given_up = sources.notifier.as_ref().map(Notifier::subscribe_given_up);
        let mut progress = sources.jobs.as_ref().map(|j| j.subscribe_progress());
        let mut finished = sources.jobs.as_ref().map(|j| j.subscribe_finished());
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = stop.cancelled() => break,
                    Some(g) = next(&mut given_up) => bus.notification_given_up(&g),
                    Some(p) = next(&mut progress) => bus.job_progress(&p),
                    Some(j) = next(&mut finished) => bus.job_finished(&j),
                    else => break,
                }
            }
        })
    }

    /// Publishes a chat turn's tool activity (`tool.started`,
    /// `tool.finished`) with where it came from; other loop events are not
    /// published.
    pub fn publish_tool(&self, event: &LoopEvent, channel: &str, session: &str) {
        match event {
            LoopEvent::ToolStarted { call_id, tool } => {
                self.publish(
                    TOOL_STARTED,
                    json!({"call_id": call_id, "tool": tool, "channel": channel, "session": session}),
                );
            }
            LoopEvent::ToolFinished {
                call_id,
                tool,
                status,
            } => {
                self.publish(
                    TOOL_FINISHED,
                    json!({"call_id": call_id, "tool": tool, "status": status.as_str(), "channel": channel, "session": session}),
                );
            }
            _ => {}
        }
    }

    fn run_event(&self, run: RunEvent) {
        let kind = match &run {
            RunEvent::Started { .. } => ROUTINE_RUN_STARTED,
            RunEvent::Finished { .. } => ROUTINE_RUN_FINISHED,
        };
        self.publish_data(kind, Data::Run(run));
    }

    fn notification_activity(&self, activity: Activity) {
        match activity {
            Activity::Recorded(n) => {
                self.publish_data(NOTIFICATION_RECORDED, Data::Recorded(n));
            }
            Activity::Delivered { id, channel } => {
                self.publish(
                    NOTIFICATION_DELIVERED,
                    json!({"notification_id": id, "channel": channel}),
                );
            }
        }
    }

    fn notification_given_up(&self, g: &GivenUp) {
        self.publish(
            NOTIFICATION_FAILED,
            json!({"notification_id": g.id, "channel": g.channel, "error": g.error}),
        );
    }

    fn job_progress(&self, p: &JobProgress) {
        self.publish(
            JOB_PROGRESS,
            json!({"job_id": p.job_id, "iterations": p.iterations, "step": p.step}),
        );
    }

    fn job_finished(&self, j: &JobRecord) {
        self.publish(
            JOB_FINISHED,
            json!({"job_id": j.id, "title": j.title, "status": j.state.as_str(), "error": j.error}),
        );
    }
}

/// Where [`EventBus::feed`] reads from; each is optional.
#[derive(Debug, Default, Clone)]
pub struct Sources {
    /// Routine runs.
    pub engine: Option<RoutineEngine>,
    /// Notifications.
    pub notifier: Option<Notifier>,
    /// Jobs.
    pub jobs: Option<Arc<JobScheduler>>,
}

/// The next item of an optional receiver; `None` once it is closed (or
/// absent), so `select!` stops polling it. A receiver that fell behind
/// skips what it missed: the bus numbers what it does get.
async fn next<T: Clone>(rx: &mut Option<broadcast::Receiver<T>>) -> Option<T> {
    loop {
        let receiver = rx.as_mut()?;
        match receiver.recv().await {
            Ok(item) => return Some(item),
            Err(broadcast::error::RecvError::Lagged(n)) => {
                tracing::warn!(missed = n, "the event bus fell behind a source");
            }
            Err(broadcast::error::RecvError::Closed) => {
                *rx = None;
                return None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_core::clock::SystemClock;

    fn bus() -> EventBus {
        EventBus::new(Arc::new(SystemClock))
    }

    #[test]
    fn ids_increase_from_one_and_replay_starts_after_the_last_id() {
        let bus = bus();
        for i in 0..5 {
            assert_eq!(bus.publish("x", json!({ "i": i })).id, i + 1);
        }
        let replay = bus.subscribe(Some(3));
        assert!(!replay.lost);
        let ids: Vec<u64> = replay.events.iter().map(|e| e.id).collect();
        assert_eq!(ids, vec![4, 5]);
        let none = bus.subscribe(Some(5));
        assert!(!none.lost && none.events.is_empty());
        let wire: Value =
            serde_json::from_str(&bus.publish("y", json!({"a": 1})).to_json()).unwrap();
        assert_eq!(
            (
                wire["id"].as_u64(),
                wire["type"].as_str(),
                wire["a"].as_i64()
            ),
            (Some(6), Some("y"), Some(1))
        );
        assert!(wire["at"].is_string());
    }

    #[test]
    fn an_id_older_than_the_buffer_or_from_another_process_is_lost() {
        let bus = bus();
        let total = EventBus::CAPACITY as u64 + 10;
        for _ in 0..total {
            bus.publish("x", Value::Null);
        }
        let replay = bus.subscribe(Some(5));
        assert!(replay.lost);
        assert_eq!(replay.events.len(), EventBus::CAPACITY);
        assert_eq!(replay.events[0].id, 11);
        // Exactly at the edge nothing is lost.
        assert!(!bus.subscribe(Some(10)).lost);
        let future = bus.subscribe(Some(total + 100));
        assert!(future.lost);
    }

    #[tokio::test]
    async fn live_events_follow_the_replay_without_duplicates() {
        let bus = bus();
        bus.publish("a", Value::Null);
        let mut replay = bus.subscribe(Some(0));
        bus.publish("b", Value::Null);
        assert_eq!(replay.events.len(), 1);
        assert_eq!(replay.live.recv().await.unwrap().id, 2);
    }
}
