//! What the `rlm serve` tests share: a server on a loopback port, rmcp's client over
//! stdio and streamable HTTP, and blocking HTTP requests for the JSON API.

use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

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
pub const TEST_TIMEOUT: Duration = Duration::from_secs(60);

/// A time limit short enough that a runaway call ends quickly.
pub const SHORT_TIME_LIMIT: Duration = Duration::from_millis(400);

pub type Client = RunningService<RoleClient, ()>;

pub fn registry() -> Registry {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/serve");
    match Registry::baked().with_paths(&[fixtures]) {
        Ok(registry) => registry,
        Err(error) => panic!("fixture registry: {}", error.render(false)),
    }
}

pub fn options() -> ServeOptions {
    ServeOptions {
        limits: Limits {
            time: SHORT_TIME_LIMIT,
            ..Limits::default()
        },
        ..ServeOptions::default()
    }
}

/// A server on a loopback port; dropping it shuts the server down.
pub struct TestServer {
    pub address: SocketAddr,
    pub server: Server,
    stop: Option<oneshot::Sender<()>>,
    done: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

impl TestServer {
    pub async fn start(options: ServeOptions) -> TestServer {
        TestServer::start_on("127.0.0.1:0", options).await
    }

    pub async fn start_on(bind: &str, options: ServeOptions) -> TestServer {
        TestServer::serving(bind, Server::new(registry(), options)).await
    }

    pub async fn serving(bind: &str, server: Server) -> TestServer {
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

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.address)
    }

    pub async fn mcp(&self) -> Client {
        self.mcp_with_token(None).await.unwrap()
    }

    pub async fn mcp_with_token(&self, token: Option<&str>) -> Result<Client, String> {
        let mut config =
            rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
                self.url("/mcp"),
            );
        config.auth_header = token.map(str::to_string);
        let transport = StreamableHttpClientTransport::from_config(config);
        ().serve(transport).await.map_err(|e| e.to_string())
    }

    pub async fn stop(mut self) -> std::io::Result<()> {
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

pub async fn bounded<T>(test: impl Future<Output = T>) -> T {
    tokio::time::timeout(TEST_TIMEOUT, test)
        .await
        .expect("the test finished within its time bound")
}

pub async fn stdio_client(extra: &[&str]) -> Client {
    let mut command = super::cli::rlm_process();
    command
        .arg("serve")
        .args(["--path", "tests/fixtures/serve", "--time-limit", "0.4"])
        .args(extra);
    let transport = TokioChildProcess::new(command).unwrap();
    ().serve(transport).await.unwrap()
}

pub async fn call(client: &Client, tool: &str, arguments: Value) -> CallToolResult {
    let mut params = CallToolRequestParams::new(tool.to_string());
    if let Value::Object(arguments) = arguments {
        params = params.with_arguments(arguments);
    }
    client
        .call_tool(params)
        .await
        .unwrap_or_else(|e| panic!("{tool}: the call itself failed instead of answering: {e}"))
}

pub fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|block| block.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("")
}

pub fn is_error(result: &CallToolResult) -> bool {
    result.is_error == Some(true)
}

pub async fn run_lua(client: &Client, code: &str) -> CallToolResult {
    call(client, "run_lua", json!({"code": code})).await
}

/// The text of the MCP `rlm` prompt asked with `question`.
pub async fn rlm_prompt(client: &Client, question: &str) -> String {
    let arguments = json!({"question": question});
    let prompt = client
        .get_prompt(
            rmcp::model::GetPromptRequestParams::new(rlm_registry::serve::RLM_PROMPT)
                .with_arguments(arguments.as_object().cloned().unwrap()),
        )
        .await
        .unwrap();
    serde_json::to_value(&prompt.messages[0]).unwrap()["content"]["text"]
        .as_str()
        .unwrap()
        .to_string()
}

pub async fn wait_until(mut condition: impl FnMut() -> bool) {
    while !condition() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A blocking HTTP request (ureq, off the runtime): status and JSON body.
pub fn request(
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

/// An HTTP answer: status, headers (lower-case names) and body text.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON; for an SSE body, the last `data:` event that is JSON.
    pub fn json(&self) -> Value {
        if let Ok(value) = serde_json::from_str(&self.body) {
            return value;
        }
        self.body
            .lines()
            .rev()
            .filter_map(|line| line.strip_prefix("data:"))
            .find_map(|data| serde_json::from_str(data.trim()).ok())
            .unwrap_or(Value::Null)
    }
}

/// A blocking HTTP request with exactly these headers (off the runtime).
pub fn send(
    method: &str,
    url: String,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> impl Future<Output = Reply> + Send + use<> {
    let method = method.to_string();
    let headers: Vec<(String, String)> = headers
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect();
    let body = body.map(str::to_string);
    let blocking = tokio::task::spawn_blocking(move || {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let mut builder = ureq::http::Request::builder()
            .method(method.as_str())
            .uri(&url);
        for (name, value) in &headers {
            builder = builder.header(name, value);
        }
        let response = match body {
            Some(body) => agent.run(builder.body(body).unwrap()),
            None => agent.run(builder.body(()).unwrap()),
        }
        .unwrap();
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .map(|(n, v)| (n.as_str().to_string(), v.to_str().unwrap_or("").to_string()))
            .collect();
        let body = response.into_body().read_to_string().unwrap_or_default();
        Reply {
            status,
            headers,
            body,
        }
    });
    async move { blocking.await.unwrap() }
}

/// The headers of an MCP POST (JSON, and both answer types accepted).
pub const MCP_POST: [(&str, &str); 2] = [
    ("Content-Type", "application/json"),
    ("Accept", "application/json, text/event-stream"),
];

pub const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"0"}}}"#;

/// `initialize` by hand, with `extra` headers: the reply (its `Mcp-Session-Id` header
/// names the session).
pub async fn initialize(url: String, extra: &[(&str, &str)]) -> Reply {
    let mut headers = MCP_POST.to_vec();
    headers.extend_from_slice(extra);
    send("POST", url, &headers, Some(INITIALIZE)).await
}

/// `initialize` then `notifications/initialized`: the session id.
pub async fn open_session(url: String) -> String {
    let reply = initialize(url.clone(), &[]).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let id = reply
        .header("mcp-session-id")
        .expect("a session id")
        .to_string();
    let mut headers = MCP_POST.to_vec();
    headers.push(("Mcp-Session-Id", &id));
    let note = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    let reply = send("POST", url, &headers, Some(note)).await;
    assert_eq!(reply.status, 202, "{}", reply.body);
    id
}

/// A `tools/call` request's JSON-RPC text.
pub fn tool_call(id: u64, tool: &str, arguments: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}).to_string()
}

/// `tools/call` in session `session` by hand: the reply.
pub fn call_in(
    url: String,
    session: &str,
    id: u64,
    tool: &str,
    arguments: Value,
) -> impl Future<Output = Reply> + Send + use<> {
    let mut headers = MCP_POST.to_vec();
    headers.push(("Mcp-Session-Id", session));
    send("POST", url, &headers, Some(&tool_call(id, tool, arguments)))
}

/// An `rlm serve --http` child process: killed when dropped, its stderr drained in the
/// background once it has said where it listens.
pub struct ServedProcess {
    /// The process (kept so that dropping this kills it).
    pub child: tokio::process::Child,
    /// Its pid, to read its memory and threads.
    pub pid: u32,
    /// `host:port` it listens on.
    pub address: String,
}

impl ServedProcess {
    /// Spawns `command` (an `rlm serve --http 127.0.0.1:0 …`) and waits for the line that
    /// names its address.
    pub async fn spawn(mut command: tokio::process::Command) -> ServedProcess {
        use tokio::io::{AsyncBufReadExt, BufReader};
        let mut child = command
            .stderr(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let pid = child.id().unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let address = loop {
            let line = lines
                .next_line()
                .await
                .unwrap()
                .expect("the server says where it listens");
            if let Some(rest) = line.split("http://").nth(1) {
                break rest.split("/mcp").next().unwrap().to_string();
            }
        };
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        ServedProcess {
            child,
            pid,
            address,
        }
    }
}
