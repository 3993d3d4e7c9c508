//! The `core` provider's output, answer and token built-ins: `print`, `FINAL`,
//! `FINAL_VAR` and `token_*` (the session's variables are in `session_variables.rs`, discovery in
//! `discovery.rs`).

use std::rc::Rc;

use mlua::{Function, Lua, MultiValue, Value};

use super::state::BuiltinState;
use crate::conventions::ANSWER_GLOBAL;
use crate::conventions::builtins::BuiltinId;
use crate::environment::answer_schema::AnswerSchema;
use crate::environment::lua_json;
use crate::tokens;

/// `print(...)`: `tostring` of each argument, tab-separated, into the captured output
/// (every byte kept: see [`escape_output`](crate::environment::escape_output)).
pub(super) fn print(lua: &Lua, state: Rc<BuiltinState>) -> mlua::Result<Function> {
    let tostring: Function = lua.globals().get("tostring")?;
    lua.create_function(move |_, args: MultiValue| {
        // The line is built no longer than the room left plus one byte, which is enough
        // for the output limit to trip: a line of huge strings is never copied whole.
        let most = state.tripwire.output_room().saturating_add(1);
        let mut line = Vec::new();
        for (i, value) in args.into_iter().enumerate() {
            if i > 0 {
                line.push(b'\t');
            }
            let text: mlua::LuaString = tostring.call(value)?;
            let text = text.as_bytes();
            let fits = most.saturating_sub(line.len()).min(text.len());
            line.extend_from_slice(&text[..fits]);
            if line.len() >= most {
                break;
            }
        }
        line.push(b'\n');
        state.tripwire.append_output(&line)
    })
}

/// `FINAL(value)`: the run's answer is `value` (see [`give_answer`]).
pub(super) fn final_value(lua: &Lua, state: Rc<BuiltinState>) -> mlua::Result<Function> {
    let tostring: Function = lua.globals().get("tostring")?;
    lua.create_function(move |lua, value: Value| give_answer(lua, &state, &tostring, value))
}

/// `FINAL_VAR(name)`: the run's answer is the value of the global `name`.
pub(super) fn final_var(lua: &Lua, state: Rc<BuiltinState>) -> mlua::Result<Function> {
    let tostring: Function = lua.globals().get("tostring")?;
    lua.create_function(move |lua, name: String| {
        let value: Value = lua.globals().get(name.as_str())?;
        if value.is_nil() {
            return Err(mlua::Error::RuntimeError(format!(
                "{builtin}: no variable named '{name}' (assign it first, then call {builtin}(\"{name}\"))",
                builtin = BuiltinId::FinalVar.name()
            )));
        }
        give_answer(lua, &state, &tostring, value)
    })
}

/// Records `value` as the final answer: `tostring(value)`, or with an answer schema the
/// value as JSON by the one Lua ↔ JSON mapping, checked against the schema. A value that
/// cannot be JSON, or does not match, is a Lua error saying why (every violation with
/// its path), and is not the answer.
fn give_answer(
    lua: &Lua,
    state: &BuiltinState,
    tostring: &Function,
    value: Value,
) -> mlua::Result<()> {
    let Some(schema) = &state.host.answer_schema else {
        let text: mlua::LuaString = tostring.call(value)?;
        state.set_final_answer(text.to_string_lossy(), None);
        return Ok(());
    };
    let json = lua_json::to_json(lua, &state.tripwire.guard, &value, ANSWER_GLOBAL)
        .map_err(|error| error.into_lua("the answer cannot be JSON: "))?;
    match schema.check(&json) {
        Ok(()) => {
            state.set_final_answer(json.to_string(), Some(json));
            Ok(())
        }
        Err(violations) => {
            let refusal = AnswerSchema::refusal(&violations);
            state.reject_answer(refusal.clone());
            Err(mlua::Error::RuntimeError(refusal))
        }
    }
}

/// Lua strings are bytes; the tokenizer needs text, so invalid UTF-8 is replaced.
fn text_of(value: &mlua::LuaString) -> String {
    value.to_string_lossy()
}

/// A count argument: a non-negative integer.
pub(super) fn count_arg(builtin: BuiltinId, name: &str, value: i64) -> mlua::Result<usize> {
    usize::try_from(value).map_err(|_| {
        mlua::Error::RuntimeError(format!(
            "{}: {name} must be a non-negative integer, got {value}",
            builtin.name()
        ))
    })
}

/// `token_count(text)`: valid UTF-8 (the usual case) is counted in place, not copied.
pub(super) fn token_count(lua: &Lua) -> mlua::Result<Function> {
    lua.create_function(|_, text: mlua::LuaString| {
        Ok(match text.to_str() {
            Ok(valid) => tokens::count(&valid),
            Err(_) => tokens::count(&text_of(&text)),
        })
    })
}

/// `token_truncate(text, n)`.
pub(super) fn token_truncate(lua: &Lua) -> mlua::Result<Function> {
    lua.create_function(|_, (text, n): (mlua::LuaString, i64)| {
        let n = count_arg(BuiltinId::TokenTruncate, "n", n)?;
        let text = text_of(&text);
        Ok(tokens::truncate(&text, n).to_string())
    })
}

/// `token_split(text, n [, overlap])`.
pub(super) fn token_split(lua: &Lua) -> mlua::Result<Function> {
    lua.create_function(|lua, (text, n, overlap): (mlua::LuaString, i64, Option<i64>)| {
        let n = count_arg(BuiltinId::TokenSplit, "n", n)?;
        let overlap = count_arg(BuiltinId::TokenSplit, "overlap", overlap.unwrap_or(0))?;
        if n == 0 || overlap >= n {
            return Err(mlua::Error::RuntimeError(format!(
                "{}: n must be positive and overlap smaller than n (got n = {n}, overlap = {overlap})",
                BuiltinId::TokenSplit.name()
            )));
        }
        let text = text_of(&text);
        let pieces = lua.create_table()?;
        let mut count = 0;
        tokens::split_each(&text, n, overlap, |piece| {
            count += 1;
            pieces.raw_set(count, piece)
        })?;
        Ok(pieces)
    })
}

/// `token_budget()`.
pub(super) fn token_budget(lua: &Lua, state: Rc<BuiltinState>) -> mlua::Result<Function> {
    lua.create_function(move |_, ()| {
        Ok(match state.remaining_tokens() {
            Some(remaining) => mlua::Value::Integer(i64::try_from(remaining).unwrap_or(i64::MAX)),
            None => mlua::Value::Number(f64::INFINITY),
        })
    })
}
