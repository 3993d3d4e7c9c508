//! The RLM loop: a model answers a question by writing Lua that studies the
//! context in a sandboxed [`Environment`](crate::environment::Environment), turn after turn, until it calls `FINAL`.
//!
//! Each turn sends the conversation to the model, runs every ```lua block of the reply
//! in order (an unlabeled fence too, when it holds Lua), and sends back what the code
//! printed, truncated, with a note of what was cut. A Lua error (with its line), an
//! unknown function (with a "did you mean") or a limit hit goes back to the model as
//! text, and the run goes on. The run ends with `FINAL(value)` / `FINAL_VAR(name)`
//! (also accepted as plain text outside code), or fails: at the iteration cap, after
//! too many consecutive turns with errors, when a budget is spent, or when the model
//! cannot be reached.
//!
//! `rlm_query` in the model's code starts a child agent one level deeper, with its own
//! environment and loop, whose `FINAL` answer is the call's result. An agent at the depth
//! limit has no `rlm_query` (its prompt does not list it, and a call is refused with an
//! error naming the `agent` scope); `llm_query` remains its sub-model call. Budgets (tokens, calls, wall time) are shared by the
//! whole tree; usage is reported per depth.
//!
//! The system prompt lists every function by its signature and one-line summary by
//! default ([`PromptMode::Compact`]: under 3,000 tokens with the baked registry) and
//! points the model to `help` and `fn_search`; [`PromptMode::Full`] documents each in
//! full. [`Rlm::context_window`] keeps a request that would not fit from being sent
//! ([`Rlm::compact_at`] compacts the conversation before it gets there),
//! [`Rlm::answer_protocol`] chooses how the prompt teaches the model to end the run
//! (`FINAL` or the reference RLM's `answer` table; both always work), and
//! [`Rlm::answer_schema`] makes the answer a JSON value checked against a schema.
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use rlm_registry::Registry;
//! use rlm_registry::llm::{Completion, Llm, LlmError, Request};
//! use rlm_registry::rlm::{Context, Rlm};
//!
//! /// A scripted model: looks, then answers.
//! struct Scripted(AtomicUsize);
//!
//! impl Llm for Scripted {
//!     fn complete(&self, _request: Request) -> Result<Completion, LlmError> {
//!         let reply = match self.0.fetch_add(1, Ordering::SeqCst) {
//!             0 => "```lua\nn = line_count(context)\nprint(n)\n```",
//!             _ => "```lua\nFINAL(n .. ' lines')\n```",
//!         };
//!         Ok(Completion::new(reply).with_tokens(100, 10))
//!     }
//! }
//!
//! let rlm = Rlm::new(Arc::new(Scripted(AtomicUsize::new(0))), Registry::baked().clone(), 5);
//! let answer = rlm.run("How many lines?", Some(Context::from("a\nb\nc\n")))?;
//! assert_eq!(answer.text, "3 lines");
//! assert_eq!(answer.turns, 2);
//! assert_eq!(answer.usage.total().total_tokens(), 220);
//! # Ok::<(), rlm_registry::rlm::RlmError>(())
//! ```
//!
//! Against a real server, with a budget, a trace file and the live view:
//!
//! ```no_run
//! use std::sync::Arc;
//! use rlm_registry::{Registry, llm::LlmClient, rlm::{Budgets, Context, Rlm}};
//!
//! let llm = Arc::new(LlmClient::from_env()?); // RLM_BASE_URL, RLM_MODEL, RLM_API_KEY
//! let rlm = Rlm::new(llm, Registry::baked().clone(), 10)
//!     .max_depth(1)
//!     .budgets(Budgets::default().with_total_tokens(200_000))
//!     .trace_file("run.jsonl")?
//!     .live_view(std::io::stderr());
//! let context = Context::from(std::fs::read("server.log")?);
//! let answer = rlm.run("Which service fails most often?", Some(context))?;
//! println!("{} ({} turns)\n{}", answer.text, answer.turns, answer.usage);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Where things are
//!
//! - `builder`: [`Rlm`], its options and the entry points of a run.
//! - `run`: the loop of one agent, turn after turn.
//! - `agent`: an agent's environment, and the child agents `rlm_query` starts.
//! - `prompt`: every string the model reads (system prompt, feedback, notes, nudges).
//! - `prompt_mode`: [`PromptMode`], how the functions are listed in the system prompt.
//! - `parse`: the code blocks and plain-text `FINAL` of a reply.
//! - `context`, `budget`, `report`: [`Context`], [`Budgets`] and usage, [`RlmError`].
//! - [`trajectory`]: the trace format, the records the loop writes and `rlm trace` reads.
//! - `recorder`, `live`: writing the trace (a run's clock on a shared writer) and the live
//!   view.
//! - `rlm_log`: the trace in the reference RLM's log format ([`TraceFormat::Rlm`]).
//! - `sub_calls`: the model calls of each block, logged for the trace.
//! - `replay`: [`Replay`], a recorded run run again from its trace, with no server.
//! - `resume`: [`Resume`], an interrupted run rebuilt from its trace and gone on with live;
//!   [`Playback`], a session rebuilt from its questions' traces.
//! - `session`: [`RlmSession`], several questions asked of one agent in turn, its REPL
//!   state kept ([`Rlm::session`]).

mod agent;
mod budget;
mod budget_view;
mod builder;
mod compaction;
mod context;
mod corpus_description;
mod live;
mod parse;
mod prompt;
mod prompt_mode;
mod recorder;
mod replay;
mod report;
mod resume;
mod rlm_log;
mod run;
mod session;
mod sub_calls;
pub mod trajectory;

pub use budget::{BudgetExceeded, Budgets, UsageReport};
pub use builder::{
    DEFAULT_BLOCK_TIME_LIMIT, DEFAULT_MAX_CONSECUTIVE_ERRORS, DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_ITERATIONS, DEFAULT_OUTPUT_BYTES, Rlm,
};
pub(crate) use compaction::elided_marker;
pub use compaction::{CompactAt, DEFAULT_COMPACT_AT, ELIDED_BEYOND_TOKENS};
pub use context::Context;
pub(crate) use parse::parse as parse_reply;
pub use prompt::PromptPart;
pub use prompt_mode::{AUTO_COMPACT_ABOVE_TOKENS, PromptMode};
pub use recorder::Observer;
pub use replay::{Divergence, Replay, ReplayError, ReplayReport};
pub use report::{Answer, Report, RlmError, WindowExceeded};
pub use resume::{Playback, Resume, ResumeError};
pub use rlm_log::TraceFormat;
pub(crate) use rlm_log::{Assumed, RlmLog};
pub use run::WARN_FROM_ITERATION;
pub use session::RlmSession;
