//! The trace in the reference RLM's log format ([`TraceFormat::Rlm`]): the JSONL its
//! `RLMLogger` writes (alexzhang13/rlm, `rlm/logger/rlm_logger.py`, types in
//! `rlm/core/types.py`), so its visualizer and tools read our runs.
//!
//! A `metadata` line, then one `iteration` line per turn of the root agent: the messages
//! it was sent (`prompt`), the `response`, the `code_blocks` with their `result`
//! (`stdout`, `stderr`, `locals`, `execution_time`, `rlm_calls`, `final_answer`), the
//! `final_answer` and the `iteration_time` in seconds. A child agent is an `rlm_calls`
//! entry (an `RLMChatCompletion`) of the block that started it, its own iterations in
//! its `metadata`, as the reference nests a sub-RLM's trajectory.
//!
//! [`RlmLog`] converts our event lines as they are written, so a crash still leaves every
//! root turn written so far. Our trace does not say which block of a turn started a
//! child: a child goes to the first block that ran and calls `rlm_query`, else the last
//! block that ran.

use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::conventions::builtins::BuiltinId;

/// The format of the trace [`Rlm::trace`](super::Rlm::trace) writes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum TraceFormat {
    /// This crate's event log: a `start` line per agent, a `turn` line per turn (see the
    /// README's "The trajectory"). `rlm trace` reads it.
    #[default]
    Events,
    /// The reference RLM's `RLMLogger` JSONL, with `model` as its `root_model`.
    Rlm {
        /// The model's name, for the `metadata` line.
        model: String,
    },
}

impl TraceFormat {
    /// The reference RLM's format, naming `model` in its metadata.
    pub fn rlm(model: impl Into<String>) -> TraceFormat {
        TraceFormat::Rlm {
            model: model.into(),
        }
    }
}

/// The settings the `metadata` line records (`RLMMetadata`).
#[derive(Clone, Debug)]
pub(crate) struct RunInfo {
    pub model: String,
    /// Our depth limit: the reference counts the root as depth 1, so it writes one more.
    pub max_depth: usize,
    pub max_iterations: u32,
}

/// Converts event lines, one at a time, into the reference's lines.
pub(crate) struct RlmLog {
    info: RunInfo,
    agents: HashMap<String, AgentLog>,
    /// The `timestamp` of every line: the time it is written, or a fixed one when a
    /// finished trace is converted (our trace has no clock times).
    clock: Clock,
    started: bool,
}

/// Where line timestamps come from.
pub(crate) enum Clock {
    /// The time each line is written.
    Now,
    /// One time for every line, seconds since the epoch.
    Fixed(u64),
}

/// One agent's conversation and iterations so far.
#[derive(Default)]
struct AgentLog {
    question: String,
    messages: Vec<Value>,
    iterations: Vec<Value>,
    /// Children that ended, waiting for the line of the turn that started them.
    children: Vec<Value>,
    turns: usize,
    elapsed_ms: u64,
    calls: u64,
    input_tokens: u64,
    output_tokens: u64,
}

impl RlmLog {
    pub(crate) fn new(info: RunInfo, clock: Clock) -> RlmLog {
        RlmLog {
            info,
            agents: HashMap::new(),
            clock,
            started: false,
        }
    }

    /// The reference lines that `event` (one of our lines, as JSON) completes.
    pub(crate) fn push(&mut self, event: &Value) -> Vec<Value> {
        let mut lines = Vec::new();
        if !self.started {
            self.started = true;
            lines.push(self.metadata());
        }
        let agent = event["agent"].as_str().unwrap_or("0").to_string();
        match event["event"].as_str() {
            Some("start") => {
                let log = AgentLog {
                    question: str_of(&event["question"]),
                    messages: event["messages"].as_array().cloned().unwrap_or_default(),
                    ..AgentLog::default()
                };
                self.agents.insert(agent, log);
            }
            Some("turn") => lines.extend(self.turn(&agent, event)),
            _ => {}
        }
        lines
    }

    /// `RLMMetadata`, as `RLMLogger.log_metadata` writes it.
    fn metadata(&self) -> Value {
        let mut line = json!({"type": "metadata", "timestamp": self.timestamp()});
        merge(&mut line, self.run_metadata());
        line
    }

    fn run_metadata(&self) -> Value {
        json!({
            "root_model": self.info.model,
            "max_depth": self.info.max_depth + 1,
            "max_iterations": self.info.max_iterations,
            "backend": "openai",
            "backend_kwargs": {"model_name": self.info.model},
            "environment_type": "lua",
            "environment_kwargs": {},
            "other_backends": null,
        })
    }

    /// An `RLMIteration` for the turn; a root turn is written, a child's kept for its
    /// completion.
    fn turn(&mut self, agent: &str, event: &Value) -> Option<Value> {
        let timestamp = self.timestamp();
        let log = self.agents.entry(agent.to_string()).or_default();
        let children = std::mem::take(&mut log.children);
        let final_answer = event["final"].as_str().map(str::to_string);
        log.turns += 1;
        let mut line = json!({
            "type": "iteration",
            "iteration": log.turns,
            "timestamp": timestamp,
            "prompt": log.messages,
            "response": str_of(&event["reply"]),
            "code_blocks": code_blocks(event, children, final_answer.as_deref()),
            "final_answer": final_answer,
            "iteration_time": secs(event["elapsed_ms"].as_u64().unwrap_or(0)),
        });
        log.elapsed_ms += event["elapsed_ms"].as_u64().unwrap_or(0);
        if !event["reply"].is_null() {
            log.calls += 1;
        }
        log.input_tokens += event["prompt_tokens"].as_u64().unwrap_or(0);
        log.output_tokens += event["completion_tokens"].as_u64().unwrap_or(0);
        if let Some(feedback) = event["feedback"].as_str() {
            log.messages
                .push(json!({"role": "assistant", "content": str_of(&event["reply"])}));
            log.messages
                .push(json!({"role": "user", "content": feedback}));
        }
        let Some((parent, _)) = agent.rsplit_once('.') else {
            return Some(line);
        };
        log.iterations.push(line.take());
        let ended = final_answer.is_some() || !event["error"].is_null();
        if ended && let Some(log) = self.agents.remove(agent) {
            let completion = self.completion(log, final_answer, event["error"].as_str());
            self.agents
                .entry(parent.to_string())
                .or_default()
                .children
                .push(completion);
        }
        None
    }

    /// A child agent as an `RLMChatCompletion`, its iterations as its trajectory.
    fn completion(&self, log: AgentLog, answer: Option<String>, error: Option<&str>) -> Value {
        let mut completion = json!({
            "root_model": self.info.model,
            "prompt": log.question,
            "response": answer.unwrap_or_default(),
            "usage_summary": {"model_usage_summaries": {self.info.model.as_str(): {
                "total_calls": log.calls,
                "total_input_tokens": log.input_tokens,
                "total_output_tokens": log.output_tokens,
            }}},
            "execution_time": secs(log.elapsed_ms),
            "metadata": {"run_metadata": self.run_metadata(), "iterations": log.iterations},
        });
        if let Some(error) = error {
            completion["error"] = json!(error);
        }
        completion
    }

    /// Python's `datetime.isoformat()` (UTC): `2026-01-02T03:04:05.678901`.
    fn timestamp(&self) -> String {
        let micros = match self.clock {
            Clock::Fixed(secs) => u128::from(secs) * 1_000_000,
            Clock::Now => SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_micros()),
        };
        iso(micros)
    }
}

/// The turn's blocks as `CodeBlock`s; `children` go to the block that started them.
fn code_blocks(event: &Value, children: Vec<Value>, final_answer: Option<&str>) -> Vec<Value> {
    let codes = event["code_blocks"].as_array().cloned().unwrap_or_default();
    let outputs = event["outputs"].as_array().cloned().unwrap_or_default();
    let ran = |i: usize| outputs.get(i).is_some_and(|o| o["status"] != "not run");
    let last_ran = (0..codes.len()).rev().find(|&i| ran(i));
    let spawner = (0..codes.len())
        .find(|&i| {
            ran(i)
                && codes[i]
                    .as_str()
                    .unwrap_or("")
                    .contains(BuiltinId::RlmQuery.name())
        })
        .or(last_ran);
    let mut children = Some(children);
    codes
        .iter()
        .enumerate()
        .map(|(i, code)| {
            let output = outputs.get(i).cloned().unwrap_or(Value::Null);
            let rlm_calls = if Some(i) == spawner {
                children.take().unwrap_or_default()
            } else {
                Vec::new()
            };
            json!({
                "code": str_of(code),
                "result": {
                    "stdout": str_of(&output["output"]),
                    "stderr": str_of(&output["error"]),
                    "locals": {},
                    "execution_time": secs(output["elapsed_ms"].as_u64().unwrap_or(0)),
                    "rlm_calls": rlm_calls,
                    "final_answer": if Some(i) == last_ran { final_answer } else { None },
                },
            })
        })
        .collect()
}

fn str_of(value: &Value) -> String {
    value.as_str().unwrap_or("").to_string()
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
