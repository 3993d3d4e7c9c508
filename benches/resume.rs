//! Resuming a run: a 20-turn run against a test server that answers after 200 ms is
//! interrupted at turn 15 (its server goes away), then resumed from its trace against a
//! second server. What the resume costs: the re-execution of 14 turns' code and zero model
//! requests for them, so the time to its first live request beside the 14 turns' time
//! the first run took.
//!
//! Run: `cargo bench --bench resume` (the smoke run of `cargo test --benches` answers
//! after 20 ms). `RLM_BENCH_RESUME_DELAY_MS` sets the server's delay.

mod common;

#[path = "../tests/it/support/openai_server.rs"]
#[allow(dead_code)]
mod openai_server;

use std::sync::Arc;
use std::time::{Duration, Instant};

use openai_server::{Behavior, OpenAiServer};
use rlm_registry::Registry;
use rlm_registry::llm::{LlmClient, LlmConfig};
use rlm_registry::rlm::{Context, Resume, Rlm};

const TURNS: usize = 20;
const INTERRUPTED_AT: usize = 15;

/// The server's delay: 200 ms, or 20 ms in the smoke run.
fn delay() -> Duration {
    let smoke = !std::env::args().any(|arg| arg == "--bench");
    let ms = common::setting("RLM_BENCH_RESUME_DELAY_MS", if smoke { 20 } else { 200 });
    Duration::from_millis(ms as u64)
}

/// Turn `k`'s reply: code that reads the context and keeps a variable, as a turn of a
/// real run does; the last turn answers from every variable.
fn reply(k: usize) -> Behavior {
    let code = if k == TURNS {
        let sum: Vec<String> = (1..TURNS).map(|i| format!("n{i}")).collect();
        format!("FINAL({})", sum.join(" + "))
    } else {
        format!("n{k} = #grep(context, 'error {k}')\nprint(n{k})")
    };
    Behavior::reply(&format!("```lua\n{code}\n```"))
}

/// A log of 20,000 lines, some of them errors.
fn context() -> Context {
    let mut next = common::generator();
    let lines: Vec<String> = (0..20_000)
        .map(|i| match next(10) {
            0 => format!("{i} error {} in the gateway", next(20)),
            _ => format!("{i} ok request served"),
        })
        .collect();
    Context::from(lines.join("\n"))
}

fn rlm(server: &OpenAiServer) -> Rlm {
    let config = LlmConfig::new(server.base_url(), "bench")
        .with_max_retries(0)
        .with_timeout(Duration::from_secs(30));
    let client = LlmClient::new(config).expect("a client");
    Rlm::new(Arc::new(client), Registry::baked().clone(), TURNS as u32)
}

fn main() {
    let delay = delay();
    let dir = tempfile::tempdir().expect("a directory");
    let trace = dir.path().join("run.jsonl");
    let script: Vec<Behavior> = (1..=TURNS).map(|k| reply(k).after(delay)).collect();

    // The first run: 14 turns, then the server refuses turn 15.
    let first = OpenAiServer::start(script[..INTERRUPTED_AT - 1].to_vec(), Behavior::status(400));
    let started = Instant::now();
    let report = rlm(&first).trace_file(&trace).expect("a trace").run_report(
        "How many errors?",
        Some(context()),
        None,
    );
    let first_run = started.elapsed();
    assert!(
        report.result.is_err(),
        "interrupted at turn {INTERRUPTED_AT}"
    );
    let first_requests = first.request_count();

    // The resume: turns 1 to 14 played back, then live.
    let second = OpenAiServer::start(script[INTERRUPTED_AT - 1..].to_vec(), Behavior::status(500));
    let started = Instant::now();
    let resumed = Resume::from_file(&trace)
        .expect("a trace")
        .run(rlm(&second), Some(context()), None)
        .expect("resumes");
    let resumed_run = started.elapsed();
    let answer = resumed.result.expect("an answer");
    let requests = second.requests();
    let to_first_live = requests[0].received_at.duration_since(started);
    assert_eq!(
        requests.len(),
        TURNS - INTERRUPTED_AT + 1,
        "no turn asked twice"
    );

    let ratio = to_first_live.as_secs_f64() / first_run.as_secs_f64();
    println!(
        "resume of a {TURNS}-turn run interrupted at turn {INTERRUPTED_AT}, server delay {delay:?}"
    );
    println!("| | time | model requests |");
    println!("|---|---:|---:|");
    println!(
        "| first run, turns 1–{} (then refused) | {:.0} ms | {first_requests} |",
        INTERRUPTED_AT - 1,
        first_run.as_secs_f64() * 1000.0
    );
    println!(
        "| resume: turns 1–{} re-executed, to the first live request | {:.1} ms | 0 |",
        INTERRUPTED_AT - 1,
        to_first_live.as_secs_f64() * 1000.0
    );
    println!(
        "| resume, to the answer (turns {INTERRUPTED_AT}–{TURNS} live) | {:.0} ms | {} |",
        resumed_run.as_secs_f64() * 1000.0,
        requests.len()
    );
    println!(
        "time to the first live request / the first run's 14 turns: {ratio:.3} (answer {answer})"
    );
}
