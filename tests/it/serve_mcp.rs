//! `rlm serve` over MCP end to end: rmcp's own client over stdio (the spawned binary)
//! and over streamable HTTP, the same behaviour on both, progress, cancellation, and a
//! bounded load test.

use crate::support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use rlm_registry::environment::Limits;
use rlm_registry::serve::ServeOptions;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use support::serve::*;

// ---- MCP behaviour shared by both transports -------------------------------------

async fn lists_tools_with_schemas(client: &Client) {
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    for expected in [
        "word_count",
        "run_lua",
        "search_functions",
        "fail_with",
        "pair_of",
    ] {
        assert!(names.contains(&expected), "{expected} in {names:?}");
    }
    assert!(
        !names.contains(&"apply_to"),
        "a function taking a function is not a tool"
    );
    let word_count = tools.iter().find(|t| t.name == "word_count").unwrap();
    assert_eq!(word_count.input_schema["required"], json!(["text"]));
    assert_eq!(
        word_count.output_schema.as_ref().unwrap()["properties"]["result"],
        json!({"type": "integer"})
    );
    let pair = tools.iter().find(|t| t.name == "pair_of").unwrap();
    assert!(
        pair.output_schema.is_none(),
        "two return values have no outputSchema"
    );
}

async fn calls_a_registry_function(client: &Client) {
    let result = call(client, "word_count", json!({"text": "one two three"})).await;
    assert!(!is_error(&result), "{}", text(&result));
    assert_eq!(result.structured_content, Some(json!({"result": 3})));
    assert_eq!(
        serde_json::from_str::<Value>(&text(&result)).unwrap(),
        json!({"result": 3})
    );

    let tally = call(client, "word_tally", json!({"text": ""})).await;
    assert_eq!(
        tally.structured_content,
        Some(json!({"result": {}})),
        "Lua's empty table as the documented object"
    );

    let pair = call(client, "pair_of", json!({"a": "x", "b": "y"})).await;
    assert!(!is_error(&pair));
    assert_eq!(
        serde_json::from_str::<Value>(&text(&pair)).unwrap(),
        json!(["x", "y"])
    );
}

async fn refuses_bad_input_with_tool_errors(client: &Client) {
    let wrong_type = call(client, "word_count", json!({"text": 3})).await;
    assert!(is_error(&wrong_type));
    assert_eq!(
        text(&wrong_type),
        "invalid arguments for `word_count`: $.text: expected a string, or an object or an array, got 3"
    );
    let missing = call(client, "word_count", json!({})).await;
    assert!(is_error(&missing));
    assert!(
        text(&missing).contains("missing required property `text`"),
        "{}",
        text(&missing)
    );
    let extra = call(client, "word_count", json!({"text": "a", "mode": 1})).await;
    assert!(is_error(&extra));
    assert!(
        text(&extra).contains("unknown property `mode`"),
        "{}",
        text(&extra)
    );

    let unknown = call(client, "word_cont", json!({"text": "a"})).await;
    assert!(is_error(&unknown));
    assert_eq!(
        text(&unknown),
        "unknown function `word_cont` (did you mean `word_count`?)"
    );

    let lua_error = call(client, "fail_with", json!({"message": "no luck"})).await;
    assert!(is_error(&lua_error));
    assert_eq!(text(&lua_error), "`fail_with` failed: no luck");

    let broken = call(client, "broken_promise", json!({})).await;
    assert!(is_error(&broken));
    assert!(
        text(&broken).contains("does not match the documented return type"),
        "{}",
        text(&broken)
    );

    let limit = call(client, "spin_forever", json!({})).await;
    assert!(is_error(&limit));
    assert!(
        text(&limit).contains("time limit exceeded"),
        "{}",
        text(&limit)
    );

    let bad_run = call(client, "run_lua", json!({"source": "print(1)"})).await;
    assert!(is_error(&bad_run));
    assert!(
        text(&bad_run).contains("unknown property `source`"),
        "{}",
        text(&bad_run)
    );
}

async fn run_lua_keeps_state(client: &Client) {
    let first = run_lua(client, "counter = 41").await;
    assert!(!is_error(&first), "{}", text(&first));
    let second = run_lua(client, "counter = counter + 1 print('counter', counter)").await;
    assert_eq!(text(&second), "counter\t42\n");
    let with_context = call(
        client,
        "run_lua",
        json!({"code": "print(line_count(context), counter)", "context": "a\nb\n"}),
    )
    .await;
    assert_eq!(text(&with_context), "2\t42\n");
    let error = run_lua(client, "print('before') error('boom')").await;
    assert!(is_error(&error));
    assert_eq!(text(&error), "before\ninput:1: boom");
    let after = run_lua(client, "print(counter)").await;
    assert_eq!(text(&after), "42\n", "an error loses no state");
}

async fn refuses_sandbox_escapes(client: &Client) {
    for escape in [
        "io.open('/etc/passwd')",
        "os.execute('echo escaped')",
        "require('os')",
        "debug.getregistry()",
        "load(string.dump(print))",
        "getmetatable('').__index = {}",
    ] {
        let result = run_lua(client, escape).await;
        assert!(
            is_error(&result),
            "`{escape}` was refused, got {}",
            text(&result)
        );
    }
    let still_there = run_lua(client, "print(type(os.exit), type(io), type(os.time))").await;
    assert_eq!(text(&still_there), "nil\tnil\tfunction\n");
}

async fn runaway_code_is_a_tool_error_while_another_session_answers(a: &Client, b: &Client) {
    let started = Instant::now();
    let runaway = async {
        let result = run_lua(a, "while true do end").await;
        (result, Instant::now())
    };
    let other = async {
        let result = call(b, "word_count", json!({"text": "still answering"})).await;
        (result, Instant::now())
    };
    let ((runaway, runaway_done), (other, other_done)) = tokio::join!(runaway, other);
    assert!(is_error(&runaway));
    assert!(
        text(&runaway).contains("time limit exceeded"),
        "{}",
        text(&runaway)
    );
    assert_eq!(other.structured_content, Some(json!({"result": 2})));
    assert!(
        other_done < runaway_done,
        "the other session answered while the loop ran ({:?} vs {:?})",
        other_done - started,
        runaway_done - started
    );
    let recovered = run_lua(a, "print('alive')").await;
    assert_eq!(text(&recovered), "alive\n");
}

async fn searches_functions(client: &Client) {
    let found = call(
        client,
        "search_functions",
        json!({"query": "count the words", "max_results": 2}),
    )
    .await;
    assert!(!is_error(&found), "{}", text(&found));
    let results = &found.structured_content.as_ref().unwrap()["results"];
    assert_eq!(results.as_array().unwrap().len(), 2);
    assert_eq!(results[0]["name"], "word_count");
    let bad = call(
        client,
        "search_functions",
        json!({"max_results": 0, "query": "x"}),
    )
    .await;
    assert!(is_error(&bad));
    assert!(text(&bad).contains("$.max_results"), "{}", text(&bad));
}

// ---- stdio -------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_serves_tools_run_lua_and_tool_errors() {
    bounded(async {
        let client = stdio_client(&[]).await;
        let info = client.peer_info().unwrap();
        assert_eq!(info.server_info.as_ref().unwrap().name, "rlm");
        lists_tools_with_schemas(&client).await;
        calls_a_registry_function(&client).await;
        refuses_bad_input_with_tool_errors(&client).await;
        run_lua_keeps_state(&client).await;
        refuses_sandbox_escapes(&client).await;
        searches_functions(&client).await;
        client.cancel().await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_processes_are_separate_sessions_and_a_loop_blocks_neither() {
    bounded(async {
        let a = stdio_client(&[]).await;
        let b = stdio_client(&[]).await;
        run_lua(&a, "secret = 'a'").await;
        assert_eq!(text(&run_lua(&b, "print(secret)").await), "nil\n");
        runaway_code_is_a_tool_error_while_another_session_answers(&a, &b).await;
        a.cancel().await.unwrap();
        b.cancel().await.unwrap();
    })
    .await;
}

// ---- streamable HTTP ---------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_mcp_serves_tools_run_lua_and_tool_errors() {
    bounded(async {
        let server = TestServer::start(options()).await;
        let client = server.mcp().await;
        lists_tools_with_schemas(&client).await;
        calls_a_registry_function(&client).await;
        refuses_bad_input_with_tool_errors(&client).await;
        run_lua_keeps_state(&client).await;
        refuses_sandbox_escapes(&client).await;
        searches_functions(&client).await;
        client.cancel().await.unwrap();
        server.stop().await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_mcp_sessions_are_isolated_end_with_their_environment_and_a_loop_blocks_no_other() {
    bounded(async {
        let server = TestServer::start(options()).await;
        let a = server.mcp().await;
        let b = server.mcp().await;
        run_lua(&a, "secret = 'only a'").await;
        run_lua(&b, "secret = 'only b'").await;
        assert_eq!(text(&run_lua(&a, "print(secret)").await), "only a\n");
        assert_eq!(text(&run_lua(&b, "print(secret)").await), "only b\n");
        assert_eq!(server.server.live_sessions(), 2);
        runaway_code_is_a_tool_error_while_another_session_answers(&a, &b).await;
        a.cancel().await.unwrap();
        // Ending an MCP session drops its environment.
        wait_until(|| server.server.live_sessions() == 1).await;
        b.cancel().await.unwrap();
        wait_until(|| server.server.live_sessions() == 0).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_flooding_runaway_calls_holds_one_execution_slot() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    bounded(async {
        let server = TestServer::start(ServeOptions {
            max_concurrent_executions: 2,
            limits: Limits {
                time: Duration::from_secs(3600),
                ..Limits::default()
            },
            ..options()
        })
        .await;
        let hostile = open_session(server.url("/mcp")).await;
        // Four endless loops, each call taken in by the server (its answer's stream
        // opened) before the next; the connections stay open.
        let mut flood = Vec::new();
        for id in 2..6 {
            let body = tool_call(id, "run_lua", json!({"code": "while true do end"}));
            let mut stream = tokio::net::TcpStream::connect(server.address).await.unwrap();
            let head = format!(
                "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Session-Id: {hostile}\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            stream.write_all(head.as_bytes()).await.unwrap();
            let mut first = [0u8; 16];
            let read = stream.read(&mut first).await.unwrap();
            assert!(String::from_utf8_lossy(&first[..read]).starts_with("HTTP/1.1 200"));
            flood.push(stream);
        }
        let health = || async { request("GET", server.url("/healthz"), None, None).await.1 };
        while health().await["running_executions"] != json!(1) {}
        // The loops never end by themselves: had the flood taken the second slot too,
        // this call would wait for ever (and the test's time bound would fail it).
        let other = server.mcp().await;
        let result = call(&other, "word_count", json!({"text": "a b"})).await;
        assert_eq!(result.structured_content, Some(json!({"result": 2})));
        assert_eq!(health().await["running_executions"], json!(1));
        other.cancel().await.unwrap();
        // Ending the hostile session stops its loops.
        let headers = [("Mcp-Session-Id", hostile.as_str())];
        send("DELETE", server.url("/mcp"), &headers, None).await;
        while health().await["running_executions"] != json!(0) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        drop(flood);
    })
    .await;
}

/// A client that counts the progress notifications it receives.
#[derive(Clone, Default)]
struct ProgressCounter(Arc<std::sync::atomic::AtomicUsize>);

impl rmcp::ClientHandler for ProgressCounter {
    async fn on_progress(
        &self,
        _params: rmcp::model::ProgressNotificationParam,
        _context: rmcp::service::NotificationContext<RoleClient>,
    ) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_call_sends_progress_notifications() {
    bounded(async {
        let server = TestServer::start(ServeOptions {
            progress_interval: Duration::from_millis(20),
            limits: Limits {
                time: Duration::from_secs(30),
                ..Limits::default()
            },
            ..ServeOptions::default()
        })
        .await;
        let counter = ProgressCounter::default();
        let transport = StreamableHttpClientTransport::from_uri(server.url("/mcp"));
        let client = counter.clone().serve(transport).await.unwrap();
        // rmcp's client puts a progressToken on every request.
        let params = CallToolRequestParams::new("run_lua").with_arguments(
            json!({"code": "local t = os.clock() while os.clock() - t < 0.3 do end print('done')"})
                .as_object()
                .cloned()
                .unwrap(),
        );
        let result = client.call_tool(params).await.unwrap();
        assert_eq!(text(&result), "done\n");
        assert!(
            counter.0.load(std::sync::atomic::Ordering::SeqCst) >= 1,
            "at least one progress notification during a 0.3 s call"
        );
        let quick = client
            .call_tool(
                CallToolRequestParams::new("word_count")
                    .with_arguments(json!({"text": "a"}).as_object().cloned().unwrap()),
            )
            .await
            .unwrap();
        assert!(!is_error(&quick));
        client.cancel().await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_call_interrupts_its_execution() {
    bounded(async {
        // No time limit would stop this loop within the test's bound: only the interrupt.
        let server = TestServer::start(ServeOptions {
            limits: Limits {
                time: Duration::from_secs(3600),
                ..Limits::default()
            },
            ..ServeOptions::default()
        })
        .await;
        let client = server.mcp().await;
        run_lua(&client, "kept = 'yes'").await;
        // Dropping the request's future sends notifications/cancelled.
        let abandoned = tokio::time::timeout(
            Duration::from_millis(200),
            run_lua(&client, "while true do end"),
        )
        .await;
        assert!(abandoned.is_err(), "the loop was still running");
        // The session's thread runs one job at a time: this answers only once the loop
        // has been interrupted.
        let after = run_lua(&client, "print(kept)").await;
        assert_eq!(text(&after), "yes\n");
        client.cancel().await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_concurrent_mcp_sessions_lose_nothing_and_answer_in_order() {
    const SESSIONS: usize = 50;
    const CALLS: usize = 4;
    bounded(async {
        let server = TestServer::start(options()).await;
        let server = Arc::new(server);
        let mut tasks = Vec::new();
        for session in 0..SESSIONS {
            let server = Arc::clone(&server);
            tasks.push(tokio::spawn(async move {
                let client = server.mcp().await;
                run_lua(&client, &format!("me = {session}; n = 0")).await;
                let mut outputs = Vec::new();
                for _ in 0..CALLS {
                    let result = run_lua(&client, "n = n + 1 print(me, n)").await;
                    assert!(!is_error(&result), "{}", text(&result));
                    outputs.push(text(&result));
                    let counted = call(&client, "word_count", json!({"text": "a b"})).await;
                    assert_eq!(counted.structured_content, Some(json!({"result": 2})));
                }
                client.cancel().await.unwrap();
                (session, outputs)
            }));
        }
        for task in tasks {
            let (session, outputs) = task.await.unwrap();
            let expected: Vec<String> = (1..=CALLS).map(|n| format!("{session}\t{n}\n")).collect();
            assert_eq!(
                outputs, expected,
                "session {session}'s results, complete and in order"
            );
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_session_environment_idle_past_the_timeout_is_dropped_and_the_next_call_says_so() {
    bounded(async {
        let client = stdio_client(&["--idle-timeout", "1"]).await;
        run_lua(&client, "kept = 1").await;
        // Well past the timeout and the reaper's next look (a quarter of it).
        tokio::time::sleep(Duration::from_secs(3)).await;
        let expired = run_lua(&client, "print(kept)").await;
        assert!(is_error(&expired));
        assert!(text(&expired).contains("idle"), "{}", text(&expired));
        let fresh = run_lua(&client, "print(kept)").await;
        assert_eq!(text(&fresh), "nil\n", "a fresh environment");
        client.cancel().await.unwrap();
    })
    .await;
}
