//! Load and faults against a real `rlm serve --http` process (ignored by default: it
//! takes a minute; it asserts no timing):
//!
//! 100 MCP clients, each in its own session calling `run_lua` in a loop, while 10 more
//! keep opening sessions, dropping their connection mid-call and coming back: only
//! documented refusals, every answer correct, memory back near its baseline once all
//! sessions ended. Prints throughput, P50/P99 and peak memory.
//!
//! `RLM_SERVE_STRESS_SECS=10 cargo test --all-features --release --test it -- --ignored --nocapture serve_stress::`
//! (default 60 s; `RLM_SERVE_STRESS_ROUNDS=2` runs the load twice on one server, to tell
//! memory the allocator keeps from memory that grows; `RLM_SERVE_STRESS_BIN` names the
//! server binary to measure, e.g. `target/release/rlm`). CI runs it for a few seconds on
//! the debug build: fewer calls, the same 110 sessions and environments, and the same
//! assertions, none of which depend on speed. The memory an MCP session costs is
//! measured by `cargo bench --bench serve_memory`.

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use support::serve::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const CLIENTS: usize = 100;
const DROPPERS: usize = 10;

async fn serve(args: &[&str]) -> ServedProcess {
    // RLM_SERVE_STRESS_BIN: measure another build of the server (e.g. target/release/rlm).
    let binary = std::env::var("RLM_SERVE_STRESS_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_rlm").to_string());
    let mut command = tokio::process::Command::new(binary);
    command
        .args([
            "serve",
            "--http",
            "127.0.0.1:0",
            "--path",
            "tests/fixtures/serve",
        ])
        .args(args)
        .envs(std::env::var("RLM_SERVE_STRESS_MALLOC_ARENA_MAX").map(|n| ("MALLOC_ARENA_MAX", n)))
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    ServedProcess::spawn(command).await
}

/// A number from `/proc/PID/status` (`VmRSS:` in KiB, `Threads:`).
fn status(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

fn rss_kib(pid: u32) -> u64 {
    status(pid, "VmRSS:")
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

async fn sessions(address: &str) -> u64 {
    request("GET", format!("http://{address}/healthz"), None, None)
        .await
        .1["sessions"]
        .as_u64()
        .unwrap()
}

/// One client: its own session, `run_lua` in a loop, every answer checked.
async fn steady_client(url: String, me: usize, stop: Arc<AtomicBool>) -> Vec<Duration> {
    let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(url);
    let client = rmcp::ServiceExt::serve((), transport).await.unwrap();
    run_lua(&client, &format!("me = {me}; n = 0")).await;
    let mut latencies = Vec::new();
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        let begin = Instant::now();
        let result = run_lua(&client, "n = n + 1 print(me, n, word_count('a b c'))").await;
        latencies.push(begin.elapsed());
        n += 1;
        assert!(!is_error(&result), "{}", text(&result));
        assert_eq!(
            text(&result),
            format!("{me}\t{n}\t3\n"),
            "client {me}'s answer {n}"
        );
    }
    client.cancel().await.unwrap();
    latencies
}

/// A client that drops its connection mid-call, then comes back to the same session and
/// checks it still answers correctly; every few rounds it ends the session and opens a
/// new one. Refusals past the cap are the only errors allowed.
async fn dropping_client(address: String, stop: Arc<AtomicBool>, drops: Arc<AtomicU64>) {
    let url = format!("http://{address}/mcp");
    let mut round = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let reply = initialize(url.clone(), &[]).await;
        if reply.status == 503 {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        }
        assert_eq!(reply.status, 200, "{}", reply.body);
        let session = reply.header("mcp-session-id").unwrap().to_string();
        for _ in 0..5 {
            round += 1;
            let body = tool_call(
                round,
                "run_lua",
                json!({"code": "local t = os.clock() while os.clock() - t < 0.05 do end print('slow')"}),
            );
            let mut stream = tokio::net::TcpStream::connect(&address).await.unwrap();
            let head = format!(
                "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Session-Id: {session}\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            stream.write_all(head.as_bytes()).await.unwrap();
            let mut first = [0u8; 16];
            let _ = stream.read(&mut first).await;
            drop(stream);
            drops.fetch_add(1, Ordering::Relaxed);
            round += 1;
            let back = call_in(
                url.clone(),
                &session,
                round,
                "run_lua",
                json!({"code": "print(word_count('a b'))"}),
            )
            .await;
            assert_eq!(back.status, 200, "{}", back.body);
            assert_eq!(
                back.json()["result"]["content"][0]["text"],
                json!("2\n"),
                "{}",
                back.body
            );
        }
        let headers = [("Mcp-Session-Id", session.as_str())];
        send("DELETE", url.clone(), &headers, None).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "a minute of load; run with --ignored (see the file's doc; CI runs it briefly)"]
async fn hundred_clients_and_ten_dropping_connections_lose_nothing_and_give_memory_back() {
    let seconds: u64 = std::env::var("RLM_SERVE_STRESS_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let served = serve(&[
        "--max-sessions",
        "128",
        "--max-concurrent",
        "8",
        "--disconnect-grace",
        "1",
    ])
    .await;
    let (pid, address) = (served.pid, served.address.clone());
    let url = format!("http://{address}/mcp");
    // Warm up the runtime and the call pool, then take the baseline.
    let warm = open_session(url.clone()).await;
    call_in(url.clone(), &warm, 2, "word_count", json!({"text": "a"})).await;
    send(
        "DELETE",
        url.clone(),
        &[("Mcp-Session-Id", warm.as_str())],
        None,
    )
    .await;
    let baseline = rss_kib(pid);
    let threads = status(pid, "Threads:");

    let rounds: u64 = std::env::var("RLM_SERVE_STRESS_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    for _ in 0..rounds {
        let stop = Arc::new(AtomicBool::new(false));
        let drops = Arc::new(AtomicU64::new(0));
        let peak = Arc::new(AtomicU64::new(baseline));
        let sampler = {
            let (stop, peak) = (Arc::clone(&stop), Arc::clone(&peak));
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    peak.fetch_max(rss_kib(pid), Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            })
        };
        let started = Instant::now();
        let steady: Vec<_> = (0..CLIENTS)
            .map(|me| tokio::spawn(steady_client(url.clone(), me, Arc::clone(&stop))))
            .collect();
        let dropping: Vec<_> = (0..DROPPERS)
            .map(|_| {
                tokio::spawn(dropping_client(
                    address.clone(),
                    Arc::clone(&stop),
                    Arc::clone(&drops),
                ))
            })
            .collect();
        tokio::time::sleep(Duration::from_secs(seconds)).await;
        stop.store(true, Ordering::Relaxed);
        let mut latencies: Vec<Duration> = Vec::new();
        for client in steady {
            latencies.extend(client.await.unwrap());
        }
        for client in dropping {
            client.await.unwrap();
        }
        let wall = started.elapsed();
        sampler.await.unwrap();
        // However slow the build, the load ran: answers were checked and calls dropped.
        assert!(
            !latencies.is_empty() && drops.load(Ordering::Relaxed) > 0,
            "{} answers checked, {} connections dropped",
            latencies.len(),
            drops.load(Ordering::Relaxed)
        );
        while sessions(&address).await > 0 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // Interrupted calls and freed environments settle; then memory is read again.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let after = rss_kib(pid);
        let threads_after = status(pid, "Threads:");
        latencies.sort();
        println!(
            "{CLIENTS} clients + {DROPPERS} dropping, {seconds} s: {} run_lua calls, {:.0} calls/s, P50 {:.1} ms, P99 {:.1} ms, {} dropped connections; RSS baseline {} MiB, peak {} MiB, after {} MiB; threads {threads} before, {threads_after} after",
            latencies.len(),
            latencies.len() as f64 / wall.as_secs_f64(),
            percentile(&latencies, 0.5).as_secs_f64() * 1000.0,
            percentile(&latencies, 0.99).as_secs_f64() * 1000.0,
            drops.load(Ordering::Relaxed),
            baseline / 1024,
            peak.load(Ordering::Relaxed) / 1024,
            after / 1024,
        );
        // The server hands freed pages back when its last session ends; a few MiB of
        // caches stay, far less than 110 sessions' environments.
        assert!(
            after < baseline + 16 * 1024,
            "memory back near its baseline: {baseline} -> {after} KiB"
        );
    }
    drop(served);
}
