//! The options table a built-in takes as its last argument (`rlm_query(p, {schema = s})`,
//! `llm_query(p, {cache = false})`): read the same way everywhere, an unknown option or
//! an argument that is not a table an error naming the built-in.

use mlua::{Table, Value};

use crate::conventions::builtins::BuiltinId;

/// The options argument at `position`: a table, or none when `nil`.
pub(super) fn options_table(
    builtin: BuiltinId,
    position: usize,
    value: Value,
) -> mlua::Result<Option<Table>> {
    match value {
        Value::Nil => Ok(None),
        Value::Table(options) => Ok(Some(options)),
        other => Err(bad_options(builtin, position, &other)),
    }
}

/// Refuses a key of `options` that is not one of `known`, listing them: a misspelt
/// option, or one borrowed from elsewhere (Python's `delimiter` for `sep`), would
/// otherwise be ignored without a word. Every built-in that takes options says it this
/// way.
pub(super) fn check_known(builtin: BuiltinId, options: &Table, known: &[&str]) -> mlua::Result<()> {
    match unknown_option(builtin, options, known)? {
        Some(message) => Err(mlua::Error::RuntimeError(message)),
        None => Ok(()),
    }
}

/// The message for the first key of `options` that is not one of `known`, if any: for a
/// caller that raises it itself (`parallel_map`'s Lua side, at its caller's line).
pub(super) fn unknown_option(
    builtin: BuiltinId,
    options: &Table,
    known: &[&str],
) -> mlua::Result<Option<String>> {
    for pair in options.pairs::<Value, Value>() {
        let (key, _) = pair?;
        let is_known =
            matches!(&key, Value::String(name) if known.contains(&&*name.to_string_lossy()));
        if !is_known {
            return Ok(Some(format!(
                "{}: unknown option {} (the options are: {})",
                builtin.name(),
                shown_key(&key),
                known.join(", ")
            )));
        }
    }
    Ok(None)
}

/// `opts.<name>` as a boolean, `None` when absent.
pub(super) fn bool_option(
    builtin: BuiltinId,
    options: &Table,
    name: &str,
) -> mlua::Result<Option<bool>> {
    match options.get::<Value>(name)? {
        Value::Nil => Ok(None),
        Value::Boolean(value) => Ok(Some(value)),
        other => Err(mlua::Error::RuntimeError(format!(
            "{}: opts.{name} must be true or false, got {}",
            builtin.name(),
            lua_type(&other)
        ))),
    }
}

/// The error for an options argument that is not a table.
pub(super) fn bad_options(builtin: BuiltinId, position: usize, value: &Value) -> mlua::Error {
    mlua::Error::RuntimeError(format!(
        "{}: bad argument #{position} (an options table expected, got {})",
        builtin.name(),
        lua_type(value)
    ))
}

/// The value's type as Lua's `type` names it (an integer is a `number`).
pub(super) fn lua_type(value: &Value) -> &'static str {
    match value {
        Value::Integer(_) => "number",
        other => other.type_name(),
    }
}

/// A key as an error names it.
fn shown_key(key: &Value) -> String {
    match key {
        // A name as the code would write it; anything longer (a key that is a whole
        // text) is quoted and cut, so the message stays a line.
        Value::String(name) if name.as_bytes().len() <= 64 => {
            format!("`{}`", name.to_string_lossy())
        }
        Value::String(_) => crate::environment::errors::describe_value(key),
        other => format!("of type {}", lua_type(other)),
    }
}
