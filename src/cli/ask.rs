//! `rlm ask QUESTION`: the full RLM loop; the answer on stdout, the live view and the
//! usage summary on stderr.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;

use clap::{Args, ValueEnum};

use rlm_registry::catalog::Catalog;
use rlm_registry::environment::{AnswerSchema, Interrupt, Limits};
use rlm_registry::llm::Llm;
use rlm_registry::rlm::{
    DEFAULT_BLOCK_TIME_LIMIT, DEFAULT_MAX_DEPTH, DEFAULT_MAX_ITERATIONS, DEFAULT_OUTPUT_BYTES,
    Report, Rlm, RlmError,
};
use rlm_registry::setup::Defaults;
use rlm_registry::setup::RunSetup;

use super::ask_trace::{TraceRequest, Traces};
use super::run_args::{RunFlags, model};
use super::setup::{ContextArgs, Stdin, Terminal, limits};
use super::{EXIT_USAGE, EXIT_VIOLATIONS, Output, SourceArgs, with_catalog};

/// Options of `rlm ask`.
#[derive(Args, Debug, Clone)]
pub(crate) struct AskArgs {
    /// The question (none with --resume: it is in the trace).
    #[arg(required_unless_present = "resume", conflicts_with = "resume")]
    pub(super) question: Option<String>,
    /// Go on with the run TRACE records (written by `--trace`) after it was interrupted:
    /// killed, its server gone, a budget or the iteration cap reached. Its question,
    /// model, limits, budgets and context come from the trace (a flag given again
    /// overrides; what it spent counts against its budgets); what it recorded is run
    /// again with the recorded answers, nothing asked twice, and the run goes on live,
    /// appending to TRACE. A finished run prints its answer and sends nothing.
    #[arg(long, value_name = "TRACE", conflicts_with_all = ["trace", "trace_html"])]
    pub(super) resume: Option<PathBuf>,
    /// With --resume: go on even with another context or registry than the recorded ones.
    #[arg(long, requires = "resume")]
    pub(super) force: bool,
    #[command(flatten)]
    pub(super) source: SourceArgs,
    #[command(flatten)]
    pub(super) context: ContextArgs,
    #[command(flatten)]
    pub(super) run: RunFlags,
    #[command(flatten)]
    pub(super) limits: LoopArgs,
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
    pub(super) quiet: bool,
    /// A JSON Schema file the answer must match. The prompt shows it; the model's
    /// FINAL(value) is converted to JSON and checked, a value that does not match is
    /// sent back with each violation, and the answer is printed as JSON.
    #[arg(long, value_name = "FILE.json")]
    pub(super) schema: Option<PathBuf>,
}

/// The limits of a run's loop, `rlm ask`'s and `rlm acp`'s (per prompt there).
#[derive(Args, Debug, Clone)]
pub(crate) struct LoopArgs {
    /// Turns of each agent before giving up (default: 10).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub(super) max_iterations: Option<u32>,
    /// How deep `rlm_query` children may go. An agent at this depth is not offered
    /// `rlm_query` (calling it is an error naming its scope) and uses `llm_query`; 0: no
    /// children (default: 1).
    #[arg(long, value_name = "N")]
    pub(super) max_depth: Option<usize>,
    /// Wall-clock seconds one code block may run, waiting on sub-calls included (default: 300).
    #[arg(long, value_name = "SECONDS")]
    pub(super) time_limit: Option<f64>,
    /// Memory each agent's Lua state may use, in MiB, besides the context (which does not
    /// count) (default: 512).
    #[arg(long, value_name = "MIB")]
    pub(super) memory_limit: Option<usize>,
    /// Bytes of code output fed back to the model per turn; the rest is cut with a note
    /// (default: 10000).
    #[arg(long, value_name = "BYTES")]
    pub(super) output_bytes: Option<usize>,
}

/// The settings of `rlm ask` that have a default, once chosen: given, else (resuming)
/// recorded, else the default.
pub(super) struct Chosen {
    pub max_iterations: u32,
    pub max_depth: usize,
    pub time_limit: f64,
    pub memory_limit: usize,
    pub output_bytes: usize,
    /// The limits of a block, from the time and memory limits.
    pub limits: Limits,
    /// The context's paths, to record.
    pub context_paths: Vec<PathBuf>,
    pub schema: Option<AnswerSchema>,
}

impl Chosen {
    /// The defaults, under what `args` gives.
    pub(super) fn of(args: &LoopArgs) -> Chosen {
        Chosen {
            max_iterations: args.max_iterations.unwrap_or(DEFAULT_MAX_ITERATIONS),
            max_depth: args.max_depth.unwrap_or(DEFAULT_MAX_DEPTH),
            time_limit: args
                .time_limit
                .unwrap_or(DEFAULT_BLOCK_TIME_LIMIT.as_secs_f64()),
            memory_limit: args.memory_limit.unwrap_or(DEFAULT_MEMORY_MIB),
            output_bytes: args.output_bytes.unwrap_or(DEFAULT_OUTPUT_BYTES),
            limits: Limits::default(),
            context_paths: Vec::new(),
            schema: None,
        }
    }

    /// The RLM of `setup` asking `llm`, with `catalog`'s registry and providers, under
    /// these settings.
    pub(super) fn rlm(self, setup: &RunSetup, llm: Arc<dyn Llm>, catalog: &Catalog) -> Rlm {
        let rlm = setup
            .rlm(llm, Arc::clone(catalog.registry()), self.max_iterations)
            .providers(Arc::clone(catalog.providers()))
            .max_depth(self.max_depth)
            .limits(self.limits)
            .output_bytes(self.output_bytes)
            .context_paths(self.context_paths);
        match self.schema {
            Some(schema) => rlm.answer_schema(schema),
            None => rlm,
        }
    }
}

/// The memory limit of each agent's Lua state, in MiB, when none is given.
pub(super) const DEFAULT_MEMORY_MIB: usize = 512;

/// `--trace-format`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum TraceFormatArg {
    /// This tool's event log: a start line per agent, then one line per turn.
    Events,
    /// The reference RLM's log format (alexzhang13/rlm's RLMLogger).
    Rlm,
}

pub(super) fn ask(args: &AskArgs) -> Output {
    if let Some(trace) = &args.resume {
        return super::ask_resume::resume(args, trace);
    }
    let chosen = Chosen::of(&args.limits);
    let limits = match limits(chosen.time_limit, chosen.memory_limit) {
        Ok(limits) => limits,
        Err(output) => return output,
    };
    let setup = match args.run.setup(&args.source, &Defaults::default()) {
        Ok(setup) => setup,
        Err(output) => return output,
    };
    let llm = match model(&setup) {
        Ok(llm) => llm,
        Err(output) => return output,
    };
    let context = match args.context.gather(&args.source, Stdin::Free) {
        Ok(context) => context,
        Err(output) => return output,
    };
    let schema = match args.schema.as_deref().map(read_schema).transpose() {
        Ok(schema) => schema,
        Err(output) => return output,
    };
    let context_paths = match args.context.paths_given(&args.source) {
        Ok(paths) => paths,
        Err(output) => return output,
    };
    warnings_on_stderr(args.quiet);
    with_catalog(&args.source, |catalog| {
        let mut rlm = Chosen {
            limits,
            context_paths,
            schema,
            ..chosen
        }
        .rlm(&setup, llm, catalog);
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
        rlm = rlm.cancel_on(cancel_on_signals());
        let question = args.question.as_deref().unwrap_or_default();
        let report = rlm.run_report(question, context, Some(Arc::new(Terminal)));
        // Problems writing the page go to stderr even with --quiet; the exit code stays
        // the run's.
        let trace_notes = traces.finish();
        finish(report, args.quiet, trace_notes, args.trace.as_deref())
    })
}

/// `tracing` warnings (turn 5 of 10, …) on stderr unless `quiet`; a second init is a
/// no-op.
pub(super) fn warnings_on_stderr(quiet: bool) {
    if quiet {
        return;
    }
    let _ = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .without_time()
        .try_init();
}

/// The answer on stdout, or the error; `notes` and, unless `quiet`, the usage summary on
/// stderr. An interrupted run is told how to go on from its `trace`.
pub(super) fn finish(
    report: Report,
    quiet: bool,
    notes: String,
    trace: Option<&std::path::Path>,
) -> Output {
    let summary = if quiet {
        notes
    } else {
        let turns = report.turns;
        format!(
            "{notes}{} after {turns} turn{} of the root agent\n{}\n",
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
        Ok(answer) => answered(answer, summary),
        Err(RlmError::Interrupted) => Output::failure(
            EXIT_INTERRUPTED,
            format!("{summary}error: interrupted\n{}", resume_hint(trace)),
        ),
        Err(error) => Output::failure(EXIT_VIOLATIONS, format!("{summary}error: {error}\n")),
    }
}

/// `answer` on stdout, ending with a newline, and `stderr`.
pub(super) fn answered(mut answer: String, stderr: String) -> Output {
    if !answer.ends_with('\n') {
        answer.push('\n');
    }
    Output {
        stdout: answer.into(),
        stderr,
        code: 0,
    }
}

/// The exit code of a run stopped by Ctrl-C or SIGTERM, as shells give a process that
/// SIGINT ended (128 + 2).
const EXIT_INTERRUPTED: u8 = 130;

/// A cancellation that Ctrl-C (SIGINT) and SIGTERM set; a second one ends the process
/// at once, for a run that does not stop (a batch of sub-calls in flight is waited for).
/// Where a handler is already set (a host embedding the CLI), the run goes on without
/// one: it can still be stopped, only not gracefully.
pub(super) fn cancel_on_signals() -> Interrupt {
    let cancel = Interrupt::new();
    let on_signal = cancel.clone();
    let handler = move || {
        if on_signal.is_interrupted() {
            std::process::exit(i32::from(EXIT_INTERRUPTED));
        }
        on_signal.interrupt();
    };
    if let Err(error) = ctrlc::set_handler(handler) {
        tracing::debug!("Ctrl-C will not stop the run gracefully: {error}");
    }
    cancel
}

/// How to go on with an interrupted run: from its trace, when one was written.
fn resume_hint(trace: Option<&std::path::Path>) -> String {
    match trace {
        Some(trace) => format!(
            "hint: the trace holds every whole turn; go on with `rlm ask --resume {}`\n",
            trace.display()
        ),
        None => "hint: with --trace FILE, an interrupted run can be resumed with `rlm ask --resume FILE`\n".to_string(),
    }
}

/// The schema of `--schema FILE`; a file that cannot be read, or is not a JSON Schema, is
/// a usage error.
pub(super) fn read_schema(path: &std::path::Path) -> Result<AnswerSchema, Output> {
    let failure = |message: String| {
        Output::failure(
            EXIT_USAGE,
            format!("error: --schema {}: {message}\n", path.display()),
        )
    };
    let text = std::fs::read_to_string(path).map_err(|e| failure(e.to_string()))?;
    AnswerSchema::parse(&text).map_err(failure)
}
