//! [`Playback`]: a session ([`RlmSession`](crate::rlm::RlmSession)) rebuilt from the
//! traces of its questions, one trace per question. Each question is asked again with its
//! own record on the tapes: the root's turns restart at 1 on each question, so the tapes
//! are loaded afresh before each. While the playback lasts, a request the record lacks is
//! refused rather than sent, so rebuilding a session sends nothing; once it is finished,
//! the session asks the live model.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::Registry;
use crate::llm::{Completion, Llm, LlmError, ModelInfo, Request};

use super::super::builder::Rlm;
use super::super::context::Context;
use super::super::replay::Tapes;
use super::super::trajectory::Record;
use super::{ResumeError, check_context, check_registry, on_file, parse};

/// What a request the record lacks gets while a session is played back.
const OFF_THE_RECORD: &str = "not on the record: the agent stopped before this question was answered, and a stored session is rebuilt without asking the model";

/// The handle of a session being rebuilt from its record: see [`Rlm::playing_back`].
pub struct Playback {
    tapes: Arc<Tapes>,
    gate: Arc<Gate>,
}

impl std::fmt::Debug for Playback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Playback")
            .field("finished", &self.gate.open.load(Ordering::SeqCst))
            .finish()
    }
}

impl Rlm {
    /// This RLM set to rebuild a session from the record of its questions: before each
    /// earlier question is asked again, [`Playback::question`] puts its record on the
    /// tapes, and the replies and answers come from there (the code runs again, so the
    /// REPL state comes back). A question cut short (the agent was killed) plays its whole
    /// turns and ends unanswered. Nothing reaches the model until
    /// [`Playback::finish`]; from then on the session asks it live.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use rlm_registry::Registry;
    /// use rlm_registry::llm::{Completion, Llm, LlmError, Request};
    /// use rlm_registry::rlm::{Playback, Rlm};
    ///
    /// struct Scripted(AtomicUsize);
    /// impl Llm for Scripted {
    ///     fn complete(&self, _request: Request) -> Result<Completion, LlmError> {
    ///         Ok(Completion::new(match self.0.fetch_add(1, Ordering::SeqCst) {
    ///             0 => "```lua\nseen = 41\nFINAL('noted')\n```",
    ///             _ => "```lua\nFINAL(seen + 1)\n```",
    ///         }))
    ///     }
    /// }
    ///
    /// let path = std::env::temp_dir().join("rlm-playback-doctest.jsonl");
    /// let server = Arc::new(Scripted(AtomicUsize::new(0)));
    /// let rlm = Rlm::new(server.clone(), Registry::baked().clone(), 5);
    /// rlm.clone().trace_file(&path)?.session(None)?.ask("Remember 41.");
    ///
    /// let (rebuilt, playback) = rlm.playing_back();
    /// let mut session = rebuilt.session(None)?;
    /// let record = Playback::read(&path)?;
    /// session.check_recorded(&record)?;
    /// playback.question(&record);
    /// assert_eq!(session.ask("Remember 41.").result?, "noted");
    /// playback.finish();
    /// assert_eq!(session.ask("What comes after it?").result?, "42");
    /// assert_eq!(server.0.load(Ordering::SeqCst), 2, "the first reply was not asked again");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn playing_back(mut self) -> (Rlm, Playback) {
        let gate = Arc::new(Gate {
            live: self.model(),
            open: AtomicBool::new(false),
        });
        let tapes = Arc::new(Tapes::live(Arc::clone(&gate) as Arc<dyn Llm>));
        self.config.replay = Some(Arc::clone(&tapes));
        (self, Playback { tapes, gate })
    }
}

impl Playback {
    /// The records of the trace at `path`; a torn last line (the agent killed mid-write)
    /// is left out.
    pub fn read(path: impl AsRef<Path>) -> Result<Vec<Record>, ResumeError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|error| ResumeError::Read {
            path: path.display().to_string(),
            error,
        })?;
        parse(&bytes).map(|(records, _)| records)
    }

    /// Puts the record of the next question to ask again on the tapes, in place of the
    /// last one's: its whole turns (a turn the agent was killed in is left out, and
    /// refused when asked).
    pub fn question(&self, records: &[Record]) {
        let whole: Vec<Record> = records
            .iter()
            .filter(|record| !matches!(record, Record::Reply(_) | Record::Call(_)))
            .cloned()
            .collect();
        self.tapes.load(on_file::played_back(&whole));
    }

    /// Ends the playback: what the tapes still hold is dropped, and from now on every
    /// request goes to the model.
    pub fn finish(&self) {
        self.tapes.load(HashMap::new());
        self.gate.open.store(true, Ordering::SeqCst);
    }
}

/// Whether the question `records` hold was asked over `context` with `registry`: the
/// check a resumed run makes, on the root's `start` line (none: nothing to check).
pub(crate) fn check_recorded(
    records: &[Record],
    registry: &Registry,
    context: Option<&Context>,
) -> Result<(), ResumeError> {
    let start = records.iter().find_map(|record| match record {
        Record::Start(start) if start.agent == "0" => Some(start),
        _ => None,
    });
    let Some(start) = start else {
        return Ok(());
    };
    check_context(&start.setup, false, context)?;
    check_registry(&start.setup, false, registry)
}

/// The live model behind a closed gate until the playback is finished.
struct Gate {
    live: Arc<dyn Llm>,
    open: AtomicBool,
}

impl Gate {
    fn closed(&self) -> bool {
        !self.open.load(Ordering::SeqCst)
    }

    fn complete_closed(&self) -> Result<Completion, LlmError> {
        Err(LlmError::Callback(OFF_THE_RECORD.to_string()))
    }
}

impl Llm for Gate {
    fn complete(&self, request: Request) -> Result<Completion, LlmError> {
        if self.closed() {
            return self.complete_closed();
        }
        self.live.complete(request)
    }

    fn complete_batch(&self, requests: Vec<Request>) -> Vec<Result<Completion, LlmError>> {
        if self.closed() {
            return requests.iter().map(|_| self.complete_closed()).collect();
        }
        self.live.complete_batch(requests)
    }

    fn complete_batch_at(
        &self,
        requests: Vec<Request>,
        max_concurrency: usize,
    ) -> Vec<Result<Completion, LlmError>> {
        if self.closed() {
            return requests.iter().map(|_| self.complete_closed()).collect();
        }
        self.live.complete_batch_at(requests, max_concurrency)
    }

    fn max_concurrency(&self) -> usize {
        self.live.max_concurrency()
    }

    fn model_info(&self) -> Option<ModelInfo> {
        self.live.model_info()
    }

    fn cached_answer(&self, request: &Request) -> Option<Completion> {
        if self.closed() {
            return None;
        }
        self.live.cached_answer(request)
    }
}
