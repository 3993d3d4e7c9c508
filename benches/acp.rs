//! `rlm acp`: the time from a `session/prompt` line written to the agent to the first
//! model request it makes, in process (the agent served on pipes, the model an `Llm`
//! that notes when it is asked and answers at once), so the figure is the agent's own
//! work: reading the line, handing the prompt to the session's thread, the system prompt
//! and the request. For the first prompt of a session (the conversation begins: the
//! system prompt is built) and a later one (the conversation goes on), over a context of
//! 200 files of 2 KB (a small repository, gathered at `session/new`, not timed).
//!
//! Run: `cargo bench --bench acp` (200 samples each; the smoke run of
//! `cargo test --benches` takes 5). `RLM_BENCH_ACP_SAMPLES` sets the count.

mod common;

use std::io::{BufReader, Write};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rlm_registry::Registry;
use rlm_registry::acp::AcpAgent;
use rlm_registry::llm::{Completion, Llm, LlmError, Request};
use rlm_registry::rlm::Rlm;
use serde_json::{Value, json};

/// Notes when it is asked, and answers at once.
struct Stamped(Mutex<Sender<Instant>>);

impl Llm for Stamped {
    fn complete(&self, _request: Request) -> Result<Completion, LlmError> {
        let _ = self.0.lock().unwrap().send(Instant::now());
        Ok(Completion::new("```lua\nFINAL('ok')\n```").with_tokens(10, 5))
    }
}

/// The agent's output, a line at a time.
struct Lines(Sender<Vec<u8>>, Vec<u8>);

impl Write for Lines {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.1.extend_from_slice(bytes);
        while let Some(end) = self.1.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.1.drain(..=end).collect();
            let _ = self.0.send(line);
        }
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

struct Client {
    input: std::io::PipeWriter,
    output: Receiver<Vec<u8>>,
    next: u64,
}

impl Client {
    fn send(&mut self, method: &str, params: Value) -> u64 {
        self.next += 1;
        let line = json!({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params});
        writeln!(self.input, "{line}").unwrap();
        self.next
    }

    fn response(&self, id: u64) -> Value {
        loop {
            let line = self
                .output
                .recv_timeout(Duration::from_secs(30))
                .expect("an answer");
            let message: Value = serde_json::from_slice(&line).unwrap();
            if message["id"] == id {
                return message;
            }
        }
    }
}

fn median(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    (samples[samples.len() / 2], samples[samples.len() * 9 / 10])
}

fn main() {
    let smoke = !std::env::args().any(|arg| arg == "--bench");
    let samples = common::setting("RLM_BENCH_ACP_SAMPLES", if smoke { 5 } else { 200 });
    let cwd = tempfile::tempdir().unwrap();
    let mut next = common::generator();
    for i in 0..200 {
        let text: String = (0..300).map(|_| format!("w{} ", next(1000))).collect();
        std::fs::write(
            cwd.path().join(format!("file{i:03}.md")),
            &text[..2048.min(text.len())],
        )
        .unwrap();
    }
    let (stamps, asked) = mpsc::channel();
    let rlm = Rlm::new(
        Arc::new(Stamped(Mutex::new(stamps))),
        Registry::baked().clone(),
        5,
    );
    let (reader, input) = std::io::pipe().unwrap();
    let (lines, output) = mpsc::channel();
    let agent = std::thread::spawn(move || {
        AcpAgent::new(rlm).serve(BufReader::new(reader), Lines(lines, Vec::new()))
    });
    let mut client = Client {
        input,
        output,
        next: 0,
    };
    let init = client.send("initialize", json!({"protocolVersion": 1}));
    client.response(init);

    let mut first = Vec::new();
    let mut later = Vec::new();
    for _ in 0..samples {
        let new = client.send("session/new", json!({"cwd": cwd.path(), "mcpServers": []}));
        let session = client.response(new)["result"]["sessionId"].clone();
        for times in [&mut first, &mut later] {
            let prompt = json!({"sessionId": session, "prompt": [{"type": "text", "text": "How many files?"}]});
            let sent = Instant::now();
            let id = client.send("session/prompt", prompt);
            let at = asked
                .recv_timeout(Duration::from_secs(30))
                .expect("a model request");
            times.push(at - sent);
            let response = client.response(id);
            assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
        }
    }
    drop(client);
    agent.join().unwrap().unwrap();
    let (first, first_p90) = median(first);
    let (later, later_p90) = median(later);
    println!("acp: session/prompt to the first model request, {samples} samples, 200-file corpus");
    println!("  first prompt of a session: median {first:.2?}, p90 {first_p90:.2?}");
    println!("  a later prompt:            median {later:.2?}, p90 {later_p90:.2?}");
}
