//! `sort_by`'s keys and its sort: a key read once into Rust (numbers, strings borrowed
//! from Lua, lists of them), compared as Lua's `<` would, sorted stably while the limits
//! are checked.

use std::cmp::Ordering;
use std::ffi::c_int;

use mlua::{Lua, Table, Value, ffi};

use super::super::meter::{VALUE_COST, WorkMeter};
use super::{Outcome, Reply, call_key, list_has_metamethods, push_key, raw_call, type_name};

/// How deep list keys may nest (a key table that contains itself would never end).
const MAX_KEY_DEPTH: usize = 16;

/// The bytes of a Lua string, borrowed without a copy.
///
/// Made only from strings reachable from a raw call's stack (its arguments, or a table
/// on it) and dropped before that call returns: Lua's collector never moves an object
/// and never frees a reachable one, so the bytes stay valid meanwhile.
#[derive(Debug, Clone, Copy)]
pub(super) struct LuaBytes {
    pointer: *const u8,
    length: usize,
}

impl LuaBytes {
    pub(super) fn as_slice(&self) -> &[u8] {
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
pub(super) enum SortKey {
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
pub(super) fn compare(a: &SortKey, b: &SortKey) -> Ordering {
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

/// The number at `index`, as a key (integer or float).
///
/// # Safety
/// The value at `index` is a number.
pub(super) unsafe fn number_key(state: *mut ffi::lua_State, index: c_int) -> SortKey {
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
pub(super) unsafe fn string_bytes(state: *mut ffi::lua_State, index: c_int) -> LuaBytes {
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

/// `sort_by(list, key, reverse)`: the items of `list` ordered by their keys, stable. `key`
/// is nil (the items), a function or a field.
pub(super) fn sort_by(
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
/// direction), checking the limits as it goes (see [`sort_checked`]).
///
/// When every key is an integer (a field such as a duration or a count, the common case)
/// or every key a string, the keys are sorted on their own: fewer bytes to move and a
/// comparison without the kinds' dispatch (a million integer keys: 280 → 178 ms).
fn sort_keys(
    decorated: &mut [(SortKey, usize)],
    reverse: bool,
    meter: &WorkMeter,
) -> mlua::Result<()> {
    let integer = |key: &SortKey| match key {
        SortKey::Integer(integer) => Some(*integer),
        _ => None,
    };
    let text = |key: &SortKey| match key {
        SortKey::Text(text) => Some(*text),
        _ => None,
    };
    if let Some(sorted) = sort_one_kind(
        decorated,
        reverse,
        meter,
        integer,
        SortKey::Integer,
        Ord::cmp,
    ) {
        return sorted;
    }
    let by_bytes = |a: &LuaBytes, b: &LuaBytes| a.as_slice().cmp(b.as_slice());
    if let Some(sorted) = sort_one_kind(decorated, reverse, meter, text, SortKey::Text, by_bytes) {
        return sorted;
    }
    sort_checked(decorated, reverse, meter, |(a, _), (b, _)| compare(a, b))
}

/// Sorts `decorated` through a copy of its keys when `kind` gives every key (`None`
/// otherwise, with nothing done), and puts the sorted keys back with `key`.
fn sort_one_kind<K: Copy>(
    decorated: &mut [(SortKey, usize)],
    reverse: bool,
    meter: &WorkMeter,
    kind: impl Fn(&SortKey) -> Option<K>,
    key: impl Fn(K) -> SortKey,
    order: impl Fn(&K, &K) -> Ordering,
) -> Option<mlua::Result<()>> {
    if !decorated.iter().all(|(k, _)| kind(k).is_some()) {
        return None;
    }
    let copy = std::mem::size_of::<(SortKey, usize)>() + std::mem::size_of::<(K, usize)>();
    if let Err(limit) = meter.check_holding(decorated.len().saturating_mul(copy)) {
        return Some(Err(limit));
    }
    let mut pairs: Vec<(K, usize)> = decorated
        .iter()
        .filter_map(|(k, position)| kind(k).map(|k| (k, *position)))
        .collect();
    if let Err(limit) = sort_checked(&mut pairs, reverse, meter, |a, b| order(&a.0, &b.0)) {
        return Some(Err(limit));
    }
    for (slot, (k, position)) in decorated.iter_mut().zip(pairs) {
        *slot = (key(k), position);
    }
    Some(Ok(()))
}

/// Sorts `items` stably by `order` (reversed when `reverse`, equal items keeping their
/// order), checking the limits as it goes: a comparison of list keys costs up to their
/// length, so sorting many long keys could outlast the time limit. The tripped limit's
/// error stops it.
fn sort_checked<T>(
    items: &mut [T],
    reverse: bool,
    meter: &WorkMeter,
    order: impl Fn(&T, &T) -> Ordering,
) -> mlua::Result<()> {
    let mut comparisons = 0usize;
    let mut tripped = None;
    // Once a limit trips, every pair compares equal: the sort then finishes in a few cheap
    // passes (its result is thrown away) instead of being unwound out of, which a host
    // built with `panic = "abort"` would not survive. The one merge under way when the
    // order changes may see it as no total order and panic; that is caught here.
    let sorted = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        items.sort_by(|a, b| {
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
            let ordered = order(a, b);
            if reverse { ordered.reverse() } else { ordered }
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
