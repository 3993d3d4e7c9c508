//! The LLM client: OpenAI-compatible chat completions over blocking HTTP,
//! for OpenAI, vLLM, llama.cpp server, Ollama and the like.
//!
//! - [`LlmConfig`]: base URL, model, API key, timeout, retries, backoff, concurrency;
//!   explicit or from the environment ([`LlmConfig::from_env`]: `RLM_BASE_URL` /
//!   `OPENAI_BASE_URL`, `RLM_MODEL`, `RLM_API_KEY` / `OPENAI_API_KEY`,
//!   `RLM_TIMEOUT_SECS`).
//! - [`LlmClient`]: [`complete`](LlmClient::complete) one request, with retries and
//!   exponential backoff on 429, 5xx, connection errors and timeouts (honouring
//!   `Retry-After`); [`complete_batch`](LlmClient::complete_batch) many at once, in
//!   order, with bounded concurrency.
//! - [`Usage`]: calls, failures, attempts and tokens, summed across every call of
//!   every client that shares it.
//! - [`LlmError`]: what went wrong, in words a model or a user can act on; a server's
//!   refusal of a request too long for its context window, in the wordings of OpenAI,
//!   vLLM, llama.cpp and SGLang, is [`LlmError::ContextLength`] (`context_length.rs`).
//! - [`Message`]: the one chat message, of plain completions, tool conversations
//!   ([`LlmClient::complete_with_tools`], [`ToolCall`], [`ToolCompletion`], for the
//!   dispatch loop in `tools`), the RLM loop and its traces.
//! - [`ImagePart`]: an image for a vision model, sent with a request's first user message
//!   as an `image_url` content part (a `data:` URL); [`ImageRecord`] is what a trace keeps
//!   of it (`image.rs`).
//! - [`CacheStore`] and [`Cached`]: answers kept in a store ([`CallCache`], a SQLite
//!   file, or [`RedisCache`], a Redis server; chosen by [`open_cache`]), so a request sent again costs nothing (`cache/`).
//! - [`Llm`]: the trait the RLM loop and the environment take, implemented by
//!   [`LlmClient`] and by any scripted fake; [`LlmLayer`]: a model in front of another
//!   (metering, logging, [`Cached`]), an [`Llm`] by one impl that forwards what the layer
//!   does not change (`layer.rs`).
//! - [`server_window`]: the context window the server reports for the model (vLLM's
//!   `max_model_len`, llama.cpp's `/props`, …), asked once when nothing gives one
//!   (`server_window.rs`).
//!
//! ```no_run
//! use rlm_registry::llm::{LlmClient, LlmConfig, Message};
//!
//! // RLM_BASE_URL=http://localhost:11434/v1 RLM_MODEL=llama3.2 for a local Ollama.
//! let client = LlmClient::new(LlmConfig::from_env()?)?;
//! let answer = client.complete(vec![Message::user("Name a prime number.")])?;
//! println!("{}", answer.content);
//! let usage = client.usage().snapshot();
//! println!("{} calls, {} tokens", usage.calls, usage.total_tokens());
//! # Ok::<(), rlm_registry::llm::LlmError>(())
//! ```

mod batch;
mod cache;
mod client;
mod config;
mod context_length;
mod error;
mod image;
mod layer;
mod message;
mod price;
mod server_window;
mod thinking;
mod tool_calls;
mod usage;

pub use batch::{map_concurrently, run_batch};
pub use cache::{
    CACHE_SCHEMA_VERSION, CONNECT_TIMEOUT, CacheError, CacheKey, CacheStats, CacheStore, Cached,
    CallCache, Claim, DEFAULT_CACHE_LEASE, DEFAULT_CACHE_MAX_MB, Lease, RESPONSE_TIMEOUT,
    RedisCache, decode_answer, encode_answer, inspect_cache, open_cache,
};
pub use client::LlmClient;
pub use config::{
    DEFAULT_BASE_URL, DEFAULT_INITIAL_BACKOFF, DEFAULT_MAX_BACKOFF, DEFAULT_MAX_CONCURRENCY,
    DEFAULT_MAX_RETRIES, DEFAULT_MODEL, DEFAULT_TIMEOUT, ENV_API_KEY, ENV_BASE_URL, ENV_MODEL,
    ENV_OPENAI_API_KEY, ENV_OPENAI_BASE_URL, ENV_TIMEOUT_SECS, LlmConfig, ModelInfo,
    ReasoningEffort,
};
pub use error::LlmError;
pub use image::{
    IMAGE_MIME_TYPES, IMAGE_TOKEN_ESTIMATE, INLINE_IMAGE_NAME, ImagePart, ImageRecord,
    MAX_IMAGE_BYTES, MAX_IMAGES_PER_CALL,
};
pub use layer::{BatchResults, LlmLayer};
pub use message::{Completion, DEFAULT_REPLY_RESERVE, Message, Request, Role};
pub use price::{Cost, Price, PriceTable, call_cost};
pub use server_window::{SERVER_WINDOW_TIMEOUT, server_window};
pub use thinking::{Thinking, split_thinking};
pub use tool_calls::{ToolCall, ToolCompletion};
pub use usage::{Usage, UsageSnapshot};

/// Something that answers chat completion requests: the HTTP [`LlmClient`], or a
/// scripted fake in tests. Shared across threads, hence `Send + Sync`.
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use rlm_registry::llm::{Completion, Llm, LlmError, Request};
///
/// /// Answers from a script, in order.
/// struct Scripted {
///     answers: Vec<&'static str>,
///     next: AtomicUsize,
/// }
///
/// impl Llm for Scripted {
///     fn complete(&self, _request: Request) -> Result<Completion, LlmError> {
///         let i = self.next.fetch_add(1, Ordering::Relaxed);
///         Ok(Completion::new(*self.answers.get(i).unwrap_or(&"FINAL(\"done\")")))
///     }
/// }
///
/// let llm: Box<dyn Llm> = Box::new(Scripted { answers: vec!["print(1)"], next: AtomicUsize::new(0) });
/// assert_eq!(llm.complete("go".into())?.content, "print(1)");
/// assert_eq!(llm.complete("go".into())?.content, "FINAL(\"done\")");
/// # Ok::<(), LlmError>(())
/// ```
pub trait Llm: Send + Sync {
    /// Answers one request.
    fn complete(&self, request: Request) -> Result<Completion, LlmError>;

    /// Answers every request, in order. The default runs up to
    /// [`DEFAULT_MAX_CONCURRENCY`] of them at once with [`run_batch`].
    fn complete_batch(&self, requests: Vec<Request>) -> Vec<Result<Completion, LlmError>> {
        run_batch(self, requests, DEFAULT_MAX_CONCURRENCY)
    }

    /// How many requests [`Llm::complete_batch`] sends at once: [`DEFAULT_MAX_CONCURRENCY`]
    /// unless the implementation says otherwise ([`LlmClient`] gives its configuration's).
    fn max_concurrency(&self) -> usize {
        DEFAULT_MAX_CONCURRENCY
    }

    /// Answers every request, in order, at most `max_concurrency` at once: a batch whose
    /// caller chose its own concurrency (`parallel_map`'s `concurrency` option). The
    /// default runs [`Llm::complete`] through [`run_batch`]; an implementation that does
    /// something for a batch as a whole (reserving its budget first) overrides it.
    ///
    /// ```
    /// use rlm_registry::llm::{Completion, DEFAULT_MAX_CONCURRENCY, Llm, LlmError, Request};
    ///
    /// struct Echo;
    /// impl Llm for Echo {
    ///     fn complete(&self, request: Request) -> Result<Completion, LlmError> {
    ///         Ok(Completion::new(request.messages[0].text()))
    ///     }
    /// }
    ///
    /// assert_eq!(Echo.max_concurrency(), DEFAULT_MAX_CONCURRENCY);
    /// let answers = Echo.complete_batch_at(vec!["a".into(), "b".into()], 2);
    /// assert_eq!(answers[1].as_ref().unwrap().content, "b");
    /// ```
    fn complete_batch_at(
        &self,
        requests: Vec<Request>,
        max_concurrency: usize,
    ) -> Vec<Result<Completion, LlmError>> {
        run_batch(self, requests, max_concurrency)
    }

    /// Which model answers, and at which server, for a run's record; `None` (the
    /// default) when the implementation cannot say, as a scripted fake cannot.
    /// [`LlmClient`] answers from its configuration, never with the API key.
    fn model_info(&self) -> Option<ModelInfo> {
        None
    }

    /// The answer a call cache holds for `request`, if any, without asking the model:
    /// what a budget too small for a fresh call still lets through, since a cached answer
    /// spends nothing. `None` (the default) for a model with no cache in front of it.
    ///
    /// ```
    /// use rlm_registry::llm::{Completion, Llm, LlmError, Request};
    ///
    /// struct Echo;
    /// impl Llm for Echo {
    ///     fn complete(&self, request: Request) -> Result<Completion, LlmError> {
    ///         Ok(Completion::new(request.messages[0].text()))
    ///     }
    /// }
    /// assert!(Echo.cached_answer(&"hi".into()).is_none());
    /// ```
    fn cached_answer(&self, request: &Request) -> Option<Completion> {
        let _ = request;
        None
    }
}
