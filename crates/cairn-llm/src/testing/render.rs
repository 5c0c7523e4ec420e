//! Rendering scripted answers in the OpenAI and Anthropic wire formats.

use serde_json::{Value, json};

use super::Protocol;
use super::script::{ErrorKind, FakeToolCall, ScriptBody, Scripted};

/// An HTTP answer ready to send: status, content type, and body pieces
/// (one per SSE event when streamed).
#[derive(Debug)]
pub(crate) struct Rendered {
    pub status: u16,
    pub content_type: String,
    pub pieces: Vec<String>,
}

impl Rendered {
    fn json(status: u16, body: &Value) -> Self {
        Self {
            status,
            content_type: "application/json".into(),
            pieces: vec![body.to_string()],
        }
    }
}

/// Renders `script` for a request in `protocol`; `request` is its JSON body.
pub(crate) fn render(
    script: &Scripted,
    protocol: Protocol,
    request: &Value,
    serial: u64,
) -> Rendered {
    let model = script
        .model
        .clone()
        .or_else(|| {
            request
                .get("model")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_else(|| "fake-model".into());
    let stream = request
        .get("stream")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    match &script.body {
        ScriptBody::Raw {
            status,
            content_type,
            body,
        } => Rendered {
            status: *status,
            content_type: content_type.clone(),
            pieces: vec![body.clone()],
        },
        ScriptBody::Error { kind, status } => {
            Rendered::json(*status, &error_body(protocol, *kind, *status))
        }
        ScriptBody::Reply { text, tool_calls } => {
            let reply = Reply {
                script,
                text,
                calls: tool_calls,
                model: &model,
                serial,
            };
            match (protocol, stream) {
                (Protocol::OpenAi, false) => Rendered::json(200, &reply.openai_whole()),
                (Protocol::OpenAi, true) => sse(reply.openai_events()),
                (Protocol::Anthropic, false) => Rendered::json(200, &reply.anthropic_whole()),
                (Protocol::Anthropic, true) => sse(reply.anthropic_events()),
            }
        }
    }
}

fn sse(events: Vec<String>) -> Rendered {
    Rendered {
        status: 200,
        content_type: "text/event-stream".into(),
        pieces: events,
    }
}

/// The protocol's error body for a scripted error.
pub(crate) fn error_body(protocol: Protocol, kind: ErrorKind, status: u16) -> Value {
    let (message, openai_type, openai_code, anthropic_type) = match kind {
        ErrorKind::RateLimited => (
            "Rate limit reached for requests. Please try again later.".to_owned(),
            "requests",
            "rate_limit_exceeded",
            "rate_limit_error",
        ),
        ErrorKind::Server if status == 529 => ("Overloaded".to_owned(), "server_error", "overloaded", "overloaded_error"),
        ErrorKind::Server => (
            format!("The server had an error while processing your request (fake HTTP {status})."),
            "server_error",
            "server_error",
            "api_error",
        ),
        ErrorKind::Auth => (
            "Incorrect API key provided.".to_owned(),
            "invalid_request_error",
            "invalid_api_key",
            "authentication_error",
        ),
        ErrorKind::ContextLength => match protocol {
            Protocol::OpenAi => (
                "This model's maximum context length is 8192 tokens. However, your messages resulted in 9001 tokens. Please reduce the length of the messages.".to_owned(),
                "invalid_request_error",
                "context_length_exceeded",
                "",
            ),
            Protocol::Anthropic => (
                "prompt is too long: 208310 tokens > 200000 maximum".to_owned(),
                "",
                "",
                "invalid_request_error",
            ),
        },
    };
    match protocol {
        Protocol::OpenAi => {
            json!({"error": {"message": message, "type": openai_type, "param": null, "code": openai_code}})
        }
        Protocol::Anthropic => {
            json!({"type": "error", "error": {"type": anthropic_type, "message": message}})
        }
    }
}

/// Text split into word-sized deltas (spaces kept), so streams have several pieces.
fn pieces(text: &str) -> Vec<&str> {
    text.split_inclusive(' ').collect()
}

/// Arguments text split in two, so argument deltas have several pieces.
fn halves(arguments: &str) -> Vec<String> {
    let mid = arguments.len() / 2;
    let mid = (mid..=arguments.len())
        .find(|i| arguments.is_char_boundary(*i))
        .unwrap_or(arguments.len());
    let (a, b) = arguments.split_at(mid);
    [a, b]
        .into_iter()
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

struct Reply<'a> {
    script: &'a Scripted,
    text: &'a str,
    calls: &'a [FakeToolCall],
    model: &'a str,
    serial: u64,
}

impl Reply<'_> {
    fn finish(&self, natural_tools: &str, natural_stop: &str) -> Value {
        match &self.script.finish_reason {
            Some(reason) => json!(reason),
            None if self.calls.is_empty() => json!(natural_stop),
            None => json!(natural_tools),
        }
    }

    fn openai_call_id(&self, i: usize) -> String {
        format!("call_fake_{}_{i}", self.serial)
    }

    fn anthropic_call_id(&self, i: usize) -> String {
        format!("toolu_fake_{}_{i}", self.serial)
    }

    fn openai_usage(&self) -> Option<Value> {
        self.script.usage.map(
            |(i, o)| json!({"prompt_tokens": i, "completion_tokens": o, "total_tokens": i + o}),
        )
    }

    fn openai_whole(&self) -> Value {
        let calls: Vec<Value> = self
            .calls
            .iter()
            .enumerate()
            .map(|(i, call)| {
                let arguments = if self.script.arguments_as_object {
                    call.arguments.clone()
                } else {
                    json!(call.arguments.to_string())
                };
                json!({"id": self.openai_call_id(i), "type": "function",
                       "function": {"name": call.name, "arguments": arguments}})
            })
            .collect();
        let mut message = json!({
            "role": "assistant",
            "content": if self.text.is_empty() && !calls.is_empty() { Value::Null } else { json!(self.text) },
        });
        if !calls.is_empty() {
            message["tool_calls"] = Value::Array(calls);
        }
        let mut body = json!({
            "id": format!("chatcmpl-fake-{}", self.serial),
            "object": "chat.completion",
            "created": 0,
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish("tool_calls", "stop")}],
        });
        if let Some(usage) = self.openai_usage() {
            body["usage"] = usage;
        }
        body
    }

    fn openai_chunk(&self, delta: Value, finish: Value) -> String {
        json!({
            "id": format!("chatcmpl-fake-{}", self.serial),
            "object": "chat.completion.chunk",
            "created": 0,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        })
        .to_string()
    }

    fn openai_events(&self) -> Vec<String> {
        let mut chunks =
            vec![self.openai_chunk(json!({"role": "assistant", "content": ""}), Value::Null)];
        for piece in pieces(self.text) {
            chunks.push(self.openai_chunk(json!({"content": piece}), Value::Null));
        }
        for (i, call) in self.calls.iter().enumerate() {
            let start = json!({"tool_calls": [{"index": i, "id": self.openai_call_id(i), "type": "function",
                                               "function": {"name": call.name, "arguments": ""}}]});
            chunks.push(self.openai_chunk(start, Value::Null));
            if self.script.arguments_as_object {
                let whole = json!({"tool_calls": [{"index": i, "function": {"arguments": call.arguments}}]});
                chunks.push(self.openai_chunk(whole, Value::Null));
            } else {
                for half in halves(&call.arguments.to_string()) {
                    let delta =
                        json!({"tool_calls": [{"index": i, "function": {"arguments": half}}]});
                    chunks.push(self.openai_chunk(delta, Value::Null));
                }
            }
        }
        chunks.push(self.openai_chunk(json!({}), self.finish("tool_calls", "stop")));
        if let Some(usage) = self.openai_usage() {
            chunks.push(
                json!({"id": format!("chatcmpl-fake-{}", self.serial), "object": "chat.completion.chunk",
                       "created": 0, "model": self.model, "choices": [], "usage": usage})
                .to_string(),
            );
        }
        let mut events: Vec<String> = chunks
            .into_iter()
            .map(|c| format!("data: {c}\n\n"))
            .collect();
        events.push("data: [DONE]\n\n".into());
        events
    }

    fn anthropic_content(&self) -> Vec<Value> {
        let mut content = Vec::new();
        if !self.text.is_empty() {
            content.push(json!({"type": "text", "text": self.text}));
        }
        for (i, call) in self.calls.iter().enumerate() {
            content.push(json!({"type": "tool_use", "id": self.anthropic_call_id(i),
                                "name": call.name, "input": call.arguments}));
        }
        content
    }

    fn anthropic_whole(&self) -> Value {
        let mut body = json!({
            "id": format!("msg_fake_{}", self.serial),
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": self.anthropic_content(),
            "stop_reason": self.finish("tool_use", "end_turn"),
            "stop_sequence": null,
        });
        if let Some((i, o)) = self.script.usage {
            body["usage"] = json!({"input_tokens": i, "output_tokens": o});
        }
        body
    }

    fn anthropic_events(&self) -> Vec<String> {
        let event = |name: &str, data: Value| format!("event: {name}\ndata: {data}\n\n");
        let (input, output) = self.script.usage.unwrap_or((0, 0));
        let mut events = vec![event(
            "message_start",
            json!({"type": "message_start", "message": {
                "id": format!("msg_fake_{}", self.serial), "type": "message", "role": "assistant",
                "model": self.model, "content": [], "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": input, "output_tokens": 1}}}),
        )];
        let mut block = 0;
        if !self.text.is_empty() {
            events.push(event(
                "content_block_start",
                json!({"type": "content_block_start", "index": block,
                "content_block": {"type": "text", "text": ""}}),
            ));
            events.push(event("ping", json!({"type": "ping"})));
            for piece in pieces(self.text) {
                events.push(event(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": block,
                    "delta": {"type": "text_delta", "text": piece}}),
                ));
            }
            events.push(event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": block}),
            ));
            block += 1;
        }
        for (i, call) in self.calls.iter().enumerate() {
            events.push(event("content_block_start", json!({"type": "content_block_start", "index": block,
                "content_block": {"type": "tool_use", "id": self.anthropic_call_id(i), "name": call.name, "input": {}}})));
            for half in halves(&call.arguments.to_string()) {
                events.push(event(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": block,
                    "delta": {"type": "input_json_delta", "partial_json": half}}),
                ));
            }
            events.push(event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": block}),
            ));
            block += 1;
        }
        events.push(event(
            "message_delta",
            json!({"type": "message_delta",
            "delta": {"stop_reason": self.finish("tool_use", "end_turn"), "stop_sequence": null},
            "usage": {"output_tokens": output}}),
        ));
        events.push(event("message_stop", json!({"type": "message_stop"})));
        events
    }
}
