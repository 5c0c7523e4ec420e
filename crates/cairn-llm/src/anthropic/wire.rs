//! Anthropic Messages wire format: request bodies and response parsing.

use cairn_core::chat::{ChatMessage, Role, ToolCall, ToolDefinition};
use serde_json::{Map, Value, json};

use crate::client::RawResponse;
use crate::text_tools::new_call_id;
use crate::types::{ChatRequest, STRUCTURED_OUTPUT_TOOL, ToolChoice, Usage};

/// Output cap when neither the request nor the settings give one (the API requires it).
pub(crate) const DEFAULT_MAX_TOKENS: u32 = 4096;

/// The JSON body for `POST /v1/messages`.
///
/// System messages (wherever they are) become the top-level `system` field;
/// tool results become `tool_result` blocks in a user turn; consecutive turns
/// of the same role are merged, as the API requires alternation.
pub(crate) fn request_body(
    request: &ChatRequest,
    model: &str,
    max_tokens: u32,
    stream: bool,
) -> Value {
    let system: Vec<&str> = request
        .messages
        .iter()
        .filter(|m| m.role == Role::System && !m.content.trim().is_empty())
        .map(|m| m.content.as_str())
        .collect();
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for message in &request.messages {
        let (role, blocks) = match message.role {
            Role::System => continue,
            Role::User => ("user", user_blocks(message)),
            Role::Assistant => ("assistant", assistant_blocks(message)),
            Role::Tool => ("user", vec![tool_result_block(message)]),
        };
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((last_role, last_blocks)) if *last_role == role => last_blocks.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    }
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("max_tokens".into(), json!(max_tokens));
    if !system.is_empty() {
        body.insert("system".into(), json!(system.join("\n\n")));
    }
    body.insert(
        "messages".into(),
        Value::Array(
            turns
                .into_iter()
                .map(|(role, content)| json!({"role": role, "content": content}))
                .collect(),
        ),
    );
    let mut tools: Vec<Value> = request.tools.iter().map(tool_json).collect();
    let options = &request.options;
    let mut choice = options.tool_choice.as_ref().map(|c| match c {
        ToolChoice::Auto => json!({"type": "auto"}),
        ToolChoice::None => json!({"type": "none"}),
        ToolChoice::Required => json!({"type": "any"}),
        ToolChoice::Tool(name) => json!({"type": "tool", "name": name}),
    });
    // No native `response_format`: a tool whose input is the answer, which
    // the model must call (or, beside other tools, must call some tool).
    if let Some(format) = &options.response_format {
        tools.push(json!({
            "name": STRUCTURED_OUTPUT_TOOL,
            "description": "Give your final answer by calling this tool; its input is the answer.",
            "input_schema": format.schema(),
        }));
        choice = Some(if request.tools.is_empty() {
            json!({"type": "tool", "name": STRUCTURED_OUTPUT_TOOL})
        } else {
            json!({"type": "any"})
        });
    }
    if !tools.is_empty() {
        if let (Some(choice), Some(false)) = (&mut choice, options.parallel_tool_calls) {
            choice["disable_parallel_tool_use"] = json!(true);
        }
        if let Some(choice) = choice {
            body.insert("tool_choice".into(), choice);
        }
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(temperature) = request.temperature {
        // Anthropic accepts 0..=1 (OpenAI 0..=2); clamp rather than fail the turn.
        body.insert("temperature".into(), json!(temperature.clamp(0.0, 1.0)));
    }
    if let Some(top_p) = options.top_p {
        body.insert("top_p".into(), json!(top_p));
    }
    if !options.stop.is_empty() {
        body.insert("stop_sequences".into(), json!(options.stop));
    }
    if stream {
        body.insert("stream".into(), json!(true));
    }
    Value::Object(body)
}

fn text_block(text: &str) -> Option<Value> {
    // The API rejects empty text blocks.
    (!text.trim().is_empty()).then(|| json!({"type": "text", "text": text}))
}

/// A user message's blocks: its images first (Anthropic's advice for image
/// questions), then its text.
fn user_blocks(message: &ChatMessage) -> Vec<Value> {
    let mut blocks = image_blocks(message);
    blocks.extend(text_block(&message.content));
    blocks
}

/// A message's images as `image` blocks (those whose bytes are loaded).
fn image_blocks(message: &ChatMessage) -> Vec<Value> {
    message
        .images
        .iter()
        .filter_map(|image| {
            let data = crate::images::base64_of(image)?;
            Some(json!({
                "type": "image",
                "source": {"type": "base64", "media_type": image.media_type, "data": data},
            }))
        })
        .collect()
}

fn assistant_blocks(message: &ChatMessage) -> Vec<Value> {
    let mut blocks: Vec<Value> = text_block(&message.content).into_iter().collect();
    blocks.extend(message.tool_calls.iter().map(tool_use_block));
    blocks
}

fn tool_use_block(call: &ToolCall) -> Value {
    // `input` must be an object; anything else the model wrote is wrapped.
    let input = match &call.arguments {
        Value::Object(_) => call.arguments.clone(),
        Value::String(raw) => match serde_json::from_str::<Value>(raw) {
            Ok(object @ Value::Object(_)) => object,
            _ => json!({"raw_arguments": raw}),
        },
        Value::Null => json!({}),
        other => json!({"value": other}),
    };
    json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input})
}

fn tool_result_block(message: &ChatMessage) -> Value {
    let mut block = json!({
        "type": "tool_result",
        "tool_use_id": message.tool_call_id.clone().unwrap_or_default(),
    });
    if message.images.is_empty() {
        if !message.content.is_empty() {
            block["content"] = json!(message.content);
        }
    } else {
        // A tool result may hold images (a browser screenshot) beside its text.
        let mut content: Vec<Value> = text_block(&message.content).into_iter().collect();
        content.extend(image_blocks(message));
        block["content"] = Value::Array(content);
    }
    block
}

fn tool_json(tool: &ToolDefinition) -> Value {
    let schema = match &tool.parameters {
        Value::Object(_) => tool.parameters.clone(),
        _ => json!({"type": "object", "properties": {}}),
    };
    json!({"name": tool.name, "description": tool.description, "input_schema": schema})
}

/// Usage from Anthropic's usage object; cached prompt tokens count as input.
pub(crate) fn parse_usage(usage: Option<&Value>) -> Option<Usage> {
    let usage = usage?.as_object()?;
    let get = |key: &str| usage.get(key).and_then(Value::as_u64);
    let input = [
        "input_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
    ]
    .iter()
    .filter_map(|k| get(k))
    .fold(None, |acc: Option<u64>, n| {
        Some(acc.unwrap_or(0).saturating_add(n))
    });
    let output = get("output_tokens");
    Usage::reported(input, output)
}

/// A tool call from a `tool_use` block.
pub(crate) fn tool_use_call(block: &Value) -> Option<ToolCall> {
    let name = block.get("name")?.as_str().filter(|n| !n.is_empty())?;
    Some(ToolCall {
        id: block
            .get("id")
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty())
            .map_or_else(new_call_id, str::to_owned),
        name: name.to_owned(),
        arguments: crate::text_tools::normalize_arguments(block.get("input").cloned()),
    })
}

/// Parses a whole Messages response. `Err(Some(error))` is an embedded error object.
pub(crate) fn parse_message(value: &Value) -> Result<RawResponse, Option<Value>> {
    if value.get("type").and_then(Value::as_str) == Some("error") {
        return Err(value.get("error").cloned());
    }
    let Some(blocks) = value.get("content").and_then(Value::as_array) else {
        return Err(None);
    };
    let mut raw = RawResponse::default();
    for block in blocks {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                if let Some(text) = block.get("text").and_then(Value::as_str) {
                    raw.text.push_str(text);
                }
            }
            Some("tool_use") => raw.tool_calls.extend(tool_use_call(block)),
            _ => {} // thinking and future block types are not part of the answer
        }
    }
    raw.finish_reason = value
        .get("stop_reason")
        .and_then(Value::as_str)
        .map(str::to_owned);
    raw.usage = parse_usage(value.get("usage"));
    raw.model = value
        .get("model")
        .and_then(Value::as_str)
        .map(str::to_owned);
    Ok(raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_tool_use_and_tool_results() {
        let call = |id: &str| ToolCall {
            id: id.into(),
            name: "shell".into(),
            arguments: json!({"command": "ls"}),
        };
        let request = ChatRequest::new(vec![
            ChatMessage::system("be brief"),
            ChatMessage::user("list"),
            ChatMessage::assistant_tool_calls("", vec![call("t1"), call("t2")]),
            ChatMessage::tool_result("t1", "shell", "a"),
            ChatMessage::tool_result("t2", "shell", ""),
            ChatMessage::user("and?"),
            ChatMessage::system("also polite"),
        ])
        .with_temperature(1.7);
        let body = request_body(&request, "claude", 100, false);
        assert_eq!(body["system"], "be brief\n\nalso polite");
        let messages = body["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 3);
        assert_eq!(messages[1]["content"][1]["type"], "tool_use");
        assert_eq!(messages[1]["content"][1]["input"], json!({"command": "ls"}));
        assert_eq!(messages[2]["role"], "user");
        assert_eq!(
            messages[2]["content"][0],
            json!({"type": "tool_result", "tool_use_id": "t1", "content": "a"})
        );
        assert_eq!(
            messages[2]["content"][1],
            json!({"type": "tool_result", "tool_use_id": "t2"})
        );
        assert_eq!(messages[2]["content"][2]["text"], "and?");
        assert_eq!(body["temperature"], 1.0);
        assert!(body.get("stream").is_none());
    }

    #[test]
    fn response_format_is_a_forced_tool_and_sampling_is_forwarded() {
        let mut request = ChatRequest::new(vec![ChatMessage::user("city?")]);
        request.options.response_format = Some(crate::types::ResponseFormat::JsonSchema {
            name: "city".into(),
            schema: json!({"type": "object", "properties": {"name": {"type": "string"}}}),
            strict: None,
        });
        request.options.top_p = Some(0.75);
        request.options.stop = vec!["END".into()];
        request.options.parallel_tool_calls = Some(false);
        let body = request_body(&request, "claude", 100, false);
        assert_eq!(body["tools"][0]["name"], STRUCTURED_OUTPUT_TOOL);
        assert_eq!(
            body["tools"][0]["input_schema"]["properties"]["name"]["type"],
            "string"
        );
        assert_eq!(
            body["tool_choice"],
            json!({"type": "tool", "name": STRUCTURED_OUTPUT_TOOL, "disable_parallel_tool_use": true})
        );
        assert_eq!(body["top_p"], 0.75);
        assert_eq!(body["stop_sequences"], json!(["END"]));

        // Beside the agent's tools the model must call one of them.
        request.tools = vec![ToolDefinition {
            name: "shell".into(),
            description: "run".into(),
            parameters: json!({"type": "object"}),
        }];
        let body = request_body(&request, "claude", 100, false);
        assert_eq!(body["tools"].as_array().unwrap().len(), 2);
        assert_eq!(body["tool_choice"]["type"], "any");
    }

    #[test]
    fn parses_blocks_usage_and_errors() {
        let body = json!({
            "content": [
                {"type": "thinking", "thinking": "hmm"},
                {"type": "text", "text": "ok"},
                {"type": "tool_use", "id": "toolu_1", "name": "shell", "input": {"command": "ls"}}
            ],
            "stop_reason": "tool_use",
            "model": "claude-x",
            "usage": {"input_tokens": 10, "cache_read_input_tokens": 5, "output_tokens": 3}
        });
        let raw = parse_message(&body).unwrap();
        assert_eq!(raw.text, "ok");
        assert_eq!(raw.tool_calls[0].id, "toolu_1");
        assert_eq!(raw.usage.unwrap().input_tokens, 15);
        assert!(parse_message(&json!({"type": "error", "error": {"message": "x"}})).is_err());
        assert_eq!(parse_message(&json!({"id": 1})).err(), Some(None));
    }

    #[test]
    fn a_tool_result_carries_its_images_beside_its_text() {
        let mut shot = ChatMessage::tool_result("t1", "browser_screenshot", "saved");
        shot.images = vec![cairn_core::image::ImagePart {
            media_type: "image/png".into(),
            sha256: "ab".into(),
            data: Some(std::sync::Arc::from(&b"PNG"[..])),
        }];
        let block = tool_result_block(&shot);
        assert_eq!(
            block["content"][0],
            json!({"type": "text", "text": "saved"})
        );
        assert_eq!(block["content"][1]["type"], "image");
        assert_eq!(block["content"][1]["source"]["data"], "UE5H");
        let plain = tool_result_block(&ChatMessage::tool_result("t2", "shell", "a"));
        assert_eq!(plain["content"], "a");
    }
}
