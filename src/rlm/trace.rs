//! The JSONL trajectory (one object per turn, flushed as it is written) and the live view.

use std::io::{self, Write};
use std::sync::{Mutex, MutexGuard};

use serde::Serialize;

use crate::llm::Message;

/// One turn of one agent, as written to the trace. Field by field:
///
/// | field | meaning |
/// |---|---|
/// | `agent` | `"0"` for the root, `"0.1"`, `"0.2"` … for its children, `"0.1.1"` … below |
/// | `depth` | 0 for the root |
/// | `turn` | 1-based |
/// | `messages_sent` | the whole conversation sent to the model, `{role, content}` |
/// | `reply` | the model's reply (`null` if the call failed or was refused) |
/// | `code_blocks` | the code that was found in the reply |
/// | `outputs` | per block: `status` (`ok`, `error`, `limit`, `not run`), the full `output`, the `error`, `elapsed_ms` |
/// | `feedback` | the message sent back to the model (`null` on the last turn) |
/// | `final` | the final answer, on the turn that gave it |
/// | `error` | why the agent stopped, on the turn that ended it with an error |
/// | `elapsed_ms`, `llm_ms` | the whole turn, and the model call |
/// | `prompt_tokens`, `completion_tokens` | of this turn's model call |
/// | `run_tokens` | tokens spent by the whole run so far, every agent included |
#[derive(Serialize)]
pub(crate) struct TurnRecord<'a> {
    pub agent: &'a str,
    pub depth: usize,
    pub turn: u32,
    pub messages_sent: &'a [Message],
    pub reply: Option<&'a str>,
    pub code_blocks: &'a [String],
    pub outputs: &'a [BlockRecord],
    pub feedback: Option<&'a str>,
    #[serde(rename = "final")]
    pub final_answer: Option<&'a str>,
    pub error: Option<String>,
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
/// threads): each line is written whole and flushed at once.
pub(crate) struct Sink(Mutex<Box<dyn Write + Send>>);

impl Sink {
    pub fn new(writer: Box<dyn Write + Send>) -> Sink {
        Sink(Mutex::new(writer))
    }

    fn lock(&self) -> MutexGuard<'_, Box<dyn Write + Send>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Writes `text` (which should end with a newline) and flushes.
    pub fn write(&self, text: &str) -> io::Result<()> {
        let mut writer = self.lock();
        writer.write_all(text.as_bytes())?;
        writer.flush()
    }

    /// Writes `record` as one JSON line and flushes, so a crash loses nothing written.
    pub fn write_json(&self, record: &impl Serialize) -> io::Result<()> {
        let mut line = serde_json::to_string(record).map_err(io::Error::other)?;
        line.push('\n');
        self.write(&line)
    }
}
