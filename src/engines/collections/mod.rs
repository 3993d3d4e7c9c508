//! The primitives behind `lua/collections`: `count`, `count_by`, `group_by`, `sort_by` and
//! `most_common`, each one protected call over Lua's C API with the collector paused
//! (mlua's per-value calls, and a collector walking the growing result again and again,
//! would cost more than the work itself).
//!
//! `sort_by` calls the key function once per item (all of them before it reads any key,
//! as Python computes the keys before it compares them), or reads each item or its field
//! itself; it sorts the positions by key in Rust (stable, so equal keys keep their order,
//! also when reversed) and builds the sorted list. Keys are numbers, strings or lists of
//! them, in one total order: numbers (exactly, as Lua's `<` compares an integer and a
//! float; NaN after every other number), then strings (byte order, as Lua's `<` in the C
//! locale), then lists compared item by item, the shorter first when one is a prefix of
//! the other. The pure-Lua code of `lua/collections` orders them the same way and gives
//! the same errors. A key function is called protected: the error it raises reaches the
//! caller as it was raised, and a limit it trips stops the execution.
//!
//! ```
//! use rlm_registry::{Registry, environment::{Environment, Limits}};
//!
//! let env = Environment::new(Registry::baked().clone(), Limits::default())?;
//! let run = env.execute(r#"print(table.concat(sort_by({"bb", "a", "cc"}, function(s) return #s end), " "))"#)?;
//! assert_eq!(run.output, "a bb cc\n");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::ffi::c_int;
use std::rc::Rc;

use mlua::{Function, Lua, Table, Value, ffi};

use super::limits::Guard;
use super::meter::{VALUE_COST, WorkMeter, with_collector_paused};

mod sort;

use sort::{SortKey, compare, number_key, sort_by, string_bytes};

/// Lua's name of the type of the value at `index`.
///
/// # Safety
/// `index` is a valid index of `state`'s stack.
unsafe fn type_name(state: *mut ffi::lua_State, index: c_int) -> String {
    // SAFETY: as the caller promises; lua_typename returns a static C string.
    unsafe {
        let name = ffi::lua_typename(state, ffi::lua_type(state, index));
        std::ffi::CStr::from_ptr(name)
            .to_string_lossy()
            .into_owned()
    }
}

/// What a primitive's raw pass left to report: a limit hit, a message the Lua side
/// raises at its caller, or that a key function raised an error (its value is the
/// result).
#[derive(Default)]
struct Outcome {
    limit: Option<mlua::Error>,
    failure: Option<String>,
    raised: bool,
    /// The list or an item needs what only the Lua side does (its metamethods).
    unsupported: bool,
}

impl Outcome {
    fn stopped(&self) -> bool {
        self.limit.is_some() || self.failure.is_some() || self.raised || self.unsupported
    }

    /// Records the meter's limit, if one is hit; whether to go on.
    fn spend(&mut self, meter: &mut WorkMeter, work: usize) -> bool {
        if let Err(limit) = meter.spend(work) {
            self.limit = Some(limit);
        }
        self.limit.is_none()
    }
}

/// What a primitive hands the Lua side.
enum Reply {
    /// Its result.
    Done(Value),
    /// A message the Lua side raises at its caller.
    Failed(String),
    /// The error value a key function raised, which the Lua side raises again as it is
    /// (mlua would turn a table into its `tostring`, and give a string a second position).
    Raised(Value),
    /// Work the Lua side does instead (see [`Outcome::unsupported`]).
    Unsupported,
}

/// Runs `work` over the raw stack (its arguments at 1, 2, …) in one protected call; the
/// top value it leaves is the result (or the error a key function raised). The collector
/// pauses meanwhile unless `calls_lua` (code that may make garbage runs in between). A
/// limit is returned as the error.
///
/// # Safety
/// `work` owns nothing on the Rust side while it calls Lua functions that may raise
/// (allocating ones, or Lua code): a raised error unwinds past it.
unsafe fn raw_call(
    lua: &Lua,
    calls_lua: bool,
    args: impl mlua::IntoLuaMulti,
    work: impl FnOnce(*mut ffi::lua_State, &mut Outcome),
) -> mlua::Result<Reply> {
    let mut outcome = Outcome::default();
    // SAFETY: as the caller promises of `work`.
    let result = with_collector_paused(lua, !calls_lua, || unsafe {
        lua.exec_raw::<Value>(args, |state| {
            work(state, &mut outcome);
            // The result is the top value, alone.
            if ffi::lua_gettop(state) == 0 {
                ffi::lua_pushnil(state);
            }
            ffi::lua_replace(state, 1);
            ffi::lua_settop(state, 1);
        })
    });
    let value = result?;
    if let Some(limit) = outcome.limit {
        return Err(limit);
    }
    Ok(match outcome.failure {
        Some(message) => Reply::Failed(message),
        None if outcome.raised => Reply::Raised(value),
        None if outcome.unsupported => Reply::Unsupported,
        None => Reply::Done(value),
    })
}

/// Calls the key function (stack index 2) on the item at `position` of the list (stack
/// index 1), protected, and pushes its result; false when it raised an error, which is
/// then the top value (`outcome.raised`), or ran out of memory (`outcome.limit`).
///
/// A limit tripped inside the call (an mlua error, raised by the hook or a built-in) is
/// raised again at once, as if the call were unprotected.
///
/// # Safety
/// The stack holds the list at 1 and the function at 2; nothing the caller owns on the
/// Rust side needs dropping (the limit error unwinds past it).
unsafe fn call_key(state: *mut ffi::lua_State, position: usize, outcome: &mut Outcome) -> bool {
    // SAFETY: as the caller promises.
    unsafe {
        ffi::lua_pushvalue(state, 2);
        ffi::lua_rawgeti(state, 1, position as ffi::lua_Integer);
        match ffi::lua_pcall(state, 1, 1, 0) {
            ffi::LUA_OK => true,
            ffi::LUA_ERRMEM => {
                ffi::lua_pop(state, 1);
                outcome.limit = Some(mlua::Error::MemoryError("not enough memory".into()));
                false
            }
            _ if ffi::lua_type(state, -1) == ffi::LUA_TUSERDATA => ffi::lua_error(state),
            _ => {
                outcome.raised = true;
                false
            }
        }
    }
}

/// Pushes the key of the item at `position` of the list (stack index 1) as the key source
/// (stack index 2) gives it: the item itself (nil), a function's result (see [`call_key`])
/// or the item's field. False after a failure (an item without fields, with nothing
/// pushed) or a key function's error (its value pushed).
///
/// # Safety
/// The stack holds the list at 1 and the source at 2.
unsafe fn push_key(
    state: *mut ffi::lua_State,
    name: &str,
    position: usize,
    outcome: &mut Outcome,
) -> bool {
    let at = position as ffi::lua_Integer;
    // SAFETY: as the caller promises.
    unsafe {
        match ffi::lua_type(state, 2) {
            ffi::LUA_TNIL => {
                ffi::lua_rawgeti(state, 1, at);
            }
            ffi::LUA_TFUNCTION => return call_key(state, position, outcome),
            _ => {
                if ffi::lua_rawgeti(state, 1, at) != ffi::LUA_TTABLE {
                    let item = type_name(state, -1);
                    ffi::lua_pop(state, 1);
                    let field = if ffi::lua_type(state, 2) == ffi::LUA_TSTRING {
                        String::from_utf8_lossy(string_bytes(state, 2).as_slice()).into_owned()
                    } else {
                        ffi::lua_tointegerx(state, 2, std::ptr::null_mut()).to_string()
                    };
                    outcome.failure = Some(format!(
                        "{name}: item {position} is a {item}, so it has no field {field:?}"
                    ));
                    return false;
                }
                ffi::lua_pushvalue(state, 2);
                if ffi::lua_rawget(state, -2) == ffi::LUA_TNIL
                    && has_metafield(state, -2, c"__index")
                {
                    // The item may have the field through `__index`: the Lua side reads it.
                    ffi::lua_pop(state, 2);
                    outcome.unsupported = true;
                    return false;
                }
                ffi::lua_remove(state, -2);
            }
        }
        true
    }
}

/// Whether the value at `index` has a metatable with the field `name` (read raw).
///
/// # Safety
/// `index` is a valid index of `state`'s stack, with room for one more value.
unsafe fn has_metafield(state: *mut ffi::lua_State, index: c_int, name: &std::ffi::CStr) -> bool {
    // SAFETY: as the caller promises; `luaL_getmetafield` pushes the field only when found.
    unsafe {
        if ffi::luaL_getmetafield(state, index, name.as_ptr()) == ffi::LUA_TNIL {
            return false;
        }
        ffi::lua_pop(state, 1);
        true
    }
}

/// Whether the list at stack index 1 has items or a length through its metatable
/// (`__index`, `__len`), which the raw passes do not read: the Lua side then does the work.
///
/// # Safety
/// The stack holds the list at 1, with room for one more value.
unsafe fn list_has_metamethods(state: *mut ffi::lua_State) -> bool {
    // SAFETY: as the caller promises.
    unsafe { has_metafield(state, 1, c"__index") || has_metafield(state, 1, c"__len") }
}

/// `count(list)` or `count_by(list, key)`: key (nil: the item; a function; a field) →
/// occurrences; nil and NaN keys are skipped.
fn count(lua: &Lua, list: Table, key: Value, meter: &mut WorkMeter) -> mlua::Result<Reply> {
    // SAFETY: the step only reads and sets values of the table at 4.
    unsafe {
        by_key(lua, "count_by", list, key, meter, |state, _| {
            ffi::lua_pushvalue(state, 5);
            ffi::lua_rawget(state, 4);
            let seen = ffi::lua_tointegerx(state, -1, std::ptr::null_mut());
            ffi::lua_pop(state, 1);
            ffi::lua_pushinteger(state, seen + 1);
            ffi::lua_rawset(state, 4);
        })
    }
}

/// `group_by(list, key)`: key (a function or a field) → the items with that key, in
/// order; nil and NaN keys are skipped.
fn group_by(lua: &Lua, list: Table, key: Value, meter: &mut WorkMeter) -> mlua::Result<Reply> {
    // SAFETY: the step only reads and sets tables of the table at 4.
    unsafe {
        by_key(lua, "group_by", list, key, meter, |state, position| {
            ffi::lua_pushvalue(state, 5);
            if ffi::lua_rawget(state, 4) != ffi::LUA_TTABLE {
                ffi::lua_pop(state, 1);
                ffi::lua_createtable(state, 1, 0);
                ffi::lua_pushvalue(state, 5);
                ffi::lua_pushvalue(state, -2);
                ffi::lua_rawset(state, 4);
            }
            let next = ffi::lua_rawlen(state, -1) + 1;
            ffi::lua_rawgeti(state, 1, position as ffi::lua_Integer);
            ffi::lua_rawseti(state, -2, next as ffi::lua_Integer);
        })
    }
}

/// One pass over `list` in one raw call, building a table keyed by each item's key:
/// `step(state, position)` runs for every item whose key is neither nil nor NaN, with the
/// stack holding the list (1), the key (2), an unused table (3), the table being built
/// (4) and the item's key (5). The table is the result.
///
/// # Safety
/// `step` must leave the stack at 5 values or more, and own nothing on the Rust side.
unsafe fn by_key(
    lua: &Lua,
    name: &str,
    list: Table,
    key: Value,
    meter: &mut WorkMeter,
    step: impl Fn(*mut ffi::lua_State, usize),
) -> mlua::Result<Reply> {
    let calls_lua = key.is_function();
    // SAFETY: as the caller promises of `step`.
    unsafe {
        raw_call(lua, calls_lua, (list, key), |state, outcome| {
            ffi::lua_settop(state, 2);
            if list_has_metamethods(state) {
                outcome.unsupported = true;
                return;
            }
            let length = ffi::lua_rawlen(state, 1);
            ffi::lua_createtable(state, 0, 0);
            ffi::lua_createtable(state, 0, 0);
            for position in 1..=length {
                if !push_key(state, name, position, outcome) {
                    if outcome.raised {
                        // The key function's error is the top value, to be raised again.
                        return;
                    }
                    break;
                }
                let kind = ffi::lua_type(state, -1);
                let nan = kind == ffi::LUA_TNUMBER
                    && ffi::lua_tonumberx(state, -1, std::ptr::null_mut()).is_nan();
                if kind != ffi::LUA_TNIL && !nan {
                    step(state, position);
                }
                ffi::lua_settop(state, 4);
                if !outcome.spend(meter, VALUE_COST) {
                    break;
                }
            }
            ffi::lua_settop(state, 4);
        })
    }
}

/// `most_common(counts, n)`: the `n` largest counts (all when `n` is nil) as `{item,
/// count}` pairs, ties by item; nil when an item or a count is of a kind the Lua side
/// handles (or reports) itself.
fn most_common(
    lua: &Lua,
    counts: Table,
    n: Option<i64>,
    meter: &mut WorkMeter,
) -> mlua::Result<Reply> {
    let mut entries: Vec<(SortKey, SortKey, usize)> = Vec::new();
    // SAFETY: `work` owns nothing: the entries live out here.
    unsafe {
        raw_call(lua, false, counts, |state, outcome| {
            ffi::lua_settop(state, 1);
            ffi::lua_createtable(state, 0, 0); // the items, at 2, so that they stay reachable
            let mut unsupported = false;
            ffi::lua_pushnil(state);
            while ffi::lua_next(state, 1) != 0 {
                // The stack: counts, items, item, count.
                let item = match ffi::lua_type(state, -2) {
                    ffi::LUA_TNUMBER => number_key(state, -2),
                    ffi::LUA_TSTRING => SortKey::Text(string_bytes(state, -2)),
                    ffi::LUA_TBOOLEAN => SortKey::Other(if ffi::lua_toboolean(state, -2) != 0 {
                        b"true"
                    } else {
                        b"false"
                    }),
                    _ => {
                        unsupported = true;
                        break;
                    }
                };
                if ffi::lua_type(state, -1) != ffi::LUA_TNUMBER {
                    unsupported = true;
                    break;
                }
                let count = number_key(state, -1);
                ffi::lua_pop(state, 1);
                // Into `entries` first: `lua_rawseti` may raise (out of memory), and
                // nothing the pass holds may be unwound past.
                let slot = entries.len() + 1;
                entries.push((count, item, slot));
                ffi::lua_pushvalue(state, -1);
                ffi::lua_rawseti(state, 2, slot as ffi::lua_Integer);
                meter.hold(entries.capacity() * std::mem::size_of::<(SortKey, SortKey, usize)>());
                if !outcome.spend(meter, VALUE_COST) {
                    break;
                }
            }
            ffi::lua_settop(state, 2);
            if unsupported || outcome.stopped() {
                entries.clear();
                ffi::lua_pushnil(state);
                return;
            }
            let order = |a: &(SortKey, SortKey, usize), b: &(SortKey, SortKey, usize)| {
                compare(&b.0, &a.0).then_with(|| compare(&a.1, &b.1))
            };
            let wanted = n.map_or(entries.len(), |n| usize::try_from(n).unwrap_or(0));
            if wanted < entries.len() {
                if wanted > 0 {
                    entries.select_nth_unstable_by(wanted - 1, order);
                }
                entries.truncate(wanted);
            }
            entries.sort_unstable_by(order);
            ffi::lua_createtable(state, c_int::try_from(entries.len()).unwrap_or(0), 0);
            for (index, (count, _, slot)) in entries.iter().enumerate() {
                ffi::lua_createtable(state, 2, 0);
                ffi::lua_rawgeti(state, 2, *slot as ffi::lua_Integer);
                ffi::lua_rawseti(state, -2, 1);
                match count {
                    SortKey::Integer(value) => ffi::lua_pushinteger(state, *value),
                    SortKey::Float(value) => ffi::lua_pushnumber(state, *value),
                    _ => ffi::lua_pushnil(state),
                }
                ffi::lua_rawseti(state, -2, 2);
                ffi::lua_rawseti(state, -2, index as ffi::lua_Integer + 1);
            }
            entries.clear();
        })
    }
}

/// A primitive's result for the Lua side: the value, `(nil, message)` for a failure it
/// raises at its caller, `(nil, error, true)` for a key function's error it raises
/// again as it is, or nil for work it does itself.
fn reply(lua: &Lua, reply: Reply) -> mlua::Result<(Value, Value, bool)> {
    Ok(match reply {
        Reply::Done(value) => (value, Value::Nil, false),
        Reply::Failed(message) => (
            Value::Nil,
            Value::String(lua.create_string(message)?),
            false,
        ),
        Reply::Raised(error) => (Value::Nil, error, true),
        Reply::Unsupported => (Value::Nil, Value::Nil, false),
    })
}

/// A collection primitive of the hidden table (`_text_primitives.count`, …).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Primitive {
    SortBy,
    Count,
    GroupBy,
    MostCommon,
}

/// Makes the collection primitive `which` for one environment, checking `guard`.
pub(crate) fn primitive(lua: &Lua, guard: &Rc<Guard>, which: Primitive) -> mlua::Result<Function> {
    macro_rules! primitive {
        (|$lua:ident, $meter:ident, $args:tt : $ty:ty| $body:expr) => {{
            let guard = Rc::clone(guard);
            lua.create_function(move |$lua, $args: $ty| {
                let mut $meter = WorkMeter::new($lua, &guard);
                reply($lua, $body?)
            })
        }};
    }
    match which {
        Primitive::SortBy => {
            primitive!(|lua, meter, (list, key, reverse): (Table, Value, bool)| {
                sort_by(lua, list, key, reverse, &mut meter)
            })
        }
        Primitive::Count => primitive!(|lua, meter, (list, key): (Table, Value)| {
            count(lua, list, key, &mut meter)
        }),
        Primitive::GroupBy => primitive!(|lua, meter, (list, key): (Table, Value)| {
            group_by(lua, list, key, &mut meter)
        }),
        Primitive::MostCommon => primitive!(|lua, meter, (counts, n): (Table, Option<i64>)| {
            most_common(lua, counts, n, &mut meter)
        }),
    }
}
