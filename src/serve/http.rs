//! The HTTP side: streamable HTTP MCP at `/mcp`, the JSON API under `/v1`, `/healthz`;
//! the bearer token (or, without one, a loopback `Host`) on every route; the body limit.
//!
//! Every error is `{"error": message}` with a 4xx or 5xx status.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, FromRequest, Path, Query, Request, State as Shared};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::State;
use super::browser;
use super::executor::RunError;
use super::functions;
use super::mcp::{McpHandler, code_arguments, search_arguments};
use super::mcp_gate;
use super::sessions::CreateError;
use super::slots::SessionKind;
use crate::environment::ExecError;
use crate::providers;
use crate::tools::CallError;

type AppState = Arc<State>;

pub(super) fn router(state: AppState, shutdown: CancellationToken) -> Router {
    let api = Router::new()
        .route("/healthz", get(health))
        .route("/v1/functions", get(list_functions))
        .route(
            "/v1/functions/{name}",
            get(describe_function).post(call_function),
        )
        .route("/v1/search", get(search))
        .route("/v1/providers", get(list_providers))
        .route("/v1/providers/{name}", get(describe_provider))
        .route("/v1/providers/{name}/{*path}", any(provider_route))
        .route("/v1/sessions", post(create_session))
        .route("/v1/sessions/{id}", axum::routing::delete(delete_session))
        .route("/v1/sessions/{id}/exec", post(exec_session))
        .fallback(not_found)
        .with_state(Arc::clone(&state));
    let mcp = Router::new()
        .nest_service("/mcp", mcp_service(&state, shutdown))
        .layer(middleware::from_fn_with_state(
            Arc::clone(&state),
            mcp_gate::gate,
        ))
        .layer(middleware::from_fn(session_end_status));
    let browser = Arc::new(browser::Browser {
        allowed: state.options.allowed_origins.clone(),
        body_limit: state.options.body_limit_bytes,
    });
    // Outermost: a browser's preflight carries no token, and a foreign page is refused
    // before anything else looks at its request.
    api.merge(mcp)
        .layer(DefaultBodyLimit::max(state.options.body_limit_bytes))
        .layer(middleware::from_fn_with_state(state, authorize))
        .layer(middleware::from_fn_with_state(browser, browser::guard))
}

/// How often an open SSE stream gets a keep-alive comment (rmcp's default is 15 s).
const SSE_KEEP_ALIVE: Duration = Duration::from_secs(5);

fn mcp_service(
    state: &AppState,
    shutdown: CancellationToken,
) -> StreamableHttpService<McpHandler, LocalSessionManager> {
    let mut sessions = LocalSessionManager::default();
    // rmcp's own idle close is a safety net; ours (the reaper) comes first and frees the
    // session's slot and environment at the same time.
    sessions.session_config.keep_alive = Some(state.options.idle_timeout + Duration::from_secs(60));
    let sessions = Arc::new(sessions);
    state.mcp.set_manager(Arc::clone(&sessions));
    let mut config = StreamableHttpServerConfig::default();
    config.cancellation_token = shutdown;
    // A dropped connection is noticed at the latest when a write to it fails: the
    // keep-alive comment every few seconds bounds how long that takes.
    config.sse_keep_alive = Some(SSE_KEEP_ALIVE);
    config.max_request_body_bytes = state.options.body_limit_bytes;
    if state.options.token.is_some() {
        // The token guards the server; the Host check is for loopback servers without one.
        config = config.disable_allowed_hosts();
    }
    let factory_state = Arc::clone(state);
    StreamableHttpService::new(
        move || McpHandler::for_http(&factory_state),
        sessions,
        config,
    )
}

/// A failed request: `{"error": message}` with the status.
struct ApiError(StatusCode, String);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, axum::Json(json!({"error": self.1}))).into_response()
    }
}

/// rmcp answers a session's `DELETE /mcp` with 202; clients such as the Python SDK
/// expect 200 or 204 and warn otherwise. The session is ended either way.
async fn session_end_status(request: Request, next: Next) -> Response {
    let ending = request.method() == axum::http::Method::DELETE;
    let mut response = next.run(request).await;
    if ending && response.status() == StatusCode::ACCEPTED {
        *response.status_mut() = StatusCode::NO_CONTENT;
    }
    response
}

/// `{"error": message}` with `status`.
fn error(status: StatusCode, message: impl Into<String>) -> Response {
    ApiError(status, message.into()).into_response()
}

fn ok(value: Value) -> Response {
    axum::Json(value).into_response()
}

/// With a token: `Authorization: Bearer <token>` on every route. Without one (loopback
/// only): a loopback `Host`, so a web page cannot reach the server by DNS rebinding.
async fn authorize(Shared(state): Shared<AppState>, request: Request, next: Next) -> Response {
    match &state.options.token {
        Some(token) => {
            if !bearer_matches(request.headers(), token) {
                let mut response = error(
                    StatusCode::UNAUTHORIZED,
                    "missing or wrong bearer token (Authorization: Bearer <token>)",
                );
                response.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    header::HeaderValue::from_static("Bearer"),
                );
                return response;
            }
        }
        None => {
            if !host_is_loopback(request.headers()) {
                return error(
                    StatusCode::FORBIDDEN,
                    "this server answers only requests addressed to localhost",
                );
            }
        }
    }
    next.run(request).await
}

fn bearer_matches(headers: &HeaderMap, token: &str) -> bool {
    let Some(given) = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
    else {
        return false;
    };
    constant_time_eq(given.trim().as_bytes(), token.as_bytes())
}

/// Compares without stopping at the first difference, so timing does not reveal how
/// much of a guess was right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn host_is_loopback(headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|v| v.to_str().ok()) else {
        // HTTP/1.0 without Host: only reachable directly, not through a browser.
        return true;
    };
    browser::split_host(host).is_some_and(|(name, _)| browser::is_loopback_name(name))
}

async fn not_found() -> Response {
    error(
        StatusCode::NOT_FOUND,
        "no such route (see GET /v1/functions)",
    )
}

async fn health(Shared(state): Shared<AppState>) -> Response {
    ok(json!({
        "status": "ok",
        "functions": state.functions.registry().len(),
        "sessions": state.slots.total(),
        "mcp_sessions": state.slots.count(SessionKind::Mcp),
        "api_sessions": state.slots.count(SessionKind::Api),
        "max_sessions": state.slots.max(),
        "running_executions": state.executor.running(),
    }))
}

async fn list_functions(Shared(state): Shared<AppState>) -> Response {
    ok(json!({"functions": functions::function_list(&state.functions)}))
}

async fn describe_function(Shared(state): Shared<AppState>, Path(name): Path<String>) -> Response {
    match state.functions.get(&name).map(|f| f.json()) {
        Some(description) => ok(description),
        None => unknown_function(&state, &name),
    }
}

fn unknown_function(state: &State, name: &str) -> Response {
    let error = CallError::UnknownFunction {
        name: name.to_string(),
        suggestion: state.functions.closest_name(name).map(str::to_string),
    };
    self::error(StatusCode::NOT_FOUND, error.to_string())
}

/// The request body as JSON (`null` when empty): the body limit and malformed JSON are
/// `{"error"}`s too.
struct JsonBody(Value);

impl<S: Send + Sync> FromRequest<S> for JsonBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let body = Bytes::from_request(request, state)
            .await
            .map_err(|rejection| ApiError(rejection.status(), rejection.body_text()))?;
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(JsonBody(Value::Null));
        }
        serde_json::from_slice(&body)
            .map(JsonBody)
            .map_err(|e| ApiError(StatusCode::BAD_REQUEST, format!("malformed JSON body: {e}")))
    }
}

async fn call_function(
    Shared(state): Shared<AppState>,
    Path(name): Path<String>,
    JsonBody(arguments): JsonBody,
) -> Response {
    if state.functions.get(&name).is_some_and(|f| f.is_builtin()) {
        return error(
            StatusCode::BAD_REQUEST,
            format!(
                "`{name}` is a built-in: it runs only inside Lua (POST /v1/sessions, then /v1/sessions/ID/exec)"
            ),
        );
    }
    let cancel = CancellationToken::new();
    match state.call_function(&name, arguments, &cancel).await {
        Ok(called) => ok(json!({"result": called.value})),
        Err(RunError::Failed(failure)) => {
            let status = match &failure {
                CallError::UnknownFunction { .. } => StatusCode::NOT_FOUND,
                CallError::NotExportable(_) | CallError::InvalidArguments { .. } => {
                    StatusCode::BAD_REQUEST
                }
                CallError::Execution { .. } => StatusCode::UNPROCESSABLE_ENTITY,
                CallError::Setup(_) => StatusCode::SERVICE_UNAVAILABLE,
            };
            error(status, failure.to_string())
        }
        Err(RunError::Unavailable(message)) => error(StatusCode::SERVICE_UNAVAILABLE, message),
    }
}

#[derive(Deserialize)]
struct SearchQuery {
    q: Option<String>,
    max_results: Option<String>,
    capability: Option<String>,
}

async fn list_providers(Shared(state): Shared<AppState>) -> Response {
    ok(json!({"providers": functions::provider_list(&state.functions)}))
}

async fn describe_provider(Shared(state): Shared<AppState>, Path(name): Path<String>) -> Response {
    match functions::provider_list(&state.functions)
        .into_iter()
        .find(|p| p["name"] == name)
    {
        Some(provider) => ok(provider),
        None => error(
            StatusCode::NOT_FOUND,
            format!("no provider named `{name}` (see GET /v1/providers)"),
        ),
    }
}

/// A provider's management route ([`Provider::routes`](crate::providers::Provider::routes)),
/// run off the async runtime: a handler may block, and a panic in it is a 500.
async fn provider_route(
    Shared(state): Shared<AppState>,
    Path((name, path)): Path<(String, String)>,
    method: axum::http::Method,
    Query(query): Query<std::collections::BTreeMap<String, String>>,
    body: Result<JsonBody, ApiError>,
) -> Response {
    let Some(method) = providers::Method::parse(method.as_str()) else {
        return error(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("{method} is not a method provider routes answer"),
        );
    };
    let body = match body {
        Ok(JsonBody(body)) => body,
        Err(failure) => return failure.into_response(),
    };
    let providers = Arc::clone(state.functions.providers());
    let request = providers::RouteRequest {
        query,
        body,
        ..Default::default()
    };
    let answered = tokio::task::spawn_blocking(move || {
        providers.handle_route(&name, method, &format!("/{path}"), request)
    })
    .await;
    match answered {
        Ok(answer) => {
            let status =
                StatusCode::from_u16(answer.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            (status, axum::Json(answer.body)).into_response()
        }
        Err(_) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the provider's route handler panicked",
        ),
    }
}

async fn search(Shared(state): Shared<AppState>, query: Query<SearchQuery>) -> Response {
    let Query(SearchQuery {
        q,
        max_results,
        capability,
    }) = query;
    let Some(q) = q else {
        return error(
            StatusCode::BAD_REQUEST,
            "missing query parameter `q` (GET /v1/search?q=words)",
        );
    };
    let max_results = match max_results.map(|n| n.parse::<u64>()) {
        None => Value::Null,
        Some(Ok(n)) => json!(n),
        Some(Err(_)) => {
            return error(
                StatusCode::BAD_REQUEST,
                "`max_results` must be a positive integer",
            );
        }
    };
    let arguments = json!({"query": q, "max_results": max_results, "capability": capability});
    match search_arguments(&arguments) {
        Ok((query, max_results, capability)) => ok(
            json!({"results": functions::search(&state.functions, &query, max_results, capability)}),
        ),
        Err(message) => error(StatusCode::BAD_REQUEST, message),
    }
}

async fn create_session(Shared(state): Shared<AppState>) -> Response {
    match state.new_api_session() {
        Ok(id) => (StatusCode::CREATED, axum::Json(json!({"id": id}))).into_response(),
        Err(full @ CreateError::Full { .. }) => {
            error(StatusCode::SERVICE_UNAVAILABLE, full.to_string())
        }
        Err(CreateError::Setup(message)) => error(StatusCode::INTERNAL_SERVER_ERROR, message),
    }
}

async fn delete_session(Shared(state): Shared<AppState>, Path(id): Path<String>) -> Response {
    if state.sessions.remove(&id) {
        StatusCode::NO_CONTENT.into_response()
    } else {
        unknown_session(&id)
    }
}

fn unknown_session(id: &str) -> Response {
    error(
        StatusCode::NOT_FOUND,
        format!("no session `{id}` (it ended or timed out; POST /v1/sessions starts one)"),
    )
}

async fn exec_session(
    Shared(state): Shared<AppState>,
    Path(id): Path<String>,
    JsonBody(body): JsonBody,
) -> Response {
    let (code, context) = match code_arguments("exec", &body) {
        Ok(parsed) => parsed,
        Err(message) => return error(StatusCode::BAD_REQUEST, message),
    };
    let Some(in_use) = state
        .sessions
        .get(&id)
        .or_else(|| state.restore_api_session(&id))
    else {
        return unknown_session(&id);
    };
    let cancel = CancellationToken::new();
    let result = state
        .executor
        .execute(&in_use.session().thread, code, context, None, &cancel)
        .await;
    match result {
        Ok(output) => ok(json!({"output": output})),
        Err(RunError::Failed(failure)) => {
            let kind = match &failure {
                ExecError::Lua { .. } => "lua".to_string(),
                ExecError::Limit { kind, .. } => kind.to_string(),
            };
            let body =
                json!({"error": failure.message(), "kind": kind, "output": failure.output()});
            (StatusCode::UNPROCESSABLE_ENTITY, axum::Json(body)).into_response()
        }
        Err(RunError::Unavailable(message)) => error(StatusCode::SERVICE_UNAVAILABLE, message),
    }
}
