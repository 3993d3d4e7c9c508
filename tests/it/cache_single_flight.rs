//! Single-flight across processes sharing a call cache: against the scripted server,
//! which counts the requests it gets and answers each after 500 ms, four `rlm ask`
//! processes launched at once with the same question send each request once and each
//! gets the right answer; two `rlm eval` processes count their waits in their results and
//! summaries; a waiter whose sender is killed mid-request sends its own once the lease
//! runs out. Each test is a function of the cache's name, run on a SQLite file
//! and on a real `redis-server` (skipped when there is none, as in `cache_redis.rs`).

use std::path::Path;
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::cli::{llm_args, rlm_command, stderr, stdout};
use crate::support::openai_server::{Behavior, OpenAiServer};
use crate::support::redis::RedisServer;
use crate::support::rlm_loop::{events_of, lua, turns};

const DELAY: Duration = Duration::from_millis(500);

const QUESTION: &str = "Shared question: what do the three say?";

/// The root's one turn asks three sub-calls at once and answers with them.
const ROOT_CODE: &str =
    "local a = llm_query_batched({'one', 'two', 'three'})\nFINAL(table.concat(a, '|'))";

/// Four requests per run, each answered after [`DELAY`]: the root's turn, and an echo
/// of each sub-call's prompt.
fn server() -> OpenAiServer {
    OpenAiServer::always(Behavior::ByPrompt(vec![
        ("Shared question".to_string(), lua(ROOT_CODE).after(DELAY)),
        (String::new(), Behavior::echo(DELAY)),
    ]))
}

/// `rlm ask QUESTION --cache CACHE ARGS` against `server`, writing its trace to `trace`,
/// started and not waited for.
fn spawn_ask(server: &OpenAiServer, cache: &str, trace: &Path, args: &[&str]) -> Child {
    rlm_command()
        .args(["ask", QUESTION, "--cache", cache, "--trace"])
        .arg(trace)
        .args(args)
        .args(llm_args(&server.base_url(), "test-model"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("rlm starts")
}

/// Every model call a trace records (each turn, and each block's sub-calls), as JSON.
fn calls(trace: &Path) -> Vec<Value> {
    let events = events_of(&std::fs::read_to_string(trace).expect("the trace"));
    let mut calls = Vec::new();
    for turn in turns(&events) {
        calls.push(turn.clone());
        for block in turn["outputs"].as_array().into_iter().flatten() {
            calls.extend(block["sub_calls"].as_array().into_iter().flatten().cloned());
        }
    }
    calls
}

fn finished(child: Child) -> Output {
    child.wait_with_output().expect("rlm finishes")
}

/// Four processes asking the same question at once through the cache `cache`.
fn four_processes_send_each_request_once(cache: &str) {
    let server = server();
    let dir = tempfile::tempdir().unwrap();
    let traces: Vec<_> = (0..4)
        .map(|i| dir.path().join(format!("trace{i}.jsonl")))
        .collect();
    let children: Vec<Child> = traces
        .iter()
        .map(|trace| spawn_ask(&server, cache, trace, &[]))
        .collect();
    for output in children.into_iter().map(finished) {
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        assert_eq!(stdout(&output), "echo: one|echo: two|echo: three\n");
        assert!(
            !stderr(&output).contains("warning: the call cache"),
            "{}",
            stderr(&output)
        );
    }
    assert_eq!(server.request_count(), 4, "each request sent once, not 16");
    let calls: Vec<Value> = traces.iter().flat_map(|trace| calls(trace)).collect();
    assert_eq!(calls.len(), 16, "four calls in each of the four runs");
    let sent = calls.iter().filter(|call| call.get("cached").is_none());
    assert_eq!(sent.count(), 4, "the rest came from the cache");
    let waited = calls
        .iter()
        .filter(|call| call["waited_ms"].is_u64())
        .count();
    assert!(waited > 0, "some waited for the others' calls: {calls:?}");
    for call in calls.iter().filter(|call| call["waited_ms"].is_u64()) {
        assert_eq!(call["cached"], true, "a wait is a hit: {call}");
    }
}

/// Two `rlm eval` processes on the same two tasks (`direct`: one request each) through
/// the cache `cache`, against a server slow enough (3 s) that both have started before
/// either is answered: each task is sent by one and waited for by the other, which its
/// result and its summary count.
fn two_evals_count_their_waits(cache: &str) {
    let server = OpenAiServer::always(Behavior::reply("42").after(Duration::from_secs(3)));
    let dir = tempfile::tempdir().unwrap();
    let tasks = dir.path().join("tasks.jsonl");
    let lines: Vec<String> = (0..2)
        .map(|i| {
            serde_json::json!({"id": format!("t{i}"), "question": format!("Question {i}?"),
                               "context": "The answer is 42.", "answer": "42", "scorer": "exact"})
            .to_string()
        })
        .collect();
    std::fs::write(&tasks, lines.join("\n") + "\n").unwrap();
    let outs = [dir.path().join("a"), dir.path().join("b")];
    let children: Vec<Child> = outs
        .iter()
        .map(|out| {
            rlm_command()
                .args([
                    "eval",
                    "--methods",
                    "direct",
                    "--jobs",
                    "2",
                    "--cache",
                    cache,
                ])
                .arg("--tasks")
                .arg(&tasks)
                .arg("--out")
                .arg(out)
                .args(llm_args(&server.base_url(), "test-model"))
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("rlm starts")
        })
        .collect();
    for output in children.into_iter().map(finished) {
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    }
    assert_eq!(server.request_count(), 2, "each task's request sent once");
    let results: Vec<Value> = outs
        .iter()
        .flat_map(|out| {
            let text = std::fs::read_to_string(out.join("results.jsonl")).unwrap();
            text.lines()
                .map(|line| serde_json::from_str::<Value>(line).unwrap())
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(results.len(), 4);
    assert!(results.iter().all(|r| r["score"] == 1.0), "{results:?}");
    let waited: Vec<&Value> = results.iter().filter(|r| r["waited_calls"] == 1).collect();
    assert_eq!(waited.len(), 2, "one wait per task: {results:?}");
    assert!(
        waited
            .iter()
            .all(|r| r["cached_calls"] == 1 && r["model_calls"] == 0)
    );
    let sent = results.iter().filter(|r| r.get("waited_calls").is_none());
    assert!(sent.clone().all(|r| r["cached_calls"] == 0), "{results:?}");
    assert_eq!(sent.count(), 2);
    let summaries: String = outs
        .iter()
        .map(|out| std::fs::read_to_string(out.join("summary.md")).unwrap())
        .collect();
    assert!(
        summaries.contains("waited for another worker's identical call"),
        "{summaries}"
    );
}

/// A process holding a request is killed while the server has it; the process that
/// waits for it sends its own once the holder's lease (`--cache-lease`) runs out.
fn a_waiter_whose_sender_is_killed_sends_its_own_after_the_lease(cache: &str) {
    const LEASE: &str = "2";
    // The first request (the sender's) is never answered in time.
    let server = OpenAiServer::start(
        vec![lua("FINAL('from the sender')").after(Duration::from_secs(60))],
        lua("FINAL('from the waiter')").after(Duration::from_millis(50)),
    );
    let dir = tempfile::tempdir().unwrap();
    let lease = ["--cache-lease", LEASE];
    let mut sender = spawn_ask(&server, cache, &dir.path().join("sender.jsonl"), &lease);
    let started = Instant::now();
    while server.request_count() == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the sender sends"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let waiter_trace = dir.path().join("waiter.jsonl");
    let waiter = spawn_ask(&server, cache, &waiter_trace, &lease);
    // The waiter finds the key held, then its holder dies without a word.
    std::thread::sleep(Duration::from_millis(300));
    sender.kill().expect("SIGKILL the sender");
    let _ = sender.wait();
    let output = finished(waiter);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout(&output), "from the waiter\n");
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "the sender's, then the waiter's own");
    let gap = requests[1].received_at - requests[0].received_at;
    assert!(
        gap >= Duration::from_millis(1500) && gap < Duration::from_secs(20),
        "sent once the 2 s lease ran out, not before and not much after: {gap:?}"
    );
    let calls = calls(&waiter_trace);
    assert_eq!(calls.len(), 1);
    assert!(calls[0].get("cached").is_none(), "sent, not a hit");
}

fn sqlite_cache(dir: &Path) -> String {
    dir.join("cache.sqlite").to_str().unwrap().to_string()
}

#[test]
fn four_processes_sharing_a_sqlite_cache_send_each_request_once() {
    let dir = tempfile::tempdir().unwrap();
    four_processes_send_each_request_once(&sqlite_cache(dir.path()));
}

#[test]
fn two_evals_sharing_a_sqlite_cache_count_their_waits() {
    let dir = tempfile::tempdir().unwrap();
    two_evals_count_their_waits(&sqlite_cache(dir.path()));
}

#[test]
fn a_waiter_on_a_sqlite_cache_whose_sender_is_killed_sends_its_own_after_the_lease() {
    let dir = tempfile::tempdir().unwrap();
    a_waiter_whose_sender_is_killed_sends_its_own_after_the_lease(&sqlite_cache(dir.path()));
}

#[test]
fn four_processes_sharing_a_redis_cache_send_each_request_once() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    four_processes_send_each_request_once(&redis.url());
}

#[test]
fn two_evals_sharing_a_redis_cache_count_their_waits() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    two_evals_count_their_waits(&redis.url());
}

#[test]
fn a_waiter_on_a_redis_cache_whose_sender_is_killed_sends_its_own_after_the_lease() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    a_waiter_whose_sender_is_killed_sends_its_own_after_the_lease(&redis.url());
}
