//! The flags of a run's setup, each declared once, in groups the commands flatten:
//! [`LlmArgs`] (which model, how many requests at once), [`WindowArgs`],
//! [`PromptArgs`], [`BudgetArgs`] and [`CacheArgs`](super::cache::CacheArgs). Each group
//! writes what it was given into [`RunSettings`]; [`SourceArgs::run_setup`] resolves
//! the rest (environment variables, `rlm.toml`, defaults) with
//! [`RunSetup::resolve`](rlm_registry::setup::RunSetup::resolve).

use std::sync::Arc;

use clap::Args;
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};

use rlm_registry::conventions::AnswerProtocol;
use rlm_registry::llm::{Llm, LlmClient, ReasoningEffort};
use rlm_registry::rlm::{CompactAt, PromptMode};
use rlm_registry::setup::{
    Defaults, FileSettings, RunSettings, RunSetup, reply_tokens, window_tokens,
};

use super::{EXIT_USAGE, Output, SourceArgs};

/// Which model answers and how many requests it takes at once.
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct LlmArgs {
    /// The model (default: RLM_MODEL, else `[model] name` in rlm.toml, else gpt-4o-mini).
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,
    /// The OpenAI-compatible server (default: RLM_BASE_URL, OPENAI_BASE_URL, `[model]
    /// base_url`, else https://api.openai.com/v1). The key comes from RLM_API_KEY or
    /// OPENAI_API_KEY.
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// Requests sent to the model at once, sub-calls of every agent together (default:
    /// RLM_LLM_CONCURRENCY, else `[model] concurrency`, else 32). Set it to the server's
    /// slots: a local server with 4 slots queues the rest.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub llm_concurrency: Option<u32>,
    /// The most tokens one reply may take, root turns and sub-calls alike, sent as
    /// `max_tokens` (or `max_completion_tokens` to a server that asks for it; default:
    /// RLM_MAX_REPLY_TOKENS, else `[model] max_reply_tokens`, else the server's). A reply
    /// cut there does not run its unfinished code block. The window check keeps this
    /// much room for the reply.
    #[arg(long, value_name = "TOKENS", value_parser = reply_tokens)]
    pub max_reply_tokens: Option<u32>,
    /// How hard a reasoning model thinks, sent as `reasoning_effort` (gpt-oss, OpenAI's
    /// reasoning models; default: RLM_REASONING_EFFORT, else `[model] reasoning_effort`,
    /// else not sent).
    #[arg(long, value_name = "EFFORT", value_parser = parsed::<ReasoningEffort>(&ReasoningEffort::CHOICES))]
    pub reasoning_effort: Option<ReasoningEffort>,
}

/// The model's context window.
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct WindowArgs {
    /// The model's context window in tokens (`8k`, `32768`; default: RLM_CONTEXT_WINDOW,
    /// else `[model] context_window` in rlm.toml, else what the server reports — vLLM's
    /// `max_model_len`, llama.cpp's `/props`, … — else unknown). A request (the root's
    /// or a child's, each turn's) or a `llm_query` prompt that would not fit, with 1,024
    /// tokens kept for the reply, is not sent: the error names the tokens and the fix.
    #[arg(long, value_name = "TOKENS", value_parser = window_tokens)]
    pub context_window: Option<u64>,
    /// Compact the conversation before a request would pass this share of the window
    /// (default: RLM_COMPACT_AT, else `[model] compact_at`, else 0.85; `off` or 0: never):
    /// the model summarises its work, the conversation restarts from the summary, and
    /// every message stays in the Lua table `history`. Without a known window, older
    /// outputs are sent as a marker instead (whole in `history`).
    #[arg(long, value_name = "SHARE|off", value_parser = compact_at)]
    pub compact_at: Option<CompactAtFlag>,
}

/// `--compact-at`'s value: a share of the window, or `off` (`None`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct CompactAtFlag(Option<CompactAt>);

fn compact_at(text: &str) -> Result<CompactAtFlag, String> {
    CompactAt::parse(text).map(CompactAtFlag)
}

/// What the system prompt teaches: how functions are listed and how a run ends.
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct PromptArgs {
    /// How the system prompt lists the functions (default: RLM_PROMPT_MODE, else `[model]
    /// prompt_mode` in rlm.toml, else compact; see `rlm prompt --tokens`).
    #[arg(long, value_name = "MODE", value_parser = parsed::<PromptMode>(&PromptMode::CHOICES))]
    pub prompt_mode: Option<PromptMode>,
    /// How the system prompt teaches the model to end the run (default:
    /// RLM_ANSWER_PROTOCOL, else `[model] answer_protocol` in rlm.toml, else final). Both
    /// always work.
    #[arg(long, value_name = "PROTOCOL", value_parser = parsed::<AnswerProtocol>(&AnswerProtocol::CHOICES))]
    pub answer_protocol: Option<AnswerProtocol>,
}

/// What one run may spend, all its agents and sub-calls together.
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct BudgetArgs {
    /// Stop once the run has used this many tokens (default: `[budgets] max_tokens` in
    /// rlm.toml, else unlimited). Each call reserves its worst case first.
    #[arg(long, value_name = "N")]
    pub max_tokens: Option<u64>,
    /// Stop once the run has made this many model calls (default: `[budgets]
    /// max_llm_calls`, else unlimited).
    #[arg(long, value_name = "N")]
    pub max_llm_calls: Option<u64>,
    /// Stop once the run has taken this many seconds (default: `[budgets] max_time`,
    /// else unlimited).
    #[arg(long, value_name = "SECONDS")]
    pub max_time: Option<f64>,
    /// Stop once the run has cost this many US dollars (default: RLM_MAX_COST, else
    /// `[budgets] max_cost`, else unlimited): the server's `usage.cost`, else the model's
    /// `[prices]` in rlm.toml. With a price, each call reserves its worst case first.
    #[arg(long, value_name = "USD", allow_negative_numbers = true)]
    pub max_cost: Option<f64>,
}

/// A parser of the names `T`'s `FromStr` takes, offering `choices` (name, help) in the
/// help: the names and their meaning are the library's, stated once.
fn parsed<T>(choices: &'static [(&'static str, &'static str)]) -> impl TypedValueParser<Value = T>
where
    T: std::str::FromStr<Err = String> + Clone + Send + Sync + 'static,
{
    let values = choices
        .iter()
        .map(|(name, help)| PossibleValue::new(*name).help(*help));
    PossibleValuesParser::new(values).try_map(|name| name.parse::<T>())
}

impl LlmArgs {
    fn write(&self, settings: &mut RunSettings) {
        settings.model.clone_from(&self.model);
        settings.base_url.clone_from(&self.base_url);
        settings.llm_concurrency = self.llm_concurrency.map(|n| n as usize);
        settings.max_reply_tokens = self.max_reply_tokens;
        settings.reasoning_effort = self.reasoning_effort;
    }

    /// Whether `--model` or `--base-url` was given: a model is opt-in where its calls
    /// would spend someone else's tokens (`rlm serve`).
    pub(crate) fn given(&self) -> bool {
        self.model.is_some() || self.base_url.is_some()
    }

    /// The client of a command that only needs a model (`rlm exec`, `rlm search`): the
    /// flags over the environment and `rlm.toml`, no cache.
    pub(crate) fn client(&self, source: &SourceArgs) -> Result<LlmClient, Output> {
        let mut settings = RunSettings::default();
        self.write(&mut settings);
        let setup = source.run_setup(&settings, &Defaults::default())?;
        LlmClient::new(setup.llm).map_err(|e| Output::failure(EXIT_USAGE, format!("error: {e}\n")))
    }
}

/// Every flag of a run's setup, for the commands that run the loop (`ask`, `eval`).
#[derive(Args, Debug, Clone)]
pub(crate) struct RunFlags {
    #[command(flatten)]
    pub llm: LlmArgs,
    #[command(flatten)]
    pub window: WindowArgs,
    #[command(flatten)]
    pub prompt: PromptArgs,
    #[command(flatten)]
    pub budgets: BudgetArgs,
    #[command(flatten)]
    pub cache: super::cache::CacheArgs,
}

impl RunFlags {
    /// The run's setup: these flags over the environment, `source`'s configuration file,
    /// the server's window when none of them gives one, and `defaults`.
    pub(crate) fn setup(
        &self,
        source: &SourceArgs,
        defaults: &Defaults,
    ) -> Result<RunSetup, Output> {
        let given = Given {
            llm: Some(&self.llm),
            window: Some(&self.window),
            prompt: Some(&self.prompt),
            budgets: Some(&self.budgets),
            cache: Some(&self.cache),
        };
        let mut setup = source.run_setup(&given.settings()?, defaults)?;
        setup.ask_server_window();
        Ok(setup)
    }
}

/// Every group a command has, written into the settings it was given.
#[derive(Default)]
pub(crate) struct Given<'a> {
    pub llm: Option<&'a LlmArgs>,
    pub window: Option<&'a WindowArgs>,
    pub prompt: Option<&'a PromptArgs>,
    pub budgets: Option<&'a BudgetArgs>,
    pub cache: Option<&'a super::cache::CacheArgs>,
}

impl Given<'_> {
    /// The settings the flags give; `--max-time` must be a positive number of seconds.
    pub(crate) fn settings(&self) -> Result<RunSettings, Output> {
        let mut settings = RunSettings::default();
        if let Some(llm) = self.llm {
            llm.write(&mut settings);
        }
        if let Some(window) = self.window {
            settings.context_window = window.context_window;
            settings.compact_at = window.compact_at.map(|flag| flag.0);
        }
        if let Some(prompt) = self.prompt {
            settings.prompt_mode = prompt.prompt_mode;
            settings.answer_protocol = prompt.answer_protocol;
        }
        if let Some(budgets) = self.budgets {
            if let Some(seconds) = budgets.max_time
                && !(seconds.is_finite() && seconds > 0.0 && seconds <= 1e9)
            {
                return Err(Output::failure(
                    EXIT_USAGE,
                    "error: --max-time must be a positive number of seconds\n".into(),
                ));
            }
            settings.max_tokens = budgets.max_tokens;
            settings.max_llm_calls = budgets.max_llm_calls;
            settings.max_time = budgets.max_time;
            settings.max_cost = budgets.max_cost;
        }
        if let Some(cache) = self.cache {
            cache.write(&mut settings);
        }
        Ok(settings)
    }
}

impl SourceArgs {
    /// The `[model]`, `[cache]` and `[budgets]` sections of the configuration file, if
    /// there is one.
    pub(crate) fn file_settings(&self) -> Result<FileSettings, Output> {
        match self.config_path() {
            None => Ok(FileSettings::default()),
            Some(path) => FileSettings::load(&path).map_err(|e| {
                let color = std::io::IsTerminal::is_terminal(&std::io::stderr());
                Output::failure(EXIT_USAGE, format!("{}\n", e.render(color)))
            }),
        }
    }

    /// The run's setup: `given` over the environment variables over the configuration
    /// file over `defaults`. A setting that cannot be used is a usage error (exit 2).
    pub(crate) fn run_setup(
        &self,
        given: &RunSettings,
        defaults: &Defaults,
    ) -> Result<RunSetup, Output> {
        let file = self.file_settings()?;
        RunSetup::from_env(given, &file, defaults)
            .map_err(|e| Output::failure(EXIT_USAGE, format!("error: {e}\n")))
    }
}

/// The model of `setup`, behind its cache; a bad setting is a usage error (exit 2).
pub(crate) fn model(setup: &RunSetup) -> Result<Arc<dyn Llm>, Output> {
    setup
        .model()
        .map_err(|e| Output::failure(EXIT_USAGE, format!("error: {e}\n")))
}
