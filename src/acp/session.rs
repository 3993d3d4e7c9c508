//! One ACP session: a thread of its own holding an [`RlmSession`] (the Lua state lives on
//! the thread that made it), answering the prompts the reader hands it one at a time,
//! streaming what the loop does as `session/update`s.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value as Json;

use crate::corpus::{Gathered, gather};
use crate::environment::Interrupt;
use crate::rlm::{Context, Report, Rlm, RlmError, RlmSession};

use super::content;
use super::schema::{ContentBlock, PromptResponse, SessionNotification, SessionUpdate, StopReason};
use super::updates::Updates;
use super::wire::{INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, Outgoing, RpcError};

/// What the reader and every session share.
pub(crate) struct Shared {
    pub rlm: Rlm,
    /// `--context`: every session's context, over the client's `cwd`.
    pub context_paths: Vec<PathBuf>,
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
        out: Outgoing,
    ) -> (Arc<Shared>, Receiver<()>) {
        let (alive, ended) = mpsc::channel();
        let shared = Shared {
            rlm,
            context_paths,
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

    /// Opens a session over `cwd` (or `--context`) on a thread of its own, which answers
    /// request `id` with the session's id once its context is loaded, or with the error.
    pub fn open(self: &Arc<Shared>, id: Json, cwd: PathBuf) {
        let alive = self.alive.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let Some(alive) = alive else {
            return;
        };
        let session_id = format!("rlm-{}", self.next_id.fetch_add(1, Ordering::SeqCst));
        let shared = Arc::clone(self);
        let reply_to = id.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("acp {session_id}"))
            .spawn(move || {
                let _alive = alive;
                shared.run(id, session_id, cwd);
            });
        if let Err(error) = spawned {
            let error = RpcError::new(INTERNAL_ERROR, format!("cannot start a session: {error}"));
            self.out.error(&reply_to, &error);
        }
    }

    /// A session's thread: loads its context, registers, then answers its prompts until
    /// the reader lets go of it.
    fn run(self: Arc<Shared>, id: Json, session_id: String, cwd: PathBuf) {
        let cancel = Interrupt::new();
        let updates = Arc::new(Mutex::new(Updates::default()));
        let mut session = match self.session(&session_id, &cwd, &cancel, &updates) {
            Ok(session) => session,
            Err(error) => return self.out.error(&id, &error),
        };
        let (prompts, jobs) = mpsc::channel();
        let busy = Arc::new(AtomicBool::new(false));
        {
            let mut sessions = self.sessions();
            if self.closed.load(Ordering::SeqCst) {
                return;
            }
            let handle = Handle {
                prompts,
                busy: Arc::clone(&busy),
                cancel: cancel.clone(),
            };
            sessions.insert(session_id.clone(), handle);
        }
        self.out
            .respond(&id, &serde_json::json!({ "sessionId": session_id }));
        for job in jobs {
            let answered = self.answer(&session_id, &mut session, &updates, job.prompt);
            // Free before the response goes out: the client may send the next prompt
            // as soon as it reads it.
            busy.store(false, Ordering::SeqCst);
            match answered {
                Ok(response) => self.out.respond(&job.id, &response),
                Err(error) => self.out.error(&job.id, &error),
            }
        }
    }

    /// The session's loop, over its context, streaming its records as updates.
    fn session(
        &self,
        session_id: &str,
        cwd: &std::path::Path,
        cancel: &Interrupt,
        updates: &Arc<Mutex<Updates>>,
    ) -> Result<RlmSession, RpcError> {
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
        let session_id = session_id.to_string();
        let rlm = self
            .rlm
            .clone()
            .context_paths(&paths)
            .cancel_on(cancel.clone())
            .observe(move |record| {
                let updates = shown.lock().unwrap_or_else(|p| p.into_inner()).of(record);
                notify(&out, &session_id, &updates);
            });
        rlm.session(Some(Context::from(gathered))).map_err(|error| {
            RpcError::new(INTERNAL_ERROR, format!("cannot start the session: {error}"))
        })
    }

    /// Answers one prompt: updates as the loop goes, the answer as the agent's message;
    /// the response to send (or the error).
    fn answer(
        &self,
        session_id: &str,
        session: &mut RlmSession,
        updates: &Mutex<Updates>,
        blocks: Vec<ContentBlock>,
    ) -> Result<PromptResponse, RpcError> {
        let prompt = content::read(blocks)?;
        session.add_documents(prompt.documents).map_err(|error| {
            RpcError::new(INTERNAL_ERROR, format!("cannot add the documents: {error}"))
        })?;
        lock(updates).start_prompt();
        let report = session.ask(&prompt.question);
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
