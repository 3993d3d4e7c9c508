//! [`LlmClient`]: the blocking HTTP client for OpenAI-compatible chat completions,
//! with retries, backoff and usage accounting.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hash, Hasher};
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;

use super::context_length::{self, Refusal};
use super::error::snippet;
use super::image::WireMessages;
use super::{
    Completion, Cost, Llm, LlmConfig, LlmError, Message, ModelInfo, ReasoningEffort, Request,
    ToolCall, ToolCompletion, Usage, batch,
};

/// The largest response body read; beyond, the call fails (chat completions are far
/// smaller).
const MAX_BODY_BYTES: u64 = 16 * 1024 * 1024;

/// An OpenAI-compatible chat completions client: blocking, thread-safe, cheap to clone
/// (clones share the connection pool and the [`Usage`]).
///
/// Each call posts `{model, messages, temperature?, max_tokens?, reasoning_effort?}` to
/// `{base_url}/chat/completions` and returns `choices[0].message.content` with the
/// reported token usage, and a reasoning model's `reasoning_content` (or `reasoning`)
/// and reasoning tokens. The reply limit is the request's `max_tokens`, else
/// [`LlmConfig::max_reply_tokens`]; a server that refuses `max_tokens` and asks for
/// `max_completion_tokens` (OpenAI's reasoning models) gets that name instead, from
/// then on. HTTP 429, 5xx, refused/reset/dropped connections and timeouts
/// are retried up to [`LlmConfig::max_retries`] times, waiting `initial_backoff`,
/// then twice that, and so on (minus up to 20% jitter), never more than `max_backoff`;
/// a `Retry-After: <seconds>` header on the response replaces the backoff, capped the
/// same way. Other 4xx statuses and malformed responses are not retried. Every call,
/// successful or not, is added to [`LlmClient::usage`].
///
/// ```no_run
/// use rlm_registry::llm::{LlmClient, LlmConfig, Message};
///
/// let client = LlmClient::new(LlmConfig::new("http://localhost:11434/v1", "llama3.2"))?;
/// let answer = client.complete(vec![
///     Message::system("Answer with one word."),
///     Message::user("Capital of France?"),
/// ])?;
/// println!("{} ({} tokens)", answer.content, answer.total_tokens());
///
/// let answers = client.complete_batch(vec!["2 + 2?", "3 + 3?"]);
/// assert_eq!(answers.len(), 2);
/// println!("calls so far: {}", client.usage().snapshot().calls);
/// # Ok::<(), rlm_registry::llm::LlmError>(())
/// ```
#[derive(Clone)]
pub struct LlmClient {
    config: LlmConfig,
    endpoint: String,
    agent: ureq::Agent,
    usage: Arc<Usage>,
    /// The server refused `max_tokens` and asked for `max_completion_tokens` (OpenAI's
    /// reasoning models): learnt once, shared by the clones.
    completion_tokens_name: Arc<AtomicBool>,
}

impl std::fmt::Debug for LlmClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmClient")
            .field("config", &self.config)
            .field("usage", &self.usage.snapshot())
            .finish_non_exhaustive()
    }
}

/// The request body on the wire.
#[derive(Serialize)]
struct WireRequest<'a> {
    model: &'a str,
    messages: WireMessages<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_effort: Option<ReasoningEffort>,
}

/// The request body of a tool conversation on the wire.
#[derive(Serialize)]
struct WireToolRequest<'a> {
    model: &'a str,
    messages: &'a [Message],
    #[serde(skip_serializing_if = "<[Value]>::is_empty")]
    tools: &'a [Value],
}

/// Why one attempt failed, before deciding whether to try again.
enum Failure {
    Status {
        status: u16,
        body: String,
        retry_after: Option<Duration>,
    },
    Timeout,
    Transport {
        message: String,
        retryable: bool,
    },
    Malformed {
        reason: String,
        snippet: String,
    },
    /// The server said the request does not fit its context window.
    ContextLength {
        refusal: Refusal,
        body: String,
    },
}

impl Failure {
    fn retryable(&self) -> bool {
        match self {
            Failure::Status { status, .. } => is_retryable_status(*status),
            Failure::Timeout => true,
            Failure::Transport { retryable, .. } => *retryable,
            Failure::Malformed { .. } | Failure::ContextLength { .. } => false,
        }
    }

    fn into_error(self, attempts: u32, timeout: Duration) -> LlmError {
        match self {
            Failure::Status { status, body, .. } => LlmError::Status {
                status,
                body,
                attempts,
                retried: is_retryable_status(status),
            },
            Failure::Timeout => LlmError::Timeout { timeout, attempts },
            Failure::Transport { message, retryable } => LlmError::Transport {
                message,
                attempts,
                retried: retryable,
            },
            Failure::Malformed { reason, snippet } => LlmError::MalformedResponse {
                reason,
                snippet,
                attempts,
            },
            Failure::ContextLength { refusal, body } => LlmError::ContextLength {
                prompt_tokens: refusal.prompt_tokens,
                window: refusal.window,
                body,
                attempts,
            },
        }
    }
}

fn is_retryable_status(status: u16) -> bool {
    status == 429 || (500..=599).contains(&status)
}

impl LlmClient {
    /// A client for `config`. Fails with [`LlmError::Config`] when the base URL is not
    /// `http(s)://…`, the model is empty, the timeout is zero or the API key holds
    /// characters an HTTP header cannot carry. Sends nothing.
    ///
    /// ```
    /// use rlm_registry::llm::{LlmClient, LlmConfig};
    ///
    /// let client = LlmClient::new(LlmConfig::new("http://127.0.0.1:8080/v1", "m"))?;
    /// assert_eq!(client.usage().snapshot().calls, 0);
    /// assert!(LlmClient::new(LlmConfig::new("localhost:8080", "m")).is_err());
    /// # Ok::<(), rlm_registry::llm::LlmError>(())
    /// ```
    pub fn new(config: LlmConfig) -> Result<LlmClient, LlmError> {
        config.validate()?;
        if let Some(key) = &config.api_key
            && !key.bytes().all(|b| b.is_ascii_graphic() || b == b' ')
        {
            return Err(LlmError::Config(
                "the API key holds characters an HTTP header cannot carry \
                 (control characters or non-ASCII)"
                    .to_string(),
            ));
        }
        let agent_config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(config.timeout))
            .max_redirects(0)
            .user_agent(concat!("rlm-registry/", env!("CARGO_PKG_VERSION")))
            .build();
        Ok(LlmClient {
            endpoint: config.endpoint(),
            agent: ureq::Agent::new_with_config(agent_config),
            usage: Arc::new(Usage::new()),
            completion_tokens_name: Arc::new(AtomicBool::new(false)),
            config,
        })
    }

    /// A client configured from the environment; see [`LlmConfig::from_env`].
    ///
    /// ```no_run
    /// let client = rlm_registry::llm::LlmClient::from_env()?;
    /// # Ok::<(), rlm_registry::llm::LlmError>(())
    /// ```
    pub fn from_env() -> Result<LlmClient, LlmError> {
        LlmClient::new(LlmConfig::from_env()?)
    }

    /// This client, adding its calls to `usage` instead of its own counter: give every
    /// client of a session the same `Arc<Usage>` and sub-calls sum into one total.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use rlm_registry::llm::{LlmClient, LlmConfig, Usage};
    ///
    /// let session = Arc::new(Usage::new());
    /// let root = LlmClient::new(LlmConfig::new("http://127.0.0.1:8080/v1", "big"))?
    ///     .with_usage(Arc::clone(&session));
    /// let sub = LlmClient::new(LlmConfig::new("http://127.0.0.1:8080/v1", "small"))?
    ///     .with_usage(Arc::clone(&session));
    /// assert!(Arc::ptr_eq(root.usage(), sub.usage()));
    /// # Ok::<(), rlm_registry::llm::LlmError>(())
    /// ```
    pub fn with_usage(mut self, usage: Arc<Usage>) -> LlmClient {
        self.usage = usage;
        self
    }

    /// The running totals this client adds to.
    pub fn usage(&self) -> &Arc<Usage> {
        &self.usage
    }

    /// The configuration.
    pub fn config(&self) -> &LlmConfig {
        &self.config
    }

    /// Sends one chat completion request and waits for the answer, retrying as
    /// described on [`LlmClient`]. Accepts a [`Request`], a `Vec<Message>` or a prompt
    /// string (one user message).
    ///
    /// ```no_run
    /// use rlm_registry::llm::{LlmClient, LlmConfig, LlmError, Request};
    ///
    /// let client = LlmClient::new(LlmConfig::from_env()?)?;
    /// match client.complete(Request::from("Say hi").with_max_tokens(5)) {
    ///     Ok(completion) => println!("{}", completion.content),
    ///     Err(error @ LlmError::Timeout { .. }) => eprintln!("slow server: {error}"),
    ///     Err(error) => eprintln!("{error}"),
    /// }
    /// # Ok::<(), LlmError>(())
    /// ```
    pub fn complete(&self, request: impl Into<Request>) -> Result<Completion, LlmError> {
        self.call(request.into())
    }

    /// Sends every request, at most [`LlmConfig::max_concurrency`] at once, and returns
    /// the results in the order of `requests`. One failure does not affect the others.
    ///
    /// ```no_run
    /// use rlm_registry::llm::{LlmClient, LlmConfig};
    ///
    /// let client = LlmClient::new(LlmConfig::from_env()?.with_max_concurrency(8))?;
    /// let prompts: Vec<String> = (1..=20).map(|i| format!("Spell {i} in words.")).collect();
    /// for (prompt, result) in prompts.iter().zip(client.complete_batch(prompts.clone())) {
    ///     match result {
    ///         Ok(completion) => println!("{prompt} → {}", completion.content),
    ///         Err(error) => println!("{prompt} → {error}"),
    ///     }
    /// }
    /// # Ok::<(), rlm_registry::llm::LlmError>(())
    /// ```
    pub fn complete_batch<R: Into<Request>>(
        &self,
        requests: Vec<R>,
    ) -> Vec<Result<Completion, LlmError>> {
        let requests = requests.into_iter().map(Into::into).collect();
        batch::run_batch(self, requests, self.config.max_concurrency)
    }

    fn call(&self, request: Request) -> Result<Completion, LlmError> {
        let started = Instant::now();
        let limit = request.max_tokens.or(self.config.max_reply_tokens);
        let send = |completion_tokens_name: bool| {
            let wire = WireRequest {
                model: request.model.as_deref().unwrap_or(&self.config.model),
                messages: WireMessages {
                    messages: &request.messages,
                    images: &request.images,
                },
                temperature: request.temperature,
                max_tokens: limit.filter(|_| !completion_tokens_name),
                max_completion_tokens: limit.filter(|_| completion_tokens_name),
                reasoning_effort: self.config.reasoning_effort,
            };
            self.exchange(&self.encode(&wire)?, parse_completion, |c| {
                (c.prompt_tokens, c.completion_tokens)
            })
        };
        let renamed = self.completion_tokens_name.load(Ordering::Relaxed);
        let result = match send(renamed) {
            Err(error) if limit.is_some() && !renamed && wants_completion_tokens_name(&error) => {
                self.completion_tokens_name.store(true, Ordering::Relaxed);
                send(true)
            }
            result => result,
        };
        let (mut completion, attempts) = result.inspect_err(|_| self.usage.record_failure())?;
        self.usage.record_reasoning(completion.reasoning_tokens);
        completion.attempts = attempts;
        completion.elapsed = started.elapsed();
        Ok(completion)
    }

    /// Sends a conversation with OpenAI `tools` definitions (as
    /// [`tools::export`](fn@crate::tools::export) makes them) and returns the model's text
    /// or the tool calls it asks for, retrying like [`LlmClient::complete`].
    ///
    /// ```no_run
    /// use rlm_registry::llm::{LlmClient, Message};
    /// use rlm_registry::tools::{export, ToolFormat};
    ///
    /// let client = LlmClient::from_env()?;
    /// let (tools, _) = export(rlm_registry::Registry::baked().specs(), ToolFormat::OpenAi);
    /// let answer = client.complete_with_tools(
    ///     &[Message::user("How many words in 'a b c'?")],
    ///     tools.as_array().unwrap(),
    /// )?;
    /// for call in &answer.tool_calls {
    ///     println!("{}({})", call.name, call.arguments);
    /// }
    /// # Ok::<(), rlm_registry::llm::LlmError>(())
    /// ```
    pub fn complete_with_tools(
        &self,
        messages: &[Message],
        tools: &[Value],
    ) -> Result<ToolCompletion, LlmError> {
        let started = Instant::now();
        let wire = WireToolRequest {
            model: &self.config.model,
            messages,
            tools,
        };
        let body = self.encode(&wire)?;
        let (mut completion, attempts) = self
            .exchange(&body, parse_tool_completion, |c| {
                (c.prompt_tokens, c.completion_tokens)
            })
            .inspect_err(|_| self.usage.record_failure())?;
        completion.attempts = attempts;
        completion.elapsed = started.elapsed();
        Ok(completion)
    }

    fn encode(&self, wire: &impl Serialize) -> Result<Vec<u8>, LlmError> {
        serde_json::to_vec(wire)
            .map_err(|error| LlmError::Config(format!("cannot encode the request: {error}")))
    }

    /// Posts `body` until a response parses or the retries run out; returns the parsed
    /// response and the attempts it took. A success is counted in the usage here; a
    /// failure by the caller, which may still try the call another way.
    fn exchange<T>(
        &self,
        body: &[u8],
        parse: impl Fn(&[u8]) -> Result<T, Failure>,
        tokens: impl Fn(&T) -> (u64, u64),
    ) -> Result<(T, u32), LlmError> {
        let max_attempts = self.config.max_retries.saturating_add(1);
        let mut attempt: u32 = 0;
        loop {
            attempt += 1;
            self.usage.record_attempt();
            let failure = match self.attempt(body).and_then(|bytes| parse(&bytes)) {
                Ok(parsed) => {
                    let (prompt, completion) = tokens(&parsed);
                    self.usage.record_success(prompt, completion);
                    return Ok((parsed, attempt));
                }
                Err(failure) => failure,
            };
            if !failure.retryable() || attempt >= max_attempts {
                return Err(failure.into_error(attempt, self.config.timeout));
            }
            let wait = match &failure {
                Failure::Status {
                    retry_after: Some(wait),
                    ..
                } => (*wait).min(self.config.max_backoff),
                _ => backoff(
                    self.config.initial_backoff,
                    self.config.max_backoff,
                    attempt,
                ),
            };
            thread::sleep(wait);
        }
    }

    /// One HTTP exchange: the 2xx body, or why not.
    fn attempt(&self, body: &[u8]) -> Result<Vec<u8>, Failure> {
        let mut builder = self
            .agent
            .post(&self.endpoint)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json");
        if let Some(key) = &self.config.api_key {
            builder = builder.header("Authorization", format!("Bearer {key}"));
        }
        let mut response = builder
            .send(body)
            .map_err(|error| self.transport_failure(error))?;
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|value| value.to_str().ok())
            .and_then(parse_retry_after);
        let read = response
            .body_mut()
            .with_config()
            .limit(MAX_BODY_BYTES)
            .read_to_vec();
        if !(200..=299).contains(&status) {
            // The status says what happened; the body, if readable, says why.
            let text = read
                .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
                .unwrap_or_default();
            // Whatever the status (llama.cpp has answered 500), a request too long for
            // the window fails again if retried.
            if let Some(refusal) = context_length::recognise(&text) {
                return Err(Failure::ContextLength {
                    refusal,
                    body: snippet(&text),
                });
            }
            return Err(Failure::Status {
                status,
                body: snippet(&text),
                retry_after,
            });
        }
        read.map_err(|error| self.transport_failure(error))
    }

    fn transport_failure(&self, error: ureq::Error) -> Failure {
        let endpoint = &self.endpoint;
        match error {
            ureq::Error::Timeout(_) => Failure::Timeout,
            ureq::Error::Io(error)
                if matches!(
                    error.kind(),
                    io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
                ) =>
            {
                Failure::Timeout
            }
            ureq::Error::Io(error) => Failure::Transport {
                message: format!("the connection to {endpoint} failed: {error}"),
                retryable: true,
            },
            ureq::Error::ConnectionFailed => Failure::Transport {
                message: format!("could not connect to {endpoint}"),
                retryable: true,
            },
            ureq::Error::HostNotFound => Failure::Transport {
                message: format!("the host of {endpoint} was not found"),
                retryable: true,
            },
            ureq::Error::Protocol(error) => Failure::Transport {
                message: format!("the server at {endpoint} broke the HTTP protocol: {error}"),
                retryable: true,
            },
            ureq::Error::BodyExceedsLimit(limit) => Failure::Transport {
                message: format!("the response from {endpoint} is larger than {limit} bytes"),
                retryable: false,
            },
            other => Failure::Transport {
                message: format!("the request to {endpoint} failed: {other}"),
                retryable: false,
            },
        }
    }
}

impl Llm for LlmClient {
    fn complete(&self, request: Request) -> Result<Completion, LlmError> {
        self.call(request)
    }

    fn complete_batch(&self, requests: Vec<Request>) -> Vec<Result<Completion, LlmError>> {
        batch::run_batch(self, requests, self.config.max_concurrency)
    }

    fn max_concurrency(&self) -> usize {
        self.config.max_concurrency
    }

    fn model_info(&self) -> Option<ModelInfo> {
        Some(self.config.model_info())
    }
}

/// A `Retry-After` in seconds (`"2"`, `"0.5"`); `None` for an HTTP date or garbage, in
/// which case the backoff applies.
fn parse_retry_after(value: &str) -> Option<Duration> {
    let seconds: f64 = value.trim().parse().ok()?;
    (seconds.is_finite() && seconds >= 0.0)
        .then(|| Duration::from_secs_f64(seconds.min(24.0 * 3600.0)))
}

/// The wait after failed attempt number `attempt` (1-based): `initial × 2^(attempt-1)`,
/// capped at `max`, minus up to 20% jitter so that concurrent callers spread out.
fn backoff(initial: Duration, max: Duration, attempt: u32) -> Duration {
    let doublings = attempt.saturating_sub(1).min(30);
    let base = initial.saturating_mul(1u32 << doublings).min(max);
    base.mul_f64(1.0 - 0.2 * random_fraction())
}

/// A number in `[0, 1)`, different on every call; only for jitter.
fn random_fraction() -> f64 {
    let mut hasher = RandomState::new().build_hasher();
    thread::current().id().hash(&mut hasher);
    Instant::now().hash(&mut hasher);
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// Whether `error` is a server's refusal of `max_tokens` that names
/// `max_completion_tokens` instead, as OpenAI's reasoning models word it ("Unsupported
/// parameter: 'max_tokens' is not supported with this model. Use
/// 'max_completion_tokens' instead.").
fn wants_completion_tokens_name(error: &LlmError) -> bool {
    matches!(error, LlmError::Status { status: 400, body, .. }
        if body.contains("max_completion_tokens") && body.contains("max_tokens"))
}

/// Reads a chat completion out of a 2xx body.
fn parse_completion(bytes: &[u8]) -> Result<Completion, Failure> {
    let text = String::from_utf8_lossy(bytes);
    let malformed = |reason: String| Failure::Malformed {
        reason,
        snippet: snippet(&text),
    };
    let value: Value = serde_json::from_slice(bytes)
        .map_err(|error| malformed(format!("the body is not JSON ({error})")))?;
    if let Some(error) = value.get("error").filter(|error| !error.is_null()) {
        let message = error
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| error.to_string());
        return Err(malformed(format!(
            "the server sent an error instead of a completion: {message}"
        )));
    }
    let choice = match value.get("choices") {
        None => return Err(malformed("the JSON has no `choices`".to_string())),
        Some(Value::Array(choices)) => match choices.first() {
            Some(choice) => choice,
            None => return Err(malformed("`choices` is empty".to_string())),
        },
        Some(_) => return Err(malformed("`choices` is not an array".to_string())),
    };
    let Some(message) = choice.get("message").filter(|m| m.is_object()) else {
        return Err(malformed(
            "`choices[0]` has no `message` object".to_string(),
        ));
    };
    let reasoning = ["reasoning_content", "reasoning"]
        .iter()
        .find_map(|field| message.get(*field).and_then(Value::as_str))
        .filter(|reasoning| !reasoning.is_empty())
        .map(str::to_string);
    let content = match message.get("content") {
        Some(Value::String(content)) => content.clone(),
        // A reasoning model cut while thinking has thought, but not answered yet.
        None | Some(Value::Null) if reasoning.is_some() => String::new(),
        // Some servers send content as parts: [{"type": "text", "text": "…"}].
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .collect(),
        other => {
            let what = if other.is_some_and(Value::is_null) {
                "is null"
            } else if other.is_some() {
                "is not a string"
            } else {
                "is missing"
            };
            let refusal = message
                .get("refusal")
                .and_then(Value::as_str)
                .map(|refusal| format!(" (the model refused: {refusal})"))
                .unwrap_or_default();
            return Err(malformed(format!(
                "`choices[0].message.content` {what}{refusal}"
            )));
        }
    };
    let usage = value.get("usage");
    let tokens = |name: &str| usage_tokens(usage, name);
    Ok(Completion {
        content,
        prompt_tokens: tokens("prompt_tokens"),
        completion_tokens: tokens("completion_tokens"),
        reasoning_tokens: usage_tokens(
            usage.and_then(|usage| usage.get("completion_tokens_details")),
            "reasoning_tokens",
        ),
        reasoning,
        model: string_field(&value, "model"),
        finish_reason: string_field(choice, "finish_reason"),
        attempts: 1,
        elapsed: Duration::ZERO,
        cached: false,
        waited: None,
        cost: usage_cost(usage),
    })
}

/// Reads the answer to a request with tools: tool calls when
/// `choices[0].message.tool_calls` is a non-empty array, otherwise a text completion
/// (with the same checks as [`parse_completion`]).
fn parse_tool_completion(bytes: &[u8]) -> Result<ToolCompletion, Failure> {
    let value: Option<Value> = serde_json::from_slice(bytes).ok();
    let choice = value
        .as_ref()
        .and_then(|value| value.get("choices"))
        .and_then(|choices| choices.get(0));
    let calls = choice
        .and_then(|choice| choice.get("message"))
        .and_then(|message| message.get("tool_calls"))
        .and_then(Value::as_array)
        .filter(|calls| !calls.is_empty());
    let (Some(value), Some(choice), Some(calls)) = (&value, choice, calls) else {
        let completion = parse_completion(bytes)?;
        return Ok(ToolCompletion {
            content: Some(completion.content),
            tool_calls: Vec::new(),
            prompt_tokens: completion.prompt_tokens,
            completion_tokens: completion.completion_tokens,
            finish_reason: completion.finish_reason,
            attempts: 1,
            elapsed: Duration::ZERO,
        });
    };
    let text = String::from_utf8_lossy(bytes);
    let mut tool_calls = Vec::with_capacity(calls.len());
    for (i, call) in calls.iter().enumerate() {
        let function = call.get("function");
        let name = function.and_then(|f| f.get("name")).and_then(Value::as_str);
        let Some(name) = name else {
            return Err(Failure::Malformed {
                reason: format!("`choices[0].message.tool_calls[{i}]` has no `function.name`"),
                snippet: snippet(&text),
            });
        };
        let arguments = match function.and_then(|f| f.get("arguments")) {
            Some(Value::String(arguments)) => arguments.clone(),
            None | Some(Value::Null) => "{}".to_string(),
            // Some servers send the arguments as an object rather than a string.
            Some(other) => other.to_string(),
        };
        let id = call
            .get("id")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| format!("call_{i}"));
        tool_calls.push(ToolCall {
            id,
            name: name.to_string(),
            arguments,
        });
    }
    let usage = value.get("usage");
    let tokens = |name: &str| usage_tokens(usage, name);
    Ok(ToolCompletion {
        content: choice
            .get("message")
            .and_then(|m| m.get("content"))
            .and_then(Value::as_str)
            .filter(|content| !content.is_empty())
            .map(str::to_string),
        tool_calls,
        prompt_tokens: tokens("prompt_tokens"),
        completion_tokens: tokens("completion_tokens"),
        finish_reason: string_field(choice, "finish_reason"),
        attempts: 1,
        elapsed: Duration::ZERO,
    })
}

/// `usage.<name>` of a response, 0 when the server does not report it.
fn usage_tokens(usage: Option<&Value>, name: &str) -> u64 {
    usage
        .and_then(|usage| usage.get(name))
        .and_then(Value::as_u64)
        .unwrap_or(0)
}

/// `usage.cost` in US dollars, as OpenRouter reports it: `None` when the server sends
/// none, or sends something that is not an amount (a string, a negative number), so that
/// a price table, if any, counts the call instead.
fn usage_cost(usage: Option<&Value>) -> Option<Cost> {
    let usd = usage?.get("cost")?.as_f64()?;
    Cost::from_usd(usd).ok()
}

/// A string field of a JSON object, if present.
fn string_field(object: &Value, name: &str) -> Option<String> {
    object.get(name).and_then(Value::as_str).map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(body: &str) -> String {
        match parse_completion(body.as_bytes()) {
            Err(Failure::Malformed { reason, .. }) => reason,
            Ok(completion) => panic!("parsed: {completion:?}"),
            Err(_) => panic!("not a malformed-response failure"),
        }
    }

    #[test]
    fn parses_a_completion() {
        let body = r#"{"model":"m","choices":[{"message":{"role":"assistant","content":"hi"},
            "finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":2}}"#;
        let completion = parse_completion(body.as_bytes()).ok().unwrap();
        assert_eq!(completion.content, "hi");
        assert_eq!(
            (completion.prompt_tokens, completion.completion_tokens),
            (7, 2)
        );
        assert_eq!(completion.model.as_deref(), Some("m"));
        assert_eq!(completion.finish_reason.as_deref(), Some("stop"));
    }

    #[test]
    fn reads_the_servers_cost_only_when_it_is_an_amount() {
        let cost = |value: &str| {
            let body = format!(
                r#"{{"choices":[{{"message":{{"content":"4"}}}}],"usage":{{"prompt_tokens":1,"cost":{value}}}}}"#
            );
            parse_completion(body.as_bytes())
                .ok()
                .and_then(|c| c.cost)
                .map(Cost::usd)
        };
        assert_eq!(cost("0.0025"), Some(0.0025));
        assert_eq!(cost("0"), Some(0.0));
        for ignored in ["\"0.01\"", "-1", "null", "{\"total\": 1}", "[1]"] {
            assert_eq!(cost(ignored), None, "{ignored}");
        }
    }

    #[test]
    fn tolerates_missing_usage_and_content_parts() {
        let body = r#"{"choices":[{"message":{"content":[{"type":"text","text":"a"},
            {"type":"text","text":"b"}]}}],"usage":{"prompt_tokens":-1}}"#;
        let completion = parse_completion(body.as_bytes()).ok().unwrap();
        assert_eq!(completion.content, "ab");
        assert_eq!(completion.total_tokens(), 0);
    }

    #[test]
    fn says_what_is_missing() {
        assert!(reason("<html>").starts_with("the body is not JSON"));
        assert_eq!(reason("{}"), "the JSON has no `choices`");
        assert_eq!(reason(r#"{"choices":[]}"#), "`choices` is empty");
        assert_eq!(reason(r#"{"choices":{}}"#), "`choices` is not an array");
        assert_eq!(
            reason(r#"{"choices":[{}]}"#),
            "`choices[0]` has no `message` object"
        );
        assert_eq!(
            reason(r#"{"choices":[{"message":{"content":null,"refusal":"no"}}]}"#),
            "`choices[0].message.content` is null (the model refused: no)"
        );
        assert!(reason(r#"{"error":{"message":"quota"}}"#).ends_with("quota"));
    }

    #[test]
    fn backoff_doubles_within_the_cap_with_jitter() {
        let initial = Duration::from_millis(100);
        let max = Duration::from_millis(350);
        for _ in 0..50 {
            let first = backoff(initial, max, 1);
            assert!(
                first <= initial && first >= initial.mul_f64(0.8),
                "{first:?}"
            );
            let second = backoff(initial, max, 2);
            assert!(second <= 2 * initial && second >= (2 * initial).mul_f64(0.8));
            assert!(backoff(initial, max, 3) <= max);
            assert!(backoff(initial, max, u32::MAX) <= max);
        }
    }

    #[test]
    fn retry_after_is_seconds_only() {
        assert_eq!(parse_retry_after("2"), Some(Duration::from_secs(2)));
        assert_eq!(parse_retry_after("0"), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
        assert_eq!(parse_retry_after("-3"), None);
        assert_eq!(parse_retry_after("1e400"), None);
    }
}
