//! Serving a registry to other agents (feature `serve`): MCP over stdio and
//! streamable HTTP, and a JSON HTTP API on the same port.
//!
//! - [`Catalog`]: the functions the server exposes (one place: the tool list, search
//!   and the JSON API read it).
//! - MCP ([`McpHandler`]): every function that can be a tool, `run_lua` (a sandboxed
//!   REPL per MCP session) and `search_functions`; each function as a resource, the
//!   `rlm` prompt, and `run_lua`'s output as log messages.
//! - Sessions: MCP and JSON-API sessions under one cap, each with an idle expiry; an
//!   ended session's executions stop at once.
//! - The browser next door: a foreign `Origin` gets 403, bodies must be JSON.
//! - HTTP ([`Server::router`]): `/mcp`, `/v1/...` and `/healthz`, behind the bearer
//!   token when one is set.
//!
//! Lua never runs on the async runtime's workers: stateless calls run on a pool of
//! threads and each session on its own thread, at most
//! [`ServeOptions::max_concurrent_executions`] at once, each under the sandbox's limits
//! and interrupted when its request is cancelled.
//!
//! ```no_run
//! use rlm_registry::{Registry, serve::{Server, ServeOptions}};
//!
//! # async fn run() -> std::io::Result<()> {
//! let server = Server::new(Registry::baked().clone(), ServeOptions::default());
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8765").await?;
//! server.serve_http(listener, rlm_registry::serve::shutdown_signal()).await
//! # }
//! ```
//!
//! # Where things are
//!
//! - MCP: `mcp` the handler, `mcp_content` its resources and prompts, `mcp_logging`
//!   `run_lua`'s output as log messages, `mcp_gate` the layer in front of `/mcp`,
//!   `mcp_sessions` MCP sessions and how they end, `stdio` the stdio transport.
//! - The JSON API: `http` (the routes), `functions` (its JSON views of the one
//!   [`Catalog`], which the server holds as it is).
//! - `browser`: the Origin rule, JSON-only bodies, CORS.
//! - `slots`: the one session cap; `sessions`: the live Lua environments; `executor`:
//!   the threads they run on; `state_dir`: their journals under `--state-dir`.

mod browser;
mod executor;
mod functions;
mod http;
mod mcp;
mod mcp_content;
mod mcp_gate;
mod mcp_logging;
mod mcp_sessions;
mod sessions;
mod slots;
mod state_dir;
mod stdio;

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rmcp::ServiceExt;
use serde_json::Value;

pub use browser::AllowedOrigins;
pub use executor::{SessionSetup, session_environment};
pub use functions::{MAX_SEARCH_RESULTS, conform};
pub use mcp::{McpHandler, RUN_LUA, SEARCH_FUNCTIONS};
pub use mcp_content::{FUNCTION_URI, RLM_PROMPT, SYSTEM_PROMPT_URI};

use crate::Registry;
use crate::catalog::Catalog;
use crate::environment::{ExecError, Limits};
use crate::llm::Llm;
use crate::providers::{AgentScope, Providers};
use crate::rlm::Context;
use crate::tools::CallError;
use executor::{Executor, RunError, SessionThread};
use mcp_sessions::McpSessions;
use sessions::{CreateError, Sessions};
use slots::{SessionKind, Slot, Slots};

/// How a server runs.
///
/// ```
/// use std::time::Duration;
/// use rlm_registry::serve::ServeOptions;
///
/// let options = ServeOptions { idle_timeout: Duration::from_secs(60), ..ServeOptions::default() };
/// assert_eq!(options.max_sessions, 64);
/// ```
#[derive(Clone)]
pub struct ServeOptions {
    /// Limits of every execution (time, memory, output...).
    pub limits: Limits,
    /// Live sessions at most, MCP sessions (from `initialize` to their end) and
    /// `/v1/sessions` together (default 64); past it a new one is refused.
    pub max_sessions: usize,
    /// Executions running at once, sessions and calls together (default 8); more wait.
    pub max_concurrent_executions: usize,
    /// A session (MCP or JSON API) unused this long ends with its environment
    /// (default 10 min).
    pub idle_timeout: Duration,
    /// How long a call whose HTTP connection dropped keeps running for the client to
    /// resume its stream (`GET /mcp` with `Last-Event-ID`) before it is interrupted
    /// (default 30 s).
    pub disconnect_grace: Duration,
    /// Web origins whose pages may call the server (default none: a request carrying
    /// any other `Origin` gets 403, except the server's own loopback origin,
    /// `http://localhost:PORT` or `http://127.0.0.1:PORT` on the port it serves).
    pub allowed_origins: AllowedOrigins,
    /// The largest request body accepted, in bytes (default 4 MiB).
    pub body_limit_bytes: usize,
    /// The bearer token every HTTP route requires; required on a non-loopback address.
    pub token: Option<String>,
    /// How often a running MCP call whose request carries a `progressToken` sends
    /// `notifications/progress` (default 10 s; clients give up after about a minute of
    /// silence).
    pub progress_interval: Duration,
    /// Give each session its own `store` provider holding at most this many bytes
    /// (`store_set`/`store_get`/`store_ref`; default none). Per session, so that two
    /// sessions never see each other's values.
    pub session_store: Option<usize>,
    /// The model behind `llm_query` and `llm_query_batched` in every session and call
    /// (default none: they fail saying no model is configured). Each call spends the
    /// server owner's tokens, so serving one is a choice: `rlm serve --model`.
    pub llm: Option<Arc<dyn Llm>>,
    /// The served model's context window, in tokens (default unknown): a `llm_query`
    /// prompt that would not fit, with the room a reply needs, is not sent and fails
    /// saying so.
    pub context_window: Option<u64>,
    /// The global `context` every new session starts with (default none); a client may
    /// still set its own. Gathered once (`rlm serve --context`), shared by the sessions.
    pub context: Option<Arc<Context>>,
    /// Journal each session's REPL in this directory (`rlm serve --state-dir`; default
    /// none), a JSON-API session's and an MCP session's `run_lua` one: after a restart
    /// with the same directory, a session comes back with its globals when its id is
    /// used again (for MCP, as `run_lua`'s `session`, the id a result's `_meta` names).
    /// A deleted or expired session leaves no file.
    pub state_dir: Option<std::path::PathBuf>,
}

impl std::fmt::Debug for ServeOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServeOptions")
            .field("limits", &self.limits)
            .field("max_sessions", &self.max_sessions)
            .field("max_concurrent_executions", &self.max_concurrent_executions)
            .field("idle_timeout", &self.idle_timeout)
            .field("disconnect_grace", &self.disconnect_grace)
            .field("allowed_origins", &self.allowed_origins)
            .field("body_limit_bytes", &self.body_limit_bytes)
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .field("progress_interval", &self.progress_interval)
            .field("session_store", &self.session_store)
            .field("llm", &self.llm.as_ref().map(|_| "<set>"))
            .field("context_window", &self.context_window)
            .field(
                "context",
                &self.context.as_ref().map(|context| context.total_bytes()),
            )
            .field("state_dir", &self.state_dir)
            .finish()
    }
}

impl ServeOptions {
    /// What each session's environment is built with.
    fn session_setup(&self) -> SessionSetup {
        SessionSetup {
            limits: self.limits,
            store_bytes: self.session_store,
            llm: self.llm.clone(),
            context_window: self.context_window,
            context: self.context.clone(),
        }
    }
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            limits: Limits::default(),
            max_sessions: 64,
            max_concurrent_executions: 8,
            idle_timeout: Duration::from_secs(600),
            disconnect_grace: Duration::from_secs(30),
            allowed_origins: AllowedOrigins::default(),
            body_limit_bytes: 4 * 1024 * 1024,
            token: None,
            progress_interval: Duration::from_secs(10),
            session_store: None,
            llm: None,
            context_window: None,
            context: None,
            state_dir: None,
        }
    }
}

/// What every handler shares.
pub(crate) struct State {
    functions: Catalog,
    executor: Executor,
    sessions: Sessions,
    /// The cap on MCP and JSON-API sessions together.
    slots: Arc<Slots>,
    /// The live HTTP MCP sessions.
    mcp: McpSessions,
    options: ServeOptions,
}

/// A registry function's result, checked against its documented return type.
pub(crate) struct Called {
    /// The value (empty tables given the kind documented at their place).
    value: Value,
    /// Whether the function documents one return type (the MCP tool then has an
    /// `outputSchema` and answers with `structuredContent`).
    typed: bool,
}

impl State {
    /// Calls the registry function `name` with JSON `arguments` (checked by the tool
    /// machinery), then checks the result against the documented return type: a
    /// mismatch is the function's failure, the same over MCP and the JSON API.
    async fn call_function(
        &self,
        name: &str,
        arguments: Value,
        cancel: &tokio_util::sync::CancellationToken,
    ) -> Result<Called, RunError<CallError>> {
        let output = self
            .functions
            .tool(name)
            .and_then(|tool| tool.output.as_ref());
        let value = self
            .executor
            .call(name.to_string(), arguments, cancel)
            .await?;
        let Some(output) = output else {
            return Ok(Called {
                value,
                typed: false,
            });
        };
        match conform(value, output) {
            Ok(value) => Ok(Called { value, typed: true }),
            Err(message) => Err(RunError::Failed(CallError::Execution {
                name: name.to_string(),
                error: ExecError::Lua {
                    message,
                    hint: None,
                    output: String::new(),
                },
            })),
        }
    }

    /// A new environment in the table, holding `slot` (a JSON-API session's; an MCP
    /// session's environment lives under the MCP session's slot); its id.
    fn new_session(&self, slot: Option<Slot>) -> Result<String, CreateError> {
        let (functions, setup) = (&self.functions, self.options.session_setup());
        let state_dir = self.sessions.state_dir().cloned();
        self.sessions.create(slot, |id| {
            let journal = state_dir.and_then(|dir| dir.path(id));
            SessionThread::start(functions, setup, journal)
        })
    }

    /// The JSON-API session `id` brought back from its journal after a restart, under
    /// the cap; `None` when it has none (or it cannot be read: a warning is logged).
    fn restore_api_session(&self, id: &str) -> Option<sessions::InUse> {
        if !self.sessions.state_dir()?.has(id) {
            return None;
        }
        let slot = self.slots.take(SessionKind::Api)?;
        self.restore_session(id, Some(slot)).ok()
    }

    /// The session `id` brought back from its journal, holding `slot` (none for an MCP
    /// session's environment, which lives under its MCP session's slot).
    fn restore_session(&self, id: &str, slot: Option<Slot>) -> Result<sessions::InUse, String> {
        let gone = || format!("no REPL `{id}` to continue: it was deleted or expired");
        let dir = self.sessions.state_dir().ok_or_else(|| {
            "this server keeps no REPL across a restart (rlm serve --state-dir)".to_string()
        })?;
        if !dir.has(id) {
            return Err(gone());
        }
        let (functions, setup, journal) =
            (&self.functions, self.options.session_setup(), dir.path(id));
        let restored = self
            .sessions
            .create_with_id(id.to_string(), slot, |_| {
                SessionThread::start(functions, setup, journal)
            })
            .map_err(|error| error.to_string())?;
        self.sessions.get(&restored).ok_or_else(gone)
    }

    /// A new JSON-API session, under the cap; its id.
    fn new_api_session(&self) -> Result<String, CreateError> {
        let slot = self.slots.take(SessionKind::Api).ok_or(CreateError::Full {
            kind: SessionKind::Api,
            max: self.slots.max(),
            idle_timeout: self.options.idle_timeout,
        })?;
        self.new_session(Some(slot))
    }
}

/// The journal directory of `options`, opened; one that cannot be is logged and not used.
fn state_dir(options: &ServeOptions) -> Option<Arc<state_dir::StateDir>> {
    let dir = options.state_dir.as_deref()?;
    match state_dir::StateDir::open(dir, options.idle_timeout) {
        Ok(state) => Some(Arc::new(state)),
        Err(error) => {
            tracing::error!(
                "--state-dir {}: {error}; sessions are not journaled",
                dir.display()
            );
            None
        }
    }
}

/// A server for one registry: build it once, then serve over stdio or HTTP.
#[derive(Clone)]
pub struct Server {
    state: Arc<State>,
}

impl Server {
    /// A server exposing `registry`'s functions and the built-ins.
    pub fn new(registry: impl Into<Arc<Registry>>, options: ServeOptions) -> Server {
        Server::with_providers(registry, Arc::new(Providers::builtin()), options)
    }

    /// A server exposing `registry`'s functions and `providers`' host functions (the
    /// host's own as tools; the built-ins inside Lua), as a top-level agent has them.
    pub fn with_providers(
        registry: impl Into<Arc<Registry>>,
        providers: Arc<Providers>,
        options: ServeOptions,
    ) -> Server {
        let functions = Catalog::new(registry, providers, AgentScope::TOP);
        // A stateless call has no `context`: it calls one function with its arguments.
        let stateless = SessionSetup {
            store_bytes: None,
            context: None,
            ..options.session_setup()
        };
        let executor = Executor::new(&functions, stateless, options.max_concurrent_executions);
        let state = State {
            functions,
            executor,
            sessions: Sessions::new(options.idle_timeout).with_state_dir(state_dir(&options)),
            slots: Slots::new(options.max_sessions),
            mcp: McpSessions::default(),
            options,
        };
        Server {
            state: Arc::new(state),
        }
    }

    /// The functions this server exposes: a top-level agent's [`Catalog`].
    pub fn catalog(&self) -> &Catalog {
        &self.state.functions
    }

    /// A handler for one MCP session (each has its own `run_lua` environment), holding
    /// a place under the session cap while it lives.
    pub fn mcp_handler(&self) -> McpHandler {
        McpHandler::new(
            Arc::clone(&self.state),
            self.state.slots.take(SessionKind::Mcp),
        )
    }

    /// Live sessions: MCP sessions and `/v1/sessions` together (what the cap counts).
    pub fn live_sessions(&self) -> usize {
        self.state.slots.total()
    }

    /// Live Lua environments (`run_lua` environments and `/v1/sessions`).
    pub fn live_environments(&self) -> usize {
        self.state.sessions.len()
    }

    /// The HTTP routes: `/mcp` (streamable HTTP), the JSON API under `/v1`, and
    /// `/healthz`, all behind the bearer token when one is set, with the body limit.
    /// `shutdown` ends the MCP sessions' streams. The server's own loopback origin is
    /// recognised only as [`Server::serve_http`] serves the router (it knows each
    /// connection's port); served another way, only the allow-list lets an `Origin` in.
    pub fn router(&self, shutdown: tokio_util::sync::CancellationToken) -> axum::Router {
        http::router(Arc::clone(&self.state), shutdown)
    }

    /// Serves MCP over stdin/stdout (how MCP hosts launch servers) until the client
    /// disconnects or `shutdown` completes.
    pub async fn serve_stdio(self, shutdown: impl Future<Output = ()>) -> io::Result<()> {
        let reaper = self.spawn_reaper();
        let outcome = self.run_stdio(shutdown).await;
        reaper.abort();
        self.state.sessions.clear();
        self.state.mcp.clear();
        outcome
    }

    async fn run_stdio(&self, shutdown: impl Future<Output = ()>) -> io::Result<()> {
        // `shutdown` is polled from the start, not only after the handshake: a signal
        // handler installed on first poll must exist before the client hears from us.
        let mut shutdown = std::pin::pin!(shutdown);
        let handler = self.mcp_handler();
        // The client leaving (stdin at its end) ends the session at once: rmcp would
        // let running calls go on for a few seconds while it drains answers.
        let (stdin, stdout) = rmcp::transport::stdio();
        let stdin = stdio::EndOnEof::new(stdin, handler.ended());
        let handshake = handler.serve((stdin, stdout));
        let running = tokio::select! {
            running = handshake => running.map_err(io::Error::other)?,
            () = &mut shutdown => return Ok(()),
        };
        let cancel = running.cancellation_token();
        tokio::select! {
            done = running.waiting() => { done.map_err(io::Error::other)?; }
            () = shutdown => { cancel.cancel(); }
        }
        Ok(())
    }

    /// Serves HTTP on `listener` until `shutdown` completes, then stops accepting and
    /// finishes the requests under way. A listener on a non-loopback address needs a
    /// token ([`check_bind`]).
    pub async fn serve_http(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> io::Result<()> {
        check_bind(listener.local_addr()?, self.state.options.token.as_deref())
            .map_err(|message| io::Error::new(io::ErrorKind::PermissionDenied, message))?;
        let cancel = tokio_util::sync::CancellationToken::new();
        let router = self.router(cancel.clone());
        let reaper = self.spawn_reaper();
        // Each connection's local port tells a page on the server's own origin from one
        // on another port of the same machine.
        let service = router.into_make_service_with_connect_info::<browser::LocalPort>();
        let result = axum::serve(listener, service)
            .with_graceful_shutdown(async move {
                shutdown.await;
                cancel.cancel();
            })
            .await;
        reaper.abort();
        self.state.mcp.clear();
        self.state.sessions.clear();
        result
    }

    fn spawn_reaper(&self) -> tokio::task::JoinHandle<()> {
        let state = Arc::clone(&self.state);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(state.sessions.reap_interval());
            loop {
                tick.tick().await;
                let reaped = state.sessions.reap();
                if reaped > 0 {
                    tracing::info!("dropped {reaped} idle environment(s)");
                }
                let ended = state.mcp.reap(state.options.idle_timeout).await;
                if ended > 0 {
                    tracing::info!("ended {ended} idle MCP session(s)");
                }
            }
        })
    }
}

/// Refuses a non-loopback address without a token: anyone who can reach it could run
/// code in the sandbox.
///
/// ```
/// use rlm_registry::serve::check_bind;
///
/// assert!(check_bind("127.0.0.1:8765".parse().unwrap(), None).is_ok());
/// assert!(check_bind("0.0.0.0:8765".parse().unwrap(), None).is_err());
/// assert!(check_bind("0.0.0.0:8765".parse().unwrap(), Some("s3cret")).is_ok());
/// ```
pub fn check_bind(address: SocketAddr, token: Option<&str>) -> Result<(), String> {
    let has_token = token.is_some_and(|token| !token.is_empty());
    if address.ip().is_loopback() || has_token {
        return Ok(());
    }
    Err(format!(
        "refusing to serve on {address} without a token: a non-loopback address needs --token or RLM_SERVE_TOKEN"
    ))
}

/// Completes on SIGINT (Ctrl-C) or, on Unix, SIGTERM: the `shutdown` future for
/// [`Server::serve_http`] and [`Server::serve_stdio`].
///
/// ```no_run
/// # async fn run(server: rlm_registry::serve::Server) -> std::io::Result<()> {
/// server.serve_stdio(rlm_registry::serve::shutdown_signal()).await
/// # }
/// ```
pub async fn shutdown_signal() {
    let interrupt = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {}
        () = terminate => {}
    }
}
