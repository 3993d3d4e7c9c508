//! `rlm acp`: the RLM as an Agent Client Protocol agent (JSON-RPC 2.0 over stdio), for
//! editors (Zed, JetBrains, Neovim and Emacs clients) and for harnesses that drive
//! agents through ACP (verifiers' `ACPHarness`).
//!
//! The command-line tool and the Python package (`python -m rlm_registry acp`) both
//! configure an [`Rlm`] as they do for `ask`, then hand it to [`AcpAgent::serve`].
//!
//! - `initialize` answers protocol version 1: prompts may hold text, embedded resources
//!   and resource links (no images, no audio); MCP servers a client offers are not
//!   connected (`mcpCapabilities` all false); `loadSession` is true with a state folder
//!   ([`AcpAgent::state_dir`]), false without.
//! - `session/new` opens a session whose context is `--context`, else the `cwd` folder
//!   as a corpus, on a thread of its own; its REPL state lasts as long as the session.
//! - `session/prompt` runs the loop ([`RlmSession::ask`](crate::rlm::RlmSession::ask)):
//!   the text blocks are the question, resources become documents of the context. While
//!   it runs, `session/update`s show the model's thinking, its prose and each code block
//!   as a tool call (see `updates`); the answer is the agent's last message, and the
//!   response's `stopReason` is `end_turn`, `max_turn_requests` (the iteration cap),
//!   `max_tokens` (a budget or the window spent) or `cancelled`. A run that cannot be
//!   done (the model server fails) is a JSON-RPC error naming the cause.
//! - `session/cancel` stops the running prompt at its next safe point.
//! - `session/load` (with a state folder) rebuilds a kept session prompt by prompt from
//!   its record, with no model request ([`Rlm::playing_back`]): the REPL state and the
//!   conversation come back, and the history is streamed as it was (each prompt's blocks
//!   as `user_message_chunk`s, then its updates), before the response. Without a state
//!   folder it is `-32601`; an unknown session is `-32002`; a session whose context or
//!   registry changed since is refused (`-32602`).
//!
//! The reader never waits on a run: each session's prompts run on its thread, so a
//! cancellation reaches a running prompt, and a second prompt in a session that is
//! answering one is refused (`-32600`). When the input ends, every run is cancelled and
//! [`AcpAgent::serve`] returns once the sessions' threads have ended.
//!
//! ```no_run
//! use std::sync::Arc;
//! use rlm_registry::{Registry, acp::AcpAgent, llm::LlmClient, rlm::Rlm};
//!
//! let rlm = Rlm::new(Arc::new(LlmClient::from_env()?), Registry::baked().clone(), 10);
//! let stdin = std::io::stdin().lock();
//! AcpAgent::new(rlm).serve(stdin, std::io::stdout())?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Files: `schema` (the protocol's messages, typed), `wire` (JSON-RPC lines), `session`
//! (a session's thread), `content` (a prompt's blocks), `updates` (records → updates),
//! `store` (the sessions kept under the state folder).

mod content;
mod schema;
mod session;
mod store;
mod updates;
mod wire;

use std::io::{self, BufRead, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::Value as Json;

use crate::rlm::Rlm;

use schema::{
    AgentCapabilities, CancelNotification, Implementation, InitializeResponse, LoadSessionRequest,
    McpCapabilities, NewSessionRequest, PROTOCOL_VERSION, PromptCapabilities, PromptRequest,
};
use session::{Job, Opening, Shared};
use store::Store;
use wire::{INVALID_PARAMS, Incoming, METHOD_NOT_FOUND, Outgoing, RpcError};

/// How long [`AcpAgent::serve`] waits, once its input has ended, for the sessions' runs
/// to stop (each is cancelled; a model call in flight is given up within 20 ms).
const WIND_DOWN: Duration = Duration::from_secs(5);

/// An ACP agent: each session runs the loop `rlm` configures, over the session's
/// context.
pub struct AcpAgent {
    rlm: Rlm,
    context_paths: Vec<PathBuf>,
    state_dir: Option<PathBuf>,
}

impl AcpAgent {
    /// An agent whose sessions run `rlm` (its model, limits and budgets, per prompt).
    pub fn new(rlm: Rlm) -> AcpAgent {
        AcpAgent {
            rlm,
            context_paths: Vec::new(),
            state_dir: None,
        }
    }

    /// The context of every session (`--context`), over the `cwd` a client sends.
    pub fn context_paths(mut self, paths: Vec<PathBuf>) -> AcpAgent {
        self.context_paths = paths;
        self
    }

    /// Keeps every session under `dir` (made if missing), one folder each: its prompts
    /// and their runs' traces, written as they run, so that `session/load` (advertised
    /// as `loadSession: true`) rebuilds it, in this process or a later one.
    pub fn state_dir(mut self, dir: impl Into<PathBuf>) -> AcpAgent {
        self.state_dir = Some(dir.into());
        self
    }

    /// Answers the client on `input`/`output` until `input` ends; then cancels what
    /// runs and returns once the sessions' threads have ended (or after a few seconds).
    /// Only reading `input` fails; a client that stops reading `output` is left be.
    /// `input` is read on the calling thread (a locked stdin will do); `output` is
    /// written from the sessions' threads too.
    pub fn serve(self, input: impl BufRead, output: impl Write + Send + 'static) -> io::Result<()> {
        let store = self.state_dir.map(Store::new);
        let (shared, ended) =
            Shared::new(self.rlm, self.context_paths, store, Outgoing::new(output));
        let read = read_lines(input, &shared);
        shared.close();
        // Each session thread holds a sender: all dropped, the channel disconnects.
        let _ = ended.recv_timeout(WIND_DOWN);
        read
    }
}

/// Reads and dispatches messages until the input ends.
fn read_lines(mut input: impl BufRead, shared: &Arc<Shared>) -> io::Result<()> {
    let mut line = Vec::new();
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line)? == 0 {
            return Ok(());
        }
        let text = String::from_utf8_lossy(&line);
        if text.trim().is_empty() {
            continue;
        }
        match wire::read(&text) {
            Ok(Incoming::Request { id, method, params }) => {
                if let Err((id, error)) = request(shared, id, &method, params) {
                    shared.out.error(&id, &error);
                }
            }
            Ok(Incoming::Notification { method, params }) => notification(shared, &method, params),
            Ok(Incoming::Response) => {}
            Err((id, error)) => shared.out.error(&id, &error),
        }
    }
}

/// Serves request `method`; its answer is sent here or, for a session's work, by the
/// session's thread.
fn request(
    shared: &Arc<Shared>,
    id: Json,
    method: &str,
    params: Json,
) -> Result<(), (Json, RpcError)> {
    match method {
        "initialize" => {
            shared.out.respond(&id, &initialize(shared.store.is_some()));
            Ok(())
        }
        "session/new" => {
            let new: NewSessionRequest = parse(params).map_err(|e| (id.clone(), e))?;
            shared.open(id, Opening::New { cwd: new.cwd });
            Ok(())
        }
        "session/load" if shared.store.is_none() => Err((id, session::no_state_dir())),
        "session/load" => {
            let load: LoadSessionRequest = parse(params).map_err(|e| (id.clone(), e))?;
            let opening = Opening::Load {
                session_id: load.session_id,
                cwd: load.cwd,
            };
            shared.open(id, opening);
            Ok(())
        }
        "session/prompt" => {
            let prompt: PromptRequest = parse(params).map_err(|e| (id.clone(), e))?;
            let job = Job {
                id,
                prompt: prompt.prompt,
            };
            shared.prompt(&prompt.session_id, job)
        }
        _ => Err((
            id,
            RpcError::new(METHOD_NOT_FOUND, format!("method not found: {method}")),
        )),
    }
}

/// Serves notification `method`; nothing is answered, a problem is logged on stderr.
fn notification(shared: &Shared, method: &str, params: Json) {
    let result = match method {
        "session/cancel" => {
            parse::<CancelNotification>(params).and_then(|cancel| shared.cancel(&cancel.session_id))
        }
        _ => Ok(()),
    };
    if let Err(error) = result {
        tracing::warn!("{method}: {}", error.message);
    }
}

fn parse<T: DeserializeOwned>(params: Json) -> Result<T, RpcError> {
    serde_json::from_value(params)
        .map_err(|error| RpcError::new(INVALID_PARAMS, format!("invalid params: {error}")))
}

fn initialize(load_session: bool) -> InitializeResponse {
    InitializeResponse {
        protocol_version: PROTOCOL_VERSION,
        agent_capabilities: AgentCapabilities {
            load_session,
            prompt_capabilities: PromptCapabilities {
                image: false,
                audio: false,
                embedded_context: true,
            },
            mcp_capabilities: McpCapabilities {
                http: false,
                sse: false,
            },
        },
        agent_info: Implementation {
            name: "rlm".to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
        },
        auth_methods: Vec::new(),
    }
}
