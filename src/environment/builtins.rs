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

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;

use mlua::{Function, Lua, MultiValue, Table, Value};

use super::limits::{LimitKind, Tripwire};
use crate::llm::{Completion, Llm, LlmError, Request};
use crate::tokens;

/// The state the built-ins share with their environment.
pub(crate) struct Session {
    tripwire: Rc<Tripwire>,
    llm: Option<Arc<dyn Llm>>,
    final_answer: RefCell<Option<String>>,
    /// Tokens (prompt and completion) the session may spend on sub-calls, if limited.
    token_budget: Option<u64>,
    tokens_spent: Cell<u64>,
}

impl Session {
    pub fn new(
        tripwire: Rc<Tripwire>,
        llm: Option<Arc<dyn Llm>>,
        token_budget: Option<u64>,
    ) -> Self {
        Session {
            tripwire,
            llm,
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

/// Every built-in, by name. Lua's own `print` is removed from the globals.
pub(crate) fn table(lua: &Lua, session: &Rc<Session>) -> mlua::Result<Table> {
    let builtins = lua.create_table()?;
    builtins.raw_set("print", print(lua, Rc::clone(session))?)?;
    builtins.raw_set("llm_query", llm_query(lua, Rc::clone(session))?)?;
    builtins.raw_set(
        "llm_query_batched",
        llm_query_batched(lua, Rc::clone(session))?,
    )?;
    builtins.raw_set("FINAL", final_value(lua, Rc::clone(session))?)?;
    builtins.raw_set("FINAL_VAR", final_var(lua, Rc::clone(session))?)?;
    builtins.raw_set("token_count", token_count(lua)?)?;
    builtins.raw_set("token_truncate", token_truncate(lua)?)?;
    builtins.raw_set("token_split", token_split(lua)?)?;
    builtins.raw_set("token_budget", token_budget(lua, Rc::clone(session))?)?;
    lua.globals().raw_set("print", Value::Nil)?;
    Ok(builtins)
}

/// `print(...)`: `tostring` of each argument, tab-separated, into the captured output.
fn print(lua: &Lua, session: Rc<Session>) -> mlua::Result<Function> {
    let tostring: Function = lua.globals().get("tostring")?;
    lua.create_function(move |_, args: MultiValue| {
        let mut line = String::new();
        for (i, value) in args.into_iter().enumerate() {
            if i > 0 {
                line.push('\t');
            }
            let text: mlua::LuaString = tostring.call(value)?;
            line.push_str(&text.to_string_lossy());
        }
        line.push('\n');
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

/// `token_count(text)`.
fn token_count(lua: &Lua) -> mlua::Result<Function> {
    lua.create_function(|_, text: mlua::LuaString| Ok(tokens::count(&text_of(&text))))
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
