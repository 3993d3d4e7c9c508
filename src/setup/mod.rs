//! A run's setup, resolved once: which model at which server, how many requests go to it
//! at once, which call cache, the model's context window, the answer protocol and the
//! prompt mode the system prompt teaches, and the run's budgets.
//!
//! Every entry point that runs the loop or calls a model (`rlm ask`, `rlm eval`,
//! `rlm serve`, `rlm replay`, Python's `ask`) builds its run from one [`RunSetup`].
//! Each setting comes from the first of these that gives it — written once, in
//! [`RunSetup::resolve`]:
//!
//! 1. what the caller gave ([`RunSettings`]: a command-line flag, a Python argument);
//! 2. an environment variable ([`ENV_LLM_CONCURRENCY`], `RLM_MODEL`, …);
//! 3. `rlm.toml` ([`FileSettings`]: `[model]`, `[cache]`, `[budgets]`);
//! 4. the default ([`Defaults`]: the crate's, or the entry point's own, such as
//!    `rlm eval`'s 128k window).
//!
//! | setting | flag | variable | `rlm.toml` | default |
//! |---|---|---|---|---|
//! | model | `--model` | `RLM_MODEL` | `[model] name` | gpt-4o-mini |
//! | server | `--base-url` | `RLM_BASE_URL`, `OPENAI_BASE_URL` | `[model] base_url` | api.openai.com |
//! | key | — | `RLM_API_KEY`, `OPENAI_API_KEY` | — | none |
//! | request timeout | — | `RLM_TIMEOUT_SECS` | — | 120 s |
//! | requests at once | `--llm-concurrency` | `RLM_LLM_CONCURRENCY` | `[model] concurrency` | 32 |
//! | reply limit | `--max-reply-tokens` | `RLM_MAX_REPLY_TOKENS` | `[model] max_reply_tokens` | the server's |
//! | reasoning effort | `--reasoning-effort` | `RLM_REASONING_EFFORT` | `[model] reasoning_effort` | not sent |
//! | context window | `--context-window` | `RLM_CONTEXT_WINDOW` | `[model] context_window` | the server's, else unknown |
//! | compaction | `--compact-at` | `RLM_COMPACT_AT` | `[model] compact_at` | 0.85 of the window |
//! | answer protocol | `--answer-protocol` | `RLM_ANSWER_PROTOCOL` | `[model] answer_protocol` | final |
//! | prompt mode | `--prompt-mode` | `RLM_PROMPT_MODE` | `[model] prompt_mode` | compact |
//! | call cache | `--cache`, `--no-cache` | `RLM_CACHE` | `[cache] path` | none |
//! | cache size | `--cache-max-mb` | — | `[cache] max_mb` | 1024 MiB |
//! | cache lease | `--cache-lease` | — | `[cache] lease` | 120 s |
//! | budgets | `--max-tokens`, `--max-llm-calls`, `--max-time` | — | `[budgets]` | unlimited |
//! | cost budget | `--max-cost` | `RLM_MAX_COST` | `[budgets] max_cost` | unlimited |
//! | prices | — | — | `[prices."<model>"]` | none |
//! | context | `--context` (all of them, or none) | — | `[context] paths` | none |
//!
//! The context window has one more source, between `rlm.toml` and the default: when no
//! flag, variable or file gives it, [`RunSetup::ask_server_window`] asks the server once
//! ([`server_window`](crate::llm::server_window): vLLM's `max_model_len`, llama.cpp's
//! `/props`, …). The entry points that send requests call it (`rlm ask`, `rlm eval`,
//! `rlm serve` with a model, Python's `ask`); [`RunSetup::window_source`] says where the
//! window came from. A run's trace records the window it ran with, so `rlm replay` and a
//! resumed run do not ask again.
//!
//! ```
//! use rlm_registry::setup::{Defaults, FileSettings, RunSettings, RunSetup};
//!
//! let given = RunSettings { llm_concurrency: Some(4), ..RunSettings::default() };
//! let file = FileSettings::parse("[model]\nconcurrency = 8\ncontext_window = 8192\n", "rlm.toml", ".")?;
//! let env = |name: &str| (name == "RLM_CONTEXT_WINDOW").then(|| "32k".to_string());
//! let setup = RunSetup::resolve(&given, &file, env, &Defaults::default())?;
//! assert_eq!(setup.llm.max_concurrency, 4); // the flag over the file
//! assert_eq!(setup.context_window, Some(32_000)); // the variable over the file
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod file;
mod recorded;

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub use file::FileSettings;

use crate::Registry;
use crate::conventions::AnswerProtocol;
use crate::llm::{
    CacheStore, Cached, Cost, DEFAULT_CACHE_LEASE, DEFAULT_CACHE_MAX_MB, ENV_API_KEY, ENV_BASE_URL,
    ENV_MODEL, ENV_OPENAI_API_KEY, ENV_OPENAI_BASE_URL, ENV_TIMEOUT_SECS, Llm, LlmClient,
    LlmConfig, Price, PriceTable, ReasoningEffort, open_cache,
};
use crate::rlm::{Budgets, CompactAt, DEFAULT_COMPACT_AT, PromptMode, Rlm};

/// The variable giving the model client's concurrency: requests sent at once.
pub const ENV_LLM_CONCURRENCY: &str = "RLM_LLM_CONCURRENCY";
/// The variable giving the most tokens a reply may take (`4096`, `8k`).
pub const ENV_MAX_REPLY_TOKENS: &str = "RLM_MAX_REPLY_TOKENS";
/// The variable giving a reasoning model's effort (`low`, `medium` or `high`).
pub const ENV_REASONING_EFFORT: &str = "RLM_REASONING_EFFORT";
/// The variable giving the model's context window, in tokens (`8k`, `32768`).
pub const ENV_CONTEXT_WINDOW: &str = "RLM_CONTEXT_WINDOW";
/// The variable giving the share of the window at which a conversation is compacted
/// (`0.85`; `off` or `0` for never).
pub const ENV_COMPACT_AT: &str = "RLM_COMPACT_AT";
/// The variable giving the answer protocol (`final` or `answer`).
pub const ENV_ANSWER_PROTOCOL: &str = "RLM_ANSWER_PROTOCOL";
/// The variable giving the prompt mode (`full`, `compact` or `auto`).
pub const ENV_PROMPT_MODE: &str = "RLM_PROMPT_MODE";
/// The variable naming the call cache when `--cache` is not given.
pub const ENV_CACHE: &str = "RLM_CACHE";
/// The variable giving the run's cost budget, in US dollars.
pub const ENV_MAX_COST: &str = "RLM_MAX_COST";

/// Where the call cache lives: a file, or a server's URL.
///
/// ```
/// use rlm_registry::setup::CacheLocation;
///
/// assert!(matches!(CacheLocation::parse("runs/cache.sqlite"), CacheLocation::File(_)));
/// assert!(matches!(CacheLocation::parse("redis://localhost:6379/0"), CacheLocation::Url(_)));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CacheLocation {
    /// A SQLite file.
    File(PathBuf),
    /// A URL (`scheme://…`), as written.
    Url(String),
}

impl CacheLocation {
    /// What `--cache`, `RLM_CACHE` or `[cache] path` names: a URL when it has a scheme
    /// (`redis://…`), else a file.
    pub fn parse(text: &str) -> CacheLocation {
        let scheme = text.split_once("://").map(|(scheme, _)| scheme);
        match scheme {
            Some(scheme)
                if !scheme.is_empty()
                    && scheme
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')) =>
            {
                CacheLocation::Url(text.to_string())
            }
            _ => CacheLocation::File(PathBuf::from(text)),
        }
    }
}

impl fmt::Display for CacheLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CacheLocation::File(path) => write!(f, "{}", path.display()),
            CacheLocation::Url(url) => f.write_str(url),
        }
    }
}

/// Whether a run uses a call cache, as the caller said.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum CacheChoice {
    /// The variable's, the file's or the default's (`--cache` not given).
    #[default]
    Unset,
    /// This one (`--cache`).
    At(CacheLocation),
    /// None, whatever the variable and the file say (`--no-cache`).
    Off,
}

/// What the caller gives: a flag or a Python argument per setting, `None` when not
/// given. [`RunSetup::resolve`] fills the rest from the environment, `rlm.toml` and the
/// defaults.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunSettings {
    /// `--model`.
    pub model: Option<String>,
    /// `--base-url`.
    pub base_url: Option<String>,
    /// The API key (Python's `api_key`; the command line takes it only from the
    /// environment, so that it never shows in a process list).
    pub api_key: Option<String>,
    /// `--llm-concurrency`: requests sent to the model at once.
    pub llm_concurrency: Option<usize>,
    /// `--max-reply-tokens`: the most tokens a reply may take.
    pub max_reply_tokens: Option<u32>,
    /// `--reasoning-effort`.
    pub reasoning_effort: Option<ReasoningEffort>,
    /// `--context-window`, in tokens.
    pub context_window: Option<u64>,
    /// `--compact-at`: `Some(None)` is `off`.
    pub compact_at: Option<Option<CompactAt>>,
    /// `--answer-protocol`.
    pub answer_protocol: Option<AnswerProtocol>,
    /// `--prompt-mode`.
    pub prompt_mode: Option<PromptMode>,
    /// `--cache` / `--no-cache`.
    pub cache: CacheChoice,
    /// `--cache-max-mb`.
    pub cache_max_mb: Option<u64>,
    /// `--cache-lease`, in seconds.
    pub cache_lease: Option<f64>,
    /// `--max-tokens`.
    pub max_tokens: Option<u64>,
    /// `--max-llm-calls`.
    pub max_llm_calls: Option<u64>,
    /// `--max-time`, in seconds.
    pub max_time: Option<f64>,
    /// `--max-cost`, in US dollars.
    pub max_cost: Option<f64>,
}

/// An entry point's own defaults, where it differs from the crate's.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Defaults {
    /// The window when nothing gives one (`rlm eval`: 128k, which its `direct` method
    /// cuts contexts to); `None`: unknown, nothing is checked.
    pub context_window: Option<u64>,
    /// The cache when nothing names one (`rlm eval`: a file in its output directory).
    pub cache: Option<CacheLocation>,
}

/// Where a run's context window came from.
///
/// ```
/// use rlm_registry::setup::{Defaults, FileSettings, RunSettings, RunSetup, WindowSource};
///
/// let given = RunSettings { context_window: Some(8_192), ..RunSettings::default() };
/// let setup = RunSetup::resolve(&given, &FileSettings::default(), |_| None, &Defaults::default())?;
/// assert_eq!(setup.window_source, WindowSource::Given);
/// assert!(!WindowSource::Given.asks_server());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WindowSource {
    /// The caller gave it: `--context-window`, a Python argument.
    Given,
    /// `RLM_CONTEXT_WINDOW`.
    Variable,
    /// `[model] context_window` in `rlm.toml`.
    File,
    /// The server reported it ([`RunSetup::ask_server_window`]).
    Server,
    /// The entry point's default ([`Defaults::context_window`]).
    Default,
    /// Nothing gave one: the window is unknown.
    #[default]
    Unknown,
}

impl WindowSource {
    /// Whether the server is asked: only when nothing above it in the precedence gave
    /// the window (the server's answer comes before a default).
    pub fn asks_server(self) -> bool {
        matches!(self, WindowSource::Default | WindowSource::Unknown)
    }
}

/// A run's setup, resolved: see the [module docs](self) for where each setting comes
/// from.
#[derive(Clone, Debug, PartialEq)]
pub struct RunSetup {
    /// The model client's configuration: model, server, key, timeout, concurrency.
    pub llm: LlmConfig,
    /// The call cache, if any, with its size cap in bytes.
    pub cache: Option<(CacheLocation, u64)>,
    /// How long a request being sent is held against the other workers sharing the
    /// cache ([`Cached::with_lease`]).
    pub cache_lease: Duration,
    /// The model's context window, in tokens, if known.
    pub context_window: Option<u64>,
    /// Where [`RunSetup::context_window`] came from.
    pub window_source: WindowSource,
    /// When a conversation is compacted; `None`: never.
    pub compact_at: Option<CompactAt>,
    /// How the system prompt teaches ending a run.
    pub answer_protocol: AnswerProtocol,
    /// How the system prompt lists the functions.
    pub prompt_mode: PromptMode,
    /// What one run may spend.
    pub budgets: Budgets,
    /// `rlm.toml`'s price table: what calls cost where the server reports no cost.
    pub prices: PriceTable,
}

/// A setting that cannot be used: which, from where, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetupError {
    /// The message, naming the flag, variable or key.
    pub message: String,
}

impl fmt::Display for SetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for SetupError {}

/// The value of a setting: the caller's, else the variable's, else the file's. The one
/// place the precedence is written; the default comes after, by the caller's `unwrap_or`.
fn layered<T>(given: Option<T>, variable: Option<T>, file: Option<T>) -> Option<T> {
    given.or(variable).or(file)
}

/// The environment, read through `lookup`: empty values count as unset, and a value
/// that does not parse is an error naming the variable.
struct Variables<F> {
    lookup: F,
}

impl<F: Fn(&str) -> Option<String>> Variables<F> {
    fn text(&self, name: &str) -> Option<String> {
        (self.lookup)(name)
            .map(|value| value.trim().to_string())
            .filter(|value| !value.is_empty())
    }

    fn parsed<T>(
        &self,
        name: &str,
        parse: impl Fn(&str) -> Result<T, String>,
    ) -> Result<Option<T>, SetupError> {
        self.text(name)
            .map(|value| {
                parse(&value).map_err(|why| SetupError {
                    message: format!("{name}={value}: {why}"),
                })
            })
            .transpose()
    }
}

/// A positive number of requests.
fn concurrency(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err("expected a number of requests, at least 1".to_string()),
    }
}

/// The most tokens a reply may take: `4096` or `8k`, positive, as the server's
/// `max_tokens` takes it. The command line's `--max-reply-tokens` and the variable read
/// it the same way.
///
/// ```
/// assert_eq!(rlm_registry::setup::reply_tokens("8k"), Ok(8_000));
/// assert!(rlm_registry::setup::reply_tokens("0").is_err());
/// assert!(rlm_registry::setup::reply_tokens("5000000000").is_err());
/// ```
pub fn reply_tokens(text: &str) -> Result<u32, String> {
    match crate::tokens::parse_count(text).map(u32::try_from) {
        Some(Ok(0)) => Err("a reply needs at least 1 token".to_string()),
        Some(Ok(tokens)) => Ok(tokens),
        Some(Err(_)) => Err(format!("at most {} tokens", u32::MAX)),
        None => Err(format!("`{text}` is not a number of tokens (4096 or 8k)")),
    }
}

/// A number of tokens: `8k`, `128k`, `1m` or `32768`, positive. The command line's
/// `--context-window` and the variable read it the same way.
///
/// ```
/// assert_eq!(rlm_registry::setup::window_tokens("8k"), Ok(8_000));
/// assert!(rlm_registry::setup::window_tokens("0").is_err());
/// ```
pub fn window_tokens(text: &str) -> Result<u64, String> {
    match crate::tokens::parse_count(text) {
        Some(0) => Err("the window must be at least 1 token".to_string()),
        Some(tokens) => Ok(tokens),
        None => Err(format!(
            "`{text}` is not a number of tokens (8k, 128k, 1m or 32768)"
        )),
    }
}

impl RunSetup {
    /// Resolves every setting: `given`, else the variable `env` returns (`std::env::var`
    /// in programs; a map in tests), else `file`, else `defaults`, else the crate's.
    pub fn resolve<F>(
        given: &RunSettings,
        file: &FileSettings,
        env: F,
        defaults: &Defaults,
    ) -> Result<RunSetup, SetupError>
    where
        F: Fn(&str) -> Option<String>,
    {
        let vars = Variables { lookup: env };
        let base_url = layered(
            given.base_url.clone(),
            vars.text(ENV_BASE_URL)
                .or_else(|| vars.text(ENV_OPENAI_BASE_URL)),
            file.base_url.clone(),
        );
        let model = layered(
            given.model.clone(),
            vars.text(ENV_MODEL),
            file.model.clone(),
        );
        let mut llm = LlmConfig::new(
            base_url.unwrap_or_else(|| crate::llm::DEFAULT_BASE_URL.to_string()),
            model.unwrap_or_else(|| crate::llm::DEFAULT_MODEL.to_string()),
        );
        llm.api_key = given
            .api_key
            .clone()
            .or_else(|| vars.text(ENV_API_KEY))
            .or_else(|| vars.text(ENV_OPENAI_API_KEY));
        if let Some(timeout) = vars.parsed(ENV_TIMEOUT_SECS, seconds)? {
            llm.timeout = timeout;
        }
        if let Some(n) = layered(
            given.llm_concurrency,
            vars.parsed(ENV_LLM_CONCURRENCY, concurrency)?,
            file.concurrency,
        ) {
            llm.max_concurrency = n;
        }
        llm.max_reply_tokens = layered(
            given.max_reply_tokens,
            vars.parsed(ENV_MAX_REPLY_TOKENS, reply_tokens)?,
            file.max_reply_tokens,
        );
        llm.reasoning_effort = layered(
            given.reasoning_effort,
            vars.parsed(ENV_REASONING_EFFORT, str::parse)?,
            file.reasoning_effort,
        );
        let (context_window, window_source) = [
            (given.context_window, WindowSource::Given),
            (
                vars.parsed(ENV_CONTEXT_WINDOW, window_tokens)?,
                WindowSource::Variable,
            ),
            (file.context_window, WindowSource::File),
            (defaults.context_window, WindowSource::Default),
        ]
        .into_iter()
        .find_map(|(window, source)| window.map(|window| (Some(window), source)))
        .unwrap_or((None, WindowSource::Unknown));
        let compact_at = layered(
            given.compact_at,
            vars.parsed(ENV_COMPACT_AT, CompactAt::parse)?,
            file.compact_at,
        )
        .unwrap_or(Some(DEFAULT_COMPACT_AT));
        let answer_protocol = layered(
            given.answer_protocol,
            vars.parsed(ENV_ANSWER_PROTOCOL, str::parse)?,
            file.answer_protocol,
        )
        .unwrap_or_default();
        let prompt_mode = layered(
            given.prompt_mode,
            vars.parsed(ENV_PROMPT_MODE, str::parse)?,
            file.prompt_mode,
        )
        .unwrap_or_default();
        let cache = match &given.cache {
            CacheChoice::Off => None,
            CacheChoice::At(location) => Some(location.clone()),
            CacheChoice::Unset => layered(
                None,
                vars.text(ENV_CACHE).map(|text| CacheLocation::parse(&text)),
                file.cache.clone(),
            )
            .or_else(|| defaults.cache.clone()),
        };
        let cache_mb =
            layered(given.cache_max_mb, None, file.cache_max_mb).unwrap_or(DEFAULT_CACHE_MAX_MB);
        let cache_lease = layered(given.cache_lease, None, file.cache_lease)
            .map(|secs| {
                duration(secs).map_err(|why| SetupError {
                    message: format!("cache lease (--cache-lease) {secs}: {why}"),
                })
            })
            .transpose()?
            .unwrap_or(DEFAULT_CACHE_LEASE);
        let max_time = layered(given.max_time, None, file.max_time)
            .map(|secs| {
                duration(secs).map_err(|why| SetupError {
                    message: format!("max_time {secs}: {why}"),
                })
            })
            .transpose()?;
        let max_cost = layered(
            given
                .max_cost
                .map(|usd| {
                    Cost::from_usd(usd).map_err(|why| SetupError {
                        message: format!("max_cost (--max-cost) {usd}: {why}"),
                    })
                })
                .transpose()?,
            vars.parsed(ENV_MAX_COST, |text| {
                text.parse::<f64>()
                    .map_err(|_| format!("`{text}` is not a number of dollars"))
                    .and_then(Cost::from_usd)
            })?,
            file.max_cost,
        );
        Ok(RunSetup {
            llm,
            cache: cache.map(|location| (location, cache_mb.saturating_mul(1 << 20))),
            cache_lease,
            context_window,
            window_source,
            compact_at,
            answer_protocol,
            prompt_mode,
            budgets: Budgets {
                total_tokens: layered(given.max_tokens, None, file.max_tokens),
                llm_calls: layered(given.max_llm_calls, None, file.max_llm_calls),
                wall_time: max_time,
                max_cost,
            },
            prices: file.prices.clone(),
        })
    }

    /// [`RunSetup::resolve`] with the process's environment variables.
    pub fn from_env(
        given: &RunSettings,
        file: &FileSettings,
        defaults: &Defaults,
    ) -> Result<RunSetup, SetupError> {
        RunSetup::resolve(given, file, |name| std::env::var(name).ok(), defaults)
    }

    /// Asks the server for the model's context window when no flag, variable or file
    /// gave one ([`WindowSource::asks_server`]): its answer replaces the default, and
    /// without one the window stays as it was. Once per run, before the run starts; a
    /// server that does not answer within
    /// [`SERVER_WINDOW_TIMEOUT`](crate::llm::SERVER_WINDOW_TIMEOUT) or does not say is
    /// no error. Returns the window the server reported, if it was asked and said.
    ///
    /// ```
    /// use rlm_registry::setup::{Defaults, FileSettings, RunSettings, RunSetup, WindowSource};
    ///
    /// // Given: the server is not asked.
    /// let given = RunSettings { context_window: Some(8_192), ..RunSettings::default() };
    /// let mut setup = RunSetup::resolve(&given, &FileSettings::default(), |_| None, &Defaults::default())?;
    /// assert_eq!(setup.ask_server_window(), None);
    /// assert_eq!((setup.context_window, setup.window_source), (Some(8_192), WindowSource::Given));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn ask_server_window(&mut self) -> Option<u64> {
        if !self.window_source.asks_server() {
            return None;
        }
        let reported = crate::llm::server_window(&self.llm)?;
        tracing::info!(
            model = %self.llm.model,
            window = reported,
            "the server reports a context window of {reported} tokens"
        );
        self.context_window = Some(reported);
        self.window_source = WindowSource::Server;
        Some(reported)
    }

    /// The model: the HTTP client, behind the call cache when there is one — the one
    /// place a cache is put in front of the client. Creating it sends nothing; a cache
    /// that cannot be used warns once and the run goes on uncached.
    pub fn model(&self) -> Result<Arc<dyn Llm>, SetupError> {
        let client = LlmClient::new(self.llm.clone()).map_err(|error| SetupError {
            message: error.to_string(),
        })?;
        Ok(self.cached(Arc::new(client)))
    }

    /// `llm` behind this setup's call cache, if it has one.
    pub fn cached(&self, llm: Arc<dyn Llm>) -> Arc<dyn Llm> {
        match &self.cache {
            None => llm,
            Some((location, max_bytes)) => match open_store(location, *max_bytes) {
                Some(cache) => Arc::new(Cached::new(llm, cache).with_lease(self.cache_lease)),
                None => llm,
            },
        }
    }

    /// The price of this setup's model in the price table, if listed.
    ///
    /// ```
    /// use rlm_registry::setup::{Defaults, FileSettings, RunSettings, RunSetup};
    ///
    /// let file = FileSettings::parse("[model]\nname = \"m\"\n[prices.m]\ninput = 1.0\noutput = 2.0\n", "rlm.toml", ".")?;
    /// let setup = RunSetup::resolve(&RunSettings::default(), &file, |_| None, &Defaults::default())?;
    /// assert_eq!(setup.price().map(|p| p.output), Some(2.0));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn price(&self) -> Option<Price> {
        self.prices.get(&self.llm.model)
    }

    /// An [`Rlm`] asking `llm`, with this setup's window, answer protocol, prompt mode,
    /// budgets and price; the caller adds what is its own (providers, limits, traces).
    pub fn rlm(&self, llm: Arc<dyn Llm>, registry: Arc<Registry>, max_iterations: u32) -> Rlm {
        let mut rlm = Rlm::new(llm, registry, max_iterations)
            .prompt_mode(self.prompt_mode)
            .answer_protocol(self.answer_protocol)
            .budgets(self.budgets)
            .compact_at(self.compact_at);
        if let Some(price) = self.price() {
            rlm = rlm.price(price);
        }
        match self.context_window {
            Some(window) => rlm.context_window(window),
            None => rlm,
        }
    }
}

/// The store `location` names; `None`, with one warning, when it names none this
/// version has (a run never fails for its cache).
fn open_store(location: &CacheLocation, max_bytes: u64) -> Option<Arc<dyn CacheStore>> {
    match open_cache(&location.to_string(), max_bytes) {
        Ok(store) => Some(store),
        Err(error) => {
            eprintln!("warning: the call cache {error}; going on uncached");
            None
        }
    }
}

/// A positive, finite number of seconds.
fn seconds(text: &str) -> Result<Duration, String> {
    text.parse::<f64>()
        .map_err(|_| "expected a positive number of seconds".to_string())
        .and_then(duration)
}

/// `secs` as a duration, when it is a positive, finite number of seconds.
fn duration(secs: f64) -> Result<Duration, String> {
    if secs.is_finite() && secs > 0.0 && secs <= 1e9 {
        Ok(Duration::from_secs_f64(secs))
    } else {
        Err("expected a positive number of seconds".to_string())
    }
}
