//! The chat completion request: its fields, and its translation into what
//! the agent loop takes (messages, per-request settings, client tools).

use cairn_agent::chat::ChatService;
use cairn_core::chat::{ChatMessage, Role, ToolCall, ToolDefinition};
use cairn_llm::{GenerationOptions, ResponseFormat, ToolChoice};
use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::error::OpenAiError;

/// A chat completion request (the fields cairn reads; others are ignored).
#[derive(Debug, Deserialize, ToSchema)]
pub struct CompletionRequest {
    /// `cairn`, the agent's model, or (unless `gateway.openai_strict_models`) any name.
    pub model: String,
    /// The conversation so far.
    pub messages: Vec<InMessage>,
    /// Stream the answer as server-sent events.
    #[serde(default)]
    pub stream: bool,
    /// Streaming options.
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
    /// Sampling temperature for this request.
    #[serde(default)]
    pub temperature: Option<f64>,
    /// Nucleus sampling mass.
    #[serde(default)]
    pub top_p: Option<f64>,
    /// Cap on each answer's tokens (older name of `max_completion_tokens`).
    #[serde(default)]
    pub max_tokens: Option<u32>,
    /// Cap on each answer's tokens.
    #[serde(default)]
    pub max_completion_tokens: Option<u32>,
    /// A sequence, or up to four, that end the answer.
    #[serde(default)]
    pub stop: Option<Stop>,
    /// Seed for reproducible sampling (OpenAI-compatible providers).
    #[serde(default)]
    pub seed: Option<i64>,
    /// Presence penalty (OpenAI-compatible providers).
    #[serde(default)]
    pub presence_penalty: Option<f64>,
    /// Frequency penalty (OpenAI-compatible providers).
    #[serde(default)]
    pub frequency_penalty: Option<f64>,
    /// `{"type":"text"}`, `{"type":"json_object"}` or `{"type":"json_schema","json_schema":{…}}`.
    #[serde(default)]
    pub response_format: Option<InResponseFormat>,
    /// Tools the client runs: a call to one ends the turn with `tool_calls`.
    #[serde(default)]
    pub tools: Option<Vec<InTool>>,
    /// `auto`, `none`, `required`, or `{"type":"function","function":{"name":…}}`.
    #[serde(default)]
    #[schema(value_type = Option<ToolChoiceSchema>)]
    pub tool_choice: Option<Value>,
    /// Whether the model may call several tools in one response.
    #[serde(default)]
    pub parallel_tool_calls: Option<bool>,
    /// Refused: the legacy form of `tools`.
    #[serde(default)]
    #[schema(value_type = Option<Vec<Object>>)]
    pub functions: Option<Vec<Value>>,
    /// Only 1 is supported.
    #[serde(default)]
    pub n: Option<u32>,
}

/// `tool_choice`, as the document declares it.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(untagged)]
#[expect(dead_code, reason = "describes the field in the OpenAPI document only")]
pub enum ToolChoiceSchema {
    /// `auto`, `none` or `required`.
    Mode(String),
    /// `{"type":"function","function":{"name":…}}`.
    Named(NamedToolChoice),
}

/// A named function for `tool_choice`.
#[derive(Debug, Deserialize, ToSchema)]
#[expect(dead_code, reason = "describes the field in the OpenAPI document only")]
pub struct NamedToolChoice {
    /// `function`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The function.
    pub function: NamedFunction,
}

/// The function a `tool_choice` names.
#[derive(Debug, Deserialize, ToSchema)]
#[expect(dead_code, reason = "describes the field in the OpenAPI document only")]
pub struct NamedFunction {
    /// Its name.
    pub name: String,
}

/// `stop`: one sequence or several.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum Stop {
    /// One sequence.
    One(String),
    /// Several.
    Many(Vec<String>),
}

/// Streaming options.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct StreamOptions {
    /// Send a last chunk with the usage and no choices.
    #[serde(default)]
    pub include_usage: bool,
}

/// `response_format`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct InResponseFormat {
    /// `text`, `json_object` or `json_schema`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The schema, for `json_schema`.
    #[serde(default)]
    pub json_schema: Option<InJsonSchema>,
}

/// A named JSON Schema.
#[derive(Debug, Deserialize, ToSchema)]
pub struct InJsonSchema {
    /// Its name.
    pub name: String,
    /// The schema.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub schema: Option<Value>,
    /// Whether the model must follow it exactly.
    #[serde(default)]
    pub strict: Option<bool>,
}

/// A client tool.
#[derive(Debug, Deserialize, ToSchema)]
pub struct InTool {
    /// `function`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The function.
    pub function: InFunction,
}

/// A client function.
#[derive(Debug, Deserialize, ToSchema)]
pub struct InFunction {
    /// Its name.
    pub name: String,
    /// What it does.
    #[serde(default)]
    pub description: Option<String>,
    /// JSON Schema of its arguments.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub parameters: Option<Value>,
}

/// One message of the request.
#[derive(Debug, Deserialize, ToSchema)]
pub struct InMessage {
    /// `system`, `developer`, `user`, `assistant` or `tool`.
    pub role: String,
    /// A string, or an array of `text` (and, in user messages, `image_url`) parts.
    #[serde(default)]
    pub content: Option<InContent>,
    /// An assistant message's calls of the client's tools.
    #[serde(default)]
    pub tool_calls: Option<Vec<InToolCall>>,
    /// A `tool` message: the call it answers.
    #[serde(default)]
    pub tool_call_id: Option<String>,
}

/// Message content: a string or parts.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum InContent {
    /// Plain text.
    Text(String),
    /// Parts (`{"type":"text","text":…}`, `{"type":"image_url","image_url":{"url":…}}`).
    Parts(Vec<ContentPart>),
}

/// One content part.
#[derive(Debug, Clone, Deserialize, ToSchema)]
pub struct ContentPart {
    /// `text` or `image_url`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The text of a `text` part.
    #[serde(default)]
    pub text: Option<String>,
    /// The image of an `image_url` part: `{"url": …}`.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub image_url: Option<Value>,
}

impl InMessage {
    /// The content as JSON, for the image reader.
    pub(super) fn content_json(&self) -> Value {
        match &self.content {
            None => Value::Null,
            Some(InContent::Text(t)) => Value::String(t.clone()),
            Some(InContent::Parts(parts)) => Value::Array(
                parts
                    .iter()
                    .map(|p| {
                        serde_json::json!({"type": p.kind, "text": p.text, "image_url": p.image_url})
                    })
                    .collect(),
            ),
        }
    }
}

/// A call in an assistant message.
#[derive(Debug, Deserialize, ToSchema)]
pub struct InToolCall {
    /// The call's id, which the `tool` message answering it names.
    pub id: String,
    /// The function called.
    pub function: InCalled,
}

/// The function of a call.
#[derive(Debug, Deserialize, ToSchema)]
pub struct InCalled {
    /// Its name.
    pub name: String,
    /// Its arguments, JSON-encoded.
    #[serde(default)]
    pub arguments: String,
}

/// A request translated: the client's instructions, the conversation, the
/// settings and the client's tools.
pub(super) struct Translated {
    pub(super) instructions: String,
    pub(super) conversation: Vec<ChatMessage>,
    pub(super) options: GenerationOptions,
    pub(super) tools: Vec<ToolDefinition>,
}

impl CompletionRequest {
    /// Checks and translates the request for `chat`'s agent.
    pub(super) fn translate(&self, chat: &ChatService) -> Result<Translated, OpenAiError> {
        if self.functions.as_ref().is_some_and(|f| !f.is_empty()) {
            return Err(OpenAiError::invalid(
                "functions",
                "the legacy `functions` field is not supported: send `tools`",
            ));
        }
        if self.n.is_some_and(|n| n != 1) {
            return Err(OpenAiError::invalid("n", "only n = 1 is supported"));
        }
        let tools = client_tools(self.tools.as_deref().unwrap_or_default(), chat)?;
        let (instructions, conversation) = translate_messages(&self.messages)?;
        let options = GenerationOptions {
            top_p: self.top_p,
            stop: match &self.stop {
                None => Vec::new(),
                Some(Stop::One(s)) => vec![s.clone()],
                Some(Stop::Many(v)) => v.clone(),
            },
            seed: self.seed,
            presence_penalty: self.presence_penalty,
            frequency_penalty: self.frequency_penalty,
            response_format: response_format(self.response_format.as_ref())?,
            tool_choice: tool_choice(self.tool_choice.as_ref(), &tools)?,
            parallel_tool_calls: self.parallel_tool_calls,
        };
        Ok(Translated {
            instructions,
            conversation,
            options,
            tools,
        })
    }

    /// The answer's token cap, under either name.
    pub(super) fn max_tokens(&self) -> Option<u32> {
        self.max_completion_tokens.or(self.max_tokens)
    }
}

fn client_tools(tools: &[InTool], chat: &ChatService) -> Result<Vec<ToolDefinition>, OpenAiError> {
    let own = chat.agent().runner().registry();
    let mut out: Vec<ToolDefinition> = Vec::with_capacity(tools.len());
    for (i, tool) in tools.iter().enumerate() {
        let name = tool.function.name.trim();
        if tool.kind != "function" {
            return Err(OpenAiError::invalid(
                format!("tools[{i}].type"),
                format!("tool type `{}` is not supported (function)", tool.kind),
            ));
        }
        if name.is_empty() || own.get(name).is_some() || out.iter().any(|t| t.name == name) {
            return Err(OpenAiError::invalid(
                format!("tools[{i}].function.name"),
                format!(
                    "the tool name `{name}` is empty, repeated or one of the agent's own tools; rename it"
                ),
            ));
        }
        out.push(ToolDefinition {
            name: name.to_string(),
            description: tool.function.description.clone().unwrap_or_default(),
            parameters: tool
                .function
                .parameters
                .clone()
                .unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}})),
        });
    }
    Ok(out)
}

fn response_format(
    format: Option<&InResponseFormat>,
) -> Result<Option<ResponseFormat>, OpenAiError> {
    let Some(format) = format else {
        return Ok(None);
    };
    match (format.kind.as_str(), &format.json_schema) {
        ("text", _) => Ok(None),
        ("json_object", _) => Ok(Some(ResponseFormat::JsonObject)),
        ("json_schema", Some(schema)) => Ok(Some(ResponseFormat::JsonSchema {
            name: schema.name.clone(),
            schema: schema
                .schema
                .clone()
                .unwrap_or_else(|| serde_json::json!({"type": "object"})),
            strict: schema.strict,
        })),
        ("json_schema", None) => Err(OpenAiError::invalid(
            "response_format.json_schema",
            "a json_schema response_format needs its json_schema",
        )),
        (other, _) => Err(OpenAiError::invalid(
            "response_format.type",
            format!("response_format `{other}` is not supported (text, json_object, json_schema)"),
        )),
    }
}

fn tool_choice(
    choice: Option<&Value>,
    tools: &[ToolDefinition],
) -> Result<Option<ToolChoice>, OpenAiError> {
    let Some(choice) = choice else {
        return Ok(None);
    };
    let named = choice
        .pointer("/function/name")
        .and_then(Value::as_str)
        .map(str::to_string);
    match (choice.as_str(), named) {
        (Some("auto"), _) => Ok(Some(ToolChoice::Auto)),
        (Some("none"), _) => Ok(Some(ToolChoice::None)),
        (Some("required"), _) => Ok(Some(ToolChoice::Required)),
        (None, Some(name)) if tools.iter().any(|t| t.name == name) => {
            Ok(Some(ToolChoice::Tool(name)))
        }
        _ => Err(OpenAiError::invalid(
            "tool_choice",
            "tool_choice must be auto, none, required or {\"type\":\"function\",\"function\":{\"name\":…}} naming one of the request's tools",
        )),
    }
}

/// The request's `system`/`developer` text and the rest as chat messages;
/// each `tool` message must answer a call of the assistant message before it.
fn translate_messages(messages: &[InMessage]) -> Result<(String, Vec<ChatMessage>), OpenAiError> {
    let mut instructions = Vec::new();
    let mut conversation: Vec<ChatMessage> = Vec::new();
    let mut open_calls: Vec<ToolCall> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let text = text_of(m.content.as_ref()).ok_or_else(|| {
            OpenAiError::invalid(
                format!("messages[{i}].content"),
                format!("messages[{i}].content: only text and image_url parts are supported"),
            )
        })?;
        match m.role.as_str() {
            "system" | "developer" => instructions.push(text),
            "user" => conversation.push(ChatMessage::user(text)),
            "assistant" => {
                let calls: Vec<ToolCall> = m
                    .tool_calls
                    .iter()
                    .flatten()
                    .map(|c| ToolCall {
                        id: c.id.clone(),
                        name: c.function.name.clone(),
                        arguments: serde_json::from_str(&c.function.arguments)
                            .unwrap_or_else(|_| Value::String(c.function.arguments.clone())),
                    })
                    .collect();
                open_calls.clone_from(&calls);
                conversation.push(if calls.is_empty() {
                    ChatMessage::assistant(text)
                } else {
                    ChatMessage::assistant_tool_calls(text, calls)
                });
            }
            "tool" => {
                let id = m.tool_call_id.as_deref().unwrap_or_default();
                let Some(call) = open_calls.iter().find(|c| c.id == id) else {
                    return Err(OpenAiError::invalid(
                        format!("messages[{i}].tool_call_id"),
                        format!(
                            "messages[{i}]: tool_call_id `{id}` answers no call of the assistant message before it"
                        ),
                    ));
                };
                conversation.push(ChatMessage::tool_result(id, call.name.clone(), text));
            }
            other => {
                return Err(OpenAiError::invalid(
                    format!("messages[{i}].role"),
                    format!(
                        "messages[{i}].role `{other}` is not supported (system, developer, user, assistant, tool)"
                    ),
                ));
            }
        }
    }
    if !conversation.iter().any(|m| m.role == Role::User) {
        return Err(OpenAiError::invalid(
            "messages",
            "messages: at least one user message is needed",
        ));
    }
    Ok((instructions.join("\n\n"), conversation))
}

/// A message's text: a string, or text parts joined (image parts are read
/// by the image reader; `None`: other parts).
fn text_of(content: Option<&InContent>) -> Option<String> {
    match content {
        None => Some(String::new()),
        Some(InContent::Text(s)) => Some(s.clone()),
        Some(InContent::Parts(parts)) => parts
            .iter()
            .filter(|p| p.kind != "image_url")
            .map(|p| (p.kind == "text").then(|| p.text.clone()).flatten())
            .collect::<Option<Vec<_>>>()
            .map(|texts| texts.join("\n")),
    }
}
