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

use std::rc::Rc;

use mlua::{Function, Lua, LuaOptions, MultiValue, StdLib, Table, Value};

use super::limits::{LimitKind, Tripwire};

/// The libraries opened at all: no `io`, `package` or `debug`.
fn libraries() -> StdLib {
    StdLib::COROUTINE | StdLib::TABLE | StdLib::OS | StdLib::STRING | StdLib::UTF8 | StdLib::MATH
}

/// The standard globals the sandbox removes (read by the loop's "did you mean" too).
pub(crate) const REMOVED_GLOBALS: &[&str] =
    &["dofile", "loadfile", "require", "io", "package", "debug"];
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
    globals.raw_set("load", safe_load(&lua)?)?;
    globals.raw_set("collectgarbage", count_only_collectgarbage(&lua)?)?;
    lock_string_metatable(&lua)?;
    defer_finalizers(&lua)?;
    guard_protected_calls(&lua, tripwire)?;
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

/// `load(chunk [, chunkname [, mode [, env]]])` with mode forced to text and the
/// environment defaulting to the sandbox's globals.
fn safe_load(lua: &Lua) -> mlua::Result<Function> {
    lua.create_function(
        |lua, (chunk, name, _mode, env): (Value, Option<String>, Value, Option<Table>)| {
            let source = match chunk {
                Value::String(s) => s.as_bytes().to_vec(),
                Value::Function(reader) => read_all(reader)?,
                other => {
                    return Ok((
                        Value::Nil,
                        Some(format!(
                            "bad argument to load: string or function expected, got {}",
                            other.type_name()
                        )),
                    ));
                }
            };
            if source.first() == Some(&0x1b) {
                return Ok((
                    Value::Nil,
                    Some("attempt to load a binary chunk (mode is 't')".to_string()),
                ));
            }
            let env = env.unwrap_or_else(|| lua.globals());
            let name = name.unwrap_or_else(|| "=(load)".to_string());
            match lua
                .load(source)
                .set_name(name)
                .set_mode(mlua::chunk::ChunkMode::Text)
                .set_environment(env)
                .into_function()
            {
                Ok(function) => Ok((Value::Function(function), None)),
                Err(error) => Ok((Value::Nil, Some(error.to_string()))),
            }
        },
    )
}

/// The pieces returned by a `load` reader function, concatenated.
fn read_all(reader: Function) -> mlua::Result<Vec<u8>> {
    let mut source = Vec::new();
    loop {
        match reader.call::<Value>(())? {
            Value::String(piece) if !piece.as_bytes().is_empty() => {
                source.extend_from_slice(&piece.as_bytes())
            }
            _ => return Ok(source),
        }
    }
}

fn count_only_collectgarbage(lua: &Lua) -> mlua::Result<Function> {
    lua.create_function(|lua, option: Option<String>| match option.as_deref() {
        Some("count") => Ok(lua.used_memory() as f64 / 1024.0),
        other => Err(mlua::Error::RuntimeError(format!(
            "collectgarbage({}) is not available in the sandbox; only \"count\" is",
            other.map_or("".to_string(), |o| format!("\"{o}\""))
        ))),
    })
}

/// `getmetatable("")` returns `false`, so the string metatable (and through its
/// `__index`, the real `string` table) cannot be reached or replaced from Lua.
fn lock_string_metatable(lua: &Lua) -> mlua::Result<()> {
    lua.load(
        r#"
        local mt = getmetatable("")
        mt.__metatable = false
        "#,
    )
    .set_name("=sandbox")
    .exec()
}

/// Wraps `pcall`, `xpcall`, `coroutine.resume` and `coroutine.close`: when a limit has
/// tripped inside the protected call, or the call failed for lack of memory, the limit
/// error is raised again instead of being returned.
fn guard_protected_calls(lua: &Lua, tripwire: Rc<Tripwire>) -> mlua::Result<()> {
    let check = lua.create_function(move |_, results: MultiValue| {
        if is_memory_failure(&results) {
            return Err(tripwire.trip(LimitKind::Memory));
        }
        match tripwire.tripped() {
            Some(_) => Err(tripwire.error()),
            None => Ok(results),
        }
    })?;
    let wrap: Function = lua
        .load(
            r#"
            local check, pcall, xpcall, resume, close = ...
            local function guarded_pcall(f, ...) return check(pcall(f, ...)) end
            -- Lua runs a message handler with hooks off when the error came from a hook,
            -- so once a limit has tripped the user's handler is not called at all.
            local function guarded_xpcall(f, handler, ...)
              local function guarded_handler(e)
                if not check(true) then return e end
                return handler(e)
              end
              return check(xpcall(f, guarded_handler, ...))
            end
            local function guarded_resume(co, ...) return check(resume(co, ...)) end
            local function guarded_close(co) return check(close(co)) end
            return guarded_pcall, guarded_xpcall, guarded_resume, guarded_close
            "#,
        )
        .set_name("=sandbox")
        .into_function()?;
    let globals = lua.globals();
    let coroutine: Table = globals.get("coroutine")?;
    let (pcall, xpcall, resume, close): (Function, Function, Function, Function) = wrap.call((
        check,
        globals.get::<Function>("pcall")?,
        globals.get::<Function>("xpcall")?,
        coroutine.get::<Function>("resume")?,
        coroutine.get::<Function>("close")?,
    ))?;
    globals.raw_set("pcall", pcall)?;
    globals.raw_set("xpcall", xpcall)?;
    coroutine.raw_set("resume", resume)?;
    coroutine.raw_set("close", close)
}

/// `false, "not enough memory"`: what a protected call returns when an allocation failed.
fn is_memory_failure(results: &MultiValue) -> bool {
    let mut values = results.iter();
    let failed = matches!(values.next(), Some(Value::Boolean(false)));
    let memory = match values.next() {
        Some(Value::String(s)) => s.as_bytes().as_ref() == b"not enough memory",
        Some(Value::Error(e)) => matches!(**e, mlua::Error::MemoryError(_)),
        _ => false,
    };
    failed && memory
}

/// Lua runs `__gc` metamethods with hooks disabled, so a finalizer that loops could never
/// be stopped. `setmetatable` therefore swaps a `__gc` for a stand-in that only queues the
/// object; the queue is run by `rlm.run_finalizers` at the end of each execution, as
/// ordinary Lua under the execution's limits. At drop the queue is simply discarded.
fn defer_finalizers(lua: &Lua) -> mlua::Result<()> {
    let (setmetatable, run): (Function, Function) = lua
        .load(
            r#"
            local raw_setmetatable, rawget, rawset, pcall, type = setmetatable, rawget, rawset, pcall, type
            local pending = {}
            local stand_ins = setmetatable({}, { __mode = "k" })
            local function guarded_setmetatable(t, mt)
              if type(mt) == "table" then
                local gc = rawget(mt, "__gc")
                if gc ~= nil and not stand_ins[gc] then
                  local function stand_in(object) pending[#pending + 1] = { gc, object } end
                  stand_ins[stand_in] = true
                  rawset(mt, "__gc", stand_in)
                end
              end
              return raw_setmetatable(t, mt)
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
            return guarded_setmetatable, run_finalizers
            "#,
        )
        .set_name("=sandbox")
        .call(())?;
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
