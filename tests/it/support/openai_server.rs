//! A small OpenAI-compatible chat completions server for tests, over real HTTP on
//! `127.0.0.1:0`, with a scripted behaviour per request.
//!
//! It is a minimal HTTP/1.1 server on `std::net` rather than `tiny_http`, because
//! `tiny_http` cannot drop a connection without answering: dropping its `Request`
//! sends a 500. Here each connection carries one request (`Connection: close`), so
//! every behaviour is exact, including [`Behavior::Drop`].
//!
//! ```ignore
//! let server = OpenAiServer::start(
//!     vec![Behavior::status(503), Behavior::reply("hello")],
//!     Behavior::status(500),
//! );
//! let base_url = server.base_url(); // http://127.0.0.1:PORT/v1
//! // … POST {base_url}/chat/completions …
//! assert_eq!(server.request_count(), 2);
//! ```
//!
//! A `GET` (a client asking the server's model list or llama.cpp's `/props` for its
//! window) is answered from [`OpenAiServer::answer_get`]'s table, 404 when the path is
//! not in it: it takes no behaviour from the script and is not among
//! [`OpenAiServer::requests`] ([`OpenAiServer::get_requests`] lists it).
//!
//! Everything is bounded: requests are read with a 5 s socket timeout and size caps,
//! delays wake up when the server stops, and dropping the server joins every thread.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Read/write timeout on every accepted socket.
const SOCKET_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest request head and body accepted.
const MAX_HEAD_BYTES: usize = 64 * 1024;
const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;
/// Connections accepted at most over the server's life: a runaway client cannot make
/// it spawn threads forever.
const MAX_CONNECTIONS: usize = 10_000;

/// What the server does with one request.
#[derive(Clone, Debug)]
pub enum Behavior {
    /// 200 with a chat completion holding `content` and the given usage.
    Reply {
        content: String,
        prompt_tokens: u64,
        completion_tokens: u64,
    },
    /// Waits, then behaves as the inner behaviour.
    Delayed(Duration, Box<Behavior>),
    /// The status, with an optional `Retry-After` header and a body.
    Status {
        status: u16,
        retry_after: Option<String>,
        body: String,
    },
    /// 200 with this body, meant not to be JSON.
    Garbage(String),
    /// 200 with this JSON.
    Json(Value),
    /// 200 with JSON that has `usage` but no `choices`.
    NoChoices,
    /// Reads the request, then closes the connection without a byte of answer.
    Drop,
    /// 200 after `delay`, content `echo: <last user message>`, usage 10 + 2 tokens.
    Echo { delay: Duration },
    /// 200 with an assistant message asking for tool calls `(id, name, arguments)`,
    /// `content: null`, `finish_reason: "tool_calls"`, usage 10 + 5 tokens.
    ToolCalls(Vec<(String, String, String)>),
    /// 200 with a chat completion whose one choice holds `message` and `finish_reason`,
    /// and this `usage` object: a reasoning model's reply, a cut one.
    Completion {
        message: Value,
        finish_reason: String,
        usage: Value,
    },
    /// The behaviour of the first `(needle, behaviour)` whose needle is in the last user
    /// message, else the last one: answers that do not depend on arrival order, for
    /// requests sent concurrently.
    ByPrompt(Vec<(String, Behavior)>),
    /// A server with a context window of `tokens`, as llama.cpp: a request whose
    /// messages count more (`o200k_base`, as a chat) gets llama.cpp's context-length
    /// error, any other the inner behaviour.
    Window { tokens: u64, inner: Box<Behavior> },
}

impl Behavior {
    /// 200 with `content`, usage 10 prompt + 5 completion tokens.
    pub fn reply(content: &str) -> Behavior {
        Behavior::reply_with_usage(content, 10, 5)
    }

    /// 200 with `content` and the given usage.
    pub fn reply_with_usage(content: &str, prompt_tokens: u64, completion_tokens: u64) -> Behavior {
        Behavior::Reply {
            content: content.to_string(),
            prompt_tokens,
            completion_tokens,
        }
    }

    /// This behaviour after `delay`.
    pub fn after(self, delay: Duration) -> Behavior {
        Behavior::Delayed(delay, Box::new(self))
    }

    /// The status with a JSON error body naming it.
    pub fn status(status: u16) -> Behavior {
        Behavior::Status {
            status,
            retry_after: None,
            body: json!({"error": {"message": format!("scripted status {status}")}}).to_string(),
        }
    }

    /// The status with this body, as a server words its error.
    pub fn status_with_body(status: u16, body: &str) -> Behavior {
        Behavior::Status {
            status,
            retry_after: None,
            body: body.to_string(),
        }
    }

    /// The status with a `Retry-After: <retry_after>` header.
    pub fn status_with_retry_after(status: u16, retry_after: &str) -> Behavior {
        match Behavior::status(status) {
            Behavior::Status { status, body, .. } => Behavior::Status {
                status,
                retry_after: Some(retry_after.to_string()),
                body,
            },
            _ => unreachable!(),
        }
    }

    /// This behaviour behind a context window of `tokens`.
    pub fn within_window(self, tokens: u64) -> Behavior {
        Behavior::Window {
            tokens,
            inner: Box::new(self),
        }
    }

    /// The behaviour for `request`: a window's refusal or its inner behaviour.
    fn for_request(self, request: &RecordedRequest) -> Behavior {
        let Behavior::Window { tokens, inner } = self else {
            return self;
        };
        let counted = request.prompt_tokens();
        if counted <= tokens {
            return inner.for_request(request);
        }
        let body = json!({"error": {
            "code": 400,
            "message": "the request exceeds the available context size. try increasing the context size or enable context shift",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": counted,
            "n_ctx": tokens,
        }});
        Behavior::status_with_body(400, &body.to_string())
    }

    /// Tool calls `(id, name, arguments JSON)`.
    pub fn tool_calls(calls: &[(&str, &str, &str)]) -> Behavior {
        Behavior::ToolCalls(
            calls
                .iter()
                .map(|(id, name, arguments)| {
                    (id.to_string(), name.to_string(), arguments.to_string())
                })
                .collect(),
        )
    }

    /// Echo after `delay`.
    pub fn echo(delay: Duration) -> Behavior {
        Behavior::Echo { delay }
    }

    /// A reply with its thinking in a `reasoning_content` field, as vLLM's reasoning
    /// parsers send it, and `reasoning_tokens` of the 40 completion tokens spent on it.
    pub fn reasoning_reply(content: &str, reasoning: &str, reasoning_tokens: u64) -> Behavior {
        Behavior::Completion {
            message: json!({"role": "assistant", "content": content, "reasoning_content": reasoning}),
            finish_reason: "stop".to_string(),
            usage: json!({
                "prompt_tokens": 100, "completion_tokens": 40, "total_tokens": 140,
                "completion_tokens_details": {"reasoning_tokens": reasoning_tokens},
            }),
        }
    }

    /// `content` cut at the token limit: `finish_reason: "length"`.
    pub fn cut_reply(content: &str) -> Behavior {
        Behavior::Completion {
            message: json!({"role": "assistant", "content": content}),
            finish_reason: "length".to_string(),
            usage: json!({"prompt_tokens": 10, "completion_tokens": 64, "total_tokens": 74}),
        }
    }
}

/// One request as the server received it.
#[derive(Clone, Debug)]
pub struct RecordedRequest {
    pub method: String,
    pub path: String,
    /// Header names lowercased.
    pub headers: Vec<(String, String)>,
    pub body: String,
    pub received_at: Instant,
}

impl RecordedRequest {
    /// The first header called `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value.as_str())
    }

    /// The body as JSON, if it is.
    pub fn json(&self) -> Option<Value> {
        serde_json::from_str(&self.body).ok()
    }

    /// The `o200k_base` tokens of the request's messages, counted as a chat.
    pub fn prompt_tokens(&self) -> u64 {
        let messages = self.json().and_then(|body| body.get("messages").cloned());
        let messages = messages.as_ref().and_then(Value::as_array);
        let texts: Vec<String> = messages
            .into_iter()
            .flatten()
            .map(|message| message.get("content").map(text_of).unwrap_or_default())
            .collect();
        rlm_registry::tokens::count_chat(texts.iter().map(String::as_str)) as u64
    }
}

#[derive(Default)]
struct State {
    script: Mutex<Vec<Behavior>>,
    /// What a `GET` of each path answers.
    gets: Mutex<Vec<(String, Behavior)>>,
    get_requests: Mutex<Vec<RecordedRequest>>,
    fallback: Mutex<Option<Behavior>>,
    requests: Mutex<Vec<RecordedRequest>>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    connections: Mutex<Vec<JoinHandle<()>>>,
}

/// Locks, ignoring poisoning (a panicking test thread must not hide the real failure).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The running server. Stops, and joins its threads, on drop.
pub struct OpenAiServer {
    addr: SocketAddr,
    state: Arc<State>,
    stop: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

impl OpenAiServer {
    /// Serves `script` in order, one behaviour per request, then `fallback` forever.
    pub fn start(script: Vec<Behavior>, fallback: Behavior) -> OpenAiServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local address");
        let state = Arc::new(State::default());
        *lock(&state.script) = script.into_iter().rev().collect();
        *lock(&state.fallback) = Some(fallback);
        let stop = Arc::new(AtomicBool::new(false));
        let acceptor = {
            let state = Arc::clone(&state);
            let stop = Arc::clone(&stop);
            thread::Builder::new()
                .name("openai-server-accept".to_string())
                .spawn(move || accept_loop(listener, state, stop))
                .expect("spawn the accept thread")
        };
        OpenAiServer {
            addr,
            state,
            stop,
            acceptor: Some(acceptor),
        }
    }

    /// `behavior` for every request.
    pub fn always(behavior: Behavior) -> OpenAiServer {
        OpenAiServer::start(Vec::new(), behavior)
    }

    /// `http://127.0.0.1:PORT/v1`, to use as the client's base URL.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Requests received so far (whatever their outcome).
    pub fn request_count(&self) -> usize {
        lock(&self.state.requests).len()
    }

    /// The requests received so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.state.requests).clone()
    }

    /// Answers a `GET` of `path` (`/v1/models`, `/props`) with `behavior`, as often as
    /// asked.
    pub fn answer_get(&self, path: &str, behavior: Behavior) {
        lock(&self.state.gets).push((path.to_string(), behavior));
    }

    /// The `GET` requests received so far, in arrival order.
    pub fn get_requests(&self) -> Vec<RecordedRequest> {
        lock(&self.state.get_requests).clone()
    }

    /// The most requests that were being handled at the same time.
    pub fn max_in_flight(&self) -> usize {
        self.state.max_in_flight.load(Ordering::SeqCst)
    }
}

impl Drop for OpenAiServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the blocking `accept` with a connection of our own.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
        let connections = std::mem::take(&mut *lock(&self.state.connections));
        for connection in connections {
            let _ = connection.join();
        }
    }
}

fn accept_loop(listener: TcpListener, state: Arc<State>, stop: Arc<AtomicBool>) {
    for _ in 0..MAX_CONNECTIONS {
        let Ok((stream, _)) = listener.accept() else {
            continue;
        };
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let handler = {
            let state = Arc::clone(&state);
            let stop = Arc::clone(&stop);
            thread::Builder::new()
                .name("openai-server-conn".to_string())
                .spawn(move || handle_connection(stream, &state, &stop))
        };
        if let Ok(handler) = handler {
            let mut connections = lock(&state.connections);
            connections.retain(|handle| !handle.is_finished());
            connections.push(handler);
        }
    }
}

fn handle_connection(mut stream: TcpStream, state: &State, stop: &AtomicBool) {
    let _ = stream.set_read_timeout(Some(SOCKET_TIMEOUT));
    let _ = stream.set_write_timeout(Some(SOCKET_TIMEOUT));
    let Some(request) = read_request(&mut stream) else {
        return;
    };
    if request.method == "GET" {
        let behavior = lock(&state.gets)
            .iter()
            .find(|(path, _)| *path == request.path)
            .map(|(_, behavior)| behavior.clone())
            .unwrap_or_else(|| Behavior::status(404));
        lock(&state.get_requests).push(request);
        if let Some(response) = respond(&mut stream, behavior, "", stop) {
            let _ = stream.write_all(response.as_bytes());
            let _ = stream.flush();
            let _ = stream.shutdown(Shutdown::Write);
        }
        return;
    }
    let behavior = {
        let mut script = lock(&state.script);
        script
            .pop()
            .or_else(|| lock(&state.fallback).clone())
            .unwrap_or_else(|| Behavior::status(500))
    };
    let in_flight = state.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    state.max_in_flight.fetch_max(in_flight, Ordering::SeqCst);
    let last_user = last_user_message(&request);
    let behavior = behavior.for_request(&request);
    lock(&state.requests).push(request);
    let response = respond(&mut stream, behavior, &last_user, stop);
    // The request stops counting before its answer is written: once the last byte is
    // out, the client may send its next request before this thread runs again.
    state.in_flight.fetch_sub(1, Ordering::SeqCst);
    if let Some(response) = response {
        let _ = stream.write_all(response.as_bytes());
        let _ = stream.flush();
        let _ = stream.shutdown(Shutdown::Write);
    }
}

/// Reads one request: head up to the blank line, then `Content-Length` bytes of body.
fn read_request(stream: &mut TcpStream) -> Option<RecordedRequest> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(position) = find(&buffer, b"\r\n\r\n") {
            break position;
        }
        if buffer.len() > MAX_HEAD_BYTES {
            return None;
        }
        let read = stream.read(&mut chunk).ok()?;
        if read == 0 {
            return None; // Closed before a full head (e.g. the drop's wake-up connection).
        }
        buffer.extend_from_slice(&chunk[..read]);
    };
    let received_at = Instant::now();
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next()?.split(' ');
    let method = request_line.next()?.to_string();
    let path = request_line.next()?.to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_string()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(name, _)| name == "content-length")
        .and_then(|(_, value)| value.parse().ok())
        .unwrap_or(0);
    if length > MAX_BODY_BYTES {
        return None;
    }
    let mut body = buffer[head_end + 4..].to_vec();
    while body.len() < length {
        let read = stream.read(&mut chunk).ok()?;
        if read == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..read]);
    }
    body.truncate(length);
    Some(RecordedRequest {
        method,
        path,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
        received_at,
    })
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

fn last_user_message(request: &RecordedRequest) -> String {
    request
        .json()
        .and_then(|body| {
            body.get("messages")?
                .as_array()?
                .iter()
                .rev()
                .find(|message| message.get("role").and_then(Value::as_str) == Some("user"))?
                .get("content")
                .map(text_of)
        })
        .unwrap_or_default()
}

/// A message's text: its content, or for content parts (a prompt with images) the text
/// of its `text` parts.
fn text_of(content: &Value) -> String {
    match content {
        Value::Array(parts) => parts
            .iter()
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .collect(),
        other => other.as_str().unwrap_or_default().to_string(),
    }
}

/// Sleeps `delay`, waking early when the server stops.
fn sleep_unless_stopped(delay: Duration, stop: &AtomicBool) {
    let deadline = Instant::now() + delay;
    while !stop.load(Ordering::SeqCst) {
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        thread::sleep((deadline - now).min(Duration::from_millis(5)));
    }
}

fn completion_body(content: &str, prompt_tokens: u64, completion_tokens: u64) -> String {
    let message = json!({"role": "assistant", "content": content});
    chat_completion(message, "stop", prompt_tokens, completion_tokens)
}

/// A chat completion with one choice holding `message`.
fn chat_completion(
    message: Value,
    finish_reason: &str,
    prompt_tokens: u64,
    completion_tokens: u64,
) -> String {
    json!({
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": "test-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    })
    .to_string()
}

/// The bytes to answer with, after the behavior's delay; `None` when the behavior drops
/// the connection instead.
fn respond(
    stream: &mut TcpStream,
    behavior: Behavior,
    last_user: &str,
    stop: &AtomicBool,
) -> Option<String> {
    let (status, extra_header, body) = match behavior {
        Behavior::ByPrompt(mut cases) => {
            let at = cases
                .iter()
                .position(|(needle, _)| last_user.contains(needle.as_str()))
                .unwrap_or(cases.len().saturating_sub(1));
            let inner = cases.swap_remove(at).1;
            return respond(stream, inner, last_user, stop);
        }
        Behavior::Delayed(delay, inner) => {
            sleep_unless_stopped(delay, stop);
            return respond(stream, *inner, last_user, stop);
        }
        // A window inside another behaviour: its refusal was decided on arrival.
        Behavior::Window { inner, .. } => return respond(stream, *inner, last_user, stop),
        Behavior::Reply {
            content,
            prompt_tokens,
            completion_tokens,
        } => (
            200,
            None,
            completion_body(&content, prompt_tokens, completion_tokens),
        ),
        Behavior::Echo { delay } => {
            sleep_unless_stopped(delay, stop);
            (200, None, completion_body(&format!("echo: {last_user}"), 10, 2))
        }
        Behavior::Status {
            status,
            retry_after,
            body,
        } => (
            status,
            retry_after.map(|value| format!("Retry-After: {value}\r\n")),
            body,
        ),
        Behavior::ToolCalls(calls) => {
            let calls: Vec<Value> = calls
                .into_iter()
                .map(|(id, name, arguments)| {
                    json!({"id": id, "type": "function",
                           "function": {"name": name, "arguments": arguments}})
                })
                .collect();
            let message = json!({"role": "assistant", "content": null, "tool_calls": calls});
            (200, None, chat_completion(message, "tool_calls", 10, 5))
        }
        Behavior::Completion {
            message,
            finish_reason,
            usage,
        } => (
            200,
            None,
            json!({
                "id": "chatcmpl-test", "object": "chat.completion", "created": 0,
                "model": "test-model",
                "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
                "usage": usage,
            })
            .to_string(),
        ),
        Behavior::Garbage(body) => (200, None, body),
        Behavior::Json(body) => (200, None, body.to_string()),
        Behavior::NoChoices => (
            200,
            None,
            json!({"object": "chat.completion", "usage": {"prompt_tokens": 1, "completion_tokens": 0}})
                .to_string(),
        ),
        Behavior::Drop => {
            let _ = stream.shutdown(Shutdown::Both);
            return None;
        }
    };
    Some(format!(
        "HTTP/1.1 {status} Scripted\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n{}\r\n{body}",
        body.len(),
        extra_header.unwrap_or_default(),
    ))
}
