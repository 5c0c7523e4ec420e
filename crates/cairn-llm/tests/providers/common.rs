//! Shared helpers for the provider tests.

use std::sync::Arc;

use cairn_llm::testing::{FakeLlmServer, Protocol};
use cairn_llm::{
    ChatMessage, ChatRequest, ChatResponse, LlmProvider, ProviderSettings, StreamEvent,
    ToolDefinition, build_provider,
};
use futures::StreamExt;
use serde_json::json;

pub const BOTH: [Protocol; 2] = [Protocol::OpenAi, Protocol::Anthropic];

pub async fn server() -> FakeLlmServer {
    FakeLlmServer::start().await.expect("fake server starts")
}

pub fn settings(server: &FakeLlmServer, protocol: Protocol) -> ProviderSettings {
    match protocol {
        Protocol::OpenAi => server.openai_settings(),
        Protocol::Anthropic => server.anthropic_settings(),
    }
}

pub fn provider(server: &FakeLlmServer, protocol: Protocol) -> Arc<dyn LlmProvider> {
    build_provider(&settings(server, protocol)).expect("provider builds")
}

pub fn path(protocol: Protocol) -> &'static str {
    match protocol {
        Protocol::OpenAi => "/v1/chat/completions",
        Protocol::Anthropic => "/v1/messages",
    }
}

pub fn ask(text: &str) -> ChatRequest {
    ChatRequest::new(vec![ChatMessage::user(text)])
}

pub fn tools() -> Vec<ToolDefinition> {
    ["shell", "read_file", "web_search"]
        .iter()
        .map(|name| ToolDefinition {
            name: (*name).into(),
            description: format!("the {name} tool"),
            parameters: json!({"type": "object", "properties": {}}),
        })
        .collect()
}

pub fn ask_with_tools(text: &str) -> ChatRequest {
    ask(text).with_tools(tools())
}

/// All events of a stream, and the final response (which must be the last event).
pub async fn collect(
    provider: &dyn LlmProvider,
    request: &ChatRequest,
) -> (Vec<StreamEvent>, ChatResponse) {
    let stream = provider.stream(request).await.expect("stream opens");
    let events: Vec<StreamEvent> = stream
        .map(|event| event.expect("no stream error"))
        .collect()
        .await;
    let Some(StreamEvent::Done(response)) = events.last().cloned() else {
        panic!("stream did not end with Done: {events:?}");
    };
    (events, response)
}

pub fn text_deltas(events: &[StreamEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::TextDelta(t) => Some(t.clone()),
            _ => None,
        })
        .collect()
}
