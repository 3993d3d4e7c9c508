//! `rlm ask QUESTION`: the full RLM loop; the answer on stdout, the live view and the
//! usage summary on stderr.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, ValueEnum};

use rlm_registry::conventions::AnswerProtocol;
use rlm_registry::environment::AnswerSchema;
use rlm_registry::rlm::{
    AUTO_COMPACT_ABOVE_TOKENS, Budgets, Context, DEFAULT_BLOCK_TIME_LIMIT, DEFAULT_OUTPUT_BYTES,
    PromptMode, Rlm,
};

use super::ask_trace::{TraceRequest, Traces};
use super::setup::{Terminal, limits, llm_client, read_context, window_tokens};
use super::{EXIT_USAGE, EXIT_VIOLATIONS, Output, SourceArgs, with_catalog};

/// Options of `rlm ask`.
#[derive(Args, Debug, Clone)]
pub(crate) struct AskArgs {
    /// The question.
    question: String,
    #[command(flatten)]
    source: SourceArgs,
    /// A file whose text becomes the global `context`.
    #[arg(long, value_name = "FILE")]
    context: Option<PathBuf>,
    /// The model (default: RLM_MODEL, or gpt-4o-mini).
    #[arg(long, value_name = "MODEL")]
    model: Option<String>,
    /// The OpenAI-compatible server (default: RLM_BASE_URL, OPENAI_BASE_URL, or
    /// https://api.openai.com/v1). The key comes from RLM_API_KEY or OPENAI_API_KEY.
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
    /// Turns of each agent before giving up.
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    max_iterations: u32,
    /// How deep `rlm_query` children may go. An agent at this depth is not offered
    /// `rlm_query` (calling it is an error naming its scope) and uses `llm_query`; 0: no
    /// children.
    #[arg(long, value_name = "N", default_value_t = 1)]
    max_depth: usize,
    /// Write the trajectory to FILE as JSON lines (a start line per agent, then one per turn), flushed as it goes.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// The format of --trace: `events` (this tool's, which `rlm trace` reads) or `rlm`
    /// (the reference RLM's RLMLogger JSONL, for its visualizer).
    #[arg(long, value_name = "FORMAT", value_enum, default_value_t = TraceFormatArg::Events, requires = "trace")]
    trace_format: TraceFormatArg,
    /// Write the run as one self-contained HTML page when it ends (also when it fails);
    /// see `rlm trace html`.
    #[arg(long, value_name = "OUT.html")]
    trace_html: Option<PathBuf>,
    /// No live view, warnings or usage summary on stderr: only the answer, or the error.
    #[arg(short, long)]
    quiet: bool,
    /// Stop once the run has used this many tokens (all agents and sub-calls).
    #[arg(long, value_name = "N")]
    max_tokens: Option<u64>,
    /// Stop once the run has made this many model calls (all agents and sub-calls).
    #[arg(long, value_name = "N")]
    max_llm_calls: Option<u64>,
    /// Stop once the run has taken this many seconds.
    #[arg(long, value_name = "SECONDS")]
    max_time: Option<f64>,
    /// Wall-clock seconds one code block may run, waiting on sub-calls included.
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_BLOCK_TIME_LIMIT.as_secs_f64())]
    time_limit: f64,
    /// Memory each agent's Lua state may use, in MiB (the context included).
    #[arg(long, value_name = "MIB", default_value_t = 512)]
    memory_limit: usize,
    /// Bytes of code output fed back to the model per turn; the rest is cut with a note.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_OUTPUT_BYTES)]
    output_bytes: usize,
    /// How the system prompt lists the functions (see `rlm prompt --tokens`).
    #[arg(long, value_name = "MODE", value_enum, default_value_t = PromptModeArg::Compact)]
    prompt_mode: PromptModeArg,
    #[command(flatten)]
    model_args: ModelArgs,
    #[command(flatten)]
    cache: super::cache::CacheArgs,
    /// A JSON Schema file the answer must match. The prompt shows it; the model's
    /// FINAL(value) is converted to JSON and checked, a value that does not match is
    /// sent back with each violation, and the answer is printed as JSON.
    #[arg(long, value_name = "FILE.json")]
    schema: Option<PathBuf>,
}

/// What the model is: its window and the answer protocol it is taught, over `[model]`
/// in rlm.toml.
#[derive(Args, Debug, Clone)]
pub(super) struct ModelArgs {
    /// The model's context window in tokens (`8k`, `32768`; default: `[model]
    /// context_window` in rlm.toml, else unknown). A first request (the root's or a
    /// child's) that would not fit, with 1,024 tokens kept for the reply, is not sent:
    /// the error names the system prompt's tokens and the fix. `llm_query` prompts are
    /// checked the same way.
    #[arg(long, value_name = "TOKENS", value_parser = window_tokens)]
    pub context_window: Option<u64>,
    /// How the system prompt teaches the model to end the run (default: `[model]
    /// answer_protocol` in rlm.toml, else final). Both always work.
    #[arg(long, value_name = "PROTOCOL", value_enum)]
    pub answer_protocol: Option<AnswerProtocolArg>,
}

impl ModelArgs {
    /// The window: the flag, else the configuration's.
    pub(super) fn window(&self, config: &rlm_registry::providers::Config) -> Option<u64> {
        self.context_window.or(config.context_window)
    }

    /// The protocol: the flag, else the configuration's, else `final`.
    pub(super) fn protocol(&self, config: &rlm_registry::providers::Config) -> AnswerProtocol {
        self.answer_protocol
            .map(AnswerProtocol::from)
            .or(config.answer_protocol)
            .unwrap_or_default()
    }
}

/// `--answer-protocol`: the command-line names of [`AnswerProtocol`].
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum AnswerProtocolArg {
    /// FINAL(value) or FINAL_VAR("name").
    Final,
    /// The reference RLM's: answer["content"] = value, then answer["ready"] = true.
    Answer,
}

impl From<AnswerProtocolArg> for AnswerProtocol {
    fn from(arg: AnswerProtocolArg) -> AnswerProtocol {
        match arg {
            AnswerProtocolArg::Final => AnswerProtocol::Final,
            AnswerProtocolArg::Answer => AnswerProtocol::Answer,
        }
    }
}

/// `--trace-format`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum TraceFormatArg {
    /// This tool's event log: a start line per agent, then one line per turn.
    Events,
    /// The reference RLM's log format (alexzhang13/rlm's RLMLogger).
    Rlm,
}

/// `--prompt-mode`: the command-line names of [`PromptMode`].
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum PromptModeArg {
    /// Every function with its full documentation.
    Full,
    /// Signatures and one-line summaries; the model looks functions up with help and
    /// fn_search.
    Compact,
    // Its help is built at run time to quote the library's threshold.
    #[value(help = auto_help())]
    Auto,
}

/// The help of `--prompt-mode auto`, quoting the library's threshold so the two cannot
/// drift apart.
fn auto_help() -> String {
    format!(
        "Compact when the full listing has more than {AUTO_COMPACT_ABOVE_TOKENS} tokens, else full"
    )
}

impl From<PromptModeArg> for PromptMode {
    fn from(arg: PromptModeArg) -> PromptMode {
        match arg {
            PromptModeArg::Full => PromptMode::Full,
            PromptModeArg::Compact => PromptMode::Compact,
            PromptModeArg::Auto => PromptMode::auto(),
        }
    }
}

pub(super) fn ask(args: &AskArgs) -> Output {
    let limits = match limits(args.time_limit, args.memory_limit) {
        Ok(limits) => limits,
        Err(output) => return output,
    };
    let mut budgets = Budgets {
        total_tokens: args.max_tokens,
        llm_calls: args.max_llm_calls,
        wall_time: None,
    };
    if let Some(seconds) = args.max_time {
        if !(seconds.is_finite() && seconds > 0.0 && seconds <= 1e9) {
            return Output::failure(
                EXIT_USAGE,
                "error: --max-time must be a positive number of seconds\n".into(),
            );
        }
        budgets.wall_time = Some(Duration::from_secs_f64(seconds));
    }
    let llm = match llm_client(args.model.as_deref(), args.base_url.as_deref()) {
        Ok(llm) => llm,
        Err(output) => return output,
    };
    let context = match read_context(args.context.as_deref()) {
        Ok(context) => context.map(Context::Text),
        Err(output) => return output,
    };
    let schema = match args.schema.as_deref().map(read_schema).transpose() {
        Ok(schema) => schema,
        Err(output) => return output,
    };
    let config = match args.source.config() {
        Ok(config) => config,
        Err(output) => return output,
    };
    if !args.quiet {
        // `tracing` warnings (turn 5 of 10, …) on stderr; a second init is a no-op.
        let _ = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::WARN)
            .with_writer(std::io::stderr)
            .with_ansi(std::io::stderr().is_terminal())
            .with_target(false)
            .without_time()
            .try_init();
    }
    with_catalog(&args.source, |catalog| {
        let mut rlm = Rlm::new(
            Arc::new(llm),
            Arc::clone(catalog.registry()),
            args.max_iterations,
        )
        .providers(Arc::clone(catalog.providers()))
        .max_depth(args.max_depth)
        .limits(limits)
        .budgets(budgets)
        .output_bytes(args.output_bytes)
        .prompt_mode(args.prompt_mode.into())
        .answer_protocol(args.model_args.protocol(&config));
        if let Some(cache) = args.cache.open(&config, None) {
            rlm = rlm.cache(cache);
        }
        if let Some(window) = args.model_args.window(&config) {
            rlm = rlm.context_window(window);
        }
        if let Some(schema) = schema {
            rlm = rlm.answer_schema(schema);
        }
        let request = TraceRequest {
            file: args.trace.as_deref(),
            rlm_format: args.trace_format == TraceFormatArg::Rlm,
            html: args.trace_html.as_deref(),
        };
        let traces;
        (rlm, traces) = match Traces::attach(rlm, &request) {
            Ok(attached) => attached,
            Err(output) => return output,
        };
        if !args.quiet {
            rlm = rlm.live_view(std::io::stderr());
        }
        let report = rlm.run_report(&args.question, context, Some(Arc::new(Terminal)));
        // Problems writing the page go to stderr even with --quiet; the exit code stays
        // the run's.
        let trace_notes = traces.finish();
        let summary = if args.quiet {
            trace_notes
        } else {
            let turns = report.turns;
            format!(
                "{trace_notes}{} after {turns} turn{} of the root agent\n{}\n",
                if report.result.is_ok() {
                    "answered"
                } else {
                    "failed"
                },
                if turns == 1 { "" } else { "s" },
                report.usage
            )
        };
        match report.result {
            Ok(answer) => {
                let mut stdout = answer;
                if !stdout.ends_with('\n') {
                    stdout.push('\n');
                }
                Output {
                    stdout: stdout.into(),
                    stderr: summary,
                    code: 0,
                }
            }
            Err(error) => Output::failure(EXIT_VIOLATIONS, format!("{summary}error: {error}\n")),
        }
    })
}

/// The schema of `--schema FILE`; a file that cannot be read, or is not a JSON Schema, is
/// a usage error.
fn read_schema(path: &std::path::Path) -> Result<AnswerSchema, Output> {
    let failure = |message: String| {
        Output::failure(
            EXIT_USAGE,
            format!("error: --schema {}: {message}\n", path.display()),
        )
    };
    let text = std::fs::read_to_string(path).map_err(|e| failure(e.to_string()))?;
    AnswerSchema::parse(&text).map_err(failure)
}
