//! A finished (or cut short) trace in the reference RLM's log format: the lines
//! [`TraceFormat::Rlm`](crate::rlm::TraceFormat::Rlm) would have written during the run,
//! made by the same converter.

use serde_json::{Value, json};

use crate::rlm::{Clock, RlmLog, RunInfo};

use super::model::{Agent, Trace};

/// What the reference's `metadata` line records and our trace does not: the model, the
/// limits. `None` means "as far as the trace tells": the deepest agent for the depth
/// limit, the most turns of an agent for the iteration cap.
#[derive(Clone, Debug, Default)]
pub struct ExportOptions {
    /// The model's name (default `unknown`, as the reference writes without one).
    pub model: Option<String>,
    /// Our depth limit (the reference's `max_depth` is one more).
    pub max_depth: Option<usize>,
    /// The iteration cap.
    pub max_iterations: Option<u32>,
    /// Seconds since the epoch for every line's `timestamp` (our trace has no clock
    /// times); default 0.
    pub timestamp: Option<u64>,
}

/// The run as the reference `RLMLogger`'s JSONL: a `metadata` line, then one
/// `iteration` line per turn of the root agent, children nested in `rlm_calls`.
///
/// ```
/// use rlm_registry::trace::{ExportOptions, Trace, export_rlm};
///
/// let text = concat!(
///     r#"{"event":"start","agent":"0","depth":0,"question":"Q","messages":[{"role":"system","content":"S"},{"role":"user","content":"Q"}]}"#, "\n",
///     r#"{"event":"turn","agent":"0","depth":0,"turn":1,"reply":"FINAL(1)","final":"1","elapsed_ms":1500}"#, "\n",
/// );
/// let jsonl = export_rlm(&Trace::parse(text)?, &ExportOptions::default());
/// let lines: Vec<serde_json::Value> =
///     jsonl.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
/// assert_eq!(lines[0]["type"], "metadata");
/// assert_eq!(lines[1]["final_answer"], "1");
/// assert_eq!(lines[1]["iteration_time"], 1.5);
/// assert_eq!(lines[1]["prompt"][0]["content"], "S");
/// # Ok::<(), rlm_registry::trace::TraceError>(())
/// ```
pub fn export_rlm(trace: &Trace, options: &ExportOptions) -> String {
    let info = RunInfo {
        model: options
            .model
            .clone()
            .unwrap_or_else(|| "unknown".to_string()),
        max_depth: options
            .max_depth
            .unwrap_or_else(|| trace.agents.iter().map(|a| a.depth).max().unwrap_or(0)),
        max_iterations: options.max_iterations.unwrap_or_else(|| {
            let most = trace.agents.iter().map(|a| a.turns.len()).max();
            most.unwrap_or(0) as u32
        }),
    };
    let mut log = RlmLog::new(info, Clock::Fixed(options.timestamp.unwrap_or(0)));
    let mut out = String::new();
    let mut emit = |event: Value| {
        for line in log.push(&event) {
            out.push_str(&line.to_string());
            out.push('\n');
        }
    };
    if let Some(root) = trace.root() {
        replay(trace, root, &mut emit);
    }
    out
}

/// Feeds `agent`'s events in an order the loop could have written them: its start, then
/// for each turn the children it started, then the turn.
fn replay(trace: &Trace, agent: &Agent, emit: &mut impl FnMut(Value)) {
    emit(json!({
        "event": "start",
        "agent": agent.id,
        "depth": agent.depth,
        "question": agent.question,
        "messages": agent.messages,
    }));
    for turn in &agent.turns {
        for child in trace.children_of_turn(agent, turn.turn) {
            replay(trace, child, emit);
        }
        let mut event = serde_json::to_value(turn).unwrap_or_default();
        event["event"] = json!("turn");
        emit(event);
    }
}
