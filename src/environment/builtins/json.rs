//! The `json` built-in: `json.decode`, `json.encode`, `json.lines`, `json.array` and the
//! `json.null` sentinel, on serde_json.
//!
//! Decoding runs in two passes, neither with a value tree in between: serde_json drives a
//! visitor that records the document as a flat [`Tape`] of events (strings without
//! escapes point into the input, the others go to one side buffer), then the Lua values
//! are built from the tape in one protected call with the Lua C API. The tape is owned
//! outside that call, so an allocation failing in Lua (the memory limit) leaks nothing,
//! and the tape of `json.lines` is reused from line to line.
//!
//! The mapping: objects are tables with string keys, arrays are sequences carrying a
//! shared metatable (so an empty one encodes back as `[]`), integers that fit in 64 bits
//! are integers (larger ones floats), `null` is `json.null` (a light userdata, NULL, as in
//! lua-cjson). Nesting deeper than [`MAX_DEPTH`] is an error in both directions.
//!
//! ```
//! use rlm_registry::{Registry, environment::{Environment, Limits}};
//!
//! let env = Environment::new(Registry::baked().clone(), Limits::default())?;
//! let run = env.execute(r#"
//!   local v = json.decode('{"ids": [1, 2], "none": null, "empty": []}')
//!   print(v.ids[2], v.none == json.null, json.encode(v.empty))
//! "#)?;
//! assert_eq!(run.output, "2\ttrue\t[]\n");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::cell::RefCell;
use std::fmt::Write as _;
use std::rc::Rc;

use mlua::{Function, Lua, LuaString, Table, Value, ffi};
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};

use crate::conventions::builtins::BuiltinId;
use crate::environment::chunks::InternalChunk;
use crate::environment::errors::{is_memory_error, per_state, plain_message};
use crate::environment::limits::{LimitKind, Tripwire};
use crate::environment::meter::{VALUE_COST, WorkMeter};

/// The deepest nesting of arrays and objects decoded or encoded: deeper is an error
/// (serde_json's own limit, 128, is never reached).
pub(crate) const MAX_DEPTH: usize = 100;
/// Where the arrays' shared metatable is kept in the Lua registry.
const ARRAY_METATABLE: &str = "rlm.json.array";
/// The same, for the C API.
const ARRAY_METATABLE_C: &std::ffi::CStr = c"rlm.json.array";
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
    /// A string of the side buffer (it had escapes), by byte range.
    Unescaped(usize, usize),
    /// An array of this many values, which follow.
    Array(usize),
    /// An object of this many key-value pairs, which follow (key, value, key, …).
    Object(usize),
}

/// A decoded document: its events and the strings that had escapes.
#[derive(Default)]
struct Tape {
    events: Vec<Event>,
    unescaped: Vec<u8>,
}

impl Tape {
    fn clear(&mut self) {
        self.events.clear();
        self.unescaped.clear();
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
    input: *const u8,
    meter: &'m mut WorkMeter<'l>,
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
        let start = (v.as_ptr() as usize).wrapping_sub(self.0.input as usize);
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
        while seq.next_element_seed(Record(&mut *self.0))?.is_some() {
            n += 1;
        }
        self.0.tape.events[at] = Event::Array(n);
        self.0.depth -= 1;
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let at = self.0.open(Event::Object(0))?;
        let mut n = 0;
        while map.next_key_seed(Record(&mut *self.0))?.is_some() {
            map.next_value_seed(Record(&mut *self.0))?;
            n += 1;
        }
        self.0.tape.events[at] = Event::Object(n);
        self.0.depth -= 1;
        Ok(())
    }
}

/// Reads one JSON document into `tape`; the error says what and where, the line counted
/// from `first_line` (the input line of a JSON-lines record).
fn read(
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
        input: input.as_ptr(),
        meter,
    };
    let read = Record(&mut recorder)
        .deserialize(&mut deserializer)
        .and_then(|()| deserializer.end());
    recorder.meter.hold(recorder.tape.held());
    // A limit tripped inside the visitor is raised as the limit, whatever serde made of it.
    recorder.meter.check()?;
    read.map_err(|e| decode_error(function, &e, first_line))
}

/// `json.decode: expected ',' or '}' at line 3, column 17`.
fn decode_error(function: &str, error: &serde_json::Error, line: Option<usize>) -> mlua::Error {
    let text = error.to_string();
    let position = format!(" at line {} column {}", error.line(), error.column());
    let what = text.strip_suffix(&position).unwrap_or(&text);
    let what = match what {
        "recursion limit exceeded" | TOO_DEEP => format!("nested deeper than {MAX_DEPTH} levels"),
        "unexpected end of hex escape" => "a \\u escape cut short or a lone surrogate".to_string(),
        "expected ident" => "invalid literal (expected true, false or null)".to_string(),
        "EOF while parsing a value"
        | "EOF while parsing a list"
        | "EOF while parsing an object"
        | "EOF while parsing a string" => format!("unexpected end of input ({})", &what[4..]),
        other => other.replace('`', "'"),
    };
    let line = line.unwrap_or(error.line());
    mlua::Error::RuntimeError(format!(
        "{function}: {what} at line {line}, column {}",
        error.column()
    ))
}

/// Builds the Lua value the tape holds, in one protected call.
fn build(lua: &Lua, input: &[u8], tape: &Tape, meter: &mut WorkMeter) -> mlua::Result<Value> {
    let mut built = Ok(());
    // A large document pauses the collector (every value is kept, so a collection would
    // only walk the growing tables); a small one does not, as restarting the collector
    // asks it for a step at once, which for a record per line would keep it running.
    let collecting = tape.events.len() >= PAUSE_COLLECTOR_EVENTS && lua.gc_is_running();
    if collecting {
        lua.gc_stop();
    }
    // SAFETY: `push_value` pushes exactly one value, and only strings, numbers, booleans,
    // light userdata and tables of them; everything it reads is owned outside this call,
    // so an allocation failing in Lua (which unwinds past it) leaks nothing.
    let value = unsafe {
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
    };
    if collecting {
        lua.gc_restart();
    }
    let value = value?;
    built.map(|()| value)
}

/// Pushes the tape's values onto a Lua stack.
struct Builder<'a, 'l> {
    state: *mut ffi::lua_State,
    input: &'a [u8],
    tape: &'a Tape,
    /// The stack index of the arrays' metatable.
    metatable: std::ffi::c_int,
    meter: &'a mut WorkMeter<'l>,
}

impl Builder<'_, '_> {
    /// Pushes the value starting at event `at`, moving `at` past it.
    ///
    /// # Safety
    /// `state` must have room for two values per level of nesting left.
    unsafe fn push_value(&mut self, at: &mut usize) -> mlua::Result<()> {
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

/// Decodes one document with the tape given (reused by `json.lines`).
fn decode_with(
    lua: &Lua,
    tripwire: &Tripwire,
    function: &str,
    input: &[u8],
    tape: &mut Tape,
    line: Option<usize>,
) -> mlua::Result<Value> {
    let mut meter = WorkMeter::new(lua, tripwire);
    read(function, input, tape, &mut meter, line)?;
    build(lua, input, tape, &mut meter)
}

/// A Lua allocation refused at the memory limit, recorded as that limit: the protected
/// calls re-raise a tripped limit, so `pcall` cannot swallow it.
pub(super) fn limit_on_memory<T>(tripwire: &Tripwire, result: mlua::Result<T>) -> mlua::Result<T> {
    result.map_err(|error| {
        if is_memory_error(&error) {
            tripwire.trip(LimitKind::Memory)
        } else {
            error
        }
    })
}

/// A text argument: a string (a number is taken as its text, as Lua's own functions do).
pub(super) fn text_arg(lua: &Lua, function: BuiltinId, value: Value) -> mlua::Result<LuaString> {
    match value {
        Value::String(text) => Ok(text),
        Value::Integer(_) | Value::Number(_) => match lua.coerce_string(value)? {
            Some(text) => Ok(text),
            None => Err(mlua::Error::RuntimeError(format!(
                "{}: the text must be a string",
                function.name()
            ))),
        },
        other => Err(mlua::Error::RuntimeError(format!(
            "{}: the text must be a string, got {}",
            function.name(),
            if other.is_nil() {
                "nil".to_string()
            } else {
                format!("a {}", other.type_name())
            }
        ))),
    }
}

/// `json.decode(text)`.
pub(super) fn decode(lua: &Lua, tripwire: &Rc<Tripwire>) -> mlua::Result<Function> {
    install_array_metatable(lua)?;
    let tripwire = Rc::clone(tripwire);
    lua.create_function(move |lua, text: Value| {
        let text = text_arg(lua, BuiltinId::JsonDecode, text)?;
        let mut tape = Tape::default();
        let bytes = text.as_bytes();
        let function = BuiltinId::JsonDecode.name();
        let decoded = decode_with(lua, &tripwire, function, &bytes, &mut tape, None);
        limit_on_memory(&tripwire, decoded)
    })
}

/// Records `json.lines` decodes per call into Rust; its iterator, a Lua closure, hands
/// them out one by one, so a record costs no crossing of the Rust/Lua boundary.
const LINES_BATCH: usize = 64;

/// The state of one `json.lines` iteration.
struct LinesState {
    text: LuaString,
    /// Where the next line starts.
    position: usize,
    /// The number of the last line read.
    line: usize,
    tape: Tape,
    tidy: Tidy,
    /// An error met after some records of a batch: raised by the next call, once the
    /// records before it have been handed out.
    failed: Option<mlua::Error>,
}

impl LinesState {
    /// The next line that is not blank: where it starts and ends.
    fn next_line(&mut self, bytes: &[u8]) -> Option<(usize, usize)> {
        while self.position < bytes.len() {
            let start = self.position;
            let end = memchr::memchr(b'\n', &bytes[start..]).map_or(bytes.len(), |i| start + i);
            self.position = end + 1;
            self.line += 1;
            if !bytes[start..end].iter().all(u8::is_ascii_whitespace) {
                return Some((start, end));
            }
        }
        None
    }

    /// Decodes up to [`LINES_BATCH`] records into `buffer[1..n]` in one protected call;
    /// returns `n`, 0 at the end.
    fn refill(&mut self, lua: &Lua, tripwire: &Tripwire, buffer: &Table) -> mlua::Result<usize> {
        if let Some(error) = self.failed.take() {
            return Err(error);
        }
        self.tidy.after_record(lua)?;
        let text = self.text.clone();
        let bytes = text.as_bytes();
        let mut meter = WorkMeter::new(lua, tripwire);
        let mut count = 0usize;
        let mut failure = None;
        // SAFETY: each record pushed is one value of strings, numbers, booleans, light
        // userdata and tables, stored in the buffer (stack index 1); the tape, the text
        // and the state are owned outside this call, and nothing inside it owns memory
        // while a Lua function that may fail runs.
        let filled = unsafe {
            lua.exec_raw::<()>(buffer, |state| {
                ffi::lua_getfield(state, ffi::LUA_REGISTRYINDEX, ARRAY_METATABLE_C.as_ptr());
                let metatable = ffi::lua_gettop(state);
                if ffi::lua_checkstack(state, (2 * MAX_DEPTH + 8) as std::ffi::c_int) == 0 {
                    failure = Some(mlua::Error::RuntimeError(
                        "json: out of Lua stack space".into(),
                    ));
                }
                while failure.is_none() && count < LINES_BATCH {
                    let Some((start, end)) = self.next_line(&bytes) else {
                        break;
                    };
                    let record = &bytes[start..end];
                    let function = BuiltinId::JsonLines.name();
                    let line = Some(self.line);
                    if let Err(e) = read(function, record, &mut self.tape, &mut meter, line) {
                        failure = Some(e);
                        break;
                    }
                    let mut builder = Builder {
                        state,
                        input: record,
                        tape: &self.tape,
                        metatable,
                        meter: &mut meter,
                    };
                    if let Err(e) = builder.push_value(&mut 0) {
                        failure = Some(e);
                        break;
                    }
                    ffi::lua_rawseti(state, 1, count as ffi::lua_Integer + 1);
                    count += 1;
                }
                ffi::lua_settop(state, 0);
            })
        };
        limit_on_memory(tripwire, filled)?;
        match failure {
            Some(error) if count == 0 => limit_on_memory(tripwire, Err(error)),
            Some(error) => {
                self.failed = Some(error);
                Ok(count)
            }
            None => Ok(count),
        }
    }
}

/// `json.lines(text)`: an iterator over the decoded non-blank lines.
pub(super) fn lines(lua: &Lua, tripwire: &Rc<Tripwire>) -> mlua::Result<Function> {
    install_array_metatable(lua)?;
    let tripwire = Rc::clone(tripwire);
    lua.create_function(move |lua, text: Value| {
        let text = text_arg(lua, BuiltinId::JsonLines, text)?;
        let buffer = lua.create_table_with_capacity(LINES_BATCH, 0)?;
        let state = RefCell::new(LinesState {
            tidy: Tidy::new(lua, text.as_bytes().len()),
            text,
            position: 0,
            line: 0,
            tape: Tape::default(),
            failed: None,
        });
        let tripwire = Rc::clone(&tripwire);
        let filled = buffer.clone();
        let refill =
            lua.create_function(move |lua, ()| state.borrow_mut().refill(lua, &tripwire, &filled))?;
        buffered_iterator(lua, refill, buffer)
    })
}

/// An iterator handing out `buffer[1..n]`, then calling `refill` (which fills the
/// buffer and returns `n`, 0 at the end) for more: `json.lines` and `csv.rows` decode a
/// batch per call into Rust, and a record costs no crossing of the boundary.
pub(super) fn buffered_iterator(
    lua: &Lua,
    refill: Function,
    buffer: Table,
) -> mlua::Result<Function> {
    let iterator = per_state(lua, "rlm.buffered_iterator", || {
        BUFFERED_ITERATOR.function(lua)?.call((
            lua.globals().get::<Function>("pcall")?,
            lua.globals().get::<Function>("error")?,
            plain_message(lua)?,
        ))
    })?;
    iterator.call::<Function>((refill, buffer))
}

/// The iterator of [`buffered_iterator`]; a failure of `refill` is raised as a plain
/// string at the loop's line, as a built-in's error is.
static BUFFERED_ITERATOR: InternalChunk = InternalChunk::new(
    "=builtin",
    r#"
        local pcall, error, message = ...
        return function(refill, buffer)
          local n, i = 0, 0
          return function()
            i = i + 1
            if i > n then
              local ok, count = pcall(refill)
              if not ok then
                n, i = 0, 0
                error(message(count))
              end
              n, i = count, 1
              if n == 0 then
                i = 0
                return nil
              end
            end
            return buffer[i]
          end
        end
        "#,
);

/// Keeps an iterator's garbage from piling up: Lua starts a collection when the heap has
/// doubled since the last one, and the text being iterated (often a 100 MB `context`)
/// counts in that heap, so without this each record's short strings would fill Lua's
/// string table by the million (every new string then costs a cache miss) before the
/// collector ran. This collects when the heap has grown by as much as everything but
/// the text (at least [`MIN_GARBAGE`]): the usual doubling, the text left out.
pub(super) struct Tidy {
    text: usize,
    next: usize,
}

/// The least garbage an iterator lets pile up before it collects.
const MIN_GARBAGE: usize = 16 << 20;

impl Tidy {
    pub(super) fn new(lua: &Lua, text: usize) -> Self {
        let mut tidy = Tidy { text, next: 0 };
        tidy.plan(lua.used_memory());
        tidy
    }

    fn plan(&mut self, live: usize) {
        let others = live.saturating_sub(self.text);
        self.next = live.saturating_add(others.max(MIN_GARBAGE));
    }

    /// Collects if enough garbage may have piled up since the last time.
    pub(super) fn after_record(&mut self, lua: &Lua) -> mlua::Result<()> {
        if lua.used_memory() >= self.next && lua.gc_is_running() {
            lua.gc_collect()?;
            self.plan(lua.used_memory());
        }
        Ok(())
    }
}

/// Makes the arrays' shared metatable, once per Lua state.
fn install_array_metatable(lua: &Lua) -> mlua::Result<Table> {
    if let Some(metatable) = lua.named_registry_value::<Option<Table>>(ARRAY_METATABLE)? {
        return Ok(metatable);
    }
    let metatable = lua.create_table()?;
    metatable.raw_set("__name", "json.array")?;
    lua.set_named_registry_value(ARRAY_METATABLE, &metatable)?;
    Ok(metatable)
}

/// `json.array([t])`: `t` (or a new table) marked as an array.
pub(super) fn array(lua: &Lua) -> mlua::Result<Function> {
    let metatable = install_array_metatable(lua)?;
    lua.create_function(move |lua, table: Option<Table>| {
        let table = match table {
            Some(table) => table,
            None => lua.create_table()?,
        };
        match table.metatable() {
            None => table.set_metatable(Some(metatable.clone()))?,
            Some(existing) if existing == metatable => {}
            Some(_) => {
                return Err(mlua::Error::RuntimeError(format!(
                    "{}: the table already has a metatable",
                    BuiltinId::JsonArray.name()
                )));
            }
        }
        Ok(table)
    })
}

/// The value of `json.null`.
pub(crate) fn null() -> Value {
    Value::LightUserData(mlua::LightUserData(std::ptr::null_mut()))
}

fn is_null(value: &Value) -> bool {
    matches!(value, Value::LightUserData(p) if p.0.is_null())
}

/// `json.encode`'s options.
struct EncodeOptions {
    indent: Option<usize>,
    sort_keys: bool,
}

impl EncodeOptions {
    fn from_table(opts: Option<Table>) -> mlua::Result<Self> {
        let function = BuiltinId::JsonEncode.name();
        let Some(opts) = opts else {
            return Ok(EncodeOptions {
                indent: None,
                sort_keys: false,
            });
        };
        let indent = match opts.get::<Value>("indent")? {
            Value::Nil => None,
            Value::Integer(n) if (0..=16).contains(&n) => Some(n as usize),
            other => {
                return Err(mlua::Error::RuntimeError(format!(
                    "{function}: indent must be an integer from 0 to 16, got {}",
                    describe(&other)
                )));
            }
        };
        let sort_keys = match opts.get::<Value>("sort_keys")? {
            Value::Nil => false,
            Value::Boolean(b) => b,
            other => {
                return Err(mlua::Error::RuntimeError(format!(
                    "{function}: sort_keys must be a boolean, got {}",
                    describe(&other)
                )));
            }
        };
        Ok(EncodeOptions { indent, sort_keys })
    }
}

fn describe(value: &Value) -> String {
    match value {
        Value::Integer(i) => i.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => format!("{:?}", s.to_string_lossy()),
        other => format!("a {}", other.type_name()),
    }
}

/// `json.encode(value [, opts])`.
pub(super) fn encode(lua: &Lua, tripwire: &Rc<Tripwire>) -> mlua::Result<Function> {
    let metatable = install_array_metatable(lua)?;
    let tripwire = Rc::clone(tripwire);
    lua.create_function(move |lua, (value, opts): (Value, Option<Table>)| {
        let options = EncodeOptions::from_table(opts)?;
        let mut encoder = Encoder {
            out: Vec::new(),
            options,
            metatable: &metatable,
            visiting: Vec::new(),
            meter: WorkMeter::new(lua, &tripwire),
        };
        encoder.value(&value, &mut "value".to_string())?;
        encoder.meter.hold(encoder.out.capacity());
        encoder.meter.check()?;
        limit_on_memory(&tripwire, lua.create_string(&encoder.out))
    })
}

/// Writes one Lua value as JSON.
struct Encoder<'a> {
    out: Vec<u8>,
    options: EncodeOptions,
    metatable: &'a Table,
    /// The tables being written, outermost first: meeting one again is a cycle.
    visiting: Vec<*const std::ffi::c_void>,
    meter: WorkMeter<'a>,
}

fn encode_error(message: String) -> mlua::Error {
    mlua::Error::RuntimeError(format!("{}: {message}", BuiltinId::JsonEncode.name()))
}

impl Encoder<'_> {
    /// Writes `value`; `path` says where it is (`value.items[3]`) for errors.
    fn value(&mut self, value: &Value, path: &mut String) -> mlua::Result<()> {
        self.meter.hold(self.out.capacity());
        self.meter.spend(VALUE_COST)?;
        match value {
            Value::Nil => self.out.extend_from_slice(b"null"),
            _ if is_null(value) => self.out.extend_from_slice(b"null"),
            Value::Boolean(b) => self
                .out
                .extend_from_slice(if *b { b"true" } else { b"false" }),
            Value::Integer(i) => {
                let _ = write!(Writer(&mut self.out), "{i}");
            }
            Value::Number(n) => self.number(*n, path)?,
            Value::String(s) => self.string(&s.as_bytes(), path)?,
            Value::Table(table) => self.table(table, path)?,
            other => {
                return Err(encode_error(format!(
                    "cannot encode a {} (at {path})",
                    other.type_name()
                )));
            }
        }
        Ok(())
    }

    fn number(&mut self, n: f64, path: &str) -> mlua::Result<()> {
        if !n.is_finite() {
            return Err(encode_error(format!(
                "{n} is not a JSON number (at {path})"
            )));
        }
        serde_json::to_writer(&mut self.out, &n).map_err(|e| encode_error(e.to_string()))
    }

    fn string(&mut self, bytes: &[u8], path: &str) -> mlua::Result<()> {
        let text = std::str::from_utf8(bytes).map_err(|e| {
            encode_error(format!(
                "the string at {path} is not valid UTF-8 (byte {})",
                e.valid_up_to() + 1
            ))
        })?;
        serde_json::to_writer(&mut self.out, text).map_err(|e| encode_error(e.to_string()))
    }

    fn table(&mut self, table: &Table, path: &mut String) -> mlua::Result<()> {
        let pointer = table.to_pointer();
        if self.visiting.contains(&pointer) {
            return Err(encode_error(format!(
                "cycle: the table at {path} contains itself"
            )));
        }
        if self.visiting.len() >= MAX_DEPTH {
            return Err(encode_error(format!(
                "nested deeper than {MAX_DEPTH} levels (at {path})"
            )));
        }
        self.visiting.push(pointer);
        let written = if table.metatable().as_ref() == Some(self.metatable) {
            self.array(table, table.raw_len(), path)
        } else {
            self.table_by_keys(table, path)
        };
        self.visiting.pop();
        written
    }

    /// A table without the array mark: an array if its keys are 1..n, an object if they
    /// are strings, `{}` if it has none.
    fn table_by_keys(&mut self, table: &Table, path: &mut String) -> mlua::Result<()> {
        let mut entries: Vec<(LuaString, Value)> = Vec::new();
        let mut integers = 0usize;
        for pair in table.pairs::<Value, Value>() {
            let (key, value) = pair?;
            match key {
                Value::String(key) if integers == 0 => entries.push((key, value)),
                Value::Integer(i) if entries.is_empty() && i >= 1 => integers += 1,
                other => {
                    return Err(encode_error(format!(
                        "the table at {path} has key {} among {} keys: an object's keys must all be strings, an array's 1..n",
                        describe(&other),
                        if integers > 0 { "integer" } else { "string" }
                    )));
                }
            }
        }
        if integers > 0 {
            let length = table.raw_len();
            if length != integers {
                return Err(encode_error(format!(
                    "the table at {path} is a sparse array (keys are not 1..n); fill the holes with json.null"
                )));
            }
            return self.array(table, length, path);
        }
        if self.options.sort_keys {
            entries.sort_by_cached_key(|(key, _)| key.as_bytes().to_vec());
        }
        self.out.push(b'{');
        let depth = self.visiting.len();
        for (i, (key, value)) in entries.iter().enumerate() {
            if i > 0 {
                self.out.push(b',');
            }
            self.newline(depth);
            let bytes = key.as_bytes();
            self.string(&bytes, path)?;
            self.out.push(b':');
            if self.options.indent.is_some() {
                self.out.push(b' ');
            }
            let length = path.len();
            push_key(path, &bytes);
            self.value(value, path)?;
            path.truncate(length);
        }
        if !entries.is_empty() {
            self.newline(depth - 1);
        }
        self.out.push(b'}');
        Ok(())
    }

    fn array(&mut self, table: &Table, length: usize, path: &mut String) -> mlua::Result<()> {
        self.out.push(b'[');
        let depth = self.visiting.len();
        for i in 1..=length {
            if i > 1 {
                self.out.push(b',');
            }
            self.newline(depth);
            let value: Value = table.raw_get(i)?;
            let before = path.len();
            let _ = write!(path, "[{i}]");
            self.value(&value, path)?;
            path.truncate(before);
        }
        if length > 0 {
            self.newline(depth - 1);
        }
        self.out.push(b']');
        Ok(())
    }

    fn newline(&mut self, depth: usize) {
        if let Some(indent) = self.options.indent {
            self.out.push(b'\n');
            self.out.extend(std::iter::repeat_n(b' ', indent * depth));
        }
    }
}

/// `path.key`, or `path["odd key"]` when the key is not a plain name.
fn push_key(path: &mut String, key: &[u8]) {
    let plain = !key.is_empty()
        && !key[0].is_ascii_digit()
        && key.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'_');
    if plain {
        path.push('.');
        path.push_str(&String::from_utf8_lossy(key));
    } else {
        let _ = write!(path, "[{:?}]", String::from_utf8_lossy(key));
    }
}

/// `fmt::Write` into a byte buffer.
struct Writer<'a>(&'a mut Vec<u8>);

impl std::fmt::Write for Writer<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
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

    #[test]
    fn paths_name_keys_plainly_when_they_can() {
        let mut path = "value".to_string();
        push_key(&mut path, b"items");
        push_key(&mut path, b"two words");
        assert_eq!(path, "value.items[\"two words\"]");
    }
}
