//! JSON → Lua, in two passes with no value tree in between: serde_json drives a visitor
//! that records a document (JSON text, or a `serde_json::Value`) as a flat [`Tape`] of
//! events (strings of the text without escapes point into it, the others go to one side
//! buffer), then the Lua values are built from the tape in one protected call with the
//! Lua C API. The tape is owned outside that call, so an allocation failing in Lua (the
//! memory limit) leaks nothing, and the tape of `json.lines` is reused from line to line.

use std::fmt::Write as _;

use mlua::{Lua, Value, ffi};
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::Value as Json;

use super::walk::push_key;
use super::{ARRAY_METATABLE_C, CrossError, MAX_DEPTH, Refusal, array_metatable};
use crate::engines::limits::Guard;
use crate::engines::meter::{VALUE_COST, WorkMeter, with_collector_paused};

/// Documents of at least this many events are built with the collector paused.
const PAUSE_COLLECTOR_EVENTS: usize = 1 << 16;
/// Events recorded between two checks of the limits while a document is read.
const CHECK_EVENTS: usize = 1 << 14;

/// One event of a decoded document, in document order.
#[derive(Clone, Copy, Debug)]
enum Event {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    /// A string of the input, by byte range.
    Input(usize, usize),
    /// A string of the side buffer (it had escapes, or is a `serde_json::Value`'s), by
    /// byte range.
    Unescaped(usize, usize),
    /// An array of this many values, which follow.
    Array(usize),
    /// An object of this many key-value pairs, which follow (key, value, key, …).
    Object(usize),
}

/// A decoded document: its events and the strings that had escapes (or that a
/// `serde_json::Value` holds).
#[derive(Default)]
pub(crate) struct Tape {
    events: Vec<Event>,
    unescaped: Vec<u8>,
}

impl Tape {
    fn clear(&mut self) {
        self.events.clear();
        self.unescaped.clear();
    }

    /// Gives back what a large document made the tape hold, so that a tape kept between
    /// documents (an iterator's, idle or failed) holds little outside Lua.
    pub(crate) fn release_if_large(&mut self) {
        const KEPT_BYTES: usize = 1 << 20;
        if self.held() > KEPT_BYTES {
            *self = Tape::default();
        }
    }

    /// Bytes held outside Lua, counted with Lua's memory against the limit.
    fn held(&self) -> usize {
        self.events.capacity() * std::mem::size_of::<Event>() + self.unescaped.capacity()
    }
}

/// The visitor's state: the tape, the input its borrowed strings point into, and the
/// meter checked every [`CHECK_EVENTS`] events.
struct Recorder<'t, 'm, 'l> {
    tape: &'t mut Tape,
    /// Arrays and objects open around the value being read.
    depth: usize,
    input: &'t [u8],
    meter: &'m mut WorkMeter<'l>,
    /// Where a failure happened, innermost first, recorded as it unwinds.
    trail: Vec<Step>,
}

/// One step down into an array or object, on the way to a failure.
enum Step {
    /// The value at this position (from 1).
    Position(usize),
    /// The value of the key recorded at this event.
    Key(usize),
}

impl Recorder<'_, '_, '_> {
    fn push<E: de::Error>(&mut self, event: Event) -> Result<(), E> {
        self.tape.events.push(event);
        if self.tape.events.len().is_multiple_of(CHECK_EVENTS) {
            self.meter.hold(self.tape.held());
            // The tripwire keeps the limit: the caller raises its error, not this one.
            self.meter.check().map_err(|_| E::custom(LIMIT_HIT))?;
        }
        Ok(())
    }

    /// Opens an array or object, refusing one nested too deep.
    fn open<E: de::Error>(&mut self, event: Event) -> Result<usize, E> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(E::custom(TOO_DEEP));
        }
        let at = self.tape.events.len();
        self.push(event)?;
        Ok(at)
    }
}

/// The message of a document nested deeper than [`MAX_DEPTH`].
const TOO_DEEP: &str = "nested too deep";

/// The message a visitor stops with when a limit trips.
const LIMIT_HIT: &str = "limit hit";

/// Records one value (and what it holds) on the tape.
struct Record<'r, 't, 'm, 'l>(&'r mut Recorder<'t, 'm, 'l>);

impl<'de> DeserializeSeed<'de> for Record<'_, '_, '_, '_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Record<'_, '_, '_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.0.push(Event::Null)
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<(), E> {
        self.0.push(Event::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<(), E> {
        self.0.push(Event::Int(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<(), E> {
        // Past i64::MAX an integer becomes a float, as Lua's own `tonumber` does.
        match i64::try_from(v) {
            Ok(v) => self.0.push(Event::Int(v)),
            Err(_) => self.0.push(Event::Float(v as f64)),
        }
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<(), E> {
        self.0.push(Event::Float(v))
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<(), E> {
        let input = self.0.input.as_ptr_range();
        let within = input.start <= v.as_ptr() && v.as_bytes().as_ptr_range().end <= input.end;
        if !within {
            // A string of a `serde_json::Value`, not of the text.
            return self.visit_str(v);
        }
        let start = (v.as_ptr() as usize).wrapping_sub(input.start as usize);
        self.0.push(Event::Input(start, v.len()))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        let unescaped = &mut self.0.tape.unescaped;
        let start = unescaped.len();
        unescaped.extend_from_slice(v.as_bytes());
        self.0.push(Event::Unescaped(start, v.len()))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let at = self.0.open(Event::Array(0))?;
        let mut n = 0;
        loop {
            match seq.next_element_seed(Record(&mut *self.0)) {
                Ok(Some(())) => n += 1,
                Ok(None) => break,
                Err(error) => {
                    self.0.trail.push(Step::Position(n + 1));
                    return Err(error);
                }
            }
        }
        self.0.tape.events[at] = Event::Array(n);
        self.0.depth -= 1;
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let at = self.0.open(Event::Object(0))?;
        let mut n = 0;
        loop {
            let key = self.0.tape.events.len();
            if map.next_key_seed(Record(&mut *self.0))?.is_none() {
                break;
            }
            if let Err(error) = map.next_value_seed(Record(&mut *self.0)) {
                self.0.trail.push(Step::Key(key));
                return Err(error);
            }
            n += 1;
        }
        self.0.tape.events[at] = Event::Object(n);
        self.0.depth -= 1;
        Ok(())
    }
}

/// Reads one JSON document into `tape`; the error says what and where, the line counted
/// from `first_line` (the input line of a JSON-lines record).
pub(crate) fn read_text(
    function: &str,
    input: &[u8],
    tape: &mut Tape,
    meter: &mut WorkMeter,
    first_line: Option<usize>,
) -> mlua::Result<()> {
    tape.clear();
    let mut deserializer = serde_json::Deserializer::from_slice(input);
    let mut recorder = Recorder {
        tape,
        depth: 0,
        input,
        meter,
        trail: Vec::new(),
    };
    let read = Record(&mut recorder)
        .deserialize(&mut deserializer)
        .and_then(|()| deserializer.end());
    recorder.meter.hold(recorder.tape.held());
    // A limit tripped inside the visitor is raised as the limit, whatever serde made of it.
    recorder.meter.check()?;
    read.map_err(|e| decode_error(function, &e, first_line))
}

/// Reads `value` into `tape`; a refusal names the path from `root` to where it is.
fn read_json(
    value: &Json,
    tape: &mut Tape,
    meter: &mut WorkMeter,
    root: &str,
) -> Result<(), CrossError> {
    tape.clear();
    let mut recorder = Recorder {
        tape,
        depth: 0,
        input: &[],
        meter,
        trail: Vec::new(),
    };
    let read = Record(&mut recorder).deserialize(value);
    recorder.meter.hold(recorder.tape.held());
    recorder.meter.check()?;
    read.map_err(|error| {
        let what = match error.to_string().as_str() {
            TOO_DEEP => format!("nested deeper than {MAX_DEPTH} levels"),
            other => other.to_string(),
        };
        let path = trail_path(root, &recorder.trail, recorder.tape, recorder.input);
        CrossError::Refused(Refusal::other(format!("{what} (at {path})")))
    })
}

/// The path from `root` down the `trail` a failure left (innermost step first).
fn trail_path(root: &str, trail: &[Step], tape: &Tape, input: &[u8]) -> String {
    let mut path = root.to_string();
    for step in trail.iter().rev() {
        match *step {
            Step::Position(i) => {
                let _ = write!(path, "[{i}]");
            }
            Step::Key(at) => {
                let (bytes, start, len) = match tape.events.get(at) {
                    Some(&Event::Input(start, len)) => (input, start, len),
                    Some(&Event::Unescaped(start, len)) => (&tape.unescaped[..], start, len),
                    _ => continue,
                };
                push_key(&mut path, bytes.get(start..start + len).unwrap_or_default());
            }
        }
    }
    path
}

/// `json.decode: expected ',' or '}' at line 3, column 17`.
pub(super) fn decode_error(
    function: &str,
    error: &serde_json::Error,
    line: Option<usize>,
) -> mlua::Error {
    let text = error.to_string();
    let position = format!(" at line {} column {}", error.line(), error.column());
    let what = text.strip_suffix(&position).unwrap_or(&text);
    let what = match what {
        "recursion limit exceeded" | TOO_DEEP => format!("nested deeper than {MAX_DEPTH} levels"),
        // serde_json's words for a surrogate escape without its pair, whichever half it is.
        "unexpected end of hex escape" | "lone leading surrogate in hex escape" => {
            "a lone surrogate in a \\u escape".to_string()
        }
        "expected ident" => "invalid literal (expected true, false or null)".to_string(),
        "EOF while parsing a value"
        | "EOF while parsing a list"
        | "EOF while parsing an object"
        | "EOF while parsing a string" => format!("unexpected end of input ({})", &what[4..]),
        other => other.replace('`', "'"),
    };
    // A JSON-lines record cut short is most often a document spread over several lines.
    let hint = match line {
        Some(_) if what.starts_with("unexpected end of input") => {
            " (json.lines reads one whole value per line; json.decode reads one document)"
        }
        _ => "",
    };
    let line = line.unwrap_or(error.line());
    mlua::Error::RuntimeError(format!(
        "{function}: {what} at line {line}, column {}{hint}",
        error.column()
    ))
}

/// Builds the Lua value the tape holds, in one protected call.
fn build(lua: &Lua, input: &[u8], tape: &Tape, meter: &mut WorkMeter) -> mlua::Result<Value> {
    let mut built = Ok(());
    // A large document pauses the collector (every value is kept, so a collection would
    // only walk the growing tables); a small one does not, as restarting the collector
    // asks it for a step at once, which for a record per line would keep it running.
    let pause = tape.events.len() >= PAUSE_COLLECTOR_EVENTS;
    // SAFETY: `push_value` pushes exactly one value, and only strings, numbers, booleans,
    // light userdata and tables of them; everything it reads is owned outside this call,
    // so an allocation failing in Lua (which unwinds past it) leaks nothing.
    let value = with_collector_paused(lua, pause, || unsafe {
        lua.exec_raw::<Value>((), |state| {
            ffi::lua_getfield(state, ffi::LUA_REGISTRYINDEX, ARRAY_METATABLE_C.as_ptr());
            let metatable = ffi::lua_gettop(state);
            if ffi::lua_checkstack(state, (2 * MAX_DEPTH + 8) as std::ffi::c_int) == 0 {
                built = Err(mlua::Error::RuntimeError(
                    "json: out of Lua stack space".into(),
                ));
                return;
            }
            let mut at = 0;
            let mut builder = Builder {
                state,
                input,
                tape,
                metatable,
                meter,
            };
            built = builder.push_value(&mut at);
            ffi::lua_remove(state, metatable);
        })
    });
    let value = value?;
    built.map(|()| value)
}

/// Pushes the tape's values onto a Lua stack.
pub(crate) struct Builder<'a, 'l> {
    pub(crate) state: *mut ffi::lua_State,
    pub(crate) input: &'a [u8],
    pub(crate) tape: &'a Tape,
    /// The stack index of the arrays' metatable.
    pub(crate) metatable: std::ffi::c_int,
    pub(crate) meter: &'a mut WorkMeter<'l>,
}

impl Builder<'_, '_> {
    /// Pushes the value starting at event `at`, moving `at` past it.
    ///
    /// # Safety
    /// `state` must have room for two values per level of nesting left.
    pub(crate) unsafe fn push_value(&mut self, at: &mut usize) -> mlua::Result<()> {
        let state = self.state;
        let Some(&event) = self.tape.events.get(*at) else {
            unsafe { ffi::lua_pushnil(state) };
            return Ok(());
        };
        *at += 1;
        unsafe {
            match event {
                Event::Null => ffi::lua_pushlightuserdata(state, std::ptr::null_mut()),
                Event::Bool(b) => ffi::lua_pushboolean(state, b as std::ffi::c_int),
                Event::Int(i) => ffi::lua_pushinteger(state, i),
                Event::Float(f) => ffi::lua_pushnumber(state, f),
                Event::Input(start, len) => self.push_string(self.input, start, len)?,
                Event::Unescaped(start, len) => {
                    self.push_string(&self.tape.unescaped, start, len)?
                }
                Event::Array(n) => {
                    ffi::lua_createtable(state, c_int(n), 0);
                    for i in 1..=n {
                        self.push_value(at)?;
                        ffi::lua_rawseti(state, -2, i as ffi::lua_Integer);
                    }
                    ffi::lua_pushvalue(state, self.metatable);
                    ffi::lua_setmetatable(state, -2);
                    self.meter.spend(VALUE_COST)?;
                }
                Event::Object(n) => {
                    ffi::lua_createtable(state, 0, c_int(n));
                    for _ in 0..n {
                        self.push_value(at)?;
                        self.push_value(at)?;
                        ffi::lua_rawset(state, -3);
                    }
                    self.meter.spend(VALUE_COST)?;
                }
            }
        }
        Ok(())
    }

    unsafe fn push_string(&mut self, bytes: &[u8], start: usize, len: usize) -> mlua::Result<()> {
        let piece = bytes.get(start..start + len).unwrap_or_default();
        unsafe { ffi::lua_pushlstring(self.state, piece.as_ptr().cast(), piece.len()) };
        self.meter.spend(len + 16)
    }
}

fn c_int(n: usize) -> std::ffi::c_int {
    std::ffi::c_int::try_from(n).unwrap_or(0)
}

/// Decodes one JSON text: `function`'s errors name the line and column.
pub(crate) fn decode_text(
    lua: &Lua,
    guard: &Guard,
    function: &str,
    input: &[u8],
) -> mlua::Result<Value> {
    let mut meter = WorkMeter::new(lua, guard);
    let mut tape = Tape::default();
    read_text(function, input, &mut tape, &mut meter, None)?;
    build(lua, input, &tape, &mut meter)
}

/// `value` as a Lua value (`null` is `json.null`); a refusal names the path from `root`.
pub(crate) fn from_json(
    lua: &Lua,
    guard: &Guard,
    value: &Json,
    root: &str,
) -> Result<Value, CrossError> {
    array_metatable(lua)?;
    let mut meter = WorkMeter::new(lua, guard);
    let mut tape = Tape::default();
    read_json(value, &mut tape, &mut meter, root)?;
    Ok(build(lua, &[], &tape, &mut meter)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error_of(input: &str) -> String {
        let error = serde_json::from_str::<serde_json::Value>(input).unwrap_err();
        match decode_error("json.decode", &error, None) {
            mlua::Error::RuntimeError(message) => message,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn errors_name_the_problem_line_and_column() {
        assert_eq!(
            error_of("{\n\"a\": 1\n\"b\": 2}"),
            "json.decode: expected ',' or '}' at line 3, column 1"
        );
        assert_eq!(
            error_of("[1, 2"),
            "json.decode: unexpected end of input (while parsing a list) at line 1, column 5"
        );
    }
}
