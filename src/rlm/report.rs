//! What a run returns: the [`Answer`], the [`Report`] with usage either way, and
//! [`RlmError`], why a run ended without an answer.
//!
//! [`RlmError`]'s wording is written for the person who started the run; it also reaches
//! a parent agent's code when a child agent fails (see [`super::prompt::child_failed`]).

use std::fmt;
use std::io;

use crate::environment::ExecError;
use crate::llm::LlmError;

use super::budget::{BudgetExceeded, UsageReport};
use crate::text_format::{cut_chars, first_line};

/// A successful run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// The final answer, as `FINAL`/`FINAL_VAR` gave it.
    pub text: String,
    /// The root agent's turns (model calls), the last included.
    pub turns: u32,
    /// What the whole run used.
    pub usage: UsageReport,
}

/// How a run went, successful or not, with its usage either way.
#[derive(Debug)]
pub struct Report {
    /// The final answer, or why there is none.
    pub result: Result<String, RlmError>,
    /// The root agent's turns.
    pub turns: u32,
    /// What the whole run used.
    pub usage: UsageReport,
}

impl Report {
    /// The answer with its turns and usage, or the error.
    pub fn into_result(self) -> Result<Answer, RlmError> {
        let Report {
            result,
            turns,
            usage,
        } = self;
        result.map(|text| Answer { text, turns, usage })
    }
}

/// Why a run ended without an answer.
#[derive(Debug)]
#[non_exhaustive]
pub enum RlmError {
    /// The iteration cap was reached without a final answer.
    IterationLimit {
        /// The cap.
        max_iterations: u32,
    },
    /// A budget shared by the run is spent.
    Budget(BudgetExceeded),
    /// The model could not be reached or answered garbage (after the client's retries).
    Llm(LlmError),
    /// Too many turns in a row had an error.
    ConsecutiveErrors {
        /// Turns in a row with an error.
        count: u32,
        /// The last error, as the model read it.
        last_error: String,
    },
    /// The model replied without code or a final answer again after the reminder.
    NoCode {
        /// The start of its last reply.
        reply: String,
    },
    /// The Lua environment could not be created (the message of the
    /// [`SetupError`](crate::environment::SetupError), which is not `Send`).
    Setup(String),
    /// The context could not be loaded into the environment (too large for the memory
    /// limit, say).
    Context(ExecError),
    /// The trace could not be written.
    Trace(io::Error),
}

impl fmt::Display for RlmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RlmError::IterationLimit { max_iterations } => write!(
                f,
                "iteration limit reached: no final answer after {max_iterations} turn{}",
                if *max_iterations == 1 { "" } else { "s" }
            ),
            RlmError::Budget(exceeded) => exceeded.fmt(f),
            RlmError::Llm(error) => error.fmt(f),
            RlmError::ConsecutiveErrors { count, last_error } => write!(
                f,
                "gave up after {count} turns in a row with errors; the last: {}",
                cut_chars(first_line(last_error), 300)
            ),
            RlmError::NoCode { reply } => write!(
                f,
                "the model replied without code or a final answer twice in a row, the second time after a reminder; its reply began: {}",
                cut_chars(first_line(reply), 200)
            ),
            RlmError::Setup(message) => f.write_str(message),
            RlmError::Context(error) => write!(f, "cannot load the context: {error}"),
            RlmError::Trace(error) => write!(f, "cannot write the trace: {error}"),
        }
    }
}

impl std::error::Error for RlmError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RlmError::Budget(e) => Some(e),
            RlmError::Llm(e) => Some(e),
            RlmError::Context(e) => Some(e),
            RlmError::Trace(e) => Some(e),
            _ => None,
        }
    }
}
