//! The JSONL trajectory (one event per line, flushed as it is written) and the live view.
//!
//! The trace is an event log, not a series of snapshots: each agent's `start` line holds
//! the two messages its conversation begins with, and each `turn` line only what that
//! turn added (the reply, the code and its output, the feedback, the usage). Repeating the
//! conversation on every line made traces grow with the square of the number of turns;
//! this way a trace grows linearly, and the conversation sent at turn N is rebuilt as the
//! `start` messages followed, for each earlier turn of the same agent, by its `reply`
//! (assistant) and its `feedback` (user).

use std::io::{self, Write};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use serde::Serialize;

use crate::llm::Message;

use super::rlm_log::RlmLog;

/// One line of the trace, tagged by its `event` field (`"start"` or `"turn"`).
#[derive(Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub(crate) enum Event<'a> {
    /// An agent begins: written once per agent, before its first turn.
    Start(StartRecord<'a>),
    /// An agent's turn ended.
    Turn(TurnRecord<'a>),
}

/// The beginning of one agent's conversation. Field by field:
///
/// | field | meaning |
/// |---|---|
/// | `agent` | `"0"` for the root, `"0.1"`, `"0.2"` … for its children, `"0.1.1"` … below |
/// | `depth` | 0 for the root |
/// | `question` | the question (the root's) or sub-task (a child's), as asked |
/// | `messages` | the system prompt and the question as sent, `{role, content}` |
#[derive(Serialize)]
pub(crate) struct StartRecord<'a> {
    pub agent: &'a str,
    pub depth: usize,
    pub question: &'a str,
    pub messages: &'a [Message],
}

/// One turn of one agent: only what the turn added. Field by field:
///
/// | field | meaning |
/// |---|---|
/// | `agent`, `depth` | as in the agent's `start` line |
/// | `turn` | 1-based |
/// | `messages_sent` | how many messages went to the model: 2, plus 2 per earlier turn |
/// | `reply` | the model's reply, the assistant message this turn adds (`null` if the call failed or was refused) |
/// | `code_blocks` | the code that was found in the reply |
/// | `outputs` | per block: `status` (`ok`, `error`, `limit`, `not run`), the full `output`, the `error`, `elapsed_ms` |
/// | `feedback` | the user message this turn adds (`null` on the agent's last turn) |
/// | `final` | the final answer, on the turn that gave it |
/// | `error` | why the agent stopped, on the turn that ended it with an error |
/// | `elapsed_ms`, `llm_ms` | the whole turn, and the model call |
/// | `prompt_tokens`, `completion_tokens` | of this turn's model call |
/// | `run_tokens` | tokens spent by the whole run so far, every agent included |
/// | `at_ms` | when the line was written, in milliseconds since the run began (on every line) |
#[derive(Serialize)]
pub(crate) struct TurnRecord<'a> {
    pub agent: &'a str,
    pub depth: usize,
    pub turn: u32,
    pub messages_sent: usize,
    pub reply: Option<&'a str>,
    pub code_blocks: &'a [String],
    pub outputs: &'a [BlockRecord],
    pub feedback: Option<&'a str>,
    #[serde(rename = "final")]
    pub final_answer: Option<&'a str>,
    pub error: Option<&'a str>,
    pub elapsed_ms: u64,
    pub llm_ms: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub run_tokens: u64,
}

/// What one code block did.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct BlockRecord {
    pub block: usize,
    pub status: &'static str,
    pub output: String,
    pub error: Option<String>,
    pub elapsed_ms: u64,
}

/// A line-oriented sink shared by every agent of a run (children write from their own
/// threads): each line is written whole and flushed at once. With an [`RlmLog`], event
/// lines are converted to the reference RLM's format as they are written.
pub(crate) struct Sink {
    writer: Arc<Mutex<Box<dyn Write + Send>>>,
    rlm_log: Option<Mutex<RlmLog>>,
    /// When the run began: each event line says how long after it was written (`at_ms`),
    /// so a reader knows the run's wall time.
    started: Instant,
}

impl Sink {
    pub fn new(writer: Box<dyn Write + Send>) -> Sink {
        Sink {
            writer: Arc::new(Mutex::new(writer)),
            rlm_log: None,
            started: Instant::now(),
        }
    }

    /// The same writer, each event converted by `log` (one per run: it holds the run's
    /// conversations).
    pub fn converting(&self, log: RlmLog) -> Sink {
        Sink {
            writer: Arc::clone(&self.writer),
            rlm_log: Some(Mutex::new(log)),
            started: self.started,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Box<dyn Write + Send>> {
        self.writer
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Writes `text` (which should end with a newline) and flushes.
    pub fn write(&self, text: &str) -> io::Result<()> {
        let mut writer = self.lock();
        writer.write_all(text.as_bytes())?;
        writer.flush()
    }

    /// Writes `record` as one JSON line and flushes, so a crash loses nothing written;
    /// converted first, if the sink converts.
    pub fn write_json(&self, record: &impl Serialize) -> io::Result<()> {
        let mut event = serde_json::to_value(record).map_err(io::Error::other)?;
        if let serde_json::Value::Object(fields) = &mut event {
            let at_ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
            fields.insert("at_ms".into(), at_ms.into());
        }
        let Some(log) = &self.rlm_log else {
            return self.write_line(&event);
        };
        let lines = log
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(&event);
        lines.iter().try_for_each(|line| self.write_line(line))
    }

    fn write_line(&self, record: &impl Serialize) -> io::Result<()> {
        let mut line = serde_json::to_string(record).map_err(io::Error::other)?;
        line.push('\n');
        self.write(&line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_tagged_and_carry_no_earlier_messages() {
        let messages = [Message::system("S"), Message::user("Q")];
        let start = serde_json::to_value(Event::Start(StartRecord {
            agent: "0.1",
            depth: 1,
            question: "Q",
            messages: &messages,
        }))
        .unwrap();
        assert_eq!(start["event"], "start");
        assert_eq!(start["agent"], "0.1");
        assert_eq!(start["messages"][0]["role"], "system");

        let turn = serde_json::to_value(Event::Turn(TurnRecord {
            agent: "0",
            depth: 0,
            turn: 2,
            messages_sent: 4,
            reply: Some("r"),
            code_blocks: &[],
            outputs: &[],
            feedback: None,
            final_answer: Some("done"),
            error: None,
            elapsed_ms: 1,
            llm_ms: 1,
            prompt_tokens: 3,
            completion_tokens: 2,
            run_tokens: 5,
        }))
        .unwrap();
        assert_eq!(turn["event"], "turn");
        assert_eq!(turn["messages_sent"], 4);
        assert_eq!(turn["final"], "done");
        assert!(turn.get("messages").is_none());
    }
}
