//! The built-ins implemented in Rust and present in every environment (SPEC §4).
//! They live in a read-only table behind the globals, so model code cannot replace them.
//!
//! | built-in | does |
//! |---|---|
//! | `print(...)` | appends to the execution's captured output |
//! | `llm_query(prompt)` | one sub-model call; returns its answer |
//! | `llm_query_batched(prompts)` | concurrent calls; answers in order, `"error: …"` for a failed one |
//! | `FINAL(value)` | records the final answer (`tostring(value)`) |
//! | `FINAL_VAR(name)` | records the value of global `name` as the final answer |
//! | `token_count(text)` | exact `o200k_base` token count |
//! | `token_truncate(text, n)` | the longest prefix of at most `n` tokens |
//! | `token_split(text, n [, overlap])` | pieces of at most `n` tokens, sharing `overlap` |
//! | `token_budget()` | tokens the session may still spend on sub-calls (`math.huge` if unlimited) |
//! | `store_list()` | the variables the session made: name, type, size, preview |
//! | `store_summarize(name)` | a longer description of one variable |
//! | `fn_search(query [, opts])` | registry functions for a task: name, signature, summary, confidence |
//! | `help([name])` | the documentation of a built-in or registry function |
//! | `rlm_query(prompt [, context])` | a child RLM one level deeper (the host's [`SubAgent`]); `llm_query` at the depth limit |
//! | `rlm_query_batched(prompts [, contexts])` | several children concurrently; answers in order |
//! | `ask_user(question)` | asks the human through the host's [`User`] channel; top level only |
//! | `notify_user(message)` | tells the human something without waiting; top level only |
//!
//! [`DOCS`] documents each one once; `help`, the model's prompt and `Registry::lookup`
//! all read it. It lives in [`conventions::builtins`](crate::conventions::builtins), next
//! to the names registry functions may not take, so registry-only builds have it too.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;

use mlua::{Function, Lua, MultiValue, Table, Value};

use super::json;
use super::limits::{LimitKind, Tripwire};
use crate::Registry;
use crate::catalog::Catalog;
use crate::llm::{Completion, Llm, LlmError, Request};
use crate::providers::host::JsonHandler;
use crate::providers::{Call, HostHandler, RawHandler};
use crate::spec::Origin;
use crate::tokens;

pub use crate::conventions::builtins::{BuiltinDoc, DOCS, doc};

/// The human behind `ask_user` and `notify_user`, as the host provides them (the CLI uses
/// the terminal). Only a top-level environment has one.
pub trait User {
    /// Asks `question` and waits for the answer.
    fn ask(&self, question: &str) -> Result<String, String>;
    /// Shows `message` without waiting.
    fn notify(&self, message: &str) -> Result<(), String>;
}

/// The host's way to run a child RLM for `rlm_query`: the RLM loop implements it, one
/// level deeper. `Send + Sync` so a batch can run children on several threads (each child
/// builds its own environment there).
pub trait SubAgent: Send + Sync {
    /// Runs a child on `prompt` with `context` and returns its final answer.
    fn run(&self, prompt: &str, context: Option<&str>) -> Result<String, String>;
}

/// The state the built-ins share with their environment.
pub(crate) struct Session {
    tripwire: Rc<Tripwire>,
    llm: Option<Arc<dyn Llm>>,
    user: Option<Arc<dyn User>>,
    sub_agent: Option<Arc<dyn SubAgent>>,
    final_answer: RefCell<Option<String>>,
    /// Tokens (prompt and completion) the session may spend on sub-calls, if limited.
    token_budget: Option<u64>,
    tokens_spent: Cell<u64>,
}

impl Session {
    pub fn new(
        tripwire: Rc<Tripwire>,
        llm: Option<Arc<dyn Llm>>,
        user: Option<Arc<dyn User>>,
        sub_agent: Option<Arc<dyn SubAgent>>,
        token_budget: Option<u64>,
    ) -> Self {
        Session {
            tripwire,
            llm,
            user,
            sub_agent,
            final_answer: RefCell::new(None),
            token_budget,
            tokens_spent: Cell::new(0),
        }
    }

    fn remaining_tokens(&self) -> Option<u64> {
        self.token_budget
            .map(|budget| budget.saturating_sub(self.tokens_spent.get()))
    }

    /// Checks the limits before `calls` sub-model calls.
    fn before_calls(&self, calls: usize) -> mlua::Result<()> {
        if self.remaining_tokens() == Some(0) {
            return Err(self.tripwire.trip(LimitKind::TokenBudget));
        }
        self.tripwire.count_llm_calls(calls)
    }

    /// Records what a call spent.
    fn spent(&self, result: &Result<Completion, LlmError>) {
        if let Ok(completion) = result {
            let tokens = completion.prompt_tokens + completion.completion_tokens;
            self.tokens_spent
                .set(self.tokens_spent.get().saturating_add(tokens));
        }
    }

    pub fn final_answer(&self) -> Option<String> {
        self.final_answer.borrow().clone()
    }

    fn llm(&self, builtin: &str) -> mlua::Result<&Arc<dyn Llm>> {
        self.llm.as_ref().ok_or_else(|| {
            mlua::Error::RuntimeError(format!(
                "{builtin} is not available: no LLM is configured for this environment"
            ))
        })
    }
}

/// Every host function of the environment's providers, by name: the built-ins, made
/// here, and the host's own, wrapped. Out-of-scope ones raise an error naming their
/// scope. Lua's own `print` is removed from the globals.
pub(crate) fn table(
    lua: &Lua,
    session: &Rc<Session>,
    catalog: &Arc<Catalog>,
) -> mlua::Result<Table> {
    let builtins = lua.create_table()?;
    let mut store_functions = None;
    for info in catalog.providers().iter() {
        let name = info.name();
        let scope = catalog.scope();
        let function = if !scope.allows(info.scope()) {
            refuse(lua, scope.refusal(name, info.scope()))?
        } else {
            match &info.host().handler {
                HostHandler::Builtin => {
                    let Some(function) =
                        builtin(lua, session, catalog, name, &mut store_functions)?
                    else {
                        continue;
                    };
                    function
                }
                HostHandler::Raw(handler) => {
                    host_raw(lua, session, catalog, name, Arc::clone(handler))?
                }
                HostHandler::Json(handler) => {
                    let params = info.function().params();
                    host_json(lua, session, catalog, name, params, Arc::clone(handler))?
                }
            }
        };
        builtins.raw_set(name, function)?;
    }
    // `print` is hot in loops and cannot fail but on memory; host functions raise plain
    // errors already.
    let host: Vec<&str> = catalog
        .providers()
        .iter()
        .filter(|info| !matches!(info.host().handler, HostHandler::Builtin))
        .map(|info| info.name())
        .chain(["print"])
        .collect();
    raise_plain_errors(lua, &builtins, &host)?;
    lua.globals().raw_set("print", Value::Nil)?;
    Ok(builtins)
}

/// The built-in `name`, made for this session.
fn builtin(
    lua: &Lua,
    session: &Rc<Session>,
    catalog: &Arc<Catalog>,
    name: &str,
    store_functions: &mut Option<(Function, Function)>,
) -> mlua::Result<Option<Function>> {
    let session = Rc::clone(session);
    Ok(Some(match name {
        "print" => print(lua, session)?,
        "llm_query" => llm_query(lua, session)?,
        "llm_query_batched" => llm_query_batched(lua, session)?,
        "FINAL" => final_value(lua, session)?,
        "FINAL_VAR" => final_var(lua, session)?,
        "token_count" => token_count(lua)?,
        "token_truncate" => token_truncate(lua)?,
        "token_split" => token_split(lua)?,
        "token_budget" => token_budget(lua, session)?,
        "help" => help(lua, Arc::clone(catalog))?,
        "fn_search" => fn_search(lua, session, Arc::clone(catalog))?,
        "ask_user" => ask_user(lua, session)?,
        "notify_user" => notify_user(lua, session)?,
        "rlm_query" => rlm_query(lua, session)?,
        "rlm_query_batched" => rlm_query_batched(lua, session)?,
        "store_list" | "store_summarize" => {
            if store_functions.is_none() {
                *store_functions = Some(store(lua, Arc::clone(catalog.registry()))?);
            }
            let Some((list, summarize)) = store_functions.as_ref() else {
                return Ok(None);
            };
            if name == "store_list" {
                list.clone()
            } else {
                summarize.clone()
            }
        }
        _ => return Ok(None),
    }))
}

/// A function that only raises `message`: what an out-of-scope name is bound to.
fn refuse(lua: &Lua, message: String) -> mlua::Result<Function> {
    lua.create_function(move |_, _: MultiValue| -> mlua::Result<()> {
        Err(mlua::Error::RuntimeError(message.clone()))
    })
}

fn call<'a>(lua: &'a Lua, session: &Session, catalog: &Catalog, name: &'a str) -> Call<'a> {
    Call {
        lua,
        name,
        time_left: session.tripwire.time_left(),
        depth: catalog.scope().depth,
    }
}

/// A host function over Lua values.
fn host_raw(
    lua: &Lua,
    session: &Rc<Session>,
    catalog: &Arc<Catalog>,
    name: &str,
    handler: Arc<RawHandler>,
) -> mlua::Result<Function> {
    let (session, catalog, name) = (Rc::clone(session), Arc::clone(catalog), name.to_string());
    let inner = lua.create_function(move |lua, args: MultiValue| {
        outcome(lua, handler(&call(lua, &session, &catalog, &name), args))
    })?;
    raise_failures(lua, inner)
}

/// A host function over JSON: arguments converted (missing trailing ones as `null`,
/// extra ones dropped unless it takes `...`), the result converted back; an `Err` is a
/// Lua error prefixed with the name.
fn host_json(
    lua: &Lua,
    session: &Rc<Session>,
    catalog: &Arc<Catalog>,
    name: &str,
    params: &[crate::Param],
    handler: Arc<JsonHandler>,
) -> mlua::Result<Function> {
    let (session, catalog, name) = (Rc::clone(session), Arc::clone(catalog), name.to_string());
    let arity = params.len();
    let varargs = params.last().is_some_and(|p| p.name() == "...");
    let inner = lua.create_function(move |lua, args: MultiValue| {
        let converted = || -> Result<serde_json::Value, String> {
            let mut values = Vec::with_capacity(args.len().max(arity));
            for (i, arg) in args.iter().enumerate() {
                let value = json::to_json(arg, &format!("argument {}", i + 1), 0)
                    .map_err(|e| lua_message(&e))?;
                values.push(value);
            }
            values.resize(values.len().max(arity), serde_json::Value::Null);
            if !varargs {
                values.truncate(arity);
            }
            handler(&call(lua, &session, &catalog, &name), values)
        };
        let result = converted()
            .map_err(|e| mlua::Error::RuntimeError(format!("{name}: {e}")))
            .and_then(|value| json::to_lua(lua, &value, 0))
            .map(|value| MultiValue::from_iter([value]));
        outcome(lua, result)
    })?;
    raise_failures(lua, inner)
}

/// A handler's result as `true, results…` or `false, message` for [`raise_failures`];
/// running out of memory propagates as it is.
fn outcome(lua: &Lua, result: mlua::Result<MultiValue>) -> mlua::Result<MultiValue> {
    match result {
        Ok(mut values) => {
            values.push_front(Value::Boolean(true));
            Ok(values)
        }
        // Out of memory stays the memory limit; a limit a handler trips is re-raised by
        // the instruction hook whatever the message becomes.
        Err(error @ mlua::Error::MemoryError(_)) => Err(error),
        Err(error) => {
            let message = Value::String(lua.create_string(lua_message(&error))?);
            Ok(MultiValue::from_iter([Value::Boolean(false), message]))
        }
    }
}

/// Wraps a function returning `true, results…` or `false, message` so that a failure is
/// an ordinary Lua error whose value is the message, as `error("…")` would raise: what
/// `pcall` returns is the message, without Rust's wrapping or a traceback.
fn raise_failures(lua: &Lua, inner: Function) -> mlua::Result<Function> {
    let wrap = per_state(lua, "rlm.raise_failures", || {
        lua.load(
            r#"
            local error, pack, unpack = ...
            return function(inner)
              return function(...)
                local results = pack(inner(...))
                if results[1] then return unpack(results, 2, results.n) end
                error(results[2], 2)
              end
            end
            "#,
        )
        .set_name("=host")
        .call((
            lua.globals().get::<Function>("error")?,
            table_function(lua, "pack")?,
            table_function(lua, "unpack")?,
        ))
    })?;
    wrap.call(inner)
}

/// The function kept under `key` in `lua`'s registry, made by `make` the first time: an
/// internal chunk is compiled once per Lua state, not once per function it wraps.
fn per_state(
    lua: &Lua,
    key: &str,
    make: impl FnOnce() -> mlua::Result<Function>,
) -> mlua::Result<Function> {
    if let Some(function) = lua.named_registry_value::<Option<Function>>(key)? {
        return Ok(function);
    }
    let function = make()?;
    lua.set_named_registry_value(key, &function)?;
    Ok(function)
}

/// Replaces every function of `functions` (built-ins written in Rust) but those named in
/// `keep` by one raising its errors as plain strings, as Lua's own C functions raise
/// them: mlua raises a Rust error as a userdata, which `pcall` would return and on which
/// `err:match(…)` or `"…" .. err` fail. Running out of memory stays as it is, and a limit a
/// built-in trips is re-raised by the instruction hook whatever the message becomes.
/// One call per table: environment creation pays for one chunk, not one per function.
pub(crate) fn raise_plain_errors(lua: &Lua, functions: &Table, keep: &[&str]) -> mlua::Result<()> {
    let wrap_all = per_state(lua, "rlm.raise_plain_errors", || plain_error_wrapper(lua))?;
    let keep = lua.create_table_from(keep.iter().map(|&name| (name, true)))?;
    wrap_all.call((functions, keep))
}

fn plain_error_wrapper(lua: &Lua) -> mlua::Result<Function> {
    // A Rust error's message is raised at the caller's line, like a C function's; a Lua
    // error passing through (from a callback) keeps its own position.
    let message = lua.create_function(|lua, value: Value| {
        Ok(match value {
            Value::Error(error) if !is_memory_error(&error) => {
                let message = lua_message(&error);
                let level = if has_position(&message) { 0 } else { 2 };
                (Value::String(lua.create_string(message)?), level)
            }
            other => (other, 0),
        })
    })?;
    lua.load(
        r#"
        local pcall, error, pack, unpack, message, next, type = ...
        local function wrap(inner)
          return function(...)
            local results = pack(pcall(inner, ...))
            if results[1] then return unpack(results, 2, results.n) end
            error(message(results[2]))
          end
        end
        return function(functions, keep)
          for name, value in next, functions do
            if type(value) == "function" and not keep[name] then functions[name] = wrap(value) end
          end
        end
        "#,
    )
    .set_name("=builtin")
    .call((
        lua.globals().get::<Function>("pcall")?,
        lua.globals().get::<Function>("error")?,
        table_function(lua, "pack")?,
        table_function(lua, "unpack")?,
        message,
        lua.globals().get::<Function>("next")?,
        lua.globals().get::<Function>("type")?,
    ))
}

/// Whether the allocator refused: that error must reach the environment as it is.
fn is_memory_error(error: &mlua::Error) -> bool {
    match error {
        mlua::Error::MemoryError(_) => true,
        mlua::Error::CallbackError { cause, .. } => is_memory_error(cause),
        _ => false,
    }
}

/// Whether `message` starts with a Lua position (`chunk:12: `): a Lua error that passed
/// through Rust, which must not get a second one.
fn has_position(message: &str) -> bool {
    let Some((_, rest)) = message.split_once(':') else {
        return false;
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    digits > 0 && rest[digits..].starts_with(": ")
}

/// `table.<name>` as the sandbox offers it.
fn table_function(lua: &Lua, name: &str) -> mlua::Result<Function> {
    lua.globals().get::<Table>("table")?.get(name)
}

/// The message of a Lua error without mlua's wrapping.
fn lua_message(error: &mlua::Error) -> String {
    match error {
        mlua::Error::CallbackError { cause, .. } => lua_message(cause),
        // A Lua error raised through Rust carries the traceback mlua appended to it.
        mlua::Error::RuntimeError(message) => message
            .split_once("\nstack traceback:")
            .map_or(message.as_str(), |(message, _)| message)
            .to_string(),
        other => other.to_string(),
    }
}

/// `print(...)`: `tostring` of each argument, tab-separated, into the captured output
/// (every byte kept: see [`super::output`]).
fn print(lua: &Lua, session: Rc<Session>) -> mlua::Result<Function> {
    let tostring: Function = lua.globals().get("tostring")?;
    lua.create_function(move |_, args: MultiValue| {
        let mut line = Vec::new();
        for (i, value) in args.into_iter().enumerate() {
            if i > 0 {
                line.push(b'\t');
            }
            let text: mlua::LuaString = tostring.call(value)?;
            line.extend_from_slice(&text.as_bytes());
        }
        line.push(b'\n');
        // Bytes, not text: see `environment::output`.
        session.tripwire.append_output(&line)
    })
}

/// `llm_query(prompt)` → the model's answer.
fn llm_query(lua: &Lua, session: Rc<Session>) -> mlua::Result<Function> {
    lua.create_function(move |_, prompt: mlua::LuaString| {
        let llm = session.llm("llm_query")?;
        session.before_calls(1)?;
        let result = llm.complete(Request::from(prompt.to_string_lossy()));
        session.spent(&result);
        result
            .map(|completion| completion.content)
            .map_err(|error| mlua::Error::RuntimeError(format!("llm_query failed: {error}")))
    })
}

/// `llm_query_batched(prompts)` → answers in order; a failed call gives `"error: …"` so
/// one failure does not lose the other answers.
fn llm_query_batched(lua: &Lua, session: Rc<Session>) -> mlua::Result<Function> {
    lua.create_function(move |lua, prompts: Vec<mlua::LuaString>| {
        let llm = session.llm("llm_query_batched")?;
        session.before_calls(prompts.len())?;
        let requests = prompts
            .iter()
            .map(|p| Request::from(p.to_string_lossy()))
            .collect();
        let answers: Vec<String> = llm
            .complete_batch(requests)
            .into_iter()
            .inspect(|result| session.spent(result))
            .map(|result| match result {
                Ok(completion) => completion.content,
                Err(error) => format!("error: {error}"),
            })
            .collect();
        lua.create_sequence_from(answers)
    })
}

/// `FINAL(value)`: the run's answer is `tostring(value)`.
fn final_value(lua: &Lua, session: Rc<Session>) -> mlua::Result<Function> {
    let tostring: Function = lua.globals().get("tostring")?;
    lua.create_function(move |_, value: Value| {
        let text: mlua::LuaString = tostring.call(value)?;
        *session.final_answer.borrow_mut() = Some(text.to_string_lossy());
        Ok(())
    })
}

/// `FINAL_VAR(name)`: the run's answer is the value of the global `name`.
fn final_var(lua: &Lua, session: Rc<Session>) -> mlua::Result<Function> {
    let tostring: Function = lua.globals().get("tostring")?;
    lua.create_function(move |lua, name: String| {
        let value: Value = lua.globals().get(name.as_str())?;
        if value.is_nil() {
            return Err(mlua::Error::RuntimeError(format!(
                "FINAL_VAR: no variable named '{name}' (assign it first, then call FINAL_VAR(\"{name}\"))"
            )));
        }
        let text: mlua::LuaString = tostring.call(value)?;
        *session.final_answer.borrow_mut() = Some(text.to_string_lossy());
        Ok(())
    })
}

/// Lua strings are bytes; the tokenizer needs text, so invalid UTF-8 is replaced.
fn text_of(value: &mlua::LuaString) -> String {
    value.to_string_lossy()
}

/// A count argument: a non-negative integer.
fn count_arg(builtin: &str, name: &str, value: i64) -> mlua::Result<usize> {
    usize::try_from(value).map_err(|_| {
        mlua::Error::RuntimeError(format!(
            "{builtin}: {name} must be a non-negative integer, got {value}"
        ))
    })
}

/// `token_count(text)`: valid UTF-8 (the usual case) is counted in place, not copied.
fn token_count(lua: &Lua) -> mlua::Result<Function> {
    lua.create_function(|_, text: mlua::LuaString| {
        Ok(match text.to_str() {
            Ok(valid) => tokens::count(&valid),
            Err(_) => tokens::count(&text_of(&text)),
        })
    })
}

/// `token_truncate(text, n)`.
fn token_truncate(lua: &Lua) -> mlua::Result<Function> {
    lua.create_function(|_, (text, n): (mlua::LuaString, i64)| {
        let n = count_arg("token_truncate", "n", n)?;
        let text = text_of(&text);
        Ok(tokens::truncate(&text, n).to_string())
    })
}

/// `token_split(text, n [, overlap])`.
fn token_split(lua: &Lua) -> mlua::Result<Function> {
    lua.create_function(|lua, (text, n, overlap): (mlua::LuaString, i64, Option<i64>)| {
        let n = count_arg("token_split", "n", n)?;
        let overlap = count_arg("token_split", "overlap", overlap.unwrap_or(0))?;
        if n == 0 || overlap >= n {
            return Err(mlua::Error::RuntimeError(format!(
                "token_split: n must be positive and overlap smaller than n (got n = {n}, overlap = {overlap})"
            )));
        }
        let text = text_of(&text);
        lua.create_sequence_from(tokens::split(&text, n, overlap))
    })
}

/// `token_budget()`.
fn token_budget(lua: &Lua, session: Rc<Session>) -> mlua::Result<Function> {
    lua.create_function(move |_, ()| {
        Ok(match session.remaining_tokens() {
            Some(remaining) => mlua::Value::Integer(i64::try_from(remaining).unwrap_or(i64::MAX)),
            None => mlua::Value::Number(f64::INFINITY),
        })
    })
}

/// `help([name])`: the one description of any function this agent may call.
fn help(lua: &Lua, catalog: Arc<Catalog>) -> mlua::Result<Function> {
    lua.create_function(move |_, name: Option<String>| {
        let Some(name) = name else {
            let names: Vec<&str> = catalog
                .functions()
                .iter()
                .map(|c| c.function.name())
                .collect();
            return Ok(format!(
                "Available functions: {}. Call help(name) for one.",
                names.join(", ")
            ));
        };
        if let Some(callable) = catalog.get(&name) {
            let text = callable.function.declaration();
            return Ok(match callable.origin {
                Origin::Provider { builtin: true, .. } => format!("{text} (built-in)"),
                Origin::Provider { provider, .. } => format!("{text} (provider `{provider}`)"),
                Origin::Registry { .. } => text,
            });
        }
        if let Some(scope) = catalog.out_of_scope(&name) {
            return Err(mlua::Error::RuntimeError(format!(
                "help: {}",
                catalog.scope().refusal(&name, scope)
            )));
        }
        Err(mlua::Error::RuntimeError(format!(
            "help: no function named '{name}'; call help() to list them"
        )))
    })
}

/// `fn_search(query [, opts])` → `results, info`: `results` is
/// `{ {name, signature, summary, confidence}, … }`, `info` is `{mode, fallback,
/// expanded_terms}`. With `opts.mode` `"balanced"` or `"accurate"` it searches with the
/// environment's LLM ([`search_with_llm`](crate::search::llm_modes::search_with_llm)),
/// reserving the mode's calls against the `llm_calls` limit up front, as
/// `llm_query_batched` does for a batch, and counting the tokens spent; a failing model
/// gives the fast order with `info.fallback` set. Without an LLM those modes are an
/// error rather than a silent fast search, as `llm_query` is.
fn fn_search(lua: &Lua, session: Rc<Session>, catalog: Arc<Catalog>) -> mlua::Result<Function> {
    use crate::search::llm_modes::{LlmSearch, llm_calls, search_with_llm};
    use crate::search::{SearchMode, SearchOptions};

    lua.create_function(move |lua, (query, opts): (String, Option<Table>)| {
        let mut options = SearchOptions::default();
        let mut mode = SearchMode::Fast;
        if let Some(opts) = opts {
            if let Some(max) = opts.get::<Option<i64>>("max_results")? {
                options.max_results = count_arg("fn_search", "max_results", max)?.min(100);
            }
            options.capability = opts.get::<Option<String>>("capability")?;
            options.source = opts.get::<Option<String>>("source")?;
            if let Some(name) = opts.get::<Option<String>>("mode")? {
                mode = name
                    .parse()
                    .map_err(|e: String| mlua::Error::RuntimeError(format!("fn_search: {e}")))?;
            }
        }
        let found = if mode == SearchMode::Fast {
            LlmSearch::fast(&*catalog, &query, &options)
        } else {
            let llm = session.llm.as_ref().ok_or_else(|| {
                mlua::Error::RuntimeError(format!(
                    "fn_search: mode \"{}\" needs an LLM and none is configured for this environment; use mode \"fast\"",
                    mode.name()
                ))
            })?;
            session.before_calls(llm_calls(mode))?;
            let recorded = Recorded {
                llm: llm.as_ref(),
                results: std::sync::Mutex::new(Vec::new()),
            };
            let found = search_with_llm(&*catalog, &recorded, &query, &options, mode);
            let results = recorded
                .results
                .into_inner()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            for result in &results {
                session.spent(result);
            }
            found
        };
        let results = lua.create_table()?;
        for (i, hit) in found.results.into_iter().enumerate() {
            let entry = lua.create_table()?;
            entry.raw_set("name", hit.name)?;
            entry.raw_set("signature", hit.signature)?;
            entry.raw_set("summary", hit.summary)?;
            entry.raw_set("confidence", (hit.confidence * 100.0).round() / 100.0)?;
            results.raw_set(i + 1, entry)?;
        }
        let info = lua.create_table()?;
        info.raw_set("mode", found.mode.name())?;
        info.raw_set("fallback", found.fallback)?;
        info.raw_set("expansion_fallback", found.expansion_fallback)?;
        info.raw_set("expanded_terms", lua.create_sequence_from(found.expanded_terms)?)?;
        Ok((results, info))
    })
}

/// The environment's LLM, keeping every answer so that `fn_search` can charge the tokens
/// to the session afterwards: the session is not `Send`, which [`Llm`] requires.
struct Recorded<'a> {
    llm: &'a dyn Llm,
    results: std::sync::Mutex<Vec<Result<Completion, LlmError>>>,
}

impl Llm for Recorded<'_> {
    fn complete(&self, request: Request) -> Result<Completion, LlmError> {
        let result = self.llm.complete(request);
        self.results
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(result.clone());
        result
    }
}

/// `store_list()` and `store_summarize(name)`, written in Lua (so the execution's limits
/// apply) over the globals that are neither the standard library nor registry functions.
fn store(lua: &Lua, registry: Arc<Registry>) -> mlua::Result<(Function, Function)> {
    let is_registry_function =
        lua.create_function(move |_, name: String| Ok(registry.get(&name).is_some()))?;
    let standard = lua.create_table()?;
    for pair in lua.globals().pairs::<Value, Value>() {
        let (key, _) = pair?;
        standard.raw_set(key, true)?;
    }
    lua.load(STORE_LUA)
        .set_name("=store")
        .call((standard, is_registry_function))
}

const STORE_LUA: &str = r#"
local standard, is_registry_function = ...
local G, next, type, tostring, rawget, pairs = _G, next, type, tostring, rawget, pairs
local sort, concat, min, format = table.sort, table.concat, math.min, string.format

local function size_of(value)
  local kind = type(value)
  if kind == "string" then return #value end
  if kind == "table" then
    local n = 0
    for _ in next, value do n = n + 1 end
    return n
  end
  return nil
end

local function preview(value, limit)
  local text
  if type(value) == "table" then
    local parts = {}
    for k, v in next, value do
      if #parts >= 8 then parts[#parts + 1] = "..." break end
      parts[#parts + 1] = tostring(k) .. "=" .. tostring(v)
    end
    text = "{" .. concat(parts, ", ") .. "}"
  else
    text = tostring(value)
  end
  if #text > limit then text = text:sub(1, limit) .. "..." end
  return (text:gsub("\n", "\\n"))
end

local function user_names()
  local names = {}
  for name, value in next, G do
    if type(name) == "string" and not standard[name]
        and not (type(value) == "function" and is_registry_function(name)) then
      names[#names + 1] = name
    end
  end
  sort(names)
  return names
end

local function store_list()
  local list = {}
  for i, name in ipairs(user_names()) do
    local value = rawget(G, name)
    list[i] = { name = name, type = type(value), size = size_of(value), preview = preview(value, 80) }
  end
  return list
end

local function store_summarize(name)
  local value = rawget(G, name)
  if value == nil then
    error("store_summarize: no variable named '" .. tostring(name) .. "'", 2)
  end
  local size = size_of(value)
  local unit = type(value) == "string" and " bytes" or " entries"
  return format("%s: %s%s\n%s", name, type(value), size and (", " .. size .. unit) or "", preview(value, 500))
end

return store_list, store_summarize
"#;

fn user<'a>(session: &'a Session, builtin: &str) -> mlua::Result<&'a Arc<dyn User>> {
    session.user.as_ref().ok_or_else(|| {
        mlua::Error::RuntimeError(format!(
            "{builtin} is not available here: only the top-level agent can reach the user, and this environment has no user channel"
        ))
    })
}

/// `ask_user(question)` → the answer.
fn ask_user(lua: &Lua, session: Rc<Session>) -> mlua::Result<Function> {
    lua.create_function(move |_, question: String| {
        user(&session, "ask_user")?
            .ask(&question)
            .map_err(|e| mlua::Error::RuntimeError(format!("ask_user failed: {e}")))
    })
}

/// `notify_user(message)`.
fn notify_user(lua: &Lua, session: Rc<Session>) -> mlua::Result<Function> {
    lua.create_function(move |_, message: String| {
        user(&session, "notify_user")?
            .notify(&message)
            .map_err(|e| mlua::Error::RuntimeError(format!("notify_user failed: {e}")))
    })
}

/// `rlm_query(prompt [, context])`: a child agent, or `llm_query` when there is none
/// (at the depth limit the host gives no sub-agent).
fn rlm_query(lua: &Lua, session: Rc<Session>) -> mlua::Result<Function> {
    lua.create_function(move |_, (prompt, context): (String, Option<String>)| {
        let Some(agent) = session.sub_agent.clone() else {
            return fallback_llm_query(&session, &prompt, context.as_deref());
        };
        session.before_calls(1)?;
        agent
            .run(&prompt, context.as_deref())
            .map_err(|e| mlua::Error::RuntimeError(format!("rlm_query failed: {e}")))
    })
}

/// `rlm_query_batched(prompts [, contexts])`: children on scoped threads, answers in order.
fn rlm_query_batched(lua: &Lua, session: Rc<Session>) -> mlua::Result<Function> {
    lua.create_function(
        move |lua, (prompts, contexts): (Vec<String>, Option<Vec<String>>)| {
            let contexts = contexts.unwrap_or_default();
            let Some(agent) = session.sub_agent.clone() else {
                let answers = prompts
                    .iter()
                    .enumerate()
                    .map(|(i, p)| {
                        fallback_llm_query(&session, p, contexts.get(i).map(String::as_str))
                            .unwrap_or_else(|e| format!("error: {e}"))
                    })
                    .collect::<Vec<_>>();
                return lua.create_sequence_from(answers);
            };
            session.before_calls(prompts.len())?;
            let answers: Vec<String> = std::thread::scope(|scope| {
                let handles: Vec<_> = prompts
                    .iter()
                    .enumerate()
                    .map(|(i, prompt)| {
                        let agent = Arc::clone(&agent);
                        let context = contexts.get(i).cloned();
                        scope.spawn(move || agent.run(prompt, context.as_deref()))
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| match h.join() {
                        Ok(Ok(answer)) => answer,
                        Ok(Err(error)) => format!("error: {error}"),
                        Err(_) => "error: the child agent crashed".to_string(),
                    })
                    .collect()
            });
            lua.create_sequence_from(answers)
        },
    )
}

/// At the depth limit a child is a plain sub-model call, the context prepended.
fn fallback_llm_query(
    session: &Session,
    prompt: &str,
    context: Option<&str>,
) -> mlua::Result<String> {
    let llm = session.llm("rlm_query")?;
    session.before_calls(1)?;
    let text = match context {
        Some(context) => format!("{prompt}\n\n<context>\n{context}\n</context>"),
        None => prompt.to_string(),
    };
    let result = llm.complete(Request::from(text));
    session.spent(&result);
    result
        .map(|c| c.content)
        .map_err(|e| mlua::Error::RuntimeError(format!("rlm_query failed: {e}")))
}
