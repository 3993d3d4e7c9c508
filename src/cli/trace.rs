//! `rlm trace show | html | export FILE`: a run's JSONL trace as a terminal tree, one
//! self-contained HTML page, or the reference RLM's log format.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand, ValueEnum};
use rlm_registry::trace::{self, ExportOptions, Trace};

use super::{EXIT_USAGE, EXIT_VIOLATIONS, Output};

/// `rlm trace`'s subcommands.
#[derive(Subcommand, Debug, Clone)]
pub(crate) enum TraceCommand {
    /// Print the run as a tree in the terminal.
    ///
    /// A header with the question, outcome, turns, tokens per depth, model calls and wall
    /// time; then each agent, children under the turn that started them, and each turn's
    /// code, output or error (first lines), tokens and time. A trace still being written,
    /// or cut short, is read up to its last whole line.
    Show(ShowArgs),
    /// Write the run as one self-contained HTML page.
    ///
    /// No script, font or request from elsewhere: a timeline per agent, the agent tree,
    /// every turn expandable, and search.
    Html {
        /// The trace (JSON lines, as `rlm ask --trace` writes them).
        file: PathBuf,
        /// The page to write (default: FILE with the extension .html).
        #[arg(short, long, value_name = "OUT.html")]
        out: Option<PathBuf>,
    },
    /// Convert the trace to another log format.
    ///
    /// `--format rlm`: the reference RLM's RLMLogger JSONL, which its visualizer reads;
    /// `--model`, `--max-depth` and `--max-iterations` fill in what the trace does not
    /// record.
    Export(ExportArgs),
}

/// Options of `rlm trace show`.
#[derive(Args, Debug, Clone)]
pub(crate) struct ShowArgs {
    /// The trace (JSON lines, as `rlm ask --trace` writes them).
    file: PathBuf,
    /// One turn in full, as AGENT:N (e.g. 0:3, 0.1:2): the messages the model saw, the
    /// reply, each block's full output.
    #[arg(long, value_name = "AGENT:N", conflicts_with = "agent")]
    turn: Option<String>,
    /// One agent (e.g. 0.2) and its children.
    #[arg(long, value_name = "ID")]
    agent: Option<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// Options of `rlm trace export`.
#[derive(Args, Debug, Clone)]
pub(crate) struct ExportArgs {
    /// The trace (JSON lines, as `rlm ask --trace` writes them).
    file: PathBuf,
    /// The log format.
    #[arg(long, value_enum)]
    format: ExportFormat,
    /// Where to write (default: standard output).
    #[arg(short, long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// The model's name for the metadata line, for a trace that does not record it
    /// (written by an older rlm); a trace's own is written whatever this says (default:
    /// unknown).
    #[arg(long, value_name = "MODEL")]
    model: Option<String>,
    /// The run's depth limit, for a trace that does not record it (default: the deepest
    /// agent in the trace).
    #[arg(long, value_name = "N")]
    max_depth: Option<usize>,
    /// The run's iteration cap, for a trace that does not record it (default: the most
    /// turns of an agent in the trace).
    #[arg(long, value_name = "N")]
    max_iterations: Option<u32>,
}

/// `--format` of `rlm trace export`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ExportFormat {
    /// The reference RLM's RLMLogger JSONL (alexzhang13/rlm), which its visualizer reads.
    Rlm,
}

pub(super) fn run(command: &TraceCommand) -> Output {
    match command {
        TraceCommand::Show(args) => with_trace(&args.file, |t| show(t, args)),
        TraceCommand::Html { file, out } => with_trace(file, |t| {
            let out = out.clone().unwrap_or_else(|| file.with_extension("html"));
            write_html(t, file, &out)
        }),
        TraceCommand::Export(args) => with_trace(&args.file, |t| export(t, args)),
    }
}

/// Reads the trace, runs `command` on it, and adds any unreadable line as a warning.
fn with_trace(file: &Path, command: impl FnOnce(&Trace) -> Output) -> Output {
    match Trace::read(file) {
        Ok(trace) => command(&trace),
        Err(error) => Output::failure(EXIT_USAGE, format!("error: {}: {error}\n", file.display())),
    }
}

fn show(trace: &Trace, args: &ShowArgs) -> Output {
    let found = if let Some(spec) = &args.turn {
        let Some((agent, n)) = parse_turn(spec) else {
            return Output::failure(
                EXIT_USAGE,
                format!("error: --turn takes AGENT:N (e.g. 0:3), not `{spec}`\n"),
            );
        };
        if args.json {
            trace::turn_json(trace, agent, n).map(|v| pretty(&v))
        } else {
            trace::show_turn(trace, agent, n)
        }
        .ok_or_else(|| format!("no turn {n} of agent {agent} in the trace"))
    } else if let Some(id) = &args.agent {
        if args.json {
            trace::agent_json(trace, id).map(|v| pretty(&v))
        } else {
            trace::show_agent(trace, id)
        }
        .ok_or_else(|| format!("no agent {id} in the trace"))
    } else if args.json {
        Ok(pretty(&trace::show_json(trace)))
    } else {
        Ok(trace::show(trace))
    };
    match found {
        Ok(text) => Output::success(text),
        Err(message) => Output::failure(EXIT_VIOLATIONS, format!("error: {message}\n")),
    }
}

/// `0.1:3` → (`0.1`, 3).
fn parse_turn(spec: &str) -> Option<(&str, u32)> {
    let (agent, n) = spec.rsplit_once(':')?;
    Some((agent, n.parse().ok()?))
}

fn pretty(value: &serde_json::Value) -> String {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_default();
    text.push('\n');
    text
}

/// Writes the page for `trace` (read from `file`) to `out`.
pub(super) fn write_html(trace: &Trace, file: &Path, out: &Path) -> Output {
    let title = file
        .file_name()
        .map_or_else(|| "trace".into(), |n| n.to_string_lossy().into_owned());
    match std::fs::write(out, trace::html(trace, &title)) {
        Ok(()) => Output::success(format!("wrote {}\n", out.display())),
        Err(error) => Output::failure(
            EXIT_USAGE,
            format!("error: cannot write {}: {error}\n", out.display()),
        ),
    }
}

fn export(trace: &Trace, args: &ExportArgs) -> Output {
    let ExportFormat::Rlm = args.format;
    // A trace that does not record its start: the file was last written when the run
    // ended, its wall time before.
    let ended_unix_ms = std::fs::metadata(&args.file)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .and_then(|d| u64::try_from(d.as_millis()).ok());
    let options = ExportOptions {
        model: args.model.clone(),
        max_depth: args.max_depth,
        max_iterations: args.max_iterations,
        started_unix_ms: ended_unix_ms.map(|end| end.saturating_sub(trace.summary().wall_ms)),
    };
    let text = trace::export_rlm(trace, &options);
    match &args.out {
        None => Output::success(text),
        Some(out) => match std::fs::write(out, text) {
            Ok(()) => Output::success(String::new()),
            Err(error) => Output::failure(
                EXIT_USAGE,
                format!("error: cannot write {}: {error}\n", out.display()),
            ),
        },
    }
}
