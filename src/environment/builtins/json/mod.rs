//! The `json` built-in: `json.decode`, `json.encode`, `json.lines`, `json.array` and the
//! `json.null` sentinel, installed over the one Lua ↔ JSON mapping,
//! [`environment::lua_json`](crate::environment::lua_json), whose rules they follow:
//! this module only reads their arguments and options (`encode.rs`) and iterates
//! JSON lines (`lines.rs`).
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

mod encode;
mod lines;

use std::rc::Rc;

use mlua::{Function, Lua, Table, Value};

use super::reading::{limit_on_memory, text_arg};
use crate::conventions::builtins::BuiltinId;
use crate::environment::limits::Tripwire;
use crate::environment::lua_json::{array_metatable, decode_text};

pub(in crate::environment::builtins) use crate::environment::lua_json::null;
pub(in crate::environment::builtins) use encode::encode;
pub(in crate::environment::builtins) use lines::lines;

/// `json.decode(text)`.
pub(super) fn decode(lua: &Lua, tripwire: &Rc<Tripwire>) -> mlua::Result<Function> {
    array_metatable(lua)?;
    let tripwire = Rc::clone(tripwire);
    lua.create_function(move |lua, text: Value| {
        let text = text_arg(lua, BuiltinId::JsonDecode, text)?;
        let bytes = text.as_bytes();
        let function = BuiltinId::JsonDecode.name();
        let decoded = decode_text(lua, &tripwire, function, without_bom(&bytes));
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

/// `json.array([t])`: `t` (or a new table) marked as an array.
pub(super) fn array(lua: &Lua) -> mlua::Result<Function> {
    let metatable = array_metatable(lua)?;
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
