//! Lua errors as the model reads them: plain strings with the caller's position, as Lua's
//! own C functions raise them, never mlua's userdata or tracebacks; how a message shows a
//! string it names; and the one test for the allocator's refusal, which must reach the
//! environment untouched.

use mlua::{Function, Lua, Table, Value};

pub(crate) use crate::engines::{quoted, shown};

use super::chunks::InternalChunk;

/// Wraps a function returning `true, results…` or `false, message` so that a failure is
/// an ordinary Lua error whose value is the message, as `error("…")` would raise: what
/// `pcall` returns is the message, without Rust's wrapping or a traceback.
pub(crate) fn raise_failures(lua: &Lua, inner: Function) -> mlua::Result<Function> {
    let wrap = per_state(lua, "rlm.raise_failures", || {
        RAISE_FAILURES.function(lua)?.call((
            lua.globals().get::<Function>("error")?,
            table_function(lua, "pack")?,
            table_function(lua, "unpack")?,
        ))
    })?;
    wrap.call(inner)
}

/// The function kept under `key` in `lua`'s registry, made by `make` the first time: an
/// internal chunk is compiled once per Lua state, not once per function it wraps.
pub(crate) fn per_state(
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
/// `table` names the built-in table the functions are fields of (`json`), so that an
/// argument error names `json.encode`, not an `encode` that could be `csv.encode`.
pub(crate) fn raise_plain_errors(
    lua: &Lua,
    functions: &Table,
    keep: &[&str],
    table: Option<&str>,
) -> mlua::Result<()> {
    let wrap_all = per_state(lua, "rlm.raise_plain_errors", || plain_error_wrapper(lua))?;
    let keep = lua.create_table_from(keep.iter().map(|&name| (name, true)))?;
    wrap_all.call((functions, keep, table))
}

fn plain_error_wrapper(lua: &Lua) -> mlua::Result<Function> {
    let message = plain_message(lua)?;
    PLAIN_ERRORS.function(lua)?.call((
        lua.globals().get::<Function>("pcall")?,
        lua.globals().get::<Function>("error")?,
        table_function(lua, "pack")?,
        table_function(lua, "unpack")?,
        message,
        lua.globals().get::<Function>("next")?,
        lua.globals().get::<Function>("type")?,
    ))
}

/// The function turning an error value into the message and level to raise it with
/// (`error(message(e))`): a Rust error's message at the caller's line, anything else as
/// it is.
pub(crate) fn plain_message(lua: &Lua) -> mlua::Result<Function> {
    // A Rust error's message is raised at the caller's line, like a C function's; a Lua
    // error passing through (from a callback) keeps its own position.
    // `function` names the function called, when the wrapper knows it, for argument errors.
    lua.create_function(|lua, (value, function): (Value, Option<String>)| {
        Ok(match value {
            Value::Error(error) if !is_memory_error(&error) => {
                let argument = function.and_then(|name| argument_message(&error, &name));
                let message = argument.unwrap_or_else(|| lua_message(&error));
                let level = if has_position(&message) { 0 } else { 2 };
                (Value::String(lua.create_string(message)?), level)
            }
            other => (other, 0),
        })
    })
}

/// Whether the allocator refused: that error must reach the environment as it is.
pub(crate) fn is_memory_error(error: &mlua::Error) -> bool {
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

/// An argument that did not convert, worded as `luaL_typeerror` words it: `bad argument
/// #1 to 'word_count' (string expected, got nil)`, not mlua's "error converting Lua nil
/// to String".
fn argument_message(error: &mlua::Error, function: &str) -> Option<String> {
    match error {
        mlua::Error::CallbackError { cause, .. } => argument_message(cause, function),
        mlua::Error::BadArgument { pos, cause, .. } => match &**cause {
            mlua::Error::FromLuaConversionError { from, to, .. } => Some(format!(
                "bad argument #{pos} to '{function}' ({} expected, got {})",
                lua_type_of(to),
                lua_type_of(from)
            )),
            _ => None,
        },
        _ => None,
    }
}

/// The Lua type a Rust conversion target stands for, in messages.
fn lua_type_of(rust_type: &str) -> &str {
    match rust_type {
        "String" | "string" | "LuaString" | "BString" | "str" => "string",
        "i8" | "i16" | "i32" | "i64" | "isize" | "u8" | "u16" | "u32" | "u64" | "usize" => "number",
        "f32" | "f64" | "integer" | "number" => "number",
        "Table" => "table",
        "Function" => "function",
        "bool" => "boolean",
        other => other,
    }
}

/// A value as an error message shows it: `"name"`, `3`, `2.5`, `true`, `a function`.
pub(crate) fn describe_value(value: &Value) -> String {
    match value {
        Value::String(text) => quoted(&text.as_bytes()),
        Value::Integer(i) => i.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Boolean(b) => b.to_string(),
        other => format!("a {}", other.type_name()),
    }
}

/// The message of a Lua error without mlua's wrapping and traceback.
pub(crate) fn lua_message(error: &mlua::Error) -> String {
    let text = match error {
        mlua::Error::CallbackError { cause, .. } => return lua_message(cause),
        mlua::Error::RuntimeError(message) | mlua::Error::SyntaxError { message, .. } => {
            message.clone()
        }
        other => other.to_string(),
    };
    match text.find("\nstack traceback:") {
        Some(end) => text[..end].to_string(),
        None => text,
    }
}

static RAISE_FAILURES: InternalChunk = InternalChunk::new(
    "=host",
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
);

static PLAIN_ERRORS: InternalChunk = InternalChunk::new(
    "=builtin",
    r#"
        local pcall, error, pack, unpack, message, next, type = ...
        local function wrap(inner, name)
          return function(...)
            local results = pack(pcall(inner, ...))
            if results[1] then return unpack(results, 2, results.n) end
            error(message(results[2], name))
          end
        end
        return function(functions, keep, table)
          for name, value in next, functions do
            if type(value) == "function" and not keep[name] then
              functions[name] = wrap(value, table and table .. "." .. name or name)
            end
          end
        end
        "#,
);
