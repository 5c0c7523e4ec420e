//! Turn outcomes: answers, streaming, limits, provider errors, nudges, interruption, hooks.

use std::sync::Arc;

use async_trait::async_trait;
use cairn_agent::tools::RiskLevel;
use cairn_agent::{
    AgentLoop, AutonomyLevel, Hook, HookFlow, HookRegistry, LoopConfig, LoopEvent, LoopStatus,
};
use cairn_core::chat::Role;
use cairn_llm::testing::Scripted;
use cairn_llm::{ChatRequest, LlmErrorKind};
use serde_json::json;

use crate::fixtures::{Echo, Harness, Recorder};

fn echo_harness_config(
    config: LoopConfig,
) -> (Arc<Echo>, impl std::future::Future<Output = Harness>) {
    let echo = Echo::new("echo", RiskLevel::ReadOnly);
    let tools: Vec<Arc<dyn cairn_agent::Tool>> = vec![echo.clone()];
    (echo, Harness::new(tools, AutonomyLevel::Supervised, config))
}

#[tokio::test]
async fn plain_answer_ends_the_turn() {
    let (_, h) = echo_harness_config(LoopConfig::default());
    let h = h.await;
    h.server.push(Scripted::text("Paris.").with_usage(12, 3));
    let d = Recorder::new();
    let (outcome, messages) = h.turn(&d, "Capital of France?").await;
    assert_eq!(outcome.status, LoopStatus::Answered);
    assert_eq!(outcome.text, "Paris.");
    assert_eq!(outcome.iterations, 1);
    assert_eq!(
        (outcome.usage.input_tokens, outcome.usage.output_tokens),
        (12, 3)
    );
    assert_eq!(messages.last().unwrap().role, Role::Assistant);
    assert_eq!(messages.last().unwrap().content, "Paris.");
    // The tools were offered to the model.
    assert_eq!(
        h.server.requests()[0].body["tools"][0]["function"]["name"],
        "echo"
    );
}

#[tokio::test]
async fn streamed_answer_arrives_as_deltas_in_order() {
    let (_, h) = echo_harness_config(LoopConfig::default());
    let h = h.await;
    h.server
        .push(Scripted::text("one two three four five").with_chunk_bytes(4));
    let mut d = Recorder::new();
    d.streaming = true;
    let (outcome, _) = h.turn(&d, "count").await;
    assert_eq!(outcome.text, "one two three four five");
    let deltas: Vec<String> = d
        .events()
        .into_iter()
        .filter_map(|e| match e {
            LoopEvent::TextDelta(t) => Some(t),
            _ => None,
        })
        .collect();
    assert!(deltas.len() > 1, "expected several deltas, got {deltas:?}");
    assert_eq!(deltas.concat(), "one two three four five");
    assert!(h.server.requests()[0].is_stream());
}

#[tokio::test]
async fn iteration_limit_is_a_clear_outcome() {
    let (echo, h) = echo_harness_config(LoopConfig {
        max_iterations: 3,
        ..LoopConfig::default()
    });
    let h = h.await;
    for i in 0..5 {
        h.server.push(Scripted::tool_call(
            "echo",
            json!({"text": format!("again {i}")}),
        ));
    }
    let d = Recorder::new();
    let (outcome, _) = h.turn(&d, "loop forever").await;
    assert_eq!(outcome.status, LoopStatus::IterationLimit { limit: 3 });
    assert_eq!(outcome.iterations, 3);
    assert_eq!(echo.runs(), 3);
    assert_eq!(h.server.requests().len(), 3);
}

#[tokio::test(start_paused = true)]
async fn rate_limit_then_success() {
    let (_, h) = echo_harness_config(LoopConfig::default());
    let h = h.await;
    h.server.push(Scripted::rate_limited(Some(2)));
    h.server.push(Scripted::text("made it"));
    let d = Recorder::new();
    let started = tokio::time::Instant::now();
    let (outcome, _) = h.turn(&d, "hi").await;
    assert_eq!(outcome.text, "made it");
    assert_eq!(h.server.requests().len(), 2);
    assert!(
        started.elapsed() >= std::time::Duration::from_secs(2),
        "Retry-After honoured"
    );
}

#[tokio::test]
async fn context_length_error_is_its_own_type() {
    let (_, h) = echo_harness_config(LoopConfig::default());
    let h = h.await;
    h.server.push(Scripted::context_length_exceeded());
    let d = Recorder::new();
    let (outcome, _) = h.turn(&d, "a very long message").await;
    match outcome.status {
        LoopStatus::Failed { error } => {
            assert_eq!(error.kind(), LlmErrorKind::ContextLengthExceeded)
        }
        other => panic!("expected a context-length failure, got {other:?}"),
    }
}

#[tokio::test]
async fn context_overflow_is_compacted_and_retried_once() {
    let (_, h) = echo_harness_config(LoopConfig::default());
    let h = h.await;
    h.server.push(Scripted::context_length_exceeded());
    h.server.push(Scripted::text("fits now"));
    let mut d = Recorder::new();
    d.compacts = true;
    let mut messages = vec![
        cairn_core::chat::ChatMessage::system("sys"),
        cairn_core::chat::ChatMessage::user("old 1"),
        cairn_core::chat::ChatMessage::assistant("old 2"),
        cairn_core::chat::ChatMessage::user("new"),
    ];
    let outcome = h.agent.run(&d, &mut messages, &h.ctx).await;
    assert_eq!(outcome.text, "fits now");
    assert!(d.events().contains(&LoopEvent::ContextRecovered));
    assert_eq!(h.sent_messages(0).len(), 4);
    assert_eq!(
        h.sent_messages(1).len(),
        2,
        "retried with the compacted context"
    );

    // A second overflow on the retry is not retried again.
    h.server.push(Scripted::context_length_exceeded());
    h.server.push(Scripted::context_length_exceeded());
    let outcome = h.agent.run(&d, &mut messages, &h.ctx).await;
    assert!(matches!(outcome.status, LoopStatus::Failed { .. }));
    assert_eq!(h.server.requests().len(), 4);
}

#[tokio::test]
async fn announced_tool_use_is_nudged_at_most_twice() {
    let (echo, h) = echo_harness_config(LoopConfig::default());
    let h = h.await;
    h.server.push(Scripted::text("Let me check that for you."));
    h.server
        .push(Scripted::tool_call("echo", json!({"text": "checked"})));
    h.server.push(Scripted::text("All good."));
    let d = Recorder::new();
    let (outcome, _) = h.turn(&d, "check it").await;
    assert_eq!(outcome.text, "All good.");
    assert_eq!(echo.runs(), 1);
    let nudge = h.sent_messages(1);
    assert_eq!(
        nudge.last().unwrap()["content"],
        cairn_agent::agent_loop::NUDGE
    );

    for _ in 0..3 {
        h.server.push(Scripted::text("I'll run the tool now."));
    }
    let d = Recorder::new();
    let (outcome, _) = h.turn(&d, "again").await;
    assert_eq!(outcome.status, LoopStatus::Answered);
    assert_eq!(outcome.text, "I'll run the tool now.");
    assert_eq!(
        d.events()
            .iter()
            .filter(|e| **e == LoopEvent::Nudged)
            .count(),
        2
    );
}

#[tokio::test]
async fn cancellation_interrupts_the_model_call() {
    let (_, h) = echo_harness_config(LoopConfig::default());
    let h = h.await;
    h.server
        .push(Scripted::text("too late").with_delay(std::time::Duration::from_secs(30)));
    let d = Recorder::new();
    let cancel = h.ctx.cancel.clone();
    let canceller = tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        cancel.cancel();
    });
    let (outcome, messages) = h.turn(&d, "slow question").await;
    canceller.await.unwrap();
    assert_eq!(outcome.status, LoopStatus::Interrupted);
    assert_eq!(messages.len(), 2, "nothing appended by an interrupted call");
}

struct Censor;

#[async_trait]
impl Hook for Censor {
    fn name(&self) -> &str {
        "censor"
    }
    async fn before_llm_call(&self, request: &mut ChatRequest) -> HookFlow {
        request.temperature = Some(0.0);
        HookFlow::Continue
    }
    async fn before_tool_call(&self, call: &mut cairn_core::chat::ToolCall) -> HookFlow {
        if call.arguments["text"] == "forbidden" {
            return HookFlow::Cancel("no forbidden words".into());
        }
        call.arguments = json!({"text": "rewritten"});
        HookFlow::Continue
    }
    async fn before_sending(&self, text: &mut String) -> HookFlow {
        text.push_str(" [checked]");
        HookFlow::Continue
    }
}

#[tokio::test]
async fn hooks_can_change_and_refuse() {
    let echo = Echo::new("echo", RiskLevel::ReadOnly);
    let tools: Vec<Arc<dyn cairn_agent::Tool>> = vec![echo.clone()];
    let h = Harness::new(tools, AutonomyLevel::Supervised, LoopConfig::default()).await;
    let mut hooks = HookRegistry::new();
    hooks.register(Arc::new(Censor));
    let agent = AgentLoop::new(
        h.agent.provider().clone(),
        h.agent.runner().clone(),
        Arc::new(hooks),
        LoopConfig::default(),
    );
    h.server.push(Scripted::tool_calls([
        ("echo", json!({"text": "forbidden"})),
        ("echo", json!({"text": "fine"})),
    ]));
    h.server.push(Scripted::text("done"));
    let d = Recorder::new();
    let mut messages = vec![cairn_core::chat::ChatMessage::user("go")];
    let outcome = agent.run(&d, &mut messages, &h.ctx).await;
    assert_eq!(outcome.text, "done [checked]");
    assert_eq!(echo.runs(), 1);
    assert_eq!(h.server.requests()[0].body["temperature"], 0.0);
    let tool_messages: Vec<_> = messages.iter().filter(|m| m.role == Role::Tool).collect();
    assert!(
        tool_messages[0].content.contains("refused by a hook"),
        "{}",
        tool_messages[0].content
    );
    assert!(
        tool_messages[1].content.contains("echo: rewritten"),
        "{}",
        tool_messages[1].content
    );
    assert_eq!(
        messages.last().unwrap().content,
        "done",
        "history keeps what the model said"
    );
}

fn client_tool(name: &str) -> cairn_core::chat::ToolDefinition {
    cairn_core::chat::ToolDefinition {
        name: name.into(),
        description: "the caller's tool".into(),
        parameters: json!({"type": "object"}),
    }
}

#[tokio::test]
async fn a_client_tool_call_ends_the_turn_and_the_agents_own_calls_of_it_wait() {
    let (echo, h) = echo_harness_config(LoopConfig {
        client_tools: vec![client_tool("get_weather")],
        options: cairn_llm::GenerationOptions {
            tool_choice: Some(cairn_llm::ToolChoice::Required),
            top_p: Some(0.5),
            ..Default::default()
        },
        ..LoopConfig::default()
    });
    let h = h.await;
    // First the agent's own tool (run server-side), then a response mixing
    // the client's tool with the agent's: the turn pauses for the client.
    h.server
        .push(Scripted::tool_call("echo", json!({"text": "a"})));
    h.server.push(Scripted::tool_calls([
        ("get_weather", json!({"city": "Oslo"})),
        ("echo", json!({"text": "b"})),
    ]));
    let d = Recorder::new();
    let (outcome, messages) = h.turn(&d, "weather?").await;
    let LoopStatus::ClientTools { calls } = &outcome.status else {
        panic!("{:?}", outcome.status);
    };
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].name, "get_weather");
    assert_eq!(calls[0].arguments, json!({"city": "Oslo"}));
    assert_eq!(echo.runs(), 1, "the mixed response's own call did not run");
    let last = messages.last().unwrap();
    assert_eq!(last.role, Role::Assistant);
    assert_eq!(last.tool_calls.len(), 1, "only the client's call is kept");

    let requests = h.server.requests();
    let names: Vec<&str> = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["echo", "get_weather"]);
    assert_eq!(requests[0].body["top_p"], 0.5);
    // The forced choice applies to the first call only.
    assert_eq!(requests[0].body["tool_choice"], "required");
    assert_eq!(requests[1].body["tool_choice"], "auto");
}
