//! `rlm ask QUESTION`: the full RLM loop; the answer on stdout, the live view and the
//! usage summary on stderr.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;

use clap::{Args, ValueEnum};

use rlm_registry::environment::{AnswerSchema, Interrupt};
use rlm_registry::rlm::{DEFAULT_BLOCK_TIME_LIMIT, DEFAULT_OUTPUT_BYTES, RlmError};
use rlm_registry::setup::Defaults;

use super::ask_trace::{TraceRequest, Traces};
use super::run_args::{RunFlags, model};
use super::setup::{ContextArgs, Stdin, Terminal, limits};
use super::{EXIT_USAGE, EXIT_VIOLATIONS, Output, SourceArgs, with_catalog};

/// Options of `rlm ask`.
#[derive(Args, Debug, Clone)]
pub(crate) struct AskArgs {
    /// The question.
    question: String,
    #[command(flatten)]
    source: SourceArgs,
    #[command(flatten)]
    context: ContextArgs,
    #[command(flatten)]
    run: RunFlags,
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
    /// Wall-clock seconds one code block may run, waiting on sub-calls included.
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_BLOCK_TIME_LIMIT.as_secs_f64())]
    time_limit: f64,
    /// Memory each agent's Lua state may use, in MiB, besides the context (which does not count).
    #[arg(long, value_name = "MIB", default_value_t = 512)]
    memory_limit: usize,
    /// Bytes of code output fed back to the model per turn; the rest is cut with a note.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_OUTPUT_BYTES)]
    output_bytes: usize,
    /// A JSON Schema file the answer must match. The prompt shows it; the model's
    /// FINAL(value) is converted to JSON and checked, a value that does not match is
    /// sent back with each violation, and the answer is printed as JSON.
    #[arg(long, value_name = "FILE.json")]
    schema: Option<PathBuf>,
}

/// `--trace-format`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum TraceFormatArg {
    /// This tool's event log: a start line per agent, then one line per turn.
    Events,
    /// The reference RLM's log format (alexzhang13/rlm's RLMLogger).
    Rlm,
}

pub(super) fn ask(args: &AskArgs) -> Output {
    let limits = match limits(args.time_limit, args.memory_limit) {
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
        let mut rlm = setup
            .rlm(llm, Arc::clone(catalog.registry()), args.max_iterations)
            .providers(Arc::clone(catalog.providers()))
            .max_depth(args.max_depth)
            .limits(limits)
            .output_bytes(args.output_bytes);
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
        rlm = rlm.cancel_on(cancel_on_signals());
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
            Err(RlmError::Interrupted) => Output::failure(
                EXIT_INTERRUPTED,
                format!(
                    "{summary}error: interrupted\n{}",
                    resume_hint(args.trace.as_deref())
                ),
            ),
            Err(error) => Output::failure(EXIT_VIOLATIONS, format!("{summary}error: {error}\n")),
        }
    })
}

/// The exit code of a run stopped by Ctrl-C or SIGTERM, as shells give a process that
/// SIGINT ended (128 + 2).
const EXIT_INTERRUPTED: u8 = 130;

/// A cancellation that Ctrl-C (SIGINT) and SIGTERM set; a second one ends the process
/// at once, for a run that does not stop (a batch of sub-calls in flight is waited for).
/// Where a handler is already set (a host embedding the CLI), the run goes on without
/// one: it can still be stopped, only not gracefully.
fn cancel_on_signals() -> Interrupt {
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
