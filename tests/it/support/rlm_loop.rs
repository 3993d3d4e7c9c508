//! Helpers of the RLM loop tests (`tests/it/rlm_loop*.rs`): a client and an RLM against the
//! scripted server, the requests it received, and a writer the test reads back.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rlm_registry::Registry;
use rlm_registry::llm::{LlmClient, LlmConfig};
use rlm_registry::rlm::Rlm;
use serde_json::Value;

use super::openai_server::{Behavior, OpenAiServer};

pub fn client(server: &OpenAiServer) -> LlmClient {
    let config = LlmConfig::new(server.base_url(), "test-model")
        .with_max_retries(1)
        .with_backoff(Duration::from_millis(1), Duration::from_millis(5))
        .with_timeout(Duration::from_secs(10));
    LlmClient::new(config).unwrap()
}

pub fn rlm(server: &OpenAiServer, max_iterations: u32) -> Rlm {
    Rlm::new(
        Arc::new(client(server)),
        Registry::baked().clone(),
        max_iterations,
    )
}

pub fn lua(code: &str) -> Behavior {
    Behavior::reply(&format!("```lua\n{code}\n```"))
}

/// The JSON bodies the server received, in order.
pub fn bodies(server: &OpenAiServer) -> Vec<Value> {
    server
        .requests()
        .iter()
        .map(|r| r.json().expect("a JSON body"))
        .collect()
}

/// [`bodies`], where a local variable shadows it.
pub fn bodies_of(server: &OpenAiServer) -> Vec<Value> {
    bodies(server)
}

/// The messages of a request body.
pub fn messages(body: &Value) -> &Vec<Value> {
    body["messages"].as_array().unwrap()
}

/// The content of the last message of a request body (the feedback of the last turn).
pub fn last_message(body: &Value) -> String {
    messages(body).last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string()
}

/// A writer the test can read afterwards.
#[derive(Clone, Default)]
pub struct Shared(pub Arc<Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Shared {
    pub fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }

    /// The trace's lines, each parsed as JSON.
    pub fn events(&self) -> Vec<Value> {
        events_of(&self.text())
    }
}

/// Every `start` and `turn` line of a JSONL trace, parsed: the lines that tell the run,
/// without the progress lines (`reply`, `call`) that repeat what a `turn` line holds.
pub fn events_of(trace: &str) -> Vec<Value> {
    trace
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).expect("each line is JSON"))
        .filter(|event| !matches!(event["event"].as_str(), Some("reply" | "call")))
        .collect()
}

/// The `turn` events of a trace, without the agents' `start` lines.
pub fn turns(events: &[Value]) -> Vec<&Value> {
    events.iter().filter(|e| e["event"] == "turn").collect()
}

/// The conversation `agent` sent to the model at `turn`, rebuilt from the trace alone:
/// its `start` messages, then each earlier turn's reply and feedback.
pub fn conversation(events: &[Value], agent: &str, turn: u64) -> Vec<Value> {
    let of_agent = |e: &&Value| e["agent"] == agent;
    let start = events
        .iter()
        .filter(of_agent)
        .find(|e| e["event"] == "start")
        .expect("a start line for every agent");
    let mut messages = start["messages"].as_array().unwrap().clone();
    for earlier in events
        .iter()
        .filter(of_agent)
        .filter(|e| e["event"] == "turn")
    {
        if earlier["turn"].as_u64().unwrap() >= turn {
            break;
        }
        // What went back is the reply, or without its thinking the `sent_back` text.
        let sent_back = match &earlier["sent_back"] {
            Value::Null => &earlier["reply"],
            text => text,
        };
        messages.push(serde_json::json!({"role": "assistant", "content": sent_back}));
        messages.push(serde_json::json!({"role": "user", "content": earlier["feedback"]}));
    }
    messages
}

/// The system prompt of the `i`-th request the server received.
pub fn system_prompt_of(bodies: &[Value], i: usize) -> String {
    let first = &messages(&bodies[i])[0];
    assert_eq!(first["role"], "system");
    first["content"].as_str().unwrap().to_string()
}

/// The registry's section of a system prompt (the last one): the built-ins before it
/// have `---@param` lines of their own.
pub fn registry_section(system: &str) -> &str {
    let start = system
        .find("## Registry functions")
        .expect("a registry section");
    &system[start..]
}

/// SHA-256 of `bytes` in lowercase hex, computed here rather than by the crate.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
