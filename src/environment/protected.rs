//! `pcall`, `xpcall`, `coroutine.resume` and `coroutine.close` that cannot swallow a limit
//! error: when a limit has tripped inside the protected call, or the call failed for lack
//! of memory, the limit error is raised again instead of being returned.
//!
//! They are C functions, written as Lua's own (`luaB_pcall`, `luaB_xpcall` with
//! `finishpcall` as continuation, so a coroutine may still yield across them): no Lua
//! frame of the sandbox stands between the caller and the function called, so error
//! levels, positions and the names in argument errors are those of C Lua.

use std::ffi::c_int;
use std::rc::Rc;

use mlua::{Function, Lua, Table, Value, ffi};

use super::errors::is_memory_error;
use super::limits::{LimitKind, Tripwire};

/// Replaces the four functions, each with the limits check in its upvalue 1.
pub(crate) fn guard_protected_calls(lua: &Lua, tripwire: Rc<Tripwire>) -> mlua::Result<()> {
    // Called with a protected call's status and first value: raises the limit error.
    let check = lua.create_function(move |_, (ok, first): (Value, Value)| {
        if matches!(ok, Value::Boolean(false)) && is_memory_failure(&first) {
            return Err(tripwire.trip(LimitKind::Memory));
        }
        match tripwire.tripped() {
            Some(_) => Err(tripwire.error()),
            None => Ok(()),
        }
    })?;
    let globals = lua.globals();
    let coroutine: Table = globals.get("coroutine")?;
    let resume: Function = coroutine.get("resume")?;
    let close: Function = coroutine.get("close")?;
    let closure = |function: ffi::lua_CFunction, upvalues: Vec<Value>| -> mlua::Result<Function> {
        let count = upvalues.len() as c_int;
        // SAFETY: `exec_raw` runs the closure protected, with the upvalues on the stack.
        unsafe {
            lua.exec_raw(mlua::MultiValue::from_vec(upvalues), |state| {
                ffi::lua_pushcclosure(state, function, count);
            })
        }
    };
    let check = Value::Function(check);
    globals.raw_set("pcall", closure(guarded_pcall, vec![check.clone()])?)?;
    globals.raw_set("xpcall", closure(guarded_xpcall, vec![check.clone()])?)?;
    let resume = vec![check.clone(), Value::Function(resume)];
    coroutine.raw_set("resume", closure(guarded_resume, resume)?)?;
    let close = vec![check, Value::Function(close)];
    coroutine.raw_set("close", closure(guarded_resume, close)?)
}

/// `"not enough memory"`: what a protected call returns when an allocation failed, also
/// when a Rust function passed the failure on (mlua wraps it as its callback's error).
fn is_memory_failure(value: &Value) -> bool {
    match value {
        Value::String(s) => s.as_bytes().as_ref() == b"not enough memory",
        Value::Error(e) => is_memory_error(e),
        _ => false,
    }
}

/// Calls the check in upvalue 1 with the values at `ok` and `ok + 1`.
unsafe fn check(state: *mut ffi::lua_State, ok: c_int) {
    unsafe {
        ffi::luaL_checkstack(state, 3, std::ptr::null());
        ffi::lua_pushvalue(state, ffi::lua_upvalueindex(1));
        ffi::lua_pushvalue(state, ok);
        ffi::lua_pushvalue(state, ok + 1);
        ffi::lua_call(state, 2, 0);
    }
}

/// `luaB_pcall`.
unsafe extern "C-unwind" fn guarded_pcall(state: *mut ffi::lua_State) -> c_int {
    unsafe {
        ffi::luaL_checkany(state, 1);
        ffi::luaL_checkstack(state, 1, std::ptr::null());
        ffi::lua_pushboolean(state, 1);
        ffi::lua_rotate(state, 1, 1);
        let arguments = ffi::lua_gettop(state) - 2;
        let status = ffi::lua_pcallk(state, arguments, ffi::LUA_MULTRET, 0, 0, Some(finish_pcall));
        finish_pcall(state, status, 0)
    }
}

/// `luaB_xpcall`, the handler wrapped so that it is not run once a limit has tripped.
unsafe extern "C-unwind" fn guarded_xpcall(state: *mut ffi::lua_State) -> c_int {
    unsafe {
        let n = ffi::lua_gettop(state);
        ffi::luaL_checktype(state, 2, ffi::LUA_TFUNCTION);
        ffi::luaL_checkstack(state, 3, std::ptr::null());
        ffi::lua_pushvalue(state, ffi::lua_upvalueindex(1));
        ffi::lua_pushvalue(state, 2);
        ffi::lua_pushcclosure(state, guarded_handler, 2);
        ffi::lua_replace(state, 2);
        ffi::lua_pushboolean(state, 1);
        ffi::lua_pushvalue(state, 1);
        ffi::lua_rotate(state, 3, 2);
        let status = ffi::lua_pcallk(state, n - 2, ffi::LUA_MULTRET, 2, 2, Some(finish_pcall));
        finish_pcall(state, status, 2)
    }
}

/// `finishpcall`, then the limits check on the results (`extra` values below them).
unsafe extern "C-unwind" fn finish_pcall(
    state: *mut ffi::lua_State,
    status: c_int,
    extra: ffi::lua_KContext,
) -> c_int {
    unsafe {
        if status != ffi::LUA_OK && status != ffi::LUA_YIELD {
            ffi::luaL_checkstack(state, 2, std::ptr::null());
            ffi::lua_pushboolean(state, 0);
            ffi::lua_pushvalue(state, -2);
            let top = ffi::lua_gettop(state);
            check(state, top - 1);
            return 2;
        }
        // `true` and the results (reading past the top gives `nil`).
        check(state, extra as c_int + 1);
        ffi::lua_gettop(state) - extra as c_int
    }
}

/// An `xpcall` message handler: the limits check (which raises once a limit has
/// tripped; Lua runs no handler for an error from a hook anyway), then upvalue 2.
unsafe extern "C-unwind" fn guarded_handler(state: *mut ffi::lua_State) -> c_int {
    unsafe {
        ffi::lua_pushvalue(state, ffi::lua_upvalueindex(1));
        ffi::lua_pushboolean(state, 1);
        ffi::lua_pushnil(state);
        ffi::lua_call(state, 2, 0);
        ffi::luaL_checkstack(state, 1, std::ptr::null());
        let n = ffi::lua_gettop(state);
        ffi::lua_pushvalue(state, ffi::lua_upvalueindex(2));
        ffi::lua_rotate(state, 1, 1);
        ffi::lua_call(state, n, ffi::LUA_MULTRET);
        ffi::lua_gettop(state)
    }
}

/// `coroutine.resume` or `coroutine.close` (upvalue 2), its argument checked here as
/// `getco` does (so the message names the caller's function and line), then the check.
unsafe extern "C-unwind" fn guarded_resume(state: *mut ffi::lua_State) -> c_int {
    unsafe {
        ffi::luaL_checktype(state, 1, ffi::LUA_TTHREAD);
        let n = ffi::lua_gettop(state);
        ffi::luaL_checkstack(state, 1, std::ptr::null());
        ffi::lua_pushvalue(state, ffi::lua_upvalueindex(2));
        ffi::lua_rotate(state, 1, 1);
        ffi::lua_call(state, n, ffi::LUA_MULTRET);
        check(state, 1);
        ffi::lua_gettop(state)
    }
}
