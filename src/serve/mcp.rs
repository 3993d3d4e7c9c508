//! The MCP server: a hand-written [`ServerHandler`] whose tool list is built at run time
//! from the [`Catalog`](super::Catalog), plus `run_lua` and `search_functions`.
//!
//! Every failure a caller can cause (bad arguments, an unknown tool, a Lua error, a limit)
//! is a tool result with `isError: true` and a message, never a protocol error or a
//! dropped connection.

use std::borrow::Cow;
use std::sync::Arc;

#[allow(deprecated)] // logging: see mcp_logging
use rmcp::model::SetLevelRequestParams;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, GetPromptRequestParams,
    GetPromptResponse, Implementation, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam,
    ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities,
    ServerConfig, Tool as McpTool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use super::State;
use super::executor::RunError;
use super::mcp_content;
use super::mcp_gate::RESERVED;
use super::mcp_logging::LogLevel;
use super::mcp_sessions::McpSession;
use super::sessions::{CreateError, InUse};
use super::slots::{SessionKind, Slot};

/// The tool that runs Lua in the session's environment.
pub const RUN_LUA: &str = "run_lua";
/// The tool that searches the registry.
pub const SEARCH_FUNCTIONS: &str = "search_functions";

/// One MCP session's handler: the shared server state and the session (its place under
/// the cap, its own `run_lua` environment, created on first use, and its running calls).
#[derive(Clone)]
pub struct McpHandler {
    state: Arc<State>,
    session: Arc<McpSession>,
    log_level: LogLevel,
}

impl McpHandler {
    /// A handler holding `slot` (none when the cap was reached for a stdio session,
    /// which is the process's only one).
    pub(super) fn new(state: Arc<State>, slot: Option<Slot>) -> McpHandler {
        let session = McpSession::new(Arc::clone(&state), slot);
        McpHandler {
            state,
            session,
            log_level: LogLevel::default(),
        }
    }

    /// The handler for a new HTTP session, with the slot the `initialize` request
    /// reserved ([`RESERVED`]); it leaves its session there to be linked to its id.
    /// Without a reservation it takes a slot itself, and fails past the cap.
    pub(super) fn for_http(state: &Arc<State>) -> std::io::Result<McpHandler> {
        let reserved = RESERVED
            .try_with(|reserved| reserved.borrow_mut().slot.take())
            .ok()
            .flatten();
        let Some(slot) = reserved.or_else(|| state.slots.take(SessionKind::Mcp)) else {
            let full = CreateError::Full {
                kind: SessionKind::Mcp,
                max: state.slots.max(),
                idle_timeout: state.options.idle_timeout,
            };
            return Err(std::io::Error::other(full.to_string()));
        };
        let handler = McpHandler::new(Arc::clone(state), Some(slot));
        let _ = RESERVED.try_with(|reserved| {
            reserved.borrow_mut().session = Some(Arc::clone(&handler.session));
        });
        Ok(handler)
    }

    /// Fired when the session ends.
    pub(super) fn ended(&self) -> CancellationToken {
        self.session.ended().clone()
    }

    fn tool_list(&self) -> Vec<McpTool> {
        let mut tools: Vec<McpTool> = self
            .state
            .functions
            .tools()
            .into_iter()
            // The server's own tools win over registry functions of the same name.
            .filter(|tool| tool.name != RUN_LUA && tool.name != SEARCH_FUNCTIONS)
            .map(|tool| {
                let mcp = McpTool::new(
                    tool.name.clone(),
                    tool.description.clone(),
                    object(&tool.parameters),
                );
                match tool.output_schema() {
                    Some(output) => mcp.with_raw_output_schema(object(&output)),
                    None => mcp,
                }
            })
            .collect();
        tools.push(run_lua_tool());
        tools.push(search_functions_tool());
        tools
    }

    async fn call(
        &self,
        name: &str,
        arguments: Value,
        peer: &Peer<RoleServer>,
        cancel: &CancellationToken,
    ) -> CallToolResult {
        match name {
            RUN_LUA => self.run_lua(arguments, peer, cancel).await,
            SEARCH_FUNCTIONS => self.search_functions(&arguments),
            _ => self.call_function(name, arguments, cancel).await,
        }
    }

    async fn call_function(
        &self,
        name: &str,
        arguments: Value,
        cancel: &CancellationToken,
    ) -> CallToolResult {
        // The tool machinery answers unknown names and bad arguments with a clear message.
        match self.state.call_function(name, arguments, cancel).await {
            Ok(called) if called.typed => {
                CallToolResult::structured(json!({"result": called.value}))
            }
            Ok(called) => {
                CallToolResult::success(vec![ContentBlock::text(called.value.to_string())])
            }
            Err(RunError::Failed(error)) => error_result(error.to_string()),
            Err(RunError::Unavailable(message)) => error_result(message),
        }
    }

    async fn run_lua(
        &self,
        arguments: Value,
        peer: &Peer<RoleServer>,
        cancel: &CancellationToken,
    ) -> CallToolResult {
        let (code, context, wanted) = match run_lua_arguments(&arguments) {
            Ok(parsed) => parsed,
            Err(message) => return error_result(message),
        };
        let (in_use, expired) = match self.session_environment(wanted.as_deref()) {
            Ok(found) => found,
            Err(message) => return error_result(message),
        };
        if expired {
            return error_result(format!(
                "this session's Lua environment was idle longer than {:.1} s and was dropped with its variables; call run_lua again to start a fresh one",
                self.state.options.idle_timeout.as_secs_f64()
            ));
        }
        let (observer, forwarding) = self.log_level.forward_output(peer).unzip();
        let result = self
            .state
            .executor
            .execute(&in_use.session().thread, code, context, observer, cancel)
            .await;
        let abort = forwarding
            .as_ref()
            .map(tokio::task::JoinHandle::abort_handle);
        let notices = async {
            if let Some(forwarding) = forwarding {
                // The messages go out before the result.
                let _ = forwarding.await;
            }
            if let Err(RunError::Failed(error)) = &result {
                let message = format!("the run stopped: {}", error.message());
                self.log_level.warn(peer, &message).await;
            }
        };
        // Once the session has ended (its client left, or deleted it), nothing reads the
        // notices, and rmcp holds the session open until this answer is in: sending them
        // would wait for a reader that is gone.
        tokio::select! {
            () = notices => {}
            () = self.session.ended().cancelled() => {
                if let Some(abort) = abort {
                    abort.abort();
                }
            }
        }
        let mut answer = match result {
            Ok(output) => CallToolResult::success(vec![ContentBlock::text(output)]),
            Err(RunError::Failed(error)) => {
                let mut text = error.output().to_string();
                if !text.is_empty() && !text.ends_with('\n') {
                    text.push('\n');
                }
                text.push_str(error.message());
                error_result(text)
            }
            Err(RunError::Unavailable(message)) => error_result(message),
        };
        // A journaled REPL is named, for the client to come back to after a restart.
        if self.state.sessions.state_dir().is_some()
            && let Ok(id) = self.session.environment.lock()
            && let Some(id) = id.as_deref()
        {
            let mut meta = Map::new();
            meta.insert(SESSION_META.to_string(), Value::String(id.to_string()));
            answer.meta = Some(rmcp::model::MetaObject(meta));
        }
        answer
    }

    /// The session's environment, created on first use, or the journaled one `wanted`
    /// names (a client back after a restart). `expired` is true (once) when the
    /// environment the session had was dropped for idleness.
    fn session_environment(&self, wanted: Option<&str>) -> Result<(InUse, bool), String> {
        if self.session.ended().is_cancelled() {
            return Err("this MCP session has ended; initialize a new one".to_string());
        }
        let mut id = self
            .session
            .environment
            .lock()
            .map_err(|_| "the session is unusable after an internal error".to_string())?;
        if let Some(wanted) = wanted
            && id.as_deref() != Some(wanted)
        {
            // A REPL is never shared: only one that no live session holds comes back.
            if self.state.sessions.is_live(wanted) {
                return Err(format!(
                    "the REPL `{wanted}` is in use by another session; call run_lua without `session` to start a fresh one"
                ));
            }
            let in_use = self
                .state
                .restore_session(wanted, None)
                .map_err(|message| {
                    format!("{message}; call run_lua without `session` to start a fresh one")
                })?;
            if let Some(old) = id.replace(wanted.to_string()) {
                self.state.sessions.remove(&old);
            }
            return Ok((in_use, false));
        }
        let previous = id.take();
        if let Some(existing) = previous.as_deref()
            && let Some(in_use) = self.state.sessions.get(existing)
        {
            *id = previous;
            return Ok((in_use, false));
        }
        let fresh = self.state.new_session(None).map_err(|e| e.to_string())?;
        let in_use = self
            .state
            .sessions
            .get(&fresh)
            .ok_or_else(|| "the session ended while starting".to_string())?;
        *id = Some(fresh);
        Ok((in_use, previous.is_some()))
    }

    fn search_functions(&self, arguments: &Value) -> CallToolResult {
        match search_arguments(arguments) {
            Ok((query, max_results, capability)) => {
                let results = super::functions::search(
                    &self.state.functions,
                    &query,
                    max_results,
                    capability,
                );
                CallToolResult::structured(json!({"results": results}))
            }
            Err(message) => error_result(message),
        }
    }
}

/// A tool error the model reads.
fn error_result(message: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message)])
}

fn object(value: &Value) -> Arc<Map<String, Value>> {
    Arc::new(value.as_object().cloned().unwrap_or_default())
}

/// The `_meta` key of a `run_lua` result naming its REPL, under `--state-dir`.
pub const SESSION_META: &str = "rlm/session";

/// `{code, context?, session?}`.
fn run_lua_arguments(
    arguments: &Value,
) -> Result<(String, Option<String>, Option<String>), String> {
    let mut rest = arguments.clone();
    let session = match rest
        .as_object_mut()
        .and_then(|object| object.remove("session"))
    {
        None | Some(Value::Null) => None,
        Some(Value::String(session)) => Some(session),
        Some(other) => {
            return Err(format!(
                "invalid arguments for `{RUN_LUA}`: $.session: expected a string, got {other}"
            ));
        }
    };
    let (code, context) = code_arguments(RUN_LUA, &rest)?;
    Ok((code, context, session))
}

fn run_lua_tool() -> McpTool {
    let schema = json!({
        "type": "object",
        "properties": {
            "code": {"type": "string", "description": "Lua 5.4 code; what it prints is returned"},
            "context": {"type": "string", "description": "Sets the global `context` before the code runs"},
            "session": {"type": "string", "description": "Continue the REPL an earlier result named (its _meta's rlm/session), after the server restarted; only on a server that keeps its sessions (rlm serve --state-dir)"},
        },
        "required": ["code"],
        "additionalProperties": false,
    });
    McpTool::new(
        RUN_LUA,
        "Runs Lua 5.4 code in a sandboxed environment that belongs to this session and keeps its globals between calls, like a REPL. The registry's functions and the built-ins (help, fn_search, token_count, ...) are globals; call help() to list them. Returns what the code printed; a Lua error or a limit (time, memory, output) is a tool error.",
        object(&schema),
    )
}

fn search_functions_tool() -> McpTool {
    let schema = json!({
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What you want to do, in words, or a function name"},
            "max_results": {"type": "integer", "minimum": 1, "maximum": super::functions::MAX_SEARCH_RESULTS, "description": "The most results (default 5)"},
            "capability": {"type": "string", "description": "Keep only functions with this capability, e.g. \"search\""},
        },
        "required": ["query"],
        "additionalProperties": false,
    });
    McpTool::new(
        SEARCH_FUNCTIONS,
        "Searches the registry's functions for a task, best match first: name, signature, summary, confidence and why it matched.",
        object(&schema),
    )
}

/// `{code, context?}` (for `run_lua` and a session's `exec`, named `what` in errors).
pub(super) fn code_arguments(
    what: &str,
    arguments: &Value,
) -> Result<(String, Option<String>), String> {
    let invalid = |detail: String| format!("invalid arguments for `{what}`: {detail}");
    let object = arguments_object(what, arguments, &["code", "context"])?;
    let code = match object.get("code") {
        Some(Value::String(code)) => code.clone(),
        Some(other) => return Err(invalid(format!("$.code: expected a string, got {other}"))),
        None => return Err(invalid("$: missing required property `code`".to_string())),
    };
    let context = match object.get("context") {
        None | Some(Value::Null) => None,
        Some(Value::String(context)) => Some(context.clone()),
        Some(other) => {
            return Err(invalid(format!(
                "$.context: expected a string, got {other}"
            )));
        }
    };
    Ok((code, context))
}

/// `{query, max_results?, capability?}`.
pub(super) fn search_arguments(
    arguments: &Value,
) -> Result<(String, usize, Option<String>), String> {
    let invalid = |detail: String| format!("invalid arguments for `search_functions`: {detail}");
    let object = arguments_object(
        SEARCH_FUNCTIONS,
        arguments,
        &["query", "max_results", "capability"],
    )?;
    let query = match object.get("query") {
        Some(Value::String(query)) => query.clone(),
        Some(other) => return Err(invalid(format!("$.query: expected a string, got {other}"))),
        None => return Err(invalid("$: missing required property `query`".to_string())),
    };
    let max_results = match object.get("max_results") {
        None | Some(Value::Null) => 5,
        Some(value) => match value.as_u64() {
            Some(n) if n >= 1 => usize::try_from(n).unwrap_or(usize::MAX),
            _ => {
                return Err(invalid(format!(
                    "$.max_results: expected a positive integer, got {value}"
                )));
            }
        },
    };
    let capability = match object.get("capability") {
        None | Some(Value::Null) => None,
        Some(Value::String(capability)) => Some(capability.clone()),
        Some(other) => {
            return Err(invalid(format!(
                "$.capability: expected a string, got {other}"
            )));
        }
    };
    Ok((query, max_results, capability))
}

/// The arguments as an object with only `known` keys.
fn arguments_object<'a>(
    tool: &str,
    arguments: &'a Value,
    known: &[&str],
) -> Result<Cow<'a, Map<String, Value>>, String> {
    let object = match arguments {
        Value::Object(object) => Cow::Borrowed(object),
        Value::Null => Cow::Owned(Map::new()),
        other => {
            return Err(format!(
                "invalid arguments for `{tool}`: $: expected an object of named arguments, got {other}"
            ));
        }
    };
    if let Some(unknown) = object.keys().find(|key| !known.contains(&key.as_str())) {
        return Err(format!(
            "invalid arguments for `{tool}`: $: unknown property `{unknown}` (parameters: {})",
            known.join(", ")
        ));
    }
    Ok(object)
}

impl ServerHandler for McpHandler {
    #[allow(deprecated)] // enable_logging: see mcp_logging
    fn get_info(&self) -> ServerConfig {
        // Logging is deprecated from protocol 2026-07-28, which this server does not
        // negotiate (`supported_protocol_versions`).
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_resources()
            .enable_prompts()
            .enable_logging()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("rlm", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Lua functions for working over large texts. Call a function directly as a tool, \
                 find one with search_functions, or write Lua with run_lua (a sandboxed REPL \
                 whose variables persist in this session). Each function's documentation and \
                 source are resources (rlm://functions/NAME); the prompt `rlm` starts an RLM \
                 conversation about a question.",
            )
    }

    /// Only the protocol versions with sessions: `run_lua`'s state belongs to one.
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::known_up_to(
            &ProtocolVersion::LATEST_WITH_INITIALIZE,
        ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        // One page, no cursor: many clients ignore `nextCursor`.
        Ok(ListToolsResult::with_all_items(self.tool_list()))
    }

    #[allow(deprecated)] // SetLevelRequestParams: see mcp_logging
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.log_level.set(request.level);
        Ok(())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(ListResourcesResult::with_all_items(mcp_content::resources(
            &self.state,
        )))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(
            mcp_content::templates(),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        mcp_content::read(&self.state, &request.uri).map(Into::into)
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Ok(ListPromptsResult::with_all_items(mcp_content::prompts()))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        mcp_content::get_prompt(&self.state, &request.name, request.arguments.as_ref())
            .map(Into::into)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = request.arguments.map(Value::Object).unwrap_or(Value::Null);
        let every = self.state.options.progress_interval;
        let progress = context.meta.get_progress_token().map(|token| {
            let peer = context.peer.clone();
            tokio::spawn(async move {
                let mut ticks = 0.0;
                loop {
                    tokio::time::sleep(every).await;
                    ticks += 1.0;
                    let mut note = ProgressNotificationParam::new(token.clone(), ticks);
                    note.message = Some("still running".to_string());
                    if peer.notify_progress(note).await.is_err() {
                        return;
                    }
                }
            })
        });
        let request_id = serde_json::to_string(&context.id).unwrap_or_default();
        let running = self.session.begin_call(request_id, &context.ct);
        let result = self
            .call(&request.name, arguments, &context.peer, running.token())
            .await;
        drop(running);
        if let Some(progress) = progress {
            progress.abort();
        }
        Ok(result.into())
    }
}
