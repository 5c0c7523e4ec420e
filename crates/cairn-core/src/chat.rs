//! Chat message types shared by the LLM providers and the agent loop.
//!
//! These are provider-neutral: the OpenAI-compatible and Anthropic clients
//! translate to and from their wire formats, the agent loop builds and keeps
//! conversations out of them, and the store persists them as JSON.

use serde::{Deserialize, Serialize};

use crate::image::ImagePart;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions for the model.
    System,
    /// The person (or a routine speaking for them).
    User,
    /// The model.
    Assistant,
    /// The result of a tool call, answering one assistant tool call.
    Tool,
}

/// One tool invocation requested by the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Provider-assigned id that the tool result must echo.
    pub id: String,
    /// The tool's name as the model wrote it (aliases are resolved by the registry).
    pub name: String,
    /// The arguments, as a JSON value (an object for every well-formed call).
    pub arguments: serde_json::Value,
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// Who wrote it.
    pub role: Role,
    /// The text; may be empty for an assistant message that only calls tools.
    #[serde(default)]
    pub content: String,
    /// Tool calls requested by an assistant message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For a tool message: the id of the call it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// For a tool message: the tool's name (some providers require it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Images the person attached to a user message, by reference (the
    /// bytes are stored apart; see [`crate::image`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<ImagePart>,
}

impl ChatMessage {
    fn plain(role: Role, content: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            name: None,
            images: Vec::new(),
        }
    }

    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self::plain(Role::System, content)
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::plain(Role::User, content)
    }

    /// A user message with images attached.
    pub fn user_with_images(content: impl Into<String>, images: Vec<ImagePart>) -> Self {
        Self {
            images,
            ..Self::plain(Role::User, content)
        }
    }

    /// An assistant text message.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::plain(Role::Assistant, content)
    }

    /// An assistant message carrying tool calls (and optional accompanying text).
    pub fn assistant_tool_calls(content: impl Into<String>, tool_calls: Vec<ToolCall>) -> Self {
        Self {
            tool_calls,
            ..Self::plain(Role::Assistant, content)
        }
    }

    /// The result of one tool call.
    pub fn tool_result(
        call_id: impl Into<String>,
        tool_name: impl Into<String>,
        content: impl Into<String>,
    ) -> Self {
        Self {
            tool_call_id: Some(call_id.into()),
            name: Some(tool_name.into()),
            ..Self::plain(Role::Tool, content)
        }
    }
}

/// A tool as offered to the model: name, description and JSON-schema parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    /// Canonical tool name.
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: serde_json::Value,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_through_json() {
        let call = ToolCall {
            id: "call_1".into(),
            name: "shell".into(),
            arguments: serde_json::json!({"command": "ls"}),
        };
        let messages = vec![
            ChatMessage::system("be brief"),
            ChatMessage::user("list files"),
            ChatMessage::assistant_tool_calls("", vec![call]),
            ChatMessage::tool_result("call_1", "shell", "a.txt"),
            ChatMessage::assistant("a.txt"),
        ];
        let json = serde_json::to_string(&messages).unwrap();
        let back: Vec<ChatMessage> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, messages);
        assert!(json.contains(r#""role":"tool""#));
    }
}
