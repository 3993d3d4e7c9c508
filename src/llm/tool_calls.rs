//! OpenAI tool calling: the calls a model asks for ([`ToolCall`]) and its answer
//! ([`ToolCompletion`]), for
//! [`LlmClient::complete_with_tools`](super::LlmClient::complete_with_tools). The
//! messages of a tool conversation are plain [`Message`](super::Message)s.
//!
//! [`ToolCompletion`] is kept apart from [`Completion`](super::Completion) so that plain
//! completions keep their simple shape.

use std::time::Duration;

use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};

/// One tool call the model asked for, serialized the OpenAI way:
/// `{"id", "type": "function", "function": {"name", "arguments"}}`.
///
/// ```
/// use rlm_registry::llm::ToolCall;
///
/// let call = ToolCall { id: "c1".into(), name: "f".into(), arguments: "{}".into() };
/// let json = serde_json::to_string(&call).unwrap();
/// assert_eq!(json, r#"{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}"#);
/// assert_eq!(serde_json::from_str::<ToolCall>(&json).unwrap(), call);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, Deserialize)]
#[serde(from = "WireToolCall")]
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

/// The shape a [`ToolCall`] is read from (its `type` is always `function`).
#[derive(Deserialize)]
struct WireToolCall {
    id: String,
    function: WireFunction,
}

#[derive(Deserialize)]
struct WireFunction {
    name: String,
    #[serde(default)]
    arguments: String,
}

impl From<WireToolCall> for ToolCall {
    fn from(wire: WireToolCall) -> ToolCall {
        ToolCall {
            id: wire.id,
            name: wire.function.name,
            arguments: wire.function.arguments,
        }
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
