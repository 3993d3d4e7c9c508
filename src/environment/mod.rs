//! The execution environment: a sandboxed Lua 5.4 VM per RLM session, holding
//! state across executions (REPL semantics), with the registry's functions loaded lazily.
//!
//! ```
//! use rlm_registry::Registry;
//! use rlm_registry::environment::{Environment, Limits};
//!
//! let limits = Limits { time: std::time::Duration::from_millis(200), ..Limits::default() };
//! let env = Environment::new(Registry::baked().clone(), limits)?;
//! env.set_context("alpha\nbeta\ngamma\n")?;
//! env.execute("n = line_count(context)")?;
//! let run = env.execute("print('lines:', n)")?;
//! assert_eq!(run.output, "lines:\t3\n");
//!
//! // Limits end the execution with a clear error; the environment keeps working.
//! let err = env.execute("while true do end").unwrap_err();
//! assert!(err.message().starts_with("time limit exceeded"));
//! assert_eq!(env.execute("print(n)")?.output, "3\n");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Lazy loading: registry functions are not defined when the environment is created. The
//! first read of a missing global looks the name up in the registry and runs the file
//! that defines the winning definition, keeping only the globals that file wins. So
//! creating an environment costs the same with 10 or 10,000 functions, and the result is
//! exactly as if every file had run in load order: a file's private helpers work, and a
//! call to an overridden name reaches the winner.
//!
//! # Where things are
//!
//! - `sandbox`: what is removed and read-only (the removed globals are the one list in
//!   `conventions`, which the hints read too), with the sandbox's C functions in place
//!   of Lua's: `load` (`load.rs`), `pcall`, `xpcall` and `coroutine.resume`/`close`
//!   (`protected.rs`), `setmetatable` and `collectgarbage`, so that messages match C
//!   Lua's.
//! - `lazy`: the globals' metatable, which loads registry functions as above and keeps
//!   the built-ins read-only; `globals`: a global as a host program holds it
//!   ([`GlobalValue`]).
//! - `limits`: the limits of one execution and what only the environment counts; `hook`:
//!   how they reach running code (the tick and the count hook).
//! - [`builtins`]: the built-ins' implementations, one file per provider, installed by an
//!   exhaustive `match` on their id, and the host's functions wrapped for Lua. The text
//!   engines they run on (patterns, `re`, `grep`, the text and collection primitives) are
//!   the crate's `engines`, below this module.
//! - [`lua_json`]: the one Lua ↔ JSON mapping, for every surface; `answer_schema`:
//!   [`AnswerSchema`], the JSON Schema a final answer converted by it must match.
//! - `errors`: every error the model reads is a plain string (`lua_message`), and the one
//!   test for a memory refusal. A failed execution gets its hint in one place,
//!   `Environment::with_hint`, for every surface, from the crate's [`hints`]: a reader of
//!   the error and the code, a module below this one.
//! - `chunks`: the crate's own Lua chunks, compiled once per process; `output`: printed
//!   bytes that are not UTF-8 shown as `\xNN`.
//! - `journal`: what an execution read from outside the sandbox, given back when the
//!   same code runs again; `journaled`: [`Checkpoint`]s, restore and forks built on it.

mod answer_schema;
mod budget;
pub mod builtins;
mod chunks;
mod context;
mod errors;
mod globals;
mod hook;
mod journal;
mod journaled;
mod lazy;
mod limits;
mod load;
pub mod lua_json;
mod output;
mod protected;
mod sandbox;
mod window;

use std::fmt;
use std::rc::Rc;
use std::sync::Arc;

use mlua::{Function, Lua, Value};

use crate::engines::{patterns, re};

pub use budget::{Budget, BudgetLeft, BudgetView};
pub use globals::{GlobalError, GlobalValue};
pub use journal::JournalEntry;
pub use journaled::{Checkpoint, CheckpointError, ContextCopy};
use limits::Tripwire;
pub use limits::{Interrupt, LimitKind, Limits, OutputObserver};
pub use output::escape_output;
pub use window::{ContextWindow, Overflow, reply_reserve, request_tokens};

use crate::Registry;
use crate::catalog::Catalog;
use crate::conventions::ANSWER_GLOBAL;
use crate::conventions::builtins::BuiltinId;
use crate::llm::Llm;
use crate::providers::{AgentScope, Providers};
pub use answer_schema::{AnswerSchema, Violation};
use builtins::Host;
use builtins::{BuiltinState, Giver};
pub use builtins::{SubAgent, SubTask, User, run_on_threads};
use errors::{is_memory_error, lua_message};

/// The hints, where they were when they were part of this module: code naming
/// `environment::hints` keeps compiling.
pub use crate::hints;

/// A sandboxed Lua session. Not `Send`: its parts share reference counts that are not
/// atomic. None of it is tied to the thread that made it, though (the timer that arms
/// the limits is the executing thread's): moved whole to another thread, with every use
/// of it serialized, it runs there as well, which is how the Python package runs each
/// call on its caller's thread.
pub struct Environment {
    lua: Lua,
    tripwire: Rc<Tripwire>,
    state: Rc<BuiltinState>,
    catalog: Arc<Catalog>,
}

/// What a successful execution printed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Execution {
    /// Everything `print` wrote, in order; bytes that are not UTF-8 are shown as `\xNN`
    /// ([`escape_output`]); [`Environment::last_output_bytes`] gives the exact bytes.
    pub output: String,
}

/// Why an execution failed. The output printed before the failure is kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExecError {
    /// A Lua error: syntax, runtime, or one raised by `error`.
    Lua {
        /// The error as Lua gives it, with its position, and the hint on a line of its
        /// own when there is one.
        message: String,
        /// The Python habit or unknown function the error comes from, and the Lua way,
        /// in one line (already the last line of `message`): see [`hints`].
        hint: Option<String>,
        /// What was printed before it.
        output: String,
    },
    /// A limit was hit.
    Limit {
        /// Which limit.
        kind: LimitKind,
        /// The message the model reads.
        message: String,
        /// What was printed before it.
        output: String,
    },
}

impl ExecError {
    /// The message, as shown to the model or the user.
    pub fn message(&self) -> &str {
        match self {
            ExecError::Lua { message, .. } | ExecError::Limit { message, .. } => message,
        }
    }

    /// The hint the failure calls for (a Python habit's Lua way, or "did you mean"),
    /// also the last line of [`ExecError::message`].
    ///
    /// ```
    /// use rlm_registry::{Registry, environment::{Environment, Limits}};
    ///
    /// let env = Environment::new(Registry::baked().clone(), Limits::default())?;
    /// let error = env.execute("if 1 != 2 then print('no') end").unwrap_err();
    /// let hint = "Lua writes not-equal as `~=`: `if 1 ~= 2 then print('no') end`.";
    /// assert_eq!(error.hint(), Some(hint));
    /// assert!(error.message().ends_with(&format!("\nhint: {hint}")));
    /// assert_eq!(error.message_without_hint(), "input:1: 'then' expected near '!'");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn hint(&self) -> Option<&str> {
        match self {
            ExecError::Lua { hint, .. } => hint.as_deref(),
            ExecError::Limit { .. } => None,
        }
    }

    /// The message as Lua gave it, without the hint's line.
    pub fn message_without_hint(&self) -> &str {
        let message = self.message();
        self.hint()
            .and_then(|hint| message.strip_suffix(hint))
            .and_then(|rest| rest.strip_suffix("\nhint: "))
            .unwrap_or(message)
    }

    /// The output printed before the failure.
    pub fn output(&self) -> &str {
        match self {
            ExecError::Lua { output, .. } | ExecError::Limit { output, .. } => output,
        }
    }
}

impl fmt::Display for ExecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for ExecError {}

/// The environment could not be created (the Lua state could not be set up).
#[derive(Debug)]
pub struct SetupError(mlua::Error);

impl fmt::Display for SetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot set up the Lua environment: {}", self.0)
    }
}

impl std::error::Error for SetupError {}

impl From<mlua::Error> for SetupError {
    fn from(error: mlua::Error) -> Self {
        SetupError(error)
    }
}

impl Environment {
    /// A new sandboxed environment offering `registry`'s functions (loaded lazily), with
    /// no LLM: `llm_query` raises a clear error. See [`Environment::builder`] for more.
    /// Pass an `Arc<Registry>` to share one loaded registry between environments;
    /// `Registry::baked().clone()` is cheap (the baked data is borrowed, not copied).
    pub fn new(
        registry: impl Into<Arc<Registry>>,
        limits: Limits,
    ) -> Result<Environment, SetupError> {
        Environment::builder(registry).limits(limits).build()
    }

    /// A builder for an environment with an LLM and other options.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use rlm_registry::{Registry, environment::Environment, llm::{Completion, Llm, LlmError, Request}};
    ///
    /// struct Echo;
    /// impl Llm for Echo {
    ///     fn complete(&self, request: Request) -> Result<Completion, LlmError> {
    ///         Ok(Completion::new(format!("echo: {}", request.messages[0].text())))
    ///     }
    /// }
    ///
    /// let env = Environment::builder(Registry::baked().clone()).llm(Arc::new(Echo)).build()?;
    /// assert_eq!(env.execute("print(llm_query('hi'))")?.output, "echo: hi\n");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn builder(registry: impl Into<Arc<Registry>>) -> EnvironmentBuilder {
        EnvironmentBuilder {
            registry: registry.into(),
            limits: Limits::default(),
            host: Host::default(),
            providers: Providers::builtin_shared(),
            scope: AgentScope::TOP,
        }
    }

    fn from_builder(builder: EnvironmentBuilder) -> Result<Environment, SetupError> {
        let limits = builder.limits;
        let tripwire = Tripwire::new(limits);
        let lua = sandbox::new_state(Rc::clone(&tripwire))?;
        // Lua's pattern functions run in C, out of the hook's reach: use the port that
        // checks the limits as it goes.
        patterns::install(&lua, Rc::clone(&tripwire.guard))?;
        let state = Rc::new(BuiltinState::new(Rc::clone(&tripwire), builder.host));
        journal::install(&lua, &state.journal, &tripwire)?;
        let catalog = Arc::new(Catalog::new(
            Arc::clone(&builder.registry),
            builder.providers,
            builder.scope,
        ));
        // `re` and the text primitives share the environment's compiled patterns.
        let regexes = Rc::new(re::RegexCache::default());
        let builtins = builtins::table(&lua, &state, &catalog, &regexes)?;
        // After the built-ins: not one of the standard names `store_list` leaves out, so
        // it is listed once the code writes to it.
        install_answer(&lua)?;
        lazy::install_globals_metatable(&lua, builtins, builder.registry)?;
        hook::install(&lua, &tripwire)?;
        lua.set_memory_limit(limits.memory_bytes)?;
        Ok(Environment {
            lua,
            tripwire,
            state,
            catalog,
        })
    }

    /// What this environment's code may call: host functions in scope and the registry.
    pub fn catalog(&self) -> &Arc<Catalog> {
        &self.catalog
    }

    /// The answer given with `FINAL(value)` or `FINAL_VAR(name)`, if any yet: a string,
    /// number or boolean converted with `tostring`, a table as its JSON text (objects'
    /// keys sorted), or with an [answer schema](EnvironmentBuilder::answer_schema) the
    /// value's JSON text. A value with no JSON form (a function) is refused.
    ///
    /// ```
    /// use rlm_registry::{Registry, environment::{Environment, Limits}};
    ///
    /// let env = Environment::new(Registry::baked().clone(), Limits::default())?;
    /// env.execute("FINAL({b = {2, 3}, a = 1})")?;
    /// assert_eq!(env.final_answer().as_deref(), Some(r#"{"a":1,"b":[2,3]}"#));
    /// let error = env.execute("FINAL(print)").unwrap_err();
    /// assert!(error.message().contains("got a function — call it and pass its result"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn final_answer(&self) -> Option<String> {
        self.state.final_answer()
    }

    /// With an [answer schema](EnvironmentBuilder::answer_schema), the final answer as
    /// JSON, if one was given (and matched the schema).
    ///
    /// ```
    /// use serde_json::json;
    /// use rlm_registry::{Registry, environment::{AnswerSchema, Environment}};
    ///
    /// let schema = AnswerSchema::new(json!({"type": "object", "required": ["n"]}))?;
    /// let env = Environment::builder(Registry::baked().clone()).answer_schema(schema).build()?;
    /// let error = env.execute("FINAL({count = 3})").unwrap_err();
    /// assert!(error.message().contains("at answer: \"n\" is a required property"));
    /// assert!(env.take_rejected_answer().is_some() && env.final_answer().is_none());
    /// env.execute("FINAL({n = 3, tags = {'a'}})")?;
    /// assert_eq!(env.final_value(), Some(json!({"n": 3, "tags": ["a"]})));
    /// assert_eq!(env.final_answer().as_deref(), Some(r#"{"n":3,"tags":["a"]}"#));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn final_value(&self) -> Option<serde_json::Value> {
        self.state.final_value()
    }

    /// Why the last answer given was refused (it did not match the answer schema), once:
    /// the host reads it after an execution to tell a refused answer from another error.
    pub fn take_rejected_answer(&self) -> Option<String> {
        self.state.take_rejected_answer()
    }

    /// The schema the final answer must match, if the environment has one.
    pub fn answer_schema(&self) -> Option<&AnswerSchema> {
        self.state.answer_schema()
    }

    /// Gives `value` as the final answer, as `FINAL` would with the same value made by
    /// the one Lua ↔ JSON mapping: converted and checked against the answer schema if
    /// there is one. For an answer that arrives as data rather than Lua code (a final
    /// answer the model wrote as JSON text outside code).
    pub fn final_from_json(&self, value: &serde_json::Value) -> Result<(), ExecError> {
        self.run(|| {
            let value = lua_json::to_lua(&self.lua, &self.tripwire, value, ANSWER_GLOBAL)
                .map_err(|error| error.into_lua(""))?;
            let final_value: Function = self.lua.globals().get(BuiltinId::Final.name())?;
            final_value.call::<()>(value)
        })?;
        self.take_output();
        Ok(())
    }

    /// Takes the answer given with `FINAL` or `FINAL_VAR`, leaving none: a host that
    /// goes on after an answer (a REPL) tells which execution gave the next one.
    ///
    /// ```
    /// use rlm_registry::{Registry, environment::{Environment, Limits}};
    ///
    /// let env = Environment::new(Registry::baked().clone(), Limits::default())?;
    /// env.execute("FINAL(42)")?;
    /// assert_eq!(env.take_final_answer().as_deref(), Some("42"));
    /// env.execute("x = 1")?;
    /// assert_eq!(env.take_final_answer(), None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn take_final_answer(&self) -> Option<String> {
        self.state.take_final_answer()
    }

    /// Installs `interrupt` for the executions and calls that follow: interrupting it
    /// stops them with a [`LimitKind::Interrupted`] error. A server gives each request
    /// its own handle, so cancelling one never stops the next.
    pub fn set_interrupt(&self, interrupt: Interrupt) {
        *self.tripwire.interrupt.borrow_mut() = interrupt;
    }

    /// Installs `observer` (or none) for the executions that follow: it sees each piece
    /// of output as `print` writes it, while the code runs (a server streams it).
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use rlm_registry::{Registry, environment::Environment};
    ///
    /// let env = Environment::builder(Registry::baked().clone()).build()?;
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let sink = Arc::clone(&seen);
    /// env.set_output_observer(Some(Arc::new(move |text: &str| sink.lock().unwrap().push(text.to_string()))));
    /// env.execute("print(1) print(2)")?;
    /// assert_eq!(*seen.lock().unwrap(), ["1\n", "2\n"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_output_observer(&self, observer: Option<OutputObserver>) {
        *self.tripwire.observer.0.borrow_mut() = observer;
    }

    /// Keeps the images of `corpus`'s image documents, by name, for the sub-calls that
    /// send them (`llm_query(p, {images = {context[i]}})`): their bytes stay outside Lua,
    /// shared, not copied.
    ///
    /// ```
    /// use rlm_registry::{Registry, corpus::{Corpus, Document, DocumentKind, Image}};
    /// use rlm_registry::environment::Environment;
    ///
    /// let mut photo = Document::text("photo.png", "");
    /// photo.kind = DocumentKind::Image;
    /// photo.image = Some(Image { mime: "image/png".into(), data: vec![137u8, 80].into() });
    /// let env = Environment::builder(Registry::baked().clone()).build()?;
    /// env.add_corpus_images(&Corpus { documents: vec![photo], skipped: 0 });
    /// // No model here, but the image is found: the call fails for want of a model.
    /// let error = env.execute("llm_query('?', {images = {{kind = 'image', name = 'photo.png'}}})").unwrap_err();
    /// assert!(error.to_string().contains("no LLM"), "{error}");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn add_corpus_images(&self, corpus: &crate::corpus::Corpus) {
        self.state
            .images
            .add(corpus.documents.iter().filter_map(|document| {
                let image = document.image.as_ref()?;
                Some((
                    document.name.clone(),
                    image.mime.clone(),
                    std::sync::Arc::clone(&image.data),
                ))
            }));
    }

    /// Runs `code` in the session: globals persist from one execution to the next.
    /// Returns what `print` wrote, or the error with the output printed before it.
    pub fn execute(&self, code: &str) -> Result<Execution, ExecError> {
        self.execute_bytes(code.as_bytes())
    }

    /// [`Environment::execute`] for source that need not be UTF-8: Lua source is bytes,
    /// and its string literals may hold any (Latin-1 text, say).
    pub fn execute_bytes(&self, code: &[u8]) -> Result<Execution, ExecError> {
        self.execute_named(code, "=input")
    }

    /// [`Environment::execute_bytes`] under another chunk name, in Lua's notation:
    /// `@file.lua` makes error positions read `file.lua:LINE:`, `=name` `name:LINE:`.
    ///
    /// ```
    /// use rlm_registry::{Registry, environment::{Environment, Limits}};
    ///
    /// let env = Environment::new(Registry::baked().clone(), Limits::default())?;
    /// let error = env.execute_named(b"\nerror('boom')", "@lua/demo.lua").unwrap_err();
    /// assert_eq!(error.message(), "lua/demo.lua:2: boom");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn execute_named(&self, code: &[u8], chunk_name: &str) -> Result<Execution, ExecError> {
        let result = self.run(|| {
            self.lua.load(code).set_name(chunk_name).exec()?;
            self.take_ready_answer()
        });
        self.state.journal.executed(code);
        result
            .map(|()| Execution {
                output: self.take_output(),
            })
            .map_err(|error| self.with_hint(error, code))
    }

    /// The answer protocol of the reference RLM: once the code has set `answer.ready` to
    /// `true`, the run ends with `answer.content`, as `FINAL(answer.content)` would end it
    /// (converted the same way, under the execution's limits). Read raw, so no metamethod
    /// of the code runs here; `FINAL` called first wins.
    fn take_ready_answer(&self) -> mlua::Result<()> {
        if self.state.final_answer().is_some() {
            return Ok(());
        }
        let Value::Table(answer) = self.lua.globals().raw_get::<Value>(ANSWER_GLOBAL)? else {
            return Ok(());
        };
        if answer.raw_get::<Value>("ready")? != Value::Boolean(true) {
            return Ok(());
        }
        let content: Value = answer.raw_get("content")?;
        let given = builtins::give_answer(&self.lua, &self.state, Giver::AnswerContent, content);
        if given.is_err() {
            // A content that cannot be the answer (it does not match the schema, say)
            // must be fixed and made ready again: left ready, it would fail every
            // execution after this one.
            answer.raw_set("ready", false)?;
        }
        given
    }

    /// The one protocol of an execution, for code and for calls: arm the limits, run
    /// `body`, reclaim what a failure left behind, run the finalizers it queued, disarm,
    /// and tell a limit from a Lua error. The output stays to be taken.
    fn run<T>(&self, body: impl FnOnce() -> mlua::Result<T>) -> Result<T, ExecError> {
        let mut running = hook::Running::start(&self.lua);
        self.tripwire.start();
        let result = body();
        // Reclaim what a failed execution left behind, so the next one starts fresh.
        if result.is_err() || self.tripwire.tripped().is_some() {
            let _ = self.lua.gc_collect();
        }
        if self.tripwire.tripped().is_some() {
            // What is left is dropped, by Lua code that a tick must not cut short.
            running.stop_ticks(&self.lua);
        }
        // Queued `__gc` finalizers run now, under this execution's limits (cut short at
        // once if a limit has already tripped).
        let finalized = sandbox::run_finalizers(&self.lua, &self.tripwire);
        self.tripwire.stop();
        drop(running);
        let result = result.and_then(|value| finalized.map(|()| value));
        match (result, self.tripwire.tripped()) {
            (Ok(value), None) => Ok(value),
            (Ok(_), Some(kind)) => Err(self.limit_error(kind)),
            (Err(error), _) => Err(self.classify(error)),
        }
    }

    /// Calls the global function `name` (a registry function, loaded lazily, or a
    /// built-in) with `args` converted from JSON, under the same limits as
    /// [`Environment::execute`], and returns its result as JSON. What it prints is
    /// discarded.
    ///
    /// Both ways follow the one Lua ↔ JSON mapping, [`lua_json`], as `json.encode` and
    /// `json.decode` do: a `null` argument is `nil`, one inside a value `json.null`; no
    /// result is `null`, one is the value, several are an array. A result JSON cannot
    /// hold (a function, a cycle, NaN, a string that is not UTF-8) is an error naming
    /// where it is (`result.items[3]`).
    ///
    /// ```
    /// use serde_json::json;
    /// use rlm_registry::{Registry, environment::{Environment, Limits}};
    ///
    /// let env = Environment::new(Registry::baked().clone(), Limits::default())?;
    /// assert_eq!(env.call_function("word_count", vec![json!("a b c")])?, json!(3));
    /// assert_eq!(env.call_function("lines", vec![json!("x\ny")])?, json!(["x", "y"]));
    /// assert!(env.call_function("no_such_function", vec![]).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn call_function(
        &self,
        name: &str,
        args: Vec<serde_json::Value>,
    ) -> Result<serde_json::Value, ExecError> {
        let value = self.run(|| -> mlua::Result<serde_json::Value> {
            let function = match self.lua.globals().get::<Value>(name)? {
                Value::Function(function) => function,
                Value::Nil => {
                    let suggestion = self
                        .catalog
                        .closest_name(name)
                        .map(|s| format!(" (did you mean `{s}`?)"));
                    return Err(mlua::Error::RuntimeError(format!(
                        "unknown function `{name}`{}",
                        suggestion.unwrap_or_default()
                    )));
                }
                other => {
                    return Err(mlua::Error::RuntimeError(format!(
                        "`{name}` is a {}, not a function",
                        other.type_name()
                    )));
                }
            };
            let args = lua_json::arguments_to_lua(&self.lua, &self.tripwire, &args)
                .map_err(|error| error.into_lua(""))?;
            let results = function.call::<mlua::MultiValue>(args)?;
            lua_json::results_to_json(&self.lua, &self.tripwire, &results)
                .map_err(|error| error.into_lua(""))
        })?;
        // What it printed is discarded.
        self.take_output();
        Ok(value)
    }

    /// The global `name` as JSON, by the one Lua ↔ JSON mapping ([`lua_json`]): `nil`
    /// is `null`. A value JSON cannot hold is an error naming where it is (`x.a.b`). A
    /// registry function's name reads as that function, which is such a value.
    ///
    /// ```
    /// use serde_json::json;
    /// use rlm_registry::{Registry, environment::{Environment, Limits}};
    ///
    /// let env = Environment::new(Registry::baked().clone(), Limits::default())?;
    /// env.execute("x = {a = {b = 1.5, c = json.null}, list = json.array()}")?;
    /// assert_eq!(env.get_global("x")?, json!({"a": {"b": 1.5, "c": null}, "list": []}));
    /// assert_eq!(env.get_global("unset")?, json!(null));
    /// env.execute("x.a.b = print")?;
    /// assert_eq!(env.get_global("x").unwrap_err().message(), "cannot encode a function (at x.a.b)");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn get_global(&self, name: &str) -> Result<serde_json::Value, ExecError> {
        let value = self.run(|| {
            let value = self.lua.globals().get::<Value>(name)?;
            lua_json::to_json(&self.lua, &self.tripwire, &value, name)
                .map_err(|error| error.into_lua(""))
        });
        // A registry file loaded on the way may have printed.
        self.take_output();
        value
    }

    /// Sets the global `name` to `value`, by the one Lua ↔ JSON mapping ([`lua_json`]):
    /// `null` removes it, a `null` inside the value is `json.null`. A built-in's name
    /// cannot be assigned, as in Lua code.
    ///
    /// ```
    /// use serde_json::json;
    /// use rlm_registry::{Registry, environment::{Environment, Limits}};
    ///
    /// let env = Environment::new(Registry::baked().clone(), Limits::default())?;
    /// env.set_global("records", &json!([{"id": 1, "tags": []}, {"id": 2, "note": null}]))?;
    /// let run = env.execute("print(#records, records[2].note == json.null, json.encode(records[1].tags))")?;
    /// assert_eq!(run.output, "2\ttrue\t[]\n");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_global(&self, name: &str, value: &serde_json::Value) -> Result<(), ExecError> {
        self.run(|| {
            let value = lua_json::to_lua(&self.lua, &self.tripwire, value, name)
                .map_err(|error| error.into_lua(""))?;
            self.lua.globals().set(name, value)
        })?;
        self.state.journal.global_set(name, value);
        self.take_output();
        Ok(())
    }

    fn take_output(&self) -> String {
        self.tripwire.take_output()
    }

    /// The exact bytes the last execution printed (before its error, if it failed):
    /// [`Execution::output`] and [`ExecError::output`] show bytes that are not UTF-8 as
    /// `\xNN` ([`escape_output`]). `rlm exec` and `rlm run` write these bytes.
    pub fn last_output_bytes(&self) -> Vec<u8> {
        self.tripwire.last_output.borrow().clone()
    }

    fn limit_error(&self, kind: LimitKind) -> ExecError {
        ExecError::Limit {
            kind,
            message: kind.message(&self.tripwire.limits),
            output: self.take_output(),
        }
    }

    fn classify(&self, error: mlua::Error) -> ExecError {
        if let Some(kind) = self.tripwire.tripped() {
            return self.limit_error(kind);
        }
        if is_memory_error(&error) {
            return self.limit_error(LimitKind::Memory);
        }
        ExecError::Lua {
            message: lua_message(&error),
            hint: None,
            output: self.take_output(),
        }
    }

    /// `error` raised by `code`, with the hint it calls for (see [`hints`]): the one place
    /// a failed execution gets one, so every surface shows it.
    fn with_hint(&self, error: ExecError, code: &[u8]) -> ExecError {
        let ExecError::Lua {
            message,
            hint: None,
            output,
        } = error
        else {
            return error;
        };
        let source = String::from_utf8_lossy(code);
        let hint = hints::hint(&source, &message, &self.names());
        let message = match &hint {
            Some(hint) => format!("{message}\nhint: {hint}"),
            None => message,
        };
        ExecError::Lua {
            message,
            hint,
            output,
        }
    }

    /// The names code here may call: the catalog's, the standard globals, and the
    /// session's own global functions; and which globals hold text or a table now.
    fn names(&self) -> hints::Names {
        let mut names = hints::Names::of(&self.catalog);
        let mut functions = Vec::new();
        for pair in self.lua.globals().pairs::<Value, Value>() {
            let Ok((Value::String(name), value)) = pair else {
                continue;
            };
            let Ok(name) = name.to_str().map(|n| n.to_string()) else {
                continue;
            };
            match value {
                Value::Function(_) => functions.push(name),
                Value::String(_) => names.set_kind(name, hints::ValueKind::Text),
                Value::Table(_) => names.set_kind(name, hints::ValueKind::Table),
                _ => {}
            }
        }
        names.extend(functions);
        names
    }
}

impl Drop for Environment {
    fn drop(&mut self) {
        // Finalizers run when the state closes; halting first means a `__gc` that loops
        // forever is stopped by the hook instead of hanging the drop.
        self.tripwire.halt();
        hook::stop_everything(&self.lua);
    }
}

/// The `answer` table of the reference RLM's protocol, not ready: `{content = "", ready =
/// false}` (see `Environment::take_ready_answer`).
fn install_answer(lua: &Lua) -> mlua::Result<()> {
    let answer = lua.create_table()?;
    answer.raw_set("content", "")?;
    answer.raw_set("ready", false)?;
    lua.globals().raw_set(ANSWER_GLOBAL, answer)
}

/// Options for a new [`Environment`]; see [`Environment::builder`].
pub struct EnvironmentBuilder {
    registry: Arc<Registry>,
    limits: Limits,
    /// What the built-ins get from the host, handed to them as it is.
    host: Host,
    providers: Arc<Providers>,
    scope: AgentScope,
}

impl EnvironmentBuilder {
    /// The providers whose functions the environment offers (default
    /// [`Providers::builtin`]). Share one `Arc` between the agents of a run.
    pub fn providers(mut self, providers: Arc<Providers>) -> Self {
        self.providers = providers;
        self
    }

    /// Where the agent stands (default [`AgentScope::TOP`]): which scopes' functions it
    /// may call. Out-of-scope functions are left out of `help` and `fn_search`, and
    /// calling one is an error naming its scope.
    pub fn scope(mut self, scope: AgentScope) -> Self {
        self.scope = scope;
        self
    }

    /// What `rlm_query` runs: a child agent one level deeper. Without one (at the depth
    /// limit), `rlm_query` falls back to `llm_query`.
    pub fn sub_agent(mut self, agent: Arc<dyn SubAgent>) -> Self {
        self.host.sub_agent = Some(agent);
        self
    }

    /// The human behind `ask_user` and `notify_user`. Give it only to a top-level
    /// environment; without one, both built-ins raise a clear error.
    pub fn user(mut self, user: Arc<dyn User>) -> Self {
        self.host.user = Some(user);
        self
    }

    /// Tokens (prompt and completion, as the server reports them) the whole session may
    /// spend on sub-calls; once spent, `llm_query` hits the `token_budget` limit. Before
    /// it is sent, each sub-call reserves its worst case (its prompt's tokens and the
    /// longest reply it allows, [`Request::reply_reserve`](crate::llm::Request::reply_reserve)):
    /// one that does not fit what is left, the calls sent with it holding theirs, is not
    /// sent and fails with a message saying so, so calls sent together (`parallel_map`,
    /// `llm_query_batched`) never spend more than the budget when the replies keep to it.
    pub fn token_budget(mut self, tokens: u64) -> Self {
        self.host.token_budget = Some(tokens);
        self
    }

    /// [`EnvironmentBuilder::token_budget`], naming which budget the tokens are (what is
    /// left of a run's, say), so that a refusal names it and the setting that raises it.
    ///
    /// ```
    /// use rlm_registry::Registry;
    /// use rlm_registry::environment::{Budget, Environment};
    ///
    /// let env = Environment::builder(Registry::baked().clone())
    ///     .token_budget_of(Budget::RunTokens, 5_000)
    ///     .build()?;
    /// assert_eq!(env.execute("print(token_budget())")?.output, "5000\n");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn token_budget_of(mut self, budget: Budget, tokens: u64) -> Self {
        self.host.token_budget_kind = budget;
        self.token_budget(tokens)
    }

    /// Per-execution limits (default [`Limits::default`]).
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The model behind `llm_query` and `llm_query_batched`.
    pub fn llm(mut self, llm: Arc<dyn Llm>) -> Self {
        self.host.llm = Some(llm);
        self
    }

    /// The JSON Schema the final answer must match (default none). `FINAL(value)`,
    /// `FINAL_VAR(name)` and a ready `answer` table then convert the value to JSON by the
    /// one Lua ↔ JSON mapping and check it: a value that does not match is refused with
    /// a Lua error listing each violation (its path and what was expected), and the
    /// environment has no final answer until one matches.
    pub fn answer_schema(mut self, schema: AnswerSchema) -> Self {
        self.host.answer_schema = Some(schema);
        self
    }

    /// The model's context window, in tokens (default unknown). A `llm_query` or
    /// `llm_query_batched` prompt that would not fit, with the room a reply needs
    /// ([`Request::reply_reserve`](crate::llm::Request::reply_reserve)), is not sent: the
    /// call fails with an error giving the prompt's tokens and the window.
    ///
    /// ```
    /// use rlm_registry::{Registry, environment::Environment};
    /// # use std::sync::Arc;
    /// # use rlm_registry::llm::{Completion, Llm, LlmError, Request};
    /// # struct Echo;
    /// # impl Llm for Echo {
    /// #     fn complete(&self, _: Request) -> Result<Completion, LlmError> { Ok(Completion::new("ok")) }
    /// # }
    ///
    /// let env = Environment::builder(Registry::baked().clone())
    ///     .llm(Arc::new(Echo))
    ///     .context_window(2_000)
    ///     .build()?;
    /// assert_eq!(env.execute("print(llm_query('short'))")?.output, "ok\n");
    /// let error = env.execute("llm_query(string.rep('word ', 2000))").unwrap_err();
    /// assert!(error.message().contains("does not fit the model's context window of 2,000 tokens"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn context_window(mut self, tokens: u64) -> Self {
        self.host.context_window = Some(tokens);
        self
    }

    /// Creates the environment.
    pub fn build(self) -> Result<Environment, SetupError> {
        Environment::from_builder(self)
    }
}
