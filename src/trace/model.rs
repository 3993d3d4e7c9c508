//! The typed model of a trace and its reader: [`Trace::read`] parses the JSONL records
//! `rlm` writes (the types of [`trajectory`](crate::rlm::trajectory), shared with the
//! writer) into [`Agent`]s and their [`Turn`]s, and knows which turn of which agent
//! started each child.
//!
//! The reader is tolerant: unknown fields and events are ignored, fields a trace was
//! written without read as absent, and a line that cannot be parsed (a trace cut short by
//! a crash ends with a partial line) becomes a [`LineProblem`] instead of an error, so a
//! run can be looked at while it is still being written.

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::path::Path;

use serde::Serialize;

use crate::llm::{ImageRecord, Message};
pub use crate::rlm::trajectory::{Block, BlockStatus, Compaction, Record, Setup, Start, Turn};

/// How an agent ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "status", content = "detail", rename_all = "snake_case")]
pub enum Outcome {
    /// It gave a final answer.
    Answered(String),
    /// It stopped with an error (the iteration cap, a budget, the model…).
    Failed(String),
    /// Its last turn has no answer and no error: the run is still going, or was cut short.
    Unfinished,
}

/// One agent of a run: its start and its turns, in order.
#[derive(Clone, Debug, Serialize)]
pub struct Agent {
    /// `0` for the root, `0.1`, `0.2` … for its children, `0.1.1` … below.
    pub id: String,
    /// 0 for the root.
    pub depth: usize,
    /// The question (the root's) or sub-task (a child's), as asked.
    pub question: String,
    /// The system prompt and the question as sent.
    pub messages: Vec<Message>,
    /// The images its model saw with its sub-task (a child's `opts.images`).
    pub images: Vec<ImageRecord>,
    /// What the run was, as the agent's `start` line says (all `None` for an agent whose
    /// `start` line is not in the trace, or a trace written before it was recorded).
    pub setup: Setup,
    /// When its `start` line was written, in milliseconds since the run began.
    pub start_ms: Option<u64>,
    /// Its turns, in order.
    pub turns: Vec<Turn>,
    /// Its conversation's compactions, in order (each after the turn it names).
    pub compactions: Vec<Compaction>,
    /// The parent's id (`None` for the root).
    pub parent: Option<String>,
    /// The parent's turn during which this agent was started (that turn may not be in
    /// the trace yet, if the run is still going or was cut short).
    pub spawned_in_turn: Option<u32>,
    /// The agents this one started, by id, in the order they were called (the children
    /// of one `rlm_query_batched` call in the batch's order).
    pub children: Vec<String>,
}

impl Agent {
    /// How the agent ended, from its last turn.
    pub fn outcome(&self) -> Outcome {
        match self.turns.last() {
            Some(Turn {
                final_answer: Some(answer),
                ..
            }) => Outcome::Answered(answer.clone()),
            Some(Turn {
                error: Some(error), ..
            }) => Outcome::Failed(error.clone()),
            _ => Outcome::Unfinished,
        }
    }

    /// Turn number `n` (1-based).
    pub fn turn(&self, n: u32) -> Option<&Turn> {
        self.turns.iter().find(|t| t.turn == n)
    }

    /// The messages sent to the model at turn `n`, rebuilt from the trace: the `start`
    /// messages, then for each earlier turn its reply (assistant) and feedback (user);
    /// after a compaction, the `start` messages, its summary (assistant) and its note
    /// (user) instead. The outputs turn `n` left out (its `elided`) are the markers the
    /// model read.
    pub fn messages_at(&self, n: u32) -> Vec<Message> {
        let elided = self.turn(n).map_or(&[][..], |turn| &turn.elided[..]);
        let mut messages = self.messages.clone();
        for earlier in self.turns.iter().take_while(|t| t.turn < n) {
            messages.push(Message::assistant(
                earlier.reply_sent_back().unwrap_or_default(),
            ));
            let feedback = earlier.feedback.as_deref().unwrap_or_default();
            messages.push(Message::user(match elided.contains(&earlier.turn) {
                true => crate::rlm::elided_marker(earlier.turn, feedback),
                false => feedback.to_string(),
            }));
            let compacted = self.compactions.iter().filter(|c| c.turn == earlier.turn);
            for summary in compacted.filter_map(|c| Some((c.reply.as_deref()?, &c.note))) {
                messages.truncate(self.messages.len());
                messages.push(Message::assistant(summary.0));
                messages.push(Message::user(summary.1.as_str()));
            }
        }
        messages
    }

    /// Its `start` record, as the trace has it.
    pub fn start(&self) -> Start {
        Start {
            agent: self.id.clone(),
            depth: self.depth,
            question: self.question.clone(),
            messages: self.messages.clone(),
            images: self.images.clone(),
            setup: self.setup.clone(),
            at_ms: self.start_ms,
        }
    }

    /// Wall time of the agent: the sum of its turns.
    pub fn elapsed_ms(&self) -> u64 {
        // Saturating: a trace's numbers are read as they are, an edited one's included.
        self.turns
            .iter()
            .fold(0, |sum: u64, t| sum.saturating_add(t.elapsed_ms))
    }
}

/// A line of the trace that could not be read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LineProblem {
    /// 1-based line number.
    pub line: usize,
    /// Why it could not be read.
    pub message: String,
    /// The line is the last one and does not end with a newline: most likely the trace
    /// is still being written, or a crash cut it short.
    pub partial: bool,
}

impl fmt::Display for LineProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = if self.partial {
            "partial last line (the run is still going, or was cut short)"
        } else {
            "unreadable line"
        };
        write!(f, "line {}: {what}: {}", self.line, self.message)
    }
}

/// Why a trace could not be read at all.
#[derive(Debug)]
#[non_exhaustive]
pub enum TraceError {
    /// The file could not be read.
    Io(io::Error),
    /// Not one line is a trace event: the first line's problem.
    NotATrace(LineProblem),
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TraceError::Io(error) => write!(f, "cannot read the trace: {error}"),
            TraceError::NotATrace(problem) => {
                write!(f, "not an rlm trace (no line is a trace event): {problem}")
            }
        }
    }
}

impl std::error::Error for TraceError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TraceError::Io(error) => Some(error),
            TraceError::NotATrace(_) => None,
        }
    }
}

/// A run, read from its JSONL trace: every agent, in the order they started.
///
/// ```
/// use rlm_registry::trace::{Outcome, Trace};
///
/// let text = concat!(
///     r#"{"event":"start","agent":"0","depth":0,"question":"Q","messages":[{"role":"system","content":"S"},{"role":"user","content":"Q"}]}"#, "\n",
///     r#"{"event":"turn","agent":"0","depth":0,"turn":1,"reply":"FINAL(1)","final":"1","prompt_tokens":5,"completion_tokens":2}"#, "\n",
/// );
/// let trace = Trace::parse(text)?;
/// let root = trace.root().unwrap();
/// assert_eq!(root.outcome(), Outcome::Answered("1".into()));
/// assert_eq!(trace.summary().tokens_by_depth, vec![7]);
/// # Ok::<(), rlm_registry::trace::TraceError>(())
/// ```
#[derive(Clone, Debug, Default, Serialize)]
pub struct Trace {
    /// Every agent, in the order of their `start` lines (the root first).
    pub agents: Vec<Agent>,
    /// Lines that could not be read.
    pub problems: Vec<LineProblem>,
    /// Events seen, every kind.
    #[serde(skip)]
    pub events: usize,
    #[serde(skip)]
    index: HashMap<String, usize>,
}

impl Trace {
    /// Reads the trace at `path`.
    pub fn read(path: impl AsRef<Path>) -> Result<Trace, TraceError> {
        let bytes = std::fs::read(path).map_err(TraceError::Io)?;
        Trace::parse(&String::from_utf8_lossy(&bytes))
    }

    /// Reads a trace from its text. An empty text is an empty trace.
    pub fn parse(text: &str) -> Result<Trace, TraceError> {
        let mut trace = Trace::default();
        let lines: Vec<&str> = text.split('\n').collect();
        let last = lines.len();
        for (i, line) in lines.iter().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<Record>(line) {
                Ok(Record::Start(start)) => trace.start(start),
                Ok(Record::Turn(turn)) => trace.turn(turn),
                Ok(Record::Compaction(compaction)) => trace.compaction(compaction),
                Ok(_) => trace.events += 1,
                Err(error) => trace.problems.push(LineProblem {
                    line: i + 1,
                    message: error.to_string(),
                    partial: i + 1 == last,
                }),
            }
        }
        if trace.events == 0
            && let Some(first) = trace.problems.first()
        {
            return Err(TraceError::NotATrace(first.clone()));
        }
        Ok(trace)
    }

    fn start(&mut self, start: Start) {
        self.events += 1;
        self.add_agent(start);
    }

    fn turn(&mut self, turn: Turn) {
        self.events += 1;
        let i = self.agent_index(&turn.agent, turn.depth);
        let turns = &mut self.agents[i].turns;
        // A resumed run writes again the turn that ended the first run with an error:
        // the later line is the turn.
        match turns.last_mut() {
            Some(last) if last.turn == turn.turn => *last = turn,
            _ => turns.push(turn),
        }
    }

    fn compaction(&mut self, compaction: Compaction) {
        self.events += 1;
        let i = self.agent_index(&compaction.agent, compaction.depth);
        self.agents[i].compactions.push(compaction);
    }

    /// The index of agent `id`; one without a start line (a trace cut at the front) is
    /// added.
    fn agent_index(&mut self, id: &str, depth: usize) -> usize {
        match self.index.get(id) {
            Some(&i) => i,
            None => self.add_agent(Start {
                agent: id.to_string(),
                depth,
                ..Start::default()
            }),
        }
    }

    /// Adds an agent, as a child of its parent if the parent is known; its index.
    fn add_agent(&mut self, start: Start) -> usize {
        let parent = start
            .agent
            .rsplit_once('.')
            .map(|(parent, _)| parent.to_string());
        // Children run inside their parent's turn, before that turn's line is written.
        let spawned_in_turn = parent.as_deref().map(|p| {
            self.agent(p).map_or(1, |a| {
                a.turns.last().map_or(1, |t| t.turn.saturating_add(1))
            })
        });
        if let Some(p) = parent.as_deref().and_then(|p| self.index.get(p).copied()) {
            // Children of a batch start in any order; their numbers say the call's order.
            let children = &mut self.agents[p].children;
            let at = children.partition_point(|c| number(c) <= number(&start.agent));
            children.insert(at, start.agent.clone());
        }
        let i = self.agents.len();
        self.index.insert(start.agent.clone(), i);
        self.agents.push(Agent {
            id: start.agent,
            depth: start.depth,
            question: start.question,
            messages: start.messages,
            images: start.images,
            setup: start.setup,
            start_ms: start.at_ms,
            turns: Vec::new(),
            compactions: Vec::new(),
            parent,
            spawned_in_turn,
            children: Vec::new(),
        });
        i
    }

    /// The root agent (`0`), if the trace has started.
    pub fn root(&self) -> Option<&Agent> {
        self.agent("0").or(self.agents.first())
    }

    /// The agent with this id.
    pub fn agent(&self, id: &str) -> Option<&Agent> {
        self.index.get(id).map(|&i| &self.agents[i])
    }

    /// The agents `agent` started during its turn `n`, in the order they started.
    pub fn children_of_turn<'a>(
        &'a self,
        agent: &'a Agent,
        n: u32,
    ) -> impl Iterator<Item = &'a Agent> + 'a {
        agent
            .children
            .iter()
            .filter_map(|id| self.agent(id))
            .filter(move |child| child.spawned_in_turn == Some(n))
    }

    /// The run's wall time: when its last turn ended (`at_ms`), or for a trace without
    /// that field the time of the root's turns (children run inside them).
    fn wall_ms(&self) -> u64 {
        let turns = self.agents.iter().flat_map(|a| &a.turns);
        match turns.filter_map(|turn| turn.at_ms).max() {
            Some(last) => last,
            None => self.root().map_or(0, Agent::elapsed_ms),
        }
    }

    /// Figures for the header: outcome, turns, tokens per depth, model calls, wall time.
    pub fn summary(&self) -> Summary {
        let mut tokens_by_depth: Vec<u64> = Vec::new();
        let mut model_calls = 0;
        let mut turn_tokens: u64 = 0;
        let mut run_tokens = 0;
        for agent in &self.agents {
            for turn in &agent.turns {
                // No deeper than the agent's id says (`0.1.2`: 2), so that a depth
                // edited into a trace cannot make the list as long as it says.
                let depth = turn.depth.min(turn.agent.matches('.').count());
                if tokens_by_depth.len() <= depth {
                    tokens_by_depth.resize(depth + 1, 0);
                }
                tokens_by_depth[depth] = tokens_by_depth[depth].saturating_add(turn.tokens());
                turn_tokens = turn_tokens.saturating_add(turn.tokens());
                run_tokens = run_tokens.max(turn.run_tokens);
                if turn.reply.is_some() || turn.tokens() > 0 {
                    model_calls += 1;
                }
            }
        }
        let compactions = self.agents.iter().flat_map(|a| &a.compactions);
        let compaction_tokens = compactions.clone().map(Compaction::tokens).sum::<u64>();
        let turn_tokens = turn_tokens.saturating_add(compaction_tokens);
        let root = self.root();
        Summary {
            compactions: compactions.count(),
            compaction_tokens,
            question: root.map(|r| r.question.clone()).unwrap_or_default(),
            outcome: root.map_or(Outcome::Unfinished, Agent::outcome),
            root_turns: root.map_or(0, |r| r.turns.len()),
            agents: self.agents.len(),
            turns: self.agents.iter().map(|a| a.turns.len()).sum(),
            tokens_by_depth,
            run_tokens: run_tokens.max(turn_tokens),
            sub_call_tokens: run_tokens.saturating_sub(turn_tokens),
            model_calls,
            wall_ms: self.wall_ms(),
        }
    }
}

/// The number of an agent under its parent (`0.12` → 12); the root has none.
fn number(id: &str) -> Option<u64> {
    id.rsplit_once('.').and_then(|(_, n)| n.parse().ok())
}

/// The figures of a run, for a header.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// The root's question.
    pub question: String,
    /// How the root agent ended.
    pub outcome: Outcome,
    /// The root agent's turns.
    pub root_turns: usize,
    /// Agents, the root included.
    pub agents: usize,
    /// Turns of every agent.
    pub turns: usize,
    /// Tokens of the agents' turns, per depth (index 0: the root).
    pub tokens_by_depth: Vec<u64>,
    /// Tokens of the whole run, sub-calls (`llm_query`) included.
    pub run_tokens: u64,
    /// Tokens of sub-calls made from code (`llm_query` and the like), not agents' turns.
    pub sub_call_tokens: u64,
    /// Agents' model calls (one per turn that reached the model).
    pub model_calls: usize,
    /// The root agent's turns, end to end.
    pub wall_ms: u64,
    /// Conversations compacted to fit the window, every agent's.
    pub compactions: usize,
    /// Tokens of the calls for the compactions' summaries.
    pub compaction_tokens: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    const START: &str =
        r#"{"event":"start","agent":"0","depth":0,"question":"Q","messages":[],"future":1}"#;

    #[test]
    fn unknown_fields_and_events_are_ignored() {
        let text = format!(
            "{START}\n{}\n{}\n",
            r#"{"event":"heartbeat","agent":"0"}"#,
            r#"{"event":"turn","agent":"0","turn":1,"final":"x","new_field":[1]}"#
        );
        let trace = Trace::parse(&text).unwrap();
        assert!(trace.problems.is_empty());
        assert_eq!(trace.events, 3);
        assert_eq!(
            trace.root().unwrap().outcome(),
            Outcome::Answered("x".into())
        );
    }

    #[test]
    fn only_an_unterminated_last_line_is_partial() {
        let text = format!("{START}\nnot json\n{START}\n{{\"event\":\"tu");
        let trace = Trace::parse(&text).unwrap();
        let problems: Vec<(usize, bool)> =
            trace.problems.iter().map(|p| (p.line, p.partial)).collect();
        assert_eq!(problems, [(2, false), (4, true)]);
    }

    #[test]
    fn a_turn_without_its_start_line_is_kept_and_children_find_their_turn() {
        let text = [
            r#"{"event":"turn","agent":"0","turn":1}"#,
            r#"{"event":"start","agent":"0.1","depth":1,"question":"sub"}"#,
            r#"{"event":"turn","agent":"0.1","depth":1,"turn":1,"final":"a"}"#,
        ]
        .join("\n");
        let trace = Trace::parse(&text).unwrap();
        let root = trace.root().unwrap();
        assert_eq!(root.children, ["0.1"]);
        let child = trace.agent("0.1").unwrap();
        assert_eq!(child.spawned_in_turn, Some(2), "started during turn 2");
        assert_eq!(root.outcome(), Outcome::Unfinished);
    }

    #[test]
    fn a_text_with_no_event_is_not_a_trace_and_an_empty_one_is_empty() {
        assert!(matches!(
            Trace::parse("hello\n"),
            Err(TraceError::NotATrace(_))
        ));
        assert!(Trace::parse("").unwrap().agents.is_empty());
    }
}
