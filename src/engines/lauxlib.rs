//! `lauxlib` helpers that the `mlua` bindings do not export, for the sandbox's C functions.

use std::ffi::c_int;

use mlua::{Value, ffi};

/// `luaL_typeerror(L, arg, expected)`: "bad argument #arg to 'f' (expected expected, got
/// T)", `T` the `__name` of the value's metatable if it is a string, else its type.
///
/// # Safety
/// Called from a `lua_CFunction`; raises (a `longjmp`), so the caller must hold nothing
/// that needs dropping.
pub(crate) unsafe fn type_error(state: *mut ffi::lua_State, arg: c_int, expected: &str) -> c_int {
    unsafe {
        let got = if ffi::luaL_getmetafield(state, arg, c"__name".as_ptr()) == ffi::LUA_TSTRING {
            let mut len = 0;
            let name = ffi::lua_tolstring(state, -1, &mut len);
            String::from_utf8_lossy(std::slice::from_raw_parts(name.cast::<u8>(), len)).into_owned()
        } else if ffi::lua_type(state, arg) == ffi::LUA_TLIGHTUSERDATA {
            "light userdata".to_string()
        } else {
            let name = ffi::lua_typename(state, ffi::lua_type(state, arg));
            std::ffi::CStr::from_ptr(name)
                .to_string_lossy()
                .into_owned()
        };
        let message = format!("{expected} expected, got {got}");
        ffi::lua_pushlstring(state, message.as_ptr().cast(), message.len());
        drop((message, got));
        // The message lives on the stack until the error is raised.
        ffi::luaL_argerror(state, arg, ffi::lua_tostring(state, -1))
    }
}

/// `luaL_typename`: the type name Lua's own messages use.
pub(crate) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Nil => "nil",
        Value::Boolean(_) => "boolean",
        Value::Integer(_) | Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Table(_) => "table",
        Value::Function(_) => "function",
        Value::Thread(_) => "thread",
        _ => "userdata",
    }
}
