//! The sandbox's `load`: C Lua's `luaB_load` (chunk names, modes, the environment
//! argument, one result on success, `nil` and the bare message on failure), except that
//! binary chunks are always refused (they can crash the VM).

use std::ffi::{CStr, CString, c_int};

use mlua::{Function, Lua, MultiValue, Value, ffi};

use super::errors::lua_message;
use super::lauxlib::type_name;

/// The first byte of a precompiled chunk (`LUA_SIGNATURE`).
const BINARY_SIGNATURE: u8 = 0x1b;
/// How a chunk read from a reader function is named by default, as in C Lua.
const READER_CHUNK_NAME: &CStr = c"=(load)";

/// `load(chunk [, chunkname [, mode [, env]]])`. A C function checks the arguments, so
/// that their errors are C Lua's, at the caller's position even in a tail call; it then
/// calls the Rust implementation in its upvalue with the same arguments.
pub(crate) fn safe_load(lua: &Lua) -> mlua::Result<Function> {
    let implementation = load_function(lua)?;
    // SAFETY: `exec_raw` runs the closure protected, with the upvalue on the stack.
    unsafe {
        lua.exec_raw(implementation, |state| {
            ffi::lua_pushcclosure(state, checked_load, 1);
        })
    }
}

/// `luaB_load`'s argument checks, in its order (the mode, the chunk name, then the
/// chunk: `load({}, {})` blames argument #2), then the call to the implementation in
/// upvalue 1.
unsafe extern "C-unwind" fn checked_load(state: *mut ffi::lua_State) -> c_int {
    unsafe {
        for optional_string in [3, 2] {
            if ffi::lua_isnoneornil(state, optional_string) == 0 {
                ffi::luaL_checklstring(state, optional_string, std::ptr::null_mut());
            }
        }
        if ffi::lua_type(state, 1) != ffi::LUA_TSTRING && ffi::lua_isnumber(state, 1) == 0 {
            ffi::luaL_checktype(state, 1, ffi::LUA_TFUNCTION);
        }
        let arguments = ffi::lua_gettop(state);
        ffi::lua_pushvalue(state, ffi::lua_upvalueindex(1));
        ffi::lua_insert(state, 1);
        ffi::lua_call(state, arguments, ffi::LUA_MULTRET);
        ffi::lua_gettop(state)
    }
}

fn load_function(lua: &Lua) -> mlua::Result<Function> {
    lua.create_function(|lua, args: MultiValue| {
        let arg = |n: usize| args.get(n).cloned().unwrap_or(Value::Nil);
        let (source, from_reader) = match arg(0) {
            chunk @ (Value::String(_) | Value::Integer(_) | Value::Number(_)) => {
                let text = lua.coerce_string(chunk)?.map(|s| s.as_bytes().to_vec());
                (text.unwrap_or_default(), false)
            }
            Value::Function(reader) => match read_all(&reader) {
                Ok(text) => (text, true),
                Err(message) => return failure(lua, message),
            },
            other => return Err(bad_argument(1, "function", &other)),
        };
        // Unnamed, a text chunk is named by its source, as C Lua names it.
        let name = match optional_string(lua, 2, arg(1))? {
            Some(name) => chunk_name_of(&name),
            None if from_reader => READER_CHUNK_NAME.to_owned(),
            None => chunk_name_of(&source),
        };
        let mode = match optional_string(lua, 3, arg(2))? {
            Some(mode) => String::from_utf8_lossy(&mode).into_owned(),
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
        // As C Lua: an `env` argument, even an explicit nil, becomes the chunk's `_ENV`.
        let env = (args.len() > 3).then(|| arg(3));
        load_text(lua, source, name, env)
    })
}

/// Compiles a text chunk: the function alone, or `nil` and Lua's own message. Through
/// `luaL_loadbufferx` itself rather than mlua's loader, so that a chunk name and a
/// message keep their bytes when they are not UTF-8 (`load("x = '\233")`).
fn load_text(
    lua: &Lua,
    source: Vec<u8>,
    name: CString,
    env: Option<Value>,
) -> mlua::Result<MultiValue> {
    let mut status = ffi::LUA_OK;
    // SAFETY: `luaL_loadbufferx` raises no error (a failure is its status, with the
    // message pushed), so nothing unwinds past `source` and `name`; it leaves one value.
    let loaded = unsafe {
        lua.exec_raw::<Value>((), |state| {
            status = ffi::luaL_loadbufferx(
                state,
                source.as_ptr().cast(),
                source.len(),
                name.as_ptr(),
                c"t".as_ptr(),
            );
        })
    }?;
    match (status, loaded) {
        (ffi::LUA_OK, Value::Function(function)) => {
            let function = match env {
                Some(env) => with_environment(lua, function, env)?,
                None => function,
            };
            Ok(MultiValue::from_vec(vec![Value::Function(function)]))
        }
        (ffi::LUA_ERRMEM, _) => Err(mlua::Error::MemoryError("not enough memory".into())),
        (_, message) => Ok(MultiValue::from_vec(vec![Value::Nil, message])),
    }
}

/// Sets a loaded chunk's first upvalue (its `_ENV`) to any value, as `load_aux` does:
/// a table, but also nil or a number, whose every global access then fails as in C Lua.
fn with_environment(lua: &Lua, function: Function, env: Value) -> mlua::Result<Function> {
    // SAFETY: the stack holds the function (1) and the value (2); `lua_setupvalue` pops
    // the value it assigns and raises no error, and one value, the function, is left.
    unsafe {
        lua.exec_raw::<Function>((function, env), |state| {
            ffi::lua_pushvalue(state, 2);
            if ffi::lua_setupvalue(state, 1, 1).is_null() {
                ffi::lua_pop(state, 1);
            }
            ffi::lua_settop(state, 1);
        })
    }
}

/// `luaL_optstring`: nil or absent is `None`, a string or number its bytes, anything
/// else an argument error.
fn optional_string(lua: &Lua, position: usize, value: Value) -> mlua::Result<Option<Vec<u8>>> {
    match value {
        Value::Nil => Ok(None),
        Value::String(_) | Value::Integer(_) | Value::Number(_) => Ok(lua
            .coerce_string(value)?
            .map(|text| text.as_bytes().to_vec())),
        other => Err(bad_argument(position, "string", &other)),
    }
}

/// `luaL_typeerror`'s message for `load`.
fn bad_argument(position: usize, expected: &str, got: &Value) -> mlua::Error {
    mlua::Error::RuntimeError(format!(
        "bad argument #{position} to 'load' ({expected} expected, got {})",
        type_name(got)
    ))
}

/// `nil, message`, as `load` reports a chunk it cannot load.
fn failure(lua: &Lua, message: String) -> mlua::Result<MultiValue> {
    Ok(MultiValue::from_vec(vec![
        Value::Nil,
        Value::String(lua.create_string(message)?),
    ]))
}

/// A chunk name as C Lua reads it: a C string, so it ends at the first `'\0'`.
fn chunk_name_of(bytes: &[u8]) -> CString {
    let end = memchr::memchr(0, bytes).unwrap_or(bytes.len());
    CString::new(&bytes[..end]).unwrap_or_default()
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
            // `lua_isstring`: a number is a piece too, as `tostring` writes it.
            Ok(number @ (Value::Integer(_) | Value::Number(_))) => {
                let text = number.to_string().map_err(|error| lua_message(&error))?;
                source.extend_from_slice(text.as_bytes());
            }
            Ok(_) => return Err("reader function must return a string".to_string()),
            Err(error) => return Err(lua_message(&error)),
        }
    }
}
