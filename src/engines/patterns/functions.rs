//! The Rust string functions behind the C functions in front ([`super::front`]):
//! `find`, `match` and `gmatch` with `luaL_check*`-style argument checks and messages,
//! and [`install`], which puts the four functions in the `string` table.

use std::cell::Cell;
use std::rc::Rc;

use mlua::{Function, LightUserData, Lua, LuaString, MultiValue, Table, Value};

use super::super::lauxlib::type_name;
use super::super::shown;
use super::front::{c_closure, fail_marker, find_front, gmatch_front, gsub_front, match_front};
use super::gsub::gsub;
use super::limits::Guard;
use super::matcher::{CaptureValue, Matcher, start_position};
use super::plan::{Searcher, anchor};
use super::{Failure, SPECIALS, raise};

/// Replaces `string.find`, `string.match`, `string.gmatch` and `string.gsub` (also
/// reached as string methods) with the interruptible port, checking `guard`.
pub(crate) fn install(lua: &Lua, guard: Rc<Guard>) -> mlua::Result<()> {
    let globals = lua.globals();
    let core_find = {
        let guard = Rc::clone(&guard);
        lua.create_function(move |lua, args: MultiValue| {
            report(lua, find_aux(lua, &guard, &args, true))
        })?
    };
    let core_match = {
        let guard = Rc::clone(&guard);
        lua.create_function(move |lua, args: MultiValue| {
            report(lua, find_aux(lua, &guard, &args, false))
        })?
    };
    let core_gmatch = {
        let guard = Rc::clone(&guard);
        lua.create_function(move |lua, args: MultiValue| {
            let iterator = gmatch(lua, &guard, &args).map(|f| one(Value::Function(f)));
            report(lua, iterator)
        })?
    };
    let core_gsub = {
        let guard = Rc::clone(&guard);
        lua.create_function(move |lua, args: MultiValue| report(lua, gsub(lua, &guard, &args)))?
    };
    let check = {
        let guard = Rc::clone(&guard);
        lua.create_function(move |lua, ()| guard.check(lua.used_memory()))?
    };
    // The C functions reach the guard through a light userdata: the Rust functions
    // beside it in their upvalues own a reference, so it lives as long as they do.
    let guard_pointer = Value::LightUserData(LightUserData(Rc::as_ptr(&guard).cast_mut().cast()));
    let find = c_closure(
        lua,
        find_front,
        vec![Value::Function(core_find), guard_pointer.clone()],
    )?;
    let r#match = c_closure(
        lua,
        match_front,
        vec![Value::Function(core_match), guard_pointer],
    )?;
    let gmatch = c_closure(
        lua,
        gmatch_front,
        vec![Value::Function(core_gmatch), Value::Function(check)],
    )?;
    let gsub = c_closure(lua, gsub_front, vec![Value::Function(core_gsub)])?;
    let string: Table = globals.get("string")?;
    string.raw_set("find", find)?;
    string.raw_set("match", r#match)?;
    string.raw_set("gmatch", gmatch)?;
    string.raw_set("gsub", gsub)
}

/// Turns a result into what the C function in front (`front::finish`) expects: the values, or `FAIL, value, level`.
pub(super) fn report(lua: &Lua, result: Result<MultiValue, Failure>) -> mlua::Result<MultiValue> {
    let (value, level) = match result {
        Ok(values) => return Ok(values),
        Err(Failure::Host(error)) => return Err(error),
        Err(Failure::Raise(message)) => (Value::String(lua.create_string(message)?), 2),
    };
    Ok(MultiValue::from_vec(vec![
        fail_marker(),
        value,
        Value::Integer(level),
    ]))
}

pub(super) fn one(value: Value) -> MultiValue {
    MultiValue::from_vec(vec![value])
}

/// The limits check handed to a [`Matcher`].
pub(super) fn limits_check<'a>(
    lua: &'a Lua,
    guard: &'a Guard,
) -> impl Fn(usize) -> mlua::Result<()> + 'a {
    move |held_bytes| guard.check(lua.used_memory().saturating_add(held_bytes))
}

/// The arguments of one call, with `luaL_check*`-style accessors and messages.
pub(super) struct Args<'a> {
    pub(super) lua: &'a Lua,
    pub(super) values: &'a MultiValue,
    /// The function's name in the `string` table, for messages.
    pub(super) function: &'static str,
}

impl Args<'_> {
    /// Argument `n` (1-based); `None` when absent.
    pub(super) fn get(&self, n: usize) -> Option<&Value> {
        self.values.get(n.wrapping_sub(1))
    }

    /// `luaL_checklstring`: a string, or a number converted to one.
    pub(super) fn string(&self, n: usize) -> Result<LuaString, Failure> {
        match self.get(n) {
            Some(Value::String(s)) => Ok(s.clone()),
            Some(number @ (Value::Integer(_) | Value::Number(_))) => {
                match self.lua.coerce_string(number.clone())? {
                    Some(s) => Ok(s),
                    None => Err(self.type_error(n, "string")),
                }
            }
            _ => Err(self.type_error(n, "string")),
        }
    }

    /// `luaL_optinteger`.
    pub(super) fn opt_integer(&self, n: usize, default: i64) -> Result<i64, Failure> {
        let value = match self.get(n) {
            None | Some(Value::Nil) => return Ok(default),
            Some(Value::Integer(i)) => return Ok(*i),
            Some(value) => value.clone(),
        };
        if let Some(i) = self.lua.coerce_integer(value.clone())? {
            return Ok(i);
        }
        if self.lua.coerce_number(value)?.is_some() {
            return Err(self.arg_error(n, "number has no integer representation"));
        }
        Err(self.type_error(n, "number"))
    }

    /// `lua_toboolean`.
    pub(super) fn truthy(&self, n: usize) -> bool {
        !matches!(self.get(n), None | Some(Value::Nil | Value::Boolean(false)))
    }

    /// `luaL_typeerror`.
    pub(super) fn type_error(&self, n: usize, expected: &str) -> Failure {
        let got = match self.get(n) {
            None => "no value".to_string(),
            Some(value) => type_name_for_message(value),
        };
        self.arg_error(n, &format!("{expected} expected, got {got}"))
    }

    /// `luaL_argerror`. The name is the one the caller used for the C function in front (stack
    /// level 1, the Rust function being level 0), as C Lua names the C function.
    pub(super) fn arg_error(&self, n: usize, extra: &str) -> Failure {
        let (name, what) = self
            .lua
            .inspect_stack(1, |frame| {
                let names = frame.names();
                (names.name.map(|name| name.into_owned()), names.name_what)
            })
            .unwrap_or((None, None));
        let mut n = n;
        if what == Some("method") {
            n -= 1; // `self` is not counted
            if n == 0 {
                let name = name.unwrap_or_else(|| "?".to_string());
                return raise(format!("calling '{name}' on bad self ({extra})"));
            }
        }
        let name = name.unwrap_or_else(|| format!("string.{}", self.function));
        raise(format!("bad argument #{n} to '{name}' ({extra})"))
    }
}

/// The type name `luaL_typeerror` shows: a table's `__name` if it is a string.
fn type_name_for_message(value: &Value) -> String {
    if let Value::Table(table) = value {
        let name = table
            .metatable()
            .and_then(|meta| meta.raw_get::<Value>("__name").ok());
        if let Some(Value::String(name)) = name {
            return shown(&name.as_bytes()).into_owned();
        }
    }
    if let Value::LightUserData(_) = value {
        return "light userdata".to_string();
    }
    type_name(value).to_string()
}

/// A slice that is empty instead of panicking when out of range.
pub(super) fn piece(bytes: &[u8], start: usize, end: usize) -> &[u8] {
    bytes.get(start..end).unwrap_or_default()
}

/// A capture as a Lua value: a string, or an integer for a position capture.
pub(super) fn capture_value(lua: &Lua, src: &[u8], value: CaptureValue) -> mlua::Result<Value> {
    match value {
        CaptureValue::Text(start, end) => {
            Ok(Value::String(lua.create_string(piece(src, start, end))?))
        }
        CaptureValue::Position(position) => Ok(Value::Integer(position as i64)),
    }
}

/// `push_captures`: appends the captures of the match `s..e` to `out`.
pub(super) fn push_captures(
    lua: &Lua,
    matcher: &Matcher,
    src: &[u8],
    (s, e): (usize, usize),
    whole_match: bool,
    out: &mut MultiValue,
) -> Result<(), Failure> {
    for i in 0..matcher.capture_count(whole_match) {
        let value = matcher.capture(i, s, e)?;
        out.push_back(capture_value(lua, src, value)?);
    }
    Ok(())
}

/// `str_find_aux`: `string.find` (`find`) or `string.match`.
fn find_aux(
    lua: &Lua,
    guard: &Guard,
    values: &MultiValue,
    find: bool,
) -> Result<MultiValue, Failure> {
    let args = Args {
        lua,
        values,
        function: if find { "find" } else { "match" },
    };
    let subject = args.string(1)?;
    let pattern = args.string(2)?;
    let (src, pat) = (subject.as_bytes(), pattern.as_bytes());
    let init = start_position(args.opt_integer(3, 1)?, src.len()) - 1;
    if init > src.len() {
        return Ok(one(Value::Nil)); // starts after the end: cannot find anything
    }
    let check = limits_check(lua, guard);
    // An explicit plain search, or a pattern without special characters: no matcher.
    if find && (args.truthy(4) || !pat.iter().any(|b| SPECIALS.contains(b))) {
        let mut matcher = Matcher::new(&src, &[], &check);
        return Ok(match matcher.find_plain(&pat, init)? {
            Some(start) => MultiValue::from_vec(vec![
                Value::Integer(start as i64 + 1),
                Value::Integer((start + pat.len()) as i64),
            ]),
            None => one(Value::Nil),
        });
    }
    let (anchored, pat) = anchor(&pat);
    let mut searcher = Searcher::new(&src, pat, &check);
    let Some((s, e)) = searcher.find(init, anchored)? else {
        return Ok(one(Value::Nil));
    };
    let mut out = MultiValue::new();
    if find {
        out.push_back(Value::Integer(s as i64 + 1));
        out.push_back(Value::Integer(e as i64));
    }
    push_captures(lua, searcher.matcher(), &src, (s, e), !find, &mut out)?;
    Ok(out)
}

/// `gmatch`: the iteration state lives in the Rust closure returned (wrapped in Lua).
fn gmatch(lua: &Lua, guard: &Rc<Guard>, values: &MultiValue) -> Result<Function, Failure> {
    let args = Args {
        lua,
        values,
        function: "gmatch",
    };
    let subject = args.string(1)?;
    let pattern = args.string(2)?;
    let len = subject.as_bytes().len();
    // Past the end, start at `len + 1` so that the loop below never runs.
    let init = (start_position(args.opt_integer(3, 1)?, len) - 1).min(len + 1);
    let position = Cell::new(init);
    // End of the last match: 5.4 does not accept an empty match right where one ended.
    let last_match: Cell<Option<usize>> = Cell::new(None);
    let guard = Rc::clone(guard);
    let step = lua.create_function(move |lua, _: MultiValue| {
        let (src, pat) = (subject.as_bytes(), pattern.as_bytes());
        let check = limits_check(lua, &guard);
        let mut searcher = Searcher::new(&src, &pat, &check);
        let result = (|| {
            if position.get() > src.len() {
                return Ok(MultiValue::new()); // no more matches
            }
            match searcher.next_match(position.get(), last_match.get())? {
                Some((s, e)) => {
                    position.set(e);
                    last_match.set(Some(e));
                    let mut out = MultiValue::new();
                    push_captures(lua, searcher.matcher(), &src, (s, e), true, &mut out)?;
                    Ok(out)
                }
                None => {
                    position.set(src.len() + 1);
                    Ok(MultiValue::new())
                }
            }
        })();
        report(lua, result)
    })?;
    Ok(step)
}
