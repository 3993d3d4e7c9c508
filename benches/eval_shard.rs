//! `rlm eval` split four ways (`--shard K/4`, four processes at once) and merged
//! (`rlm eval merge`), beside one run over every task (`--jobs 1`, and `--jobs 4` for
//! reference), against the scripted test server answering each request after 200 ms:
//! wall times, requests sent, and whether the merged results are the single run's.
//!
//! Run: `cargo bench --bench eval_shard` (`RLM_BENCH_SHARD_TASKS=N`,
//! `RLM_BENCH_SHARD_DELAY_MS=N` for other sizes).

mod common;

#[path = "../tests/it/support/openai_server.rs"]
#[allow(dead_code)]
mod openai_server;

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use openai_server::{Behavior, OpenAiServer};
use rlm_registry::eval::{Scorer, Task};

const SHARDS: u32 = 4;

/// Tasks with distinct questions whose answer is `42`.
fn write_tasks(dir: &Path, count: usize) -> PathBuf {
    let tasks: Vec<Task> = (0..count)
        .map(|i| Task {
            id: format!("t{i:03}"),
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

/// `rlm eval` on `tasks` into `out`, started.
fn eval(server: &OpenAiServer, tasks: &Path, out: &Path, extra: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_rlm"))
        .args(["eval", "--quiet", "--no-cache", "--tasks"])
        .arg(tasks)
        .arg("--out")
        .arg(out)
        .args(["--base-url", &server.base_url(), "--model", "test-model"])
        .args(extra)
        .env_remove("RLM_CACHE")
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("rlm runs")
}

fn wait(child: Child) {
    let output = child.wait_with_output().expect("rlm ends");
    assert!(output.status.success(), "rlm eval failed");
}

/// Each result's id, method, answer and score, in the file's order.
fn outcomes(out: &Path) -> Vec<String> {
    std::fs::read_to_string(out.join("results.jsonl"))
        .unwrap()
        .lines()
        .map(|line| {
            let r: serde_json::Value = serde_json::from_str(line).unwrap();
            format!("{} {} {} {}", r["id"], r["method"], r["answer"], r["score"])
        })
        .collect()
}

fn main() {
    let smoke = !std::env::args().any(|arg| arg == "--bench");
    let count = common::setting("RLM_BENCH_SHARD_TASKS", if smoke { 4 } else { 16 });
    let delay = Duration::from_millis(common::setting(
        "RLM_BENCH_SHARD_DELAY_MS",
        if smoke { 10 } else { 200 },
    ) as u64);
    // Two turns per task for the loop (a look, then the answer), one for `direct`.
    let server = OpenAiServer::always(Behavior::ByPrompt(vec![
        (
            "Output of block".to_string(),
            Behavior::reply("```lua\nFINAL('42')\n```").after(delay),
        ),
        (
            "(The context".to_string(),
            Behavior::reply("```lua\nprint(#context)\n```").after(delay),
        ),
        ("Question:".to_string(), Behavior::reply("42").after(delay)),
        (String::new(), Behavior::status(500)),
    ]));
    let dir = tempfile::tempdir().unwrap();
    let tasks = write_tasks(dir.path(), count);

    let mut rows = Vec::new();
    for jobs in ["1", "4"] {
        let out = dir.path().join(format!("single-{jobs}"));
        let before = server.request_count();
        let started = Instant::now();
        wait(eval(&server, &tasks, &out, &["--jobs", jobs]));
        rows.push((
            format!("one run, --jobs {jobs}"),
            started.elapsed(),
            server.request_count() - before,
        ));
    }

    let before = server.request_count();
    let started = Instant::now();
    let shards: Vec<(PathBuf, Child)> = (1..=SHARDS)
        .map(|k| {
            let out = dir.path().join(format!("shard-{k}"));
            let child = eval(
                &server,
                &tasks,
                &out,
                &["--shard", &format!("{k}/{SHARDS}")],
            );
            (out, child)
        })
        .collect();
    // Polled, so that each shard's own time is known, not its place in the queue.
    let mut running: Vec<(PathBuf, Child)> = shards;
    let mut finished = Vec::new();
    while !running.is_empty() {
        let mut i = 0;
        while i < running.len() {
            if running[i].1.try_wait().expect("rlm runs").is_some() {
                let (out, child) = running.remove(i);
                wait(child);
                finished.push((out, started.elapsed()));
            } else {
                i += 1;
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let ran = started.elapsed();
    let shard_times: Vec<String> = finished
        .iter()
        .map(|(_, time)| format!("{:.2}", time.as_secs_f64()))
        .collect();
    let mut dirs: Vec<PathBuf> = finished.into_iter().map(|(out, _)| out).collect();
    dirs.sort();
    let merged = dir.path().join("merged");
    let merge_started = Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_rlm"))
        .args(["eval", "merge"])
        .args(&dirs)
        .arg("--out")
        .arg(&merged)
        .output()
        .expect("rlm runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let merge_time = merge_started.elapsed();
    rows.push((
        format!("{SHARDS} shards at once, --jobs 1 each"),
        ran,
        server.request_count() - before,
    ));
    let same = outcomes(&merged) == outcomes(&dir.path().join("single-1"));

    println!(
        "rlm eval, {count} tasks x (rlm: 2 turns, direct: 1), server answering after {} ms, {} cores:",
        delay.as_millis(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    for (name, time, requests) in &rows {
        println!(
            "  {name:<32} {:>7.2} s  {requests} requests",
            time.as_secs_f64()
        );
    }
    println!("  the shards ended at {} s", shard_times.join(", "));
    println!(
        "  rlm eval merge                   {:>7.3} s  results the single run's: {same}",
        merge_time.as_secs_f64()
    );
    println!(
        "  shards + merge: {:.2} of one run's time (--jobs 1)",
        (ran + merge_time).as_secs_f64() / rows[0].1.as_secs_f64()
    );
    assert!(same, "the merged results are the single run's");
}
