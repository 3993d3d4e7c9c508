//! `rlm serve [--http ADDR]`: MCP over stdio, or streamable HTTP MCP and the JSON API.

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use rlm_registry::serve::{AllowedOrigins, ServeOptions, Server, check_bind, shutdown_signal};

use rlm_registry::setup::Defaults;

use super::run_args::{Given, WindowArgs, model};
use super::setup::Stdin;
use super::{
    EXIT_USAGE, EXIT_VIOLATIONS, LlmArgs, Output, SourceArgs, providers_of, with_registry,
};

/// Options of `rlm serve`.
#[derive(Args, Debug, Clone)]
pub(crate) struct ServeArgs {
    #[command(flatten)]
    source: SourceArgs,
    /// The context every new session starts with (a client may set its own).
    #[command(flatten)]
    context: super::setup::ContextArgs,
    /// Serve streamable HTTP MCP at http://ADDR/mcp and the JSON API on ADDR instead of
    /// MCP over stdio; `--http` alone is 127.0.0.1:8765.
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "127.0.0.1:8765")]
    http: Option<SocketAddr>,
    /// The bearer token every HTTP request must carry (default: RLM_SERVE_TOKEN);
    /// required on a non-loopback address.
    #[arg(long, value_name = "TOKEN")]
    token: Option<String>,
    /// Wall-clock seconds one execution may run.
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    time_limit: f64,
    /// Memory one Lua state may use, in MiB.
    #[arg(long, value_name = "MIB", default_value_t = 512)]
    memory_limit: usize,
    /// Live sessions at most (run_lua environments and /v1/sessions).
    #[arg(long, value_name = "N", default_value_t = 64)]
    max_sessions: usize,
    /// Executions running at once; more wait their turn.
    #[arg(long, value_name = "N", default_value_t = 8)]
    max_concurrent: usize,
    /// Seconds a session may stay unused before its environment is dropped.
    #[arg(long, value_name = "SECONDS", default_value_t = 600)]
    idle_timeout: u64,
    /// Seconds a call whose HTTP connection dropped keeps running for the client to
    /// resume its stream before it is interrupted.
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    disconnect_grace: f64,
    /// A web origin whose pages may call the server (also `allow_origins` under `[serve]`
    /// in rlm.toml), e.g. http://localhost:5173 or http://localhost:*. Requests carrying
    /// any other Origin get 403, except the server's own (http://localhost:PORT or
    /// http://127.0.0.1:PORT on the port it serves).
    #[arg(long = "allow-origin", value_name = "URL")]
    allow_origin: Vec<String>,
    /// Journal each session's REPL in DIR (a /v1/sessions session's, an MCP client's
    /// run_lua REPL), so that after a restart with the same DIR a client coming back with
    /// its session id (for MCP, the `rlm/session` a run_lua result names, passed as its
    /// `session` argument) finds its globals as it left them. A deleted or expired
    /// session leaves nothing behind.
    #[arg(long, value_name = "DIR")]
    state_dir: Option<std::path::PathBuf>,
    /// The largest request body, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 4 * 1024 * 1024)]
    body_limit: usize,
    /// With --model or --base-url, `llm_query` in served code calls that model (at the
    /// server owner's expense); without either, it fails saying no model is configured.
    #[command(flatten)]
    llm: LlmArgs,
    #[command(flatten)]
    cache: super::cache::CacheArgs,
    #[command(flatten)]
    window: WindowArgs,
}

impl ServeArgs {
    fn options(&self, config: &rlm_registry::providers::Config) -> Result<ServeOptions, Output> {
        let given = Given {
            llm: Some(&self.llm),
            window: Some(&self.window),
            cache: Some(&self.cache),
            ..Given::default()
        };
        let mut setup = self
            .source
            .run_setup(&given.settings()?, &Defaults::default())?;
        if self.llm.given() {
            setup.ask_server_window();
        }
        let configured_origins = &config.allow_origins;
        let usage = |message: &str| Output::failure(EXIT_USAGE, format!("error: {message}\n"));
        if self.max_sessions == 0 || self.max_concurrent == 0 || self.body_limit == 0 {
            return Err(usage(
                "--max-sessions, --max-concurrent and --body-limit must be at least 1",
            ));
        }
        if !(self.disconnect_grace.is_finite() && self.disconnect_grace >= 0.0) {
            return Err(usage(
                "--disconnect-grace must be a number of seconds, 0 or more",
            ));
        }
        if let Some(dir) = &self.state_dir
            && let Err(error) = std::fs::create_dir_all(dir)
        {
            return Err(usage(&format!("--state-dir {}: {error}", dir.display())));
        }
        let origins = configured_origins.iter().chain(&self.allow_origin);
        let allowed_origins = AllowedOrigins::parse(origins).map_err(|message| usage(&message))?;
        let token = self
            .token
            .clone()
            .or_else(|| std::env::var("RLM_SERVE_TOKEN").ok())
            .filter(|token| !token.is_empty());
        // Gathered once: each new session loads it without reading a file again.
        let stdin = if self.http.is_some() {
            Stdin::Free
        } else {
            Stdin::Transport
        };
        let context = self.context.gather(&self.source, stdin)?;
        Ok(ServeOptions {
            limits: super::setup::limits(self.time_limit, self.memory_limit)?,
            max_sessions: self.max_sessions,
            max_concurrent_executions: self.max_concurrent,
            idle_timeout: Duration::from_secs(self.idle_timeout.max(1)),
            disconnect_grace: Duration::from_secs_f64(self.disconnect_grace),
            allowed_origins,
            body_limit_bytes: self.body_limit,
            token,
            // A model is opt-in: its calls spend the server owner's tokens.
            llm: if self.llm.given() {
                Some(model(&setup)?)
            } else {
                None
            },
            context_window: setup.context_window,
            context: context.map(Arc::new),
            state_dir: self.state_dir.clone(),
            ..ServeOptions::default()
        })
    }
}

pub(crate) fn run(args: &ServeArgs) -> Output {
    // A server runs for days: its memory goes back to the OS between bursts of sessions,
    // which glibc's allocator does and mimalloc's per-thread caches do not.
    rlm_registry::allocator::use_system_allocator();
    // Over stdio, stdout carries JSON-RPC only: logs go to stderr.
    let _ = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .try_init();
    let mut config = match args.source.config() {
        Ok(config) => config,
        Err(output) => return output,
    };
    let mut options = match args.options(&config) {
        Ok(options) => options,
        Err(output) => return output,
    };
    if let Some(address) = args.http
        && let Err(message) = check_bind(address, options.token.as_deref())
    {
        return Output::failure(EXIT_USAGE, format!("error: {message}\n"));
    }
    // The store is per session: two clients never see each other's values.
    options.session_store = config.store.take();
    let providers = match providers_of(&config) {
        Ok(providers) => Arc::new(providers),
        Err(output) => return output,
    };
    with_registry(&args.source, |registry| {
        let runtime = match tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
        {
            Ok(runtime) => runtime,
            Err(error) => {
                return Output::failure(
                    EXIT_VIOLATIONS,
                    format!("error: cannot start the runtime: {error}\n"),
                );
            }
        };
        let server = Server::with_providers(registry.clone(), providers, options);
        let served = runtime.block_on(async {
            match args.http {
                None => server.serve_stdio(shutdown_signal()).await,
                Some(address) => {
                    let listener = tokio::net::TcpListener::bind(address).await?;
                    let bound = listener.local_addr()?;
                    tracing::info!(
                        "serving MCP at http://{bound}/mcp and the JSON API at http://{bound}/v1"
                    );
                    server.serve_http(listener, shutdown_signal()).await
                }
            }
        });
        // Session threads may still be finishing an interrupted call: do not wait.
        runtime.shutdown_timeout(Duration::from_secs(1));
        match served {
            Ok(()) => Output::success(String::new()),
            Err(error) => Output::failure(EXIT_VIOLATIONS, format!("error: {error}\n")),
        }
    })
}
