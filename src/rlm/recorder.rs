//! Writing a run down: [`Sink`], the line-oriented writer every agent of a run shares (the
//! trace and the live view each have one), and [`Recorder`], one run's trajectory on a
//! sink: it stamps each [`Record`] with the run's clock and writes it as one JSON line,
//! or in the reference RLM's format through the converter, and hands it to the run's
//! [`Observer`] (an ACP session shows the run from these records as it goes).

use std::io::{self, Write};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use super::builder::Rlm;
use super::resume::OnFile;
use super::rlm_log::{RlmLog, TraceFormat};
use super::trajectory::{Record, millis};

/// A line-oriented sink shared by every agent of a run (children write from their own
/// threads): each write is whole and flushed at once.
pub(crate) struct Sink {
    writer: Mutex<Box<dyn Write + Send>>,
}

impl Sink {
    pub fn new(writer: Box<dyn Write + Send>) -> Sink {
        Sink {
            writer: Mutex::new(writer),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Box<dyn Write + Send>> {
        self.writer
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Writes `text` (which should end with a newline) and flushes, so a crash loses
    /// nothing written.
    pub fn write(&self, text: &str) -> io::Result<()> {
        let mut writer = self.lock();
        writer.write_all(text.as_bytes())?;
        writer.flush()
    }
}

/// Sees each record of a run as it is made ([`Rlm::observe`](super::Rlm::observe)),
/// stamped with the run's clock, from the thread of the agent that made it.
pub type Observer = Arc<dyn Fn(&Record) + Send + Sync>;

/// One run's trajectory: the run's clock, and the converter when the trace is in the
/// reference RLM's format (it holds the run's conversations).
pub(crate) struct Recorder {
    /// The trace, when there is one (a run may only be observed).
    sink: Option<Arc<Sink>>,
    observer: Option<Observer>,
    converter: Option<Mutex<RlmLog>>,
    /// When the run began: each line says how long after it was written (`at_ms`).
    started: Instant,
    /// The same moment on the wall clock, for the `start` lines.
    started_unix_ms: u64,
    /// In a resumed run, what the trace already holds: not written again.
    on_file: Option<Arc<OnFile>>,
}

impl Recorder {
    /// Starts recording a run on `sink`, in `format`, for `observer`; `None` when there is
    /// neither.
    pub fn start(
        sink: Option<Arc<Sink>>,
        format: &TraceFormat,
        observer: Option<Observer>,
    ) -> Option<Recorder> {
        if sink.is_none() && observer.is_none() {
            return None;
        }
        let converter = match format {
            TraceFormat::Events => None,
            TraceFormat::Rlm => Some(Mutex::new(RlmLog::default())),
        };
        let started_unix_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, millis);
        Some(Recorder {
            sink,
            observer,
            converter,
            started: Instant::now(),
            started_unix_ms,
            on_file: None,
        })
    }

    /// Whether the records go to a trace (not only to an observer): a `start` record,
    /// which hashes the context, is made only for a trace.
    pub fn writes_trace(&self) -> bool {
        self.sink.is_some()
    }

    /// Goes on recording a run that began `elapsed` ago, at `started_unix_ms`, on a trace
    /// that already holds `on_file`.
    pub fn resumed(
        mut self,
        elapsed: std::time::Duration,
        started_unix_ms: u64,
        on_file: Arc<OnFile>,
    ) -> Recorder {
        self.started = Instant::now().checked_sub(elapsed).unwrap_or(self.started);
        self.started_unix_ms = started_unix_ms;
        self.on_file = Some(on_file);
        self
    }

    /// Stamps `record` with the run's clock (`at_ms`, and on a `start` line the run's
    /// wall-clock start) and writes it, converted first if the trace converts.
    pub fn record(&self, mut record: Record) -> io::Result<()> {
        let at_ms = Some(millis(self.started.elapsed()));
        match &mut record {
            Record::Start(start) => {
                start.at_ms = at_ms;
                start.setup.started_unix_ms = Some(self.started_unix_ms);
            }
            Record::Turn(turn) => turn.at_ms = at_ms,
            Record::Reply(reply) => reply.at_ms = at_ms,
            Record::Call(call) => call.at_ms = at_ms,
            Record::Resume(resume) => resume.at_ms = at_ms,
            Record::Compaction(compaction) => compaction.at_ms = at_ms,
            Record::Unknown => {}
        }
        if let Some(observer) = &self.observer {
            observer(&record);
        }
        if let Some(on_file) = &self.on_file
            && on_file.holds(&record)
        {
            return Ok(());
        }
        let Some(sink) = &self.sink else {
            return Ok(());
        };
        let Some(converter) = &self.converter else {
            return write_line(sink, &record);
        };
        // Written under the converter's lock, so lines go out in the order they were made.
        let mut converter = converter
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let lines = converter.push(&record);
        lines.iter().try_for_each(|line| write_line(sink, line))
    }
}

fn write_line(sink: &Sink, value: &impl serde::Serialize) -> io::Result<()> {
    let mut line = serde_json::to_string(value).map_err(io::Error::other)?;
    line.push('\n');
    sink.write(&line)
}

impl Rlm {
    /// Hands `observer` each record of every run as it is made, from the thread of the
    /// agent that made it: the records a [trace](Rlm::trace) holds (`reply` as a reply
    /// arrives, before its code runs; `call` as each sub-call is answered; `turn` when a
    /// turn ends; `compaction`), whether or not a trace is written, except `start`,
    /// made only for a trace. Keep it quick: the agent waits for it.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use rlm_registry::Registry;
    /// use rlm_registry::llm::{Completion, Llm, LlmError, Request};
    /// use rlm_registry::rlm::{Rlm, trajectory::Record};
    ///
    /// struct Answers;
    /// impl Llm for Answers {
    ///     fn complete(&self, _request: Request) -> Result<Completion, LlmError> {
    ///         Ok(Completion::new("```lua\nFINAL('done')\n```"))
    ///     }
    /// }
    ///
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let log = Arc::clone(&seen);
    /// let rlm = Rlm::new(Arc::new(Answers), Registry::baked().clone(), 5).observe(move |record| {
    ///     let kind = match record {
    ///         Record::Reply(_) => "reply",
    ///         Record::Turn(_) => "turn",
    ///         _ => "other",
    ///     };
    ///     log.lock().unwrap().push(kind);
    /// });
    /// rlm.run("Q", None).unwrap();
    /// assert_eq!(*seen.lock().unwrap(), ["reply", "turn"]);
    /// ```
    pub fn observe(mut self, observer: impl Fn(&Record) + Send + Sync + 'static) -> Rlm {
        self.config.observer = Some(Arc::new(observer));
        self
    }
}
