//! cairn's LLM layer: one [`LlmProvider`] trait and the clients behind it.
//!
//! **In:** a provider-neutral [`ChatRequest`] (the [`cairn_core::chat`]
//! messages, tool definitions, optional model / temperature / output cap).
//! **Out:** a [`ChatResponse`] (text and/or tool calls, finish reason, token
//! [`Usage`] and cost in integer micro-dollars), whole or as a
//! [`ResponseStream`] of deltas that ends with the assembled response; and,
//! on request, the provider's list of models ([`ModelInfo`]).
//!
//! Two HTTP clients speak the wire protocols: OpenAI-compatible chat
//! completions ([`OpenAiClient`]: OpenAI, OpenRouter, Ollama, vLLM, llama.cpp,
//! LM Studio) and Anthropic Messages ([`AnthropicClient`]). Around them:
//! retries with backoff and jitter ([`RetryingProvider`]), a failover chain
//! ([`FailoverProvider`]), a provider replaced on a configuration reload
//! while turns in progress keep theirs ([`ReloadableProvider`]), a price table ([`PriceTable`]) and recovery of tool
//! calls written as text by models without native tool calling
//! ([`text_tools`]). [`build_provider`] / [`build_providers`] assemble all of
//! it from plain settings structs.
//!
//! Architecture invariant: this crate never reads environment variables or
//! files (the binary maps its configuration onto [`ProviderSettings`]), never
//! puts an API key into a log line, `Debug` output or error message, and never
//! panics on anything a server sends.
//!
//! With the `testing` feature, [`testing::FakeLlmServer`] serves both wire
//! protocols on 127.0.0.1 from a script, for every crate's tests.

mod anthropic;
mod client;
mod cost;
mod embeddings;
mod error;
mod failover;
mod http;
mod http_provider;
mod images;
mod models;
mod openai;
mod provider;
mod reloadable;
mod retry;
mod settings;
pub mod sse;
pub mod text_tools;
pub mod tls;
mod types;

#[cfg(feature = "testing")]
pub mod testing;

pub use anthropic::{ANTHROPIC_VERSION, AnthropicClient};
pub use cairn_core::chat::{ChatMessage, Role, ToolCall, ToolDefinition};
pub use cost::{MICROS_PER_DOLLAR, ModelPrice, PriceTable};
pub use embeddings::{EmbeddingsClient, EmbeddingsSettings};
pub use error::{LlmError, LlmErrorKind};
pub use failover::FailoverProvider;
pub use http::{is_context_length_message, parse_retry_after_value};
pub use images::vision_refusal;
pub use models::ModelInfo;
pub use openai::OpenAiClient;
pub use provider::LlmProvider;
pub use reloadable::{ReloadableProvider, pin};
pub use retry::{RetryPolicy, RetryingProvider};
pub use settings::{
    LlmSettings, ProviderKind, ProviderSettings, Providers, build_provider, build_providers,
};
pub use types::{
    ChatRequest, ChatResponse, FinishReason, GenerationOptions, PartialMeter, PartialUsage,
    ResponseFormat, ResponseStream, STRUCTURED_OUTPUT_TOOL, StreamEvent, ToolChoice, Usage,
};
