//! The agent loop: call the model, run the tools it asks for, repeat until it
//! answers in text.
//!
//! One implementation serves chat, jobs and routines; a [`LoopDelegate`]
//! supplies what differs (who approves, whether to stream, what to inject
//! before each call, how to shrink an overflowing context). Each iteration:
//! check for cancellation, let the delegate and the hooks see the request,
//! call the model (streaming when asked), and then either finish on a text
//! answer or run the response's tool calls — approvals first, in order, then
//! execution in parallel, results appended in call order.
//!
//! Architecture invariant: only a text answer from the model ends the loop
//! (guide invariant 5). Tool output is data framed for the model; nothing in
//! it can stop the loop or stand in for the answer.

mod child;
mod intent;
mod signature;
mod tools;

use std::sync::Arc;

use async_trait::async_trait;
use cairn_core::chat::{ChatMessage, ToolCall, ToolDefinition};
use cairn_llm::{
    ChatRequest, ChatResponse, GenerationOptions, LlmError, LlmErrorKind, LlmProvider, StreamEvent,
    ToolChoice, Usage,
};
use futures::StreamExt;
use serde::{Deserialize, Serialize};

use crate::hooks::{HookFlow, HookRegistry};
use crate::runner::{Approver, ToolRunner, ToolStatus};
use crate::safety::leak;
use crate::tools::ToolContext;

pub use child::{Budget, ParentTurn};
pub use intent::{NUDGE, announces_tool_use};
pub use signature::call_signature;

/// Limits and model settings of one loop.
#[derive(Debug, Clone, PartialEq)]
pub struct LoopConfig {
    /// Model calls per turn before giving up.
    pub max_iterations: u32,
    /// Times per turn the model is nudged to actually call a tool it announced.
    pub max_nudges: u32,
    /// Use this model instead of the provider's.
    pub model: Option<String>,
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Cap on each answer's tokens.
    pub max_tokens: Option<u32>,
    /// Further sampling and output settings (an API client's, per request).
    /// A `tool_choice` that forces a call applies to the first model call only.
    pub options: GenerationOptions,
    /// Tools the caller runs itself (an API client's): offered beside the
    /// agent's own; a call to one ends the turn with [`LoopStatus::ClientTools`].
    pub client_tools: Vec<ToolDefinition>,
}

impl Default for LoopConfig {
    fn default() -> Self {
        Self {
            max_iterations: 50,
            max_nudges: 2,
            model: None,
            temperature: None,
            max_tokens: None,
            options: GenerationOptions::default(),
            client_tools: Vec::new(),
        }
    }
}

/// Something that happened during a turn, for display.
#[derive(Debug, Clone, PartialEq)]
pub enum LoopEvent {
    /// The model is being called (1-based iteration).
    LlmCall {
        /// Which call of the turn.
        iteration: u32,
    },
    /// More answer text arrived (streaming only).
    TextDelta(String),
    /// A tool started running.
    ToolStarted {
        /// Provider call id.
        call_id: String,
        /// Canonical tool name.
        tool: String,
    },
    /// A tool call ended (run, refused or reused).
    ToolFinished {
        /// Provider call id.
        call_id: String,
        /// Canonical tool name.
        tool: String,
        /// How it ended.
        status: ToolStatus,
    },
    /// The model announced a tool call without making one and was nudged.
    Nudged,
    /// The context overflowed; the delegate shrank it and the call is retried.
    ContextRecovered,
}

/// What differs between chat, jobs and routines.
#[async_trait]
pub trait LoopDelegate: Send + Sync {
    /// Answers approval requests for calls the policy wants asked.
    fn approver(&self) -> &dyn Approver;

    /// Whether to stream the model's answers (and emit [`LoopEvent::TextDelta`]).
    fn streaming(&self) -> bool {
        false
    }

    /// Sees every event of the turn.
    fn on_event(&self, _event: LoopEvent) {}

    /// A message joined the turn at `index` of the loop's messages — its
    /// final place, also for tool results that finish out of call order.
    /// Chat persists it at once, so a crash keeps what the turn did.
    async fn on_message(&self, _index: usize, _message: &ChatMessage) {}

    /// Runs before each model call; may append messages (finished background tasks, say).
    async fn before_llm(&self, _messages: &mut Vec<ChatMessage>) {}

    /// The provider said the context is too long: shrink `messages` and
    /// return `true` to retry the call once, or `false` to give up.
    async fn on_context_overflow(&self, _messages: &mut Vec<ChatMessage>) -> bool {
        false
    }
}

/// How a turn ended.
#[derive(Debug, Clone, PartialEq)]
pub enum LoopStatus {
    /// The model answered; the answer is [`LoopOutcome::text`].
    Answered,
    /// Cancelled (Ctrl-C, a new message, shutdown).
    Interrupted,
    /// The model kept calling tools past the iteration limit.
    IterationLimit {
        /// The limit that was hit.
        limit: u32,
    },
    /// A hook stopped the turn or suppressed the answer.
    Cancelled {
        /// Why.
        reason: String,
    },
    /// The model called tools the caller runs (see [`LoopConfig::client_tools`]):
    /// the turn pauses for their results, which the caller sends with the next turn.
    ClientTools {
        /// The calls to the caller's tools, in order.
        calls: Vec<ToolCall>,
    },
    /// The model could not be called.
    Failed {
        /// The provider error (typed: rate limit, auth, context length, ...).
        error: LlmError,
    },
}

/// One tool call of a turn, for reports (`--json`, run records).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallRecord {
    /// Provider call id.
    pub call_id: String,
    /// Canonical tool name (or the name as called, if unknown).
    pub tool: String,
    /// The arguments as the model gave them, credentials scrubbed.
    pub arguments: serde_json::Value,
    /// How it ended.
    pub status: ToolStatus,
    /// Milliseconds from authorization to result.
    pub duration_ms: u64,
    /// True when an identical earlier call's result was reused instead of running again.
    pub reused: bool,
}

/// The result of one turn.
#[derive(Debug, Clone, PartialEq)]
pub struct LoopOutcome {
    /// How it ended.
    pub status: LoopStatus,
    /// The answer (after `before_sending` hooks); empty unless answered.
    pub text: String,
    /// Model calls made.
    pub iterations: u32,
    /// Tokens used by all calls of the turn.
    pub usage: Usage,
    /// Cost of all calls of the turn, in micro-dollars.
    pub cost_micros: u64,
    /// Every tool call, in the order the model made them.
    pub tool_calls: Vec<ToolCallRecord>,
    /// The model that gave the last answer, as the provider reported it
    /// (empty when no call answered).
    pub model: String,
}

impl LoopOutcome {
    fn new() -> Self {
        Self {
            status: LoopStatus::Answered,
            text: String::new(),
            iterations: 0,
            usage: Usage::default(),
            cost_micros: 0,
            tool_calls: Vec::new(),
            model: String::new(),
        }
    }

    fn finish(mut self, status: LoopStatus) -> Self {
        self.status = status;
        self
    }
}

/// Appends a message to the turn and tells the delegate where it went.
async fn push(delegate: &dyn LoopDelegate, messages: &mut Vec<ChatMessage>, message: ChatMessage) {
    delegate.on_message(messages.len(), &message).await;
    messages.push(message);
}

/// How a turn whose budget is spent ends: as a refused model call.
fn spent(why: String) -> LoopStatus {
    LoopStatus::Failed {
        error: LlmError::CostLimit {
            message: format!("stopped: {why}"),
        },
    }
}

/// Why one model call produced no response.
enum CallError {
    Interrupted,
    Cancelled(String),
    Llm(LlmError),
}

/// The agent loop, ready to run turns.
#[derive(Debug, Clone)]
pub struct AgentLoop {
    provider: Arc<dyn LlmProvider>,
    runner: Arc<ToolRunner>,
    hooks: Arc<HookRegistry>,
    config: LoopConfig,
    /// What its turns spend is counted in (a sub-agent's, capped); none: a
    /// fresh one per turn, inside the parent turn's when there is one.
    budget: Option<Arc<Budget>>,
}

impl AgentLoop {
    /// A loop over this model, these tools and hooks.
    pub fn new(
        provider: Arc<dyn LlmProvider>,
        runner: Arc<ToolRunner>,
        hooks: Arc<HookRegistry>,
        config: LoopConfig,
    ) -> Self {
        Self {
            provider,
            runner,
            hooks,
            config,
            budget: None,
        }
    }

    /// The same loop counting its turns' spend in `budget`: a turn stops,
    /// without an answer, once this budget or one above it is spent.
    pub fn with_budget(&self, budget: Arc<Budget>) -> AgentLoop {
        let mut copy = self.clone();
        copy.budget = Some(budget);
        copy
    }

    /// The same loop with other limits and model settings.
    pub fn with_config(&self, config: LoopConfig) -> AgentLoop {
        let mut copy = self.clone();
        copy.config = config;
        copy
    }

    /// The same loop over another tool runner (a sub-agent's narrower tools).
    pub fn with_runner(&self, runner: Arc<ToolRunner>) -> AgentLoop {
        let mut copy = self.clone();
        copy.runner = runner;
        copy
    }

    /// The same loop with another model (`None`: the provider's own).
    pub fn with_model(&self, model: Option<String>) -> AgentLoop {
        let mut copy = self.clone();
        copy.config.model = model;
        copy
    }

    /// The same loop answered by another provider and model (a route).
    pub fn with_provider(&self, provider: Arc<dyn LlmProvider>, model: String) -> AgentLoop {
        let mut copy = self.clone();
        copy.provider = provider;
        copy.config.model = Some(model);
        copy
    }

    /// The same loop with a caller's per-request settings: the temperature
    /// and token cap when given, further options, and the caller's own tools.
    pub fn with_request(
        &self,
        temperature: Option<f64>,
        max_tokens: Option<u32>,
        options: GenerationOptions,
        client_tools: Vec<ToolDefinition>,
    ) -> AgentLoop {
        let mut copy = self.clone();
        copy.config.temperature = temperature.or(copy.config.temperature);
        copy.config.max_tokens = max_tokens.or(copy.config.max_tokens);
        copy.config.options = options;
        copy.config.client_tools = client_tools;
        copy
    }

    /// The model this loop asks: its override, else the provider's own.
    pub fn model(&self) -> &str {
        self.config
            .model
            .as_deref()
            .unwrap_or_else(|| self.provider.model())
    }

    /// The model provider.
    pub fn provider(&self) -> &Arc<dyn LlmProvider> {
        &self.provider
    }

    /// The tool runner (and through it the registry and policy).
    pub fn runner(&self) -> &Arc<ToolRunner> {
        &self.runner
    }

    /// The hooks.
    pub fn hooks(&self) -> &Arc<HookRegistry> {
        &self.hooks
    }

    /// The loop's limits and model settings.
    pub fn config(&self) -> &LoopConfig {
        &self.config
    }

    /// The same loop holding the provider, tools and policy in force now:
    /// a configuration reload ([`cairn_llm::ReloadableProvider`],
    /// [`ToolRunner::replace`]) no longer reaches it.
    pub fn pinned(&self) -> AgentLoop {
        let mut copy = self.clone();
        copy.provider = cairn_llm::pin(&self.provider);
        copy.runner = Arc::new(self.runner.pinned());
        copy
    }

    /// Runs one turn on `messages` (system prompt, history and the new user
    /// message), appending the assistant and tool messages as they happen.
    /// The turn finishes on the provider, tools and policy in force when it
    /// started, whatever a reload puts in force meanwhile.
    pub async fn run(
        &self,
        delegate: &dyn LoopDelegate,
        messages: &mut Vec<ChatMessage>,
        ctx: &ToolContext,
    ) -> LoopOutcome {
        self.pinned().turn(delegate, messages, ctx).await
    }

    /// [`AgentLoop::run`] on a pinned loop.
    async fn turn(
        &self,
        delegate: &dyn LoopDelegate,
        messages: &mut Vec<ChatMessage>,
        ctx: &ToolContext,
    ) -> LoopOutcome {
        let mut outcome = LoopOutcome::new();
        let (ctx, asks, budget) = self.lend(delegate, ctx);
        let ctx = &ctx;
        let mut turn = tools::TurnCalls::new(asks);
        let mut nudges = 0;
        let offers_tools = !self.runner.registry().names().is_empty();
        while outcome.iterations < self.config.max_iterations {
            if ctx.cancel.is_cancelled() {
                return outcome.finish(LoopStatus::Interrupted);
            }
            // A sub-agent's own calls, or its children's, may have spent its budget.
            if let Some(why) = budget.exhausted() {
                return outcome.finish(spent(why));
            }
            outcome.iterations += 1;
            delegate.on_event(LoopEvent::LlmCall {
                iteration: outcome.iterations,
            });
            let first = outcome.iterations == 1;
            let response = match self.call_model(delegate, messages, ctx, first).await {
                Ok(response) => response,
                Err(CallError::Interrupted) => return outcome.finish(LoopStatus::Interrupted),
                Err(CallError::Cancelled(reason)) => {
                    return outcome.finish(LoopStatus::Cancelled { reason });
                }
                Err(CallError::Llm(error)) => return outcome.finish(LoopStatus::Failed { error }),
            };
            outcome.usage.input_tokens += response.usage.input_tokens;
            outcome.usage.output_tokens += response.usage.output_tokens;
            outcome.usage.estimated |= response.usage.estimated;
            outcome.cost_micros = outcome.cost_micros.saturating_add(response.cost_micros);
            outcome.model.clone_from(&response.model);
            budget.charge(response.cost_micros);

            if !response.has_tool_calls() {
                if offers_tools
                    && nudges < self.config.max_nudges
                    && announces_tool_use(&response.text)
                {
                    nudges += 1;
                    push(
                        delegate,
                        messages,
                        self.clean(ChatMessage::assistant(response.text)),
                    )
                    .await;
                    push(delegate, messages, ChatMessage::user(NUDGE)).await;
                    delegate.on_event(LoopEvent::Nudged);
                    continue;
                }
                push(
                    delegate,
                    messages,
                    self.clean(ChatMessage::assistant(response.text.clone())),
                )
                .await;
                return match self.sending(response.text, ctx).await {
                    Ok(text) => {
                        outcome.text = text;
                        outcome.finish(LoopStatus::Answered)
                    }
                    Err(reason) => outcome.finish(LoopStatus::Cancelled { reason }),
                };
            }

            let client: Vec<ToolCall> = response
                .tool_calls
                .iter()
                .filter(|c| self.config.client_tools.iter().any(|t| t.name == c.name))
                .cloned()
                .collect();
            if !client.is_empty() {
                // The caller runs these. The agent's own calls of the same
                // response are not run: their results could not reach the
                // model, as the caller sends back only its calls' results.
                let message =
                    ChatMessage::assistant_tool_calls(response.text.clone(), client.clone());
                push(delegate, messages, self.clean(message)).await;
                // Text beside the calls reaches the caller too: the same hooks see it.
                return match self.sending(response.text, ctx).await {
                    Ok(text) => {
                        outcome.text = text;
                        outcome.finish(LoopStatus::ClientTools { calls: client })
                    }
                    Err(reason) => outcome.finish(LoopStatus::Cancelled { reason }),
                };
            }
            // Its calls are not run once the budget is spent: their results
            // could not reach a model.
            if let Some(why) = budget.exhausted() {
                return outcome.finish(spent(why));
            }
            push(delegate, messages, self.clean(response.to_message())).await;
            let first_result = messages.len();
            let results = turn
                .run(
                    self,
                    delegate,
                    &response.tool_calls,
                    ctx,
                    &mut outcome.tool_calls,
                    first_result,
                )
                .await;
            for result in &results {
                push(delegate, messages, self.clean(result.to_message())).await;
            }
        }
        let limit = self.config.max_iterations;
        outcome.finish(LoopStatus::IterationLimit { limit })
    }

    /// The context of the turn's tool calls: `ctx` lending this turn
    /// ([`ParentTurn`]) to the turns they start; the receiver of those
    /// turns' approval requests; the turn's budget.
    fn lend(
        &self,
        delegate: &dyn LoopDelegate,
        ctx: &ToolContext,
    ) -> (
        ToolContext,
        tokio::sync::mpsc::UnboundedReceiver<child::Ask>,
        Arc<Budget>,
    ) {
        let (tx, asks) = tokio::sync::mpsc::unbounded_channel();
        let above = ctx.parent.as_ref();
        let budget = match (&self.budget, above) {
            (Some(own), _) => Arc::clone(own),
            (None, Some(parent)) => Arc::new(Budget::new(None, Some(Arc::clone(parent.budget())))),
            (None, None) => Arc::new(Budget::default()),
        };
        let turn = ParentTurn::new(
            self.clone(),
            tx,
            delegate.approver().person_present(),
            above.map_or(0, |p| p.depth() + 1),
            Arc::clone(&budget),
        );
        let mut ctx = ctx.clone();
        ctx.parent = Some(Arc::new(turn));
        (ctx, asks, budget)
    }

    /// `message` as it may be kept and shown to the model: secrets named, not shown.
    fn clean(&self, message: ChatMessage) -> ChatMessage {
        let redacted = self.runner.leaks().and_then(|l| l.redact_message(&message));
        redacted.unwrap_or(message)
    }

    /// A call's arguments as they may be kept: secrets named, not shown.
    fn clean_args(&self, arguments: &serde_json::Value) -> serde_json::Value {
        let redacted = self.runner.leaks().and_then(|l| l.redact_json(arguments));
        redacted.unwrap_or_else(|| arguments.clone())
    }

    /// The `before_sending` hooks on text about to leave the loop; an
    /// answer holding a secret is withheld.
    async fn sending(&self, text: String, ctx: &ToolContext) -> Result<String, String> {
        let mut text = leak::withhold(self.runner.leaks(), text, &ctx.session_id).await;
        match self.hooks.before_sending(&mut text).await {
            HookFlow::Continue => Ok(text),
            HookFlow::Cancel(reason) => Err(reason),
        }
    }

    /// One model call (with the hooks), retried once after the delegate
    /// shrinks an overflowing context.
    async fn call_model(
        &self,
        delegate: &dyn LoopDelegate,
        messages: &mut Vec<ChatMessage>,
        ctx: &ToolContext,
        first: bool,
    ) -> Result<ChatResponse, CallError> {
        let mut recovered = false;
        loop {
            delegate.before_llm(messages).await;
            // Another process may have disabled or re-enabled a tool.
            self.runner.refresh_health().await;
            let sent =
                crate::media::request_messages(messages, &ctx.workspace, self.provider.vision())
                    .await;
            let mut tools = self.runner.offered(messages);
            tools.extend(self.config.client_tools.iter().cloned());
            let mut options = self.config.options.clone();
            // A forced call is made once; after it the model answers freely.
            if !first
                && matches!(
                    options.tool_choice,
                    Some(ToolChoice::Required | ToolChoice::Tool(_))
                )
            {
                options.tool_choice = Some(ToolChoice::Auto);
            }
            let mut request = ChatRequest {
                tools,
                messages: sent,
                model: self.config.model.clone(),
                temperature: self.config.temperature,
                max_tokens: self.config.max_tokens,
                options,
            };
            if let HookFlow::Cancel(reason) = self.hooks.before_llm_call(&mut request).await {
                return Err(CallError::Cancelled(reason));
            }
            let result = tokio::select! {
                biased;
                () = ctx.cancel.cancelled() => return Err(CallError::Interrupted),
                result = self.ask(delegate, &request) => result,
            };
            match result {
                Err(error)
                    if error.kind() == LlmErrorKind::ContextLengthExceeded
                        && !recovered
                        && delegate.on_context_overflow(messages).await =>
                {
                    recovered = true;
                    delegate.on_event(LoopEvent::ContextRecovered);
                }
                other => return other.map_err(CallError::Llm),
            }
        }
    }

    async fn ask(
        &self,
        delegate: &dyn LoopDelegate,
        request: &ChatRequest,
    ) -> Result<ChatResponse, LlmError> {
        // A hook that rewrites answers (redaction) must see them before anyone does.
        if !delegate.streaming() || self.hooks.holds_answers() {
            return self.provider.complete(request).await;
        }
        let mut stream = self.provider.stream(request).await?;
        // Each delta leaves once no secret can reach into it.
        let mut check = self.runner.leaks().map(leak::StreamCheck::new);
        let show = |text: String| delegate.on_event(LoopEvent::TextDelta(text));
        while let Some(event) = stream.next().await {
            match event? {
                StreamEvent::TextDelta(delta) => match check.as_mut() {
                    Some(check) => check.push(&delta).into_iter().for_each(show),
                    None => show(delta),
                },
                StreamEvent::Done(response) => {
                    check
                        .as_mut()
                        .and_then(leak::StreamCheck::finish)
                        .into_iter()
                        .for_each(show);
                    return Ok(response);
                }
                StreamEvent::ToolCallStart { .. } | StreamEvent::ToolCallDelta { .. } => {}
            }
        }
        Err(LlmError::BadResponse {
            provider: self.provider.name().to_string(),
            message: "the stream ended before the response was complete".to_string(),
        })
    }
}
