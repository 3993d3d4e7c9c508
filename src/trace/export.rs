//! A finished (or cut short) trace in the reference RLM's log format: the lines
//! [`TraceFormat::Rlm`](crate::rlm::TraceFormat::Rlm) writes during the run, made by the
//! same converter from the same records.

use crate::rlm::trajectory::Record;
use crate::rlm::{Assumed, RlmLog};

use super::model::{Agent, Trace};

/// What to write where the trace does not say: only a trace written before its `start`
/// lines recorded the run (model, limits, start time) needs these; a newer trace's own
/// values are written whatever these say. Where neither tells, the export writes the
/// model `unknown`, the deepest agent for the depth limit, the most turns of an agent for
/// the iteration cap and the Unix epoch for the start.
#[derive(Clone, Debug, Default)]
pub struct ExportOptions {
    /// The model's name.
    pub model: Option<String>,
    /// Our depth limit (the reference's `max_depth` is one more).
    pub max_depth: Option<usize>,
    /// The iteration cap.
    pub max_iterations: Option<u32>,
    /// When the run began, in milliseconds since the Unix epoch; each line's `timestamp`
    /// is this plus the line's `at_ms`.
    pub started_unix_ms: Option<u64>,
}

/// The run as the reference `RLMLogger`'s JSONL: a `metadata` line (the model, limits and
/// start time of the root's `start` line), then one `iteration` line per turn of the
/// root agent, children nested in `rlm_calls` in the order they were called.
///
/// ```
/// use rlm_registry::trace::{ExportOptions, Trace, export_rlm};
///
/// let text = concat!(
///     r#"{"event":"start","agent":"0","depth":0,"question":"Q","messages":[{"role":"system","content":"S"},{"role":"user","content":"Q"}],"#,
///     r#""model":"m","started_unix_ms":1709294645000,"at_ms":0,"#,
///     r#""limits":{"max_iterations":3,"max_depth":2,"max_consecutive_errors":3,"output_bytes":10000,"#,
///     r#""block":{"time_ms":1000,"memory_bytes":1048576,"output_bytes":1024,"llm_calls":8,"recursion_depth":100},"#,
///     r#""budgets":{"total_tokens":null,"llm_calls":null,"wall_time_ms":null}}}"#, "\n",
///     r#"{"event":"turn","agent":"0","depth":0,"turn":1,"reply":"FINAL(1)","final":"1","elapsed_ms":1500,"at_ms":1500}"#, "\n",
/// );
/// let jsonl = export_rlm(&Trace::parse(text)?, &ExportOptions::default());
/// let lines: Vec<serde_json::Value> =
///     jsonl.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
/// assert_eq!(lines[0]["type"], "metadata");
/// assert_eq!(lines[0]["root_model"], "m");
/// assert_eq!((lines[0]["max_iterations"].as_u64(), lines[0]["max_depth"].as_u64()), (Some(3), Some(3)));
/// assert_eq!(lines[0]["timestamp"], "2024-03-01T12:04:05.000000");
/// assert_eq!(lines[1]["timestamp"], "2024-03-01T12:04:06.500000");
/// assert_eq!(lines[1]["final_answer"], "1");
/// assert_eq!(lines[1]["iteration_time"], 1.5);
/// assert_eq!(lines[1]["prompt"][0]["content"], "S");
/// # Ok::<(), rlm_registry::trace::TraceError>(())
/// ```
pub fn export_rlm(trace: &Trace, options: &ExportOptions) -> String {
    let mut log = RlmLog::assuming(assumed(trace, options));
    let mut out = String::new();
    let mut emit = |record: Record| {
        for line in log.push(&record) {
            out.push_str(&line.to_string());
            out.push('\n');
        }
    };
    if let Some(root) = trace.root() {
        replay(trace, root, &mut emit);
    }
    out
}

/// `options`, and where they are silent what the trace shows.
fn assumed(trace: &Trace, options: &ExportOptions) -> Assumed {
    let deepest = || trace.agents.iter().map(|a| a.depth).max().unwrap_or(0);
    let most_turns = || {
        let most = trace.agents.iter().map(|a| a.turns.len()).max();
        u32::try_from(most.unwrap_or(0)).unwrap_or(u32::MAX)
    };
    Assumed {
        model: options.model.clone(),
        max_depth: Some(options.max_depth.unwrap_or_else(deepest)),
        max_iterations: Some(options.max_iterations.unwrap_or_else(most_turns)),
        started_unix_ms: options.started_unix_ms,
    }
}

/// Feeds `agent`'s records in an order the loop could have written them: its start, then
/// for each turn the children it started, then the turn and the compactions after it.
fn replay(trace: &Trace, agent: &Agent, emit: &mut impl FnMut(Record)) {
    emit(Record::Start(agent.start()));
    for turn in &agent.turns {
        for child in trace.children_of_turn(agent, turn.turn) {
            replay(trace, child, emit);
        }
        emit(Record::Turn(turn.clone()));
        agent
            .compactions
            .iter()
            .filter(|compaction| compaction.turn == turn.turn)
            .for_each(|compaction| emit(Record::Compaction(compaction.clone())));
    }
}
