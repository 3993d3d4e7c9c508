//! The C functions in front of the Rust string functions: they raise the Rust functions'
//! failure reports as `luaL_error` would (no Lua frame between the caller and the string
//! function), and answer the commonest calls (`find`/`match` with ordinary arguments, a
//! `gmatch` over a literal or one class) without going through an mlua callback.

use std::ffi::{c_int, c_void};

use mlua::{Function, LightUserData, Lua, MultiValue, Value, ffi};

use super::functions::piece;
use super::gsub::{CALL_MARKER, INDEX_MARKER, MARKERS, STEP_MARKER};
use super::limits::Guard;
use super::matcher::{CaptureValue, Matcher, find_bytes, start_position};
use super::plan::{Plan, Searcher, anchor, has_specials};
use super::{Check, Failure, MAX_CAPTURES, SCAN_WINDOW, SPECIALS};

/// The marker that starts a failure report (`FAIL, value, level`) to the C function in front ([`finish`]).
/// Lua code cannot make a light userdata, so no result can be mistaken for it.
static FAIL_MARKER: u8 = 0;

pub(super) fn fail_marker() -> Value {
    Value::LightUserData(LightUserData(std::ptr::addr_of!(FAIL_MARKER) as *mut c_void))
}

/// `luaL_error`'s behaviour for the Rust functions' failure reports, in a C function
/// (no Lua frame between the caller and the string function, as in C Lua): the values
/// on the stack are returned, or `FAIL, value, level` is raised, a level-2 message
/// prefixed with the caller's position, a level-0 value re-thrown as it was.
///
/// # Safety
/// Called from a `lua_CFunction` with the results on the stack; may `lua_error`
/// (a `longjmp`), so the caller must hold nothing that needs dropping.
pub(super) unsafe fn finish(state: *mut ffi::lua_State) -> c_int {
    unsafe {
        let results = ffi::lua_gettop(state);
        let failed = results >= 3
            && ffi::lua_type(state, 1) == ffi::LUA_TLIGHTUSERDATA
            && ffi::lua_touserdata(state, 1) == std::ptr::addr_of!(FAIL_MARKER) as *mut c_void;
        if !failed {
            return results;
        }
        let level = ffi::lua_tointeger(state, 3);
        ffi::lua_settop(state, 2);
        if level > 0 && ffi::lua_type(state, 2) == ffi::LUA_TSTRING {
            ffi::luaL_where(state, 1);
            ffi::lua_rotate(state, 2, 1);
            ffi::lua_concat(state, 2);
        }
        ffi::lua_error(state)
    }
}

/// Calls upvalue 1 (a Rust string function) with all the arguments, then [`finish`].
pub(super) unsafe extern "C-unwind" fn front(state: *mut ffi::lua_State) -> c_int {
    unsafe {
        let n = ffi::lua_gettop(state);
        ffi::lua_pushvalue(state, ffi::lua_upvalueindex(1));
        ffi::lua_rotate(state, 1, 1);
        ffi::lua_call(state, n, ffi::LUA_MULTRET);
        finish(state)
    }
}

/// Whether the value at `index` is the [`gsub`](super::gsub) marker `which`.
unsafe fn is_marker(state: *mut ffi::lua_State, index: c_int, which: usize) -> bool {
    unsafe {
        ffi::lua_type(state, index) == ffi::LUA_TLIGHTUSERDATA
            && ffi::lua_touserdata(state, index)
                == std::ptr::addr_of!(MARKERS[which]) as *mut c_void
    }
}

/// `string.gsub`: the Rust function in upvalue 1 gives the result, or a step function
/// and its first request. A request is served here, in this C function's frame as in C
/// Lua (a function called, a table indexed with its metamethods, errors passing through
/// untouched), and its value handed to the step function, until the result comes.
pub(super) unsafe extern "C-unwind" fn gsub_front(state: *mut ffi::lua_State) -> c_int {
    unsafe {
        let n = ffi::lua_gettop(state);
        ffi::luaL_checkstack(state, 1, std::ptr::null());
        ffi::lua_pushvalue(state, ffi::lua_upvalueindex(1));
        ffi::lua_rotate(state, 1, 1);
        ffi::lua_call(state, n, ffi::LUA_MULTRET);
        if !is_marker(state, 1, STEP_MARKER) {
            return finish(state);
        }
        ffi::lua_rotate(state, 1, -1);
        ffi::lua_pop(state, 1); // stack: step, request marker, function or table, ...
        loop {
            if is_marker(state, 2, CALL_MARKER) {
                let arguments = ffi::lua_gettop(state) - 3;
                ffi::lua_call(state, arguments, 1);
            } else if is_marker(state, 2, INDEX_MARKER) {
                ffi::lua_gettable(state, 3);
                ffi::lua_rotate(state, 3, -1);
                ffi::lua_pop(state, 1);
            } else {
                ffi::lua_rotate(state, 1, -1);
                ffi::lua_pop(state, 1);
                return finish(state);
            }
            // stack: step, request marker, value
            ffi::lua_rotate(state, 2, -1);
            ffi::lua_pop(state, 1);
            ffi::luaL_checkstack(state, 1, std::ptr::null());
            ffi::lua_pushvalue(state, 1);
            ffi::lua_rotate(state, 2, 1);
            ffi::lua_call(state, 1, ffi::LUA_MULTRET);
        }
    }
}

/// `string.find`: a plain search (or a pattern without special characters) over at most
/// [`SCAN_WINDOW`] bytes is answered here, in C-function time with no allocation;
/// everything else, and a search that would scan further (which must check the limits),
/// goes to the Rust function in upvalue 1 through [`front`].
pub(super) unsafe extern "C-unwind" fn find_front(state: *mut ffi::lua_State) -> c_int {
    unsafe {
        match quick_find(state) {
            Some(Some((start, end))) => {
                ffi::lua_pushinteger(state, start);
                ffi::lua_pushinteger(state, end);
                2
            }
            Some(None) => {
                ffi::lua_pushnil(state);
                1
            }
            None => quick_search(state, true).unwrap_or_else(|| front(state)),
        }
    }
}

/// `string.match`: [`quick_search`], else the Rust function in upvalue 1.
pub(super) unsafe extern "C-unwind" fn match_front(state: *mut ffi::lua_State) -> c_int {
    unsafe { quick_search(state, false).unwrap_or_else(|| front(state)) }
}

/// What [`quick_search`] found, held as plain values so that nothing needs dropping
/// when the results are pushed (pushing may raise a Lua error).
// One per call, on the stack: boxing the captures would allocate, which this path avoids.
#[allow(clippy::large_enum_variant)]
enum Quick {
    Missing,
    Found {
        start: usize,
        end: usize,
        captures: [CaptureValue; MAX_CAPTURES],
        count: usize,
    },
    /// An error message; `true` to prefix the caller's position (`luaL_error`).
    Error(String, bool),
}

/// The bytes Lua has allocated, as `Lua::used_memory` counts them.
unsafe fn lua_memory(state: *mut ffi::lua_State) -> usize {
    unsafe {
        let kilobytes = ffi::lua_gc(state, ffi::LUA_GCCOUNT, 0);
        let bytes = ffi::lua_gc(state, ffi::LUA_GCCOUNTB, 0);
        usize::try_from(kilobytes).unwrap_or(0) * 1024 + usize::try_from(bytes).unwrap_or(0)
    }
}

/// `string.find` (`find`) or `string.match` with ordinary arguments (two strings and an
/// optional integer), run here rather than through an mlua callback: the same
/// [`Searcher`] and limit checks (the [`Guard`] in upvalue 2), the same results and
/// errors, without the per-call cost of converting arguments and results. `None` for
/// other arguments (the full path then reports any error exactly).
unsafe fn quick_search(state: *mut ffi::lua_State, find: bool) -> Option<c_int> {
    unsafe {
        if find && ffi::lua_toboolean(state, 4) != 0 {
            return None;
        }
        let (src, pat, init) = ordinary_args(state, if find { 4 } else { 3 })?;
        let guard = ffi::lua_touserdata(state, ffi::lua_upvalueindex(2))
            .cast::<Guard>()
            .cast_const()
            .as_ref()?;
        let check = |held: usize| guard.check(lua_memory(state).saturating_add(held));
        let outcome = search(src, pat, init, find, &check);
        Some(push_quick(state, outcome, find, src))
    }
}

/// `str_find_aux` into a [`Quick`].
fn search(src: &[u8], pat: &[u8], init: i64, find: bool, check: Check) -> Quick {
    let init = start_position(init, src.len()) - 1;
    if init > src.len() {
        return Quick::Missing;
    }
    let found = (|| {
        if find && !has_specials(pat) {
            let mut matcher = Matcher::new(src, &[], check);
            let start = matcher.find_plain(pat, init)?;
            return Ok(start.map(|s| {
                (
                    s,
                    s + pat.len(),
                    [CaptureValue::Position(0); MAX_CAPTURES],
                    0,
                )
            }));
        }
        let (anchored, pat) = anchor(pat);
        let mut searcher = Searcher::new(src, pat, check);
        let Some((s, e)) = searcher.find(init, anchored)? else {
            return Ok(None);
        };
        let matcher = searcher.matcher();
        let count = matcher.capture_count(!find);
        let mut captures = [CaptureValue::Position(0); MAX_CAPTURES];
        for (i, slot) in captures.iter_mut().enumerate().take(count) {
            *slot = matcher.capture(i, s, e)?;
        }
        Ok(Some((s, e, captures, count)))
    })();
    match found {
        Ok(Some((start, end, captures, count))) => Quick::Found {
            start,
            end,
            captures,
            count,
        },
        Ok(None) => Quick::Missing,
        Err(Failure::Raise(message)) => Quick::Error(message, true),
        Err(Failure::Host(error)) => Quick::Error(error.to_string(), false),
    }
}

/// Pushes a [`Quick`] outcome as `string.find`/`string.match` results, or raises it.
unsafe fn push_quick(state: *mut ffi::lua_State, outcome: Quick, find: bool, src: &[u8]) -> c_int {
    unsafe {
        match outcome {
            Quick::Missing => {
                ffi::lua_pushnil(state);
                1
            }
            Quick::Found {
                start,
                end,
                captures,
                count,
            } => {
                ffi::luaL_checkstack(state, count as c_int + 2, c"too many captures".as_ptr());
                if find {
                    ffi::lua_pushinteger(state, start as i64 + 1);
                    ffi::lua_pushinteger(state, end as i64);
                }
                for capture in captures.iter().take(count) {
                    match *capture {
                        CaptureValue::Text(a, b) => {
                            let text = piece(src, a, b);
                            ffi::lua_pushlstring(state, text.as_ptr().cast(), text.len());
                        }
                        CaptureValue::Position(p) => ffi::lua_pushinteger(state, p as i64),
                    }
                }
                count as c_int + if find { 2 } else { 0 }
            }
            Quick::Error(message, at_caller) => {
                ffi::lua_pushlstring(state, message.as_ptr().cast(), message.len());
                drop(message);
                if at_caller {
                    ffi::luaL_where(state, 1);
                    ffi::lua_rotate(state, -2, 1);
                    ffi::lua_concat(state, 2);
                }
                ffi::lua_error(state)
            }
        }
    }
}

/// The borrowed bytes of the string at `index`, if it is a string (not a number).
///
/// # Safety
/// `state` must be a valid Lua state; the slice lives while the value is on the stack.
unsafe fn stack_bytes<'a>(state: *mut ffi::lua_State, index: c_int) -> Option<&'a [u8]> {
    unsafe {
        if ffi::lua_type(state, index) != ffi::LUA_TSTRING {
            return None;
        }
        let mut len = 0usize;
        let data = ffi::lua_tolstring(state, index, &mut len);
        (!data.is_null()).then(|| std::slice::from_raw_parts(data.cast::<u8>(), len))
    }
}

/// The ordinary arguments of a string function: subject and pattern (strings, not
/// numbers) and an optional integer start, with at most `max_args` arguments; `None`
/// for anything else, which the full path handles (and reports errors for).
unsafe fn ordinary_args<'a>(
    state: *mut ffi::lua_State,
    max_args: c_int,
) -> Option<(&'a [u8], &'a [u8], i64)> {
    unsafe {
        let n = ffi::lua_gettop(state);
        if !(2..=max_args).contains(&n) {
            return None;
        }
        let src = stack_bytes(state, 1)?;
        let pat = stack_bytes(state, 2)?;
        let init = match ffi::lua_type(state, 3) {
            ffi::LUA_TNONE | ffi::LUA_TNIL => 1,
            ffi::LUA_TNUMBER if ffi::lua_isinteger(state, 3) != 0 => ffi::lua_tointeger(state, 3),
            _ => return None,
        };
        Some((src, pat, init))
    }
}

/// `string.find`'s answer when it needs neither the matcher nor a limit check: the
/// 1-based start and end, `Some(None)` for no match, `None` to take the full path.
unsafe fn quick_find(state: *mut ffi::lua_State) -> Option<Option<(i64, i64)>> {
    unsafe {
        let (src, pat, init) = ordinary_args(state, 4)?;
        let plain = ffi::lua_toboolean(state, 4) != 0;
        if !plain && pat.iter().any(|b| SPECIALS.contains(b)) {
            return None;
        }
        let init = start_position(init, src.len()) - 1;
        if init > src.len() {
            return Some(None);
        }
        let window = src.get(init..)?;
        let limit = SCAN_WINDOW.saturating_add(pat.len());
        let found = find_bytes(window.get(..limit).unwrap_or(window), pat);
        match found {
            Some(at) => {
                let start = (init + at) as i64;
                Some(Some((start + 1, start + pat.len() as i64)))
            }
            None if window.len() <= limit => Some(None),
            None => None,
        }
    }
}

/// `gmatch`: for a literal or one-class pattern, a C iterator over the subject
/// ([`quick_gmatch_step`]); otherwise the Rust function in upvalue 1 gives the step
/// function (or a failure), returned wrapped in [`gmatch_step`]. Upvalue 2 checks the
/// limits.
pub(super) unsafe extern "C-unwind" fn gmatch_front(state: *mut ffi::lua_State) -> c_int {
    unsafe {
        if let Some((init, class)) = quick_gmatch_start(state) {
            ffi::lua_settop(state, 2);
            ffi::lua_pushinteger(state, init as i64);
            ffi::lua_pushvalue(state, ffi::lua_upvalueindex(2));
            match class {
                Some(class) => {
                    ffi::lua_pushlstring(state, class.as_ptr().cast(), class.len());
                }
                None => ffi::lua_pushnil(state),
            }
            ffi::lua_pushcclosure(state, quick_gmatch_step, 5);
            return 1;
        }
        if front(state) == 1 {
            ffi::lua_pushcclosure(state, gmatch_step, 1);
        }
        1
    }
}

fn no_check(_: usize) -> mlua::Result<()> {
    Ok(())
}

/// Subjects from this size on get their one-class pattern turned into a table of the
/// bytes it matches (building it costs about a microsecond; scanning with it is faster).
const CLASS_TABLE_FROM: usize = 4096;

/// The bytes a single-character class matches, one bit each (`[u8; 32]`); then whether
/// the class repeats (`+`), whether it holds a single byte and which, whether it lacks a
/// single byte and which: 37 bytes kept as a Lua string upvalue.
type ClassTable = [u8; CLASS_TABLE_LEN];
const CLASS_TABLE_LEN: usize = 37;

/// The 0-based start of a `gmatch` whose pattern needs no matcher, or `None`; with the
/// [`ClassTable`] of a one-class pattern over a long subject.
unsafe fn quick_gmatch_start(state: *mut ffi::lua_State) -> Option<(usize, Option<ClassTable>)> {
    unsafe {
        let (src, pat, init) = ordinary_args(state, 3)?;
        let plan = Plan::of(pat, &Matcher::new(src, pat, &no_check));
        let class = match plan {
            Plan::General => return None,
            Plan::Literal => None,
            Plan::Class { end, repeat } => {
                (src.len() >= CLASS_TABLE_FROM).then(|| class_table(pat, end, repeat))
            }
        };
        Some((
            (start_position(init, src.len()) - 1).min(src.len() + 1),
            class,
        ))
    }
}

/// The [`ClassTable`] of the class `pat[..end]`.
fn class_table(pat: &[u8], end: usize, repeat: bool) -> ClassTable {
    let every_byte: Vec<u8> = (0..=255).collect();
    let matcher = Matcher::new(&every_byte, pat, &no_check);
    let mut table = [0u8; CLASS_TABLE_LEN];
    for byte in 0..256 {
        if matcher.single_match(byte, 0, end) {
            table[byte >> 3] |= 1 << (byte & 7);
        }
    }
    table[32] = u8::from(repeat);
    if let Some(byte) = single_byte(&table, false) {
        (table[33], table[34]) = (1, byte);
    }
    if let Some(byte) = single_byte(&table, true) {
        (table[35], table[36]) = (1, byte);
    }
    table
}

/// Whether `table` holds `byte`.
#[inline]
fn holds(table: &[u8], byte: u8) -> bool {
    table[usize::from(byte >> 3)] & (1 << (byte & 7)) != 0
}

/// The only byte `table` holds (or, with `complement`, the only one it lacks), if so.
fn single_byte(table: &[u8; CLASS_TABLE_LEN], complement: bool) -> Option<u8> {
    let mut found = None;
    for byte in 0..=255u8 {
        if holds(table, byte) != complement {
            if found.is_some() {
                return None;
            }
            found = Some(byte);
        }
    }
    found
}

/// [`next_in_window`] for a one-class pattern given as a [`ClassTable`]: the class's
/// bytes are found with `memchr` when it is one byte (`x+`) or all bytes but one
/// (`[^\n]+`), by table lookups otherwise.
fn next_in_table(src: &[u8], table: &[u8], from: usize) -> Window {
    if from >= src.len() {
        return Window::Done;
    }
    let stop = from.saturating_add(SCAN_WINDOW).min(src.len());
    let window = &src[from..stop];
    let start = match table[33] {
        0 => window.iter().position(|&b| holds(table, b)),
        _ => memchr::memchr(table[34], window),
    };
    let Some(at) = start else {
        return if stop >= src.len() {
            Window::Done
        } else {
            Window::Continue(stop)
        };
    };
    let s = from + at;
    let mut e = s + 1;
    if table[32] != 0 {
        let rest = &src[e..];
        e += match table[35] {
            0 => rest.iter().position(|&b| !holds(table, b)),
            _ => memchr::memchr(table[36], rest),
        }
        .unwrap_or(rest.len());
    }
    Window::Found(s, e)
}

/// One step of a `gmatch` over a literal or one-class pattern; upvalues: subject,
/// pattern, position, limits check, [`ClassTable`] (or `nil`). Such matches are never empty, so Lua 5.4's rule
/// against an empty match where the last one ended never applies.
unsafe extern "C-unwind" fn quick_gmatch_step(state: *mut ffi::lua_State) -> c_int {
    unsafe {
        let (Some(src), Some(pat)) = (
            stack_bytes(state, ffi::lua_upvalueindex(1)),
            stack_bytes(state, ffi::lua_upvalueindex(2)),
        ) else {
            return 0;
        };
        let mut from =
            usize::try_from(ffi::lua_tointeger(state, ffi::lua_upvalueindex(3))).unwrap_or(0);
        let table =
            stack_bytes(state, ffi::lua_upvalueindex(5)).filter(|t| t.len() == CLASS_TABLE_LEN);
        loop {
            let next = match table {
                Some(table) => next_in_table(src, table, from),
                None => next_in_window(src, pat, from),
            };
            match next {
                Window::Found(s, e) => {
                    ffi::lua_pushinteger(state, e as i64);
                    ffi::lua_replace(state, ffi::lua_upvalueindex(3));
                    ffi::lua_pushlstring(state, src.as_ptr().add(s).cast(), e - s);
                    return 1;
                }
                Window::Done => {
                    ffi::lua_pushinteger(state, src.len() as i64 + 1);
                    ffi::lua_replace(state, ffi::lua_upvalueindex(3));
                    return 0;
                }
                Window::Continue(next) => {
                    // A window scanned without a match: let the limits stop a long scan.
                    ffi::lua_pushvalue(state, ffi::lua_upvalueindex(4));
                    ffi::lua_call(state, 0, 0);
                    from = next;
                }
            }
        }
    }
}

/// What one window of a quick `gmatch` scan found.
enum Window {
    Found(usize, usize),
    Continue(usize),
    Done,
}

/// The next literal or one-class match at or after `from`, looking at most
/// [`SCAN_WINDOW`] bytes ahead for its start.
fn next_in_window(src: &[u8], pat: &[u8], from: usize) -> Window {
    if from > src.len() {
        return Window::Done;
    }
    let stop = from.saturating_add(SCAN_WINDOW).min(src.len());
    let mut matcher = Matcher::new(src, pat, &no_check);
    let found = match Plan::of(pat, &matcher) {
        Plan::Literal => {
            let window = src.get(from..stop.saturating_add(pat.len()).min(src.len()));
            find_bytes(window.unwrap_or_default(), pat).map(|at| (from + at, from + at + pat.len()))
        }
        Plan::Class { end, repeat } => (from..stop)
            .find(|&s| matcher.single_match(s, 0, end))
            .and_then(|s| {
                matcher
                    .match_class_at(s, end, repeat)
                    .ok()
                    .flatten()
                    .map(|e| (s, e))
            }),
        Plan::General => return Window::Done,
    };
    match found {
        Some((s, e)) => Window::Found(s, e),
        None if stop >= src.len() => Window::Done,
        None => Window::Continue(stop),
    }
}

/// One step of a `gmatch` iterator: the Rust step in upvalue 1, then [`finish`].
unsafe extern "C-unwind" fn gmatch_step(state: *mut ffi::lua_State) -> c_int {
    unsafe {
        ffi::lua_settop(state, 0);
        ffi::lua_pushvalue(state, ffi::lua_upvalueindex(1));
        ffi::lua_call(state, 0, ffi::LUA_MULTRET);
        finish(state)
    }
}

/// A C closure of `function` over `upvalues` (the Rust function first).
pub(super) fn c_closure(
    lua: &Lua,
    function: ffi::lua_CFunction,
    upvalues: Vec<Value>,
) -> mlua::Result<Function> {
    let count = c_int::try_from(upvalues.len()).unwrap_or(0);
    // SAFETY: `exec_raw` runs the closure protected with the upvalues on the stack.
    unsafe {
        lua.exec_raw(MultiValue::from_vec(upvalues), |state| {
            ffi::lua_pushcclosure(state, function, count);
        })
    }
}
