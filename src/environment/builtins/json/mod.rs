//! The `json` built-in: `json.decode`, `json.encode`, `json.lines`, `json.array` and the
//! `json.null` sentinel, on serde_json: decoding (`decode.rs`), `json.lines` (`lines.rs`)
//! and encoding (`encode.rs`).
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

mod decode;
mod encode;
mod lines;

use std::rc::Rc;

use mlua::{Function, Lua, Table, Value};

use super::reading::{limit_on_memory, text_arg};
use crate::conventions::builtins::BuiltinId;
use crate::environment::limits::Tripwire;
use decode::{Tape, decode_with};

pub(in crate::environment::builtins) use encode::encode;
pub(in crate::environment::builtins) use lines::lines;

/// The deepest nesting of arrays and objects decoded or encoded: deeper is an error
/// (serde_json's own limit, 128, is never reached).
pub(crate) const MAX_DEPTH: usize = 100;
/// Where the arrays' shared metatable is kept in the Lua registry.
const ARRAY_METATABLE: &str = "rlm.json.array";
/// The same, for the C API.
const ARRAY_METATABLE_C: &std::ffi::CStr = c"rlm.json.array";

/// `json.decode(text)`.
pub(super) fn decode(lua: &Lua, tripwire: &Rc<Tripwire>) -> mlua::Result<Function> {
    install_array_metatable(lua)?;
    let tripwire = Rc::clone(tripwire);
    lua.create_function(move |lua, text: Value| {
        let text = text_arg(lua, BuiltinId::JsonDecode, text)?;
        let mut tape = Tape::default();
        let bytes = text.as_bytes();
        let function = BuiltinId::JsonDecode.name();
        let bytes = without_bom(&bytes);
        let decoded = decode_with(lua, &tripwire, function, bytes, &mut tape, None);
        limit_on_memory(&tripwire, decoded)
    })
}

/// A UTF-8 byte order mark, which RFC 8259 (section 8.1) lets a parser ignore: files
/// saved by some editors start with one.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// `text` without the byte order mark it may start with.
fn without_bom(text: &[u8]) -> &[u8] {
    text.strip_prefix(BOM).unwrap_or(text)
}

/// Makes the arrays' shared metatable, once per Lua state. It is protected
/// (`getmetatable` gives its name): arrays are given it from Rust, past the sandbox's
/// `setmetatable`, so code that could change it could give every array a finalizer the
/// sandbox never saw.
pub(super) fn install_array_metatable(lua: &Lua) -> mlua::Result<Table> {
    if let Some(metatable) = lua.named_registry_value::<Option<Table>>(ARRAY_METATABLE)? {
        return Ok(metatable);
    }
    let metatable = lua.create_table()?;
    metatable.raw_set("__name", "json.array")?;
    metatable.raw_set("__metatable", "json.array")?;
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

pub(super) fn is_null(value: &Value) -> bool {
    matches!(value, Value::LightUserData(p) if p.0.is_null())
}
