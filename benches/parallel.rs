//! Sub-calls in parallel from plain Lua: 32 pieces, each a sub-call followed by a second
//! call on its answer, against a local OpenAI-compatible server that answers every
//! request after 200 ms. Written once as a plain function run by `parallel_map` with
//! `concurrency = 16` (ideal: four rounds, 0.8 s), and once as the same loop without it
//! (64 calls one after another, 12.8 s). Run `cargo bench --bench parallel`; it prints
//! the table of BENCHMARKS.md. `RLM_BENCH_SEQUENTIAL=0` skips the sequential row.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use rlm_registry::Registry;
use rlm_registry::environment::{Environment, Limits};
use rlm_registry::llm::{LlmClient, LlmConfig};

/// How long the server takes to answer each request.
const DELAY: Duration = Duration::from_millis(200);

/// The pieces, and what runs at once.
const PIECES: usize = 32;
const CONCURRENCY: usize = 16;

/// The work of one piece: a call, then a second on its answer.
const PIECE: &str = "function(piece)\n\
      local first = llm_query('Summarize piece ' .. piece)\n\
      return llm_query('Check this summary: ' .. first)\n\
    end";

fn main() {
    let base_url = serve_after(DELAY);
    let config = LlmConfig::new(base_url, "bench-model")
        .with_max_concurrency(CONCURRENCY)
        .with_timeout(Duration::from_secs(30));
    let client = LlmClient::new(config).expect("a client");
    let limits = Limits {
        time: Duration::from_secs(120),
        ..Limits::default()
    };
    let env = Environment::builder(Registry::baked().clone())
        .limits(limits)
        .llm(Arc::new(client))
        .build()
        .expect("an environment");
    let pieces = format!("local pieces = {{}} for i = 1, {PIECES} do pieces[i] = i end\n");
    let parallel = format!(
        "{pieces}local r, e = parallel_map(pieces, {PIECE}, {{concurrency = {CONCURRENCY}}})\n\
         assert(#r == {PIECES} and next(e) == nil)"
    );
    let sequential = format!(
        "{pieces}local piece_fn = {PIECE}\nlocal r = {{}}\n\
         for i, piece in ipairs(pieces) do r[i] = piece_fn(piece) end\nassert(#r == {PIECES})"
    );
    println!(
        "| {PIECES} pieces × 2 calls, {} ms each | wall time | ideal |",
        DELAY.as_millis()
    );
    println!("|---|---:|---:|");
    let rounds = 2 * PIECES.div_ceil(CONCURRENCY);
    row(
        &env,
        &format!("`parallel_map`, concurrency {CONCURRENCY}"),
        &parallel,
        DELAY * rounds as u32,
    );
    // `cargo test --benches` runs this without `--bench`: the 12.8 s row is left out of
    // that smoke run unless asked for.
    let smoke = !std::env::args().any(|arg| arg == "--bench");
    if common::setting("RLM_BENCH_SEQUENTIAL", usize::from(!smoke)) != 0 {
        row(&env, "a plain loop", &sequential, DELAY * 2 * PIECES as u32);
    }
}

/// Runs `code` once and prints its row: its wall time beside the ideal.
fn row(env: &Environment, label: &str, code: &str, ideal: Duration) {
    let started = Instant::now();
    env.execute(code).unwrap_or_else(|e| panic!("{label}: {e}"));
    let took = started.elapsed();
    println!(
        "| {label} | {:.2} s | {:.1} s |",
        took.as_secs_f64(),
        ideal.as_secs_f64()
    );
}

/// A chat-completions server on a free local port answering every request after
/// `delay`, a thread per connection; its base URL.
fn serve_after(delay: Duration) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a local port");
    let address = listener.local_addr().expect("its address");
    thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            thread::spawn(move || answer(stream, delay));
        }
    });
    format!("http://{address}/v1")
}

/// Reads requests on one connection and answers each after `delay`.
fn answer(mut stream: TcpStream, delay: Duration) {
    while read_request(&mut stream) {
        thread::sleep(delay);
        let body = r#"{"id":"bench","object":"chat.completion","created":0,"model":"bench-model","choices":[{"index":0,"message":{"role":"assistant","content":"a short answer"},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":3,"total_tokens":13}}"#;
        let response = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        if stream.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}

/// Reads one request (head and body); false when the connection is closed.
fn read_request(stream: &mut TcpStream) -> bool {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return false,
            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0);
    while buffer.len() < head_end + length {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return false,
            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
        }
    }
    true
}
