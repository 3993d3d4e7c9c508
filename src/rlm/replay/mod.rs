//! [`Replay`]: a recorded run run again with no server. Each agent's replies and every
//! answer its code got come from the trace; the code runs again, in fresh environments,
//! with the registry and sandbox of today; and each block's output is compared with the
//! recorded one. The result is [`ReplayReport`]: identical, or the first [`Divergence`]
//! (agent, turn, block, the two sides). A registry or sandbox change is so checked
//! against recorded runs, in CI, without a model.
//!
//! What is compared, in the order of the recorded trace's lines: that each agent is
//! started and asked the same question (a child's comes from its parent's code); per
//! turn, each block's status, output and error, then the prompts of its sub-calls in
//! order; and the final answer. The system prompt is not: a registry whose documentation
//! changed still gets the recorded replies. A request the record does not have (more
//! calls than were made, another prompt) is answered with an error and shows as a
//! divergence where it happened. Each block is handed its recorded journal: the
//! clock (`os.time`, `os.clock`, `os.date`), the random seed, `ask_user`'s answers and
//! the results of host functions with effects are the recorded run's, so code that reads
//! them does not diverge, and files, programs and the user are not reached again.
//!
//! `tape` plays the record back as a model; `compare` finds the first divergence;
//! `report` says what was found.

mod compare;
mod report;
mod tape;

use std::fmt;
use std::io::{self, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::Registry;
use crate::conventions::AnswerProtocol;
use crate::environment::{AnswerSchema, Limits};
use crate::providers::Providers;

use super::budget::Budgets;
use super::builder::Rlm;
use super::context::Context;
use super::prompt_mode::PromptMode;
use super::trajectory::{ContextDigest, Record, RunLimits, Setup, Start};

pub use report::{Divergence, ReplayReport};
pub(crate) use tape::{PlayedBack, Tapes};

/// A recorded run, to run again: from a trace file ([`Replay::from_file`]) or its text,
/// with today's registry (default the baked one), the providers (default the built-in
/// ones) and the run's context, which must be the recorded one unless forced.
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use rlm_registry::Registry;
/// use rlm_registry::llm::{Completion, Llm, LlmError, Request};
/// use rlm_registry::rlm::{Context, Replay, Rlm};
///
/// /// Counts the lines, asks a sub-model, answers.
/// struct Scripted(AtomicUsize);
/// impl Llm for Scripted {
///     fn complete(&self, _request: Request) -> Result<Completion, LlmError> {
///         Ok(Completion::new(match self.0.fetch_add(1, Ordering::SeqCst) {
///             0 => "```lua\nprint(line_count(context), llm_query('Say hi'))\n```",
///             1 => "hi",
///             _ => "```lua\nFINAL('done')\n```",
///         }))
///     }
/// }
///
/// let path = std::env::temp_dir().join("rlm-replay-doctest.jsonl");
/// Rlm::new(Arc::new(Scripted(AtomicUsize::new(0))), Registry::baked().clone(), 5)
///     .trace_file(&path)?
///     .run("How many lines?", Some(Context::from("a\nb\n")))
///     .unwrap();
///
/// let replay = Replay::from_file(&path)?.context(Context::from("a\nb\n"));
/// let report = replay.run()?;
/// assert!(report.is_identical());
/// assert_eq!((report.turns, report.sub_calls), (2, 1));
///
/// // Another context is refused, unless forced.
/// let other = Replay::from_file(&path)?.context(Context::from("x\n"));
/// assert!(other.run().is_err());
/// let forced = other.force(true).run()?;
/// let divergence = forced.divergence.unwrap();
/// assert_eq!((divergence.agent.as_str(), divergence.turn, divergence.block), ("0", Some(1), Some(1)));
/// assert_eq!((divergence.recorded.as_str(), divergence.replayed.as_str()), ("2\thi\n", "1\thi\n"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Replay {
    records: Arc<Vec<Record>>,
    registry: Arc<Registry>,
    providers: Arc<Providers>,
    context: Option<Context>,
    force: bool,
}

impl fmt::Debug for Replay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Replay")
            .field("records", &self.records.len())
            .field("functions", &self.registry.len())
            .field("context", &self.context.as_ref().map(Context::total_bytes))
            .field("force", &self.force)
            .finish()
    }
}

impl Replay {
    /// The run recorded in the trace file at `path` (the event log `rlm ask --trace`
    /// writes).
    pub fn from_file(path: impl AsRef<Path>) -> Result<Replay, ReplayError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|error| ReplayError::Read {
            path: path.display().to_string(),
            error,
        })?;
        Replay::from_jsonl(&text)
    }

    /// The run recorded in `text`, a trace's lines. Every line must be a record: a line
    /// that is not (another file, a trace cut short) is an error, and so is a trace whose
    /// root agent has no ending (the run was still going).
    pub fn from_jsonl(text: &str) -> Result<Replay, ReplayError> {
        let records = superseded_left_out(parse(text)?);
        let root = root_start(&records).ok_or(ReplayError::NoRoot)?;
        let last_turn = records.iter().rev().find_map(|record| match record {
            Record::Turn(turn) if turn.agent == root.agent => Some(turn),
            _ => None,
        });
        if last_turn.is_none_or(|turn| turn.final_answer.is_none() && turn.error.is_none()) {
            return Err(ReplayError::Unfinished);
        }
        Ok(Replay {
            records: Arc::new(records),
            registry: Arc::new(Registry::baked().clone()),
            providers: Providers::builtin_shared(),
            context: None,
            force: false,
        })
    }

    /// The registry the code runs with (default the baked one).
    pub fn registry(mut self, registry: impl Into<Arc<Registry>>) -> Replay {
        self.registry = registry.into();
        self
    }

    /// The providers the agents may call (default the built-in ones).
    pub fn providers(mut self, providers: Arc<Providers>) -> Replay {
        self.providers = providers;
        self
    }

    /// The root agent's context: it must be the one the trace records (its SHA-256 and
    /// chunks), unless [`force`](Replay::force)d.
    pub fn context(mut self, context: Context) -> Replay {
        self.context = Some(context);
        self
    }

    /// Runs even with another context than the recorded one (or without the recorded
    /// one); the run then likely diverges, which may be what is being checked.
    pub fn force(mut self, force: bool) -> Replay {
        self.force = force;
        self
    }

    /// Runs the recorded run again and compares it with the record.
    pub fn run(&self) -> Result<ReplayReport, ReplayError> {
        let root = root_start(&self.records).ok_or(ReplayError::NoRoot)?;
        self.check_context(root)?;
        let tapes = Arc::new(Tapes::of(&self.records));
        let written = Buffer::default();
        let rlm = self
            .rlm(root, Arc::clone(&tapes))?
            .replaying(tapes)
            .trace(written.clone());
        // The outcome is in the replay's own record, which is what is compared.
        let _ = rlm.run_report(&root.question, self.context.clone(), None);
        let replayed = parse(&written.text()).map_err(|e| ReplayError::Setup(e.to_string()))?;
        Ok(ReplayReport::of(&self.records, &replayed))
    }

    /// The context must be the recorded one; a trace older than the recording of a run's
    /// setup cannot say, and is not checked.
    fn check_context(&self, root: &Start) -> Result<(), ReplayError> {
        if self.force || root.setup.version.is_none() {
            return Ok(());
        }
        let recorded = root.setup.context.clone();
        let given = self.context.as_ref().map(ContextDigest::of);
        if recorded == given {
            return Ok(());
        }
        Err(ReplayError::ContextMismatch {
            recorded: recorded.map(|d| d.sha256),
            given: given.map(|d| d.sha256),
        })
    }

    /// An RLM set up as the recorded run was.
    fn rlm(&self, root: &Start, model: Arc<Tapes>) -> Result<Rlm, ReplayError> {
        let rlm = recorded_rlm(&root.setup, model, Arc::clone(&self.registry))
            .map_err(ReplayError::Setup)?;
        Ok(rlm.providers(Arc::clone(&self.providers)))
    }
}

/// An RLM asking `llm` with `registry`, set up as the run `setup` records was: its
/// limits, budgets, prompt mode, answer protocol and schema.
pub(crate) fn recorded_rlm(
    setup: &Setup,
    llm: Arc<dyn crate::llm::Llm>,
    registry: Arc<Registry>,
) -> Result<Rlm, String> {
    let limits = setup.limits;
    let max_iterations = limits.map_or(super::DEFAULT_MAX_ITERATIONS, |l| l.max_iterations);
    let mut rlm = Rlm::new(llm, registry, max_iterations)
        // Parsed as every other source of these settings is; a trace from before
        // they were recorded gets the defaults it was run with.
        .prompt_mode(recorded::<PromptMode>(setup.prompt_mode.as_deref()))
        .answer_protocol(recorded::<AnswerProtocol>(setup.answer_protocol.as_deref()));
    if let Some(limits) = limits {
        rlm = with_limits(rlm, &limits);
    }
    if let Some(schema) = &setup.answer_schema {
        let schema = AnswerSchema::new(schema.clone())
            .map_err(|error| format!("the recorded answer schema: {error}"))?;
        rlm = rlm.answer_schema(schema);
    }
    Ok(rlm)
}

/// A setting as the trace names it, or its default when the trace has none.
fn recorded<T: std::str::FromStr + Default>(name: Option<&str>) -> T {
    name.and_then(|name| name.parse().ok()).unwrap_or_default()
}

/// `rlm` with the recorded run's limits and budgets.
fn with_limits(rlm: Rlm, limits: &RunLimits) -> Rlm {
    let block = limits.block;
    let budgets = limits.budgets;
    let rlm = rlm
        .max_depth(limits.max_depth)
        .max_consecutive_errors(limits.max_consecutive_errors)
        .output_bytes(limits.output_bytes)
        .limits(Limits {
            time: Duration::from_millis(block.time_ms),
            memory_bytes: block.memory_bytes,
            output_bytes: block.output_bytes,
            llm_calls: block.llm_calls,
            recursion_depth: block.recursion_depth,
        })
        .budgets(Budgets {
            total_tokens: budgets.total_tokens,
            llm_calls: budgets.llm_calls,
            wall_time: budgets.wall_time_ms.map(Duration::from_millis),
            max_cost: budgets.max_cost,
        })
        // Compacting where the run did: a trace without the field ran without.
        .compact_at(limits.compact_at);
    match limits.context_window {
        Some(window) => rlm.context_window(window),
        None => rlm,
    }
}

/// `records` without a turn that a later line of the same agent and turn number replaces:
/// a resumed run writes again the turn that ended the first run, and the later line is
/// the turn.
fn superseded_left_out(records: Vec<Record>) -> Vec<Record> {
    let mut last = std::collections::HashMap::new();
    for (i, record) in records.iter().enumerate() {
        if let Record::Turn(turn) = record {
            last.insert((turn.agent.clone(), turn.turn), i);
        }
    }
    records
        .into_iter()
        .enumerate()
        .filter(|(i, record)| match record {
            Record::Turn(turn) => last.get(&(turn.agent.clone(), turn.turn)) == Some(i),
            _ => true,
        })
        .map(|(_, record)| record)
        .collect()
}

fn root_start(records: &[Record]) -> Option<&Start> {
    records.iter().find_map(|record| match record {
        Record::Start(start) if start.agent == "0" => Some(start),
        _ => None,
    })
}

/// Every line of `text` as a record; events this version does not know are skipped.
fn parse(text: &str) -> Result<Vec<Record>, ReplayError> {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let mut records = Vec::with_capacity(lines.len());
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Record>(line) {
            Ok(Record::Unknown) => {}
            Ok(record) => records.push(record),
            Err(error) => {
                return Err(ReplayError::Line {
                    line: i + 1,
                    message: error.to_string(),
                    cut_short: i + 1 == lines.len() && !line.ends_with('\n'),
                });
            }
        }
    }
    Ok(records)
}

/// Why a replay could not run.
#[derive(Debug)]
#[non_exhaustive]
pub enum ReplayError {
    /// The trace file could not be read.
    Read {
        /// The file.
        path: String,
        /// Why.
        error: io::Error,
    },
    /// A line is not a trace record.
    Line {
        /// 1-based.
        line: usize,
        /// Why it could not be read.
        message: String,
        /// It is the last line and has no newline: the file was cut short.
        cut_short: bool,
    },
    /// No `start` line of the root agent: not a trace of a run.
    NoRoot,
    /// The root agent's last turn has neither an answer nor an error: the trace ends
    /// before the run did.
    Unfinished,
    /// The context given is not the recorded one (SHA-256 of each, `None` for none).
    ContextMismatch {
        /// The recorded context's.
        recorded: Option<String>,
        /// The given context's.
        given: Option<String>,
    },
    /// The recorded setup cannot be used today (an answer schema that no longer
    /// compiles, say).
    Setup(String),
}

impl fmt::Display for ReplayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReplayError::Read { path, error } => write!(f, "cannot read {path}: {error}"),
            ReplayError::Line {
                line,
                message,
                cut_short: true,
            } => write!(
                f,
                "line {line} is cut short ({message}): the trace is incomplete"
            ),
            ReplayError::Line { line, message, .. } => write!(
                f,
                "line {line} is not a trace record ({message}); replay reads the event log `rlm ask --trace` writes"
            ),
            ReplayError::NoRoot => f.write_str(
                "no start line of the root agent: not the trace of a run (`rlm ask --trace` writes one)",
            ),
            ReplayError::Unfinished => f.write_str(
                "the trace ends before the run did: the root agent's last turn has neither an answer nor an error",
            ),
            ReplayError::ContextMismatch { recorded, given } => {
                let digest = |d: &Option<String>| d.clone().unwrap_or_else(|| "none".into());
                write!(
                    f,
                    "the context is not the recorded one (recorded sha256 {}, given {}); give the recorded context with --context, or --force to replay anyway",
                    digest(recorded),
                    digest(given)
                )
            }
            ReplayError::Setup(message) => write!(f, "cannot replay: {message}"),
        }
    }
}

impl std::error::Error for ReplayError {}

/// The replay's own trace, kept in memory to be compared.
#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Buffer {
    fn text(&self) -> String {
        let bytes = self.0.lock().unwrap_or_else(|p| p.into_inner());
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

impl Write for Buffer {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let mut buffer = self.0.lock().unwrap_or_else(|p| p.into_inner());
        buffer.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_that_is_not_a_record_is_an_error_that_says_whether_the_file_was_cut() {
        let start = r#"{"event":"start","agent":"0","question":"Q"}"#;
        let turn = r#"{"event":"turn","agent":"0","turn":1,"final":"1"}"#;
        let records = parse(&format!("{start}\n\n{{\"event\":\"later\"}}\n{turn}\n")).unwrap();
        assert_eq!(
            records.len(),
            2,
            "blank lines and unknown events are skipped"
        );
        let cut = parse(&format!("{start}\n{}", &turn[..10])).unwrap_err();
        assert!(
            matches!(
                cut,
                ReplayError::Line {
                    line: 2,
                    cut_short: true,
                    ..
                }
            ),
            "{cut}"
        );
        let foreign = parse("{\"type\":\"metadata\"}\n").unwrap_err();
        assert!(matches!(
            foreign,
            ReplayError::Line {
                line: 1,
                cut_short: false,
                ..
            }
        ));
        assert!(Replay::from_jsonl(&format!("{start}\n{turn}\n")).is_ok());
        assert!(matches!(
            Replay::from_jsonl(&format!("{turn}\n")),
            Err(ReplayError::NoRoot)
        ));
        let unfinished = r#"{"event":"turn","agent":"0","turn":1,"reply":"x"}"#;
        assert!(matches!(
            Replay::from_jsonl(&format!("{start}\n{unfinished}\n")),
            Err(ReplayError::Unfinished)
        ));
    }
}
