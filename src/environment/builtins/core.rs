//! The `core` provider's output, answer and token built-ins: `print`, `FINAL`,
//! `FINAL_VAR` and `token_*` (the session's variables are in `session_variables.rs`, discovery in
//! `discovery.rs`).

use std::rc::Rc;

use mlua::{Function, Lua, MultiValue, Table, Value};
use serde_json::Value as Json;

use super::state::BuiltinState;
use crate::conventions::ANSWER_GLOBAL;
use crate::conventions::builtins::BuiltinId;
use crate::environment::answer_schema::AnswerSchema;
use crate::environment::errors::per_state;
use crate::environment::lua_json::{self, CrossError, RefusalKind};
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

/// The original `tostring`, kept where the code cannot replace it: an answer's text
/// must not depend on what the code assigned to the global.
const TOSTRING: &str = "rlm.answer.tostring";

fn original_tostring(lua: &Lua) -> mlua::Result<Function> {
    per_state(lua, TOSTRING, || lua.globals().get("tostring"))
}

/// `FINAL(value)`: the run's answer is `value` (see [`give_answer`]).
pub(super) fn final_value(lua: &Lua, state: Rc<BuiltinState>) -> mlua::Result<Function> {
    original_tostring(lua)?;
    lua.create_function(move |lua, value: Value| give_answer(lua, &state, Giver::Final, value))
}

/// `FINAL_VAR(name)`: the run's answer is the value of the global `name`.
pub(super) fn final_var(lua: &Lua, state: Rc<BuiltinState>) -> mlua::Result<Function> {
    original_tostring(lua)?;
    lua.create_function(move |lua, name: String| {
        let value: Value = lua.globals().get(name.as_str())?;
        if value.is_nil() {
            return Err(mlua::Error::RuntimeError(format!(
                "{builtin}: no variable named '{name}' (assign it first, then call {builtin}(\"{name}\"))",
                builtin = BuiltinId::FinalVar.name()
            )));
        }
        give_answer(lua, &state, Giver::FinalVar(&name), value)
    })
}

/// What gave an answer: it names the value in a refusal.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Giver<'a> {
    /// `FINAL(value)`.
    Final,
    /// `FINAL_VAR(name)`: the global `name`.
    FinalVar(&'a str),
    /// `answer.content`, once `answer.ready` is `true`.
    AnswerContent,
}

impl Giver<'_> {
    /// The name of the value given, where a refusal's path starts.
    fn root(self) -> String {
        match self {
            Giver::Final => ANSWER_GLOBAL.to_string(),
            Giver::FinalVar(name) => name.to_string(),
            Giver::AnswerContent => format!("{ANSWER_GLOBAL}.content"),
        }
    }

    /// How a refusal starts: the built-in's name, as other built-ins' errors start.
    fn name(self) -> String {
        match self {
            Giver::Final => BuiltinId::Final.name().to_string(),
            Giver::FinalVar(_) => BuiltinId::FinalVar.name().to_string(),
            Giver::AnswerContent => format!("{ANSWER_GLOBAL}.content"),
        }
    }

    /// What it takes, said before what it got.
    fn takes(self) -> String {
        let kinds = "a string, a number, a boolean or a table of those";
        match self {
            Giver::Final => format!("{} takes {kinds}", self.name()),
            Giver::FinalVar(_) => format!("{} takes a variable holding {kinds}", self.name()),
            Giver::AnswerContent => format!("{} must be {kinds}", self.name()),
        }
    }

    /// The refusal of a value of `type_name` at `path`, which has no JSON form, saying
    /// what to pass instead.
    fn no_json_form(self, type_name: &str, path: &str) -> mlua::Error {
        let advice = match type_name {
            "function" => "call it and pass its result",
            "thread" => "resume the coroutine and pass what it returns",
            _ => "pass what you need of it as a string, a number or a table",
        };
        let at = if path == self.root() {
            String::new()
        } else {
            format!(" at {path}")
        };
        mlua::Error::RuntimeError(format!(
            "{}; got a {type_name}{at} — {advice}",
            self.takes()
        ))
    }

    /// A value that could not become JSON, as the model reads it.
    fn refusal(self, error: CrossError) -> mlua::Error {
        let CrossError::Refused(refusal) = error else {
            return error.into_lua("");
        };
        match refusal.kind {
            RefusalKind::NoJsonForm { type_name, path } => self.no_json_form(type_name, &path),
            RefusalKind::Cycle { path } => mlua::Error::RuntimeError(format!(
                "{}: the table refers to itself at {path}; pass a copy without the cycle",
                self.name()
            )),
            RefusalKind::Other => {
                mlua::Error::RuntimeError(format!("{}: {}", self.name(), refusal.message))
            }
        }
    }
}

/// Records `value` as the final answer. Without an answer schema, a table is its JSON
/// text by the one Lua ↔ JSON mapping (keys sorted, so the text is the same in every
/// run), a value JSON has no form for (a function, a coroutine, a userdata) is refused,
/// and anything else, or a table with a `__tostring` metamethod, is what `tostring`
/// makes of it (a string stays itself, not quoted). With a schema, the value as JSON,
/// checked against the schema. A value that cannot be the answer is a Lua error saying
/// why and what to pass instead (every violation with its path), and is not the answer.
pub(crate) fn give_answer(
    lua: &Lua,
    state: &BuiltinState,
    giver: Giver<'_>,
    value: Value,
) -> mlua::Result<()> {
    let Some(schema) = &state.host.answer_schema else {
        let text = answer_text(lua, state, giver, value)?;
        state.set_final_answer(text, None);
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

/// The text of an answer given without a schema (see [`give_answer`]).
fn answer_text(
    lua: &Lua,
    state: &BuiltinState,
    giver: Giver<'_>,
    value: Value,
) -> mlua::Result<String> {
    // A table with `__tostring` was given a text of its own by the code.
    let as_json = match value.as_table().map(Table::metatable) {
        Some(Some(metatable)) => metatable.raw_get::<Value>("__tostring")?.is_nil(),
        Some(None) => true,
        None => false,
    };
    match &value {
        _ if as_json => {
            let root = giver.root();
            let json = lua_json::to_json(lua, &state.tripwire.guard, &value, &root)
                .map_err(|error| giver.refusal(error))?;
            Ok(json.to_string())
        }
        _ if lua_json::is_null(&value) => Ok(Json::Null.to_string()),
        Value::Function(_) | Value::Thread(_) | Value::UserData(_) | Value::LightUserData(_) => {
            Err(giver.no_json_form(value.type_name(), &giver.root()))
        }
        _ => {
            let text: mlua::LuaString = original_tostring(lua)?.call(value)?;
            Ok(text.to_string_lossy())
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

/// `budget()`: a table of what is left, a field left out (nil) where there is no budget.
pub(super) fn budget(lua: &Lua, state: Rc<BuiltinState>, depth: usize) -> mlua::Result<Function> {
    lua.create_function(move |lua, ()| {
        let left = state.budget_left(depth);
        let table = lua.create_table()?;
        let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        table.raw_set("tokens", left.tokens.map(count))?;
        table.raw_set("calls", left.calls.map(count))?;
        table.raw_set("seconds", left.seconds)?;
        table.raw_set("cost", left.cost)?;
        table.raw_set("iterations", left.iterations)?;
        table.raw_set("depth", left.depth)?;
        table.raw_set("max_depth", left.max_depth)?;
        Ok(table)
    })
}
