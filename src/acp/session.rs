//! One ACP session: a thread of its own holding an [`RlmSession`] (the Lua state lives on
//! the thread that made it), answering the prompts the reader hands it one at a time,
//! streaming what the loop does as `session/update`s.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value as Json;

use crate::corpus::{Document, Gathered, gather};
use crate::environment::Interrupt;
use crate::rlm::{Context, Playback, Report, Rlm, RlmError, RlmSession};

use super::content;
use super::schema::{ContentBlock, PromptResponse, SessionNotification, SessionUpdate, StopReason};
use super::store::{PromptTrace, SessionFiles, Store};
use super::updates::Updates;
use super::wire::{
    INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, Outgoing, RpcError,
};

/// What the reader and every session share.
pub(crate) struct Shared {
    pub rlm: Rlm,
    /// `--context`: every session's context, over the client's `cwd`.
    pub context_paths: Vec<PathBuf>,
    /// `--state-dir`: where sessions are kept, to be loaded again.
    pub store: Option<Store>,
    pub out: Outgoing,
    sessions: Mutex<HashMap<String, Handle>>,
    /// Set when the input ended: a session still opening closes at once.
    closed: AtomicBool,
    next_id: AtomicU64,
    /// Each session thread holds a clone; the reader waits for them all to be dropped.
    alive: Mutex<Option<Sender<()>>>,
}

/// How the reader reaches a session's thread.
struct Handle {
    prompts: Sender<Job>,
    /// A prompt is running: a second one is refused.
    busy: Arc<AtomicBool>,
    cancel: Interrupt,
}

/// A prompt to answer, with the id of its request.
pub(crate) struct Job {
    pub id: Json,
    pub prompt: Vec<ContentBlock>,
}

impl Shared {
    /// The state of an agent answering on `out`; the receiver ends once every session
    /// thread has.
    pub fn new(
        rlm: Rlm,
        context_paths: Vec<PathBuf>,
        store: Option<Store>,
        out: Outgoing,
    ) -> (Arc<Shared>, Receiver<()>) {
        let (alive, ended) = mpsc::channel();
        let shared = Shared {
            rlm,
            context_paths,
            store,
            out,
            sessions: Mutex::default(),
            closed: AtomicBool::new(false),
            next_id: AtomicU64::new(1),
            alive: Mutex::new(Some(alive)),
        };
        (Arc::new(shared), ended)
    }

    fn sessions(&self) -> MutexGuard<'_, HashMap<String, Handle>> {
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Opens a session on a thread of its own, which answers request `id` once the
    /// session is ready (its context loaded, a loaded one's history streamed), or with
    /// the error.
    pub fn open(self: &Arc<Shared>, id: Json, opening: Opening) {
        let alive = self.alive.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let Some(alive) = alive else {
            return;
        };
        let shared = Arc::clone(self);
        let reply_to = id.clone();
        let spawned = std::thread::Builder::new()
            .name("acp session".to_string())
            .spawn(move || {
                let _alive = alive;
                shared.run(id, opening);
            });
        if let Err(error) = spawned {
            let error = RpcError::new(INTERNAL_ERROR, format!("cannot start a session: {error}"));
            self.out.error(&reply_to, &error);
        }
    }

    /// A session's thread: opens or loads the session, registers it, then answers its
    /// prompts until the reader lets go of it.
    fn run(self: Arc<Shared>, id: Json, opening: Opening) {
        let cancel = Interrupt::new();
        let updates = Arc::new(Mutex::new(Updates::default()));
        let loading = matches!(opening, Opening::Load { .. });
        let opened = match opening {
            Opening::New { cwd } => self.new_session(&cwd, &cancel, &updates),
            Opening::Load { session_id, cwd } => self.load(&session_id, &cwd, &cancel, &updates),
        };
        let Opened {
            session_id,
            mut session,
            mut files,
        } = match opened {
            Ok(opened) => opened,
            Err(error) => return self.out.error(&id, &error),
        };
        let (prompts, jobs) = mpsc::channel();
        let busy = Arc::new(AtomicBool::new(false));
        {
            let mut sessions = self.sessions();
            if self.closed.load(Ordering::SeqCst) {
                return;
            }
            if sessions.contains_key(&session_id) {
                let message = format!("session {session_id} is open already");
                return self
                    .out
                    .error(&id, &RpcError::new(INVALID_REQUEST, message));
            }
            let handle = Handle {
                prompts,
                busy: Arc::clone(&busy),
                cancel: cancel.clone(),
            };
            sessions.insert(session_id.clone(), handle);
        }
        match loading {
            // ACP's LoadSessionResponse: nothing this agent needs to say.
            true => self.out.respond(&id, &serde_json::json!({})),
            false => self
                .out
                .respond(&id, &serde_json::json!({ "sessionId": session_id })),
        }
        for job in jobs {
            let answered = self.answer(
                &session_id,
                &mut session,
                &updates,
                job.prompt,
                files.as_mut(),
            );
            // Free before the response goes out: the client may send the next prompt
            // as soon as it reads it.
            busy.store(false, Ordering::SeqCst);
            match answered {
                Ok(response) => self.out.respond(&job.id, &response),
                Err(error) => self.out.error(&job.id, &error),
            }
        }
    }

    /// A new session over `cwd`, kept under the state folder if there is one.
    fn new_session(
        &self,
        cwd: &Path,
        cancel: &Interrupt,
        updates: &Arc<Mutex<Updates>>,
    ) -> Result<Opened, RpcError> {
        let n = self.next_id.fetch_add(1, Ordering::SeqCst);
        let files = match &self.store {
            Some(store) => Some(store.create(n, cwd).map_err(|error| {
                RpcError::new(INTERNAL_ERROR, format!("cannot keep the session: {error}"))
            })?),
            None => None,
        };
        let session_id = match &files {
            Some(files) => files.id.clone(),
            None => format!("rlm-{n}"),
        };
        let trace = files.as_ref().map(SessionFiles::trace);
        let rlm = self.rlm(&session_id, cwd, cancel, updates, trace)?;
        let session = self.start(&rlm.0, rlm.1)?;
        Ok(Opened {
            session_id,
            session,
            files,
        })
    }

    /// The kept session `session_id`, rebuilt prompt by prompt from its record with no
    /// model request, its history streamed as it goes.
    fn load(
        &self,
        session_id: &str,
        cwd: &Path,
        cancel: &Interrupt,
        updates: &Arc<Mutex<Updates>>,
    ) -> Result<Opened, RpcError> {
        let Some(store) = &self.store else {
            return Err(no_state_dir());
        };
        // Checked again when it registers; here so that its history is not streamed twice.
        if self.sessions().contains_key(session_id) {
            let message = format!("session {session_id} is open already");
            return Err(RpcError::new(INVALID_REQUEST, message));
        }
        let (files, stored) = store
            .open(session_id)?
            .ok_or_else(|| unknown_session(session_id))?;
        let (rlm, context) = self.rlm(session_id, cwd, cancel, updates, Some(files.trace()))?;
        let (rlm, playback) = rlm.playing_back();
        let mut session = self.start(&rlm, context)?;
        let cannot = |n: usize, why: String| {
            let message = format!("cannot load session {session_id}: prompt {n}: {why}");
            RpcError::new(INVALID_PARAMS, message)
        };
        for (i, prompt) in stored.prompts.into_iter().enumerate() {
            let n = i + 1;
            let shown: Vec<SessionUpdate> = prompt
                .blocks
                .iter()
                .map(|block| Updates::user(n, block.clone()))
                .collect();
            notify(&self.out, session_id, &shown);
            let read = content::read(prompt.blocks).map_err(|e| cannot(n, e.message))?;
            add_documents(&mut session, read.documents)?;
            let records = match prompt.trace.exists() {
                true => Playback::read(&prompt.trace).map_err(|e| cannot(n, e.to_string()))?,
                false => Vec::new(),
            };
            if n == 1 {
                session
                    .check_recorded(&records)
                    .map_err(|e| cannot(n, e.to_string()))?;
            }
            playback.question(&records);
            // How the prompt ended is history: its answer, if any, is streamed with it.
            let _ = self.ask(session_id, &mut session, updates, &read.question);
        }
        playback.finish();
        cancel.reset();
        Ok(Opened {
            session_id: session_id.to_string(),
            session,
            files: Some(files),
        })
    }

    /// The loop of session `session_id` over `cwd` (or `--context`), streaming its
    /// records as updates and tracing to `trace`; and the context.
    fn rlm(
        &self,
        session_id: &str,
        cwd: &Path,
        cancel: &Interrupt,
        updates: &Arc<Mutex<Updates>>,
        trace: Option<PromptTrace>,
    ) -> Result<(Rlm, Context), RpcError> {
        let paths = match self.context_paths.is_empty() {
            true => vec![cwd.to_path_buf()],
            false => self.context_paths.clone(),
        };
        let gathered = gather(&paths).map_err(|error| {
            RpcError::new(INVALID_PARAMS, format!("cannot read the context: {error}"))
        })?;
        if let Gathered::Corpus(corpus) = &gathered {
            for warning in corpus.warnings() {
                tracing::warn!("{warning}");
            }
        }
        let out = self.out.clone();
        let shown = Arc::clone(updates);
        let id = session_id.to_string();
        let mut rlm = self
            .rlm
            .clone()
            .context_paths(&paths)
            .cancel_on(cancel.clone())
            .observe(move |record| {
                let updates = shown.lock().unwrap_or_else(|p| p.into_inner()).of(record);
                notify(&out, &id, &updates);
            });
        if let Some(trace) = trace {
            rlm = rlm.trace(trace);
        }
        Ok((rlm, Context::from(gathered)))
    }

    fn start(&self, rlm: &Rlm, context: Context) -> Result<RlmSession, RpcError> {
        rlm.session(Some(context)).map_err(|error| {
            RpcError::new(INTERNAL_ERROR, format!("cannot start the session: {error}"))
        })
    }

    /// Answers one prompt: updates as the loop goes, the answer as the agent's message;
    /// the response to send (or the error). A kept session keeps the prompt first.
    fn answer(
        &self,
        session_id: &str,
        session: &mut RlmSession,
        updates: &Mutex<Updates>,
        blocks: Vec<ContentBlock>,
        files: Option<&mut SessionFiles>,
    ) -> Result<PromptResponse, RpcError> {
        let kept = files.is_some().then(|| blocks.clone());
        let prompt = content::read(blocks)?;
        add_documents(session, prompt.documents)?;
        let Some((files, blocks)) = files.zip(kept) else {
            return self.ask(session_id, session, updates, &prompt.question);
        };
        files.begin_prompt(&blocks).map_err(|error| {
            RpcError::new(INTERNAL_ERROR, format!("cannot keep the prompt: {error}"))
        })?;
        let answered = self.ask(session_id, session, updates, &prompt.question);
        files.end_prompt();
        answered
    }

    /// Asks `question`, streaming the run, then the answer as the agent's message.
    fn ask(
        &self,
        session_id: &str,
        session: &mut RlmSession,
        updates: &Mutex<Updates>,
        question: &str,
    ) -> Result<PromptResponse, RpcError> {
        lock(updates).start_prompt();
        let report = session.ask(question);
        let cut = lock(updates).close("not finished: the prompt was cancelled");
        notify(&self.out, session_id, &cut);
        let (message, stop_reason) = outcome(report)?;
        if let Some(message) = message {
            let chunk = lock(updates).answer(message);
            notify(&self.out, session_id, &[chunk]);
        }
        Ok(PromptResponse { stop_reason })
    }

    /// Hands `job` to its session; a session that does not exist, or is answering a
    /// prompt already, is an error (the running prompt goes on).
    pub fn prompt(&self, session_id: &str, job: Job) -> Result<(), (Json, RpcError)> {
        let sessions = self.sessions();
        let Some(handle) = sessions.get(session_id) else {
            return Err((job.id, unknown_session(session_id)));
        };
        if handle.busy.swap(true, Ordering::SeqCst) {
            let message = format!(
                "session {session_id} is already answering a prompt: wait for its response, or send session/cancel"
            );
            return Err((job.id, RpcError::new(INVALID_REQUEST, message)));
        }
        // A cancellation of the last prompt must not stop this one.
        handle.cancel.reset();
        handle.prompts.send(job).map_err(|failed| {
            handle.busy.store(false, Ordering::SeqCst);
            let error = RpcError::new(INTERNAL_ERROR, format!("session {session_id} has ended"));
            (failed.0.id, error)
        })
    }

    /// Stops the prompt running in `session_id`, if any, at its next safe point.
    pub fn cancel(&self, session_id: &str) -> Result<(), RpcError> {
        let sessions = self.sessions();
        let handle = sessions
            .get(session_id)
            .ok_or_else(|| unknown_session(session_id))?;
        if handle.busy.load(Ordering::SeqCst) {
            handle.cancel.interrupt();
        }
        Ok(())
    }

    /// The input ended: every running prompt is cancelled and every session thread let
    /// go of, to end once its prompt has stopped.
    pub fn close(&self) {
        let mut sessions = self.sessions();
        self.closed.store(true, Ordering::SeqCst);
        for (_, handle) in sessions.drain() {
            handle.cancel.interrupt();
        }
        self.alive.lock().unwrap_or_else(|p| p.into_inner()).take();
    }
}

/// How a session begins.
pub(crate) enum Opening {
    /// `session/new` over `cwd`.
    New { cwd: PathBuf },
    /// `session/load` of a kept session, over `cwd`.
    Load { session_id: String, cwd: PathBuf },
}

/// A session ready to answer.
struct Opened {
    session_id: String,
    session: RlmSession,
    /// Where a kept session's prompts go.
    files: Option<SessionFiles>,
}

fn add_documents(session: &mut RlmSession, documents: Vec<Document>) -> Result<(), RpcError> {
    session.add_documents(documents).map_err(|error| {
        RpcError::new(INTERNAL_ERROR, format!("cannot add the documents: {error}"))
    })
}

/// `session/load` of an agent that keeps no sessions.
pub(crate) fn no_state_dir() -> RpcError {
    RpcError::new(
        METHOD_NOT_FOUND,
        "session/load: this agent keeps no sessions (loadSession is false); start it with --state-dir DIR",
    )
}

pub(crate) fn unknown_session(session_id: &str) -> RpcError {
    RpcError::new(
        super::wire::RESOURCE_NOT_FOUND,
        format!("no session {session_id}: open one with session/new"),
    )
}

fn lock(updates: &Mutex<Updates>) -> MutexGuard<'_, Updates> {
    updates.lock().unwrap_or_else(|p| p.into_inner())
}

fn notify(out: &Outgoing, session_id: &str, updates: &[SessionUpdate]) {
    for update in updates {
        out.notify(
            "session/update",
            &SessionNotification { session_id, update },
        );
    }
}

/// How a prompt's run ends for the client: the agent's last message, if any, and the
/// stop reason; or, when the run could not be done at all (the model server, the
/// context, the trace), a JSON-RPC error naming the cause.
pub(crate) fn outcome(report: Report) -> Result<(Option<String>, StopReason), RpcError> {
    let error = match report.result {
        Ok(answer) => return Ok((Some(answer), StopReason::EndTurn)),
        Err(error) => error,
    };
    let unanswered = |stop| Ok((Some(format!("No answer: {error}")), stop));
    match &error {
        RlmError::Interrupted => Ok((None, StopReason::Cancelled)),
        RlmError::IterationLimit { .. } | RlmError::AnswerRejected { .. } => {
            unanswered(StopReason::MaxTurnRequests)
        }
        RlmError::Budget(_) | RlmError::ContextWindow(_) => unanswered(StopReason::MaxTokens),
        RlmError::NoCode { .. } | RlmError::ConsecutiveErrors { .. } => {
            unanswered(StopReason::EndTurn)
        }
        RlmError::Llm(cause) => Err(RpcError::new(
            INTERNAL_ERROR,
            format!("the model server failed: {cause}"),
        )),
        _ => Err(RpcError::new(INTERNAL_ERROR, error.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::LlmError;
    use crate::rlm::{BudgetExceeded, UsageReport};

    fn report(result: Result<String, RlmError>) -> Report {
        Report {
            result,
            value: None,
            turns: 1,
            usage: UsageReport::default(),
        }
    }

    #[test]
    fn each_end_of_a_run_has_its_stop_reason_and_a_failed_model_is_an_error() {
        let stop = |result| outcome(report(result)).map(|(_, stop)| stop);
        assert_eq!(stop(Ok("42".to_string())), Ok(StopReason::EndTurn));
        assert_eq!(stop(Err(RlmError::Interrupted)), Ok(StopReason::Cancelled));
        let cap = RlmError::IterationLimit { max_iterations: 2 };
        assert_eq!(stop(Err(cap)), Ok(StopReason::MaxTurnRequests));
        let spent = RlmError::Budget(BudgetExceeded::LlmCalls { limit: 1 });
        assert_eq!(stop(Err(spent)), Ok(StopReason::MaxTokens));
        let server = stop(Err(RlmError::Llm(LlmError::Config("refused".to_string()))));
        let error = server.unwrap_err();
        assert_eq!(error.code, INTERNAL_ERROR);
        assert!(
            error.message.contains("model server failed: "),
            "{}",
            error.message
        );
    }
}
