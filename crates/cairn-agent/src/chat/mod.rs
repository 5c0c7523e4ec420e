//! The conversation front door: every channel (terminal, WebSocket, API)
//! hands messages to [`ChatService::handle`], which parses the submission,
//! finds the session and thread, and either runs an agent turn or answers a
//! control or command directly (without the LLM).
//!
//! A session runs one turn at a time. A message arriving while a turn runs
//! interrupts it (then runs), `/interrupt` just stops it, and an approval
//! answer resolves the pending approval of a channel that cannot prompt.

mod commands;
mod jobs;
pub mod notices;
mod turn;
mod turn_parts;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use cairn_core::live::Live;
use cairn_core::submission::{self, ParseContext, Submission};
use chrono_tz::Tz;
use serde::Serialize;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::agent_loop::{AgentLoop, LoopEvent, ToolCallRecord};
use crate::context::{CompactionResult, Compactor};
use crate::hooks::HookFlow;
use crate::jobs::JobScheduler;
use crate::prompt::RuntimeInfo;
use crate::runner::{ApprovalAnswer, ApprovalRequest, Approver};
use crate::session::{SessionError, SessionKey, SessionManager, TurnUsage};
use crate::tools::ToolLimits;

/// A message from a channel.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Inbound {
    /// Who sent it.
    pub user_id: String,
    /// The channel it came through.
    pub channel: String,
    /// The channel's own thread id, if it has threads.
    pub thread: Option<String>,
    /// The text.
    pub text: String,
    /// Images attached to the message, already stored in the workspace's
    /// media folder ([`ChatService::attach_image`]).
    pub images: Vec<cairn_core::image::ImagePart>,
}

/// What a channel does with a turn while it runs.
pub trait ChatSink: Send + Sync {
    /// Sees every event (stream text, show tool activity).
    fn on_event(&self, _event: LoopEvent) {}

    /// Whether to stream the answer.
    fn streaming(&self) -> bool {
        false
    }

    /// Asks the person directly (a terminal prompt). `None` means the channel
    /// cannot prompt: the request is announced with [`ChatSink::on_approval_needed`]
    /// and answered by a later approval message.
    fn approver(&self) -> Option<&dyn Approver> {
        None
    }

    /// An approval is pending and will be answered by a later message.
    fn on_approval_needed(&self, _request: &ApprovalRequest) {}

    /// The conversation was compacted to fit the model's context window.
    fn on_compacted(&self, _result: &CompactionResult) {}
}

/// The answer to one inbound message.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Reply {
    /// The agent's answer to a message.
    Answer(Box<TurnReport>),
    /// Information from a command or control (`/threads`, `/undo`, …).
    Notice {
        /// The text to show.
        text: String,
    },
    /// Something went wrong; the text says what.
    Error {
        /// The message for the person.
        text: String,
    },
    /// A hook dropped the message.
    Dropped {
        /// Why.
        reason: String,
    },
    /// The person asked to leave.
    Quit,
}

impl Reply {
    fn notice(text: impl Into<String>) -> Reply {
        Reply::Notice { text: text.into() }
    }

    fn error(text: impl Into<String>) -> Reply {
        Reply::Error { text: text.into() }
    }
}

/// What one turn did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TurnReport {
    /// The thread it ran in.
    pub thread_id: Uuid,
    /// The turn's number.
    pub turn: u32,
    /// The answer.
    pub response: String,
    /// The tool calls made.
    pub tool_calls: Vec<ToolCallRecord>,
    /// Tokens and cost.
    pub usage: TurnUsage,
    /// The model that answered.
    pub model: Option<String>,
    /// The routing hint that chose it; `None` for the default model.
    pub route: Option<String>,
}

/// Fixed facts the system prompt and tools need.
#[derive(Debug, Clone)]
pub struct ChatSettings {
    /// The agent's name.
    pub agent_name: String,
    /// The workspace directory.
    pub workspace: PathBuf,
    /// The user's time zone.
    pub timezone: Tz,
    /// Host and OS.
    pub runtime: RuntimeInfo,
    /// Tool time and output limits.
    pub tool_limits: ToolLimits,
    /// How long a tool call waits for an approval answered by a later
    /// message before it is declined (the session is locked meanwhile).
    pub approval_timeout: std::time::Duration,
    /// Skill directories besides `workspace/skills` (`skills.paths`).
    pub skill_paths: Vec<PathBuf>,
}

/// The turn running in a session, reachable without the session's lock.
struct Running {
    cancel: CancellationToken,
    pending: Option<(ApprovalRequest, oneshot::Sender<ApprovalAnswer>)>,
}

/// Handles inbound messages for every channel.
pub struct ChatService {
    sessions: Arc<SessionManager>,
    agent: AgentLoop,
    settings: ChatSettings,
    compactor: Option<Arc<Compactor>>,
    jobs: Option<Arc<JobScheduler>>,
    memory: Option<Arc<crate::memory::MemoryService>>,
    router: Option<Live<crate::routing::ModelRouter>>,
    net: Option<Arc<crate::tools::net::NetClient>>,
    max_images: usize,
    running: Arc<Mutex<HashMap<SessionKey, Running>>>,
}

impl std::fmt::Debug for ChatService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatService")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl ChatService {
    /// A service over these sessions and this agent loop.
    pub fn new(sessions: Arc<SessionManager>, agent: AgentLoop, settings: ChatSettings) -> Self {
        Self {
            sessions,
            agent,
            settings,
            compactor: None,
            jobs: None,
            memory: None,
            router: None,
            net: None,
            max_images: cairn_core::image::DEFAULT_MAX_IMAGES,
            running: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// How long an approval asked of a person waits before the call is
    /// declined (`agent.approval_timeout_secs`), for every channel.
    pub fn approval_timeout(&self) -> std::time::Duration {
        self.settings.approval_timeout
    }

    /// Keeps conversations within the model's context window with `compactor`:
    /// before each turn, when the provider reports an overflow, and on `/compact`.
    #[must_use]
    pub fn with_compactor(mut self, compactor: Arc<Compactor>) -> Self {
        self.compactor = Some(compactor);
        self
    }

    /// Runs `/job`, `/status`, `/cancel` and `/jobs` on `scheduler`.
    #[must_use]
    pub fn with_jobs(mut self, scheduler: Arc<JobScheduler>) -> Self {
        self.jobs = Some(scheduler);
        self
    }

    /// Gives each turn a `[Memory context]` recalled from `memory` for the
    /// person's message (and auto-saves the message when configured).
    #[must_use]
    pub fn with_memory(mut self, memory: Arc<crate::memory::MemoryService>) -> Self {
        self.memory = Some(memory);
        self
    }

    /// The memory turns recall from, when one was given.
    pub fn memory(&self) -> Option<&Arc<crate::memory::MemoryService>> {
        self.memory.as_ref()
    }

    /// Routes each turn to the model its message's class calls for
    /// (`[routing]`, the rules in force when the turn starts: a reload
    /// replaces them in `router`); a session's `/model` choice still wins.
    #[must_use]
    pub fn with_router(mut self, router: Live<crate::routing::ModelRouter>) -> Self {
        self.router = Some(router);
        self
    }

    /// Accepts at most `max` images in one message (`gateway.max_images`).
    #[must_use]
    pub fn with_max_images(mut self, max: usize) -> Self {
        self.max_images = max;
        self
    }

    /// The most images one message may carry; channels check before
    /// downloading or decoding any.
    pub fn max_images(&self) -> usize {
        self.max_images
    }

    /// Lets [`ChatService::image_from_url`] fetch http(s) image URLs under
    /// these network rules (`[tools.http]`); without it only `data:` URLs work.
    #[must_use]
    pub fn with_net(mut self, net: Arc<crate::tools::net::NetClient>) -> Self {
        self.net = Some(net);
        self
    }

    /// An image given by URL (a `data:` URL, or http(s) fetched under the
    /// network rules), checked and stored like [`ChatService::attach_image`].
    pub async fn image_from_url(
        &self,
        url: &str,
    ) -> Result<cairn_core::image::ImagePart, crate::media::MediaError> {
        let bytes = if url.trim_start().starts_with("data:") {
            crate::media::decode_data_url(url)?
        } else {
            let net = self.net.as_ref().ok_or_else(|| {
                crate::media::MediaError::Fetch(format!("{url}: only data: URLs are accepted here"))
            })?;
            crate::media::fetch_image(net, url).await?
        };
        crate::media::MediaStore::new(&self.settings.workspace)
            .store(bytes)
            .await
    }

    /// Checks an image a channel received (PNG, JPEG, WebP or GIF, within
    /// the size bound), stores it in the workspace's media folder and
    /// attaches it to `inbound`. Chat adapters (Telegram photos, …) call
    /// this before [`ChatService::handle`].
    pub async fn attach_image(
        &self,
        inbound: &mut Inbound,
        bytes: Vec<u8>,
    ) -> Result<(), crate::media::MediaError> {
        let part = crate::media::MediaStore::new(&self.settings.workspace)
            .store(bytes)
            .await?;
        inbound.images.push(part);
        Ok(())
    }

    /// Drops idle sessions from memory, and their "always" answers from the
    /// policy gate (they are kept with the session and restored by its next
    /// turn). Returns how many sessions went.
    pub async fn prune_idle(&self) -> usize {
        let pruned = self.sessions.prune_idle().await;
        let policy = self.agent.runner().policy();
        for (id, key) in &pruned {
            policy.forget_session(&id.to_string());
            self.agent
                .hooks()
                .on_session_end(&key.user_id, &key.channel, &id.to_string())
                .await;
        }
        pruned.len()
    }

    /// Prunes idle sessions every `every` until the task is aborted.
    pub fn spawn_pruner(
        self: &Arc<Self>,
        every: std::time::Duration,
    ) -> tokio::task::JoinHandle<()> {
        let service = Arc::clone(self);
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(every);
            ticker.tick().await;
            loop {
                ticker.tick().await;
                service.prune_idle().await;
            }
        })
    }

    /// The session manager.
    pub fn sessions(&self) -> &Arc<SessionManager> {
        &self.sessions
    }

    /// The fixed facts it was built with (workspace, zone, approval timeout).
    pub fn settings(&self) -> &ChatSettings {
        &self.settings
    }

    /// The agent loop.
    pub fn agent(&self) -> &AgentLoop {
        &self.agent
    }

    /// Handles one message and returns what to show.
    pub async fn handle(&self, inbound: Inbound, sink: &dyn ChatSink) -> Reply {
        // A secret the person pastes is named, never stored or sent to the model.
        let mut text = match self.agent.runner().leaks() {
            Some(leaks) => leaks.redact_found(&inbound.text, &inbound.channel).await,
            None => inbound.text.clone(),
        };
        if let HookFlow::Cancel(reason) = self
            .agent
            .hooks()
            .before_inbound(&inbound.channel, &mut text)
            .await
        {
            return Reply::Dropped { reason };
        }
        let key = SessionKey {
            user_id: inbound.user_id.clone(),
            channel: inbound.channel.clone(),
        };
        if let Some(refusal) =
            cairn_core::image::too_many_images(inbound.images.len(), self.max_images)
        {
            return Reply::error(refusal);
        }
        if !inbound.images.is_empty() && !self.agent.provider().vision() {
            return Reply::error(cairn_llm::vision_refusal(self.agent.model()));
        }
        let live = match self.sessions.session(&key).await {
            Ok(live) => live,
            Err(e) => return Reply::error(e.to_string()),
        };
        let mut session = match live.try_lock() {
            Ok(session) => session,
            Err(_) => {
                // A turn is running in this session.
                if let Some(reply) = self.while_busy(&key, &text) {
                    return reply;
                }
                live.lock().await
            }
        };
        let awaiting = self.with_running(&key, |r| r.is_some_and(|r| r.pending.is_some()));
        // Everything that starts a turn funnels into one `input` call; `None` resumes.
        let images = inbound.images;
        if !images.is_empty() {
            // Images always go with a message, even one that reads like a command.
            let text = if text.trim().is_empty() {
                "(image)".to_string()
            } else {
                text
            };
            return self
                .input(
                    &key,
                    &mut session,
                    inbound.thread.as_deref(),
                    Some((text, images)),
                    sink,
                )
                .await;
        }
        let input = match submission::parse(
            &text,
            ParseContext {
                awaiting_approval: awaiting,
            },
        ) {
            Submission::UserInput { text } => Some(text),
            Submission::Resume => None,
            Submission::Summarize => Some(
                "Summarize our conversation so far: the main points, the decisions made and the open questions."
                    .to_string(),
            ),
            Submission::Suggest => {
                Some("Based on our conversation so far, suggest a few useful next steps.".to_string())
            }
            Submission::Approval { .. } => {
                return Reply::notice("Nothing is waiting for approval.");
            }
            Submission::Interrupt => return Reply::notice("Nothing is running."),
            Submission::Quit => return Reply::Quit,
            other => {
                return self
                    .control(&mut session, inbound.thread.as_deref(), other)
                    .await;
            }
        };
        let input = input.map(|text| (text, Vec::new()));
        self.input(&key, &mut session, inbound.thread.as_deref(), input, sink)
            .await
    }

    /// The stored id of the person's session on `channel` if it is in
    /// memory, unless a turn holds it (that turn announces finished tasks
    /// itself). Polling never loads or creates a session: an unloaded one
    /// gets its notices at its next turn.
    async fn idle_session_id(&self, key: &SessionKey) -> Option<String> {
        let live = self.sessions.loaded(key).await?;
        let session = live.try_lock().ok()?;
        Some(session.row.id.to_string())
    }

    /// Whether notices (finished background tasks, notifications addressed to
    /// the conversation) wait for the person's idle session on `channel`:
    /// cheap reads, for polling.
    pub async fn notices_waiting(&self, user_id: &str, channel: &str) -> bool {
        let key = SessionKey {
            user_id: user_id.to_string(),
            channel: channel.to_string(),
        };
        let Some(id) = self.idle_session_id(&key).await else {
            return false;
        };
        notices::waiting(self.sessions.store(), &id)
            .await
            .unwrap_or(false)
    }

    /// How many background tasks of the person's session on `channel` still run.
    pub async fn background_running(&self, user_id: &str, channel: &str) -> usize {
        let key = SessionKey {
            user_id: user_id.to_string(),
            channel: channel.to_string(),
        };
        let Some(id) = self.idle_session_id(&key).await else {
            return 0;
        };
        match self.sessions.store().list_background_tasks(&id).await {
            Ok(tasks) => tasks
                .iter()
                .filter(|t| t.status == cairn_store::TaskStatus::Running)
                .count(),
            Err(_) => 0,
        }
    }

    /// Runs a turn of its own for the notices waiting for the person's idle
    /// session on `channel`, so the agent reacts without the
    /// person typing. The notices are the turn's input, marked as an
    /// automatic notice rather than the person's words. `None` when nothing
    /// waits or a turn is running (that turn announces them before its next
    /// model call).
    pub async fn deliver_notices(
        &self,
        user_id: &str,
        channel: &str,
        sink: &dyn ChatSink,
    ) -> Option<Reply> {
        let key = SessionKey {
            user_id: user_id.to_string(),
            channel: channel.to_string(),
        };
        let live = self.sessions.session(&key).await.ok()?;
        let mut session = live.try_lock().ok()?;
        let id = session.row.id.to_string();
        let now = self.sessions.clock().now();
        let notices = match notices::take(self.sessions.store(), &id, now).await {
            Ok(Some(text)) => text,
            Ok(None) => return None,
            Err(e) => {
                tracing::warn!(error = %e, "could not take notices for the conversation");
                return None;
            }
        };
        let text =
            format!("(automatic notice from cairn, not a message from the person)\n{notices}");
        Some(
            self.input(&key, &mut session, None, Some((text, Vec::new())), sink)
                .await,
        )
    }

    /// Handles a message that arrives while a turn runs in the session:
    /// approvals and interrupts are answered at once; anything else
    /// interrupts the turn and then waits for the session.
    fn while_busy(&self, key: &SessionKey, text: &str) -> Option<Reply> {
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        let turn = running.get_mut(key)?;
        let ctx = ParseContext {
            awaiting_approval: turn.pending.is_some(),
        };
        match submission::parse(text, ctx) {
            Submission::Approval {
                approved, always, ..
            } => {
                let answer = match (approved, always) {
                    (true, true) => ApprovalAnswer::Always,
                    (true, false) => ApprovalAnswer::Yes,
                    (false, _) => ApprovalAnswer::No,
                };
                if let Some((_, reply_to)) = turn.pending.take() {
                    let _ = reply_to.send(answer);
                }
                Some(Reply::notice(if approved {
                    "Approved."
                } else {
                    "Declined."
                }))
            }
            Submission::Interrupt => {
                turn.cancel.cancel();
                Some(Reply::notice("Interrupted."))
            }
            _ => {
                turn.cancel.cancel();
                None
            }
        }
    }

    fn with_running<T>(&self, key: &SessionKey, f: impl FnOnce(Option<&Running>) -> T) -> T {
        let running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        f(running.get(key))
    }

    /// The title of the active thread's last turn if it was interrupted (by
    /// a crash, a dropped client or Ctrl-C) and can be resumed, for channels
    /// to mention when a person comes back.
    pub async fn interrupted_turn(&self, user_id: &str, channel: &str) -> Option<String> {
        let key = SessionKey {
            user_id: user_id.to_string(),
            channel: channel.to_string(),
        };
        let live = self.sessions.session(&key).await.ok()?;
        let mut session = live.lock().await;
        session.row.active_thread_id?;
        let id = self
            .sessions
            .resolve_thread(&mut session, None)
            .await
            .ok()?;
        let (_, thread) = session.split(id)?;
        let last = thread.turns.last()?;
        (last.state == crate::session::TurnState::Interrupted)
            .then(|| crate::session::title_from(&last.user_input))
    }

    /// Interrupts the turn running in a session (Ctrl-C, shutdown); returns whether one was running.
    pub fn interrupt(&self, user_id: &str, channel: &str) -> bool {
        let key = SessionKey {
            user_id: user_id.to_string(),
            channel: channel.to_string(),
        };
        self.with_running(&key, |r| {
            r.map(|r| {
                r.cancel.cancel();
                true
            })
            .unwrap_or(false)
        })
    }
}

/// Answers approvals for channels that cannot prompt: parks the request where
/// a later approval message finds it, for at most the approval timeout.
struct PendingApprover<'a> {
    key: SessionKey,
    running: Arc<Mutex<HashMap<SessionKey, Running>>>,
    sink: &'a dyn ChatSink,
    cancel: CancellationToken,
    timeout: std::time::Duration,
}

#[async_trait]
impl Approver for PendingApprover<'_> {
    async fn approve(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        let (tx, rx) = oneshot::channel();
        {
            let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
            match running.get_mut(&self.key) {
                Some(turn) => turn.pending = Some((request.clone(), tx)),
                None => return ApprovalAnswer::No,
            }
        }
        self.sink.on_approval_needed(request);
        let answer = tokio::select! {
            // A dropped sender (the turn was interrupted) is a no.
            answer = rx => answer.unwrap_or(ApprovalAnswer::No),
            () = self.cancel.cancelled() => ApprovalAnswer::No,
            () = tokio::time::sleep(self.timeout) => ApprovalAnswer::Expired(self.timeout),
        };
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(turn) = running.get_mut(&self.key) {
            turn.pending = None;
        }
        answer
    }

    /// The person answers with a later message.
    fn person_present(&self) -> bool {
        true
    }
}

impl From<SessionError> for Reply {
    fn from(e: SessionError) -> Reply {
        Reply::error(e.to_string())
    }
}
