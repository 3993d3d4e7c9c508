//! The trace format: the records of a run's JSONL trajectory, one type per kind of line.
//! The loop writes these types ([`Rlm::trace`](super::Rlm::trace)) and
//! [`Trace::read`](crate::trace::Trace::read) reads the same types back, so the format is
//! declared once, here, and this page is its reference.
//!
//! # Lines
//!
//! A trace is one JSON object per line, each flushed as it is written, so a crash loses
//! nothing already written; a cancelled run ([`Rlm::cancel_on`](super::Rlm::cancel_on))
//! leaves out the turn it cut short, so its trace ends with whole turns. Each line is a [`Record`], tagged by its `event` field: a
//! [`Start`] line when an agent begins, a [`Turn`] line when one of its turns ends. No
//! line repeats an earlier one: the `start` line holds the two messages the agent's
//! conversation begins with, and each `turn` line only what that turn added, so a trace
//! grows linearly with the number of turns. The conversation an agent sent at turn N is
//! its `start` messages followed, for each of its earlier turns, by the `reply` (as an
//! `assistant` message) and the `feedback` (as a `user` message), with two exceptions:
//! after a [`Compaction`] line the conversation starts again from the `start` messages,
//! the compaction's `reply` (`assistant`) and its `note` (`user`); and the feedback of a
//! turn listed in turn N's `elided` was sent as a marker
//! ([`Agent::messages_at`](crate::trace::Agent::messages_at) rebuilds both).
//!
//! A child's lines are written as they happen: its `start` and turns come before the line
//! of the parent turn that called it, and the children of one `rlm_query_batched` call
//! interleave, so group lines by `agent`.
//!
//! # `start`
//!
//! ```json
//! {"event": "start", "agent": "0", "depth": 0, "question": "Q",
//!  "messages": [{"role": "system", "content": "…"}, {"role": "user", "content": "Q …"}],
//!  "version": "0.1.0", "model": "gpt-4o-mini", "base_url": "https://api.openai.com/v1",
//!  "started_unix_ms": 1767225600000, "prompt_mode": "compact", "answer_protocol": "final",
//!  "answer_schema": null,
//!  "limits": {"max_iterations": 10, "max_depth": 1, "max_consecutive_errors": 3, "output_bytes": 10000,
//!             "block": {"time_ms": 300000, "memory_bytes": 536870912, "output_bytes": 1048576,
//!                       "llm_calls": 256, "recursion_depth": 1000},
//!             "budgets": {"total_tokens": 200000, "llm_calls": null, "wall_time_ms": null}},
//!  "context": {"sha256": "…", "bytes": 1234, "chunks": null},
//!  "batch": null, "at_ms": 0}
//! ```
//!
//! | field | meaning |
//! |---|---|
//! | `agent` | `"0"` for the root, `"0.1"`, `"0.2"` … for its children in the order they were called (the children of one `rlm_query_batched` call in the batch's order), `"0.1.1"` … below |
//! | `depth` | 0 for the root |
//! | `question` | the question (the root's) or the sub-task (a child's), as asked |
//! | `messages` | the system prompt and the question as sent, `{role, content}` |
//! | `version` | the version of this crate that wrote the line |
//! | `model` | the model the loop asks (`null` when the [`Llm`](crate::llm::Llm) cannot say, as a scripted fake cannot) |
//! | `base_url` | the server's base URL, without credentials, query or fragment; never the API key |
//! | `started_unix_ms` | when the run began, wall clock, in milliseconds since the Unix epoch (UTC); the same on every `start` line of a run |
//! | `prompt_mode` | how the system prompt lists the functions: `compact` or `full` (`auto` is recorded as what it chose for the run) |
//! | `answer_protocol` | the way of ending the run the prompt teaches: `final` (`FINAL(value)`) or `answer` (the `answer` table); both always work |
//! | `answer_schema` | the JSON Schema the agent's answer had to match (`null` without one); a typed answer's `final` is its JSON text |
//! | `limits` | every limit of the run, see [`RunLimits`] (`context_window` only when one was given) |
//! | `context` | the agent's context: its SHA-256, size and chunks, see [`ContextDigest`] (`null` without a context) |
//! | `batch` | for a child of `rlm_query_batched`: its place in the batch, `{index, size}`, `index` 0-based (`null` otherwise) |
//! | `at_ms` | when the line was written, in milliseconds since the run began |
//!
//! # `turn`
//!
//! ```json
//! {"event": "turn", "agent": "0", "depth": 0, "turn": 1, "messages_sent": 2,
//!  "reply": "```lua\nprint(rlm_query('Sub-task'))\n```",
//!  "code_blocks": ["print(rlm_query('Sub-task'))\n"],
//!  "outputs": [{"block": 1, "status": "ok", "output": "from the child\n", "error": null, "elapsed_ms": 12}],
//!  "feedback": "Output of block 1:\nfrom the child\n", "final": null, "error": null,
//!  "elapsed_ms": 20, "llm_ms": 8, "prompt_tokens": 10, "completion_tokens": 5, "run_tokens": 30,
//!  "at_ms": 41}
//! ```
//!
//! | field | meaning |
//! |---|---|
//! | `agent`, `depth` | as on the agent's `start` line |
//! | `turn` | 1-based, per agent |
//! | `messages_sent` | how many messages went to the model: 2, plus 2 per earlier turn (4 plus 2 per turn since the last compaction) |
//! | `reply` | the model's reply, the assistant message this turn adds (`null` if the call failed or a budget refused it) |
//! | `code_blocks` | the code found in the reply |
//! | `outputs` | per block, a [`Block`]: `block` (1-based), `status` (`ok`, `error`, `limit`, `not run`), the full `output`, the `error`, `elapsed_ms`, and `sub_calls` (below; left out when the block made none) |
//! | `feedback` | the user message this turn adds, truncated as the model got it (`null` on the agent's last turn) |
//! | `final` | the final answer, on the turn that gave it |
//! | `error` | why the agent stopped, on the turn that ended it with an error |
//! | `elapsed_ms`, `llm_ms` | the whole turn (children included), and the model call |
//! | `prompt_tokens`, `completion_tokens` | of this turn's model call |
//! | `finish_reason` | why the model stopped writing the reply, as the server said (`length`: cut at the token limit); left out when it said nothing |
//! | `run_tokens` | tokens spent by the whole run so far, every agent and sub-call included (an answer from the call cache spends none) |
//! | `cached` | `true` when the reply came from the call cache (`--cache`) rather than the server; absent otherwise |
//! | `waited_ms` | when the cached reply was another worker's identical call that this run waited for rather than send the request again (single-flight, workers sharing a cache): how long it waited; absent otherwise |
//! | `cost` | what this turn's model call cost in US dollars: the server's `usage.cost`, else the price table's (`[prices]` in `rlm.toml`); absent when not known or cached |
//! | `run_cost` | what the whole run had cost when the turn ended, in US dollars; absent when the run knows no cost (no price, no `usage.cost`, no `--max-cost`) |
//! | `elided` | the earlier turns whose feedback this request held as a marker (no known window; see `Rlm::compact_at`); absent when none |
//! | `at_ms` | when the line was written, in milliseconds since the run began |
//!
//! # `compaction`
//!
//! Written between two turns of an agent whose conversation was summarised to fit the
//! model's window ([`Rlm::compact_at`](super::Rlm::compact_at)); its fields are those of
//! [`Compaction`]:
//!
//! ```json
//! {"event": "compaction", "agent": "0", "depth": 0, "turn": 2, "messages_before": 6,
//!  "tokens_before": 9421, "messages_summarized": 4, "reply": "Summary: …",
//!  "note": "Your conversation was compacted (1 time) …", "tokens_after": 3406,
//!  "prompt_tokens": 6344, "completion_tokens": 212, "llm_ms": 840, "run_tokens": 15230,
//!  "at_ms": 5120}
//! ```
//!
//! A replay plays its `reply` back as the answer to the request for the summary, at its
//! place among the agent's turns: an agent's turn replies and summaries are one tape, in
//! the order the run asked for them.
//!
//! # Sub-calls
//!
//! Each block's `sub_calls` are the model calls its code made, in the order it made them:
//! `llm_query`, each prompt of `llm_query_batched` in the batch's order, `fn_search`'s
//! LLM modes, and a `rlm_query` that fell back to a plain call. A [`SubCall`] holds the
//! request's `messages` as sent, and the `answer` (or the `error`) with its tokens (and its
//! `cost` in US dollars, where known):
//!
//! ```json
//! {"block": 1, "status": "ok", "output": "4\n", "error": null, "elapsed_ms": 3,
//!  "sub_calls": [{"messages": [{"role": "user", "content": "2 + 2?"}], "answer": "4",
//!                 "prompt_tokens": 10, "completion_tokens": 1}]}
//! ```
//!
//! A `rlm_query` child is an agent of its own, with its own lines. Together with each
//! turn's `reply`, this is everything the model said during the run, which is what lets
//! [`Replay`](super::Replay) run it again without a server. A call a budget refused was
//! never sent and is not listed.
//!
//! # Progress lines, and resuming
//!
//! So that a run killed mid-turn keeps what the model said, two lines are written before
//! the `turn` line, as things happen: a `reply` line ([`ReplyRecord`]) when a reply
//! arrives, before its code runs, and a `call` line ([`CallRecord`]: `agent`, `turn`,
//! `block` and a [`SubCall`]'s fields) as each call of its code is answered. The `turn`
//! line repeats them: they are the one exception to "no line repeats an earlier one".
//! `rlm ask --resume` appends a `resume` line ([`ResumeRecord`]), then only lines not on
//! file, `at_ms` going on from the first run's clock; a turn that had ended its agent with
//! an error is written again when the resumed run goes on from it, and the later line of
//! a turn number counts. The root's `start` line records what a resume checks:
//! `context_paths` (absolute) and `registry` ([`RegistryDigest`]).
//!
//! # Journals
//!
//! Each block's `journal` (left out when empty) is what its code read from outside the
//! sandbox, in order, each entry a [`JournalEntry`](crate::environment::JournalEntry):
//! `call` (`os.time`, `os.clock`, `os.date`, `math.randomseed`, `ask_user`, or a host
//! function that is not pure: `store_set`, `read_file`, `shell`, …) and its `value` (left
//! out when `null`) or its `error`. A replay hands each block its journal back, so the
//! clock, the random numbers and the user's answers are those of the recorded run, and
//! external effects are not repeated. Random numbers are journaled by their seed, once:
//!
//! ```json
//! {"block": 1, "status": "ok", "output": "1700000000\t7\n", "error": null, "elapsed_ms": 1,
//!  "journal": [{"call": "os.time", "value": 1700000000},
//!              {"call": "math.randomseed", "value": 8313712350421306513}]}
//! ```
//!
//! # Older traces
//!
//! A reader ignores fields and events it does not know, and every field added since the
//! first traces (`at_ms`, on `start` lines `version` through `batch`, on `turn` lines
//! `finish_reason`, on blocks `sub_calls` and `journal`) reads as absent (`None`, empty) from a trace
//! written before it existed.
//!
//! ```
//! use rlm_registry::rlm::trajectory::{Record, Turn};
//!
//! let line = r#"{"event":"turn","agent":"0","turn":1,"reply":"FINAL(1)","final":"1","prompt_tokens":5,"completion_tokens":2}"#;
//! let Record::Turn(turn) = serde_json::from_str::<Record>(line)? else { panic!("a turn") };
//! assert_eq!(turn.final_answer.as_deref(), Some("1"));
//! assert_eq!(turn.tokens(), 7);
//! assert_eq!(turn.at_ms, None, "written before the field existed");
//! # Ok::<(), serde_json::Error>(())
//! ```

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::environment::Limits;
use crate::llm::{Completion, Cost, ImageRecord, LlmError, Message, ReasoningEffort, Request};

use super::budget::Budgets;
use super::compaction::CompactAt;
pub use super::compaction::Compaction;

mod digest;
mod progress;

pub use digest::ContextDigest;
pub use progress::{CallRecord, RegistryDigest, ReplyRecord, ResumeRecord};

/// One line of a trace, tagged by its `event` field.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
// A record is made, written and dropped, one at a time: boxing the larger `start` would
// cost an allocation and save no copy worth having.
#[allow(clippy::large_enum_variant)]
pub enum Record {
    /// An agent begins: written once per agent, before its first turn.
    Start(Start),
    /// One of an agent's turns ended.
    Turn(Turn),
    /// A turn's reply arrived (its code has not run yet).
    Reply(ReplyRecord),
    /// A model call of a block's code was answered.
    Call(CallRecord),
    /// A resumed run begins here.
    Resume(ResumeRecord),
    /// An agent's conversation was summarised and restarted to fit the window.
    Compaction(Compaction),
    /// An event this version does not know (a later version may write more): read and
    /// skipped, never written.
    #[serde(other)]
    Unknown,
}

impl Record {
    /// When the line was written, in milliseconds since the run began.
    pub fn at_ms(&self) -> Option<u64> {
        match self {
            Record::Start(start) => start.at_ms,
            Record::Turn(turn) => turn.at_ms,
            Record::Reply(reply) => reply.at_ms,
            Record::Call(call) => call.at_ms,
            Record::Resume(resume) => resume.at_ms,
            Record::Compaction(compaction) => compaction.at_ms,
            Record::Unknown => None,
        }
    }
}

/// The `start` line of an agent: who it is, what it was asked, and what the run was.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Start {
    /// `0` for the root, `0.1`, `0.2` … for its children, `0.1.1` … below.
    pub agent: String,
    /// 0 for the root.
    #[serde(default)]
    pub depth: usize,
    /// The question (the root's) or sub-task (a child's), as asked.
    #[serde(default)]
    pub question: String,
    /// The system prompt and the question as sent.
    #[serde(default)]
    pub messages: Vec<Message>,
    /// The images a child's model sees with its sub-task (`rlm_query`'s `opts.images`),
    /// as a sub-call records them: never the bytes (left out of the JSON when none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<ImageRecord>,
    /// What the run was: model, server, limits, clock, version, context.
    #[serde(flatten)]
    pub setup: Setup,
    /// When the line was written, in milliseconds since the run began.
    #[serde(default)]
    pub at_ms: Option<u64>,
}

/// What a run was, as each agent's `start` line records it. Every field is `None` in a
/// trace written before it existed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Setup {
    /// The version of this crate that wrote the trace.
    pub version: Option<String>,
    /// The model the loop asks, as its [`Llm`](crate::llm::Llm) names it.
    pub model: Option<String>,
    /// The server's base URL, without credentials, query or fragment.
    pub base_url: Option<String>,
    /// The reply limit the client sent with requests that set none (`--max-reply-tokens`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_reply_tokens: Option<u32>,
    /// The reasoning effort the client sent (`--reasoning-effort`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<ReasoningEffort>,
    /// When the run began, in milliseconds since the Unix epoch (UTC).
    pub started_unix_ms: Option<u64>,
    /// `full` or `compact`: how the system prompt lists the functions.
    pub prompt_mode: Option<String>,
    /// `final` or `answer`: the way of ending the run the prompt teaches (both work).
    pub answer_protocol: Option<String>,
    /// The JSON Schema the agent's answer had to match, if any.
    pub answer_schema: Option<serde_json::Value>,
    /// The limits of the run.
    pub limits: Option<RunLimits>,
    /// The agent's context, `None` without one.
    pub context: Option<ContextDigest>,
    /// A child of `rlm_query_batched`: its place in the batch.
    pub batch: Option<BatchSlot>,
    /// The root's context as given: its paths, absolute (left out when unknown).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_paths: Option<Vec<String>>,
    /// The registry the root's code ran with (left out on a child's line).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub registry: Option<RegistryDigest>,
}

/// Every limit and budget of a run. Each agent records the limits it ran under: the same
/// for every agent but `block.time_ms`, which a child gets lowered to the run's wall-time
/// budget left when it starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunLimits {
    /// Turns of each agent before it gives up.
    pub max_iterations: u32,
    /// The deepest level of children (0: no children).
    pub max_depth: usize,
    /// Turns in a row with an error before an agent gives up (0: no cap).
    pub max_consecutive_errors: u32,
    /// Bytes of code output fed back to the model per turn.
    pub output_bytes: usize,
    /// The model's context window in tokens, if it was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
    /// The share of the window at which a conversation is compacted; `None` when
    /// compaction was off (and in a trace written before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compact_at: Option<CompactAt>,
    /// The limits of each code block.
    pub block: BlockLimits,
    /// What the whole run may spend.
    pub budgets: RunBudgets,
}

/// The limits of each code block ([`Limits`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockLimits {
    /// Wall-clock time one block may run, waiting on sub-calls included.
    pub time_ms: u64,
    /// Memory the agent's Lua state may use, its context included.
    pub memory_bytes: usize,
    /// Bytes of `print` output one block may produce.
    pub output_bytes: usize,
    /// Sub-model calls one block may make.
    pub llm_calls: usize,
    /// Nested Lua calls.
    pub recursion_depth: usize,
}

/// The budgets the whole run shares ([`Budgets`]); `None` is unlimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunBudgets {
    /// Prompt and completion tokens.
    pub total_tokens: Option<u64>,
    /// Model calls.
    pub llm_calls: Option<u64>,
    /// Wall time from the start of the run.
    pub wall_time_ms: Option<u64>,
    /// US dollars (`--max-cost`); left out when unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost: Option<Cost>,
}

/// A child's place in its `rlm_query_batched` call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchSlot {
    /// 0-based position of its prompt in the batch.
    pub index: usize,
    /// Prompts in the batch.
    pub size: usize,
}

/// The `turn` line: what one turn of one agent added.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Turn {
    /// The agent's id, as on its `start` line.
    pub agent: String,
    /// 0 for the root.
    #[serde(default)]
    pub depth: usize,
    /// 1-based, per agent.
    pub turn: u32,
    /// How many messages went to the model.
    #[serde(default)]
    pub messages_sent: usize,
    /// The model's reply as the server sent it, inline thinking included (`None` if the
    /// call failed or a budget refused it).
    #[serde(default)]
    pub reply: Option<String>,
    /// The thinking the server sent apart from the reply (`reasoning_content` or
    /// `reasoning`); [`Turn::thinking`] adds the reply's inline thinking to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    /// What went back into the conversation as the model's turn, when it is not the
    /// reply itself: the reply without its thinking.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_back: Option<String>,
    /// The code found in the reply.
    #[serde(default)]
    pub code_blocks: Vec<String>,
    /// What each block did.
    #[serde(default)]
    pub outputs: Vec<Block>,
    /// The message sent back to the model (`None` on the agent's last turn).
    #[serde(default)]
    pub feedback: Option<String>,
    /// The final answer, on the turn that gave it.
    #[serde(default, rename = "final")]
    pub final_answer: Option<String>,
    /// Why the agent stopped, on the turn that ended it with an error.
    #[serde(default)]
    pub error: Option<String>,
    /// The whole turn, children included.
    #[serde(default)]
    pub elapsed_ms: u64,
    /// The model call.
    #[serde(default)]
    pub llm_ms: u64,
    /// Prompt tokens of this turn's model call.
    #[serde(default)]
    pub prompt_tokens: u64,
    /// Completion tokens of this turn's model call.
    #[serde(default)]
    pub completion_tokens: u64,
    /// Of the completion tokens, those spent thinking, where the server reports them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reasoning_tokens: u64,
    /// Why the model stopped writing the reply, as the server said (`length`: cut at the
    /// token limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    /// Tokens the whole run had spent when this turn ended.
    #[serde(default)]
    pub run_tokens: u64,
    /// The turn's reply came from the call cache, not the server (its tokens are those
    /// of the run that first asked, and cost this one nothing). Written only when true.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cached: bool,
    /// The cached reply was another worker's identical call, which this run waited for
    /// (single-flight): how long, in milliseconds. Left out otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waited_ms: Option<u64>,
    /// What this turn's model call cost in US dollars, where known (the server's
    /// `usage.cost`, else the price table's); left out when not known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<Cost>,
    /// What the whole run had cost when this turn ended, in US dollars; left out when
    /// the run knows no cost (no price, no `usage.cost`, no `--max-cost`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_cost: Option<Cost>,
    /// The earlier turns whose feedback this turn's request held as a short marker, not
    /// whole (a run without a known window keeps only the latest outputs whole); left
    /// out when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub elided: Vec<u32>,
    /// When the line was written, in milliseconds since the run began.
    #[serde(default)]
    pub at_ms: Option<u64>,
}

impl Turn {
    /// Prompt and completion tokens of this turn's model call.
    pub fn tokens(&self) -> u64 {
        self.prompt_tokens.saturating_add(self.completion_tokens)
    }

    /// The reply as the model's completion, as replay and resume play it back (`None`
    /// when the call failed or a budget refused it); whether the cache gave it is left
    /// to the caller.
    pub(crate) fn completion(&self) -> Option<Completion> {
        let reply = self.reply.as_ref()?;
        let mut completion =
            Completion::new(reply.clone()).with_tokens(self.prompt_tokens, self.completion_tokens);
        completion.finish_reason.clone_from(&self.finish_reason);
        completion.reasoning.clone_from(&self.reasoning);
        completion.reasoning_tokens = self.reasoning_tokens;
        completion.cost = self.cost;
        Some(completion)
    }

    /// The first block that failed, if any.
    pub fn failed_block(&self) -> Option<&Block> {
        self.outputs.iter().find(|b| b.error.is_some())
    }

    /// The reply's thinking: the part sent apart, then the inline part
    /// ([`Completion::thinking`]); `None` without any.
    ///
    /// ```
    /// use rlm_registry::rlm::trajectory::Turn;
    /// let turn = Turn { reply: Some("<think>hmm</think>\nprint(1)".into()), ..Turn::default() };
    /// assert_eq!(turn.thinking().as_deref(), Some("hmm"));
    /// ```
    pub fn thinking(&self) -> Option<String> {
        thinking_of(self.reply.as_deref(), self.reasoning.as_deref())
    }

    /// What went back into the conversation as the model's turn: [`Turn::sent_back`],
    /// else the reply.
    pub fn reply_sent_back(&self) -> Option<&str> {
        self.sent_back.as_deref().or(self.reply.as_deref())
    }
}

/// The thinking of a `reply` with `reasoning` sent apart, as [`Completion::thinking`]
/// reads it.
fn thinking_of(reply: Option<&str>, reasoning: Option<&str>) -> Option<String> {
    let mut completion = Completion::new(reply.unwrap_or_default());
    completion.reasoning = reasoning.map(str::to_string);
    completion.thinking()
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// What one code block of a turn did (an entry of `outputs`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Block {
    /// 1-based, in the order of the reply.
    #[serde(default)]
    pub block: usize,
    /// How it ended.
    pub status: BlockStatus,
    /// Everything the block printed, uncut.
    #[serde(default)]
    pub output: String,
    /// The error message, for `error` and `limit`.
    #[serde(default)]
    pub error: Option<String>,
    /// How long the block ran.
    #[serde(default)]
    pub elapsed_ms: u64,
    /// The model calls its code made, in order (left out of the JSON when none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sub_calls: Vec<SubCall>,
    /// What its code read from outside the sandbox, in order (left out of the JSON when
    /// nothing): see the module's "Journals".
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub journal: Vec<crate::environment::JournalEntry>,
}

/// One model call a block's code made (`llm_query` and the like): the request as sent
/// and what came back.
///
/// ```
/// use rlm_registry::llm::{Completion, Message};
/// use rlm_registry::rlm::trajectory::SubCall;
///
/// let call = SubCall::of(vec![Message::user("2 + 2?")], &Ok(Completion::new("4").with_tokens(10, 1)));
/// assert_eq!((call.answer.as_deref(), call.prompt_tokens), (Some("4"), 10));
/// assert_eq!(call.prompt(), "2 + 2?");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubCall {
    /// The request's messages (for `llm_query`, one user message holding the prompt).
    #[serde(default)]
    pub messages: Vec<Message>,
    /// The model's answer as the server sent it, inline thinking included (the code got
    /// it without); `None` when the call failed.
    #[serde(default)]
    pub answer: Option<String>,
    /// The thinking the server sent apart from the answer (`reasoning_content`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    /// Why the call failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Prompt tokens of the call.
    #[serde(default)]
    pub prompt_tokens: u64,
    /// Completion tokens of the call.
    #[serde(default)]
    pub completion_tokens: u64,
    /// `true` when the answer came from the call cache rather than the server.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cached: bool,
    /// The cached answer was another worker's identical call, which this run waited for
    /// (single-flight): how long, in milliseconds. Left out otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waited_ms: Option<u64>,
    /// What the call cost in US dollars, where known; left out when not known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<Cost>,
    /// The images sent with the prompt (`opts.images`): each one's name, MIME type,
    /// size and SHA-256, never its bytes (left out of the JSON when none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<ImageRecord>,
}

impl SubCall {
    /// The record of a call of `messages` that gave `result`.
    pub fn of(messages: Vec<Message>, result: &Result<Completion, LlmError>) -> SubCall {
        match result {
            Ok(completion) => SubCall {
                messages,
                answer: Some(completion.content.clone()),
                reasoning: completion.reasoning.clone(),
                error: None,
                prompt_tokens: completion.prompt_tokens,
                completion_tokens: completion.completion_tokens,
                cached: completion.cached,
                waited_ms: completion.waited_ms(),
                cost: completion.cost,
                images: Vec::new(),
            },
            Err(error) => SubCall {
                messages,
                answer: None,
                reasoning: None,
                error: Some(error.to_string()),
                prompt_tokens: 0,
                completion_tokens: 0,
                cached: false,
                waited_ms: None,
                cost: None,
                images: Vec::new(),
            },
        }
    }

    /// The record of `request`, sent, that gave `result`: its messages and its images.
    ///
    /// ```
    /// use rlm_registry::llm::{Completion, ImagePart, Request};
    /// use rlm_registry::rlm::trajectory::SubCall;
    ///
    /// let image = ImagePart::new(Some("a.png".into()), "image/png", vec![1u8, 2])?;
    /// let request = Request::from("What is this?").with_images(vec![image]);
    /// let call = SubCall::sent(&request, &Ok(Completion::new("a dot")));
    /// assert_eq!((call.images[0].name.as_str(), call.images[0].bytes), ("a.png", 2));
    /// # Ok::<(), String>(())
    /// ```
    pub fn sent(request: &Request, result: &Result<Completion, LlmError>) -> SubCall {
        SubCall {
            images: request.image_records(),
            ..SubCall::of(request.messages.clone(), result)
        }
    }

    /// The answer's thinking, sent apart or inline; `None` without any.
    pub fn thinking(&self) -> Option<String> {
        thinking_of(self.answer.as_deref(), self.reasoning.as_deref())
    }

    /// The text of its messages, one after the other: the prompt as a reader sees it.
    pub fn prompt(&self) -> String {
        let texts: Vec<&str> = self.messages.iter().map(Message::text).collect();
        texts.join("\n\n")
    }
}

/// How a code block ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BlockStatus {
    /// It ran to its end (`"ok"`).
    #[serde(rename = "ok")]
    Ok,
    /// It raised a Lua error (`"error"`).
    #[serde(rename = "error")]
    Error,
    /// It hit a limit: time, memory, output… (`"limit"`).
    #[serde(rename = "limit")]
    Limit,
    /// It did not run: an earlier block failed or gave the final answer (`"not run"`).
    #[serde(rename = "not run")]
    NotRun,
}

impl BlockStatus {
    /// The name in the trace: `ok`, `error`, `limit` or `not run`.
    pub fn as_str(self) -> &'static str {
        match self {
            BlockStatus::Ok => "ok",
            BlockStatus::Error => "error",
            BlockStatus::Limit => "limit",
            BlockStatus::NotRun => "not run",
        }
    }
}

impl fmt::Display for BlockStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<&Limits> for BlockLimits {
    fn from(limits: &Limits) -> BlockLimits {
        BlockLimits {
            time_ms: millis(limits.time),
            memory_bytes: limits.memory_bytes,
            output_bytes: limits.output_bytes,
            llm_calls: limits.llm_calls,
            recursion_depth: limits.recursion_depth,
        }
    }
}

impl From<&Budgets> for RunBudgets {
    fn from(budgets: &Budgets) -> RunBudgets {
        RunBudgets {
            total_tokens: budgets.total_tokens,
            llm_calls: budgets.llm_calls,
            wall_time_ms: budgets.wall_time.map(millis),
            max_cost: budgets.max_cost,
        }
    }
}

/// A duration in whole milliseconds, saturating.
pub(crate) fn millis(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::super::context::Context;
    use super::*;

    #[test]
    fn records_are_tagged_and_turns_carry_no_messages() {
        let start = Record::Start(Start {
            agent: "0.1".into(),
            depth: 1,
            question: "Q".into(),
            messages: vec![Message::system("S"), Message::user("Q")],
            ..Start::default()
        });
        let json = serde_json::to_value(&start).unwrap();
        assert_eq!(json["event"], "start");
        assert_eq!(json["agent"], "0.1");
        assert_eq!(
            json["messages"][0],
            serde_json::json!({"role": "system", "content": "S"})
        );
        assert!(
            json.get("setup").is_none(),
            "the setup's fields are the line's own"
        );
        assert!(json.as_object().unwrap().contains_key("model"));

        let turn = Record::Turn(Turn {
            agent: "0".into(),
            turn: 2,
            messages_sent: 4,
            final_answer: Some("done".into()),
            outputs: vec![Block {
                block: 1,
                status: BlockStatus::NotRun,
                output: String::new(),
                error: None,
                elapsed_ms: 0,
                sub_calls: Vec::new(),
                journal: Vec::new(),
            }],
            ..Turn::default()
        });
        let json = serde_json::to_value(&turn).unwrap();
        assert_eq!(json["event"], "turn");
        assert_eq!(json["final"], "done");
        assert_eq!(json["outputs"][0]["status"], "not run");
        assert!(json.get("messages").is_none());
        for record in [start, turn] {
            let line = serde_json::to_string(&record).unwrap();
            assert_eq!(serde_json::from_str::<Record>(&line).unwrap(), record);
        }
    }

    #[test]
    fn a_start_line_of_an_older_trace_reads_with_no_setup_and_unknown_events_are_skipped() {
        let line = r#"{"event":"start","agent":"0","depth":0,"question":"Q","messages":[{"role":"user","content":"Q"}],"at_ms":3}"#;
        let Record::Start(start) = serde_json::from_str(line).unwrap() else {
            panic!("a start line");
        };
        assert_eq!(start.setup, Setup::default());
        assert_eq!(start.at_ms, Some(3));
        let later = r#"{"event":"heartbeat","agent":"0"}"#;
        assert_eq!(
            serde_json::from_str::<Record>(later).unwrap(),
            Record::Unknown
        );
        let bad_status = r#"{"event":"turn","agent":"0","turn":1,"outputs":[{"status":"odd"}]}"#;
        assert!(serde_json::from_str::<Record>(bad_status).is_err());
    }

    #[test]
    fn a_corpus_digest_covers_kinds_and_image_bytes() {
        use crate::corpus::{Corpus, Document, DocumentKind, Image};
        let image = |data: &[u8], kind| Document {
            kind,
            image: Some(Image {
                mime: "image/png".into(),
                data: std::sync::Arc::from(data),
            }),
            ..Document::text("shot.png", "")
        };
        let digest = |document: Document| {
            ContextDigest::of(&Context::Corpus(Corpus {
                documents: vec![Document::text("a.md", "x"), document],
                skipped: 0,
            }))
        };
        let first = digest(image(b"\x89PNG one", DocumentKind::Image));
        assert_eq!(first, digest(image(b"\x89PNG one", DocumentKind::Image)));
        assert_ne!(
            first.sha256,
            digest(image(b"\x89PNG two", DocumentKind::Image)).sha256
        );
        assert_ne!(
            first.sha256,
            digest(image(b"\x89PNG one", DocumentKind::Pdf)).sha256
        );
    }
}
