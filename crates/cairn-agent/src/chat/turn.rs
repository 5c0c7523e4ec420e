//! Running one agent turn in a thread: checkpoint, prompt, loop, record, save.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use cairn_core::chat::ChatMessage;
use cairn_core::live::Live;
use tokio_util::sync::CancellationToken;

use super::{ChatService, ChatSink, PendingApprover, Reply, Running, TurnReport};
use crate::AgentLoop;
use crate::agent_loop::{LoopDelegate, LoopEvent, LoopOutcome, LoopStatus};
use crate::context::Compactor;
use crate::runner::Approver;
use crate::session::model::{answered, history_of, summary_of};
use crate::session::{
    Checkpoint, LiveSession, SessionKey, SessionManager, Thread, ThreadState, Turn, TurnState,
    TurnUsage, title_from,
};
use cairn_store::SessionRow;

/// The loop delegate of a chat turn.
struct TurnDelegate<'a> {
    sink: &'a dyn ChatSink,
    approver: &'a dyn Approver,
    sessions: &'a SessionManager,
    /// The session, whose finished background tasks are announced before each model call.
    session_id: &'a str,
    clock: &'a dyn cairn_core::clock::Clock,
    thread_id: uuid::Uuid,
    /// Where the turn is stored.
    position: i64,
    /// Index in the loop's messages where this turn's messages start; moves
    /// when an overflow compaction shrinks the history before it.
    base: AtomicUsize,
    overflow: Option<Overflow<'a>>,
}

/// What the delegate needs to shrink the conversation when the provider
/// reports an overflow: a copy of the thread's earlier turns (the thread
/// itself stays whole, so a dropped turn loses nothing).
struct Overflow<'a> {
    compactor: &'a Compactor,
    clock: &'a dyn cairn_core::clock::Clock,
    system_prompt: String,
    turns: tokio::sync::Mutex<Option<Vec<Turn>>>,
    compacted: std::sync::atomic::AtomicBool,
}

#[async_trait]
impl LoopDelegate for TurnDelegate<'_> {
    fn approver(&self) -> &dyn Approver {
        self.approver
    }

    fn streaming(&self) -> bool {
        self.sink.streaming()
    }

    fn on_event(&self, event: LoopEvent) {
        self.sink.on_event(event);
    }

    async fn on_message(&self, index: usize, message: &ChatMessage) {
        let Some(seq) = index.checked_sub(self.base.load(Ordering::SeqCst)) else {
            return;
        };
        if let Err(e) = self
            .sessions
            .record_message(self.thread_id, self.position, seq, message)
            .await
        {
            // The turn goes on; its end saves every message again.
            tracing::warn!(error = %e, "recording a message of the running turn failed");
        }
    }

    /// Appends what waits for this conversation (finished background tasks,
    /// notifications addressed to it). Taking them marks them delivered in
    /// the same statement, so none is injected twice; a failed read leaves
    /// them in the store for the next call.
    async fn before_llm(&self, messages: &mut Vec<ChatMessage>) {
        let store = self.sessions.store();
        match super::notices::waiting(store, self.session_id).await {
            Ok(true) => {}
            Ok(false) => return,
            Err(e) => {
                tracing::warn!(error = %e, "could not look for notices for the conversation");
                return;
            }
        }
        let text = match super::notices::take(store, self.session_id, self.clock.now()).await {
            Ok(Some(text)) => text,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(error = %e, "could not take notices for the conversation");
                return;
            }
        };
        let message = ChatMessage::system(text);
        messages.push(message.clone());
        self.on_message(messages.len() - 1, &message).await;
    }

    async fn on_context_overflow(&self, messages: &mut Vec<ChatMessage>) -> bool {
        let Some(o) = &self.overflow else {
            return false;
        };
        let mut guard = o.turns.lock().await;
        let Some(turns) = guard.as_mut() else {
            return false;
        };
        let base = self.base.load(Ordering::SeqCst).min(messages.len());
        match o
            .compactor
            .compact_for_overflow(turns, &o.system_prompt, o.clock.now())
            .await
        {
            Ok(result) if result.turns_removed > 0 => {
                let current = messages.split_off(base);
                messages.clear();
                messages.push(system_message(&o.system_prompt, turns));
                messages.extend(history_of(turns));
                self.base.store(messages.len(), Ordering::SeqCst);
                messages.extend(current);
                o.compacted.store(true, Ordering::SeqCst);
                self.sink.on_compacted(&result);
                true
            }
            Ok(_) => false,
            Err(e) => {
                tracing::warn!(error = %e, "compaction after a context overflow failed");
                false
            }
        }
    }
}

/// The system message: the prompt, and what compaction summarized of the
/// earlier conversation (here rather than as a message, so the history
/// still starts with the person and roles alternate for every provider).
fn system_message(prompt: &str, turns: &[Turn]) -> ChatMessage {
    match summary_of(turns) {
        Some(summary) => ChatMessage::system(format!(
            "{prompt}\n\n## Earlier in this conversation (summary)\n\n{summary}"
        )),
        None => ChatMessage::system(prompt),
    }
}

/// The messages the model is sent, and where the turn's own begin: the
/// system prompt, the thread's history, the recalled memory context (just
/// before the person's message and outside the turn's recorded messages: it
/// informs this answer only and is recalled afresh each turn), the turn.
fn turn_messages(
    prompt: &str,
    thread: &Thread,
    memory_context: Option<String>,
    current: &Turn,
) -> (Vec<ChatMessage>, usize) {
    let mut messages = vec![system_message(prompt, &thread.turns)];
    messages.extend(thread.history());
    if let Some(context) = memory_context {
        messages.push(ChatMessage::system(context));
    }
    let base = messages.len();
    messages.extend(current.messages.iter().cloned());
    (messages, base)
}

/// The earlier turns as compacted during the run (when they were), the
/// running turn after them.
fn adopt_compacted(thread: &mut Thread, overflow: Option<Overflow<'_>>) {
    if let Some(o) = overflow
        && o.compacted.load(Ordering::SeqCst)
        && let Some(mut compacted) = o.turns.into_inner()
    {
        let running = thread.turns.pop();
        compacted.extend(running);
        thread.turns = compacted;
    }
}

/// What a turn's run left, for [`ChatService::finish`].
struct Ran<'a> {
    prior: PriorTurn,
    /// The messages the turn added.
    messages: &'a [ChatMessage],
    outcome: &'a LoopOutcome,
    /// The route's hint, when a route answered.
    route: Option<String>,
}

impl ChatService {
    /// Runs a turn for `text` in the resolved thread, or resumes the thread's
    /// interrupted last turn when `text` is `None`.
    ///
    /// Cancel safety: the turn is stored (with the person's message) before
    /// the model is called and each message is recorded as it arrives; if
    /// this future is dropped midway, the thread in memory still holds every
    /// earlier turn, and the next use of the thread settles the unfinished
    /// one as interrupted (see `SessionManager::settle`).
    pub(super) async fn input(
        &self,
        key: &SessionKey,
        session: &mut LiveSession,
        external: Option<&str>,
        input: Option<(String, Vec<cairn_core::image::ImagePart>)>,
        sink: &dyn ChatSink,
    ) -> Reply {
        let (text, images) = match input {
            Some((text, images)) => (Some(text), images),
            None => (None, Vec::new()),
        };
        let clock = Arc::clone(self.sessions.clock());
        let thread_id = match self.sessions.resolve_thread(session, external).await {
            Ok(id) => id,
            Err(e) => return e.into(),
        };
        let model = session
            .row
            .metadata
            .get("model")
            .and_then(|m| m.as_str())
            .map(str::to_string);
        let session_id = session.row.id.to_string();
        let Some((row, thread)) = session.split(thread_id) else {
            return Reply::error("the thread could not be loaded");
        };

        let memory_context = self.recall_and_save(text.as_deref()).await;
        let mut current = match self.starting_turn(thread, text, images, clock.now()).await {
            Ok(turn) => turn,
            Err(reply) => return reply,
        };
        let (agent, route) = self.agent_for(model, &current.user_input);
        let prompt = self.system_prompt(&agent).await;
        self.compact_before(&mut thread.turns, &prompt, sink, clock.now())
            .await;
        let (mut messages, base) = turn_messages(&prompt, thread, memory_context, &current);
        let earlier = self.compactor.is_some().then(|| thread.turns.clone());

        let prior = PriorTurn::from(&current);
        current.state = TurnState::Processing;
        let index = match self.store_started(row, thread, current, clock.now()).await {
            Ok(index) => index,
            Err(reply) => return reply,
        };

        // "Always" answers outlive the process: restore them into the gate.
        let policy = agent.runner().policy();
        for tool in allowed_tools(&row.metadata) {
            policy.allow_for_session(&session_id, &tool);
        }

        let cancel = CancellationToken::new();
        let _running = self.register(key, cancel.clone());
        let ctx = self
            .tool_context(&session_id, cancel.clone())
            .with_thread(thread.id.to_string());
        let pending = PendingApprover {
            key: key.clone(),
            running: Arc::clone(&self.running),
            sink,
            cancel,
            timeout: self.settings.approval_timeout,
        };
        let overflow = self.compactor.as_deref().map(|compactor| Overflow {
            compactor,
            clock: clock.as_ref(),
            system_prompt: prompt,
            turns: tokio::sync::Mutex::new(earlier),
            compacted: std::sync::atomic::AtomicBool::new(false),
        });
        let delegate = TurnDelegate {
            sink,
            approver: sink.approver().unwrap_or(&pending),
            sessions: &self.sessions,
            session_id: &session_id,
            clock: clock.as_ref(),
            thread_id: thread.id,
            position: thread.turns[index].position,
            base: AtomicUsize::new(base),
            overflow,
        };
        let outcome = agent.run(&delegate, &mut messages, &ctx).await;
        let base = delegate.base.load(Ordering::SeqCst).min(messages.len());
        adopt_compacted(thread, delegate.overflow);

        let allowed = policy.session_allow_list(&session_id);
        if allowed != allowed_tools(&row.metadata) {
            set_allowed_tools(&mut row.metadata, allowed);
        }
        let ran = Ran {
            prior,
            messages: &messages[base..],
            outcome: &outcome,
            route,
        };
        self.finish(row, thread, ran, clock.as_ref()).await
    }

    /// Stores the turn, with the person's message, before the model is
    /// called; answers its index in the thread.
    async fn store_started(
        &self,
        row: &mut SessionRow,
        thread: &mut Thread,
        current: Turn,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<usize, Reply> {
        thread.turns.push(current);
        let index = thread.turns.len() - 1;
        thread.state = ThreadState::Processing;
        thread.updated_at = now;
        if thread.title.is_none() {
            thread.title = Some(title_from(&thread.turns[index].user_input));
        }
        if let Err(e) = self.sessions.save_turn(row, thread, index).await {
            return Err(e.into());
        }
        Ok(index)
    }

    /// The memory context for `text`, recalled before the message is
    /// auto-saved so it does not find itself.
    async fn recall_and_save(&self, text: Option<&str>) -> Option<String> {
        let (Some(memory), Some(text)) = (&self.memory, text) else {
            return None;
        };
        let context = memory.context_for(text).await;
        if let Err(e) = memory.auto_save(text).await {
            tracing::warn!(error = %e, "auto-saving the message to memory failed");
        }
        context
    }

    /// What this turn starts from: a new message (after an undo checkpoint
    /// is saved), or the thread's interrupted last turn.
    async fn starting_turn(
        &self,
        thread: &mut Thread,
        text: Option<String>,
        images: Vec<cairn_core::image::ImagePart>,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<Turn, Reply> {
        let Some(text) = text else {
            let Some(mut t) = thread
                .turns
                .pop_if(|last| last.state == TurnState::Interrupted)
            else {
                return Err(Reply::notice(
                    "Nothing to resume: the last turn was not interrupted.",
                ));
            };
            // Results that never came are answered as unfinished, not re-run.
            t.messages = answered(&t.messages);
            t.state = TurnState::Processing;
            t.completed_at = None;
            t.error = None;
            return Ok(t);
        };
        let number = thread.next_turn_number();
        let description = format!("before turn {number}: {}", title_from(&text));
        let checkpoint = Checkpoint::new(number, description, thread.view());
        thread.undo.checkpoint(checkpoint.clone());
        self.sessions.save_checkpoint(thread, &checkpoint).await?;
        Ok(Turn::start_with_images(number, text, images, now))
    }

    /// The agent that answers, with the route's hint: the person's `/model`
    /// choice wins; otherwise the message's route, if any.
    fn agent_for(&self, model: Option<String>, user_input: &str) -> (AgentLoop, Option<String>) {
        let router = self.router.as_ref().map(Live::get);
        let route = match (&model, &router) {
            (None, Some(router)) => router.route(user_input),
            _ => None,
        };
        let agent = match (model, route) {
            (Some(m), _) => self.agent.with_model(Some(m)),
            (None, Some(route)) => self
                .agent
                .with_provider(Arc::clone(&route.provider), route.model.clone()),
            (None, None) => self.agent.clone(),
        };
        (agent, route.map(|r| r.hint.clone()))
    }

    /// Compacts the thread's earlier turns when they no longer fit.
    async fn compact_before(
        &self,
        turns: &mut Vec<Turn>,
        prompt: &str,
        sink: &dyn ChatSink,
        now: chrono::DateTime<chrono::Utc>,
    ) {
        let Some(compactor) = &self.compactor else {
            return;
        };
        match compactor.maybe_compact(turns, prompt, now).await {
            Ok(Some(result)) => sink.on_compacted(&result),
            Ok(None) => {}
            // The turn can still run; the provider will say if it does not fit.
            Err(e) => tracing::warn!(error = %e, "compaction before the turn failed"),
        }
    }

    /// Records how the turn ended, stores it and says so.
    async fn finish(
        &self,
        row: &mut SessionRow,
        thread: &mut Thread,
        ran: Ran<'_>,
        clock: &dyn cairn_core::clock::Clock,
    ) -> Reply {
        let Ran {
            prior,
            messages,
            outcome,
            route,
        } = ran;
        let index = thread.turns.len() - 1;
        let mut turn = record(&thread.turns[index], prior, messages, outcome, clock.now());
        if !outcome.model.is_empty() {
            turn.model = Some(outcome.model.clone());
        }
        turn.route = route;
        thread.state = match turn.state {
            TurnState::Interrupted => ThreadState::Interrupted,
            _ => ThreadState::Completed,
        };
        thread.updated_at = clock.now();
        let report = TurnReport {
            thread_id: thread.id,
            turn: turn.number,
            response: turn.response.clone().unwrap_or_default(),
            tool_calls: turn.tool_calls.clone(),
            usage: turn.usage,
            model: turn.model.clone(),
            route: turn.route.clone(),
        };
        let error = turn.error.clone();
        let state = turn.state;
        thread.turns[index] = turn;
        if let Err(e) = self.sessions.save_turn(row, thread, index).await {
            return e.into();
        }
        match (state, error) {
            (TurnState::Completed, _) => Reply::Answer(Box::new(report)),
            (TurnState::Interrupted, _) => {
                Reply::notice("Interrupted. /resume continues the turn, /undo drops it.")
            }
            (_, Some(error)) => Reply::error(error),
            (_, None) => Reply::error("the turn failed"),
        }
    }

    /// Makes the turn reachable for interrupts and approvals until the guard drops.
    fn register(&self, key: &SessionKey, cancel: CancellationToken) -> RunningGuard {
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        running.insert(
            key.clone(),
            Running {
                cancel,
                pending: None,
            },
        );
        RunningGuard {
            key: key.clone(),
            running: Arc::clone(&self.running),
        }
    }
}

/// Removes a turn's entry from the running table however the turn ends,
/// including when its future is dropped.
struct RunningGuard {
    key: SessionKey,
    running: Arc<std::sync::Mutex<std::collections::HashMap<SessionKey, Running>>>,
}

impl Drop for RunningGuard {
    fn drop(&mut self) {
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        running.remove(&self.key);
    }
}

/// What a resumed turn had done before: its tool calls and usage so far.
struct PriorTurn {
    tool_calls: Vec<crate::agent_loop::ToolCallRecord>,
    usage: TurnUsage,
}

impl From<&Turn> for PriorTurn {
    fn from(turn: &Turn) -> Self {
        Self {
            tool_calls: turn.tool_calls.clone(),
            usage: turn.usage,
        }
    }
}

/// The turn as it is kept: every message it added (prior ones included) and its outcome.
fn record(
    running: &Turn,
    prior: PriorTurn,
    messages: &[ChatMessage],
    outcome: &LoopOutcome,
    now: chrono::DateTime<chrono::Utc>,
) -> Turn {
    let (state, error) = match &outcome.status {
        LoopStatus::Answered => (TurnState::Completed, None),
        LoopStatus::Interrupted => (TurnState::Interrupted, None),
        LoopStatus::IterationLimit { limit } => (
            TurnState::Failed,
            Some(format!(
                "stopped after {limit} model calls without a final answer (agent.max_iterations)"
            )),
        ),
        LoopStatus::Cancelled { reason } => (
            TurnState::Failed,
            Some(format!("stopped by a hook: {reason}")),
        ),
        LoopStatus::Failed { error } => (TurnState::Failed, Some(error.to_string())),
        // Chat offers no client tools; were it to happen, the turn did not answer.
        LoopStatus::ClientTools { .. } => (
            TurnState::Failed,
            Some("the model called a tool this channel does not run".to_string()),
        ),
    };
    let mut tool_calls = prior.tool_calls;
    tool_calls.extend(outcome.tool_calls.iter().cloned());
    Turn {
        position: running.position,
        number: running.number,
        kind: Default::default(),
        user_input: running.user_input.clone(),
        response: (state == TurnState::Completed).then(|| outcome.text.clone()),
        messages: messages.to_vec(),
        tool_calls,
        state,
        started_at: running.started_at,
        completed_at: (state != TurnState::Interrupted).then_some(now),
        error,
        usage: TurnUsage {
            input_tokens: prior.usage.input_tokens + outcome.usage.input_tokens,
            output_tokens: prior.usage.output_tokens + outcome.usage.output_tokens,
            cost_micros: prior.usage.cost_micros.saturating_add(outcome.cost_micros),
        },
        model: running.model.clone(),
        route: running.route.clone(),
    }
}

/// Session metadata key of the tools the person answered "always" for.
const ALWAYS_ALLOWED: &str = "always_allowed";

fn allowed_tools(metadata: &serde_json::Value) -> Vec<String> {
    metadata
        .get(ALWAYS_ALLOWED)
        .and_then(|v| v.as_array())
        .map(|items| {
            items
                .iter()
                .filter_map(|t| t.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn set_allowed_tools(metadata: &mut serde_json::Value, tools: Vec<String>) {
    if !metadata.is_object() {
        *metadata = serde_json::Value::Object(serde_json::Map::new());
    }
    if let Some(map) = metadata.as_object_mut() {
        map.insert(ALWAYS_ALLOWED.to_string(), serde_json::Value::from(tools));
    }
}
