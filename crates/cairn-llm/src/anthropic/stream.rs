//! Assembly of streamed Anthropic Messages events.

use cairn_core::chat::ToolCall;
use serde_json::Value;

use super::wire::{parse_usage, tool_use_call};
use crate::client::{Decoder, RawResponse};
use crate::error::LlmError;
use crate::http::Wire;
use crate::sse::SseEvent;
use crate::text_tools::normalize_arguments;
use crate::types::{StreamEvent, Usage};

/// A `tool_use` block being assembled.
#[derive(Debug)]
struct PartialToolUse {
    block: u64,
    call: ToolCall,
    json: String,
}

/// Decoder state for one Anthropic stream.
#[derive(Debug)]
pub(crate) struct AnthropicDecoder {
    wire: Wire,
    text: String,
    tools: Vec<PartialToolUse>,
    stop_reason: Option<String>,
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    model: Option<String>,
    received: bool,
}

impl AnthropicDecoder {
    pub(crate) fn new(wire: Wire) -> Self {
        Self {
            wire,
            text: String::new(),
            tools: Vec::new(),
            stop_reason: None,
            input_tokens: None,
            output_tokens: None,
            model: None,
            received: false,
        }
    }

    fn note_usage(&mut self, usage: Option<&Value>) {
        if let Some(usage) = usage {
            let has = |k: &str| usage.get(k).is_some_and(Value::is_u64);
            if let Some(parsed) = parse_usage(Some(usage)) {
                if has("input_tokens")
                    || has("cache_read_input_tokens")
                    || has("cache_creation_input_tokens")
                {
                    self.input_tokens = Some(parsed.input_tokens);
                }
                if has("output_tokens") {
                    self.output_tokens = Some(parsed.output_tokens);
                }
            }
        }
    }

    fn on_block_start(&mut self, event: &Value, out: &mut Vec<StreamEvent>) {
        let index = event.get("index").and_then(Value::as_u64).unwrap_or(0);
        let Some(block) = event.get("content_block") else {
            return;
        };
        match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                if let Some(text) = block.get("text").and_then(Value::as_str)
                    && !text.is_empty()
                {
                    self.text.push_str(text);
                    out.push(StreamEvent::TextDelta(text.to_owned()));
                }
            }
            Some("tool_use") => {
                if let Some(call) = tool_use_call(block) {
                    out.push(StreamEvent::ToolCallStart {
                        index: self.tools.len(),
                        id: call.id.clone(),
                        name: call.name.clone(),
                    });
                    self.tools.push(PartialToolUse {
                        block: index,
                        call,
                        json: String::new(),
                    });
                }
            }
            _ => {}
        }
    }

    fn on_block_delta(&mut self, event: &Value, out: &mut Vec<StreamEvent>) {
        let index = event.get("index").and_then(Value::as_u64).unwrap_or(0);
        let Some(delta) = event.get("delta") else {
            return;
        };
        match delta.get("type").and_then(Value::as_str) {
            Some("text_delta") => {
                if let Some(text) = delta.get("text").and_then(Value::as_str)
                    && !text.is_empty()
                {
                    self.text.push_str(text);
                    out.push(StreamEvent::TextDelta(text.to_owned()));
                }
            }
            Some("input_json_delta") => {
                let piece = delta
                    .get("partial_json")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                if let Some(position) = self.tools.iter().position(|t| t.block == index)
                    && let Some(tool) = self.tools.get_mut(position)
                    && !piece.is_empty()
                {
                    tool.json.push_str(piece);
                    out.push(StreamEvent::ToolCallDelta {
                        index: position,
                        arguments: piece.to_owned(),
                    });
                }
            }
            _ => {} // thinking and signature deltas are not part of the answer
        }
    }
}

impl Decoder for AnthropicDecoder {
    fn on_event(&mut self, event: &SseEvent, out: &mut Vec<StreamEvent>) -> Result<bool, LlmError> {
        if event.data.trim().is_empty() {
            return Ok(false);
        }
        let value: Value = serde_json::from_str(&event.data).map_err(|e| {
            LlmError::bad_response(
                &self.wire.provider,
                format!("a stream event is not JSON ({e})"),
            )
        })?;
        let kind = value
            .get("type")
            .and_then(Value::as_str)
            .or(event.event.as_deref())
            .unwrap_or_default();
        match kind {
            "message_start" => {
                self.received = true;
                let message = value.get("message");
                if let Some(model) = message.and_then(|m| m.get("model")).and_then(Value::as_str) {
                    self.model = Some(model.to_owned());
                }
                self.note_usage(message.and_then(|m| m.get("usage")));
            }
            "content_block_start" => {
                self.received = true;
                self.on_block_start(&value, out);
            }
            "content_block_delta" => {
                self.received = true;
                self.on_block_delta(&value, out);
            }
            "message_delta" => {
                self.received = true;
                if let Some(reason) = value
                    .get("delta")
                    .and_then(|d| d.get("stop_reason"))
                    .and_then(Value::as_str)
                {
                    self.stop_reason = Some(reason.to_owned());
                }
                self.note_usage(value.get("usage"));
            }
            "message_stop" => return Ok(true),
            "error" => {
                let error = value.get("error").cloned().unwrap_or(Value::Null);
                return Err(self.wire.classify_embedded(&error));
            }
            _ => {} // ping, content_block_stop, future event types
        }
        Ok(false)
    }

    fn received_anything(&self) -> bool {
        self.received
    }

    fn usage_so_far(&self) -> Option<Usage> {
        Usage::reported(self.input_tokens, self.output_tokens)
    }

    fn into_raw(self) -> RawResponse {
        let usage = Usage::reported(self.input_tokens, self.output_tokens);
        let tool_calls = self
            .tools
            .into_iter()
            .map(|mut tool| {
                if !tool.json.trim().is_empty() {
                    tool.call.arguments = normalize_arguments(Some(Value::String(tool.json)));
                }
                tool.call
            })
            .collect();
        RawResponse {
            text: self.text,
            tool_calls,
            finish_reason: self.stop_reason,
            usage,
            model: self.model,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(data: Value) -> SseEvent {
        SseEvent {
            event: data.get("type").and_then(Value::as_str).map(str::to_owned),
            data: data.to_string(),
        }
    }

    #[test]
    fn assembles_text_tools_usage_and_ignores_thinking() {
        let mut d = AnthropicDecoder::new(Wire {
            provider: "a".into(),
            timeout: None,
            api_key: None,
        });
        let mut out = Vec::new();
        let events = [
            json!({"type": "message_start", "message": {"model": "claude-x", "usage": {"input_tokens": 12, "cache_read_input_tokens": 3, "output_tokens": 1}}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "hmm"}}),
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Hi"}}),
            json!({"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "t1", "name": "shell", "input": {}}}),
            json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "{\"command\""}}),
            json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": ": \"ls\"}"}}),
            json!({"type": "content_block_start", "index": 3, "content_block": {"type": "tool_use", "id": "t2", "name": "noargs", "input": {}}}),
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}}),
        ];
        for e in events {
            assert!(!d.on_event(&event(e), &mut out).unwrap());
        }
        assert!(
            d.on_event(&event(json!({"type": "message_stop"})), &mut out)
                .unwrap()
        );
        assert_eq!(out[0], StreamEvent::TextDelta("Hi".into()));
        let raw = d.into_raw();
        assert_eq!(raw.text, "Hi");
        assert_eq!(raw.tool_calls[0].arguments, json!({"command": "ls"}));
        assert_eq!(raw.tool_calls[1].arguments, json!({}));
        assert_eq!(raw.finish_reason.as_deref(), Some("tool_use"));
        let usage = raw.usage.unwrap();
        assert_eq!((usage.input_tokens, usage.output_tokens), (15, 9));
        assert_eq!(raw.model.as_deref(), Some("claude-x"));
    }
}
