//! What every handler can reach: the store, the clock, the settings and the
//! running parts of the daemon it was given.

use std::sync::Arc;

use cairn_agent::agents::ChatSet;
use cairn_agent::chat::ChatService;
use cairn_agent::jobs::JobScheduler;
use cairn_agent::runner::{Approver, DenyAll};
use cairn_automation::inbound::desk::ApprovalDesk;
use cairn_automation::notify::Notifier;
use cairn_automation::primitives::RunnerLink;
use cairn_automation::primitives::background::BackgroundTasks;
use cairn_automation::primitives::watch::Watchers;
use cairn_automation::routines::engine::RoutineEngine;
use cairn_automation::routines::service::RoutineService;
use cairn_core::clock::Clock;
use cairn_core::config::GatewayConfig;
use cairn_core::live::Live;
use cairn_store::Store;
use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;

use crate::error::ApiError;
use crate::events::{EventBus, Sources};
use crate::status::Components;

/// The gateway's parts. Build with [`Gateway::new`] and the `with_*`
/// methods, then hand it to [`crate::router`] as an [`AppState`].
pub struct Gateway {
    store: Store,
    clock: Arc<dyn Clock>,
    settings: GatewayConfig,
    user_id: String,
    chat: Option<Arc<ChatService>>,
    /// The other agents' chat services (`[[agents]]`), by id: `/v1`
    /// answers as one when asked for the model `cairn:<id>`.
    /// Follows a reload of `[[agents]]` ([`Gateway::with_agent_set`]).
    agents: Live<ChatSet>,
    /// Where turns nobody attends ask for approvals.
    desk: Option<ApprovalDesk>,
    engine: Option<RoutineEngine>,
    notifier: Option<Notifier>,
    jobs: Option<Arc<JobScheduler>>,
    background: Option<Arc<BackgroundTasks>>,
    model: Option<String>,
    components: Arc<Components>,
    started_at: DateTime<Utc>,
    shutdown: CancellationToken,
    // Streams (events, WebSocket chat, OpenAI API).
    events: Arc<EventBus>,
    approval_timeout: std::time::Duration,
    ws_ping: std::time::Duration,
    // Auth and webhooks (pairing key, rate limits, idempotency claims and pruning).
    pairing_key: crate::pairing::PairingKey,
    instance: String,
    limits: crate::limits::Limits,
    last_idempotency_prune: std::sync::Mutex<Option<DateTime<Utc>>>,
    // Open streams by token, ended when their token is revoked.
    streams: Arc<crate::revocation::TokenStreams>,
    // Watchers (`/api/watchers`); built from the chat's tool runner when not given.
    watchers: Option<Arc<Watchers>>,
    // The routine service (`/api/routines/{id}/pause` …); a default one when not given.
    routines: Option<RoutineService>,
    /// Conversations of `/v1/responses`, for `previous_response_id`.
    responses: crate::routes::openai::ResponseMemory,
    // The cost guard the agent's providers answer to (the dashboard's limits).
    cost: Option<Arc<cairn_agent::CostGuard>>,
    // The cairn binary whose `doctor --json` the status page shows.
    doctor: Option<std::path::PathBuf>,
    // The running WhatsApp channels `/whatsapp` hands deliveries to.
    whatsapp: Option<cairn_automation::inbound::whatsapp::webhook::Endpoints>,
}

/// How long a WebSocket approval waits without a chat service to say
/// otherwise (with one, its `agent.approval_timeout_secs` applies).
const APPROVAL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// The state axum hands every handler.
pub type AppState = Arc<Gateway>;

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("settings", &self.settings)
            .field("user_id", &self.user_id)
            .finish_non_exhaustive()
    }
}

impl Gateway {
    /// A gateway over `store` for the person `user_id`; the other parts are
    /// optional, and an endpoint that needs a missing one answers 503.
    pub fn new(
        store: Store,
        clock: Arc<dyn Clock>,
        settings: GatewayConfig,
        user_id: impl Into<String>,
    ) -> Self {
        let started_at = clock.now();
        let events = Arc::new(EventBus::new(Arc::clone(&clock)));
        let shutdown = CancellationToken::new();
        let streams = crate::revocation::TokenStreams::new(
            store.clone(),
            Arc::clone(&clock),
            shutdown.clone(),
        );
        Self {
            store,
            clock,
            settings,
            user_id: user_id.into(),
            chat: None,
            agents: Live::new(Arc::new(ChatSet::default())),
            desk: None,
            engine: None,
            notifier: None,
            jobs: None,
            background: None,
            model: None,
            components: Arc::new(Components::new()),
            started_at,
            shutdown,
            streams,
            events,
            approval_timeout: APPROVAL_TIMEOUT,
            ws_ping: crate::routes::ws::PING_EVERY,
            pairing_key: crate::pairing::PairingKey::ephemeral(),
            instance: format!("gateway-{}", uuid::Uuid::new_v4().simple()),
            limits: crate::limits::Limits::new(),
            last_idempotency_prune: std::sync::Mutex::new(None),
            watchers: None,
            routines: None,
            responses: crate::routes::openai::ResponseMemory::default(),
            cost: None,
            doctor: None,
            whatsapp: None,
        }
    }

    /// Runs `program doctor --json` for the status page's checks (the
    /// daemon passes its own executable, so the checks are `cairn doctor`'s).
    #[must_use]
    pub fn with_doctor(mut self, program: std::path::PathBuf) -> Self {
        self.doctor = Some(program);
        self
    }

    /// Serves `/whatsapp` for the WhatsApp channels registered in `endpoints`.
    #[must_use]
    pub fn with_whatsapp(
        mut self,
        endpoints: cairn_automation::inbound::whatsapp::webhook::Endpoints,
    ) -> Self {
        self.whatsapp = Some(endpoints);
        self
    }

    /// The WhatsApp channels' endpoints, when the daemon has any.
    pub fn whatsapp(&self) -> Option<&cairn_automation::inbound::whatsapp::webhook::Endpoints> {
        self.whatsapp.as_ref()
    }

    /// The program [`Gateway::with_doctor`] named, if any.
    pub fn doctor(&self) -> Option<&std::path::Path> {
        self.doctor.as_deref()
    }

    /// Shows the limits of `guard` (the one the agent's providers answer to).
    #[must_use]
    pub fn with_cost_guard(mut self, guard: Arc<cairn_agent::CostGuard>) -> Self {
        self.cost = Some(guard);
        self
    }

    /// Today's spend against the limits, re-read from the store; `None`
    /// without a cost guard (no LLM configured).
    pub async fn cost_status(&self) -> Option<cairn_agent::cost_guard::CostStatus> {
        match &self.cost {
            Some(guard) => Some(guard.refresh().await),
            None => None,
        }
    }

    /// Conversations of `/v1/responses`, for `previous_response_id`.
    pub fn responses(&self) -> &crate::routes::openai::ResponseMemory {
        &self.responses
    }

    /// Runs agent turns (webhook, WebSocket, OpenAI API) on `chat`, whose
    /// agent answers as `model`; WebSocket approvals wait as long as the
    /// chat service's approval timeout.
    #[must_use]
    pub fn with_chat(mut self, chat: Arc<ChatService>, model: impl Into<String>) -> Self {
        self.approval_timeout = chat.approval_timeout();
        self.chat = Some(chat);
        self.model = Some(model.into());
        self
    }

    /// Serves the other agents (`[[agents]]`) on `/v1` as `cairn:<id>`.
    #[must_use]
    pub fn with_agents(
        mut self,
        agents: std::collections::BTreeMap<String, Arc<ChatService>>,
    ) -> Self {
        self.agents = Live::new(Arc::new(ChatSet::unrouted(agents)));
        self
    }

    /// Asks the owner at `desk` to approve the tool calls of `/v1` and
    /// webhook turns (`agent.approval_channel`).
    #[must_use]
    pub fn with_approval_desk(mut self, desk: ApprovalDesk) -> Self {
        self.desk = Some(desk);
        self
    }

    /// Serves the agents of a set a reload of `[[agents]]` replaces
    /// ([`cairn_agent::agents::Chats::live`]).
    #[must_use]
    pub fn with_agent_set(mut self, agents: Live<ChatSet>) -> Self {
        self.agents = agents;
        self
    }

    /// Fires routines (routine webhooks, `/api/routines/{id}/fire`) on `engine`.
    #[must_use]
    pub fn with_engine(mut self, engine: RoutineEngine) -> Self {
        self.engine = Some(engine);
        self
    }

    /// Sends and lists notifications through `notifier`.
    #[must_use]
    pub fn with_notifier(mut self, notifier: Notifier) -> Self {
        self.notifier = Some(notifier);
        self
    }

    /// Cancels this process's background tasks through `tasks`.
    #[must_use]
    pub fn with_background(mut self, tasks: Arc<BackgroundTasks>) -> Self {
        self.background = Some(tasks);
        self
    }

    /// This process's background tasks, or 503 when no LLM is configured.
    pub fn background(&self) -> Result<&Arc<BackgroundTasks>, ApiError> {
        self.background.as_ref().ok_or_else(|| {
            ApiError::unavailable("no LLM provider is configured, so no background tasks run here")
        })
    }

    /// Lists and cancels jobs on `jobs`.
    #[must_use]
    pub fn with_jobs(mut self, jobs: Arc<JobScheduler>) -> Self {
        self.jobs = Some(jobs);
        self
    }

    /// Reports the health the daemon records in `components`.
    #[must_use]
    pub fn with_components(mut self, components: Arc<Components>) -> Self {
        self.components = components;
        self
    }

    /// Ends streams (WebSocket, SSE) when `token` is cancelled, so a
    /// graceful shutdown is not held open by a connected client.
    #[must_use]
    pub fn with_shutdown(mut self, token: CancellationToken) -> Self {
        self.streams = crate::revocation::TokenStreams::new(
            self.store.clone(),
            Arc::clone(&self.clock),
            token.clone(),
        );
        self.shutdown = token;
        self
    }

    /// Publishes on `events` (the daemon's one bus) instead of a bus of its own.
    #[must_use]
    pub fn with_events(mut self, events: Arc<EventBus>) -> Self {
        self.events = events;
        self
    }

    /// Checks pairing codes with `key` (the install key of the daemon's
    /// home); without it, only codes made with a key of this process pair.
    #[must_use]
    pub fn with_pairing_key(mut self, key: crate::pairing::PairingKey) -> Self {
        self.pairing_key = key;
        self
    }

    /// How often a WebSocket connection is pinged ([`crate::routes::ws::PING_EVERY`]
    /// unless changed, for tests); a client silent for two intervals is dropped.
    #[must_use]
    pub fn with_ws_ping(mut self, every: std::time::Duration) -> Self {
        self.ws_ping = every;
        self
    }

    /// Forwards what the engine, the notifier and the job scheduler report
    /// into the event bus until shutdown.
    pub fn spawn_event_feeds(&self) -> tokio::task::JoinHandle<()> {
        let sources = Sources {
            engine: self.engine.clone(),
            notifier: self.notifier.clone(),
            jobs: self.jobs.clone(),
        };
        self.spawn_component_feed();
        self.events.feed(sources, self.shutdown.clone())
    }

    /// Publishes `component.changed` when a component's state, restarts or
    /// last error change (the dashboard's live health), until shutdown.
    fn spawn_component_feed(&self) {
        let (components, bus, stop) = (
            Arc::clone(&self.components),
            Arc::clone(&self.events),
            self.shutdown.clone(),
        );
        let key = |h: &crate::status::ComponentHealth| (h.state, h.restarts, h.last_error.clone());
        tokio::spawn(async move {
            let mut last = components.snapshot();
            loop {
                let changed = components.changed();
                tokio::pin!(changed);
                // Registered before the look, so no change slips between.
                changed.as_mut().enable();
                let now = components.snapshot();
                for (name, health) in &now {
                    if last.get(name).map(key) != Some(key(health)) {
                        bus.publish(
                            crate::events::COMPONENT_CHANGED,
                            serde_json::json!({"component": name, "state": health.state,
                                "restarts": health.restarts, "last_error": health.last_error}),
                        );
                    }
                }
                last = now;
                tokio::select! {
                    () = stop.cancelled() => break,
                    () = &mut changed => {}
                }
            }
        });
    }

    /// The event bus.
    pub fn events(&self) -> &Arc<EventBus> {
        &self.events
    }

    /// How long a WebSocket approval request waits for an answer.
    pub fn approval_timeout(&self) -> std::time::Duration {
        self.approval_timeout
    }

    /// How often a WebSocket connection is pinged.
    pub fn ws_ping(&self) -> std::time::Duration {
        self.ws_ping
    }

    /// The database.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The clock.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// The `[gateway]` settings.
    pub fn settings(&self) -> &GatewayConfig {
        &self.settings
    }

    /// The person this daemon works for.
    pub fn user_id(&self) -> &str {
        &self.user_id
    }

    /// The other agents' ids (`[[agents]]`) in force now, sorted.
    pub fn agent_ids(&self) -> Vec<String> {
        self.agents.get().others().keys().cloned().collect()
    }

    /// The agent `id`'s chat service (`main` is [`Self::chat`]'s).
    pub fn agent_chat(&self, id: &str) -> Option<Arc<ChatService>> {
        self.agents.get().others().get(id).cloned()
    }

    /// The approver of a turn nobody attends, from `source`: the approval
    /// desk's, labelled with it, or nobody's.
    pub fn unattended_approver(&self, source: &str) -> Arc<dyn Approver> {
        match &self.desk {
            Some(desk) => Arc::new(desk.approver(source)),
            None => Arc::new(DenyAll),
        }
    }

    /// The chat service of the agent a chat route's `?agent=` names
    /// (`main`'s without one): 503 without an LLM, 404 `agent_not_found`
    /// naming the agents for one not configured.
    pub fn chat_of(&self, agent: Option<&str>) -> Result<Arc<ChatService>, ApiError> {
        let main = self.chat()?;
        match agent {
            None => Ok(Arc::clone(main)),
            Some(id) if id == cairn_agent::agents::MAIN => Ok(Arc::clone(main)),
            Some(id) => self.agent_chat(id).ok_or_else(|| {
                let mut known = vec![cairn_agent::agents::MAIN.to_string()];
                known.extend(self.agent_ids());
                ApiError::new(
                    axum::http::StatusCode::NOT_FOUND,
                    "agent_not_found",
                    format!("no agent `{id}` here; the agents are {}", known.join(", ")),
                )
            }),
        }
    }

    /// The chat service, or 503 when no LLM is configured.
    pub fn chat(&self) -> Result<&Arc<ChatService>, ApiError> {
        self.chat.as_ref().ok_or_else(|| {
            ApiError::unavailable("no LLM provider is configured, so the agent cannot answer")
        })
    }

    /// The model the agent answers with, when there is an agent.
    pub fn model(&self) -> Option<&str> {
        self.model.as_deref()
    }

    /// The routine engine, or 503 when this gateway runs without one.
    pub fn engine(&self) -> Result<&RoutineEngine, ApiError> {
        self.engine
            .as_ref()
            .ok_or_else(|| ApiError::unavailable("the routine engine is not running here"))
    }

    /// The notifier, or 503.
    pub fn notifier(&self) -> Result<&Notifier, ApiError> {
        self.notifier
            .as_ref()
            .ok_or_else(|| ApiError::unavailable("notifications are not set up here"))
    }

    /// The job scheduler, or 503 when no LLM is configured.
    pub fn jobs(&self) -> Result<&Arc<JobScheduler>, ApiError> {
        self.jobs
            .as_ref()
            .ok_or_else(|| ApiError::unavailable("no LLM provider is configured, so no jobs run"))
    }

    /// The daemon's components.
    pub fn components(&self) -> &Arc<Components> {
        &self.components
    }

    /// Manages watchers through `watchers` instead of a service over the
    /// chat's tool runner (tests give one with their own tools).
    #[must_use]
    pub fn with_watchers(mut self, watchers: Arc<Watchers>) -> Self {
        self.watchers = Some(watchers);
        self
    }

    /// The person's watchers: the given service, else one over the store
    /// that asks the chat agent's policy (without an agent it can list,
    /// show, pause, resume and delete, but not create).
    pub fn watchers(&self) -> Arc<Watchers> {
        if let Some(w) = &self.watchers {
            return Arc::clone(w);
        }
        let link = RunnerLink::new();
        if let Some(chat) = &self.chat {
            link.attach(chat.agent().runner());
        }
        Watchers::new(self.routines(), link)
    }

    /// Decides routine operations through `service` (the daemon's, with
    /// its `routines.max_backfill`) instead of a default one.
    #[must_use]
    pub fn with_routines(mut self, service: RoutineService) -> Self {
        self.routines = Some(service);
        self
    }

    /// The routine service: the given one, else one over the store for the
    /// person, in the engine's zone (UTC without one), waking the engine.
    pub fn routines(&self) -> RoutineService {
        if let Some(service) = &self.routines {
            return service.clone();
        }
        let zone = self
            .engine
            .as_ref()
            .map_or(chrono_tz::UTC, |e| e.settings().user_zone);
        let service = RoutineService::new(
            self.store.clone(),
            Arc::clone(&self.clock),
            self.user_id.clone(),
            zone,
        );
        match &self.engine {
            Some(engine) => service.with_wake(Arc::new(engine.clone())),
            None => service,
        }
    }

    /// When this gateway was built.
    pub fn started_at(&self) -> DateTime<Utc> {
        self.started_at
    }

    /// Cancelled when the daemon stops.
    pub fn shutdown(&self) -> &CancellationToken {
        &self.shutdown
    }

    /// Registers a stream (WebSocket, event stream) opened with `token`:
    /// the guard's `ended()` is cancelled when the token is revoked or
    /// expires, or the daemon stops.
    pub fn open_stream(&self, token: &cairn_store::ApiToken) -> crate::revocation::StreamGuard {
        self.streams.open(token)
    }

    /// Per-client rate limits.
    pub fn limits(&self) -> &crate::limits::Limits {
        &self.limits
    }

    /// The key pairing codes are hashed with.
    pub fn pairing_key(&self) -> &crate::pairing::PairingKey {
        &self.pairing_key
    }

    /// This gateway's name as the owner of the claims it holds in the store
    /// (idempotency keys), unique per process.
    pub fn instance(&self) -> &str {
        &self.instance
    }

    /// Whether idempotency keys are due a prune (at most once a minute);
    /// answering `true` marks them pruned now.
    pub fn idempotency_prune_due(&self, now: DateTime<Utc>) -> bool {
        let mut last = self
            .last_idempotency_prune
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if last.is_some_and(|t| now - t < chrono::Duration::minutes(1)) {
            return false;
        }
        *last = Some(now);
        true
    }
}
