//! The tool-calling dispatch loop: send the conversation with the tool
//! definitions; while the model answers with tool calls, run them and send the
//! results back; stop at a text answer or at the iteration cap.
//!
//! - The cap is explicit: [`ToolDispatcher::new`] takes it, and there is no `Default`;
//!   [`ToolDispatcher::with_default_iterations`] uses [`DEFAULT_MAX_ITERATIONS`] (10).
//!   One iteration is one model call.
//! - At iteration 5 a `tracing` warning is logged and the loop goes on; when the cap
//!   is reached while the model still asks for tools, an error is logged and
//!   [`DispatchError::IterationLimit`] is returned, with the conversation so far.
//! - A handler's error, an unknown tool name, arguments that are not JSON or do not
//!   match the schema, and a registry function's Lua error all go back to the model
//!   as the tool's result (`error: …`), not as Rust errors, so it can adapt.
//!
//! ```
//! use serde_json::json;
//! use rlm_registry::llm::{Message, LlmError, ToolCall, ToolCompletion};
//! use rlm_registry::tools::{ToolDispatcher, ToolModel};
//!
//! /// Asks for `add` once, then answers with the last tool result.
//! struct Scripted;
//! impl ToolModel for Scripted {
//!     fn complete_with_tools(&self, messages: &[Message], _tools: &[serde_json::Value])
//!         -> Result<ToolCompletion, LlmError> {
//!         match messages.last().and_then(|m| m.tool_call_id.as_ref()) {
//!             None => Ok(ToolCompletion::calls(vec![ToolCall {
//!                 id: "1".into(), name: "add".into(), arguments: r#"{"a":2,"b":3}"#.into(),
//!             }])),
//!             Some(_) => Ok(ToolCompletion::text(messages.last().unwrap().content.clone().unwrap())),
//!         }
//!     }
//! }
//!
//! let mut dispatcher = ToolDispatcher::new(4);
//! dispatcher.register_handler("add", "Adds two integers.",
//!     json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}),
//!     |args| Ok(json!(args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0))));
//! let conversation = dispatcher.dispatch(vec![Message::user("2 + 3?")], &Scripted)?;
//! assert_eq!(conversation.last().unwrap().content.as_deref(), Some("5"));
//! # Ok::<(), rlm_registry::tools::DispatchError>(())
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde_json::{Value, json};

use super::call::{CallError, ToolCaller};
use crate::Registry;
use crate::catalog::Catalog;
use crate::environment::{Environment, Limits, SetupError};
use crate::llm::{LlmClient, LlmError, Message, ToolCall, ToolCompletion};
use crate::providers::{AgentScope, Providers};
use crate::spec::NotExportable;

/// The cap [`ToolDispatcher::with_default_iterations`] uses.
pub const DEFAULT_MAX_ITERATIONS: u32 = 10;

/// The iteration at which a warning is logged.
pub const WARN_AT_ITERATION: u32 = 5;

/// A model that can answer with tool calls: [`LlmClient`], or a scripted fake.
pub trait ToolModel {
    /// Answers `messages`, offered `tools` (OpenAI tool definitions).
    fn complete_with_tools(
        &self,
        messages: &[Message],
        tools: &[Value],
    ) -> Result<ToolCompletion, LlmError>;
}

impl ToolModel for LlmClient {
    fn complete_with_tools(
        &self,
        messages: &[Message],
        tools: &[Value],
    ) -> Result<ToolCompletion, LlmError> {
        LlmClient::complete_with_tools(self, messages, tools)
    }
}

impl<T: ToolModel + ?Sized> ToolModel for &T {
    fn complete_with_tools(
        &self,
        messages: &[Message],
        tools: &[Value],
    ) -> Result<ToolCompletion, LlmError> {
        (**self).complete_with_tools(messages, tools)
    }
}

/// Why [`ToolDispatcher::dispatch`] stopped without a text answer.
#[derive(Debug)]
pub enum DispatchError {
    /// The model still asked for tools after `max_iterations` calls.
    IterationLimit {
        /// The cap.
        max_iterations: u32,
        /// The conversation so far, tool results included.
        messages: Vec<Message>,
    },
    /// The model could not be reached or answered nonsense.
    Llm(LlmError),
    /// The sandbox for registry functions could not be created.
    Setup(SetupError),
}

impl fmt::Display for DispatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DispatchError::IterationLimit { max_iterations, .. } => write!(
                f,
                "the model was still calling tools after {max_iterations} iterations"
            ),
            DispatchError::Llm(error) => write!(f, "the model call failed: {error}"),
            DispatchError::Setup(error) => error.fmt(f),
        }
    }
}

impl std::error::Error for DispatchError {}

/// A Rust tool handler: JSON arguments in, JSON result or an error message out.
pub type Handler = Box<dyn Fn(Value) -> Result<Value, String> + Send + Sync>;

enum Runner {
    Handler(Handler),
    Catalog,
}

struct Registered {
    definition: Value,
    runner: Runner,
}

/// Named tools and the loop that lets a model call them. See the [module](self) docs.
pub struct ToolDispatcher {
    max_iterations: u32,
    tools: BTreeMap<String, Registered>,
    catalog: Option<(Catalog, Limits)>,
}

impl ToolDispatcher {
    /// A dispatcher that calls the model at most `max_iterations` times per
    /// [`dispatch`](Self::dispatch) (0 is taken as 1).
    pub fn new(max_iterations: u32) -> ToolDispatcher {
        ToolDispatcher {
            max_iterations: max_iterations.max(1),
            tools: BTreeMap::new(),
            catalog: None,
        }
    }

    /// [`ToolDispatcher::new`] with [`DEFAULT_MAX_ITERATIONS`] (10).
    pub fn with_default_iterations() -> ToolDispatcher {
        ToolDispatcher::new(DEFAULT_MAX_ITERATIONS)
    }

    /// The cap.
    pub fn max_iterations(&self) -> u32 {
        self.max_iterations
    }

    /// Registers a Rust handler under `name` (replacing any tool of that name), with
    /// its description and JSON Schema `parameters`. The handler gets the parsed
    /// arguments; its `Err` goes back to the model as the result.
    pub fn register_handler(
        &mut self,
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: Value,
        handler: impl Fn(Value) -> Result<Value, String> + Send + Sync + 'static,
    ) {
        let name = name.into();
        let definition = json!({
            "type": "function",
            "function": {"name": name, "description": description.into(), "parameters": parameters},
        });
        self.tools.insert(
            name,
            Registered {
                definition,
                runner: Runner::Handler(Box::new(handler)),
            },
        );
    }

    /// Registers every exportable function of `registry` (replacing tools of the same
    /// names), called with schema-checked arguments in one sandboxed environment per
    /// [`dispatch`](Self::dispatch), each call under `limits`. Returns the functions
    /// left out and why. Only one registry at a time: a second call replaces the first.
    pub fn register_registry(
        &mut self,
        registry: impl Into<Arc<Registry>>,
        limits: Limits,
    ) -> Vec<NotExportable> {
        self.register_catalog(
            Catalog::new(registry, Providers::builtin_shared(), AgentScope::TOP),
            limits,
        )
    }

    /// Registers the functions of `catalog` that are tools, as
    /// [`ToolCaller::over`](super::ToolCaller::over) exposes them: the registry's and
    /// the host's own providers' (not the built-ins). Replaces an earlier registry or
    /// catalog.
    pub fn register_catalog(&mut self, catalog: Catalog, limits: Limits) -> Vec<NotExportable> {
        self.tools
            .retain(|_, tool| !matches!(tool.runner, Runner::Catalog));
        let mut skipped = Vec::new();
        for callable in catalog.exported(false) {
            match callable.tool() {
                Ok(tool) => {
                    self.tools.insert(
                        tool.name.clone(),
                        Registered {
                            definition: tool.openai(),
                            runner: Runner::Catalog,
                        },
                    );
                }
                Err(reason) => skipped.push(reason.clone()),
            }
        }
        self.catalog = Some((catalog, limits));
        skipped
    }

    /// The registered tools as OpenAI definitions, in name order.
    pub fn definitions(&self) -> Vec<Value> {
        self.tools.values().map(|t| t.definition.clone()).collect()
    }

    /// Runs the loop from `messages` and returns the whole conversation, ending with
    /// the model's text answer.
    pub fn dispatch(
        &self,
        messages: Vec<Message>,
        client: &dyn ToolModel,
    ) -> Result<Vec<Message>, DispatchError> {
        let definitions = self.definitions();
        let mut messages = messages;
        let mut caller: Option<ToolCaller> = None;
        for iteration in 1..=self.max_iterations {
            if iteration == WARN_AT_ITERATION {
                tracing::warn!(
                    iteration,
                    max_iterations = self.max_iterations,
                    "tool dispatch loop at iteration {iteration} of {}",
                    self.max_iterations
                );
            }
            let completion = client
                .complete_with_tools(&messages, &definitions)
                .map_err(DispatchError::Llm)?;
            if completion.tool_calls.is_empty() {
                messages.push(Message::assistant(completion.content.unwrap_or_default()));
                return Ok(messages);
            }
            let calls = completion.tool_calls;
            messages.push(Message::assistant_tool_calls(
                completion.content,
                calls.clone(),
            ));
            for call in &calls {
                let result = self.run(call, &mut caller)?;
                messages.push(Message::tool_result(call.id.clone(), result));
            }
        }
        tracing::error!(
            max_iterations = self.max_iterations,
            "tool dispatch loop reached its cap of {} iterations",
            self.max_iterations
        );
        Err(DispatchError::IterationLimit {
            max_iterations: self.max_iterations,
            messages,
        })
    }

    /// One tool call's result text: the JSON result, or `error: …`.
    fn run(
        &self,
        call: &ToolCall,
        caller: &mut Option<ToolCaller>,
    ) -> Result<String, DispatchError> {
        let Some(tool) = self.tools.get(&call.name) else {
            let known: Vec<&str> = self.tools.keys().map(String::as_str).collect();
            return Ok(format!(
                "error: unknown tool `{}`; available tools: {}",
                call.name,
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            ));
        };
        let arguments: Value = if call.arguments.trim().is_empty() {
            json!({})
        } else {
            match serde_json::from_str(&call.arguments) {
                Ok(arguments) => arguments,
                Err(error) => {
                    return Ok(format!(
                        "error: the arguments of `{}` are not valid JSON: {error}",
                        call.name
                    ));
                }
            }
        };
        let result = match &tool.runner {
            Runner::Handler(handler) => handler(arguments),
            Runner::Catalog => {
                if caller.is_none()
                    && let Some((catalog, limits)) = &self.catalog
                {
                    let environment = Environment::builder(Arc::clone(catalog.registry()))
                        .providers(Arc::clone(catalog.providers()))
                        .scope(catalog.scope())
                        .limits(*limits)
                        .build()
                        .map_err(DispatchError::Setup)?;
                    *caller = Some(ToolCaller::over(environment, false));
                }
                match caller.as_ref() {
                    Some(caller) => caller
                        .call(&call.name, &arguments)
                        .map_err(|error: CallError| error.to_string()),
                    None => Err("the sandbox is unavailable".to_string()),
                }
            }
        };
        Ok(match result {
            Ok(value) => value.to_string(),
            Err(message) => format!("error: {message}"),
        })
    }
}
