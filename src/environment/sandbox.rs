//! Turning a fresh Lua 5.4 state into a sandbox.
//!
//! `mlua::Lua::new()` is not a sandbox: it exposes `io`, `os.execute`, `require`,
//! `loadfile`, `dofile`, `string.dump` and binary `load`. Here only safe libraries are
//! opened, the base library is trimmed, and what remains dangerous is replaced:
//!
//! | facility | in the sandbox |
//! |---|---|
//! | `io`, `package`, `require`, `debug`, `dofile`, `loadfile` | absent |
//! | `string.dump` | absent (also through `("").dump`) |
//! | `os` | only `time`, `clock`, `date`, `difftime` |
//! | `load` | text chunks only, global environment by default |
//! | `collectgarbage` | only `"count"` |
//! | string metatable | `getmetatable("")` gives `false`; cannot be changed |
//! | `pcall`, `xpcall`, `coroutine.resume` | cannot swallow a limit error |
//! | `__gc` metamethods | deferred: run at the end of the execution, under its limits |

use std::ffi::c_int;
use std::rc::Rc;

use mlua::{Function, Lua, LuaOptions, StdLib, Table, Value, ffi};

use super::chunks::InternalChunk;

use super::limits::Tripwire;
use crate::conventions::REMOVED_GLOBALS;
use crate::engines::lauxlib::type_error;

/// The libraries opened at all: no `io`, `package` or `debug`.
fn libraries() -> StdLib {
    StdLib::COROUTINE | StdLib::TABLE | StdLib::OS | StdLib::STRING | StdLib::UTF8 | StdLib::MATH
}

const OS_KEPT: &[&str] = &["time", "clock", "date", "difftime"];

/// A new Lua state with the sandbox applied; its protected calls answer to `tripwire`.
pub(crate) fn new_state(tripwire: Rc<Tripwire>) -> mlua::Result<Lua> {
    let lua = Lua::new_with(libraries(), LuaOptions::default())?;
    let globals = lua.globals();
    for name in REMOVED_GLOBALS {
        globals.raw_set(*name, Value::Nil)?;
    }
    restrict_os(&lua, &globals)?;
    let string: Table = globals.get("string")?;
    string.raw_set("dump", Value::Nil)?;
    globals.raw_set("load", super::load::safe_load(&lua)?)?;
    globals.raw_set(
        "collectgarbage",
        // SAFETY: a `lua_CFunction` that only uses the Lua API on its own stack.
        unsafe { lua.create_c_function(count_only_collectgarbage)? },
    )?;
    lock_string_metatable(&lua)?;
    defer_finalizers(&lua)?;
    super::protected::guard_protected_calls(&lua, tripwire)?;
    Ok(lua)
}

fn restrict_os(lua: &Lua, globals: &Table) -> mlua::Result<()> {
    let full: Table = globals.get("os")?;
    let kept = lua.create_table()?;
    for name in OS_KEPT {
        kept.raw_set(*name, full.get::<Value>(*name)?)?;
    }
    globals.raw_set("os", kept)
}

/// `collectgarbage`: only `"count"`. A C function, so that its errors are strings raised
/// at the caller's position, as the C library's are.
unsafe extern "C-unwind" fn count_only_collectgarbage(state: *mut ffi::lua_State) -> c_int {
    unsafe {
        let mut len = 0;
        let option = ffi::luaL_optlstring(state, 1, c"collect".as_ptr(), &mut len);
        let option = std::slice::from_raw_parts(option.cast::<u8>(), len);
        if option == b"count" {
            let kilobytes = ffi::lua_gc(state, ffi::LUA_GCCOUNT, 0);
            let bytes = ffi::lua_gc(state, ffi::LUA_GCCOUNTB, 0);
            ffi::lua_pushnumber(state, f64::from(kilobytes) + f64::from(bytes) / 1024.0);
            return 1;
        }
        let shown = if ffi::lua_isnoneornil(state, 1) != 0 {
            String::new()
        } else {
            format!("\"{}\"", super::errors::shown(option))
        };
        let message =
            format!("collectgarbage({shown}) is not available in the sandbox; only \"count\" is");
        ffi::luaL_where(state, 1);
        ffi::lua_pushlstring(state, message.as_ptr().cast(), message.len());
        drop(message);
        ffi::lua_concat(state, 2);
        ffi::lua_error(state)
    }
}

/// `setmetatable(t, mt)` as `luaB_setmetatable` (same checks and messages, raised at the
/// caller's position and naming `setmetatable`), with a `__gc` first handed to the Lua
/// function in upvalue 1, which swaps it for a stand-in (see [`defer_finalizers`]).
unsafe extern "C-unwind" fn guarded_setmetatable(state: *mut ffi::lua_State) -> c_int {
    unsafe {
        let kind = ffi::lua_type(state, 2);
        ffi::luaL_checktype(state, 1, ffi::LUA_TTABLE);
        if kind != ffi::LUA_TNIL && kind != ffi::LUA_TTABLE {
            type_error(state, 2, "nil or table");
        }
        if ffi::luaL_getmetafield(state, 1, c"__metatable".as_ptr()) != ffi::LUA_TNIL {
            return ffi::luaL_error(state, c"cannot change a protected metatable".as_ptr());
        }
        ffi::lua_settop(state, 2);
        if kind == ffi::LUA_TTABLE {
            ffi::lua_pushvalue(state, ffi::lua_upvalueindex(1));
            ffi::lua_pushvalue(state, 2);
            ffi::lua_call(state, 1, 0);
        }
        ffi::lua_setmetatable(state, 1);
        1
    }
}

/// `getmetatable("")` returns `false`, so the string metatable (and through its
/// `__index`, the real `string` table) cannot be reached or replaced from Lua.
fn lock_string_metatable(lua: &Lua) -> mlua::Result<()> {
    LOCK_STRING_METATABLE.function(lua)?.call::<()>(())
}

/// Lua runs `__gc` metamethods with hooks disabled, so a finalizer that loops could never
/// be stopped. `setmetatable` therefore swaps a `__gc` for a stand-in that only queues the
/// object; the queue is run by `rlm.run_finalizers` at the end of each execution, as
/// ordinary Lua under the execution's limits. At drop the queue is simply discarded.
fn defer_finalizers(lua: &Lua) -> mlua::Result<()> {
    let (defer_gc, run): (Function, Function) = DEFER_FINALIZERS.function(lua)?.call(())?;
    // SAFETY: `exec_raw` runs the closure protected, with the upvalue on the stack.
    let setmetatable: Function = unsafe {
        lua.exec_raw(defer_gc, |state| {
            ffi::lua_pushcclosure(state, guarded_setmetatable, 1);
        })?
    };
    lua.globals().raw_set("setmetatable", setmetatable)?;
    lua.set_named_registry_value("rlm.run_finalizers", run)
}

/// Runs the finalizers queued by `defer_finalizers`, or drops them once a limit tripped.
pub(crate) fn run_finalizers(lua: &Lua, tripwire: &Rc<Tripwire>) -> mlua::Result<()> {
    let run: Function = lua.named_registry_value("rlm.run_finalizers")?;
    let tripwire = Rc::clone(tripwire);
    let tripped = lua.create_function(move |_, ()| Ok(tripwire.tripped().is_some()))?;
    run.call(tripped)
}

static LOCK_STRING_METATABLE: InternalChunk = InternalChunk::new(
    "=sandbox",
    r#"
        local mt = getmetatable("")
        mt.__metatable = false
        "#,
);

static DEFER_FINALIZERS: InternalChunk = InternalChunk::new(
    "=sandbox",
    r#"
            local rawget, rawset, pcall, setmetatable = rawget, rawset, pcall, setmetatable
            local pending = {}
            local stand_ins = setmetatable({}, { __mode = "k" })
            local function defer_gc(mt)
              local gc = rawget(mt, "__gc")
              if gc ~= nil and not stand_ins[gc] then
                local function stand_in(object) pending[#pending + 1] = { gc, object } end
                stand_ins[stand_in] = true
                rawset(mt, "__gc", stand_in)
              end
            end
            local function run_finalizers(tripped)
              while #pending > 0 do
                local batch = pending
                pending = {}
                for i = 1, #batch do
                  -- Once a limit has tripped, what is left is dropped, not run.
                  if tripped() then pending = {} return end
                  -- As in Lua, an error in a finalizer does not stop the others.
                  pcall(batch[i][1], batch[i][2])
                end
              end
            end
            return defer_gc, run_finalizers
            "#,
);
