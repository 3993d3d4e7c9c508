//! The call cache: what a lookup costs with 100,000 answers in the file (or
//! `RLM_BENCH_CACHE_ENTRIES`), hashing a root agent's request included; then an `rlm eval`
//! run again with its cache against a test server that answers after 200 ms: the requests
//! it sends, whether its results are the first run's, and its wall time beside the first;
//! then single-flight: four `rlm eval` processes launched at once on the same 50 tasks
//! (`direct`, one request each) with one shared cache, against a server answering after
//! 500 ms: the requests it sees and their wall time beside one process's alone.
//!
//! Run: `cargo bench --bench cache`.

mod common;

#[path = "../tests/it/support/openai_server.rs"]
#[allow(dead_code)]
mod openai_server;

use std::hint::black_box;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group};
use openai_server::{Behavior, OpenAiServer};
use rlm_registry::eval::{Scorer, Task};
use rlm_registry::llm::{
    CacheKey, CacheStore, Cached, CallCache, Completion, Llm, LlmError, Message, ModelInfo, Request,
};

/// Answers in the file: 100,000, or 1,000 in the smoke run of `cargo test --benches`
/// (which runs this without `--bench`).
fn entries() -> usize {
    let smoke = !std::env::args().any(|arg| arg == "--bench");
    common::setting(
        "RLM_BENCH_CACHE_ENTRIES",
        if smoke { 1_000 } else { 100_000 },
    )
}

/// A request the size of a root agent's third turn: a system prompt of about 8 KB and
/// two turns of code and output.
fn request(i: usize) -> Request {
    let system = "You answer questions about a long context by writing Lua. ".repeat(140);
    let mut messages = vec![
        Message::system(system),
        Message::user(format!("Question {i}: how many lines mention an error?")),
    ];
    for turn in 0..2 {
        messages.push(Message::assistant(format!(
            "```lua\nlocal n = 0\nfor line in context:gmatch('[^\\n]+') do n = n + {turn} end\nprint(n)\n```"
        )));
        messages.push(Message::user(format!("Output of block 1:\n{}\n", i * 7)));
    }
    Request::new(messages)
}

/// An answer of about 1 KB, as a turn of code is.
fn answer(i: usize) -> Completion {
    Completion::new(format!("```lua\nprint({i})\n```\n{}", "x".repeat(1000))).with_tokens(3000, 120)
}

/// Never called: every request of the benchmark is a hit.
struct Unreachable;

impl Llm for Unreachable {
    fn complete(&self, _request: Request) -> Result<Completion, LlmError> {
        Err(LlmError::Config("a lookup missed".to_string()))
    }

    /// The server and model the answers were stored for: they are part of the key.
    fn model_info(&self) -> Option<ModelInfo> {
        Some(ModelInfo::new(MODEL, ENDPOINT))
    }
}

const ENDPOINT: &str = "http://127.0.0.1:8080/v1";
const MODEL: &str = "model";

fn lookups(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cache.sqlite");
    let count = entries();
    let cache = Arc::new(CallCache::open(&path));
    let started = Instant::now();
    let keys: Vec<CacheKey> = (0..count)
        .map(|i| {
            let key = CacheKey::of(ENDPOINT, MODEL, &request(i));
            cache.store(&key, &answer(i));
            key
        })
        .collect();
    let stats = cache.stats().unwrap();
    println!(
        "filled {} answers ({:.0} MiB on disk) in {:.1} s",
        stats.entries,
        stats.file_bytes as f64 / 1_048_576.0,
        started.elapsed().as_secs_f64()
    );
    let client = Cached::new(Unreachable, cache.clone());
    let requests: Vec<Request> = (0..1000).map(|i| request(i * (count / 1000))).collect();

    let mut group = c.benchmark_group(format!("cache_{count}_entries"));
    group
        .sample_size(30)
        .measurement_time(Duration::from_secs(5));
    let mut next = 0usize;
    group.bench_function("lookup (a hit, by key)", |b| {
        b.iter(|| {
            next = (next + 7919) % count;
            black_box(cache.lookup(&keys[next]))
        })
    });
    group.bench_function("key of a 9 KB request", |b| {
        b.iter(|| {
            black_box(CacheKey::of(
                "http://127.0.0.1:8080/v1",
                "model",
                &requests[0],
            ))
        })
    });
    let mut next = 0usize;
    group.bench_function("call answered from the cache (key and lookup)", |b| {
        b.iter(|| {
            next = (next + 1) % requests.len();
            black_box(client.complete(requests[next].clone()).unwrap())
        })
    });
    let mut fresh = count;
    group.bench_function("store (a miss's answer)", |b| {
        b.iter(|| {
            fresh += 1;
            let key = CacheKey::of("e", "m", &Request::from(format!("new {fresh}")));
            cache.store(&key, &answer(fresh));
        })
    });
    group.finish();
}

/// Tasks with distinct questions whose answer is `42`.
fn write_tasks(dir: &Path, count: usize) -> std::path::PathBuf {
    let tasks: Vec<Task> = (0..count)
        .map(|i| Task {
            id: format!("t{i}"),
            question: format!("What is the answer to question {i}?"),
            context: Some(format!(
                "Somewhere in here, the answer to question {i} is 42.\n"
            )),
            context_file: None,
            answer: "42".into(),
            scorer: Scorer::Exact,
            family: None,
            size: None,
            schema: None,
            corpus: false,
        })
        .collect();
    let path = dir.join("tasks.jsonl");
    rlm_registry::eval::write_tasks(std::fs::File::create(&path).unwrap(), &tasks).unwrap();
    path
}

/// `rlm eval` on `tasks` into `out`, and its wall time.
fn eval(server: &OpenAiServer, tasks: &Path, out: &Path, extra: &[&str]) -> Duration {
    let started = Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_rlm"))
        .args(["eval", "--tasks"])
        .arg(tasks)
        .arg("--out")
        .arg(out)
        .args(["--base-url", &server.base_url(), "--model", "test-model"])
        .args(extra)
        .env_remove("RLM_CACHE")
        .output()
        .expect("rlm runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    started.elapsed()
}

/// Each result's id, method, answer and score, in order.
fn outcomes(out: &Path) -> Vec<String> {
    let mut lines: Vec<String> = std::fs::read_to_string(out.join("results.jsonl"))
        .unwrap()
        .lines()
        .map(|line| {
            let r: serde_json::Value = serde_json::from_str(line).unwrap();
            format!("{} {} {} {}", r["id"], r["method"], r["answer"], r["score"])
        })
        .collect();
    lines.sort();
    lines
}

fn eval_rerun() {
    const TASKS: usize = 8;
    const DELAY: Duration = Duration::from_millis(200);
    // Two turns per task for the loop (a look, then the answer), one for `direct`.
    let server = OpenAiServer::always(Behavior::ByPrompt(vec![
        (
            "Output of block".to_string(),
            Behavior::reply("```lua\nFINAL('42')\n```").after(DELAY),
        ),
        (
            "(The context".to_string(),
            Behavior::reply("```lua\nprint(#context)\n```").after(DELAY),
        ),
        ("Question:".to_string(), Behavior::reply("42").after(DELAY)),
        (String::new(), Behavior::status(500)),
    ]));
    let dir = tempfile::tempdir().unwrap();
    let tasks = write_tasks(dir.path(), TASKS);
    let first = dir.path().join("first");
    let cold = eval(&server, &tasks, &first, &[]);
    let sent = server.request_count();
    let second = dir.path().join("second");
    let cache = first.join("cache.sqlite");
    let warm = eval(
        &server,
        &tasks,
        &second,
        &["--cache", cache.to_str().unwrap()],
    );
    let resent = server.request_count() - sent;
    let identical = outcomes(&first) == outcomes(&second);
    println!(
        "rlm eval, {TASKS} tasks x (rlm, direct), server answering after {} ms:\n  \
         first run  {:.2} s, {sent} requests\n  \
         re-run     {:.3} s, {resent} requests, results identical: {identical}, {:.1}% of the first run's time",
        DELAY.as_millis(),
        cold.as_secs_f64(),
        warm.as_secs_f64(),
        100.0 * warm.as_secs_f64() / cold.as_secs_f64()
    );
    assert_eq!(resent, 0);
    assert!(identical);
}

/// `rlm eval` started on `tasks` (`direct`) into `out` with the cache `cache`.
fn spawn_eval(server: &OpenAiServer, tasks: &Path, out: &Path, cache: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_rlm"))
        .args(["eval", "--methods", "direct", "--jobs", "10", "--tasks"])
        .arg(tasks)
        .arg("--out")
        .arg(out)
        .arg("--cache")
        .arg(cache)
        .args(["--base-url", &server.base_url(), "--model", "test-model"])
        .env_remove("RLM_CACHE")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("rlm runs")
}

fn waited(child: Child) {
    let output = child.wait_with_output().expect("rlm finishes");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

fn single_flight() {
    const TASKS: usize = 50;
    const PROCESSES: usize = 4;
    const DELAY: Duration = Duration::from_millis(500);
    let server = OpenAiServer::always(Behavior::reply("42").after(DELAY));
    let dir = tempfile::tempdir().unwrap();
    let tasks = write_tasks(dir.path(), TASKS);

    let started = Instant::now();
    waited(spawn_eval(
        &server,
        &tasks,
        &dir.path().join("alone"),
        &dir.path().join("alone.sqlite"),
    ));
    let alone = started.elapsed();
    let sent_alone = server.request_count();

    let shared = dir.path().join("shared.sqlite");
    let started = Instant::now();
    let children: Vec<Child> = (0..PROCESSES)
        .map(|i| spawn_eval(&server, &tasks, &dir.path().join(format!("p{i}")), &shared))
        .collect();
    children.into_iter().for_each(waited);
    let together = started.elapsed();
    let sent_together = server.request_count() - sent_alone;
    let same = (0..PROCESSES).all(|i| {
        outcomes(&dir.path().join(format!("p{i}"))) == outcomes(&dir.path().join("alone"))
    });

    // The control: the same four processes, each with a cache of its own, send every
    // request; what their time exceeds one process's is the machine's, not the waits'.
    let started = Instant::now();
    let children: Vec<Child> = (0..PROCESSES)
        .map(|i| {
            let out = dir.path().join(format!("own{i}"));
            spawn_eval(
                &server,
                &tasks,
                &out,
                &dir.path().join(format!("own{i}.sqlite")),
            )
        })
        .collect();
    children.into_iter().for_each(waited);
    let apart = started.elapsed();
    let sent_apart = server.request_count() - sent_alone - sent_together;
    println!(
        "single-flight, {TASKS} tasks (direct, --jobs 10), server answering after {} ms:\n  \
         1 process                        {:.2} s, {sent_alone} requests\n  \
         {PROCESSES} processes, one shared cache   {:.2} s, {sent_together} requests, results identical: {same}, {:.2}x one process's time\n  \
         {PROCESSES} processes, a cache each       {:.2} s, {sent_apart} requests, {:.2}x",
        DELAY.as_millis(),
        alone.as_secs_f64(),
        together.as_secs_f64(),
        together.as_secs_f64() / alone.as_secs_f64(),
        apart.as_secs_f64(),
        apart.as_secs_f64() / alone.as_secs_f64()
    );
    assert_eq!(sent_together, TASKS, "each request sent once");
    assert!(same);
}

criterion_group!(group, lookups);

fn main() {
    group();
    eval_rerun();
    single_flight();
    criterion::Criterion::default()
        .configure_from_args()
        .final_summary();
}
