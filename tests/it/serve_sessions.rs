//! `rlm serve`'s sessions: one cap for MCP and JSON-API sessions, idle expiry, and how
//! a session's end (DELETE /mcp, a stdio client leaving, a dropped connection) stops
//! its executions.

use crate::support;

use std::time::Duration;

use rlm_registry::environment::Limits;
use rlm_registry::serve::ServeOptions;
use serde_json::{Value, json};
use support::serve::*;

/// Long enough that only an interrupt stops a loop within the test's bound.
fn no_time_limit() -> Limits {
    Limits {
        time: Duration::from_secs(3600),
        ..Limits::default()
    }
}

async fn health(server: &TestServer) -> Value {
    request("GET", server.url("/healthz"), None, None).await.1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_and_json_api_sessions_share_one_cap_and_each_protocol_hears_its_own_advice() {
    bounded(async {
        let server = TestServer::start(ServeOptions {
            max_sessions: 2,
            ..options()
        })
        .await;
        let _mcp = open_session(server.url("/mcp")).await;
        let (status, _) = request("POST", server.url("/v1/sessions"), None, None).await;
        assert_eq!(status, 201);
        let health = health(&server).await;
        assert_eq!(
            (
                &health["sessions"],
                &health["mcp_sessions"],
                &health["api_sessions"],
                &health["max_sessions"]
            ),
            (&json!(2), &json!(1), &json!(1), &json!(2))
        );
        let refused = initialize(server.url("/mcp"), &[]).await;
        assert_eq!(refused.status, 503);
        let message = refused.json()["error"]["message"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            message.contains("DELETE /mcp") && message.contains("MCP session"),
            "{message}"
        );
        assert!(!message.contains("/v1/sessions"), "{message}");
        let (status, refused) = request("POST", server.url("/v1/sessions"), None, None).await;
        assert_eq!(status, 503);
        let message = refused["error"].as_str().unwrap();
        assert!(message.contains("DELETE /v1/sessions/ID"), "{message}");
    })
    .await;
}

/// The resident memory of process `pid`, in KiB.
#[cfg(target_os = "linux")]
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_thousand_initializes_leave_at_most_the_cap_live_and_memory_bounded() {
    bounded(async {
        let mut command = support::cli::rlm_process();
        command
            .args(["serve", "--http", "127.0.0.1:0", "--max-sessions", "4"])
            .args(["--path", "tests/fixtures/serve"]);
        let mut served = ServedProcess::spawn(command).await;
        let (pid, address) = (served.pid, served.address.clone());
        let url = format!("http://{address}/mcp");
        // Warm up (the first requests allocate the runtime's buffers), then measure.
        for _ in 0..20 {
            initialize(url.clone(), &[]).await;
        }
        let baseline = rss_kib(pid);
        let mut statuses = std::collections::BTreeMap::<u16, usize>::new();
        for _ in 0..40 {
            let batch: Vec<_> = (0..50).map(|_| initialize(url.clone(), &[])).collect();
            for reply in futures_join(batch).await {
                *statuses.entry(reply.status).or_default() += 1;
            }
        }
        let grown = rss_kib(pid).saturating_sub(baseline);
        assert_eq!(
            statuses.get(&200),
            None,
            "the cap was full from the warm-up: {statuses:?}"
        );
        assert_eq!(statuses.get(&503), Some(&2000), "{statuses:?}");
        let health = request("GET", format!("http://{address}/healthz"), None, None)
            .await
            .1;
        assert_eq!(health["mcp_sessions"], json!(4));
        assert_eq!(health["sessions"], json!(4));
        // Unbounded, 2,000 sessions took about 100 MB; refused ones must cost nothing lasting.
        assert!(
            grown < 16 * 1024,
            "memory grew by {grown} KiB over 2,000 refused initializes"
        );
        served.child.kill().await.unwrap();
    })
    .await;
}

async fn futures_join<T: Send + 'static>(
    futures: Vec<impl std::future::Future<Output = T> + Send + 'static>,
) -> Vec<T> {
    let handles: Vec<_> = futures.into_iter().map(tokio::spawn).collect();
    let mut out = Vec::with_capacity(handles.len());
    for handle in handles {
        out.push(handle.await.unwrap());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_mcp_and_json_api_sessions_expire_and_free_their_slots() {
    bounded(async {
        let server = TestServer::start(ServeOptions {
            idle_timeout: Duration::from_millis(200),
            max_sessions: 2,
            ..options()
        })
        .await;
        let mcp = open_session(server.url("/mcp")).await;
        let kept = call_in(
            server.url("/mcp"),
            &mcp,
            2,
            "run_lua",
            json!({"code": "kept = 1"}),
        )
        .await;
        assert_eq!(kept.status, 200, "{}", kept.body);
        let (status, created) = request("POST", server.url("/v1/sessions"), None, None).await;
        assert_eq!(status, 201);
        let api = created["id"].as_str().unwrap().to_string();
        assert_eq!(server.server.live_sessions(), 2);
        wait_until(|| server.server.live_sessions() == 0 && server.server.live_environments() == 0)
            .await;
        // Both are unknown now: 404 tells an MCP client to initialize again.
        let expired = call_in(
            server.url("/mcp"),
            &mcp,
            3,
            "run_lua",
            json!({"code": "print(kept)"}),
        )
        .await;
        assert_eq!(expired.status, 404, "{}", expired.body);
        let (status, gone) = request(
            "POST",
            server.url(&format!("/v1/sessions/{api}/exec")),
            Some(r#"{"code": "print(1)"}"#),
            None,
        )
        .await;
        assert_eq!(status, 404, "{gone}");
        // The freed slots take new sessions, in fresh environments.
        let fresh = server.mcp().await;
        assert_eq!(text(&run_lua(&fresh, "print(kept)").await), "nil\n");
        let (status, _) = request("POST", server.url("/v1/sessions"), None, None).await;
        assert_eq!(status, 201);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_mcp_mid_call_stops_the_execution_and_frees_the_slot_before_it_answers() {
    bounded(async {
        let server = TestServer::start(ServeOptions {
            max_sessions: 1,
            max_concurrent_executions: 1,
            limits: no_time_limit(),
            ..ServeOptions::default()
        })
        .await;
        let session = open_session(server.url("/mcp")).await;
        let looping = tokio::spawn(call_in(
            server.url("/mcp"),
            &session,
            2,
            "run_lua",
            json!({"code": "while true do end"}),
        ));
        let mut running = 0;
        while running == 0 {
            running = health(&server).await["running_executions"]
                .as_u64()
                .unwrap();
        }
        let mut headers = vec![("Mcp-Session-Id", session.as_str())];
        let ended = send("DELETE", server.url("/mcp"), &headers, None).await;
        assert!(matches!(ended.status, 200 | 204), "{}", ended.body);
        // Freed by the time DELETE answered: a new session fits under the cap of one.
        assert_eq!(server.server.live_sessions(), 0);
        let next = open_session(server.url("/mcp")).await;
        // The loop held the only execution permit: this answers only once it stopped.
        let counted = call_in(
            server.url("/mcp"),
            &next,
            2,
            "word_count",
            json!({"text": "a b c"}),
        )
        .await;
        assert_eq!(
            counted.json()["result"]["structuredContent"],
            json!({"result": 3})
        );
        looping.await.unwrap();
        headers[0].1 = &next;
        send("DELETE", server.url("/mcp"), &headers, None).await;
    })
    .await;
}

/// The grace period of the test below, and a moment well inside it.
const GRACE: Duration = Duration::from_secs(3);
const INSIDE_THE_GRACE: Duration = Duration::from_secs(1);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_connection_keeps_its_call_running_for_the_grace_period_then_stops_it() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    bounded(async {
        let server = TestServer::start(ServeOptions {
            max_concurrent_executions: 1,
            disconnect_grace: GRACE,
            limits: no_time_limit(),
            ..ServeOptions::default()
        })
        .await;
        let session = open_session(server.url("/mcp")).await;
        let body = tool_call(7, "run_lua", json!({"code": "while true do end"}));
        let mut stream = tokio::net::TcpStream::connect(server.address).await.unwrap();
        let head = format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Session-Id: {session}\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut first = [0u8; 64];
        let read = stream.read(&mut first).await.unwrap();
        assert!(String::from_utf8_lossy(&first[..read]).starts_with("HTTP/1.1 200"));
        while health(&server).await["running_executions"] == json!(0) {}
        drop(stream);
        // Still running a while after the drop, within the grace period (the client may
        // resume)...
        tokio::time::sleep(INSIDE_THE_GRACE).await;
        assert_eq!(health(&server).await["running_executions"], json!(1));
        // ...and stopped after it: only an interrupt ends the loop, and it holds the only
        // execution permit, so this call runs only once the loop has stopped.
        let after = call_in(server.url("/mcp"), &session, 8, "run_lua", json!({"code": "print('free')"})).await;
        assert_eq!(after.json()["result"]["content"][0]["text"], json!("free\n"));
        assert_eq!(health(&server).await["running_executions"], json!(0));
    })
    .await;
}

/// Writes one JSON-RPC message to a stdio server.
async fn send_line(stdin: &mut tokio::process::ChildStdin, line: &str) {
    use tokio::io::AsyncWriteExt;
    stdin
        .write_all(format!("{line}\n").as_bytes())
        .await
        .unwrap();
    stdin.flush().await.unwrap();
}

/// The next JSON-RPC message from a stdio server.
async fn next_message(
    stdout: &mut tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
) -> Value {
    let line = stdout
        .next_line()
        .await
        .unwrap()
        .expect("the server still talks");
    serde_json::from_str(&line).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_client_leaving_mid_call_stops_the_execution_at_once() {
    use tokio::io::{AsyncBufReadExt, BufReader};
    bounded(async {
        let mut child = support::cli::rlm_process()
            .args([
                "serve",
                "--path",
                "tests/fixtures/serve",
                "--time-limit",
                "3600",
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        // With logging on, the call's output reaches the client while it runs; the call
        // goes once the level is set (requests are handled concurrently).
        let logging =
            r#"{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"info"}}"#;
        let call = tool_call(
            3,
            "run_lua",
            json!({"code": "print('started') while true do end"}),
        );
        for line in [INITIALIZE, initialized, logging] {
            send_line(&mut stdin, line).await;
        }
        while next_message(&mut stdout).await["id"] != json!(2) {}
        send_line(&mut stdin, &call).await;
        let started = loop {
            let message = next_message(&mut stdout).await;
            if message["method"] == json!("notifications/message") {
                break message;
            }
        };
        assert_eq!(
            started["params"]["data"],
            json!("started\n"),
            "the call is running"
        );
        drop(stdin);
        // The client is gone: the loop is interrupted and the call answers at once (rmcp
        // gives a call that goes on 5 s, then gives up on it without its answer).
        let mut answer = Value::Null;
        while let Some(line) = stdout.next_line().await.unwrap() {
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["id"] == json!(3) {
                answer = message;
            }
        }
        let answered = answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(answered.contains("interrupted"), "{answer}");
        let output = child.wait_with_output().await.unwrap();
        assert!(output.status.success(), "{output:?}");
        let log = String::from_utf8_lossy(&output.stderr);
        assert!(!log.contains("timed out draining"), "{log}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_api_request_whose_connection_drops_stops_its_execution() {
    use tokio::io::AsyncWriteExt;
    bounded(async {
        let server = TestServer::start(ServeOptions {
            limits: no_time_limit(),
            ..ServeOptions::default()
        })
        .await;
        let (_, created) = request("POST", server.url("/v1/sessions"), None, None).await;
        let id = created["id"].as_str().unwrap();
        let body = json!({"code": "while true do end"}).to_string();
        let mut stream = tokio::net::TcpStream::connect(server.address).await.unwrap();
        let head = format!(
            "POST /v1/sessions/{id}/exec HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        while health(&server).await["running_executions"] == json!(0) {}
        drop(stream);
        // Only the interrupt ends this loop: the dropped request stopped it.
        while health(&server).await["running_executions"] != json!(0) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
}

/// Sends `request` on a new connection, reads the start of the answer, and hangs up.
async fn send_then_hang_up(address: std::net::SocketAddr, request: String) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut first = [0u8; 64];
    let read = stream.read(&mut first).await.unwrap();
    String::from_utf8_lossy(&first[..read]).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_whose_client_resumes_within_the_grace_period_runs_to_its_end() {
    bounded(async {
        let server = TestServer::start(ServeOptions {
            disconnect_grace: Duration::from_secs(1),
            limits: no_time_limit(),
            ..ServeOptions::default()
        })
        .await;
        // Two seconds of processor time, so longer than the grace period however loaded
        // the machine; `finished` is set only if it is not interrupted (without the
        // resumption it would be: see the test above).
        let code = "local t = os.clock() while os.clock() - t < 2 do end finished = true";
        let body = tool_call(7, "run_lua", json!({"code": code}));
        let session = open_session(server.url("/mcp")).await;
        let call = format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Session-Id: {session}\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        assert!(send_then_hang_up(server.address, call).await.starts_with("HTTP/1.1 200"));
        // A resumption counts for the calls that began before it: wait for this one's.
        while health(&server).await["running_executions"] == json!(0) {}
        let resume = format!(
            "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\nMcp-Session-Id: {session}\r\nLast-Event-ID: 0\r\n\r\n"
        );
        send_then_hang_up(server.address, resume).await;
        let after = call_in(server.url("/mcp"), &session, 8, "run_lua", json!({"code": "print(finished)"})).await;
        assert_eq!(after.json()["result"]["content"][0]["text"], json!("true\n"), "{}", after.body);
    })
    .await;
}
