//! The memory an MCP session costs a real `rlm serve --http` process, idle and with a
//! `run_lua` environment: N sessions opened by hand (`initialize`, then
//! `notifications/initialized`), then each given an environment (`x = 1`), with the
//! server's resident size (`VmRSS` in `/proc/PID/status`, so Linux only) read after a
//! warm-up session, after opening them and after the environments.
//!
//! `cargo bench --bench serve_memory` (200 sessions; `SERVE_MEMORY_SESSIONS=N` for
//! another count). It measures the `rlm` binary of the bench profile (release).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"0"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

/// An `rlm serve --http` child process, killed when dropped.
struct Served {
    child: Child,
    address: String,
}

impl Served {
    fn start(max_sessions: usize) -> Served {
        let mut child = Command::new(env!("CARGO_BIN_EXE_rlm"))
            .args([
                "serve",
                "--http",
                "127.0.0.1:0",
                "--path",
                "tests/fixtures/serve",
            ])
            .args(["--max-sessions", &max_sessions.to_string()])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("rlm serve starts");
        let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
        let address = lines
            .by_ref()
            .map_while(Result::ok)
            .find_map(|line| {
                let rest = line.split("http://").nth(1)?;
                Some(rest.split("/mcp").next()?.to_string())
            })
            .expect("the server says where it listens");
        // Keep reading its log, so that a full pipe never blocks it.
        std::thread::spawn(move || lines.for_each(drop));
        Served { child, address }
    }

    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("/proc/PID/status");
        status
            .lines()
            .find_map(|line| line.strip_prefix("VmRSS:"))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS in KiB")
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One MCP POST in `session` (none for `initialize`): the answer's session id and body.
fn post(
    agent: &ureq::Agent,
    url: &str,
    session: Option<&str>,
    body: &str,
) -> (Option<String>, String) {
    let mut request = agent
        .post(url)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream");
    if let Some(session) = session {
        request = request.header("Mcp-Session-Id", session);
    }
    let mut response = request.send(body).expect("the server answers");
    let id = response
        .headers()
        .get("mcp-session-id")
        .and_then(|value| value.to_str().ok())
        .map(str::to_string);
    let text = response.body_mut().read_to_string().expect("a body");
    (id, text)
}

fn open_session(agent: &ureq::Agent, url: &str) -> String {
    let (id, _) = post(agent, url, None, INITIALIZE);
    let id = id.expect("a session id");
    post(agent, url, Some(&id), INITIALIZED);
    id
}

fn run_lua(agent: &ureq::Agent, url: &str, session: &str, code: &str) {
    let call = serde_json::json!({
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "run_lua", "arguments": {"code": code}},
    });
    let (_, answer) = post(agent, url, Some(session), &call.to_string());
    assert!(!answer.contains("\"isError\":true"), "{answer}");
}

fn main() {
    if std::fs::metadata("/proc/self/status").is_err() {
        println!("serve_memory: reads /proc/PID/status; Linux only");
        return;
    }
    // `cargo test --benches` runs this with --bench absent: stay quick there.
    let quick = !std::env::args().any(|a| a == "--bench");
    let sessions: usize = std::env::var("SERVE_MEMORY_SESSIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(if quick { 20 } else { 200 });
    let served = Served::start(sessions + 1);
    let url = format!("http://{}/mcp", served.address);
    let agent: ureq::Agent = ureq::Agent::config_builder().build().into();
    // The first session and environment allocate the runtime's buffers: not counted.
    let warm = open_session(&agent, &url);
    run_lua(&agent, &url, &warm, "print(1)");
    let before = served.rss_kib();
    let ids: Vec<String> = (0..sessions).map(|_| open_session(&agent, &url)).collect();
    let idle = served.rss_kib();
    for id in &ids {
        run_lua(&agent, &url, id, "x = 1");
    }
    let with_lua = served.rss_kib();
    let per_session = |after: u64| after.saturating_sub(before) as f64 / sessions as f64;
    println!(
        "MCP session memory ({sessions} sessions): {:.1} KiB each idle, {:.1} KiB each with a run_lua environment",
        per_session(idle),
        per_session(with_lua),
    );
}
