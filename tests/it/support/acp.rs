//! Driving `rlm acp` as an ACP client would: JSON-RPC lines on its stdin, its stdout read
//! on a thread of its own, responses waited for by id, the `session/update`s between
//! them kept in order.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::cli::{llm_args, rlm_command};

/// How long any one answer may take before the test fails.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// A running `rlm acp`.
pub struct Agent {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Value>,
    /// The `session/update` notifications' `update` objects, in the order received.
    pub updates: Vec<Value>,
    next_id: u64,
}

impl Agent {
    /// `rlm acp ARGS` in `dir`, asking the model at `base_url`.
    pub fn start(dir: &Path, base_url: &str, args: &[&str]) -> Agent {
        let mut child = rlm_command()
            .current_dir(dir)
            .arg("acp")
            .args(args)
            .args(llm_args(base_url, "test-model"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("rlm acp starts");
        let stdout = child.stdout.take().expect("piped");
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                let value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("stdout carries only JSON-RPC: {line:?}: {e}"));
                if sender.send(value).is_err() {
                    return;
                }
            }
        });
        let stdin = child.stdin.take();
        Agent {
            child,
            stdin,
            lines,
            updates: Vec::new(),
            next_id: 1,
        }
    }

    /// Writes `line` as it is (with a newline).
    pub fn send_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(format!("{line}\n").as_bytes()).unwrap();
        stdin.flush().unwrap();
    }

    /// Sends request `method`; its id.
    pub fn send(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_line(&message.to_string());
        id
    }

    /// Sends notification `method`.
    pub fn notify(&mut self, method: &str, params: Value) {
        let message = json!({"jsonrpc": "2.0", "method": method, "params": params});
        self.send_line(&message.to_string());
    }

    /// The response to request `id` (its whole message), the updates before it kept.
    pub fn response(&mut self, id: impl Into<Value>) -> Value {
        let id = id.into();
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let message = match self.lines.recv_timeout(left) {
                Ok(message) => message,
                Err(RecvTimeoutError::Timeout) => panic!("no response to {id} in {PATIENCE:?}"),
                Err(RecvTimeoutError::Disconnected) => {
                    panic!("rlm acp ended before answering {id}")
                }
            };
            if message["method"] == "session/update" {
                self.updates.push(message["params"]["update"].clone());
            } else if message["id"] == id {
                return message;
            }
        }
    }

    /// Sends request `method` and waits for its response.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params);
        self.response(id)
    }

    /// `initialize` then `session/new` in `cwd`: the session's id.
    pub fn session(&mut self, cwd: &Path) -> String {
        let init = self.call(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        );
        assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
        let new = self.call("session/new", json!({"cwd": cwd, "mcpServers": []}));
        new["result"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("a session id: {new}"))
            .to_string()
    }

    /// Sends `session/prompt` with one text block; its id.
    pub fn prompt(&mut self, session: &str, text: &str) -> u64 {
        self.prompt_blocks(session, json!([{"type": "text", "text": text}]))
    }

    /// Sends `session/prompt` with `blocks`; its id.
    pub fn prompt_blocks(&mut self, session: &str, blocks: Value) -> u64 {
        self.send(
            "session/prompt",
            json!({"sessionId": session, "prompt": blocks}),
        )
    }

    /// Closes its stdin; the exit status once it has ended, and how long that took.
    pub fn close(mut self) -> (Option<i32>, Duration) {
        let started = Instant::now();
        drop(self.stdin.take());
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return (status.code(), started.elapsed());
            }
            if started.elapsed() > PATIENCE {
                let _ = self.child.kill();
                panic!("rlm acp did not exit in {PATIENCE:?} after stdin closed");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The updates of kind `kind` (`agent_message_chunk`, `tool_call`, …).
    pub fn updates_of(&self, kind: &str) -> Vec<&Value> {
        self.updates
            .iter()
            .filter(|update| update["sessionUpdate"] == kind)
            .collect()
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
