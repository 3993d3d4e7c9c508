//! `rlm serve` end to end: rmcp's own client over stdio (the spawned binary) and over
//! streamable HTTP (a server on a loopback port), the JSON API's routes and errors, the
//! token, idle sessions, shutdown, and a bounded load test.

mod support;

use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rlm_registry::Registry;
use rlm_registry::environment::Limits;
use rlm_registry::serve::{ServeOptions, Server};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::oneshot;

/// Every test is bounded: a hang fails instead of stalling CI.
const TEST_TIMEOUT: Duration = Duration::from_secs(60);

/// A time limit short enough that a runaway call ends quickly.
const SHORT_TIME_LIMIT: Duration = Duration::from_millis(400);

type Client = RunningService<RoleClient, ()>;

fn registry() -> Registry {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/serve");
    match Registry::baked().with_paths(&[fixtures]) {
        Ok(registry) => registry,
        Err(error) => panic!("fixture registry: {}", error.render(false)),
    }
}

fn options() -> ServeOptions {
    ServeOptions {
        limits: Limits {
            time: SHORT_TIME_LIMIT,
            ..Limits::default()
        },
        ..ServeOptions::default()
    }
}

/// A server on a loopback port; dropping it shuts the server down.
struct TestServer {
    address: SocketAddr,
    server: Server,
    stop: Option<oneshot::Sender<()>>,
    done: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

impl TestServer {
    async fn start(options: ServeOptions) -> TestServer {
        TestServer::start_on("127.0.0.1:0", options).await
    }

    async fn start_on(bind: &str, options: ServeOptions) -> TestServer {
        TestServer::serving(bind, Server::new(registry(), options)).await
    }

    async fn serving(bind: &str, server: Server) -> TestServer {
        let listener = tokio::net::TcpListener::bind(bind).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (stop, stopped) = oneshot::channel::<()>();
        let done = tokio::spawn(server.clone().serve_http(listener, async {
            let _ = stopped.await;
        }));
        TestServer {
            address: SocketAddr::from(([127, 0, 0, 1], port)),
            server,
            stop: Some(stop),
            done: Some(done),
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.address)
    }

    async fn mcp(&self) -> Client {
        self.mcp_with_token(None).await.unwrap()
    }

    async fn mcp_with_token(&self, token: Option<&str>) -> Result<Client, String> {
        let mut config =
            rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
                self.url("/mcp"),
            );
        config.auth_header = token.map(str::to_string);
        let transport = StreamableHttpClientTransport::from_config(config);
        ().serve(transport).await.map_err(|e| e.to_string())
    }

    async fn stop(mut self) -> std::io::Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.done.take() {
            Some(done) => done.await.unwrap(),
            None => Ok(()),
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

async fn bounded<T>(test: impl Future<Output = T>) -> T {
    tokio::time::timeout(TEST_TIMEOUT, test)
        .await
        .expect("the test finished within its time bound")
}

async fn stdio_client(extra: &[&str]) -> Client {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_rlm"));
    command
        .arg("serve")
        .args(["--path", "tests/fixtures/serve", "--time-limit", "0.4"])
        .args(extra)
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    let transport = TokioChildProcess::new(command).unwrap();
    ().serve(transport).await.unwrap()
}

async fn call(client: &Client, tool: &str, arguments: Value) -> CallToolResult {
    let mut params = CallToolRequestParams::new(tool.to_string());
    if let Value::Object(arguments) = arguments {
        params = params.with_arguments(arguments);
    }
    client
        .call_tool(params)
        .await
        .unwrap_or_else(|e| panic!("{tool}: the call itself failed instead of answering: {e}"))
}

fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|block| block.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("")
}

fn is_error(result: &CallToolResult) -> bool {
    result.is_error == Some(true)
}

async fn run_lua(client: &Client, code: &str) -> CallToolResult {
    call(client, "run_lua", json!({"code": code})).await
}

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
        "invalid arguments for `word_count`: $.text: expected a string, got 3"
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
    bounded(async {
        let server = TestServer::start(ServeOptions {
            max_concurrent_executions: 2,
            ..options()
        })
        .await;
        let hostile = Arc::new(server.mcp().await);
        let other = server.mcp().await;
        let mut floods = tokio::task::JoinSet::new();
        for _ in 0..4 {
            let hostile = Arc::clone(&hostile);
            floods.spawn(async move {
                let result = run_lua(&hostile, "while true do end").await;
                assert!(
                    text(&result).contains("time limit exceeded"),
                    "{}",
                    text(&result)
                );
                Instant::now()
            });
        }
        let answer = async {
            // Let the flood queue up first.
            tokio::time::sleep(SHORT_TIME_LIMIT / 4).await;
            let result = call(&other, "word_count", json!({"text": "a b"})).await;
            assert_eq!(result.structured_content, Some(json!({"result": 2})));
            Instant::now()
        };
        let answered = answer.await;
        let mut flood_done = floods.join_all().await;
        flood_done.sort();
        assert!(
            answered < flood_done[1],
            "the other session answered before the flood's second loop ended"
        );
        other.cancel().await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_mcp_session_environment_is_dropped_after_the_idle_timeout() {
    bounded(async {
        let server = TestServer::start(ServeOptions {
            idle_timeout: Duration::from_millis(200),
            ..options()
        })
        .await;
        let client = server.mcp().await;
        run_lua(&client, "kept = 1").await;
        assert_eq!(server.server.live_sessions(), 1);
        wait_until(|| server.server.live_sessions() == 0).await;
        let expired = run_lua(&client, "print(kept)").await;
        assert!(is_error(&expired));
        assert!(text(&expired).contains("idle"), "{}", text(&expired));
        let fresh = run_lua(&client, "print(kept)").await;
        assert_eq!(text(&fresh), "nil\n", "a fresh environment");
        client.cancel().await.unwrap();
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

async fn wait_until(mut condition: impl FnMut() -> bool) {
    while !condition() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
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

// ---- the JSON API ------------------------------------------------------------------

/// A blocking HTTP request (ureq, off the runtime): status and JSON body.
fn request(
    method: &str,
    url: String,
    body: Option<&str>,
    token: Option<&str>,
) -> impl Future<Output = (u16, Value)> + Send + use<> {
    let method = method.to_string();
    let body = body.map(str::to_string);
    let token = token.map(str::to_string);
    let blocking = tokio::task::spawn_blocking(move || {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let mut builder = ureq::http::Request::builder()
            .method(method.as_str())
            .uri(&url);
        if let Some(token) = token {
            builder = builder.header("Authorization", format!("Bearer {token}"));
        }
        let response = match body {
            Some(body) => agent.run(
                builder
                    .header("Content-Type", "application/json")
                    .body(body)
                    .unwrap(),
            ),
            None => agent.run(builder.body(()).unwrap()),
        }
        .unwrap();
        let status = response.status().as_u16();
        let text = response.into_body().read_to_string().unwrap();
        let json = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        (status, json)
    });
    async move { blocking.await.unwrap() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_api_function_routes_answer_and_explain_errors() {
    bounded(async {
        let server = TestServer::start(options()).await;
        let get = |path: &str| request("GET", server.url(path), None, None);
        let post = |path: &str, body: &str| request("POST", server.url(path), Some(body), None);

        let (status, health) = get("/healthz").await;
        assert_eq!((status, &health["status"]), (200, &json!("ok")));
        assert_eq!(health["functions"], json!(registry().len()));

        let (status, listed) = get("/v1/functions").await;
        assert_eq!(status, 200);
        let functions = listed["functions"].as_array().unwrap();
        let word_count = functions
            .iter()
            .find(|f| f["name"] == "word_count")
            .unwrap();
        assert_eq!(word_count["source"], "registry");
        assert_eq!(word_count["tool"], true);
        assert!(
            functions
                .iter()
                .any(|f| f["name"] == "llm_query" && f["source"] == "builtin")
        );

        let (status, described) = get("/v1/functions/word_count").await;
        assert_eq!(status, 200);
        assert_eq!(described["params"][0]["name"], "text");
        assert_eq!(described["returns"][0]["type"], "integer");
        assert_eq!(described["input_schema"]["required"], json!(["text"]));
        assert!(
            described["doc"]
                .as_str()
                .unwrap()
                .starts_with("--- Counts the words")
        );
        let (status, builtin) = get("/v1/functions/print").await;
        assert_eq!((status, &builtin["source"]), (200, &json!("builtin")));
        let (status, not_tool) = get("/v1/functions/apply_to").await;
        assert_eq!((status, &not_tool["tool"]), (200, &json!(false)));
        let (status, unknown) = get("/v1/functions/word_cont").await;
        assert_eq!(status, 404);
        assert_eq!(
            unknown["error"],
            "unknown function `word_cont` (did you mean `word_count`?)"
        );

        assert_eq!(
            post("/v1/functions/word_count", r#"{"text": "a b c"}"#).await,
            (200, json!({"result": 3}))
        );
        let (status, bad_args) = post("/v1/functions/word_count", r#"{"text": 3}"#).await;
        assert_eq!(status, 400);
        assert_eq!(
            bad_args["error"],
            "invalid arguments for `word_count`: $.text: expected a string, got 3"
        );
        let (status, malformed) = post("/v1/functions/word_count", r#"{"text": "#).await;
        assert_eq!(status, 400);
        assert!(
            malformed["error"]
                .as_str()
                .unwrap()
                .starts_with("malformed JSON body"),
            "{malformed}"
        );
        let (status, not_object) = post("/v1/functions/word_count", "[1]").await;
        assert_eq!(status, 400);
        assert!(
            not_object["error"]
                .as_str()
                .unwrap()
                .contains("expected an object"),
            "{not_object}"
        );
        let (status, unknown) = post("/v1/functions/nope_nope", "{}").await;
        assert_eq!(status, 404);
        assert!(
            unknown["error"]
                .as_str()
                .unwrap()
                .starts_with("unknown function `nope_nope`")
        );
        let (status, builtin) = post("/v1/functions/print", "{}").await;
        assert_eq!(status, 400);
        assert!(
            builtin["error"].as_str().unwrap().contains("built-in"),
            "{builtin}"
        );
        let (status, not_tool) = post("/v1/functions/apply_to", "{}").await;
        assert_eq!(status, 400);
        assert!(
            not_tool["error"]
                .as_str()
                .unwrap()
                .contains("cannot be a tool"),
            "{not_tool}"
        );
        let (status, lua_error) = post("/v1/functions/fail_with", r#"{"message": "nope"}"#).await;
        assert_eq!(
            (status, lua_error),
            (422, json!({"error": "`fail_with` failed: nope"}))
        );
        assert_eq!(
            post("/v1/functions/word_tally", r#"{"text": ""}"#).await,
            (200, json!({"result": {}}))
        );
        let (status, broken) = post("/v1/functions/broken_promise", "{}").await;
        assert_eq!(status, 422);
        assert!(
            broken["error"]
                .as_str()
                .unwrap()
                .contains("does not match the documented return type"),
            "{broken}"
        );
        let (status, limit) = post("/v1/functions/spin_forever", "").await;
        assert_eq!(status, 422);
        assert!(
            limit["error"]
                .as_str()
                .unwrap()
                .contains("time limit exceeded"),
            "{limit}"
        );

        let (status, found) = get("/v1/search?q=count%20words&max_results=1").await;
        assert_eq!(status, 200);
        assert_eq!(found["results"].as_array().unwrap().len(), 1);
        assert_eq!(found["results"][0]["name"], "word_count");
        let (status, missing) = get("/v1/search").await;
        assert_eq!(status, 400);
        assert!(
            missing["error"].as_str().unwrap().contains("`q`"),
            "{missing}"
        );
        let (status, _) = get("/v1/search?q=x&max_results=many").await;
        assert_eq!(status, 400);

        let (status, no_route) = get("/v2/anything").await;
        assert_eq!(status, 404);
        assert!(no_route["error"].is_string());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_api_sessions_keep_state_until_deleted() {
    bounded(async {
        let server = TestServer::start(ServeOptions {
            max_sessions: 2,
            ..options()
        })
        .await;
        let post = |path: &str, body: Option<&str>| request("POST", server.url(path), body, None);

        let (status, created) = post("/v1/sessions", None).await;
        assert_eq!(status, 201);
        let id = created["id"].as_str().unwrap().to_string();
        let exec = format!("/v1/sessions/{id}/exec");
        assert_eq!(
            post(&exec, Some(r#"{"code": "x = 20"}"#)).await,
            (200, json!({"output": ""}))
        );
        assert_eq!(
            post(
                &exec,
                Some(r#"{"code": "print(x + #context)", "context": "ab"}"#)
            )
            .await,
            (200, json!({"output": "22\n"}))
        );
        let (status, failed) =
            post(&exec, Some(r#"{"code": "print('partial') error('bad')"}"#)).await;
        assert_eq!(status, 422);
        assert_eq!(
            failed,
            json!({"error": "input:1: bad", "kind": "lua", "output": "partial\n"})
        );
        let (status, limit) = post(&exec, Some(r#"{"code": "while true do end"}"#)).await;
        assert_eq!((status, &limit["kind"]), (422, &json!("time")));
        let (status, bad_body) = post(&exec, Some(r#"{"cod": "x"}"#)).await;
        assert_eq!(status, 400);
        assert!(
            bad_body["error"]
                .as_str()
                .unwrap()
                .contains("unknown property `cod`"),
            "{bad_body}"
        );
        let (status, _) = post(&exec, Some("{")).await;
        assert_eq!(status, 400);

        let (status, _) = post("/v1/sessions", None).await;
        assert_eq!(status, 201);
        let (status, full) = post("/v1/sessions", None).await;
        assert_eq!(status, 503);
        assert!(
            full["error"]
                .as_str()
                .unwrap()
                .contains("too many live sessions"),
            "{full}"
        );

        let (status, _) = request(
            "DELETE",
            server.url(&format!("/v1/sessions/{id}")),
            None,
            None,
        )
        .await;
        assert_eq!(status, 204);
        let (status, gone) = post(&exec, Some(r#"{"code": "print(x)"}"#)).await;
        assert_eq!(status, 404);
        assert!(
            gone["error"].as_str().unwrap().contains("no session"),
            "{gone}"
        );
        let (status, _) = request(
            "DELETE",
            server.url(&format!("/v1/sessions/{id}")),
            None,
            None,
        )
        .await;
        assert_eq!(status, 404);
        let (status, _) = post("/v1/sessions", None).await;
        assert_eq!(status, 201, "a deleted session frees its place");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_api_refuses_oversized_bodies_and_foreign_hosts() {
    bounded(async {
        let server = TestServer::start(ServeOptions {
            body_limit_bytes: 1024,
            ..options()
        })
        .await;
        let big = format!(r#"{{"text": "{}"}}"#, "a ".repeat(2048));
        let (status, too_big) = request(
            "POST",
            server.url("/v1/functions/word_count"),
            Some(&big),
            None,
        )
        .await;
        assert_eq!(status, 413);
        assert!(too_big["error"].is_string(), "{too_big}");
        let (status, ok) = request(
            "POST",
            server.url("/v1/functions/word_count"),
            Some(r#"{"text": "a"}"#),
            None,
        )
        .await;
        assert_eq!((status, ok), (200, json!({"result": 1})));

        // A page on another origin reaching a loopback server through DNS rebinding.
        let url = server.url("/healthz");
        let status = tokio::task::spawn_blocking(move || {
            let agent: ureq::Agent = ureq::Agent::config_builder()
                .http_status_as_error(false)
                .build()
                .into();
            agent
                .get(&url)
                .header("Host", "attacker.example")
                .call()
                .unwrap()
                .status()
                .as_u16()
        })
        .await
        .unwrap();
        assert_eq!(status, 403);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_loopback_bind_requires_the_token_on_every_route() {
    bounded(async {
        let token = "test-token-0123456789";
        let server = TestServer::start_on(
            "0.0.0.0:0",
            ServeOptions {
                token: Some(token.to_string()),
                ..options()
            },
        )
        .await;
        for (method, path, body) in [
            ("GET", "/healthz", None),
            ("GET", "/v1/functions", None),
            ("GET", "/v1/functions/word_count", None),
            ("POST", "/v1/functions/word_count", Some(r#"{"text": "a"}"#)),
            ("GET", "/v1/search?q=count", None),
            ("POST", "/v1/sessions", None),
            (
                "POST",
                "/v1/sessions/x/exec",
                Some(r#"{"code": "print(1)"}"#),
            ),
            ("DELETE", "/v1/sessions/x", None),
            ("GET", "/v1/providers", None),
            ("PUT", "/v1/providers/core/anything", Some("{}")),
            (
                "POST",
                "/mcp",
                Some(r#"{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}"#),
            ),
        ] {
            let (status, refused) = request(method, server.url(path), body, None).await;
            assert_eq!(status, 401, "{method} {path} without a token");
            assert!(refused["error"].as_str().unwrap().contains("bearer token"));
            let (status, _) = request(method, server.url(path), body, Some("wrong-token")).await;
            assert_eq!(status, 401, "{method} {path} with a wrong token");
        }
        let (status, answered) = request(
            "POST",
            server.url("/v1/functions/word_count"),
            Some(r#"{"text": "a b"}"#),
            Some(token),
        )
        .await;
        assert_eq!((status, answered), (200, json!({"result": 2})));

        assert!(
            server.mcp_with_token(None).await.is_err(),
            "MCP without the token is refused"
        );
        let client = server.mcp_with_token(Some(token)).await.unwrap();
        let result = call(&client, "word_count", json!({"text": "a b c"})).await;
        assert_eq!(result.structured_content, Some(json!({"result": 3})));
        client.cancel().await.unwrap();

        let listener = tokio::net::TcpListener::bind("0.0.0.0:0").await.unwrap();
        let refused = Server::new(registry(), options())
            .serve_http(listener, std::future::ready(()))
            .await
            .unwrap_err();
        assert_eq!(refused.kind(), std::io::ErrorKind::PermissionDenied);
        assert!(refused.to_string().contains("RLM_SERVE_TOKEN"), "{refused}");
    })
    .await;
}

// ---- the binary: usage and shutdown ------------------------------------------------

#[test]
fn serve_refuses_a_public_address_without_a_token() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_rlm"))
        .args(["serve", "--http", "0.0.0.0:0"])
        .env_remove("RLM_SERVE_TOKEN")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("needs --token or RLM_SERVE_TOKEN"),
        "{stderr}"
    );
    assert!(output.stdout.is_empty());
}

#[test]
fn serve_rejects_zero_caps_and_bad_addresses_as_usage_errors() {
    for args in [
        &["serve", "--max-sessions", "0"][..],
        &["serve", "--max-concurrent", "0"],
        &["serve", "--time-limit", "0"],
        &["serve", "--http", "not-an-address"],
    ] {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_rlm"))
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(output.stdout.is_empty(), "{args:?}: nothing on stdout");
        assert!(!output.stderr.is_empty(), "{args:?}: a message on stderr");
    }
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_the_running_call_then_exits_zero() {
    use tokio::io::{AsyncBufReadExt, BufReader};
    bounded(async {
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_rlm"))
            .args(["serve", "--http", "127.0.0.1:0", "--time-limit", "5"])
            .stderr(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let address = loop {
            let line = lines.next_line().await.unwrap().expect("the server says where it listens");
            if let Some(rest) = line.split("http://").nth(1) {
                break rest.split("/mcp").next().unwrap().to_string();
            }
        };
        let base = format!("http://{address}");
        let (_, created) = request("POST", format!("{base}/v1/sessions"), None, None).await;
        let exec = format!("{base}/v1/sessions/{}/exec", created["id"].as_str().unwrap());
        // Busy for a while: the signal arrives while it runs.
        let slow = tokio::spawn(request(
            "POST",
            exec,
            Some(r#"{"code": "local t = os.clock() while os.clock() - t < 0.5 do end print('finished')"}"#),
            None,
        ));
        tokio::time::sleep(Duration::from_millis(150)).await;
        let pid = child.id().unwrap().to_string();
        let killed = std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(killed.success());
        assert_eq!(slow.await.unwrap(), (200, json!({"output": "finished\n"})));
        let status = child.wait().await.unwrap();
        assert_eq!(status.code(), Some(0));
    })
    .await;
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_ends_a_stdio_server_with_exit_zero() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    bounded(async {
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_rlm"))
            .arg("serve")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        // A ping answered means the server is up (and its signal handlers installed).
        let mut stdin = child.stdin.take().unwrap();
        let initialize = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
        stdin.write_all(format!("{initialize}\n").as_bytes()).await.unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let answer: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
        assert_eq!(answer["result"]["serverInfo"]["name"], "rlm");
        let pid = child.id().unwrap().to_string();
        assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
        assert_eq!(child.wait().await.unwrap().code(), Some(0));
        drop(stdin);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn providers_functions_are_served_and_each_session_has_its_own_store() {
    use rlm_registry::providers::{HostFunction, Providers};
    bounded(async {
        let mut providers = Providers::builtin();
        providers
            .register_function(
                "shop",
                HostFunction::typed(
                    "price_of",
                    "--- The price of an item, in cents.\n---@param item string\n---@return integer",
                    |_, (item,): (String,)| Ok::<_, String>(item.len() as i64 * 10),
                ),
            )
            .unwrap();
        let options = ServeOptions {
            session_store: Some(1024),
            ..options()
        };
        let server = Server::with_providers(registry(), Arc::new(providers), options);
        let server = TestServer::serving("127.0.0.1:0", server).await;
        let get = |path: &str| request("GET", server.url(path), None, None);
        let post = |path: &str, body: Option<&str>| request("POST", server.url(path), body, None);

        // The host function is a tool over MCP and the JSON API.
        let client = server.mcp().await;
        let tools = client.list_all_tools().await.unwrap();
        assert!(tools.iter().any(|t| t.name == "price_of"));
        assert!(!tools.iter().any(|t| t.name == "llm_query"), "built-ins run in Lua only");
        let result = call(&client, "price_of", json!({"item": "pear"})).await;
        assert!(!is_error(&result), "{}", text(&result));
        assert_eq!(
            post("/v1/functions/price_of", Some(r#"{"item": "apple"}"#)).await,
            (200, json!({"result": 50}))
        );
        let (status, described) = get("/v1/functions/price_of").await;
        assert_eq!((status, &described["source"]), (200, &json!("provider")));
        assert_eq!(described["provider"], "shop");

        // GET /v1/providers lists the built-in providers and the host's.
        let (status, listed) = get("/v1/providers").await;
        assert_eq!(status, 200);
        let names: Vec<&str> = listed["providers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["core", "re", "llm", "agent", "user", "shop"]);
        let (status, shop) = get("/v1/providers/shop").await;
        assert_eq!((status, &shop["functions"][0]["name"]), (200, &json!("price_of")));
        assert_eq!(get("/v1/providers/nope").await.0, 404);

        // Each session has its own store: one never sees another's values.
        let (_, a) = post("/v1/sessions", None).await;
        let (_, b) = post("/v1/sessions", None).await;
        let exec = |id: &Value, code: &str| {
            let path = format!("/v1/sessions/{}/exec", id["id"].as_str().unwrap());
            post(&path, Some(&json!({"code": code}).to_string()))
                .into_future()
        };
        assert_eq!(
            exec(&a, "store_set('k', 'from a') print(store_get('k'), price_of('ab'))").await,
            (200, json!({"output": "from a\t20\n"}))
        );
        assert_eq!(
            exec(&b, "print(store_get('k'))").await,
            (200, json!({"output": "nil\n"}))
        );
        server.stop().await.unwrap();
    })
    .await;
}

/// A shop whose prices the host manages over HTTP and the model reads through a function.
struct Shop(Arc<std::sync::Mutex<std::collections::BTreeMap<String, i64>>>);

impl rlm_registry::providers::Provider for Shop {
    fn name(&self) -> &str {
        "shop"
    }

    fn description(&self) -> &str {
        "Prices, managed by the host."
    }

    fn functions(&self) -> Vec<rlm_registry::providers::HostFunction> {
        let prices = Arc::clone(&self.0);
        vec![rlm_registry::providers::HostFunction::typed(
            "price_of",
            "--- The price of an item, in cents.\n---@param item string\n---@return integer",
            move |_, (item,): (String,)| {
                let prices = prices.lock().unwrap();
                prices
                    .get(&item)
                    .copied()
                    .ok_or(format!("no price for {item}"))
            },
        )]
    }

    fn routes(&self) -> Vec<rlm_registry::providers::Route> {
        use rlm_registry::providers::{Method, Route, RouteResponse};
        let (all, set, remove) = (
            Arc::clone(&self.0),
            Arc::clone(&self.0),
            Arc::clone(&self.0),
        );
        vec![
            Route::new(
                Method::Get,
                "/prices",
                "Every price at least ?min.",
                move |r| {
                    let min: i64 = r.query.get("min").and_then(|m| m.parse().ok()).unwrap_or(0);
                    let prices = all.lock().unwrap();
                    let kept: serde_json::Map<String, Value> = prices
                        .iter()
                        .filter(|(_, cents)| **cents >= min)
                        .map(|(item, cents)| (item.clone(), json!(cents)))
                        .collect();
                    RouteResponse::ok(Value::Object(kept))
                },
            ),
            Route::new(
                Method::Put,
                "/prices/{item}",
                "Sets a price: {\"cents\": n}.",
                move |r| {
                    let Some(cents) = r.body["cents"].as_i64() else {
                        return RouteResponse::error(400, "the body needs an integer `cents`");
                    };
                    set.lock().unwrap().insert(r.params["item"].clone(), cents);
                    RouteResponse::ok(json!({"item": r.params["item"], "cents": cents}))
                },
            ),
            Route::new(
                Method::Delete,
                "/prices/{item}",
                "Removes a price.",
                move |r| match remove.lock().unwrap().remove(&r.params["item"]) {
                    Some(_) => RouteResponse::ok(json!({"removed": r.params["item"]})),
                    None => RouteResponse::error(404, "no such item"),
                },
            ),
            Route::new(Method::Get, "/boom", "A handler that panics.", |_| {
                panic!("a bug in the host's handler")
            }),
        ]
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_management_routes_are_served_and_change_what_functions_see() {
    use rlm_registry::providers::Providers;
    bounded(async {
        let mut providers = Providers::builtin();
        providers.register(Shop(Arc::default())).unwrap();
        let server = Server::with_providers(registry(), Arc::new(providers), options());
        let server = TestServer::serving("127.0.0.1:0", server).await;
        let send = |method: &str, path: &str, body: Option<&str>| {
            request(method, server.url(path), body, None)
        };

        // The listing shows the routes under their full paths.
        let (status, shop) = send("GET", "/v1/providers/shop", None).await;
        assert_eq!(status, 200);
        assert_eq!(
            shop["routes"][1],
            json!({"method": "PUT", "path": "/v1/providers/shop/prices/{item}", "description": "Sets a price: {\"cents\": n}."})
        );

        // The host sets a price; the function the model calls sees it.
        let tea = "/v1/providers/shop/prices/tea";
        assert_eq!(
            send("PUT", tea, Some(r#"{"cents": 250}"#)).await,
            (200, json!({"item": "tea", "cents": 250}))
        );
        send("PUT", "/v1/providers/shop/prices/jam", Some(r#"{"cents": 400}"#)).await;
        assert_eq!(
            send("POST", "/v1/functions/price_of", Some(r#"{"item": "tea"}"#)).await,
            (200, json!({"result": 250}))
        );
        assert_eq!(
            send("GET", "/v1/providers/shop/prices?min=300", None).await,
            (200, json!({"jam": 400}))
        );
        assert_eq!(send("DELETE", tea, None).await.0, 200);
        assert_eq!(
            send("POST", "/v1/functions/price_of", Some(r#"{"item": "tea"}"#)).await.0,
            422
        );

        // Errors: the handler's own, bad JSON, wrong method, no such route or provider,
        // and a panicking handler, which leaves the server answering.
        let (status, missing) = send("DELETE", tea, None).await;
        assert_eq!((status, missing["error"].as_str()), (404, Some("no such item")));
        assert_eq!(send("PUT", tea, Some(r#"{"cents": "x"}"#)).await.0, 400);
        let (status, malformed) = send("PUT", tea, Some("{cents")).await;
        assert_eq!(status, 400);
        assert!(malformed["error"].as_str().unwrap().contains("malformed JSON"));
        let (status, wrong) = send("POST", tea, Some("{}")).await;
        assert_eq!(status, 405);
        assert!(wrong["error"].as_str().unwrap().contains("PUT, DELETE"), "{wrong}");
        assert_eq!(send("GET", "/v1/providers/shop/nope", None).await.0, 404);
        assert_eq!(send("GET", "/v1/providers/nope/prices", None).await.0, 404);
        let (status, panicked) = send("GET", "/v1/providers/shop/boom", None).await;
        assert_eq!(status, 500);
        assert!(panicked["error"].as_str().unwrap().contains("panicked"));
        assert_eq!(send("GET", "/healthz", None).await.0, 200);
        server.stop().await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llm_query_calls_a_model_only_when_serve_is_given_one() {
    use support::openai_server::{Behavior, OpenAiServer};
    bounded(async {
        let model = OpenAiServer::always(Behavior::reply("from the model"));
        let base_url = model.base_url();
        let served = stdio_client(&["--base-url", &base_url, "--model", "tiny"]).await;
        let result = run_lua(&served, "print(llm_query('hi'))").await;
        assert!(!is_error(&result), "{}", text(&result));
        assert_eq!(text(&result), "from the model\n");
        assert_eq!(model.requests()[0].json().unwrap()["model"], "tiny");
        served.cancel().await.unwrap();

        let unserved = stdio_client(&[]).await;
        let result = run_lua(&unserved, "print(llm_query('hi'))").await;
        assert!(is_error(&result));
        assert!(text(&result).contains("llm_query"), "{}", text(&result));
        assert_eq!(
            model.requests().len(),
            1,
            "no request without --model/--base-url"
        );
        unserved.cancel().await.unwrap();
    })
    .await;
}
