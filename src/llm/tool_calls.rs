//! OpenAI tool calling: the messages of a tool conversation ([`ChatMessage`]), the
//! calls a model asks for ([`ToolCall`]) and its answer ([`ToolCompletion`]), for
//! [`LlmClient::complete_with_tools`](super::LlmClient::complete_with_tools).
//!
//! Kept apart from [`Message`] and [`Completion`](super::Completion) so that plain
//! completions keep their simple shape.

use std::time::Duration;

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};

use super::{Message, Role};

/// Who wrote a [`ChatMessage`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ChatRole {
    /// `"system"`.
    System,
    /// `"user"`.
    User,
    /// `"assistant"`: text, tool calls, or both.
    Assistant,
    /// `"tool"`: the result of one tool call.
    Tool,
}

/// One tool call the model asked for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ToolCall {
    /// The call's id, echoed in the result message.
    pub id: String,
    /// The tool name.
    pub name: String,
    /// The arguments, as the model wrote them (a JSON object, normally).
    pub arguments: String,
}

impl Serialize for ToolCall {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Function<'a> {
            name: &'a str,
            arguments: &'a str,
        }
        let mut map = serializer.serialize_map(Some(3))?;
        map.serialize_entry("id", &self.id)?;
        map.serialize_entry("type", "function")?;
        map.serialize_entry(
            "function",
            &Function {
                name: &self.name,
                arguments: &self.arguments,
            },
        )?;
        map.end()
    }
}

/// One message of a tool conversation, serialized the OpenAI way:
/// `{"role", "content", "tool_calls"?, "tool_call_id"?}`.
///
/// ```
/// use rlm_registry::llm::{ChatMessage, ToolCall};
///
/// let call = ToolCall { id: "c1".into(), name: "word_count".into(), arguments: r#"{"text":"a b"}"#.into() };
/// let json = serde_json::to_value(ChatMessage::assistant_tool_calls(None, vec![call])).unwrap();
/// assert_eq!(json["tool_calls"][0]["function"]["name"], "word_count");
/// let json = serde_json::to_value(ChatMessage::tool_result("c1", "2")).unwrap();
/// assert_eq!(json, serde_json::json!({"role": "tool", "content": "2", "tool_call_id": "c1"}));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct ChatMessage {
    /// Who wrote it.
    pub role: ChatRole,
    /// The text; `null` for an assistant turn with only tool calls.
    pub content: Option<String>,
    /// The calls an assistant turn asked for.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For a tool result: the call it answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl ChatMessage {
    fn text(role: ChatRole, content: impl Into<String>) -> ChatMessage {
        ChatMessage {
            role,
            content: Some(content.into()),
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }

    /// A system message.
    pub fn system(content: impl Into<String>) -> ChatMessage {
        ChatMessage::text(ChatRole::System, content)
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> ChatMessage {
        ChatMessage::text(ChatRole::User, content)
    }

    /// An assistant text message.
    pub fn assistant(content: impl Into<String>) -> ChatMessage {
        ChatMessage::text(ChatRole::Assistant, content)
    }

    /// An assistant turn asking for tool calls.
    pub fn assistant_tool_calls(content: Option<String>, calls: Vec<ToolCall>) -> ChatMessage {
        ChatMessage {
            role: ChatRole::Assistant,
            content,
            tool_calls: calls,
            tool_call_id: None,
        }
    }

    /// The result of the tool call `id`.
    pub fn tool_result(id: impl Into<String>, content: impl Into<String>) -> ChatMessage {
        ChatMessage {
            role: ChatRole::Tool,
            content: Some(content.into()),
            tool_calls: Vec::new(),
            tool_call_id: Some(id.into()),
        }
    }
}

impl From<Message> for ChatMessage {
    fn from(message: Message) -> ChatMessage {
        let role = match message.role {
            Role::System => ChatRole::System,
            Role::User => ChatRole::User,
            Role::Assistant => ChatRole::Assistant,
        };
        ChatMessage::text(role, message.content)
    }
}

/// The model's answer to a request with tools: text, tool calls, or both.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ToolCompletion {
    /// `choices[0].message.content`, if any.
    pub content: Option<String>,
    /// `choices[0].message.tool_calls`.
    pub tool_calls: Vec<ToolCall>,
    /// Tokens in the prompt, as reported by the server.
    pub prompt_tokens: u64,
    /// Tokens in the answer, as reported by the server.
    pub completion_tokens: u64,
    /// `choices[0].finish_reason`, when reported.
    pub finish_reason: Option<String>,
    /// HTTP attempts it took.
    pub attempts: u32,
    /// Wall time of the whole call.
    pub elapsed: Duration,
}

impl ToolCompletion {
    /// A text answer: for fakes and tests.
    pub fn text(content: impl Into<String>) -> ToolCompletion {
        ToolCompletion {
            content: Some(content.into()),
            attempts: 1,
            ..ToolCompletion::default()
        }
    }

    /// An answer asking for `calls`: for fakes and tests.
    pub fn calls(calls: Vec<ToolCall>) -> ToolCompletion {
        ToolCompletion {
            tool_calls: calls,
            attempts: 1,
            ..ToolCompletion::default()
        }
    }
}
