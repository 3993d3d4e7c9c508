//! What goes to the model ([`Message`], [`Request`]) and what comes back ([`Completion`]).

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{IMAGE_TOKEN_ESTIMATE, ImagePart, ImageRecord, ToolCall, split_thinking};

/// Who wrote a [`Message`].
///
/// ```
/// use rlm_registry::llm::Role;
///
/// assert_eq!(Role::Assistant.as_str(), "assistant");
/// assert_eq!(serde_json::to_string(&Role::Tool).unwrap(), "\"tool\"");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions for the model (`"system"`).
    System,
    /// The user's turn (`"user"`).
    User,
    /// The model's earlier turn (`"assistant"`): text, tool calls, or both.
    Assistant,
    /// The result of one tool call (`"tool"`).
    Tool,
}

impl Role {
    /// The name on the wire: `system`, `user`, `assistant` or `tool`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One chat message, serialized the OpenAI way: `{"role", "content"}`, plus
/// `"tool_calls"` on an assistant turn that asks for tools and `"tool_call_id"` on a
/// tool result. The one message type of the crate: the client sends it, the RLM loop
/// keeps its conversation in it, and a trace records and reads it back.
///
/// ```
/// use rlm_registry::llm::{Message, Role, ToolCall};
///
/// let message = Message::user("What is 2 + 2?");
/// assert_eq!(message.role, Role::User);
/// assert_eq!(message.text(), "What is 2 + 2?");
/// assert_eq!(
///     serde_json::to_string(&message).unwrap(),
///     r#"{"role":"user","content":"What is 2 + 2?"}"#
/// );
///
/// let call = ToolCall { id: "c1".into(), name: "word_count".into(), arguments: r#"{"text":"a b"}"#.into() };
/// let json = serde_json::to_value(Message::assistant_tool_calls(None, vec![call])).unwrap();
/// assert_eq!(json["content"], serde_json::Value::Null);
/// assert_eq!(json["tool_calls"][0]["function"]["name"], "word_count");
/// let json = serde_json::to_value(Message::tool_result("c1", "2")).unwrap();
/// assert_eq!(json, serde_json::json!({"role": "tool", "content": "2", "tool_call_id": "c1"}));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// The text; `None` (`null` on the wire) for an assistant turn with only tool calls.
    #[serde(default)]
    pub content: Option<String>,
    /// The calls an assistant turn asked for (left out of the JSON when empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For a tool result: the call it answers (left out of the JSON when `None`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl Message {
    /// A text message with the given role.
    pub fn new(role: Role, content: impl Into<String>) -> Message {
        Message {
            role,
            content: Some(content.into()),
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }

    /// A system message.
    pub fn system(content: impl Into<String>) -> Message {
        Message::new(Role::System, content)
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Message {
        Message::new(Role::User, content)
    }

    /// An assistant text message.
    pub fn assistant(content: impl Into<String>) -> Message {
        Message::new(Role::Assistant, content)
    }

    /// An assistant turn asking for tool calls, with its text if it had any.
    pub fn assistant_tool_calls(content: Option<String>, calls: Vec<ToolCall>) -> Message {
        Message {
            role: Role::Assistant,
            content,
            tool_calls: calls,
            tool_call_id: None,
        }
    }

    /// The result of the tool call `id`.
    pub fn tool_result(id: impl Into<String>, content: impl Into<String>) -> Message {
        Message {
            tool_call_id: Some(id.into()),
            ..Message::new(Role::Tool, content)
        }
    }

    /// The text, or `""` for a message without one (tool calls only).
    pub fn text(&self) -> &str {
        self.content.as_deref().unwrap_or("")
    }
}

/// The tokens a window check keeps for the reply of a request without `max_tokens`
/// ([`Request::reply_reserve`]): room for a turn of code and some explanation. Servers
/// also reserve room for the reply (vLLM counts a request's `max_tokens`, llama.cpp its
/// `n_predict`), so a request that leaves none fails there anyway.
pub const DEFAULT_REPLY_RESERVE: u64 = 1024;

/// One chat completion request: the conversation and optional sampling settings.
///
/// A `Vec<Message>`, a `&str` or a `String` converts into a request (a string becomes
/// one user message), so `client.complete("Hi")` works.
///
/// ```
/// use rlm_registry::llm::{Message, Request};
///
/// let request = Request::new(vec![Message::system("Be terse."), Message::user("Hi")])
///     .with_temperature(0.0)
///     .with_max_tokens(64);
/// assert_eq!(request.messages.len(), 2);
///
/// let request: Request = "Summarize this".into();
/// assert_eq!(request.messages, vec![Message::user("Summarize this")]);
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Request {
    /// The conversation, oldest first.
    pub messages: Vec<Message>,
    /// Sampling temperature; the server's default when `None`.
    pub temperature: Option<f32>,
    /// The most tokens to generate; the server's default when `None`.
    pub max_tokens: Option<u32>,
    /// A model for this request only, instead of the configured one.
    pub model: Option<String>,
    /// Asks for a new sample: a [`CallCache`](super::CallCache) does not answer it from
    /// what it holds (it may store the new answer). Not part of what is sent.
    pub fresh: bool,
    /// Images for a vision model, sent with the first user message as `image_url`
    /// content parts ([`ImagePart`]); none for a plain text request.
    pub images: Vec<ImagePart>,
}

impl Request {
    /// A request for `messages` with the server's default settings.
    pub fn new(messages: Vec<Message>) -> Request {
        Request {
            messages,
            ..Request::default()
        }
    }

    /// Sets the sampling temperature.
    pub fn with_temperature(mut self, temperature: f32) -> Request {
        self.temperature = Some(temperature);
        self
    }

    /// Sets the most tokens to generate.
    pub fn with_max_tokens(mut self, max_tokens: u32) -> Request {
        self.max_tokens = Some(max_tokens);
        self
    }

    /// The tokens to keep free for the reply in the model's context window: the
    /// request's `max_tokens`, else [`DEFAULT_REPLY_RESERVE`]. What a window check adds
    /// to the prompt's tokens before it decides the request fits.
    ///
    /// ```
    /// use rlm_registry::llm::{DEFAULT_REPLY_RESERVE, Request};
    /// assert_eq!(Request::from("hi").reply_reserve(), DEFAULT_REPLY_RESERVE);
    /// assert_eq!(Request::from("hi").with_max_tokens(64).reply_reserve(), 64);
    /// ```
    pub fn reply_reserve(&self) -> u64 {
        self.max_tokens.map_or(DEFAULT_REPLY_RESERVE, u64::from)
    }

    /// Asks for a new sample, never an answer from a call cache.
    ///
    /// ```
    /// use rlm_registry::llm::Request;
    /// assert!(Request::from("Tell a joke").fresh_sample().fresh);
    /// assert!(!Request::from("Tell a joke").fresh);
    /// ```
    pub fn fresh_sample(mut self) -> Request {
        self.fresh = true;
        self
    }

    /// Sends `images` with the request's first user message.
    ///
    /// ```
    /// use rlm_registry::llm::{IMAGE_TOKEN_ESTIMATE, ImagePart, Request};
    ///
    /// let image = ImagePart::new(Some("a.png".into()), "image/png", vec![1u8])?;
    /// let request = Request::from("What is in this picture?").with_images(vec![image]);
    /// assert_eq!(request.image_tokens(), IMAGE_TOKEN_ESTIMATE);
    /// assert_eq!(request.image_records()[0].name, "a.png");
    /// # Ok::<(), String>(())
    /// ```
    pub fn with_images(mut self, images: Vec<ImagePart>) -> Request {
        self.images = images;
        self
    }

    /// The tokens counted for the request's images: [`IMAGE_TOKEN_ESTIMATE`] each.
    pub fn image_tokens(&self) -> u64 {
        IMAGE_TOKEN_ESTIMATE.saturating_mul(self.images.len() as u64)
    }

    /// What a trace keeps of the request's images, in order.
    pub fn image_records(&self) -> Vec<ImageRecord> {
        self.images.iter().map(ImagePart::record).collect()
    }

    /// Uses `model` for this request instead of the configured one.
    pub fn with_model(mut self, model: impl Into<String>) -> Request {
        self.model = Some(model.into());
        self
    }
}

impl From<Vec<Message>> for Request {
    fn from(messages: Vec<Message>) -> Request {
        Request::new(messages)
    }
}

impl From<Message> for Request {
    fn from(message: Message) -> Request {
        Request::new(vec![message])
    }
}

impl From<&str> for Request {
    fn from(prompt: &str) -> Request {
        Request::new(vec![Message::user(prompt)])
    }
}

impl From<String> for Request {
    fn from(prompt: String) -> Request {
        Request::new(vec![Message::user(prompt)])
    }
}

impl From<&String> for Request {
    fn from(prompt: &String) -> Request {
        Request::from(prompt.as_str())
    }
}

/// The model's answer to one [`Request`].
///
/// Token counts are the server's `usage.prompt_tokens` / `usage.completion_tokens`, or 0
/// when the server reports none.
///
/// ```
/// use rlm_registry::llm::Completion;
///
/// // What a scripted fake `Llm` might return:
/// let completion = Completion::new("4");
/// assert_eq!(completion.content, "4");
/// assert_eq!(completion.total_tokens(), 0);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Completion {
    /// `choices[0].message.content`.
    pub content: String,
    /// Tokens in the prompt, as reported by the server.
    pub prompt_tokens: u64,
    /// Tokens in the answer, as reported by the server; a reasoning model's thinking
    /// included.
    pub completion_tokens: u64,
    /// Of `completion_tokens`, those spent thinking
    /// (`usage.completion_tokens_details.reasoning_tokens`), when reported.
    pub reasoning_tokens: u64,
    /// The thinking a server's reasoning parser sent apart from the content
    /// (`choices[0].message.reasoning_content`, or `reasoning`). Inline thinking stays in
    /// `content`; [`Completion::answer`] and [`Completion::thinking`] read both.
    pub reasoning: Option<String>,
    /// The model that answered, as reported by the server.
    pub model: Option<String>,
    /// `choices[0].finish_reason` (`"stop"`, `"length"`, …), when reported.
    pub finish_reason: Option<String>,
    /// HTTP attempts it took (1 when the first one succeeded).
    pub attempts: u32,
    /// Wall time of the whole call, retries and waits included.
    pub elapsed: Duration,
    /// Answered by a [`CallCache`](super::CallCache), not the server: its tokens were
    /// spent by an earlier run and cost this one nothing.
    pub cached: bool,
    /// Answered by another worker's identical call, which this one waited for rather
    /// than send the request again (single-flight, see [`Cached`](super::Cached)): how
    /// long it waited. `cached` is true as well: the tokens were spent by that worker.
    pub waited: Option<Duration>,
    /// What the call cost in US dollars: the server's `usage.cost` when it reports one
    /// (OpenRouter does), else what a run's price table makes of the tokens; `None` when
    /// neither is known, and for a cached answer, which cost this run nothing.
    pub cost: Option<super::Cost>,
}

impl Completion {
    /// A completion with `content` and nothing else: for fakes and tests.
    pub fn new(content: impl Into<String>) -> Completion {
        Completion {
            content: content.into(),
            attempts: 1,
            ..Completion::default()
        }
    }

    /// Sets the token counts.
    pub fn with_tokens(mut self, prompt_tokens: u64, completion_tokens: u64) -> Completion {
        self.prompt_tokens = prompt_tokens;
        self.completion_tokens = completion_tokens;
        self
    }

    /// [`Completion::waited`] in whole milliseconds, as a trace records it.
    ///
    /// ```
    /// use std::time::Duration;
    /// use rlm_registry::llm::Completion;
    ///
    /// let mut completion = Completion::new("4");
    /// assert_eq!(completion.waited_ms(), None);
    /// completion.waited = Some(Duration::from_micros(480_700));
    /// assert_eq!(completion.waited_ms(), Some(480));
    /// ```
    pub fn waited_ms(&self) -> Option<u64> {
        self.waited
            .map(|waited| u64::try_from(waited.as_millis()).unwrap_or(u64::MAX))
    }

    /// `prompt_tokens + completion_tokens`.
    pub fn total_tokens(&self) -> u64 {
        self.prompt_tokens.saturating_add(self.completion_tokens)
    }

    /// The content without its inline thinking ([`split_thinking`]): what a sub-call
    /// returns and what the loop reads code from.
    ///
    /// ```
    /// use rlm_registry::llm::Completion;
    /// assert_eq!(Completion::new("<think>two?</think>\n2").answer(), "2");
    /// assert_eq!(Completion::new("2").answer(), "2");
    /// ```
    pub fn answer(&self) -> &str {
        split_thinking(&self.content).answer
    }

    /// All the reply's thinking: the reasoning field, then the inline thinking; `None`
    /// when there is neither. What a trace keeps as the reasoning.
    ///
    /// ```
    /// use rlm_registry::llm::Completion;
    /// let mut completion = Completion::new("<think>inline</think>2");
    /// assert_eq!(completion.thinking().as_deref(), Some("inline"));
    /// completion.reasoning = Some("apart".into());
    /// assert_eq!(completion.thinking().as_deref(), Some("apart\n\ninline"));
    /// assert_eq!(Completion::new("2").thinking(), None);
    /// ```
    pub fn thinking(&self) -> Option<String> {
        let inline = split_thinking(&self.content).thinking.map(str::trim);
        let apart = self.reasoning.as_deref().map(str::trim);
        match (
            apart.filter(|t| !t.is_empty()),
            inline.filter(|t| !t.is_empty()),
        ) {
            (Some(apart), Some(inline)) => Some(format!("{apart}\n\n{inline}")),
            (one, other) => one.or(other).map(str::to_string),
        }
    }
}
