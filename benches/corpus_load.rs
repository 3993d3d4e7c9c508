//! Loading a context as a whole `rlm` process: a folder of 1,000 files (100 MB) as a
//! corpus, one big file (1 GB) under the default memory limit, beside Python reading the
//! same folder into a list of strings; then `rlm eval --suite corpus` at 10M tokens
//! against a test server whose model solves the task with code.
//!
//! Run: `cargo bench --bench corpus_load`. `RLM_BENCH_CORPUS_MB`, `RLM_BENCH_BIG_FILE_MB`
//! and `RLM_BENCH_CORPUS_EVAL_TOKENS` change the sizes (smaller in the smoke run of
//! `cargo test --benches`).

mod common;

#[path = "../tests/it/support/openai_server.rs"]
#[allow(dead_code)]
mod openai_server;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use openai_server::{Behavior, OpenAiServer};

/// Files in the folder.
const FILES: usize = 1_000;

fn smoke() -> bool {
    !std::env::args().any(|arg| arg == "--bench")
}

/// The size of a run: `full` for the benchmark, `small` for the smoke run.
fn size(name: &str, full: usize, small: usize) -> usize {
    common::setting(name, if smoke() { small } else { full })
}

/// Lines of generated log text, `bytes` of them.
fn text(bytes: usize, seed: u64) -> Vec<u8> {
    let mut next = common::generator();
    let mut out = Vec::with_capacity(bytes + 100);
    let mut line = seed;
    while out.len() < bytes {
        line += 1;
        let level = ["INFO", "WARN", "ERROR"][next(3) as usize];
        out.extend_from_slice(
            format!(
                "2026-11-28T10:{:02}:{:02} {level} service-{} request {line} took {} ms\n",
                next(60),
                next(60),
                next(40),
                next(5000)
            )
            .as_bytes(),
        );
    }
    out.truncate(bytes);
    out
}

/// The largest resident set of the children waited for so far, in bytes.
fn children_peak_rss() -> u64 {
    // SAFETY: getrusage writes the struct it is given, zeroed here.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_CHILDREN is a valid `who`.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
    usage.ru_maxrss as u64 * 1024
}

/// `rlm exec --context PATH CODE`: its output, wall time and the peak resident set of
/// the children so far (run the smaller loads first).
fn exec(path: &Path, code: &str) -> (String, Duration, u64) {
    let started = Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_rlm"))
        .args(["exec", "--context"])
        .arg(path)
        .arg(code)
        .output()
        .expect("rlm runs");
    let elapsed = started.elapsed();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        elapsed,
        children_peak_rss(),
    )
}

const PYTHON_READ: &str = r#"
import os, sys, time
started = time.perf_counter()
docs = []
for root, dirs, files in os.walk(sys.argv[1]):
    dirs.sort()
    for name in sorted(files):
        with open(os.path.join(root, name), encoding="utf-8", errors="replace") as f:
            docs.append((name, f.read()))
print(len(docs), time.perf_counter() - started)
"#;

fn megabytes(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}

fn folder() {
    let total = size("RLM_BENCH_CORPUS_MB", 100, 2) * 1_000_000;
    let dir = tempfile::tempdir().unwrap();
    for i in 0..FILES {
        let folder = dir.path().join(format!("part-{:02}", i % 20));
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(
            folder.join(format!("{i:04}.log")),
            text(total / FILES, i as u64),
        )
        .unwrap();
    }
    // A process start and the baked registry alone, for the baseline.
    let (_, bare, _) = exec(&dir.path().join("part-00/0000.log"), "print(1)");
    let (out, elapsed, rss) = exec(dir.path(), "print(#context)");
    assert_eq!(out.trim(), FILES.to_string());
    let python = common::python(PYTHON_READ, &[dir.path().as_os_str()]);
    let python_seconds = python
        .as_deref()
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|s| s.parse::<f64>().ok());
    println!(
        "rlm exec --context DIR 'print(#context)', {FILES} files, {:.0} MB:\n  \
         whole process {:.3} s (a process with one small file: {:.3} s), peak RSS {:.0} MB = {:.2}x the corpus",
        megabytes(total as u64),
        elapsed.as_secs_f64(),
        bare.as_secs_f64(),
        megabytes(rss),
        rss as f64 / total as f64,
    );
    if let Some(seconds) = python_seconds {
        println!(
            "  python3 reading the same folder into a list of strings (in-process time): {seconds:.3} s"
        );
    }
}

fn big_file() {
    let total = size("RLM_BENCH_BIG_FILE_MB", 1_000, 4) * 1_000_000;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.log");
    let chunk = text(16 * 1_000_000, 7);
    {
        use std::io::Write;
        let mut file = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        let mut written = 0;
        while written < total {
            let n = chunk.len().min(total - written);
            file.write_all(&chunk[..n]).unwrap();
            written += n;
        }
    }
    let (out, elapsed, rss) = exec(&path, "print(#context)");
    assert_eq!(out.trim(), total.to_string());
    println!(
        "rlm exec --context FILE 'print(#context)', one file of {:.0} MB, default --memory-limit (512 MiB):\n  \
         whole process {:.3} s, peak RSS {:.0} MB = {:.2}x the file",
        megabytes(total as u64),
        elapsed.as_secs_f64(),
        megabytes(rss),
        rss as f64 / total as f64,
    );
}

/// Lua that answers a `corpus` task as a model would: the company's founder from its
/// profile, the founder's birthplace from their biography.
const SOLVER: &str = r#"```lua
local question = "%QUESTION%"
local company = question:match("founder of (.-) born%?")
local founder
for _, doc in ipairs(context) do
  founder = founder or doc.text:match(company .. " was founded in %d+ by ([^.]+)%.")
end
for _, doc in ipairs(context) do
  local town = founder and doc.text:match(founder .. " was born in ([^.]+)%.")
  if town then FINAL(town) end
end
```"#;

fn eval_at_10m() {
    let tokens = size("RLM_BENCH_CORPUS_EVAL_TOKENS", 10_000_000, 8_000);
    let dir = tempfile::tempdir().unwrap();
    let tasks = dir.path().join("tasks.jsonl");
    let started = Instant::now();
    let generated = Command::new(env!("CARGO_BIN_EXE_rlm"))
        .args(["eval", "generate", "--suite", "corpus", "--n", "1"])
        .args(["--sizes", &tokens.to_string(), "--out"])
        .arg(&tasks)
        .output()
        .expect("rlm runs");
    assert!(
        generated.status.success(),
        "{}",
        String::from_utf8_lossy(&generated.stderr)
    );
    let generating = started.elapsed();
    let task: serde_json::Value = serde_json::from_str(
        std::fs::read_to_string(&tasks)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    let question = task["question"].as_str().unwrap();
    let server = OpenAiServer::always(Behavior::reply(&SOLVER.replace("%QUESTION%", question)));
    let out = dir.path().join("out");
    let started = Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_rlm"))
        .args(["eval", "--tasks"])
        .arg(&tasks)
        .arg("--out")
        .arg(&out)
        .args(["--base-url", &server.base_url(), "--model", "test-model"])
        .args(["--methods", "rlm", "--max-iterations", "2"])
        .env_remove("RLM_CACHE")
        .output()
        .expect("rlm runs");
    let running = started.elapsed();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result: serde_json::Value = serde_json::from_str(
        std::fs::read_to_string(out.join("results.jsonl"))
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    println!(
        "rlm eval --suite corpus at {tokens} tokens ({:.0} MB of JSONL), a scripted model solving it with code:\n  \
         generate {:.1} s, run {:.1} s (gather, describe, load, two passes over every document), score {}",
        megabytes(task["context"].as_str().map_or(0, str::len) as u64),
        generating.as_secs_f64(),
        running.as_secs_f64(),
        result["score"],
    );
    assert_eq!(result["score"], 1.0, "{result}");
}

fn main() {
    folder();
    big_file();
    eval_at_10m();
}
