//! Assembly of streamed OpenAI chat-completion chunks.

use cairn_core::chat::ToolCall;
use serde_json::Value;

use super::wire::{content_text, parse_usage, str_field};
use crate::client::{Decoder, RawResponse};
use crate::error::LlmError;
use crate::http::Wire;
use crate::sse::SseEvent;
use crate::text_tools::{new_call_id, normalize_arguments};
use crate::types::{StreamEvent, Usage};

/// A tool call being assembled from fragments.
#[derive(Debug, Default)]
struct PartialCall {
    /// How the server identifies it: its `index`, else its id.
    key: String,
    id: String,
    name: String,
    arguments: String,
    /// Some servers send the arguments as a whole object.
    arguments_value: Option<Value>,
    announced: bool,
}

/// Decoder state for one OpenAI-style stream.
#[derive(Debug)]
pub(crate) struct OpenAiDecoder {
    wire: Wire,
    text: String,
    calls: Vec<PartialCall>,
    finish_reason: Option<String>,
    usage: Option<Usage>,
    model: Option<String>,
    received: bool,
}

impl OpenAiDecoder {
    pub(crate) fn new(wire: Wire) -> Self {
        Self {
            wire,
            text: String::new(),
            calls: Vec::new(),
            finish_reason: None,
            usage: None,
            model: None,
            received: false,
        }
    }

    fn on_chunk(&mut self, chunk: &Value, out: &mut Vec<StreamEvent>) -> Result<(), LlmError> {
        if let Some(error) = chunk.get("error").filter(|e| !e.is_null()) {
            return Err(self.wire.classify_embedded(error));
        }
        self.received = true;
        if let Some(model) = str_field(chunk, "model") {
            self.model = Some(model.to_owned());
        }
        if let Some(usage) = parse_usage(chunk.get("usage")) {
            self.usage = Some(usage);
        }
        let Some(choice) = chunk
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
        else {
            return Ok(());
        };
        let delta = choice.get("delta").or_else(|| choice.get("message"));
        if let Some(delta) = delta {
            let text = content_text(delta.get("content"));
            if !text.is_empty() {
                self.text.push_str(&text);
                out.push(StreamEvent::TextDelta(text));
            }
            if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
                for call in calls {
                    self.on_tool_call(call, out);
                }
            }
        }
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str)
            && !reason.is_empty()
        {
            self.finish_reason = Some(reason.to_owned());
        }
        Ok(())
    }

    fn on_tool_call(&mut self, fragment: &Value, out: &mut Vec<StreamEvent>) {
        let id = str_field(fragment, "id");
        let key = match (fragment.get("index").and_then(Value::as_u64), id) {
            (Some(index), _) => Some(format!("#{index}")),
            (None, Some(id)) => Some(format!("id:{id}")),
            (None, None) => None,
        };
        let position = match key {
            Some(key) => match self.calls.iter().position(|c| c.key == key) {
                Some(position) => position,
                None => {
                    self.calls.push(PartialCall {
                        key,
                        ..PartialCall::default()
                    });
                    self.calls.len() - 1
                }
            },
            // No index and no id: a continuation of the last call, or the first one.
            None => {
                if self.calls.is_empty() {
                    self.calls.push(PartialCall::default());
                }
                self.calls.len() - 1
            }
        };
        let Some(call) = self.calls.get_mut(position) else {
            return;
        };
        if let Some(id) = id
            && call.id.is_empty()
        {
            call.id = id.to_owned();
        }
        let function = fragment.get("function").unwrap_or(fragment);
        if let Some(name) = str_field(function, "name")
            && call.name.is_empty()
        {
            call.name = name.to_owned();
        }
        let mut piece = String::new();
        match function.get("arguments") {
            Some(Value::String(s)) => {
                call.arguments.push_str(s);
                piece = s.clone();
            }
            Some(value @ (Value::Object(_) | Value::Array(_))) => {
                call.arguments_value = Some(value.clone());
                piece = value.to_string();
            }
            _ => {}
        }
        if !call.announced && !call.name.is_empty() {
            call.announced = true;
            if call.id.is_empty() {
                call.id = new_call_id();
            }
            out.push(StreamEvent::ToolCallStart {
                index: position,
                id: call.id.clone(),
                name: call.name.clone(),
            });
            // Arguments that arrived before the name are reported now.
            piece = call
                .arguments_value
                .as_ref()
                .map_or_else(|| call.arguments.clone(), Value::to_string);
        }
        if call.announced && !piece.is_empty() {
            out.push(StreamEvent::ToolCallDelta {
                index: position,
                arguments: piece,
            });
        }
    }
}

impl Decoder for OpenAiDecoder {
    fn on_event(&mut self, event: &SseEvent, out: &mut Vec<StreamEvent>) -> Result<bool, LlmError> {
        if event.is_done_marker() {
            return Ok(true);
        }
        if event.data.trim().is_empty() {
            return Ok(false);
        }
        match serde_json::from_str::<Value>(&event.data) {
            Ok(chunk) => self.on_chunk(&chunk, out)?,
            Err(whole_error) => {
                // Servers that omit the blank line between events glue several
                // `data:` lines into one event: try them one by one.
                let mut parsed_any = false;
                for line in event.data.lines().filter(|l| !l.trim().is_empty()) {
                    if line.trim() == "[DONE]" {
                        return Ok(true);
                    }
                    if let Ok(chunk) = serde_json::from_str::<Value>(line) {
                        parsed_any = true;
                        self.on_chunk(&chunk, out)?;
                    }
                }
                if !parsed_any {
                    return Err(LlmError::bad_response(
                        &self.wire.provider,
                        format!("a stream chunk is not JSON ({whole_error})"),
                    ));
                }
            }
        }
        Ok(false)
    }

    fn received_anything(&self) -> bool {
        self.received
    }

    fn into_raw(self) -> RawResponse {
        let tool_calls = self
            .calls
            .into_iter()
            .filter(|c| !c.name.is_empty())
            .map(|c| ToolCall {
                id: if c.id.is_empty() { new_call_id() } else { c.id },
                name: c.name,
                arguments: match c.arguments_value {
                    Some(value) => value,
                    None => normalize_arguments(Some(Value::String(c.arguments))),
                },
            })
            .collect();
        RawResponse {
            text: self.text,
            tool_calls,
            finish_reason: self.finish_reason,
            usage: self.usage,
            model: self.model,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn decoder() -> OpenAiDecoder {
        OpenAiDecoder::new(Wire {
            provider: "t".into(),
            timeout: None,
            api_key: None,
        })
    }

    fn feed(decoder: &mut OpenAiDecoder, chunks: &[Value]) -> Vec<StreamEvent> {
        let mut out = Vec::new();
        for chunk in chunks {
            let event = SseEvent {
                event: None,
                data: chunk.to_string(),
            };
            decoder.on_event(&event, &mut out).unwrap();
        }
        out
    }

    fn tool_delta(call: Value) -> Value {
        json!({"choices": [{"delta": {"tool_calls": [call]}}]})
    }

    #[test]
    fn fragments_by_index_assemble_in_order() {
        let mut d = decoder();
        let events = feed(
            &mut d,
            &[
                tool_delta(
                    json!({"index": 0, "id": "a", "function": {"name": "shell", "arguments": ""}}),
                ),
                tool_delta(
                    json!({"index": 1, "id": "b", "function": {"name": "read_file", "arguments": "{\"pa"}}),
                ),
                tool_delta(json!({"index": 0, "function": {"arguments": "{\"command\":"}})),
                tool_delta(json!({"index": 0, "function": {"arguments": "\"ls\"}"}})),
                tool_delta(json!({"index": 1, "function": {"arguments": "th\":\"x\"}"}})),
                json!({"choices": [{"delta": {}, "finish_reason": "tool_calls"}]}),
                json!({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 2}}),
            ],
        );
        assert_eq!(
            events[0],
            StreamEvent::ToolCallStart {
                index: 0,
                id: "a".into(),
                name: "shell".into()
            }
        );
        let raw = d.into_raw();
        assert_eq!(raw.tool_calls[0].arguments, json!({"command": "ls"}));
        assert_eq!(raw.tool_calls[1].arguments, json!({"path": "x"}));
        assert_eq!(raw.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(raw.usage.map(|u| u.input_tokens), Some(7));
    }

    #[test]
    fn whole_calls_without_index_keyed_by_id_or_appended() {
        let mut d = decoder();
        feed(
            &mut d,
            &[
                tool_delta(
                    json!({"id": "x1", "function": {"name": "shell", "arguments": {"command": "a"}}}),
                ),
                tool_delta(
                    json!({"id": "x2", "function": {"name": "shell", "arguments": {"command": "b"}}}),
                ),
            ],
        );
        let raw = d.into_raw();
        let args: Vec<_> = raw.tool_calls.iter().map(|c| c.arguments.clone()).collect();
        assert_eq!(args, [json!({"command": "a"}), json!({"command": "b"})]);

        // No index, no id: arguments before the name are reported once it arrives.
        let mut d = decoder();
        let events = feed(
            &mut d,
            &[
                tool_delta(json!({"function": {"arguments": "{\"q\":1}"}})),
                tool_delta(json!({"function": {"name": "web_search"}})),
            ],
        );
        assert!(
            matches!(&events[1], StreamEvent::ToolCallDelta { arguments, .. } if arguments == "{\"q\":1}")
        );
        let raw = d.into_raw();
        assert!(raw.tool_calls[0].id.starts_with("call_"));
        assert_eq!(raw.tool_calls[0].arguments, json!({"q": 1}));
    }

    #[test]
    fn glued_lines_done_marker_and_errors() {
        let mut d = decoder();
        let mut out = Vec::new();
        let glued = SseEvent {
            event: None,
            data: "{\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n{\"choices\":[{\"delta\":{\"content\":\"b\"}}]}\n[DONE]".into(),
        };
        assert!(d.on_event(&glued, &mut out).unwrap());
        assert_eq!(d.into_raw().text, "ab");
        let mut d = decoder();
        let junk = SseEvent {
            event: None,
            data: "not json".into(),
        };
        assert!(d.on_event(&junk, &mut out).is_err());
        let error = SseEvent {
            event: None,
            data: json!({"error": {"message": "slow down", "type": "rate_limit_error"}})
                .to_string(),
        };
        assert!(matches!(
            d.on_event(&error, &mut out),
            Err(LlmError::RateLimited { .. })
        ));
    }
}
