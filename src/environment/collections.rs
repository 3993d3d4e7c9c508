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

use std::cmp::Ordering;
use std::ffi::c_int;
use std::rc::Rc;

use mlua::{Lua, Table, Value, ffi};

use super::limits::Tripwire;
use super::meter::{VALUE_COST, WorkMeter};

/// How deep list keys may nest (a key table that contains itself would never end).
const MAX_KEY_DEPTH: usize = 16;

/// The bytes of a Lua string, borrowed without a copy.
///
/// Made only from strings reachable from a raw call's stack (its arguments, or a table
/// on it) and dropped before that call returns: Lua's collector never moves an object
/// and never frees a reachable one, so the bytes stay valid meanwhile.
#[derive(Debug, Clone, Copy)]
struct LuaBytes {
    pointer: *const u8,
    length: usize,
}

impl LuaBytes {
    fn as_slice(&self) -> &[u8] {
        // SAFETY: see the type's documentation: the string outlives this value.
        unsafe { std::slice::from_raw_parts(self.pointer, self.length) }
    }
}

impl PartialEq for LuaBytes {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

/// One item's sort key.
#[derive(Debug, Clone, PartialEq)]
enum SortKey {
    Integer(i64),
    Float(f64),
    Text(LuaBytes),
    List(Vec<SortKey>),
    /// A boolean (only as a `most_common` item), ordered by its `tostring`.
    Other(&'static [u8]),
}

impl SortKey {
    /// The rank of the key's kind in the order: numbers, strings, lists, the rest.
    fn rank(&self) -> u8 {
        match self {
            SortKey::Integer(_) | SortKey::Float(_) => 0,
            SortKey::Text(_) => 1,
            SortKey::List(_) => 2,
            SortKey::Other(_) => 3,
        }
    }
}

/// Floats in a total order: NaN after every number and equal to itself.
fn compare_floats(a: f64, b: f64) -> Ordering {
    a.partial_cmp(&b)
        .unwrap_or_else(|| a.is_nan().cmp(&b.is_nan()))
}

/// An integer against a float, exactly as Lua's `<` compares them (converting the integer
/// would round it above 2^53): NaN after every number.
fn compare_integer_float(integer: i64, float: f64) -> Ordering {
    // 2^63: the first float above every integer.
    const TWO_TO_63: f64 = 9_223_372_036_854_775_808.0;
    if float.is_nan() || float >= TWO_TO_63 {
        return Ordering::Less;
    }
    if float < -TWO_TO_63 {
        return Ordering::Greater;
    }
    // In range, the float's integer part converts exactly.
    let whole = float.trunc();
    integer
        .cmp(&(whole as i64))
        .then_with(|| compare_floats(0.0, float - whole))
}

/// The one order of sort keys (see the module documentation).
fn compare(a: &SortKey, b: &SortKey) -> Ordering {
    match (a, b) {
        (SortKey::Integer(x), SortKey::Integer(y)) => x.cmp(y),
        (SortKey::Float(x), SortKey::Float(y)) => compare_floats(*x, *y),
        (SortKey::Integer(x), SortKey::Float(y)) => compare_integer_float(*x, *y),
        (SortKey::Float(x), SortKey::Integer(y)) => compare_integer_float(*y, *x).reverse(),
        (SortKey::Text(x), SortKey::Text(y)) => x.as_slice().cmp(y.as_slice()),
        (SortKey::Other(x), SortKey::Other(y)) => x.cmp(y),
        (SortKey::List(x), SortKey::List(y)) => x
            .iter()
            .zip(y)
            .map(|(p, q)| compare(p, q))
            .find(|order| order.is_ne())
            .unwrap_or_else(|| x.len().cmp(&y.len())),
        _ => a.rank().cmp(&b.rank()),
    }
}

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

/// The number at `index`, as a key (integer or float).
///
/// # Safety
/// The value at `index` is a number.
unsafe fn number_key(state: *mut ffi::lua_State, index: c_int) -> SortKey {
    // SAFETY: as the caller promises.
    unsafe {
        if ffi::lua_isinteger(state, index) != 0 {
            SortKey::Integer(ffi::lua_tointegerx(state, index, std::ptr::null_mut()))
        } else {
            SortKey::Float(ffi::lua_tonumberx(state, index, std::ptr::null_mut()))
        }
    }
}

/// The bytes of the string at `index`, borrowed (see [`LuaBytes`]).
///
/// # Safety
/// The value at `index` is a string (`lua_tolstring` would convert a number in place)
/// that stays reachable while the result is used.
unsafe fn string_bytes(state: *mut ffi::lua_State, index: c_int) -> LuaBytes {
    let mut length = 0;
    // SAFETY: as the caller promises.
    let pointer = unsafe { ffi::lua_tolstring(state, index, &mut length) };
    LuaBytes {
        pointer: pointer.cast::<u8>(),
        length,
    }
}

/// Why a value is no sort key: what it is, or the limit its copy would pass.
enum KeyError {
    Invalid(String),
    Limit(mlua::Error),
}

/// Counts the memory the keys read hold outside Lua against the limit, as they are read:
/// a list key shared many times over (a list of the same long list, nested) would
/// otherwise be copied far past it.
struct KeyMemory<'m, 'a> {
    meter: &'m mut WorkMeter<'a>,
    held: usize,
}

impl KeyMemory<'_, '_> {
    /// Records `bytes` more held, checking the limits before they are allocated.
    fn take(&mut self, bytes: usize) -> Result<(), KeyError> {
        self.held = self.held.saturating_add(bytes);
        self.meter.hold(self.held);
        self.meter.spend(bytes).map_err(KeyError::Limit)
    }
}

/// The sort key of the value at `index` (absolute), or what it is when it cannot be one.
///
/// # Safety
/// `index` is a valid absolute index of `state`'s stack, whose value stays reachable
/// while the key is used.
unsafe fn read_key(
    state: *mut ffi::lua_State,
    index: c_int,
    depth: usize,
    memory: &mut KeyMemory,
) -> Result<SortKey, KeyError> {
    let too_deep = || KeyError::Invalid("a list nested too deeply".into());
    // SAFETY: as the caller promises; every push is popped before returning, and a list's
    // strings are reachable through the list.
    unsafe {
        match ffi::lua_type(state, index) {
            ffi::LUA_TNUMBER => Ok(number_key(state, index)),
            ffi::LUA_TSTRING => Ok(SortKey::Text(string_bytes(state, index))),
            ffi::LUA_TTABLE if depth >= MAX_KEY_DEPTH => Err(too_deep()),
            ffi::LUA_TTABLE => {
                if ffi::lua_checkstack(state, 2) == 0 {
                    return Err(too_deep());
                }
                let length = ffi::lua_rawlen(state, index);
                memory.take(length.saturating_mul(std::mem::size_of::<SortKey>()))?;
                let mut items = Vec::with_capacity(length);
                for position in 1..=length {
                    ffi::lua_rawgeti(state, index, position as ffi::lua_Integer);
                    let item = read_key(state, ffi::lua_gettop(state), depth + 1, memory);
                    ffi::lua_pop(state, 1);
                    items.push(item?);
                }
                Ok(SortKey::List(items))
            }
            ffi::LUA_TNIL => Err(KeyError::Invalid("nil".into())),
            _ => Err(KeyError::Invalid(format!("a {}", type_name(state, index)))),
        }
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
    let collecting = lua.gc_is_running();
    if !calls_lua {
        lua.gc_stop();
    }
    // SAFETY: as the caller promises of `work`.
    let result = unsafe {
        lua.exec_raw::<Value>(args, |state| {
            work(state, &mut outcome);
            // The result is the top value, alone.
            if ffi::lua_gettop(state) == 0 {
                ffi::lua_pushnil(state);
            }
            ffi::lua_replace(state, 1);
            ffi::lua_settop(state, 1);
        })
    };
    if collecting && !calls_lua {
        lua.gc_restart();
    }
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

/// `sort_by(list, key, reverse)`: the items of `list` ordered by their keys, stable. `key`
/// is nil (the items), a function or a field.
fn sort_by(
    lua: &Lua,
    list: Table,
    key: Value,
    reverse: bool,
    meter: &mut WorkMeter,
) -> mlua::Result<Reply> {
    let calls_lua = key.is_function();
    let mut decorated: Vec<(SortKey, usize)> = Vec::new();
    // SAFETY: `work` owns nothing: the keys go into `decorated`, which lives out here and
    // is emptied before the call returns (its strings are borrowed from the stack's).
    unsafe {
        raw_call(lua, calls_lua, (list, key), |state, outcome| {
            ffi::lua_settop(state, 2);
            if list_has_metamethods(state) {
                outcome.unsupported = true;
                ffi::lua_pushnil(state);
                return;
            }
            let length = ffi::lua_rawlen(state, 1);
            if calls_lua && !keep_function_keys(state, length, meter, outcome) {
                return;
            }
            // The memory the keys take is checked before it is taken.
            meter.hold(length * std::mem::size_of::<(SortKey, usize)>());
            match meter.check() {
                Ok(()) => {
                    decorated.reserve_exact(length);
                    read_sort_keys(state, length, calls_lua, &mut decorated, meter, outcome);
                }
                Err(limit) => outcome.limit = Some(limit),
            }
            if outcome.stopped() {
                decorated.clear();
                ffi::lua_pushnil(state);
                return;
            }
            if let Err(limit) = sort_keys(&mut decorated, reverse, meter) {
                decorated.clear();
                outcome.limit = Some(limit);
                ffi::lua_pushnil(state);
                return;
            }
            ffi::lua_createtable(state, c_int::try_from(length).unwrap_or(0), 0);
            for (index, (_, position)) in decorated.iter().enumerate() {
                ffi::lua_rawgeti(state, 1, *position as ffi::lua_Integer);
                ffi::lua_rawseti(state, -2, index as ffi::lua_Integer + 1);
            }
            decorated.clear();
            outcome.spend(meter, length * VALUE_COST);
        })
    }
}

/// Comparisons between two checks of the limits while sorting.
const COMPARISONS_PER_CHECK: usize = 1024;

/// Sorts `decorated` by key, stable (equal keys keep their order whichever the
/// direction), checking the limits as it goes: a comparison of list keys costs up to their
/// length, so sorting many long keys could outlast the time limit. The tripped limit's
/// error stops it.
fn sort_keys(
    decorated: &mut [(SortKey, usize)],
    reverse: bool,
    meter: &WorkMeter,
) -> mlua::Result<()> {
    let mut comparisons = 0usize;
    let mut tripped = None;
    // Once a limit trips, every pair compares equal: the sort then finishes in a few cheap
    // passes (its result is thrown away) instead of being unwound out of, which a host
    // built with `panic = "abort"` would not survive. The one merge under way when the
    // order changes may see it as no total order and panic; that is caught here.
    let sorted = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        decorated.sort_by(|(a, _), (b, _)| {
            if tripped.is_some() {
                return Ordering::Equal;
            }
            comparisons += 1;
            if comparisons.is_multiple_of(COMPARISONS_PER_CHECK)
                && let Err(limit) = meter.check()
            {
                tripped = Some(limit);
                return Ordering::Equal;
            }
            let order = compare(a, b);
            if reverse { order.reverse() } else { order }
        });
    }));
    match (sorted, tripped) {
        (_, Some(limit)) => Err(limit),
        (Ok(()), None) => Ok(()),
        (Err(panic), None) => std::panic::resume_unwind(panic),
    }
}

/// Calls the key function on every item of the list and replaces it (stack index 2) by the
/// list of their results, before any is read: the keys' strings then stay reachable, and
/// no Lua code runs, until the sort is done (a key function could otherwise drop a string
/// read earlier, by changing a list it returns again). False when the pass stopped, with
/// the key function's error, or nil, on top.
///
/// # Safety
/// The stack holds the list at 1 and the function at 2, and nothing else.
unsafe fn keep_function_keys(
    state: *mut ffi::lua_State,
    length: usize,
    meter: &mut WorkMeter,
    outcome: &mut Outcome,
) -> bool {
    // SAFETY: as the caller promises: the function stays at 2, the keys go into a table at
    // 3, which then replaces the function.
    unsafe {
        ffi::lua_createtable(state, c_int::try_from(length).unwrap_or(0), 0);
        for position in 1..=length {
            if !call_key(state, position, outcome) {
                if !outcome.raised {
                    ffi::lua_pushnil(state);
                }
                return false;
            }
            ffi::lua_rawseti(state, 3, position as ffi::lua_Integer);
            if !outcome.spend(meter, VALUE_COST) {
                ffi::lua_pushnil(state);
                return false;
            }
        }
        ffi::lua_replace(state, 2);
        true
    }
}

/// Reads the sort key of every item into `decorated` with its position: the item itself
/// or its field as the source at stack index 2 gives it, or when `kept` the result of the
/// key function (the table at 2, see [`keep_function_keys`]). Stops at the first failure.
///
/// # Safety
/// The stack holds the list at 1 and the source at 2, and nothing else; no Lua code runs
/// while `decorated` is in use.
unsafe fn read_sort_keys(
    state: *mut ffi::lua_State,
    length: usize,
    kept: bool,
    decorated: &mut Vec<(SortKey, usize)>,
    meter: &mut WorkMeter,
    outcome: &mut Outcome,
) {
    let mut memory = KeyMemory {
        held: length * std::mem::size_of::<(SortKey, usize)>(),
        meter,
    };
    // SAFETY: as the caller promises.
    unsafe {
        for position in 1..=length {
            if kept {
                ffi::lua_rawgeti(state, 2, position as ffi::lua_Integer);
            } else if !push_key(state, "sort_by", position, outcome) {
                break;
            }
            match read_key(state, ffi::lua_gettop(state), 0, &mut memory) {
                Ok(key) => decorated.push((key, position)),
                Err(KeyError::Invalid(what)) => {
                    outcome.failure = Some(format!(
                        "sort_by: the key of item {position} is {what} (keys must be numbers, strings or lists of them)"
                    ));
                    break;
                }
                Err(KeyError::Limit(limit)) => {
                    outcome.limit = Some(limit);
                    break;
                }
            }
            ffi::lua_settop(state, 2);
            if !outcome.spend(memory.meter, VALUE_COST) {
                break;
            }
        }
        ffi::lua_settop(state, 2);
    }
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
                ffi::lua_pushvalue(state, -1);
                ffi::lua_rawseti(state, 2, entries.len() as ffi::lua_Integer + 1);
                entries.push((count, item, entries.len() + 1));
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

/// Adds the collection primitives to the hidden table of text primitives.
pub(crate) fn add_primitives(
    lua: &Lua,
    primitives: &Table,
    tripwire: &Rc<Tripwire>,
) -> mlua::Result<()> {
    macro_rules! primitive {
        (|$lua:ident, $meter:ident, $args:tt : $ty:ty| $body:expr) => {{
            let tripwire = Rc::clone(tripwire);
            lua.create_function(move |$lua, $args: $ty| {
                let mut $meter = WorkMeter::new($lua, &tripwire);
                reply($lua, $body?)
            })?
        }};
    }
    primitives.raw_set(
        "sort_by",
        primitive!(|lua, meter, (list, key, reverse): (Table, Value, bool)| {
            sort_by(lua, list, key, reverse, &mut meter)
        }),
    )?;
    primitives.raw_set(
        "count",
        primitive!(|lua, meter, (list, key): (Table, Value)| { count(lua, list, key, &mut meter) }),
    )?;
    primitives.raw_set(
        "group_by",
        primitive!(|lua, meter, (list, key): (Table, Value)| {
            group_by(lua, list, key, &mut meter)
        }),
    )?;
    primitives.raw_set(
        "most_common",
        primitive!(|lua, meter, (counts, n): (Table, Option<i64>)| {
            most_common(lua, counts, n, &mut meter)
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &'static str) -> SortKey {
        SortKey::Text(LuaBytes {
            pointer: s.as_ptr(),
            length: s.len(),
        })
    }

    #[test]
    fn numbers_sort_before_strings_before_lists() {
        let mut keys = vec![
            SortKey::List(vec![SortKey::Integer(1)]),
            text("a"),
            SortKey::Float(2.5),
            SortKey::Integer(3),
        ];
        keys.sort_by(compare);
        assert_eq!(
            keys,
            vec![
                SortKey::Float(2.5),
                SortKey::Integer(3),
                text("a"),
                SortKey::List(vec![SortKey::Integer(1)]),
            ]
        );
    }

    #[test]
    fn nan_sorts_after_every_number_and_ties_with_itself() {
        assert_eq!(
            compare(&SortKey::Float(f64::NAN), &SortKey::Float(f64::INFINITY)),
            Ordering::Greater
        );
        assert_eq!(
            compare(&SortKey::Integer(i64::MAX), &SortKey::Float(f64::NAN)),
            Ordering::Less
        );
        assert_eq!(
            compare(&SortKey::Float(f64::NAN), &SortKey::Float(f64::NAN)),
            Ordering::Equal
        );
    }

    #[test]
    fn lists_compare_item_by_item_then_by_length() {
        let short = SortKey::List(vec![text("a")]);
        let long = SortKey::List(vec![text("a"), SortKey::Integer(0)]);
        let later = SortKey::List(vec![text("b")]);
        assert_eq!(compare(&short, &long), Ordering::Less);
        assert_eq!(compare(&long, &later), Ordering::Less);
    }
}
