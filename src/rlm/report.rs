//! What a run returns: the [`Answer`], the [`Report`] with usage either way, and
//! [`RlmError`], why a run ended without an answer.
//!
//! [`RlmError`]'s wording is written for the person who started the run; it also reaches
//! a parent agent's code when a child agent fails (see [`super::prompt::child_failed`]).

use std::fmt;
use std::io;

use crate::environment::{ContextWindow, ExecError, reply_reserve, request_tokens};
use crate::llm::{LlmError, Message, Request};
use crate::tokens;

use super::budget::{BudgetExceeded, UsageReport};
use super::compaction::CompactAt;
use super::prompt_mode::PromptMode;
use crate::text_format::{cut_chars, first_line, thousands};

/// A successful run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// The final answer, as `FINAL`/`FINAL_VAR` gave it: the value's `tostring`, or with
    /// an [answer schema](super::Rlm::answer_schema) its JSON text.
    pub text: String,
    /// With an answer schema, the answer as JSON (it matched the schema).
    pub value: Option<serde_json::Value>,
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
    /// With an answer schema, the answer as JSON.
    pub value: Option<serde_json::Value>,
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
            value,
            turns,
            usage,
        } = self;
        result.map(|text| Answer {
            text,
            value,
            turns,
            usage,
        })
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
    /// An agent's request (its first, or a later one its conversation grew into) does not
    /// fit the model's context window: a window check refused it before sending, or the
    /// server did. The message names the system prompt's tokens, the window and what to
    /// change.
    ContextWindow(Box<WindowExceeded>),
    /// Every answer the root agent gave was refused by its schema, up to the iteration
    /// cap.
    AnswerRejected {
        /// The cap.
        max_iterations: u32,
        /// Why the last answer was refused, as the model read it.
        last_refusal: String,
    },
    /// The run was cancelled ([`Rlm::cancel_on`](super::Rlm::cancel_on)) and stopped at a
    /// safe point: every turn written to the trace is whole.
    Interrupted,
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
            RlmError::ContextWindow(exceeded) => exceeded.fmt(f),
            RlmError::AnswerRejected {
                max_iterations,
                last_refusal,
            } => write!(
                f,
                "iteration limit reached: no answer matching the schema after {max_iterations} turn{}; the last answer was refused: {}",
                if *max_iterations == 1 { "" } else { "s" },
                cut_chars(&last_refusal.replace('\n', " "), 600)
            ),
            RlmError::Interrupted => f.write_str("interrupted"),
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
            RlmError::ContextWindow(exceeded) => exceeded
                .server
                .as_ref()
                .map(|e| e as &(dyn std::error::Error + 'static)),
            _ => None,
        }
    }
}

/// An agent's request that does not fit the model's context window
/// ([`RlmError::ContextWindow`]): how large it was, the window, what refused it, and at
/// which turn.
#[derive(Debug)]
pub struct WindowExceeded {
    /// The agent: `0` for the root, `0.1` for its first child, ….
    pub agent: String,
    /// The agent's system prompt, in `o200k_base` tokens.
    pub system_prompt_tokens: u64,
    /// The whole request (system prompt, question, the turns so far, the chat format's
    /// overhead), in `o200k_base` tokens.
    pub request_tokens: u64,
    /// The tokens kept for the reply.
    pub reply_reserve: u64,
    /// The window: the server's, if it refused the request and said; else the one
    /// configured.
    pub window: Option<u64>,
    /// How the prompt listed the functions: the fix depends on it.
    pub prompt_mode: PromptMode,
    /// The server's refusal, if the request was sent; `None` when a window check kept
    /// it from being sent.
    pub server: Option<LlmError>,
    /// The agent's turn whose request it was: 1 for its first.
    pub turn: u32,
    /// The share of the window at which the conversation is compacted; `None` when
    /// compaction was off.
    pub compact_at: Option<CompactAt>,
}

impl WindowExceeded {
    /// Checks the first `request` of `agent` against `window`, with `reply_limit` kept for
    /// the reply when the request sets none: `Err` with what `rlm ask` reports when it
    /// does not fit. The one check of a first request, for the loop and for the
    /// reference RLM's `LuaRLM` in Python alike.
    ///
    /// ```
    /// use rlm_registry::llm::{Message, Request};
    /// use rlm_registry::rlm::{PromptMode, WindowExceeded};
    ///
    /// let request = Request::new(vec![Message::system("word ".repeat(3_000)), Message::user("Q")]);
    /// let refused = WindowExceeded::check("0", &request, 2_000, None, PromptMode::Compact).unwrap_err();
    /// assert!(refused.to_string().starts_with("the first request of the root agent does not fit"));
    /// assert!(WindowExceeded::check("0", &request, 8_000, None, PromptMode::Compact).is_ok());
    /// ```
    pub fn check(
        agent: &str,
        request: &Request,
        window: u64,
        reply_limit: Option<u32>,
        prompt_mode: PromptMode,
    ) -> Result<(), Box<WindowExceeded>> {
        ContextWindow(window)
            .check(request, reply_limit)
            .map_err(|_| {
                WindowExceeded::of(agent, request, Some(window), reply_limit, prompt_mode, None)
            })
    }

    /// The report of a first `request` of `agent` too long for `window`: refused by a
    /// check before it was sent (`server` is `None`), or by the server.
    pub fn of(
        agent: &str,
        request: &Request,
        window: Option<u64>,
        reply_limit: Option<u32>,
        prompt_mode: PromptMode,
        server: Option<LlmError>,
    ) -> Box<WindowExceeded> {
        let served_window = match &server {
            Some(LlmError::ContextLength { window, .. }) => *window,
            _ => None,
        };
        let system = request.messages.first().map_or("", Message::text);
        Box::new(WindowExceeded {
            agent: agent.to_string(),
            system_prompt_tokens: tokens::count(system) as u64,
            request_tokens: request_tokens(request),
            reply_reserve: reply_reserve(request, reply_limit),
            // What the server said is the truth about its window; a configured one is
            // then wrong.
            window: served_window.or(window),
            prompt_mode,
            server,
            turn: 1,
            compact_at: None,
        })
    }
}

impl fmt::Display for WindowExceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let whose = if self.agent.contains('.') {
            format!("child agent {}", self.agent)
        } else {
            "the root agent".to_string()
        };
        match self.turn {
            0 | 1 => write!(f, "the first request of {whose}")?,
            turn => write!(f, "the request of turn {turn} of {whose}")?,
        }
        f.write_str(" does not fit the model's context window")?;
        if let Some(window) = self.window {
            write!(f, " (the window is {} tokens)", thousands(window))?;
        }
        match &self.server {
            Some(LlmError::ContextLength {
                prompt_tokens,
                body,
                ..
            }) => {
                f.write_str(": the server refused it")?;
                if let Some(tokens) = prompt_tokens {
                    write!(f, " (it counted {} tokens)", thousands(*tokens))?;
                }
                if !body.is_empty() {
                    write!(f, "; its answer: {body}")?;
                }
            }
            Some(error) => write!(f, ": the server refused it ({error})")?,
            None => f.write_str(", so it was not sent")?,
        }
        write!(
            f,
            ". Its system prompt alone is {} tokens (o200k_base), the whole request {}, and {} are kept for the reply. ",
            thousands(self.system_prompt_tokens),
            thousands(self.request_tokens),
            thousands(self.reply_reserve)
        )?;
        if self.turn > 1 {
            return f.write_str(match (self.compact_at, &self.server) {
                (None, _) => "The conversation grew with each turn and compaction is off: leave it on (--compact-at 0.85, the default, summarises the conversation before it reaches 85% of the window), or give the model's real window with --context-window.",
                (Some(_), Some(_)) => "The conversation grew with each turn: give the model's window with --context-window, so that it is compacted before it gets there (--compact-at, 0.85 of the window by default).",
                (Some(_), None) => "Even compacted, the conversation does not fit: a turn's output alone is too long. Fix: a lower --compact-at, a smaller --output-bytes, or a model with a larger window (--context-window).",
            });
        }
        if self.prompt_mode == PromptMode::Compact {
            f.write_str("Fix: a smaller registry (--no-baked, fewer --path directories), a shorter question, or a model with a larger window.")
        } else {
            f.write_str("Fix: --prompt-mode compact (signatures and one-line summaries instead of full docs), a smaller registry (--no-baked, fewer --path directories), or a model with a larger window.")
        }
    }
}
