//! The layer in front of rmcp's streamable HTTP service at `/mcp`: it applies the
//! session cap to `initialize` (refusing past it with a JSON-RPC error about MCP
//! sessions), links each new session's handler to its `Mcp-Session-Id`, ends a session
//! at once on `DELETE /mcp`, and notices a call's connection dropping and a client
//! resuming.

use std::cell::RefCell;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::{Body, HttpBody};
use axum::extract::{Request, State as Shared};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::State;
use super::mcp_sessions::McpSession;
use super::sessions::CreateError;
use super::slots::{SessionKind, Slot};

const SESSION_HEADER: &str = "mcp-session-id";

/// What an `initialize` request brought to the handler factory and what it left there.
#[derive(Default)]
pub(super) struct Reservation {
    /// The slot taken for the session before rmcp creates it.
    pub(super) slot: Option<Slot>,
    /// The session the factory built, to be linked to its id.
    pub(super) session: Option<Arc<McpSession>>,
}

tokio::task_local! {
    /// rmcp calls the handler factory inside the request's task, synchronously, with no
    /// access to the request: the reservation reaches it this way.
    pub(super) static RESERVED: RefCell<Reservation>;
}

pub(super) async fn gate(
    Shared(state): Shared<Arc<State>>,
    request: Request,
    next: Next,
) -> Response {
    let session_id = request
        .headers()
        .get(SESSION_HEADER)
        .and_then(|value| value.to_str().ok())
        .map(str::to_string);
    match (request.method().clone(), session_id) {
        (Method::DELETE, Some(id)) => {
            state.mcp.end(&id);
            next.run(request).await
        }
        (Method::GET, Some(id)) => {
            if request.headers().contains_key("last-event-id") {
                state.mcp.resumed(&id);
            }
            state.mcp.touch(&id);
            next.run(request).await
        }
        (Method::POST, session_id) => post(&state, session_id, request, next).await,
        _ => next.run(request).await,
    }
}

async fn post(
    state: &Arc<State>,
    session_id: Option<String>,
    request: Request,
    next: Next,
) -> Response {
    let (parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, state.options.body_limit_bytes).await {
        Ok(bytes) => bytes,
        Err(_) => {
            return (
                StatusCode::PAYLOAD_TOO_LARGE,
                axum::Json(json!({"error": format!("the request body is larger than {} bytes (--body-limit)", state.options.body_limit_bytes)})),
            )
                .into_response();
        }
    };
    // rmcp answers malformed messages itself; this only reads what routing needs.
    let message: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let method = message.get("method").and_then(Value::as_str);
    let request_id = message.get("id").map(Value::to_string);
    let request = Request::from_parts(parts, Body::from(bytes.clone()));
    let Some(session_id) = session_id else {
        if method == Some("initialize") {
            return initialize(state, request_id, request, next).await;
        }
        return next.run(request).await;
    };
    state.mcp.touch(&session_id);
    let response = next.run(request).await;
    match (method, request_id) {
        (Some("tools/call"), Some(request_id)) if is_stream(&response) => {
            let watch = Disconnect {
                state: Arc::clone(state),
                session_id,
                request_id,
            };
            response.map(|body| {
                Body::new(Watched {
                    body,
                    watch: Some(watch),
                })
            })
        }
        _ => response,
    }
}

/// Takes a slot for the new session (or refuses), lets rmcp create it, then links the
/// handler the factory built to the `Mcp-Session-Id` rmcp gave it.
async fn initialize(
    state: &Arc<State>,
    request_id: Option<String>,
    request: Request,
    next: Next,
) -> Response {
    let Some(slot) = state.slots.take(SessionKind::Mcp) else {
        return refuse_full(state, request_id);
    };
    let reservation = RefCell::new(Reservation {
        slot: Some(slot),
        session: None,
    });
    let (response, session) = RESERVED
        .scope(reservation, async {
            let response = next.run(request).await;
            let session = RESERVED.with(|reserved| reserved.borrow_mut().session.take());
            (response, session)
        })
        .await;
    let id = response
        .headers()
        .get(SESSION_HEADER)
        .and_then(|value| value.to_str().ok());
    if let (Some(session), Some(id)) = (session, id) {
        state.mcp.register(id.to_string(), &session);
    }
    response
}

/// 503 with a JSON-RPC error an MCP client shows: the cap, and how MCP sessions end.
fn refuse_full(state: &State, request_id: Option<String>) -> Response {
    let full = CreateError::Full {
        kind: SessionKind::Mcp,
        max: state.slots.max(),
        idle_timeout: state.options.idle_timeout,
    };
    let id = request_id
        .and_then(|id| serde_json::from_str::<Value>(&id).ok())
        .unwrap_or(Value::Null);
    let body = json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": -32000, "message": full.to_string()},
    });
    (StatusCode::SERVICE_UNAVAILABLE, axum::Json(body)).into_response()
}

fn is_stream(response: &Response) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("text/event-stream"))
}

/// Tells the session that a call's answer will not reach its connection.
struct Disconnect {
    state: Arc<State>,
    session_id: String,
    request_id: String,
}

/// A call's SSE body; dropped before its end means the connection went away.
struct Watched {
    body: Body,
    watch: Option<Disconnect>,
}

impl HttpBody for Watched {
    type Data = <Body as HttpBody>::Data;
    type Error = <Body as HttpBody>::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        if let Poll::Ready(None) = polled {
            self.watch = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        if let Some(watch) = self.watch.take() {
            let grace = watch.state.options.disconnect_grace;
            watch
                .state
                .mcp
                .disconnected(&watch.session_id, &watch.request_id, grace);
        }
    }
}
