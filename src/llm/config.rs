//! [`LlmConfig`]: where the server is, which model, which key, and how patient to be.

use std::fmt;
use std::time::Duration;

use super::LlmError;

/// Environment variable for the server's base URL (the part before `/chat/completions`).
/// Falls back to [`ENV_OPENAI_BASE_URL`], then to [`DEFAULT_BASE_URL`].
pub const ENV_BASE_URL: &str = "RLM_BASE_URL";
/// Fallback for [`ENV_BASE_URL`], as set for the OpenAI SDKs.
pub const ENV_OPENAI_BASE_URL: &str = "OPENAI_BASE_URL";
/// Environment variable for the model name. Defaults to [`DEFAULT_MODEL`].
pub const ENV_MODEL: &str = "RLM_MODEL";
/// Environment variable for the API key, sent as `Authorization: Bearer …`.
/// Falls back to [`ENV_OPENAI_API_KEY`]; optional (local servers need none).
pub const ENV_API_KEY: &str = "RLM_API_KEY";
/// Fallback for [`ENV_API_KEY`], as set for the OpenAI SDKs.
pub const ENV_OPENAI_API_KEY: &str = "OPENAI_API_KEY";
/// Environment variable for the timeout of one HTTP attempt, in seconds (decimals
/// allowed). Defaults to [`DEFAULT_TIMEOUT`] (120 s).
pub const ENV_TIMEOUT_SECS: &str = "RLM_TIMEOUT_SECS";

/// The base URL used when none is configured: OpenAI's API.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// The model used when none is configured.
pub const DEFAULT_MODEL: &str = "gpt-4o-mini";
/// The timeout of one HTTP attempt when none is configured.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// Retries after the first attempt, by default (so at most 4 attempts).
pub const DEFAULT_MAX_RETRIES: u32 = 3;
/// The wait before the first retry, by default; it doubles on each further retry.
pub const DEFAULT_INITIAL_BACKOFF: Duration = Duration::from_millis(500);
/// The longest wait between two attempts, by default, for the backoff and for a
/// server's `Retry-After` alike.
pub const DEFAULT_MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Requests in flight at once in a batch, by default. 32 lets a batch of 32 prompts
/// take about one call's latency rather than two.
pub const DEFAULT_MAX_CONCURRENCY: usize = 32;

/// How to reach an OpenAI-compatible chat completions server (OpenAI, vLLM, llama.cpp
/// server, Ollama, …) and how patient to be with it.
///
/// Build one explicitly with [`LlmConfig::new`] and the `with_*` methods, or from the
/// environment with [`LlmConfig::from_env`]:
///
/// | variable | meaning | default |
/// |---|---|---|
/// | `RLM_BASE_URL` (else `OPENAI_BASE_URL`) | base URL, before `/chat/completions` | `https://api.openai.com/v1` |
/// | `RLM_MODEL` | model name | `gpt-4o-mini` |
/// | `RLM_API_KEY` (else `OPENAI_API_KEY`) | bearer token; optional | none |
/// | `RLM_TIMEOUT_SECS` | timeout of one attempt, seconds | `120` |
///
/// An empty variable counts as unset. `Debug` never prints the API key.
///
/// ```
/// use std::time::Duration;
/// use rlm_registry::llm::LlmConfig;
///
/// let config = LlmConfig::new("http://localhost:8080/v1", "qwen2.5-7b-instruct")
///     .with_timeout(Duration::from_secs(30))
///     .with_max_retries(5);
/// assert_eq!(config.api_key, None);
/// assert_eq!(config.endpoint(), "http://localhost:8080/v1/chat/completions");
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct LlmConfig {
    /// Base URL, e.g. `https://api.openai.com/v1` or `http://localhost:11434/v1`;
    /// requests go to `{base_url}/chat/completions`.
    pub base_url: String,
    /// The model name sent with every request (a [`Request`](super::Request) may
    /// override it).
    pub model: String,
    /// Sent as `Authorization: Bearer {api_key}` when set; no header when `None`.
    pub api_key: Option<String>,
    /// The timeout of one HTTP attempt, from connecting to reading the whole body.
    pub timeout: Duration,
    /// Retries after the first attempt on HTTP 429, 5xx, connection errors and
    /// timeouts. `0` means one attempt only.
    pub max_retries: u32,
    /// The wait before the first retry; it doubles on each further retry (with a
    /// little jitter), up to `max_backoff`.
    pub initial_backoff: Duration,
    /// The longest wait between two attempts, for the backoff and for a server's
    /// `Retry-After` alike.
    pub max_backoff: Duration,
    /// Requests in flight at once in [`LlmClient::complete_batch`](super::LlmClient::complete_batch)
    /// (at least 1).
    pub max_concurrency: usize,
    /// The most tokens a reply may take, sent with every request that sets none of its
    /// own: as `max_tokens`, or as `max_completion_tokens` to a server that refuses
    /// `max_tokens` (OpenAI's reasoning models). The server's default when `None`.
    pub max_reply_tokens: Option<u32>,
    /// How hard a reasoning model thinks, sent as `reasoning_effort` with every request
    /// (gpt-oss on vLLM or Ollama, OpenAI's reasoning models); left out when `None`.
    pub reasoning_effort: Option<ReasoningEffort>,
}

/// How hard a reasoning model thinks before it answers: the request's
/// `reasoning_effort`.
///
/// ```
/// use rlm_registry::llm::ReasoningEffort;
///
/// let effort: ReasoningEffort = "low".parse()?;
/// assert_eq!(effort, ReasoningEffort::Low);
/// assert_eq!(effort.to_string(), "low");
/// assert!("extreme".parse::<ReasoningEffort>().unwrap_err().contains("low, medium, high"));
/// # Ok::<(), String>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReasoningEffort {
    /// Think briefly.
    Low,
    /// The usual.
    Medium,
    /// Think at length.
    High,
}

impl ReasoningEffort {
    /// The values accepted, with what each means, as the command line lists them.
    pub const CHOICES: [(&'static str, &'static str); 3] = [
        ("low", "Think briefly: fewer tokens, faster turns"),
        ("medium", "The server's usual"),
        ("high", "Think at length"),
    ];

    /// The value on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            ReasoningEffort::Low => "low",
            ReasoningEffort::Medium => "medium",
            ReasoningEffort::High => "high",
        }
    }
}

impl fmt::Display for ReasoningEffort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for ReasoningEffort {
    type Err = String;

    fn from_str(text: &str) -> Result<ReasoningEffort, String> {
        match text.trim().to_ascii_lowercase().as_str() {
            "low" => Ok(ReasoningEffort::Low),
            "medium" => Ok(ReasoningEffort::Medium),
            "high" => Ok(ReasoningEffort::High),
            _ => Err(format!(
                "`{text}` is not a reasoning effort (expected one of {})",
                ReasoningEffort::CHOICES.map(|(name, _)| name).join(", ")
            )),
        }
    }
}

impl LlmConfig {
    /// A configuration for `base_url` and `model`, without an API key, with the
    /// default timeout, retries, backoff and concurrency.
    ///
    /// ```
    /// use rlm_registry::llm::LlmConfig;
    ///
    /// let config = LlmConfig::new("http://127.0.0.1:8000/v1", "my-model").with_api_key("sk-test");
    /// assert_eq!(config.api_key.as_deref(), Some("sk-test"));
    /// ```
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> LlmConfig {
        LlmConfig {
            base_url: base_url.into(),
            model: model.into(),
            api_key: None,
            timeout: DEFAULT_TIMEOUT,
            max_retries: DEFAULT_MAX_RETRIES,
            initial_backoff: DEFAULT_INITIAL_BACKOFF,
            max_backoff: DEFAULT_MAX_BACKOFF,
            max_concurrency: DEFAULT_MAX_CONCURRENCY,
            max_reply_tokens: None,
            reasoning_effort: None,
        }
    }

    /// The configuration from the process environment: `RLM_BASE_URL` (else
    /// `OPENAI_BASE_URL`), `RLM_MODEL`, `RLM_API_KEY` (else `OPENAI_API_KEY`) and
    /// `RLM_TIMEOUT_SECS`; see [`LlmConfig::from_lookup`].
    ///
    /// ```no_run
    /// use rlm_registry::llm::{LlmClient, LlmConfig};
    ///
    /// let client = LlmClient::new(LlmConfig::from_env()?)?;
    /// # Ok::<(), rlm_registry::llm::LlmError>(())
    /// ```
    pub fn from_env() -> Result<LlmConfig, LlmError> {
        LlmConfig::from_lookup(|name| std::env::var(name).ok())
    }

    /// The configuration from `lookup`, which maps a variable name to its value
    /// (`std::env::var` in [`LlmConfig::from_env`]; a map in tests). Empty values count
    /// as unset. Fails with [`LlmError::Config`] when `RLM_TIMEOUT_SECS` is not a
    /// positive number of seconds.
    ///
    /// ```
    /// use std::collections::HashMap;
    /// use std::time::Duration;
    /// use rlm_registry::llm::LlmConfig;
    ///
    /// let env = HashMap::from([
    ///     ("OPENAI_BASE_URL", "http://localhost:11434/v1"),
    ///     ("RLM_MODEL", "llama3.2"),
    ///     ("RLM_TIMEOUT_SECS", "45"),
    /// ]);
    /// let config = LlmConfig::from_lookup(|name| env.get(name).map(|v| v.to_string()))?;
    /// assert_eq!(config.base_url, "http://localhost:11434/v1");
    /// assert_eq!(config.model, "llama3.2");
    /// assert_eq!(config.api_key, None);
    /// assert_eq!(config.timeout, Duration::from_secs(45));
    /// # Ok::<(), rlm_registry::llm::LlmError>(())
    /// ```
    pub fn from_lookup<F>(lookup: F) -> Result<LlmConfig, LlmError>
    where
        F: Fn(&str) -> Option<String>,
    {
        let get = |name: &str| {
            lookup(name)
                .map(|value| value.trim().to_string())
                .filter(|value| !value.is_empty())
        };
        let base_url = get(ENV_BASE_URL)
            .or_else(|| get(ENV_OPENAI_BASE_URL))
            .unwrap_or_else(|| DEFAULT_BASE_URL.to_string());
        let model = get(ENV_MODEL).unwrap_or_else(|| DEFAULT_MODEL.to_string());
        let api_key = get(ENV_API_KEY).or_else(|| get(ENV_OPENAI_API_KEY));
        let timeout = match get(ENV_TIMEOUT_SECS) {
            None => DEFAULT_TIMEOUT,
            Some(value) => parse_seconds(&value).ok_or_else(|| {
                LlmError::Config(format!(
                    "{ENV_TIMEOUT_SECS} must be a positive number of seconds, got `{value}`"
                ))
            })?,
        };
        let mut config = LlmConfig::new(base_url, model).with_timeout(timeout);
        config.api_key = api_key;
        Ok(config)
    }

    /// Sets the API key (sent as `Authorization: Bearer …`).
    pub fn with_api_key(mut self, api_key: impl Into<String>) -> LlmConfig {
        self.api_key = Some(api_key.into());
        self
    }

    /// Sets the timeout of one HTTP attempt.
    pub fn with_timeout(mut self, timeout: Duration) -> LlmConfig {
        self.timeout = timeout;
        self
    }

    /// Sets the number of retries after the first attempt.
    pub fn with_max_retries(mut self, max_retries: u32) -> LlmConfig {
        self.max_retries = max_retries;
        self
    }

    /// Sets the first backoff and the cap on any wait between attempts.
    ///
    /// ```
    /// use std::time::Duration;
    /// use rlm_registry::llm::LlmConfig;
    ///
    /// let config = LlmConfig::new("http://localhost:8080/v1", "m")
    ///     .with_backoff(Duration::from_millis(100), Duration::from_secs(5));
    /// assert_eq!(config.max_backoff, Duration::from_secs(5));
    /// ```
    pub fn with_backoff(mut self, initial: Duration, max: Duration) -> LlmConfig {
        self.initial_backoff = initial;
        self.max_backoff = max;
        self
    }

    /// Sets how many requests of a batch may be in flight at once (at least 1).
    pub fn with_max_concurrency(mut self, max_concurrency: usize) -> LlmConfig {
        self.max_concurrency = max_concurrency.max(1);
        self
    }

    /// Sets the most tokens a reply may take, for requests that set none
    /// ([`LlmConfig::max_reply_tokens`]).
    ///
    /// ```
    /// use rlm_registry::llm::{LlmConfig, ReasoningEffort};
    ///
    /// let config = LlmConfig::new("http://localhost:8080/v1", "qwen3-8b")
    ///     .with_max_reply_tokens(2048)
    ///     .with_reasoning_effort(ReasoningEffort::Low);
    /// assert_eq!(config.model_info().max_reply_tokens, Some(2048));
    /// ```
    pub fn with_max_reply_tokens(mut self, max_reply_tokens: u32) -> LlmConfig {
        self.max_reply_tokens = Some(max_reply_tokens);
        self
    }

    /// Sets the reasoning effort sent with every request
    /// ([`LlmConfig::reasoning_effort`]).
    pub fn with_reasoning_effort(mut self, effort: ReasoningEffort) -> LlmConfig {
        self.reasoning_effort = Some(effort);
        self
    }

    /// The URL requests are posted to: `{base_url}/chat/completions`.
    ///
    /// ```
    /// use rlm_registry::llm::LlmConfig;
    ///
    /// let config = LlmConfig::new("https://api.openai.com/v1/", "gpt-4o-mini");
    /// assert_eq!(config.endpoint(), "https://api.openai.com/v1/chat/completions");
    /// ```
    pub fn endpoint(&self) -> String {
        format!("{}/chat/completions", self.base_url.trim_end_matches('/'))
    }

    /// The model and the base URL, for a run's record: the URL without any credentials
    /// (a `user:password@` in it) nor query or fragment, and never the API key.
    ///
    /// ```
    /// use rlm_registry::llm::LlmConfig;
    ///
    /// let config = LlmConfig::new("https://user:secret@llm.example/v1?key=k", "m").with_api_key("sk-1");
    /// let info = config.model_info();
    /// assert_eq!(info.model, "m");
    /// assert_eq!(info.base_url, "https://llm.example/v1");
    /// ```
    pub fn model_info(&self) -> ModelInfo {
        ModelInfo {
            model: self.model.clone(),
            base_url: without_credentials(self.base_url.trim()),
            max_reply_tokens: self.max_reply_tokens,
            reasoning_effort: self.reasoning_effort,
        }
    }

    /// Checks what can be checked before any request: an `http(s)://` base URL, a
    /// non-empty model, a non-zero timeout.
    pub(crate) fn validate(&self) -> Result<(), LlmError> {
        let url = self.base_url.trim();
        let lower = url.to_ascii_lowercase();
        let rest = lower
            .strip_prefix("http://")
            .or_else(|| lower.strip_prefix("https://"));
        match rest {
            Some(host) if !host.is_empty() && !host.starts_with('/') => {}
            _ => {
                return Err(LlmError::Config(format!(
                    "the base URL must look like `http(s)://host[:port]/path`, got `{url}`"
                )));
            }
        }
        if self.model.trim().is_empty() {
            return Err(LlmError::Config("the model name is empty".to_string()));
        }
        if self.timeout.is_zero() {
            return Err(LlmError::Config("the timeout must be positive".to_string()));
        }
        Ok(())
    }
}

/// Which model answers, at which server, and the settings the client adds to every
/// request: what a run's record names and a call cache's key includes
/// ([`Llm::model_info`](super::Llm::model_info)). Never holds a credential.
///
/// ```
/// use rlm_registry::llm::ModelInfo;
/// let info = ModelInfo::new("qwen3-8b", "http://localhost:8080/v1");
/// assert_eq!((info.max_reply_tokens, info.reasoning_effort), (None, None));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ModelInfo {
    /// The model name sent with the requests.
    pub model: String,
    /// The server's base URL, without credentials, query or fragment.
    pub base_url: String,
    /// [`LlmConfig::max_reply_tokens`]: the reply limit of requests that set none.
    pub max_reply_tokens: Option<u32>,
    /// [`LlmConfig::reasoning_effort`].
    pub reasoning_effort: Option<ReasoningEffort>,
}

impl ModelInfo {
    /// The model `model` at `base_url`, with no reply limit nor reasoning effort.
    pub fn new(model: impl Into<String>, base_url: impl Into<String>) -> ModelInfo {
        ModelInfo {
            model: model.into(),
            base_url: base_url.into(),
            ..ModelInfo::default()
        }
    }
}

/// `url` without a `user:password@` before its host, and without its query and fragment
/// (where some servers take a key).
fn without_credentials(url: &str) -> String {
    let url = url.split(['?', '#']).next().unwrap_or_default();
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    format!("{scheme}://{host}{path}")
}

impl fmt::Debug for LlmConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LlmConfig")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("timeout", &self.timeout)
            .field("max_retries", &self.max_retries)
            .field("initial_backoff", &self.initial_backoff)
            .field("max_backoff", &self.max_backoff)
            .field("max_concurrency", &self.max_concurrency)
            .field("max_reply_tokens", &self.max_reply_tokens)
            .field("reasoning_effort", &self.reasoning_effort)
            .finish()
    }
}

/// A positive, finite number of seconds, at most a year (beyond, `Duration` math is
/// pointless and `from_secs_f64` could panic).
pub(crate) fn parse_seconds(text: &str) -> Option<Duration> {
    let seconds: f64 = text.trim().parse().ok()?;
    (seconds.is_finite() && seconds > 0.0 && seconds <= 365.0 * 24.0 * 3600.0)
        .then(|| Duration::from_secs_f64(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_parse_strictly() {
        assert_eq!(parse_seconds("2"), Some(Duration::from_secs(2)));
        assert_eq!(parse_seconds(" 0.5 "), Some(Duration::from_millis(500)));
        for bad in ["0", "-1", "abc", "NaN", "inf", "1e300", ""] {
            assert_eq!(parse_seconds(bad), None, "{bad}");
        }
    }

    #[test]
    fn validation_rejects_bad_urls_and_models() {
        assert!(
            LlmConfig::new("http://localhost:1/v1", "m")
                .validate()
                .is_ok()
        );
        for url in ["localhost:8080", "ftp://x", "http://", "https:///v1", ""] {
            assert!(LlmConfig::new(url, "m").validate().is_err(), "{url}");
        }
        assert!(LlmConfig::new("http://x", " ").validate().is_err());
    }

    #[test]
    fn the_recorded_base_url_has_no_credentials() {
        for (url, recorded) in [
            ("http://127.0.0.1:8080/v1", "http://127.0.0.1:8080/v1"),
            ("https://u:p@host/v1", "https://host/v1"),
            ("https://u@host", "https://host"),
            ("https://host/v1?api-key=k#x", "https://host/v1"),
            ("https://host/a@b", "https://host/a@b"),
        ] {
            assert_eq!(without_credentials(url), recorded, "{url}");
        }
    }

    #[test]
    fn debug_redacts_the_key() {
        let config = LlmConfig::new("http://x", "m").with_api_key("sk-secret");
        let debug = format!("{config:?}");
        assert!(!debug.contains("sk-secret"), "{debug}");
        assert!(debug.contains("<redacted>"));
    }
}
