//! The run's sections of `rlm.toml`: `[model]`, `[cache]`, `[budgets]`, `[prices]` and `[context]`. The file's
//! other sections belong to the providers ([`crate::providers::Config`]); each reader
//! takes its own sections and both refuse a section neither knows.
//!
//! ```toml
//! [model]                    # what the model is and how it is reached
//! name = "qwen3-8b"          # the model (RLM_MODEL wins over it)
//! base_url = "http://localhost:8080/v1"
//! concurrency = 4            # requests sent at once: the server's slots
//! context_window = 8192      # tokens; a request that would not fit is not sent
//! compact_at = 0.85          # share of the window at which a conversation is compacted ("off": never)
//! answer_protocol = "answer" # final or answer: how the prompt teaches ending a run
//! prompt_mode = "compact"    # full, compact or auto: how the prompt lists functions
//! max_reply_tokens = 4096    # the most tokens a reply may take (sent as max_tokens)
//! reasoning_effort = "low"   # low, medium or high, for reasoning models that take it
//!
//! [cache]                    # the call cache of `rlm ask`, `eval` and `serve`
//! path = "rlm-cache.sqlite"  # a file (relative to this file's directory) or a URL
//! max_mb = 1024              # MiB of answers kept; the least recently used go first
//! lease = 120                # seconds a request being sent is held against the other workers
//!
//! [budgets]                  # what one run may spend (all its agents and sub-calls)
//! max_tokens = 200000
//! max_llm_calls = 100
//! max_time = 600             # seconds
//! max_cost = 0.50            # US dollars: the server's usage.cost, else the prices below
//!
//! [prices."gpt-4o-mini"]     # US dollars per million tokens, per model: --max-cost and
//! input = 0.15               # rlm eval's cost columns read this one table
//! output = 0.60
//!
//! [context]                  # what exec, run, ask, serve and replay study without --context
//! paths = ["docs/", "notes.md"] # relative to this file's directory
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde::de::IgnoredAny;
use toml::Spanned;

use super::CacheLocation;
use crate::conventions::AnswerProtocol;
use crate::llm::{Cost, Price, PriceTable, ReasoningEffort};
use crate::providers::ConfigError;
use crate::rlm::{CompactAt, PromptMode};

/// What `rlm.toml` says of a run: every field `None` when the file does not say it.
///
/// ```
/// use rlm_registry::setup::FileSettings;
///
/// let file = FileSettings::parse("[model]\nconcurrency = 4\n[budgets]\nmax_tokens = 9000\n", "rlm.toml", ".")?;
/// assert_eq!(file.concurrency, Some(4));
/// assert_eq!(file.max_tokens, Some(9000));
///
/// let err = FileSettings::parse("[model]\nconcurrency = 0\n", "rlm.toml", ".").unwrap_err();
/// assert_eq!((err.line, err.column), (2, 15));
/// # Ok::<(), rlm_registry::providers::ConfigError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FileSettings {
    /// `[model] name`.
    pub model: Option<String>,
    /// `[model] base_url`.
    pub base_url: Option<String>,
    /// `[model] concurrency`: requests sent to the model at once.
    pub concurrency: Option<usize>,
    /// `[model] context_window`, in tokens.
    pub context_window: Option<u64>,
    /// `[model] compact_at`: a share of the window, `Some(None)` for `"off"` (or 0).
    pub compact_at: Option<Option<CompactAt>>,
    /// `[model] answer_protocol`.
    pub answer_protocol: Option<AnswerProtocol>,
    /// `[model] prompt_mode`.
    pub prompt_mode: Option<PromptMode>,
    /// `[model] max_reply_tokens`.
    pub max_reply_tokens: Option<u32>,
    /// `[model] reasoning_effort`.
    pub reasoning_effort: Option<ReasoningEffort>,
    /// `[cache] path`: a file resolved against the file's directory, or a URL as written.
    pub cache: Option<CacheLocation>,
    /// `[cache] max_mb`.
    pub cache_max_mb: Option<u64>,
    /// `[cache] lease`, in seconds.
    pub cache_lease: Option<f64>,
    /// `[budgets] max_tokens`.
    pub max_tokens: Option<u64>,
    /// `[budgets] max_llm_calls`.
    pub max_llm_calls: Option<u64>,
    /// `[budgets] max_time`, in seconds.
    pub max_time: Option<f64>,
    /// `[budgets] max_cost`, in US dollars.
    pub max_cost: Option<Cost>,
    /// `[prices."<model>"]`: each model's price per million tokens.
    pub prices: PriceTable,
    /// `[context] paths`, each resolved against the file's directory (`-`, standard
    /// input, as written): the context when no `--context` is given.
    pub context: Option<Vec<PathBuf>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    model: RawModel,
    #[serde(default)]
    cache: RawCache,
    #[serde(default)]
    budgets: RawBudgets,
    #[serde(default)]
    prices: BTreeMap<String, Spanned<RawPrice>>,
    context: Option<RawContext>,
    // The providers' sections, read by `providers::Config`.
    #[serde(rename = "providers")]
    _providers: Option<IgnoredAny>,
    #[serde(rename = "serve")]
    _serve: Option<IgnoredAny>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawModel {
    name: Option<String>,
    base_url: Option<String>,
    concurrency: Option<Spanned<u64>>,
    context_window: Option<Spanned<u64>>,
    compact_at: Option<Spanned<RawShare>>,
    answer_protocol: Option<Spanned<String>>,
    prompt_mode: Option<Spanned<String>>,
    max_reply_tokens: Option<Spanned<u64>>,
    reasoning_effort: Option<Spanned<String>>,
}

/// `compact_at`: a number, or `"off"`.
#[derive(Deserialize)]
#[serde(untagged)]
enum RawShare {
    Number(f64),
    Text(String),
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawCache {
    path: Option<String>,
    max_mb: Option<Spanned<u64>>,
    lease: Option<Spanned<f64>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawBudgets {
    max_tokens: Option<Spanned<u64>>,
    max_llm_calls: Option<Spanned<u64>>,
    max_time: Option<Spanned<f64>>,
    max_cost: Option<Spanned<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPrice {
    input: f64,
    output: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawContext {
    paths: Vec<PathBuf>,
}

impl FileSettings {
    /// Reads and parses `path`; a relative cache file or context path is relative to its
    /// directory.
    pub fn load(path: &Path) -> Result<FileSettings, ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::unplaced(&file, format!("cannot read {file}: {e}")))?;
        let base = match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        FileSettings::parse(&text, &file, base)
    }

    /// Parses `text` (named `file` in errors); a relative cache file or context path
    /// resolves against `base`.
    ///
    /// ```
    /// use std::path::PathBuf;
    /// use rlm_registry::setup::FileSettings;
    ///
    /// let file = FileSettings::parse("[context]\npaths = [\"docs/\", \"-\"]\n", "rlm.toml", "project")?;
    /// assert_eq!(file.context, Some(vec![PathBuf::from("project/docs/"), PathBuf::from("-")]));
    /// # Ok::<(), rlm_registry::providers::ConfigError>(())
    /// ```
    pub fn parse(
        text: &str,
        file: &str,
        base: impl AsRef<Path>,
    ) -> Result<FileSettings, ConfigError> {
        let error = |span: std::ops::Range<usize>, message: String| {
            ConfigError::at(text, file, Some(span), message)
        };
        let raw: RawFile = toml::from_str(text)
            .map_err(|e| ConfigError::at(text, file, e.span(), e.message().trim().to_string()))?;
        let positive = |value: Option<Spanned<u64>>, what: &str| match value {
            Some(v) if *v.get_ref() == 0 => {
                Err(error(v.span(), format!("{what} must be at least 1")))
            }
            other => Ok(other.map(Spanned::into_inner)),
        };
        let seconds = |value: Option<Spanned<f64>>, what: &str| match value {
            Some(t) if !(t.get_ref().is_finite() && *t.get_ref() > 0.0 && *t.get_ref() <= 1e9) => {
                Err(error(
                    t.span(),
                    format!("{what} must be a positive number of seconds"),
                ))
            }
            other => Ok(other.map(Spanned::into_inner)),
        };
        let max_time = seconds(raw.budgets.max_time, "[budgets] max_time")?;
        let max_cost = match raw.budgets.max_cost {
            Some(cost) => Some(
                Cost::from_usd(*cost.get_ref())
                    .map_err(|why| error(cost.span(), format!("[budgets] max_cost: {why}")))?,
            ),
            None => None,
        };
        let mut prices = PriceTable::default();
        for (model, price) in raw.prices {
            let span = price.span();
            let RawPrice { input, output } = price.into_inner();
            let price = Price::new(input, output)
                .map_err(|why| error(span, format!("[prices.\"{model}\"] {why}")))?;
            prices = prices.with(model, price);
        }
        let concurrency = positive(raw.model.concurrency, "[model] concurrency")?;
        let max_reply_tokens = match raw.model.max_reply_tokens {
            Some(n) if u32::try_from(*n.get_ref()).is_err() => {
                return Err(error(
                    n.span(),
                    format!("[model] max_reply_tokens must be at most {}", u32::MAX),
                ));
            }
            other => positive(other, "[model] max_reply_tokens")?,
        };
        Ok(FileSettings {
            model: raw.model.name,
            base_url: raw.model.base_url,
            concurrency: concurrency.map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
            context_window: positive(raw.model.context_window, "[model] context_window (tokens)")?,
            compact_at: raw
                .model
                .compact_at
                .map(|share| {
                    let parsed = match share.get_ref() {
                        RawShare::Number(n) => CompactAt::parse(&n.to_string()),
                        RawShare::Text(text) => CompactAt::parse(text),
                    };
                    parsed.map_err(|why| error(share.span(), format!("[model] compact_at: {why}")))
                })
                .transpose()?,
            answer_protocol: parsed(raw.model.answer_protocol, error)?,
            prompt_mode: parsed(raw.model.prompt_mode, error)?,
            max_reply_tokens: max_reply_tokens.and_then(|n| u32::try_from(n).ok()),
            reasoning_effort: parsed(raw.model.reasoning_effort, error)?,
            cache: raw
                .cache
                .path
                .map(|path| CacheLocation::parse(&path).relative_to(base.as_ref())),
            cache_max_mb: positive(raw.cache.max_mb, "[cache] max_mb (MiB)")?,
            cache_lease: seconds(raw.cache.lease, "[cache] lease")?,
            max_tokens: positive(raw.budgets.max_tokens, "[budgets] max_tokens")?,
            max_llm_calls: positive(raw.budgets.max_llm_calls, "[budgets] max_llm_calls")?,
            max_time,
            max_cost,
            prices,
            context: raw.context.map(|context| {
                context
                    .paths
                    .into_iter()
                    .map(|path| relative_to(path, base.as_ref()))
                    .collect()
            }),
        })
    }
}

/// A name `T`'s `FromStr` takes, or the error at its place.
fn parsed<T: std::str::FromStr<Err = String>>(
    value: Option<Spanned<String>>,
    error: impl Fn(std::ops::Range<usize>, String) -> ConfigError,
) -> Result<Option<T>, ConfigError> {
    value
        .map(|v| v.get_ref().parse().map_err(|e| error(v.span(), e)))
        .transpose()
}

impl CacheLocation {
    /// A file named relative to a configuration file, resolved against its directory; a
    /// URL or an absolute path unchanged.
    fn relative_to(self, base: &Path) -> CacheLocation {
        match self {
            CacheLocation::File(path) => CacheLocation::File(relative_to(path, base)),
            other => other,
        }
    }
}

/// `path` as named in a configuration file: a relative one resolved against its
/// directory `base`; an absolute one, or `-` (standard input), unchanged.
fn relative_to(path: PathBuf, base: &Path) -> PathBuf {
    if path.is_relative() && path.as_os_str() != crate::corpus::STDIN {
        base.join(path)
    } else {
        path
    }
}
