//! The journal: what an execution read from outside the sandbox, in order, so that
//! running the same code again (a replayed or resumed run, a restored checkpoint) gets
//! the same values and repeats no effect.
//!
//! What is journaled, each as a [`JournalEntry`] named by its `call`:
//!
//! - the clock: `os.time`, `os.clock`, `os.date` (every call, whatever its arguments:
//!   `os.date` with a time still reads the time zone);
//! - randomness: not each `math.random` value but the seed, as `math.randomseed`, the
//!   first time the code draws a number (and again after `math.randomseed()` with no
//!   argument). The generator is deterministic from its seed, so one entry makes every
//!   later draw the same on re-execution, where recording each value would grow the
//!   journal with every draw of a loop;
//! - `ask_user`'s answers;
//! - the results of host functions whose [`Effect`](crate::providers::Effect) is not
//!   pure: `External` ones (files, shell) are not called again, `Memory` ones (the
//!   store) are, so that the state they keep in memory is rebuilt, and get the recorded
//!   result.
//!
//! Sub-model calls are not here: a run's trace keeps them apart, as `sub_calls`, and a
//! checkpoint keeps their answers beside the journal.
//!
//! Given recorded entries ([`Journal::give_back`]), each journaled call takes the next
//! one if it names the same call; otherwise (another call, more calls than recorded) it
//! is live, and the difference is noted ([`Journal::take_divergences`]): never an error
//! the model reads. Recorded entries left over when the execution ends are noted too.
//! Replayed or live, every entry is journaled again, so that the journal of a re-run
//! execution is the recorded one.

mod clock;
pub(crate) mod host;
mod log;

use std::cell::RefCell;
use std::collections::VecDeque;

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

pub(crate) use clock::install;
pub(crate) use log::Step;

/// One value an execution read from outside the sandbox.
///
/// ```
/// use rlm_registry::environment::JournalEntry;
///
/// let entry: JournalEntry = serde_json::from_str(r#"{"call": "os.time", "value": 1700000000}"#)?;
/// assert_eq!(entry, JournalEntry::value("os.time", serde_json::json!(1700000000)));
/// assert_eq!(serde_json::to_string(&JournalEntry::error("read_file", "no such file"))?,
///            r#"{"call":"read_file","error":"no such file"}"#);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalEntry {
    /// What was called: `os.time`, `math.randomseed`, `ask_user`, `read_file`, …
    pub call: String,
    /// What it gave, as JSON (left out when `null`).
    #[serde(default, skip_serializing_if = "Json::is_null")]
    pub value: Json,
    /// The error it raised instead, if it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl JournalEntry {
    /// A call that gave `value`.
    pub fn value(call: impl Into<String>, value: Json) -> JournalEntry {
        JournalEntry {
            call: call.into(),
            value,
            error: None,
        }
    }

    /// A call that failed with `error`.
    pub fn error(call: impl Into<String>, error: impl Into<String>) -> JournalEntry {
        JournalEntry {
            call: call.into(),
            value: Json::Null,
            error: Some(error.into()),
        }
    }
}

/// One environment's journal: the entries being given back, and those of the running
/// execution.
#[derive(Default)]
pub(crate) struct Journal {
    recorded: RefCell<VecDeque<JournalEntry>>,
    current: RefCell<Vec<JournalEntry>>,
    divergences: RefCell<Vec<String>>,
    /// The sub-calls' answers, round by round, the same way.
    answers: log::AnswerTape,
    /// Every step of the session so far, for a checkpoint.
    steps: RefCell<Vec<Step>>,
    /// The journal of the last execution.
    last: RefCell<Vec<JournalEntry>>,
    /// SHA-256 of the context as loaded, once computed (`Some(None)`: no context).
    context_digest: RefCell<Option<Option<String>>>,
}

impl Journal {
    /// Hands the next execution the entries a recorded run of the same code journaled.
    pub fn give_back(&self, entries: Vec<JournalEntry>) {
        *self.recorded.borrow_mut() = entries.into();
    }

    /// The recorded entry for the next call of `call`, if it is the next one recorded;
    /// journaled again. `None` means: call it live (and journal the result).
    pub fn replay(&self, call: &str) -> Option<JournalEntry> {
        let mut recorded = self.recorded.borrow_mut();
        let next = recorded.front()?;
        if next.call != call {
            let noted = format!(
                "asked for `{call}` where the record has `{}`; live from here",
                next.call
            );
            recorded.clear();
            self.divergences.borrow_mut().push(noted);
            return None;
        }
        let entry = recorded.pop_front()?;
        self.current.borrow_mut().push(entry.clone());
        Some(entry)
    }

    /// Journals a live call's outcome.
    pub fn record(&self, entry: JournalEntry) {
        self.current.borrow_mut().push(entry);
    }

    /// Ends an execution: its journal, with what was recorded and not asked for noted.
    pub fn finish(&self) -> Vec<JournalEntry> {
        let left = std::mem::take(&mut *self.recorded.borrow_mut());
        if let Some(first) = left.front() {
            self.divergences.borrow_mut().push(format!(
                "{} recorded value(s) not asked for, from `{}`",
                left.len(),
                first.call
            ));
        }
        std::mem::take(&mut *self.current.borrow_mut())
    }

    /// Where re-executions asked for something else than recorded, since last taken.
    pub fn take_divergences(&self) -> Vec<String> {
        std::mem::take(&mut *self.divergences.borrow_mut())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_recorded_entry_is_given_back_once_and_journaled_again() {
        let journal = Journal::default();
        journal.give_back(vec![JournalEntry::value("os.time", json!(5))]);
        assert_eq!(journal.replay("os.time").map(|e| e.value), Some(json!(5)));
        assert_eq!(
            journal.replay("os.time"),
            None,
            "more calls than recorded are live"
        );
        assert_eq!(journal.finish(), [JournalEntry::value("os.time", json!(5))]);
        assert!(journal.take_divergences().is_empty());
    }

    #[test]
    fn another_call_than_recorded_is_live_and_noted() {
        let journal = Journal::default();
        journal.give_back(vec![
            JournalEntry::value("os.time", json!(5)),
            JournalEntry::value("os.clock", json!(0.5)),
        ]);
        assert_eq!(journal.replay("os.clock"), None);
        assert_eq!(journal.replay("os.time"), None, "the rest is live too");
        journal.finish();
        let noted = journal.take_divergences();
        assert_eq!(noted.len(), 1, "{noted:?}");
        assert!(noted[0].contains("`os.clock` where the record has `os.time`"));
    }

    #[test]
    fn recorded_entries_left_over_are_noted() {
        let journal = Journal::default();
        journal.give_back(vec![JournalEntry::value("ask_user", json!("yes"))]);
        assert!(journal.finish().is_empty());
        assert_eq!(
            journal.take_divergences(),
            ["1 recorded value(s) not asked for, from `ask_user`"]
        );
    }
}
