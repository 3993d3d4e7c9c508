//! A history that fits the window. Before each request an agent's conversation is
//! measured against the model's context window; when it would pass the threshold
//! ([`CompactAt`], 85% of the window by default) the model is asked for a summary of its
//! work so far, and the conversation restarts as system prompt, question, summary and a
//! note that the REPL's globals are intact (every word in [`super::prompt`]). Nothing is
//! lost: every message of the run stays in the Lua table `history`, a list of
//! `{role = …, content = …}` (the shape the reference RLM uses), set again after each
//! turn. Without a known window, outputs older than the latest
//! [`ELIDED_BEYOND_TOKENS`] tokens of them are sent as a short marker naming where they
//! are whole (`history[i].content`).
//!
//! A compaction is a trace record ([`Compaction`]): its summary is played back at its
//! place in the agent's turn tape by a replay.

use std::fmt;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::{Value as Json, json};

use crate::environment::{ContextWindow, Environment, reply_reserve, request_tokens};
use crate::llm::{Completion, Cost, Message, Request, Role};
use crate::text_format::{cut_chars, first_line, thousands};
use crate::tokens;

use super::agent::Agent;
use super::prompt;
use super::report::RlmError;
use super::trajectory::{Record, millis};

/// The default threshold: a conversation is compacted before a request would pass 85%
/// of the window.
pub const DEFAULT_COMPACT_AT: CompactAt = CompactAt(850_000);

/// Without a known window, the tokens of the latest outputs sent whole; older ones are
/// sent as a marker (the latest output is always sent whole).
pub const ELIDED_BEYOND_TOKENS: u64 = 24_000;

/// The share of the context window at which a conversation is compacted: above 0, at
/// most 1. Written in a trace as a number (`0.85`).
///
/// ```
/// use rlm_registry::rlm::CompactAt;
///
/// assert_eq!(CompactAt::parse("0.9")?.map(CompactAt::fraction), Some(0.9));
/// assert_eq!(CompactAt::parse("off")?, None);
/// assert_eq!(CompactAt::parse("0")?, None, "0 turns compaction off too");
/// assert!(CompactAt::parse("1.5").is_err());
/// assert!(CompactAt::parse("most").is_err());
/// # Ok::<(), String>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "f64", try_from = "f64")]
pub struct CompactAt(u32);

impl CompactAt {
    /// `fraction` of the window, which must be above 0 and at most 1.
    pub fn new(fraction: f64) -> Result<CompactAt, String> {
        if fraction.is_finite() && fraction > 0.0 && fraction <= 1.0 {
            // In millionths, so that the threshold is exact and comparable.
            Ok(CompactAt((fraction * 1e6).round() as u32))
        } else {
            Err(format!(
                "{fraction} is not a share of the window: give a number above 0 and at most 1 (such as 0.85), or `off`"
            ))
        }
    }

    /// What `--compact-at` and `RLM_COMPACT_AT` take: a share of the window, or `off`
    /// (or `0`) for no compaction (`None`).
    pub fn parse(text: &str) -> Result<Option<CompactAt>, String> {
        let text = text.trim();
        if text.eq_ignore_ascii_case("off") {
            return Ok(None);
        }
        let fraction: f64 = text.parse().map_err(|_| {
            format!("`{text}` is not a share of the window: give a number such as 0.85, or `off`")
        })?;
        if fraction == 0.0 {
            return Ok(None);
        }
        CompactAt::new(fraction).map(Some)
    }

    /// The share, as a number between 0 and 1.
    pub fn fraction(self) -> f64 {
        f64::from(self.0) / 1e6
    }

    /// The threshold in tokens for a `window`.
    fn of(self, window: u64) -> u64 {
        let tokens = u128::from(window) * u128::from(self.0) / 1_000_000;
        u64::try_from(tokens).unwrap_or(u64::MAX)
    }
}

impl Default for CompactAt {
    fn default() -> CompactAt {
        DEFAULT_COMPACT_AT
    }
}

impl fmt::Display for CompactAt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.fraction())
    }
}

impl From<CompactAt> for f64 {
    fn from(at: CompactAt) -> f64 {
        at.fraction()
    }
}

impl TryFrom<f64> for CompactAt {
    type Error = String;

    fn try_from(fraction: f64) -> Result<CompactAt, String> {
        CompactAt::new(fraction)
    }
}

/// The `compaction` line: an agent's conversation was summarised and restarted before
/// turn `turn + 1`. The conversation that agent sends next is its `start` messages, the
/// `reply` (as an `assistant` message) and the `note` (as a `user` message), then the
/// turns after `turn`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Compaction {
    /// The agent's id, as on its `start` line.
    pub agent: String,
    /// 0 for the root.
    #[serde(default)]
    pub depth: usize,
    /// The last turn the summary stands for.
    pub turn: u32,
    /// Messages in the conversation before it was compacted.
    #[serde(default)]
    pub messages_before: usize,
    /// The request that would have been sent without compaction, in `o200k_base`
    /// tokens.
    #[serde(default)]
    pub tokens_before: u64,
    /// Messages the request for the summary held: the conversation, its oldest turns
    /// left out when the whole would not fit the window.
    #[serde(default)]
    pub messages_summarized: usize,
    /// The summary as the model wrote it (`None` if the call failed).
    #[serde(default)]
    pub reply: Option<String>,
    /// The thinking the server sent apart from the summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    /// Why the call for the summary failed, ending the agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The user message after the summary that restarts the conversation.
    #[serde(default)]
    pub note: String,
    /// The next request after the compaction, in `o200k_base` tokens.
    #[serde(default)]
    pub tokens_after: u64,
    /// The window the server stated when it refused turn `turn + 1`'s request as too
    /// long, which this compaction was made for (the turn was then asked again, and the
    /// agent's window is this one from then on); `None` when the window check made it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<u64>,
    /// Prompt tokens of the call for the summary.
    #[serde(default)]
    pub prompt_tokens: u64,
    /// Completion tokens of the call for the summary.
    #[serde(default)]
    pub completion_tokens: u64,
    /// The call for the summary.
    #[serde(default)]
    pub llm_ms: u64,
    /// Tokens the whole run had spent after it.
    #[serde(default)]
    pub run_tokens: u64,
    /// The summary came from the call cache.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cached: bool,
    /// The cached summary was another worker's identical call, which this run waited
    /// for: how long, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waited_ms: Option<u64>,
    /// What the call for the summary cost in US dollars, where known; left out when not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<Cost>,
    /// When the line was written, in milliseconds since the run began.
    #[serde(default)]
    pub at_ms: Option<u64>,
}

impl Compaction {
    /// Prompt and completion tokens of the call for the summary.
    pub fn tokens(&self) -> u64 {
        self.prompt_tokens.saturating_add(self.completion_tokens)
    }

    /// The completion the model gave, as a replay plays it back.
    pub(crate) fn completion(&self) -> Result<Completion, String> {
        match &self.reply {
            Some(reply) => {
                let mut completion = Completion::new(reply.clone())
                    .with_tokens(self.prompt_tokens, self.completion_tokens);
                completion.reasoning.clone_from(&self.reasoning);
                completion.cost = self.cost;
                Ok(completion)
            }
            None => Err(self
                .error
                .clone()
                .unwrap_or_else(|| "the recorded call failed".to_string())),
        }
    }
}

/// What a compaction is made against: the window, the request's tokens before it, and
/// the window a server's refusal stated when one led to it.
struct Before {
    window: u64,
    tokens: u64,
    refused: Option<u64>,
}

/// An agent's conversation, and with compaction on, every message of it in order.
pub(super) struct Conversation {
    /// What the model reads, from the last restart on.
    messages: Vec<Message>,
    /// Messages it began with: the system prompt and the question.
    first: usize,
    /// Messages it (re)starts with: the turns' pairs of reply and feedback follow.
    start: usize,
    /// The turn of each pair after `start`, and its feedback's tokens (counted once).
    pairs: Vec<(u32, u64)>,
    /// Every message of the run so far, what Lua's `history` holds; kept only when
    /// compaction is on.
    history: Option<Vec<Message>>,
    compactions: u32,
}

impl Conversation {
    /// A conversation that begins with `messages`; `keep` keeps its history.
    pub(super) fn new(messages: Vec<Message>, keep: bool) -> Conversation {
        Conversation {
            first: messages.len(),
            start: messages.len(),
            history: keep.then(|| messages.clone()),
            messages,
            pairs: Vec::new(),
            compactions: 0,
        }
    }

    /// Whether it holds a turn since it last (re)started: only then can it be compacted.
    pub(super) fn has_turns(&self) -> bool {
        !self.pairs.is_empty()
    }

    /// Adds `turn`'s reply and feedback.
    pub(super) fn push_turn(&mut self, turn: u32, reply: String, feedback: String) {
        let tokens = match self.history {
            Some(_) => tokens::count(&feedback) as u64,
            None => 0,
        };
        self.pairs.push((turn, tokens));
        self.push(Message::assistant(reply));
        self.push(Message::user(feedback));
    }

    /// Goes on after an answer: the `reply` that gave it, then the next `question`.
    /// The conversation now begins after them: a compaction summarises only the turns
    /// that follow, and earlier questions and answers stay whole.
    pub(super) fn follow_up(&mut self, reply: String, question: String) {
        self.push(Message::assistant(reply));
        self.push(Message::user(question));
        self.pairs.clear();
        self.first = self.messages.len();
        self.start = self.first;
    }

    fn push(&mut self, message: Message) {
        if let Some(history) = &mut self.history {
            history.push(message.clone());
        }
        self.messages.push(message);
    }

    /// Restarts after the `summary`, with the note that says so.
    fn restart(&mut self, summary: String) -> String {
        self.compactions += 1;
        let note = prompt::compacted(self.compactions);
        self.messages.truncate(self.first);
        self.pairs.clear();
        self.push(Message::assistant(summary));
        self.push(Message::user(note.clone()));
        self.start = self.messages.len();
        note
    }

    /// The messages to send when no window is known: the outputs beyond the latest
    /// `budget` tokens of them as markers; and the turns whose output was left out.
    pub(super) fn elided(&self, budget: u64) -> (Vec<Message>, Vec<u32>) {
        let mut messages = self.messages.clone();
        let mut elided = Vec::new();
        let mut kept = 0u64;
        for (k, &(turn, tokens)) in self.pairs.iter().enumerate().rev() {
            let latest = k + 1 == self.pairs.len();
            if elided.is_empty() && (latest || kept.saturating_add(tokens) <= budget) {
                kept = kept.saturating_add(tokens);
                continue;
            }
            let at = self.start + 2 * k + 1;
            let index = self.history_index(at);
            messages[at] = Message::user(prompt::elided(turn, index, tokens));
            elided.push(turn);
        }
        elided.reverse();
        (messages, elided)
    }

    /// The 1-based index in `history` of the message at `at` in the conversation.
    fn history_index(&self, at: usize) -> usize {
        let total = self.history.as_ref().map_or(0, Vec::len);
        total + at + 1 - self.messages.len()
    }

    /// Sets Lua's `history` to every message so far. A failure (the memory limit) leaves
    /// the last one there and is logged: the run goes on without it.
    pub(super) fn share(&self, env: &Environment) {
        let Some(history) = &self.history else {
            return;
        };
        let list: Vec<Json> = history
            .iter()
            .map(|message| json!({"role": role_name(message.role), "content": message.text()}))
            .collect();
        if let Err(error) = env.set_global("history", &Json::Array(list)) {
            tracing::warn!(%error, "cannot set the Lua table `history`");
        }
    }
}

/// The marker a turn's request held instead of the `feedback` of `turn` (a run without
/// compactions, so its place in `history` follows from the turn).
pub(crate) fn elided_marker(turn: u32, feedback: &str) -> String {
    let index = 2 + 2 * turn as usize;
    prompt::elided(turn, index, tokens::count(feedback) as u64)
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    }
}

impl Agent {
    /// Before `turn`: compacts the conversation against `window` (the agent's) if the
    /// next request would pass the threshold, or whatever its size after the server
    /// `refused` the turn's request stating that window; the messages to send and the
    /// turns whose output they leave out.
    pub(super) fn prepare(
        &self,
        turn: u32,
        env: &Environment,
        conversation: &mut Conversation,
        window: Option<u64>,
        refused: Option<u64>,
    ) -> Result<(Vec<Message>, Vec<u32>), RlmError> {
        let Some(at) = self.config.compact_at else {
            return Ok((conversation.messages.clone(), Vec::new()));
        };
        let Some(window) = window else {
            return Ok(conversation.elided(ELIDED_BEYOND_TOKENS));
        };
        if !conversation.pairs.is_empty() {
            let request = self.request(&conversation.messages);
            let tokens = request_tokens(&request);
            let reserve = reply_reserve(&request, self.reply_limit());
            if refused.is_some()
                || tokens > at.of(window)
                || tokens.saturating_add(reserve) > window
            {
                let before = Before {
                    window,
                    tokens,
                    refused,
                };
                self.compact(turn.saturating_sub(1), env, conversation, before)?;
            }
        }
        Ok((conversation.messages.clone(), Vec::new()))
    }

    /// Asks for the summary of the turns up to `after` and restarts the conversation
    /// with it; the compaction's record is written either way.
    fn compact(
        &self,
        after: u32,
        env: &Environment,
        conversation: &mut Conversation,
        before: Before,
    ) -> Result<(), RlmError> {
        let Before {
            window,
            tokens: tokens_before,
            refused,
        } = before;
        let started = Instant::now();
        let request = self.summary_request(&conversation.messages, window);
        let mut record = Compaction {
            agent: self.id.clone(),
            depth: self.depth,
            turn: after,
            messages_before: conversation.messages.len(),
            tokens_before,
            messages_summarized: request.messages.len(),
            refused,
            ..Compaction::default()
        };
        let result = self.ask_for_summary(request);
        record.llm_ms = millis(started.elapsed());
        let outcome = match result {
            Ok(completion) => {
                record.prompt_tokens = completion.prompt_tokens;
                record.completion_tokens = completion.completion_tokens;
                record.cached = completion.cached;
                record.waited_ms = completion.waited_ms();
                record.cost = completion.cost;
                record.reasoning = completion.reasoning;
                record.note = conversation.restart(completion.content.clone());
                record.reply = Some(completion.content);
                record.tokens_after = request_tokens(&self.request(&conversation.messages));
                self.ledger.count_compaction(record.tokens());
                conversation.share(env);
                Ok(())
            }
            Err(error) => {
                record.error = Some(error.to_string());
                Err(error)
            }
        };
        record.run_tokens = self.ledger.tokens_used();
        if let Some(live) = &self.config.live {
            // Best effort, as every live line: a closed stderr must not stop the run.
            let _ = live.write(&live_line(&record, self.depth));
        }
        if let Some(recorder) = &self.config.recorder {
            recorder
                .record(Record::Compaction(record))
                .map_err(RlmError::Trace)?;
        }
        outcome
    }

    /// The call for the summary, within the run's budgets, as a turn's call is made.
    fn ask_for_summary(&self, request: Request) -> Result<Completion, RlmError> {
        self.ledger
            .complete(self.depth, &self.turn_model(), request)
            .map_err(RlmError::Budget)?
            .map_err(RlmError::Llm)
    }

    /// The request for a summary of `messages`: the request is added to the last
    /// feedback (roles keep alternating), and the oldest turns are left out, then the
    /// longest message cut to its end, until it fits `window`; it is never refused by a
    /// window check of its own.
    fn summary_request(&self, messages: &[Message], window: u64) -> Request {
        let mut kept = messages.to_vec();
        match kept.last_mut() {
            Some(last) if last.role == Role::User => {
                let text = format!("{}\n\n{}", last.text(), prompt::SUMMARY_REQUEST);
                *last = Message::user(text);
            }
            _ => kept.push(Message::user(prompt::SUMMARY_REQUEST)),
        }
        loop {
            let request = self.request(&kept);
            let fits = ContextWindow(window)
                .check(&request, self.reply_limit())
                .is_ok();
            if fits || !shrink(&mut kept) {
                return request;
            }
        }
    }
}

/// `compacted after turn 2 · 9,421 → 3,406 tokens`, indented by depth, for the live view.
fn live_line(record: &Compaction, depth: usize) -> String {
    let indent = "    ".repeat(depth);
    let agent = match depth {
        0 => String::new(),
        _ => format!("[agent {}] ", record.agent),
    };
    let outcome = match &record.error {
        Some(error) => format!("failed: {}", cut_chars(first_line(error), 160)),
        None => format!(
            "{} → {} tokens",
            thousands(record.tokens_before),
            thousands(record.tokens_after)
        ),
    };
    format!(
        "{indent}{agent}compacted after turn {} · {outcome}\n",
        record.turn
    )
}

/// Makes `messages` smaller: leaves out the oldest pair after the system prompt and the
/// question, or when none is left cuts the longest message to its second half (the end
/// of the last one holds the request for the summary). `false` when nothing is left to
/// cut.
fn shrink(messages: &mut Vec<Message>) -> bool {
    if messages.len() > 4 {
        messages.drain(2..4);
        return true;
    }
    let longest = (0..messages.len()).max_by_key(|&i| messages[i].text().len());
    let Some(i) = longest else {
        return false;
    };
    let text = messages[i].text();
    if text.len() < 256 {
        return false;
    }
    let mut cut = text.len() / 2;
    while !text.is_char_boundary(cut) {
        cut += 1;
    }
    messages[i] = Message::new(messages[i].role, &text[cut..]);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conversation(turns: u32, feedback: &str) -> Conversation {
        let mut conversation =
            Conversation::new(vec![Message::system("S"), Message::user("Q")], true);
        for turn in 1..=turns {
            conversation.push_turn(turn, format!("reply {turn}"), feedback.to_string());
        }
        conversation
    }

    #[test]
    fn without_a_window_older_outputs_are_markers_and_the_latest_is_whole() {
        let conversation = conversation(4, &"word ".repeat(1_000));
        let (messages, elided) = conversation.elided(2_500);
        assert_eq!(elided, vec![1, 2], "two outputs of 1,000 tokens fit 2,500");
        assert_eq!(messages.len(), 10);
        assert!(messages[3].text().contains("history[4].content"));
        assert!(messages[3].text().starts_with("[The output of turn 1 ("));
        assert_eq!(messages[9].text(), "word ".repeat(1_000));
        let (_, none) = conversation.elided(u64::MAX);
        assert!(none.is_empty());
        let (_, tiny) = conversation.elided(0);
        assert_eq!(tiny, vec![1, 2, 3], "the latest output is always whole");
    }

    #[test]
    fn a_restart_keeps_every_message_in_the_history() {
        let mut conversation = conversation(2, "out");
        let note = conversation.restart("summary".into());
        assert_eq!(conversation.messages.len(), 4);
        assert_eq!(conversation.messages[2].text(), "summary");
        assert_eq!(conversation.messages[3].text(), note);
        conversation.push_turn(3, "reply 3".into(), "out 3".into());
        let history = conversation.history.as_ref().map(Vec::len);
        assert_eq!(history, Some(10), "2 + 2 turns + summary and note + 1 turn");
        assert_eq!(conversation.history_index(5), 10);
        conversation.restart("again".into());
        assert!(conversation.messages[3].text().contains("2 times"));
    }

    #[test]
    fn a_summary_request_is_shrunk_oldest_turns_first_until_nothing_is_left() {
        let mut messages = vec![
            Message::system("S"),
            Message::user("Q"),
            Message::assistant("a1"),
            Message::user("u1"),
            Message::assistant("a2"),
            Message::user("x".repeat(1_000)),
        ];
        assert!(shrink(&mut messages));
        assert_eq!(messages[2].text(), "a2", "the oldest pair went first");
        assert!(shrink(&mut messages));
        assert_eq!(
            messages[3].text().len(),
            500,
            "then the longest is cut to its end"
        );
        while shrink(&mut messages) {}
        assert!(messages.iter().all(|m| m.text().len() < 256));
    }

    #[test]
    fn a_threshold_is_a_share_of_the_window() {
        assert_eq!(DEFAULT_COMPACT_AT.of(8_192), 6_963);
        assert_eq!(CompactAt::new(1.0).map(|at| at.of(100)), Ok(100));
        assert!(CompactAt::new(f64::NAN).is_err());
        assert!(CompactAt::new(-0.5).is_err());
        let json = serde_json::to_string(&DEFAULT_COMPACT_AT).unwrap();
        assert_eq!(json, "0.85");
        assert!(serde_json::from_str::<CompactAt>("2").is_err());
    }
}
