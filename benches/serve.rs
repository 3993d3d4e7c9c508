//! `rlm serve` round trips, side by side in one run: a small registry-function call
//! (`word_count`) made directly in process with `ToolCaller::call` (the floor), over the
//! JSON API (`POST /v1/functions/word_count`) and over streamable HTTP MCP
//! (`tools/call`), each against a server on a loopback port. Reports P50 and P99 latency
//! with one client, and calls per second with 1, 8 and 64 concurrent clients.
//!
//! `cargo bench --bench serve` (set `SERVE_BENCH_CALLS` to change the calls per level,
//! default 2,000).

use std::sync::Arc;
use std::time::{Duration, Instant};

use rlm_registry::Registry;
use rlm_registry::environment::Limits;
use rlm_registry::serve::{ServeOptions, Server};
use rlm_registry::tools::ToolCaller;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::{Value, json};

const CONCURRENCY: [usize; 3] = [1, 8, 64];

fn arguments() -> Value {
    json!({"text": "the quick brown fox jumps over the lazy dog"})
}

/// Latencies of every call and the wall time of the whole level.
struct Level {
    latencies: Vec<Duration>,
    wall: Duration,
}

impl Level {
    fn percentile(&mut self, p: f64) -> Duration {
        self.latencies.sort();
        let index = ((self.latencies.len() as f64 - 1.0) * p).round() as usize;
        self.latencies[index]
    }

    fn per_second(&self) -> f64 {
        self.latencies.len() as f64 / self.wall.as_secs_f64()
    }
}

/// Runs `clients` threads, each making `calls / clients` calls with its own `call`; the
/// clock starts once every client is ready.
fn on_threads<C: FnMut()>(clients: usize, calls: usize, make: impl Fn() -> C + Sync) -> Level {
    let per_client = (calls / clients).max(1);
    let ready = std::sync::Barrier::new(clients + 1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..clients)
            .map(|_| {
                let (make, ready) = (&make, &ready);
                scope.spawn(move || {
                    let mut call = make();
                    ready.wait();
                    (0..per_client)
                        .map(|_| {
                            let begin = Instant::now();
                            call();
                            begin.elapsed()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        ready.wait();
        let start = Instant::now();
        let latencies = handles
            .into_iter()
            .flat_map(|h| h.join().expect("client thread"))
            .collect();
        Level {
            latencies,
            wall: start.elapsed(),
        }
    })
}

fn direct(clients: usize, calls: usize) -> Level {
    let arguments = arguments();
    on_threads(clients, calls, || {
        let caller = ToolCaller::new(Registry::baked().clone(), Limits::default()).expect("caller");
        let arguments = arguments.clone();
        move || {
            let result = caller.call("word_count", &arguments).expect("direct call");
            assert_eq!(result, json!(9));
        }
    })
}

fn json_api(url: &str, clients: usize, calls: usize) -> Level {
    let body = arguments().to_string();
    on_threads(clients, calls, || {
        let agent: ureq::Agent = ureq::Agent::config_builder().build().into();
        let body = body.clone();
        let url = url.to_string();
        move || {
            let mut response = agent
                .post(&url)
                .header("Content-Type", "application/json")
                .send(&body)
                .expect("JSON API call");
            let text = response.body_mut().read_to_string().expect("body");
            assert_eq!(text, r#"{"result":9}"#);
        }
    })
}

fn mcp(runtime: &tokio::runtime::Runtime, url: &str, clients: usize, calls: usize) -> Level {
    let per_client = (calls / clients).max(1);
    runtime.block_on(async {
        let mut sessions = Vec::new();
        for _ in 0..clients {
            let transport = StreamableHttpClientTransport::from_uri(url.to_string());
            sessions.push(().serve(transport).await.expect("MCP session"));
        }
        let sessions: Vec<_> = sessions.into_iter().map(Arc::new).collect();
        let start = Instant::now();
        let tasks: Vec<_> = sessions
            .iter()
            .map(|session| {
                let session = Arc::clone(session);
                tokio::spawn(async move {
                    let mut latencies = Vec::with_capacity(per_client);
                    for _ in 0..per_client {
                        let params = CallToolRequestParams::new("word_count")
                            .with_arguments(arguments().as_object().cloned().unwrap_or_default());
                        let begin = Instant::now();
                        let result = session.call_tool(params).await.expect("MCP call");
                        latencies.push(begin.elapsed());
                        assert_eq!(result.structured_content, Some(json!({"result": 9})));
                    }
                    latencies
                })
            })
            .collect();
        let mut latencies = Vec::new();
        for task in tasks {
            latencies.extend(task.await.expect("client task"));
        }
        let wall = start.elapsed();
        for session in sessions {
            if let Ok(session) = Arc::try_unwrap(session) {
                let _ = session.cancel().await;
            }
        }
        Level { latencies, wall }
    })
}

fn main() {
    // `cargo test --benches` runs this with --bench absent: stay quick there.
    let quick = !std::env::args().any(|a| a == "--bench");
    let calls: usize = std::env::var("SERVE_BENCH_CALLS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(if quick { 64 } else { 2_000 });

    let server_runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("server runtime");
    let client_runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("client runtime");
    let listener = server_runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("loopback port");
    let address = listener.local_addr().expect("address");
    let options = ServeOptions {
        max_sessions: 128,
        ..ServeOptions::default()
    };
    let server = Server::new(Registry::baked().clone(), options.clone());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = server_runtime.spawn(server.serve_http(listener, async {
        let _ = stopped.await;
    }));
    let json_url = format!("http://{address}/v1/functions/word_count");
    let mcp_url = format!("http://{address}/mcp");

    println!(
        "serve: word_count round trips, {calls} calls per level, server with {} execution threads, 2 runtime workers",
        options.max_concurrent_executions
    );
    println!("| path | clients | P50 | P99 | calls/s | x floor (calls/s) |");
    println!("|---|---|---|---|---|---|");
    for clients in CONCURRENCY {
        let mut floor = direct(clients, calls);
        let mut json = json_api(&json_url, clients, calls);
        let mut over_mcp = mcp(&client_runtime, &mcp_url, clients, calls);
        let floor_rate = floor.per_second();
        for (name, level) in [
            ("direct ToolCaller::call", &mut floor),
            ("JSON API", &mut json),
            ("MCP streamable HTTP", &mut over_mcp),
        ] {
            let p50 = level.percentile(0.5);
            let p99 = level.percentile(0.99);
            let rate = level.per_second();
            println!(
                "| {name} | {clients} | {:.1} us | {:.1} us | {:.0} | {:.1}x slower |",
                p50.as_secs_f64() * 1e6,
                p99.as_secs_f64() * 1e6,
                rate,
                floor_rate / rate
            );
        }
    }
    let _ = stop.send(());
    let _ = server_runtime.block_on(serving);
}
