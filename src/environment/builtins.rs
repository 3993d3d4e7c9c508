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

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use mlua::{Function, Lua, MultiValue, Table, Value};

use super::limits::Tripwire;
use crate::llm::{Llm, Request};

/// The state the built-ins share with their environment.
pub(crate) struct Session {
    tripwire: Rc<Tripwire>,
    llm: Option<Arc<dyn Llm>>,
    final_answer: RefCell<Option<String>>,
}

impl Session {
    pub fn new(tripwire: Rc<Tripwire>, llm: Option<Arc<dyn Llm>>) -> Self {
        Session {
            tripwire,
            llm,
            final_answer: RefCell::new(None),
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
        session.tripwire.count_llm_calls(1)?;
        let request = Request::from(prompt.to_string_lossy());
        llm.complete(request)
            .map(|completion| completion.content)
            .map_err(|error| mlua::Error::RuntimeError(format!("llm_query failed: {error}")))
    })
}

/// `llm_query_batched(prompts)` → answers in order; a failed call gives `"error: …"` so
/// one failure does not lose the other answers.
fn llm_query_batched(lua: &Lua, session: Rc<Session>) -> mlua::Result<Function> {
    lua.create_function(move |lua, prompts: Vec<mlua::LuaString>| {
        let llm = session.llm("llm_query_batched")?;
        session.tripwire.count_llm_calls(prompts.len())?;
        let requests = prompts
            .iter()
            .map(|p| Request::from(p.to_string_lossy()))
            .collect();
        let answers: Vec<String> = llm
            .complete_batch(requests)
            .into_iter()
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
