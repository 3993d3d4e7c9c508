//! The messages of the Agent Client Protocol this agent reads and writes, as typed serde
//! structs: the subset it uses, in ACP's JSON shapes (protocol version 1).
//!
//! Written here rather than taken from `agent-client-protocol-schema`: that crate turns on
//! serde_json's `preserve_order`, and cargo would then turn it on for the whole crate,
//! changing the key order of every JSON text the crate writes (traces, `--json`
//! listings, the digests over them).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

/// The protocol version this agent speaks.
pub(crate) const PROTOCOL_VERSION: u16 = 1;

/// `initialize`'s answer.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct InitializeResponse {
    pub protocol_version: u16,
    pub agent_capabilities: AgentCapabilities,
    pub agent_info: Implementation,
    pub auth_methods: Vec<Json>,
}

/// What the agent can do.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AgentCapabilities {
    pub load_session: bool,
    pub prompt_capabilities: PromptCapabilities,
    /// All false: MCP servers a client offers are not connected.
    pub mcp_capabilities: McpCapabilities,
}

/// The content kinds a prompt may hold besides text and resource links.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PromptCapabilities {
    pub image: bool,
    pub audio: bool,
    pub embedded_context: bool,
}

/// The MCP transports the agent would connect to: none.
#[derive(Debug, Serialize)]
pub(crate) struct McpCapabilities {
    pub http: bool,
    pub sse: bool,
}

/// A program's name and version.
#[derive(Debug, Serialize)]
pub(crate) struct Implementation {
    pub name: String,
    pub version: String,
}

/// `session/new`'s parameters.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NewSessionRequest {
    /// The folder the session works in: its context unless the agent was given one.
    pub cwd: PathBuf,
    /// Offered MCP servers; read so that a bad list is an error, and not connected.
    #[serde(default)]
    #[allow(dead_code)]
    pub mcp_servers: Vec<Json>,
}

/// `session/load`'s parameters.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LoadSessionRequest {
    pub session_id: String,
    /// The folder the session works in, as for `session/new`.
    pub cwd: PathBuf,
    /// Offered MCP servers; read so that a bad list is an error, and not connected.
    #[serde(default)]
    #[allow(dead_code)]
    pub mcp_servers: Vec<Json>,
}

/// `session/prompt`'s parameters.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PromptRequest {
    pub session_id: String,
    pub prompt: Vec<ContentBlock>,
}

/// `session/cancel`'s parameters.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CancelNotification {
    pub session_id: String,
}

/// A piece of a prompt or of a message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum ContentBlock {
    /// Text.
    Text { text: String },
    /// A file or resource the client points to.
    #[serde(rename_all = "camelCase")]
    ResourceLink { uri: String, name: String },
    /// A resource's content, embedded.
    Resource { resource: EmbeddedResource },
    /// Images and audio, which the capabilities refuse.
    #[serde(other)]
    Unsupported,
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> ContentBlock {
        ContentBlock::Text { text: text.into() }
    }
}

/// An embedded resource: its text, or (a binary one) its base64 `blob`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct EmbeddedResource {
    pub uri: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blob: Option<String>,
}

/// Why a prompt's turn ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum StopReason {
    /// The agent answered.
    EndTurn,
    /// A budget (tokens, calls, time, cost) or the model's window is spent.
    MaxTokens,
    /// The iteration cap was reached.
    MaxTurnRequests,
    /// The client cancelled the prompt.
    Cancelled,
}

/// `session/prompt`'s answer.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PromptResponse {
    pub stop_reason: StopReason,
}

/// `session/update`'s parameters.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SessionNotification<'a> {
    pub session_id: &'a str,
    pub update: &'a SessionUpdate,
}

/// What a `session/update` says.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "sessionUpdate", rename_all = "snake_case")]
pub(crate) enum SessionUpdate {
    /// A block of an earlier prompt, streamed again while a session loads.
    UserMessageChunk {
        content: ContentBlock,
        #[serde(rename = "messageId")]
        message_id: String,
    },
    /// The model's prose, and the final answer. Each message has an id of its own (a
    /// turn's prose, the answer), so a client that keeps the last message (verifiers'
    /// reply) keeps the answer alone.
    AgentMessageChunk {
        content: ContentBlock,
        #[serde(rename = "messageId")]
        message_id: String,
    },
    /// A reasoning model's thinking.
    AgentThoughtChunk {
        content: ContentBlock,
        #[serde(rename = "messageId")]
        message_id: String,
    },
    /// A code block, as it starts running.
    ToolCall(ToolCall),
    /// A code block's end: its status and output.
    ToolCallUpdate(ToolCallUpdate),
}

/// A code block shown as a tool call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ToolCall {
    pub tool_call_id: String,
    pub title: String,
    pub kind: &'static str,
    pub status: ToolCallStatus,
    /// `{"code": …}`.
    pub raw_input: Json,
}

/// A tool call's new status, with its output.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ToolCallUpdate {
    pub tool_call_id: String,
    pub status: ToolCallStatus,
    pub content: Vec<ToolCallContent>,
}

/// A tool call's content.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum ToolCallContent {
    /// Plain content: the block's output.
    Content { content: ContentBlock },
}

/// Where a tool call is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ToolCallStatus {
    InProgress,
    Completed,
    Failed,
}
