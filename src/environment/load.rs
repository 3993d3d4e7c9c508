//! The sandbox's `load`: C Lua's `luaB_load` (chunk names, modes, the environment
//! argument, one result on success, `nil` and the bare message on failure), except that
//! binary chunks are always refused (they can crash the VM).

use mlua::{Function, Lua, MultiValue, Table, Value};

use super::errors::lua_message;
use super::lauxlib::type_name;

/// The first byte of a precompiled chunk (`LUA_SIGNATURE`).
const BINARY_SIGNATURE: u8 = 0x1b;
/// How a chunk read from a reader function is named by default, as in C Lua.
const READER_CHUNK_NAME: &str = "=(load)";

/// `load(chunk [, chunkname [, mode [, env]]])`.
pub(crate) fn safe_load(lua: &Lua) -> mlua::Result<Function> {
    lua.create_function(|lua, args: MultiValue| {
        let arg = |n: usize| args.get(n).cloned().unwrap_or(Value::Nil);
        let (source, default_name) = match arg(0) {
            chunk @ (Value::String(_) | Value::Integer(_) | Value::Number(_)) => {
                let text = lua.coerce_string(chunk)?.map(|s| s.as_bytes().to_vec());
                let text = text.unwrap_or_default();
                let name = chunk_name_of(&text);
                (text, name)
            }
            Value::Function(reader) => match read_all(&reader) {
                Ok(text) => (text, READER_CHUNK_NAME.to_string()),
                Err(message) => return failure(lua, message),
            },
            other => {
                let message = format!(
                    "bad argument #1 to 'load' (function expected, got {})",
                    type_name(&other)
                );
                return failure(lua, message);
            }
        };
        let name = match lua.coerce_string(arg(1))? {
            Some(name) => chunk_name_of(&name.as_bytes()),
            None => default_name,
        };
        let mode = match lua.coerce_string(arg(2))? {
            Some(mode) => mode.to_string_lossy(),
            None => "bt".to_string(),
        };
        let binary = source.first() == Some(&BINARY_SIGNATURE);
        let kind = if binary { "binary" } else { "text" };
        if !mode.contains(&kind[..1]) {
            return failure(
                lua,
                format!("attempt to load a {kind} chunk (mode is '{mode}')"),
            );
        }
        if binary {
            return failure(
                lua,
                "attempt to load a binary chunk (the sandbox loads text chunks only)".to_string(),
            );
        }
        let env = match arg(3) {
            Value::Table(env) => env,
            _ => lua.globals(),
        };
        load_text(lua, source, name, env)
    })
}

/// Compiles a text chunk: the function alone, or `nil` and Lua's own message.
fn load_text(lua: &Lua, source: Vec<u8>, name: String, env: Table) -> mlua::Result<MultiValue> {
    let loaded = lua
        .load(source)
        .set_name(name)
        .set_mode(mlua::chunk::ChunkMode::Text)
        .set_environment(env)
        .into_function();
    match loaded {
        Ok(function) => Ok(MultiValue::from_vec(vec![Value::Function(function)])),
        Err(mlua::Error::SyntaxError { message, .. }) => failure(lua, message),
        Err(mlua::Error::MemoryError(message)) => Err(mlua::Error::MemoryError(message)),
        Err(other) => failure(lua, other.to_string()),
    }
}

/// `nil, message`, as `load` reports a chunk it cannot load.
fn failure(lua: &Lua, message: String) -> mlua::Result<MultiValue> {
    Ok(MultiValue::from_vec(vec![
        Value::Nil,
        Value::String(lua.create_string(message)?),
    ]))
}

/// A chunk name as C Lua reads it: a C string, so it ends at the first `'\0'`.
fn chunk_name_of(bytes: &[u8]) -> String {
    let end = memchr::memchr(0, bytes).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// The pieces returned by a `load` reader function, concatenated, up to `nil` or an empty
/// string; Lua's message if the reader fails or returns something else.
fn read_all(reader: &Function) -> Result<Vec<u8>, String> {
    let mut source = Vec::new();
    loop {
        match reader.call::<Value>(()) {
            Ok(Value::Nil) => return Ok(source),
            Ok(Value::String(piece)) if piece.as_bytes().is_empty() => return Ok(source),
            Ok(Value::String(piece)) => source.extend_from_slice(&piece.as_bytes()),
            Ok(Value::Integer(i)) => source.extend_from_slice(i.to_string().as_bytes()),
            Ok(_) => return Err("reader function must return a string".to_string()),
            Err(error) => return Err(lua_message(&error)),
        }
    }
}
