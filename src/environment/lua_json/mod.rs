//! The one mapping between Lua values and JSON, for every surface: the `json` built-in
//! (`json.encode`, `json.decode`, `json.lines`), [`Environment::call_function`]'s
//! arguments and results (so tool calls, MCP `tools/call` and the JSON API), host
//! functions' arguments and results, and [`Environment::get_global`] /
//! [`Environment::set_global`].
//!
//! Lua → JSON is one walk over the value (`walk.rs`), which applies the rules below and
//! feeds either the text writer of `json.encode` (`text.rs`) or a `serde_json::Value`
//! builder (`value.rs`). JSON → Lua is one builder from a flat tape of events
//! (`tape.rs`), which serde_json records from JSON text or from a `serde_json::Value`
//! alike.
//!
//! # The rules
//!
//! | Lua | JSON |
//! |---|---|
//! | `nil`, `json.null` | `null` (which becomes `json.null`, a light userdata as in lua-cjson) |
//! | `true`, `false` | `true`, `false` |
//! | an integer | an integer, all 64 bits of it (`2^53 + 1`, `math.maxinteger`) |
//! | a float | a number written back as a float (`2.0`), the shortest text that reads back the same; NaN and infinities are refused |
//! | a string | a string; one that is not UTF-8 is refused, naming its first bad byte |
//! | a table marked with `json.array` | an array (its keys must be `1..n`; every array JSON makes is marked, so `[]` stays `[]`) |
//! | a table with keys exactly `1..n` | an array |
//! | a table with string keys only | an object |
//! | the empty table, unmarked | `{}` |
//! | any other table (mixed, sparse, key `0`, `1.5` or `true`) | refused, naming the key; fill holes with `json.null` |
//! | a function, userdata, a thread | refused |
//!
//! An object's keys are written in the byte order of their text (`"B"` before `"a"`,
//! `"k10"` before `"k2"`), by every surface, whatever order the table holds them in:
//! Lua's order changes from one process to the next (its string hashes are seeded per
//! state), and an answer, a prompt built with `json.encode` (so the call cache's key),
//! a replay and an eval's results must come out the same every time. Only string keys
//! make an object (a sparse array is refused, not written with keys `"1"`, `"3"`), so no
//! number's order has to be chosen.
//!
//! From JSON, an integer past 64 bits becomes a float, as Lua's own `tonumber` does, and
//! an object's keys are strings. Nesting deeper than 100 arrays and objects is
//! refused both ways; so is a table that contains itself (a cycle), while a table met
//! twice elsewhere is written twice. What is made outside Lua on the way (the text, the
//! `serde_json::Value`, the tape) counts against the memory limit as it grows.
//!
//! At the edge of a call, a value stands for an argument or a result, where Lua has "no
//! value": a `null` argument, host function result or global is `nil` (an omitted
//! optional parameter, `Option::None`), and a call's results are `null` for none, the
//! value for one and an array for several. Inside a value, `null` is `json.null`, so an
//! array keeps its positions and an object its keys.
//!
//! A refusal names where the value is: the surface's name for it (`value` in
//! `json.encode`, `result`, `result 2`, `argument 1`, a global's name), then `.key`,
//! `["odd key"]` and `[3]` (positions from 1, as Lua counts) down to it.
//!
//! ```
//! use serde_json::json;
//! use rlm_registry::{Registry, environment::{Environment, Limits}};
//!
//! let env = Environment::new(Registry::baked().clone(), Limits::default())?;
//! env.execute("function probe(x) return {x = x, missing = json.null, empty = {}, list = json.array()} end")?;
//! let result = env.call_function("probe", vec![json!([1, null, 2.0])])?;
//! assert_eq!(result, json!({"x": [1, null, 2.0], "missing": null, "empty": {}, "list": []}));
//! let run = env.execute("print(json.encode(probe(json.decode('[1, null, 2.0]'))))")?;
//! assert_eq!(run.output, "{\"empty\":{},\"list\":[],\"missing\":null,\"x\":[1,null,2.0]}\n");
//!
//! env.execute("function cyclic() local t = {} t.self = t return {items = {t}} end")?;
//! let error = env.call_function("cyclic", vec![]).unwrap_err();
//! assert_eq!(error.message(), "cycle: the table at result.items[1].self contains itself");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! [`Environment::call_function`]: super::Environment::call_function
//! [`Environment::get_global`]: super::Environment::get_global
//! [`Environment::set_global`]: super::Environment::set_global

mod tape;
mod text;
mod value;
mod walk;

use mlua::{Lua, MultiValue, Table, Value};
use serde_json::Value as Json;
use serde_json::ser::Formatter;

use crate::engines::limits::Guard;
use crate::engines::meter::WorkMeter;
pub(crate) use tape::{Builder, Tape, decode_text, read_text};
use text::TextSink;
use value::ValueSink;
pub(crate) use walk::KeyBuffers;
use walk::Walk;
pub use walk::push_key;

/// The deepest nesting of arrays and objects, both ways: deeper is refused (serde_json's
/// own limit on text, 128, is never reached). A host converting its own values to JSON
/// refuses deeper ones with the same words.
pub const MAX_DEPTH: usize = 100;
/// Where the arrays' shared metatable is kept in the Lua registry.
const ARRAY_METATABLE: &str = "rlm.json.array";
/// The same, for the C API.
pub(crate) const ARRAY_METATABLE_C: &std::ffi::CStr = c"rlm.json.array";

/// Why a value could not cross between Lua and JSON.
#[derive(Debug)]
pub(crate) enum CrossError {
    /// JSON cannot hold it, or Lua cannot (a function, a cycle, NaN, too deep).
    Refused(Refusal),
    /// A Lua error or a limit met on the way.
    Lua(mlua::Error),
}

/// A value that cannot cross: the message every surface shows by default, and what was
/// met, for a surface that words its own advice (`FINAL` tells the model what to pass).
#[derive(Debug)]
pub(crate) struct Refusal {
    /// What, then where: `cannot encode a function (at value.f)`.
    pub(crate) message: String,
    pub(crate) kind: RefusalKind,
}

/// What a [`Refusal`] met.
#[derive(Debug)]
pub(crate) enum RefusalKind {
    /// A value JSON has no form for (a function, a thread, a userdata): its Lua type
    /// and where it is.
    NoJsonForm {
        type_name: &'static str,
        path: String,
    },
    /// A table met again inside itself, where it is met again.
    Cycle { path: String },
    /// Anything else (keys, NaN, depth, bytes that are not UTF-8): the message says it.
    Other,
}

impl Refusal {
    /// A refusal whose message says it all.
    pub(crate) fn other(message: String) -> Refusal {
        Refusal {
            message,
            kind: RefusalKind::Other,
        }
    }
}

impl From<mlua::Error> for CrossError {
    fn from(error: mlua::Error) -> Self {
        CrossError::Lua(error)
    }
}

impl CrossError {
    /// As a Lua error: a refusal's message after the surface's `prefix` (`json.encode: `).
    pub(crate) fn into_lua(self, prefix: &str) -> mlua::Error {
        match self {
            CrossError::Refused(refusal) => {
                mlua::Error::RuntimeError(format!("{prefix}{}", refusal.message))
            }
            CrossError::Lua(error) => error,
        }
    }
}

/// How `json.encode` writes its text.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct TextOptions {
    /// Spaces per level, each value on its own line; `None` for compact text.
    pub(crate) indent: Option<usize>,
}

/// The deepest indent `TextOptions::indent` may ask for.
pub(crate) const MAX_INDENT: usize = 16;

/// `value` as JSON text, written into `out` (emptied first); a refusal's path starts at
/// `value`. `arrays` is the arrays' metatable ([`array_metatable`]), fetched once by the
/// caller. `out` and `buffers` are the caller's to keep from one call to the next, so
/// that encoding value after value grows no buffer; `buffers` come back empty.
pub(crate) fn encode_text(
    lua: &Lua,
    guard: &Guard,
    arrays: &Table,
    value: &Value,
    options: TextOptions,
    buffers: &mut KeyBuffers,
    mut out: Vec<u8>,
) -> Result<Vec<u8>, CrossError> {
    let meter = WorkMeter::new(lua, guard);
    let taken = std::mem::take(buffers);
    out.clear();
    match options.indent {
        None => write_text(
            Walk::new(lua, arrays, TextSink::compact(out), meter, taken),
            value,
            buffers,
        ),
        Some(indent) => write_text(
            Walk::new(lua, arrays, TextSink::pretty(indent, out), meter, taken),
            value,
            buffers,
        ),
    }
}

/// The text `walk` writes of `value`, whatever its layout; the walk's key buffers go
/// back to `buffers`.
fn write_text<F: Formatter>(
    mut walk: Walk<TextSink<F>>,
    value: &Value,
    buffers: &mut KeyBuffers,
) -> Result<Vec<u8>, CrossError> {
    let walked = walk.root(value, "value");
    *buffers = walk.take_buffers();
    walked?;
    Ok(walk.finish()?.into_bytes())
}

/// `value` as a `serde_json::Value`; a refusal's path starts at `root`.
pub(crate) fn to_json(
    lua: &Lua,
    guard: &Guard,
    value: &Value,
    root: &str,
) -> Result<Json, CrossError> {
    let values = MultiValue::from_iter([value.clone()]);
    let mut converted = values_to_json(lua, guard, &values, |_| root.to_string())?;
    Ok(converted.pop().unwrap_or(Json::Null))
}

/// A function's results as one JSON value: none → `null`, one → it, several → an array.
/// A refusal's path starts at `result` (`result 2` for the second of several).
pub(crate) fn results_to_json(
    lua: &Lua,
    guard: &Guard,
    results: &MultiValue,
) -> Result<Json, CrossError> {
    let mut values = values_to_json(lua, guard, results, |i| match i {
        0 => "result".to_string(),
        _ => format!("result {}", i + 1),
    })?;
    Ok(match values.len() {
        0 => Json::Null,
        1 => values.pop().unwrap_or(Json::Null),
        _ => Json::Array(values),
    })
}

/// A call's arguments as JSON values, one each; a refusal's path starts at `argument 1`.
pub(crate) fn arguments_to_json(
    lua: &Lua,
    guard: &Guard,
    arguments: &MultiValue,
) -> Result<Vec<Json>, CrossError> {
    values_to_json(lua, guard, arguments, |i| format!("argument {}", i + 1))
}

/// Each of `values` as JSON, in one walk (what the earlier ones made counts while the
/// later ones are made); `root(i)` names the `i`th (from 0) in a refusal.
fn values_to_json(
    lua: &Lua,
    guard: &Guard,
    values: &MultiValue,
    root: impl Fn(usize) -> String,
) -> Result<Vec<Json>, CrossError> {
    let arrays = array_metatable(lua)?;
    let mut walk = Walk::new(
        lua,
        &arrays,
        ValueSink::default(),
        WorkMeter::new(lua, guard),
        KeyBuffers::default(),
    );
    let mut converted = Vec::with_capacity(values.len());
    for (i, value) in values.iter().enumerate() {
        walk.root(value, &root(i))?;
        converted.push(walk.sink_mut().take());
    }
    walk.finish()?;
    Ok(converted)
}

/// The place a JSON Pointer (`/items/0/name`, as JSON Schema validators report them)
/// points to in `value`, named as a refusal names it: `root.items[1].name`. A step
/// through an array is a position from 1; a step the value does not have is named as a
/// key.
pub(crate) fn lua_path(root: &str, value: &Json, pointer: &str) -> String {
    let mut path = root.to_string();
    let mut at = Some(value);
    for step in pointer.split('/').skip(1) {
        let step = step.replace("~1", "/").replace("~0", "~");
        match (at, step.parse::<usize>()) {
            (Some(Json::Array(items)), Ok(index)) => {
                path.push_str(&format!("[{}]", index.saturating_add(1)));
                at = items.get(index);
            }
            _ => {
                walk::push_key(&mut path, step.as_bytes());
                at = at.and_then(|value| value.get(&step));
            }
        }
    }
    path
}

/// A JSON value standing for an argument, a result or a global: `null` is `nil` (no
/// value), anything else as [`tape::from_json`] makes it; a refusal's path starts at `root`.
pub(crate) fn to_lua(
    lua: &Lua,
    guard: &Guard,
    value: &Json,
    root: &str,
) -> Result<Value, CrossError> {
    if value.is_null() {
        return Ok(Value::Nil);
    }
    tape::from_json(lua, guard, value, root)
}

/// A call's JSON arguments as Lua values ([`to_lua`] each: `null` is `nil`).
pub(crate) fn arguments_to_lua(
    lua: &Lua,
    guard: &Guard,
    arguments: &[Json],
) -> Result<MultiValue, CrossError> {
    let mut values = MultiValue::with_capacity(arguments.len());
    for (i, argument) in arguments.iter().enumerate() {
        values.push_back(to_lua(
            lua,
            guard,
            argument,
            &format!("argument {}", i + 1),
        )?);
    }
    Ok(values)
}

/// The arrays' shared metatable, made once per Lua state. It is protected
/// (`getmetatable` gives its name): arrays are given it from Rust, past the sandbox's
/// `setmetatable`, so code that could change it could give every array a finalizer the
/// sandbox never saw.
pub(crate) fn array_metatable(lua: &Lua) -> mlua::Result<Table> {
    if let Some(metatable) = lua.named_registry_value::<Option<Table>>(ARRAY_METATABLE)? {
        return Ok(metatable);
    }
    let metatable = lua.create_table()?;
    metatable.raw_set("__name", "json.array")?;
    metatable.raw_set("__metatable", "json.array")?;
    lua.set_named_registry_value(ARRAY_METATABLE, &metatable)?;
    Ok(metatable)
}

/// The value of `json.null`: a light userdata holding NULL, as in lua-cjson.
pub(crate) fn null() -> Value {
    Value::LightUserData(mlua::LightUserData(std::ptr::null_mut()))
}

/// Whether `value` is `json.null`.
pub(crate) fn is_null(value: &Value) -> bool {
    matches!(value, Value::LightUserData(p) if p.0.is_null())
}
