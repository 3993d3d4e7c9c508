//! The trace in the reference RLM's log format ([`TraceFormat::Rlm`]): the JSONL its
//! `RLMLogger` writes (alexzhang13/rlm, `rlm/logger/rlm_logger.py`, types in
//! `rlm/core/types.py`), so its visualizer and tools read our runs.
//!
//! A `metadata` line (the model and the limits, from the root's `start` record), then one
//! `iteration` line per turn of the root agent: the messages it was sent (`prompt`), the
//! `response`, the `code_blocks` with their `result` (`stdout`, `stderr`, `locals`,
//! `execution_time`, `rlm_calls`, `final_answer`), the `final_answer` and the
//! `iteration_time` in seconds. A child agent is an `rlm_calls` entry (an
//! `RLMChatCompletion`) of the block that started it, its own iterations in its
//! `metadata`, as the reference nests a sub-RLM's trajectory; the children of a turn are
//! in the order they were called (a batch in its order), whatever the order they ended.
//! Every line's `timestamp` is the run's start plus the record's `at_ms`.
//!
//! [`RlmLog`] converts records one at a time, so a crash still leaves every root turn
//! written so far; the streaming writer and `rlm trace export` both use it. Our trace
//! does not say which block of a turn started a child: a child goes to the first block
//! that ran and calls `rlm_query`, else the last block that ran.

use std::collections::HashMap;

use serde_json::{Value, json};

use crate::conventions::builtins::BuiltinId;
use crate::llm::Message;

use super::trajectory::{BlockStatus, Compaction, Record, Setup, Start, Turn};

/// The format of the trace [`Rlm::trace`](super::Rlm::trace) writes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum TraceFormat {
    /// This crate's event log ([`trajectory`](super::trajectory)): a `start` line per
    /// agent, a `turn` line per turn. `rlm trace` reads it.
    #[default]
    Events,
    /// The reference RLM's `RLMLogger` JSONL, made by the converter `rlm trace export`
    /// uses, so both write the same lines for a run: its `metadata` names the model the
    /// [`Llm`](crate::llm::Llm) reports and the run's limits.
    Rlm,
}

/// What to write where a trace does not say: a trace written before its `start` lines
/// recorded the model, the limits and the start time.
#[derive(Clone, Debug, Default)]
pub(crate) struct Assumed {
    pub model: Option<String>,
    /// Our depth limit.
    pub max_depth: Option<usize>,
    pub max_iterations: Option<u32>,
    pub started_unix_ms: Option<u64>,
}

/// The settings the `metadata` line records (`RLMMetadata`).
#[derive(Clone, Debug)]
struct RunInfo {
    model: String,
    /// Our depth limit: the reference counts the root as depth 1, so it writes one more.
    max_depth: usize,
    max_iterations: u32,
    started_unix_ms: u64,
}

impl RunInfo {
    /// The root's `setup`, else what is `assumed`, else the reference's placeholders.
    fn new(setup: Option<&Setup>, assumed: &Assumed) -> RunInfo {
        let limits = setup.and_then(|s| s.limits);
        RunInfo {
            model: setup
                .and_then(|s| s.model.clone())
                .or_else(|| assumed.model.clone())
                .unwrap_or_else(|| "unknown".to_string()),
            max_depth: limits
                .map(|l| l.max_depth)
                .or(assumed.max_depth)
                .unwrap_or(0),
            max_iterations: limits
                .map(|l| l.max_iterations)
                .or(assumed.max_iterations)
                .unwrap_or(0),
            started_unix_ms: setup
                .and_then(|s| s.started_unix_ms)
                .or(assumed.started_unix_ms)
                .unwrap_or(0),
        }
    }
}

/// Converts records, one at a time, into the reference's lines.
#[derive(Default)]
pub(crate) struct RlmLog {
    assumed: Assumed,
    /// Set by the first record, which writes the `metadata` line.
    run: Option<RunInfo>,
    agents: HashMap<String, AgentLog>,
}

/// One agent's conversation and iterations so far.
#[derive(Default)]
struct AgentLog {
    question: String,
    messages: Vec<Message>,
    iterations: Vec<Value>,
    /// Children that ended, by their number under this agent, waiting for the line of
    /// the turn that started them.
    children: Vec<(u64, Value)>,
    turns: usize,
    elapsed_ms: u64,
    calls: u64,
    input_tokens: u64,
    output_tokens: u64,
}

impl RlmLog {
    /// A converter that writes what is `assumed` where the trace does not say.
    pub(crate) fn assuming(assumed: Assumed) -> RlmLog {
        RlmLog {
            assumed,
            ..RlmLog::default()
        }
    }

    /// The reference lines that `record` completes.
    pub(crate) fn push(&mut self, record: &Record) -> Vec<Value> {
        let mut lines = Vec::new();
        if self.run.is_none() {
            let root = match record {
                Record::Start(start) if !start.agent.contains('.') => Some(&start.setup),
                _ => None,
            };
            let run = RunInfo::new(root, &self.assumed);
            let mut line =
                json!({"type": "metadata", "timestamp": timestamp(&run, record.at_ms())});
            merge(&mut line, run_metadata(&run));
            lines.push(line);
            self.run = Some(run);
        }
        match record {
            Record::Start(start) => self.start(start),
            Record::Turn(turn) => lines.extend(self.turn(turn)),
            Record::Compaction(compaction) => self.compaction(compaction),
            _ => {}
        }
        lines
    }

    fn start(&mut self, start: &Start) {
        let log = AgentLog {
            question: start.question.clone(),
            messages: start.messages.clone(),
            ..AgentLog::default()
        };
        self.agents.insert(start.agent.clone(), log);
    }

    /// The agent's conversation restarts from the summary, as the model was sent it.
    fn compaction(&mut self, compaction: &Compaction) {
        let log = self.agents.entry(compaction.agent.clone()).or_default();
        let Some(summary) = &compaction.reply else {
            return;
        };
        log.messages.truncate(2);
        log.messages.push(Message::assistant(summary.as_str()));
        log.messages.push(Message::user(compaction.note.as_str()));
    }

    /// An `RLMIteration` for the turn; a root turn is written, a child's kept for its
    /// completion.
    fn turn(&mut self, turn: &Turn) -> Option<Value> {
        let run = self.run.as_ref()?;
        let log = self.agents.entry(turn.agent.clone()).or_default();
        let mut children = std::mem::take(&mut log.children);
        children.sort_by_key(|(number, _)| *number);
        let children = children.into_iter().map(|(_, child)| child).collect();
        log.turns += 1;
        let reply = turn.reply.as_deref().unwrap_or_default();
        let line = json!({
            "type": "iteration",
            "iteration": log.turns,
            "timestamp": timestamp(run, turn.at_ms),
            "prompt": log.messages,
            "response": reply,
            "code_blocks": code_blocks(turn, children),
            "final_answer": turn.final_answer,
            "iteration_time": secs(turn.elapsed_ms),
        });
        // A trace's numbers are read as they are: an edited or corrupt one saturates
        // rather than overflows.
        log.elapsed_ms = log.elapsed_ms.saturating_add(turn.elapsed_ms);
        if turn.reply.is_some() {
            log.calls += 1;
        }
        log.input_tokens = log.input_tokens.saturating_add(turn.prompt_tokens);
        log.output_tokens = log.output_tokens.saturating_add(turn.completion_tokens);
        if let Some(feedback) = &turn.feedback {
            // The conversation as the model saw it: the reply without its thinking.
            log.messages.push(Message::assistant(
                turn.reply_sent_back().unwrap_or_default(),
            ));
            log.messages.push(Message::user(feedback.as_str()));
        }
        let Some((parent, number)) = turn.agent.rsplit_once('.') else {
            return Some(line);
        };
        log.iterations.push(line);
        let ended = turn.final_answer.is_some() || turn.error.is_some();
        if ended && let Some(log) = self.agents.remove(&turn.agent) {
            let completion = completion(run, log, turn);
            let number = number.parse().unwrap_or(u64::MAX);
            self.agents
                .entry(parent.to_string())
                .or_default()
                .children
                .push((number, completion));
        }
        None
    }
}

fn run_metadata(run: &RunInfo) -> Value {
    json!({
        "root_model": run.model,
        "max_depth": run.max_depth.saturating_add(1),
        "max_iterations": run.max_iterations,
        "backend": "openai",
        "backend_kwargs": {"model_name": run.model},
        "environment_type": "lua",
        "environment_kwargs": {},
        "other_backends": null,
    })
}

/// A child agent as an `RLMChatCompletion`, its iterations as its trajectory; `last` is
/// its last turn.
fn completion(run: &RunInfo, log: AgentLog, last: &Turn) -> Value {
    let mut completion = json!({
        "root_model": run.model,
        "prompt": log.question,
        "response": last.final_answer.as_deref().unwrap_or_default(),
        "usage_summary": {"model_usage_summaries": {run.model.as_str(): {
            "total_calls": log.calls,
            "total_input_tokens": log.input_tokens,
            "total_output_tokens": log.output_tokens,
        }}},
        "execution_time": secs(log.elapsed_ms),
        "metadata": {"run_metadata": run_metadata(run), "iterations": log.iterations},
    });
    if let Some(error) = &last.error {
        completion["error"] = json!(error);
    }
    completion
}

/// The turn's blocks as `CodeBlock`s; `children` go to the block that started them.
fn code_blocks(turn: &Turn, children: Vec<Value>) -> Vec<Value> {
    let codes = &turn.code_blocks;
    let ran = |i: usize| {
        turn.outputs
            .get(i)
            .is_some_and(|o| o.status != BlockStatus::NotRun)
    };
    let last_ran = (0..codes.len()).rev().find(|&i| ran(i));
    let spawner = (0..codes.len())
        .find(|&i| ran(i) && codes[i].contains(BuiltinId::RlmQuery.name()))
        .or(last_ran);
    let mut children = Some(children);
    codes
        .iter()
        .enumerate()
        .map(|(i, code)| {
            let output = turn.outputs.get(i);
            let rlm_calls = if Some(i) == spawner {
                children.take().unwrap_or_default()
            } else {
                Vec::new()
            };
            let final_answer = turn.final_answer.as_deref().filter(|_| Some(i) == last_ran);
            json!({
                "code": code,
                "result": {
                    "stdout": output.map_or("", |o| o.output.as_str()),
                    "stderr": output.and_then(|o| o.error.as_deref()).unwrap_or_default(),
                    "locals": {},
                    "execution_time": secs(output.map_or(0, |o| o.elapsed_ms)),
                    "rlm_calls": rlm_calls,
                    "final_answer": final_answer,
                },
            })
        })
        .collect()
}

/// Python's `datetime.isoformat()` (UTC) of the run's start plus `at_ms`.
fn timestamp(run: &RunInfo, at_ms: Option<u64>) -> String {
    let ms = run.started_unix_ms.saturating_add(at_ms.unwrap_or(0));
    iso(u128::from(ms) * 1000)
}

fn secs(ms: u64) -> f64 {
    ms as f64 / 1000.0
}

fn merge(into: &mut Value, from: Value) {
    if let (Some(into), Value::Object(from)) = (into.as_object_mut(), from) {
        into.extend(from);
    }
}

/// Microseconds since the epoch as `YYYY-MM-DDTHH:MM:SS.ffffff` (UTC).
fn iso(micros: u128) -> String {
    let secs = (micros / 1_000_000) as i64;
    let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Days to a civil date (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
        micros % 1_000_000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_python_isoformat() {
        assert_eq!(iso(0), "1970-01-01T00:00:00.000000");
        assert_eq!(iso(1_709_294_645_123_456), "2024-03-01T12:04:05.123456");
    }
}
