//! OpenAI chat-completions wire format: request bodies and tolerant parsing
//! of whole responses (off-spec servers included).

use cairn_core::chat::{ChatMessage, Role, ToolCall, ToolDefinition};
use serde_json::{Map, Value, json};

use crate::client::RawResponse;
use crate::http_provider::ParseProblem;
use crate::text_tools::{new_call_id, normalize_arguments};
use crate::types::{ChatRequest, GenerationOptions, ResponseFormat, ToolChoice, Usage};

/// How the output cap is named: OpenAI's own API wants
/// `max_completion_tokens` (reasoning models reject `max_tokens`); every other
/// compatible server only knows `max_tokens`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MaxTokensField {
    MaxTokens,
    MaxCompletionTokens,
}

/// The JSON body for `POST /chat/completions`.
pub(crate) fn request_body(
    request: &ChatRequest,
    model: &str,
    max_tokens: Option<u32>,
    field: MaxTokensField,
    stream: bool,
) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert(
        "messages".into(),
        Value::Array(messages_json(&request.messages)),
    );
    if !request.tools.is_empty() {
        body.insert(
            "tools".into(),
            Value::Array(request.tools.iter().map(tool_json).collect()),
        );
    }
    if let Some(temperature) = request.temperature {
        body.insert("temperature".into(), json!(temperature));
    }
    if let Some(max) = request.max_tokens.or(max_tokens) {
        let key = match field {
            MaxTokensField::MaxTokens => "max_tokens",
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
        };
        body.insert(key.into(), json!(max));
    }
    options_json(&request.options, !request.tools.is_empty(), &mut body);
    if stream {
        body.insert("stream".into(), json!(true));
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    Value::Object(body)
}

/// The request's further sampling and output settings, under OpenAI's names
/// (the tool settings only when tools are offered: servers reject them alone).
fn options_json(options: &GenerationOptions, tools: bool, body: &mut Map<String, Value>) {
    if let Some(top_p) = options.top_p {
        body.insert("top_p".into(), json!(top_p));
    }
    if !options.stop.is_empty() {
        body.insert("stop".into(), json!(options.stop));
    }
    if let Some(seed) = options.seed {
        body.insert("seed".into(), json!(seed));
    }
    if let Some(p) = options.presence_penalty {
        body.insert("presence_penalty".into(), json!(p));
    }
    if let Some(p) = options.frequency_penalty {
        body.insert("frequency_penalty".into(), json!(p));
    }
    match &options.response_format {
        Some(ResponseFormat::JsonObject) => {
            body.insert("response_format".into(), json!({"type": "json_object"}));
        }
        Some(ResponseFormat::JsonSchema {
            name,
            schema,
            strict,
        }) => {
            let mut inner = json!({"name": name, "schema": schema});
            if let Some(strict) = strict {
                inner["strict"] = json!(strict);
            }
            body.insert(
                "response_format".into(),
                json!({"type": "json_schema", "json_schema": inner}),
            );
        }
        None => {}
    }
    if !tools {
        return;
    }
    if let Some(choice) = &options.tool_choice {
        let value = match choice {
            ToolChoice::Auto => json!("auto"),
            ToolChoice::None => json!("none"),
            ToolChoice::Required => json!("required"),
            ToolChoice::Tool(name) => json!({"type": "function", "function": {"name": name}}),
        };
        body.insert("tool_choice".into(), value);
    }
    if let Some(parallel) = options.parallel_tool_calls {
        body.insert("parallel_tool_calls".into(), json!(parallel));
    }
}

/// The messages on the wire. A tool message carries only text here, so the
/// images of a run of tool results (a browser screenshot) follow it as one
/// user message: a user message may not come between the results of one
/// assistant message's calls.
fn messages_json(messages: &[ChatMessage]) -> Vec<Value> {
    let mut out = Vec::with_capacity(messages.len());
    let mut images = Vec::new();
    for (index, message) in messages.iter().enumerate() {
        out.push(message_json(message));
        if message.role == Role::Tool {
            images.extend(message.images.iter().cloned());
        }
        let run_ends = messages
            .get(index + 1)
            .is_none_or(|next| next.role != Role::Tool);
        if run_ends && !images.is_empty() {
            let mut carrier = ChatMessage::user("The images of the tool results above.");
            carrier.images = std::mem::take(&mut images);
            out.push(json!({"role": "user", "content": user_parts(&carrier)}));
        }
    }
    out
}

fn message_json(message: &ChatMessage) -> Value {
    match message.role {
        Role::System => json!({"role": "system", "content": message.content}),
        Role::User if message.images.is_empty() => {
            json!({"role": "user", "content": message.content})
        }
        Role::User => json!({"role": "user", "content": user_parts(message)}),
        Role::Assistant if message.tool_calls.is_empty() => {
            json!({"role": "assistant", "content": message.content})
        }
        Role::Assistant => {
            let content = if message.content.is_empty() {
                Value::Null
            } else {
                json!(message.content)
            };
            json!({
                "role": "assistant",
                "content": content,
                "tool_calls": message.tool_calls.iter().map(tool_call_json).collect::<Vec<_>>(),
            })
        }
        Role::Tool => json!({
            "role": "tool",
            "tool_call_id": message.tool_call_id.clone().unwrap_or_default(),
            "content": message.content,
        }),
    }
}

/// A user message with images as content parts: the text (when any), then
/// one `image_url` part per image, carried as a `data:` URL.
fn user_parts(message: &ChatMessage) -> Vec<Value> {
    let mut parts = Vec::new();
    if !message.content.is_empty() {
        parts.push(json!({"type": "text", "text": message.content}));
    }
    for image in &message.images {
        if let Some(data) = crate::images::base64_of(image) {
            let url = format!("data:{};base64,{data}", image.media_type);
            parts.push(json!({"type": "image_url", "image_url": {"url": url}}));
        }
    }
    parts
}

fn tool_call_json(call: &ToolCall) -> Value {
    // The wire wants arguments as a JSON-encoded string; undecodable text the
    // model wrote earlier is sent back verbatim.
    let arguments = match &call.arguments {
        Value::String(raw) => raw.clone(),
        other => other.to_string(),
    };
    json!({
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": arguments},
    })
}

fn tool_json(tool: &ToolDefinition) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    })
}

/// Text from a `content` that may be a string, null, or an array of parts.
pub(crate) fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|part| match part {
                Value::String(text) => Some(text.as_str()),
                other => other.get("text").and_then(Value::as_str),
            })
            .collect(),
        _ => String::new(),
    }
}

/// Usage from `{prompt_tokens, completion_tokens}` (or `input_/output_tokens`).
pub(crate) fn parse_usage(usage: Option<&Value>) -> Option<Usage> {
    let usage = usage?.as_object()?;
    let count = |keys: [&str; 2]| keys.iter().find_map(|k| usage.get(*k)?.as_u64());
    let input = count(["prompt_tokens", "input_tokens"]);
    let output = count(["completion_tokens", "output_tokens"]);
    Usage::reported(input, output)
}

/// A non-empty string field.
pub(crate) fn str_field<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value.get(key)?.as_str().filter(|s| !s.trim().is_empty())
}

/// One complete tool call from a message's `tool_calls` entry (or legacy `function_call`).
fn parse_tool_call(value: &Value) -> Option<ToolCall> {
    let function = value.get("function").unwrap_or(value);
    let name = str_field(function, "name")?;
    Some(ToolCall {
        id: str_field(value, "id").map_or_else(new_call_id, str::to_owned),
        name: name.to_owned(),
        arguments: normalize_arguments(function.get("arguments").cloned()),
    })
}

/// Parses a whole (non-streamed) completion. `Err` carries an embedded error object.
pub(crate) fn parse_completion(value: &Value) -> Result<RawResponse, ParseProblem> {
    let choice = value
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|choices| choices.first());
    let Some(choice) = choice else {
        return Err(match value.get("error").filter(|e| !e.is_null()) {
            Some(error) => ParseProblem::Embedded(error.clone()),
            None => ParseProblem::Malformed("no choices in the response"),
        });
    };
    // Some servers put the message under `delta`, old ones use `text`.
    let message = choice.get("message").or_else(|| choice.get("delta"));
    let text = match message {
        Some(message) => content_text(message.get("content")),
        None => content_text(choice.get("text")),
    };
    let mut tool_calls: Vec<ToolCall> = message
        .and_then(|m| m.get("tool_calls"))
        .and_then(Value::as_array)
        .map(|calls| calls.iter().filter_map(parse_tool_call).collect())
        .unwrap_or_default();
    if tool_calls.is_empty()
        && let Some(call) = message
            .and_then(|m| m.get("function_call"))
            .and_then(parse_tool_call)
    {
        tool_calls.push(call);
    }
    Ok(RawResponse {
        text,
        tool_calls,
        finish_reason: choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .map(str::to_owned),
        usage: parse_usage(value.get("usage")),
        model: str_field(value, "model").map(str::to_owned),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampling_format_and_tool_settings_are_forwarded() {
        let mut request = ChatRequest::new(vec![ChatMessage::user("hi")]);
        request.options = GenerationOptions {
            top_p: Some(0.5),
            stop: vec!["END".into()],
            seed: Some(7),
            presence_penalty: Some(0.25),
            frequency_penalty: Some(-0.5),
            response_format: Some(ResponseFormat::JsonSchema {
                name: "city".into(),
                schema: json!({"type": "object"}),
                strict: Some(true),
            }),
            tool_choice: Some(ToolChoice::Tool("f".into())),
            parallel_tool_calls: Some(false),
        };
        let body = request_body(&request, "m", None, MaxTokensField::MaxTokens, false);
        assert_eq!(body["top_p"], 0.5);
        assert_eq!(body["stop"], json!(["END"]));
        assert_eq!(body["seed"], 7);
        assert_eq!(body["presence_penalty"], 0.25);
        assert_eq!(body["frequency_penalty"], -0.5);
        assert_eq!(
            body["response_format"],
            json!({"type": "json_schema", "json_schema": {"name": "city", "schema": {"type": "object"}, "strict": true}})
        );
        // Tool settings without tools would be refused by the server.
        assert!(body.get("tool_choice").is_none());
        request.tools = vec![ToolDefinition {
            name: "f".into(),
            description: "f".into(),
            parameters: json!({"type": "object"}),
        }];
        let body = request_body(&request, "m", None, MaxTokensField::MaxTokens, false);
        assert_eq!(
            body["tool_choice"],
            json!({"type": "function", "function": {"name": "f"}})
        );
        assert_eq!(body["parallel_tool_calls"], false);
    }

    #[test]
    fn off_spec_bodies_parse() {
        let body = json!({
            "choices": [{"message": {"content": null, "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "shell", "arguments": "{\"command\":\"ls\"}"}},
                {"function": {"name": "read_file", "arguments": {"path": "x"}}},
                {"function": {"arguments": "{}"}}
            ]}, "finish_reason": ""}],
            "x_unknown": 1
        });
        let raw = parse_completion(&body).unwrap();
        assert_eq!(raw.text, "");
        assert_eq!(raw.tool_calls.len(), 2);
        assert_eq!(raw.tool_calls[0].arguments, json!({"command": "ls"}));
        assert_eq!(raw.tool_calls[1].arguments, json!({"path": "x"}));
        assert!(raw.tool_calls[1].id.starts_with("call_"));
        assert!(raw.usage.is_none());
        let parts = json!({"choices": [{"message": {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}}]});
        assert_eq!(parse_completion(&parts).unwrap().text, "ab");
        let legacy = json!({"choices": [{"text": "old", "finish_reason": null}]});
        assert_eq!(parse_completion(&legacy).unwrap().text, "old");
        assert!(matches!(
            parse_completion(&json!({"error": {"message": "x"}})),
            Err(ParseProblem::Embedded(_))
        ));
        assert!(matches!(
            parse_completion(&json!({"choices": []})),
            Err(ParseProblem::Malformed(_))
        ));
    }

    #[test]
    fn request_wire_shape() {
        let call = ToolCall {
            id: "c1".into(),
            name: "shell".into(),
            arguments: json!({"command": "ls"}),
        };
        let request = ChatRequest::new(vec![
            ChatMessage::system("sys"),
            ChatMessage::user("hi"),
            ChatMessage::assistant_tool_calls("", vec![call]),
            ChatMessage::tool_result("c1", "shell", "a.txt"),
        ])
        .with_temperature(0.5);
        let body = request_body(&request, "m", Some(100), MaxTokensField::MaxTokens, true);
        assert_eq!(body["messages"][2]["content"], Value::Null);
        assert_eq!(
            body["messages"][2]["tool_calls"][0]["function"]["arguments"],
            "{\"command\":\"ls\"}"
        );
        assert_eq!(
            body["messages"][3],
            json!({"role": "tool", "tool_call_id": "c1", "content": "a.txt"})
        );
        assert_eq!(body["max_tokens"], 100);
        assert_eq!(body["stream_options"]["include_usage"], true);
        assert!(body.get("tools").is_none());
        let body = request_body(
            &request,
            "m",
            Some(5),
            MaxTokensField::MaxCompletionTokens,
            false,
        );
        assert_eq!(body["max_completion_tokens"], 5);
        assert!(body.get("stream").is_none());
    }

    #[test]
    fn the_images_of_tool_results_follow_the_run_of_results_as_one_user_message() {
        let png = cairn_core::image::ImagePart {
            media_type: "image/png".into(),
            sha256: "ab".into(),
            data: Some(std::sync::Arc::from(&b"PNG"[..])),
        };
        let calls = vec![
            ToolCall {
                id: "c1".into(),
                name: "browser_screenshot".into(),
                arguments: json!({}),
            },
            ToolCall {
                id: "c2".into(),
                name: "shell".into(),
                arguments: json!({}),
            },
        ];
        let mut shot = ChatMessage::tool_result("c1", "browser_screenshot", "saved");
        shot.images = vec![png];
        let request = ChatRequest::new(vec![
            ChatMessage::user("look"),
            ChatMessage::assistant_tool_calls("", calls),
            shot,
            ChatMessage::tool_result("c2", "shell", "ok"),
            ChatMessage::assistant("seen"),
        ]);
        let body = request_body(&request, "m", None, MaxTokensField::MaxTokens, false);
        let roles: Vec<&str> = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(
            roles,
            ["user", "assistant", "tool", "tool", "user", "assistant"]
        );
        assert_eq!(body["messages"][2]["content"], "saved");
        let parts = &body["messages"][4]["content"];
        assert_eq!(parts[1]["image_url"]["url"], "data:image/png;base64,UE5H");
    }
}
