//! What a session did, step by step, for a checkpoint: each execution's code, its
//! journal and the answers its sub-calls got; each global set from the host.

use std::cell::RefCell;
use std::collections::VecDeque;

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use super::{Journal, JournalEntry};

/// The answers of one round of sub-calls (`llm_query`, a batch, a round of `parallel`):
/// per call, each prompt's answer or error.
pub(crate) type Answers = Vec<Vec<Result<String, String>>>;

/// One step of a session.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Step {
    /// Code run with `execute`.
    Execute {
        /// The code, as text; `code_base64` holds source that is not UTF-8.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        code: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code_base64: Option<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        journal: Vec<JournalEntry>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        answers: Vec<Answers>,
    },
    /// A global set with `set_global`.
    SetGlobal { name: String, value: Json },
    /// A global set to a string that is not UTF-8, as base64.
    SetGlobalBytes { name: String, base64: String },
    /// A text context loaded mid-session by a host that logs it (a server's session).
    SetContext { text: String },
}

impl Step {
    /// The step of an execution of `code`.
    fn execution(code: &[u8], journal: Vec<JournalEntry>, answers: Vec<Answers>) -> Step {
        let (code, code_base64) = match std::str::from_utf8(code) {
            Ok(text) => (text.to_string(), None),
            Err(_) => {
                use base64::Engine;
                let encoded = base64::engine::general_purpose::STANDARD.encode(code);
                (String::new(), Some(encoded))
            }
        };
        Step::Execute {
            code,
            code_base64,
            journal,
            answers,
        }
    }

    /// The code of an execution step, as bytes; an undecodable `code_base64` is an error.
    pub fn code(code: &str, code_base64: Option<&str>) -> Result<Vec<u8>, String> {
        use base64::Engine;
        match code_base64 {
            None => Ok(code.as_bytes().to_vec()),
            Some(encoded) => base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .map_err(|error| format!("a step's code_base64 is not base64: {error}")),
        }
    }
}

/// Recorded rounds of answers given back in order, and the running execution's.
#[derive(Default)]
pub(super) struct AnswerTape {
    recorded: RefCell<VecDeque<Answers>>,
    current: RefCell<Vec<Answers>>,
}

impl Journal {
    /// Hands the next execution the sub-call answers a recorded run of it got.
    pub fn give_back_answers(&self, answers: Vec<Answers>) {
        *self.answers.recorded.borrow_mut() = answers.into();
    }

    /// The recorded answers of the next round, if it has as many calls as `calls`.
    pub fn replay_answers(&self, calls: usize) -> Option<Answers> {
        let mut recorded = self.answers.recorded.borrow_mut();
        let recorded_calls = recorded.front()?.len();
        if recorded_calls != calls {
            recorded.clear();
            self.divergences.borrow_mut().push(format!(
                "a round of {calls} sub-call(s) where the record has {recorded_calls}; live from here"
            ));
            return None;
        }
        let answers = recorded.pop_front()?;
        self.answers.current.borrow_mut().push(answers.clone());
        Some(answers)
    }

    /// The digest of the context as loaded, if computed since it was loaded.
    pub fn context_digest(&self) -> Option<Option<String>> {
        self.context_digest.borrow().clone()
    }

    /// Keeps the digest of the context as loaded (`None`: there is none).
    pub fn set_context_digest(&self, digest: Option<String>) {
        *self.context_digest.borrow_mut() = Some(digest);
    }

    /// A new context was loaded: its digest is to be computed again.
    pub fn context_loaded(&self) {
        *self.context_digest.borrow_mut() = None;
    }

    /// Whether recorded rounds of answers are still to be given back.
    pub fn answers_pending(&self) -> bool {
        !self.answers.recorded.borrow().is_empty()
    }

    /// Journals a live round's answers.
    pub fn record_answers(&self, answers: &Answers) {
        self.answers.current.borrow_mut().push(answers.clone());
    }

    /// Ends an execution of `code`: its step is logged and its journal kept as the last.
    pub fn executed(&self, code: &[u8]) {
        let journal = self.finish();
        self.answers.recorded.borrow_mut().clear();
        let answers = std::mem::take(&mut *self.answers.current.borrow_mut());
        self.last.borrow_mut().clone_from(&journal);
        self.steps
            .borrow_mut()
            .push(Step::execution(code, journal, answers));
    }

    /// Logs a global set from the host.
    pub fn global_set(&self, name: &str, value: &Json) {
        self.steps.borrow_mut().push(Step::SetGlobal {
            name: name.to_string(),
            value: value.clone(),
        });
    }

    /// Logs a global set from the host to a string of any bytes.
    pub fn global_bytes_set(&self, name: &str, bytes: &[u8]) {
        use base64::Engine;
        let step = match std::str::from_utf8(bytes) {
            Ok(text) => Step::SetGlobal {
                name: name.to_string(),
                value: Json::String(text.to_string()),
            },
            Err(_) => Step::SetGlobalBytes {
                name: name.to_string(),
                base64: base64::engine::general_purpose::STANDARD.encode(bytes),
            },
        };
        self.steps.borrow_mut().push(step);
    }

    /// Logs a text context loaded mid-session.
    pub fn context_set(&self, text: &str) {
        self.steps.borrow_mut().push(Step::SetContext {
            text: text.to_string(),
        });
    }

    /// The steps from the `from`th on.
    #[cfg(feature = "serve")]
    pub fn steps_from(&self, from: usize) -> Vec<Step> {
        self.steps.borrow().get(from..).unwrap_or_default().to_vec()
    }

    /// The journal of the last execution.
    pub fn last(&self) -> Vec<JournalEntry> {
        self.last.borrow().clone()
    }

    /// Every step so far.
    pub fn steps(&self) -> Vec<Step> {
        self.steps.borrow().clone()
    }
}
