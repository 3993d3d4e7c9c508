//! [`Resume`]: a run interrupted (killed, its server gone, a budget or the iteration cap
//! reached) goes on from its trace. Every agent is rebuilt by running its recorded code
//! again with its recorded replies and answers (no request is sent for them), then the
//! run continues live from the first turn that is not complete, appending to the same
//! trace: a `resume` line, then only what was not on file.
//!
//! `tape` plays the record back (falling through to the live model past it); `on_file`
//! reads what the trace holds.

mod on_file;
mod session;

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::Registry;
use crate::environment::User;
use crate::llm::Llm;

use super::builder::Rlm;
use super::context::Context;
use super::replay::{Tapes, recorded_rlm};
use super::report::{Report, RlmError};
use super::trajectory::{
    ContextDigest, Record, RegistryDigest, ResumeRecord, Setup, Start, millis,
};

pub(crate) use on_file::OnFile;
pub use session::Playback;
pub(crate) use session::check_recorded;

/// What a resumed run carries beside its settings: the run's clock so far and the lines
/// its trace holds.
pub(crate) struct Resuming {
    /// How long the run had run, by the last line on file.
    pub elapsed: Duration,
    /// When it began, on the wall clock.
    pub started_unix_ms: u64,
    /// The lines not to write again.
    pub on_file: Arc<OnFile>,
}

/// A run to resume from its trace (the event log `rlm ask --trace` writes). A torn last
/// line (the process killed mid-write) is ignored, and cut from the file before the
/// resumed run appends.
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use rlm_registry::Registry;
/// use rlm_registry::llm::{Completion, Llm, LlmError, Request};
/// use rlm_registry::rlm::{Context, Resume, Rlm};
///
/// /// Sets a variable, then fails (the server went away), then reads it back.
/// struct Server(AtomicUsize);
/// impl Llm for Server {
///     fn complete(&self, _request: Request) -> Result<Completion, LlmError> {
///         match self.0.fetch_add(1, Ordering::SeqCst) {
///             0 => Ok(Completion::new("```lua\nn = line_count(context)\n```")),
///             1 => Err(LlmError::Callback("the server went away".into())),
///             _ => Ok(Completion::new("```lua\nFINAL(n .. ' lines')\n```")),
///         }
///     }
/// }
///
/// let path = std::env::temp_dir().join("rlm-resume-doctest.jsonl");
/// let server = Arc::new(Server(AtomicUsize::new(0)));
/// let rlm = Rlm::new(server.clone(), Registry::baked().clone(), 5);
/// let context = || Some(Context::from("a\nb\n"));
/// assert!(rlm.clone().trace_file(&path)?.run("How many lines?", context()).is_err());
///
/// let resume = Resume::from_file(&path)?;
/// assert_eq!(resume.question(), "How many lines?");
/// let report = resume.run(rlm, context(), None)?;
/// assert_eq!(report.result?, "2 lines");
/// assert_eq!(server.0.load(Ordering::SeqCst), 3, "turn 1 was not asked again");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Resume {
    path: PathBuf,
    records: Arc<Vec<Record>>,
    /// The root agent's `start` line.
    root: Arc<Start>,
    /// Bytes of the file up to its last whole line.
    whole: u64,
    /// The last line is whole but for its newline.
    newline: bool,
    force: bool,
    overrides: Vec<String>,
}

impl fmt::Debug for Resume {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Resume")
            .field("path", &self.path)
            .field("records", &self.records.len())
            .field("force", &self.force)
            .finish()
    }
}

impl Resume {
    /// The run recorded at `path`.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Resume, ResumeError> {
        let path = path.as_ref();
        let read_error = |error| ResumeError::Read {
            path: path.display().to_string(),
            error,
        };
        let bytes = std::fs::read(path).map_err(read_error)?;
        let (records, whole) = parse(&bytes)?;
        let newline = whole > 0 && bytes.get(whole as usize - 1) != Some(&b'\n');
        let root = records
            .iter()
            .find_map(|r| match r {
                Record::Start(start) if start.agent == "0" => Some(start.clone()),
                _ => None,
            })
            .ok_or(ResumeError::NoRoot)?;
        Ok(Resume {
            path: path.to_path_buf(),
            records: Arc::new(records),
            root: Arc::new(root),
            whole,
            newline,
            force: false,
            overrides: Vec::new(),
        })
    }

    /// Goes on even with another context or registry than the recorded ones.
    pub fn force(mut self, force: bool) -> Resume {
        self.force = force;
        self
    }

    /// The settings given again that differ from the record's, named in the `resume`
    /// line (`max_iterations`, …).
    pub fn overrides(mut self, overrides: Vec<String>) -> Resume {
        self.overrides = overrides;
        self
    }

    /// The root agent's `start` line.
    pub fn root(&self) -> &Start {
        &self.root
    }

    /// The question the run answers.
    pub fn question(&self) -> &str {
        &self.root().question
    }

    /// What the run was: model, server, limits, context, registry.
    pub fn setup(&self) -> &Setup {
        &self.root().setup
    }

    /// The answer, when the run had finished with one: a resume sends nothing then.
    pub fn finished(&self) -> Option<&str> {
        let last = self.records.iter().rev().find_map(|r| match r {
            Record::Turn(turn) if turn.agent == "0" => Some(turn),
            _ => None,
        })?;
        last.final_answer.as_deref()
    }

    /// An RLM set up as the recorded run was (limits, budgets, prompt, answer schema),
    /// asking `llm` with `registry`: what [`run`](Resume::run) takes when nothing is
    /// given again.
    pub fn rlm(&self, llm: Arc<dyn Llm>, registry: Arc<Registry>) -> Result<Rlm, ResumeError> {
        recorded_rlm(self.setup(), llm, registry).map_err(ResumeError::Setup)
    }

    /// Resumes the run with `rlm` (its model, registry and settings; see
    /// [`Resume::rlm`]), `context` (the recorded one, checked by its hash unless forced)
    /// and `user` behind `ask_user`: plays back what is on file, goes on live, and appends
    /// to the trace. A finished run gives its answer and sends nothing.
    pub fn run(
        &self,
        rlm: Rlm,
        context: Option<Context>,
        user: Option<Arc<dyn User>>,
    ) -> Result<Report, ResumeError> {
        self.check(&rlm, context.as_ref())?;
        if let Some(answer) = self.finished() {
            return Ok(self.finished_report(answer));
        }
        let mut file = self.append().map_err(ResumeError::Trace)?;
        let tapes = Tapes::resumed(on_file::played_back(&self.records), rlm.model());
        let elapsed = self.elapsed();
        let mark = self.mark(elapsed);
        let mut line =
            serde_json::to_string(&mark).map_err(|e| ResumeError::Setup(e.to_string()))?;
        line.push('\n');
        file.write_all(line.as_bytes())
            .and_then(|()| file.flush())
            .map_err(ResumeError::Trace)?;
        let resuming = Resuming {
            elapsed,
            started_unix_ms: self.setup().started_unix_ms.unwrap_or_default(),
            on_file: Arc::new(OnFile::of(&self.records)),
        };
        let rlm = rlm
            .trace(file)
            .resuming(Arc::new(tapes), Arc::new(resuming));
        Ok(rlm.run_report(self.question(), context, user))
    }

    /// Whether [`run`](Resume::run) would go on with `rlm`'s registry and `context`:
    /// the recorded ones, unless forced.
    pub fn check(&self, rlm: &Rlm, context: Option<&Context>) -> Result<(), ResumeError> {
        self.check_context(context)?;
        self.check_registry(rlm.registry())
    }

    fn check_context(&self, given: Option<&Context>) -> Result<(), ResumeError> {
        check_context(self.setup(), self.force, given)
    }

    fn check_registry(&self, registry: &Registry) -> Result<(), ResumeError> {
        check_registry(self.setup(), self.force, registry)
    }

    /// The report of a run that had finished: its answer, its turns, no usage.
    fn finished_report(&self, answer: &str) -> Report {
        let turns = self
            .records
            .iter()
            .filter_map(|r| match r {
                Record::Turn(turn) if turn.agent == "0" => Some(turn.turn),
                _ => None,
            })
            .max()
            .unwrap_or_default();
        let value = self
            .setup()
            .answer_schema
            .as_ref()
            .and_then(|_| serde_json::from_str(answer).ok());
        Report {
            result: Ok(answer.to_string()),
            value,
            turns,
            usage: Default::default(),
        }
    }

    /// How long the run had run: the clock of its last line.
    fn elapsed(&self) -> Duration {
        let ms = self.records.iter().filter_map(Record::at_ms).max();
        Duration::from_millis(ms.unwrap_or_default())
    }

    /// The `resume` line.
    fn mark(&self, elapsed: Duration) -> Record {
        let tapes = on_file::played_back(&self.records);
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, millis);
        Record::Resume(ResumeRecord {
            version: Some(env!("CARGO_PKG_VERSION").to_string()),
            agents: tapes.len(),
            turns: tapes.values().map(|played| played.replies.len()).sum(),
            calls: tapes.values().map(|played| played.calls.len()).sum(),
            overrides: self.overrides.clone(),
            resumed_unix_ms: Some(now),
            at_ms: Some(millis(elapsed)),
        })
    }

    /// The trace, opened to append after its last whole line (a torn line cut away).
    fn append(&self) -> io::Result<File> {
        let mut file = OpenOptions::new().write(true).open(&self.path)?;
        file.set_len(self.whole)?;
        file.seek(SeekFrom::End(0))?;
        if self.newline {
            file.write_all(b"\n")?;
        }
        Ok(file)
    }
}

/// Whether `given` is the context `setup` records (or `force`).
pub(super) fn check_context(
    setup: &Setup,
    force: bool,
    given: Option<&Context>,
) -> Result<(), ResumeError> {
    let recorded = &setup.context;
    let given = given.map(ContextDigest::of);
    if force || *recorded == given {
        return Ok(());
    }
    Err(ResumeError::ContextMismatch {
        recorded: recorded.clone(),
        given,
    })
}

/// Whether `registry` is the one `setup` records, if it records one (or `force`).
pub(super) fn check_registry(
    setup: &Setup,
    force: bool,
    registry: &Registry,
) -> Result<(), ResumeError> {
    let Some(recorded) = &setup.registry else {
        return Ok(());
    };
    let today = RegistryDigest::of(registry);
    if force || today.sha256 == recorded.sha256 {
        return Ok(());
    }
    Err(ResumeError::RegistryMismatch {
        differences: today.differences(recorded),
    })
}

/// The records of a trace's `bytes`, and the bytes up to its last whole line. A last line
/// with no newline that is not a record was torn mid-write and is left out; any other line
/// that is not a record makes it no trace.
fn parse(bytes: &[u8]) -> Result<(Vec<Record>, u64), ResumeError> {
    let text = String::from_utf8_lossy(bytes);
    let mut records = Vec::new();
    let mut whole = 0u64;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let complete = line.ends_with('\n');
        if line.trim().is_empty() {
            whole += line.len() as u64;
            continue;
        }
        match serde_json::from_str::<Record>(line) {
            Ok(Record::Unknown) => {}
            Ok(record) => records.push(record),
            Err(_) if !complete => break,
            Err(error) => {
                return Err(ResumeError::NotATrace {
                    line: i + 1,
                    message: error.to_string(),
                });
            }
        }
        whole += line.len() as u64;
    }
    Ok((records, whole))
}

/// Why a run cannot be resumed.
#[derive(Debug)]
#[non_exhaustive]
pub enum ResumeError {
    /// The trace could not be read.
    Read {
        /// The file.
        path: String,
        /// Why.
        error: io::Error,
    },
    /// A line is not a trace record.
    NotATrace {
        /// 1-based.
        line: usize,
        /// Why it could not be read.
        message: String,
    },
    /// No `start` line of the root agent.
    NoRoot,
    /// The context given is not the recorded one.
    ContextMismatch {
        /// The recorded context's digest (`None`: the run had none).
        recorded: Option<ContextDigest>,
        /// The given one's.
        given: Option<ContextDigest>,
    },
    /// The registry is not the one the run had: the functions that differ (`+name` new,
    /// `-name` gone, `~name` changed).
    RegistryMismatch {
        /// Each difference.
        differences: Vec<String>,
    },
    /// The recorded setup cannot be used today.
    Setup(String),
    /// The trace could not be appended to.
    Trace(io::Error),
}

impl fmt::Display for ResumeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResumeError::Read { path, error } => write!(f, "cannot read {path}: {error}"),
            ResumeError::NotATrace { line, message } => write!(
                f,
                "line {line} is not a trace record ({message}); --resume reads the event log `rlm ask --trace` writes"
            ),
            ResumeError::NoRoot => f.write_str(
                "no start line of the root agent: not the trace of a run (`rlm ask --trace` writes one)",
            ),
            ResumeError::ContextMismatch { recorded, given } => {
                let describe = |d: &Option<ContextDigest>| match d {
                    Some(d) => format!("{} bytes, sha256 {}", d.bytes, d.sha256),
                    None => "none".to_string(),
                };
                write!(
                    f,
                    "the context is not the recorded one (recorded: {}; given: {}); give the recorded context with --context, or --force to resume anyway",
                    describe(recorded),
                    describe(given)
                )
            }
            ResumeError::RegistryMismatch { differences } => {
                let shown: Vec<&str> = differences.iter().take(10).map(String::as_str).collect();
                let more = differences.len().saturating_sub(shown.len());
                write!(
                    f,
                    "the registry is not the recorded one: {}{} (+ new, - gone, ~ changed); use the recorded registry, or --force to resume anyway",
                    shown.join(", "),
                    if more > 0 { format!(" and {more} more") } else { String::new() }
                )
            }
            ResumeError::Setup(message) => write!(f, "cannot resume: {message}"),
            ResumeError::Trace(error) => write!(f, "cannot append to the trace: {error}"),
        }
    }
}

impl std::error::Error for ResumeError {}

impl From<ResumeError> for RlmError {
    fn from(error: ResumeError) -> RlmError {
        RlmError::Setup(error.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_torn_last_line_is_left_out_and_a_broken_line_before_it_is_no_trace() {
        let start = r#"{"event":"start","agent":"0","question":"Q"}"#;
        let text = format!("{start}\n{{\"event\":\"tu");
        let (records, whole) = parse(text.as_bytes()).unwrap();
        assert_eq!(records.len(), 1);
        assert_eq!(whole, start.len() as u64 + 1);
        let broken = format!("{{\"event\":\"tu\n{start}\n");
        assert!(matches!(
            parse(broken.as_bytes()),
            Err(ResumeError::NotATrace { line: 1, .. })
        ));
        let foreign = "{\"type\":\"metadata\"}\n";
        assert!(parse(foreign.as_bytes()).is_err());
    }
}

#[cfg(test)]
mod clock_tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::super::budget::{BudgetExceeded, Budgets, Ledger};
    use crate::Registry;
    use crate::llm::{Completion, Llm, LlmError, Request};
    use crate::rlm::Rlm;

    struct Unused;
    impl Llm for Unused {
        fn complete(&self, _request: Request) -> Result<Completion, LlmError> {
            Err(LlmError::Callback("not asked".into()))
        }
    }

    #[test]
    fn a_resumed_run_counts_its_wall_time_from_its_first_start() {
        let budgets = Budgets::default().with_wall_time(Duration::from_secs(60));
        let rlm = Rlm::new(Arc::new(Unused), Registry::baked().clone(), 1).budgets(budgets);
        let spent = Ledger::resumed(rlm.settings(), Duration::from_secs(61));
        assert!(matches!(
            spent.check(),
            Err(BudgetExceeded::WallTime { .. })
        ));
        let left = Ledger::resumed(rlm.settings(), Duration::from_secs(20));
        assert!(left.check().is_ok());
        let remaining = left.remaining_time().unwrap();
        assert!(remaining <= Duration::from_secs(40), "{remaining:?}");
    }
}
