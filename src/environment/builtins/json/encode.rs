//! `json.encode`: its options, then the mapping's text writer.

use std::rc::Rc;

use mlua::{Function, Lua, Table, Value};

use super::super::options::check_known as known_options;
use super::super::reading::{describe_value, limit_on_memory};
use crate::conventions::builtins::BuiltinId;
use crate::environment::limits::Tripwire;
use crate::environment::lua_json::{MAX_INDENT, TextOptions, array_metatable, encode_text};

/// `json.encode`'s options.
fn options(opts: Option<Table>) -> mlua::Result<TextOptions> {
    let function = BuiltinId::JsonEncode.name();
    let Some(opts) = opts else {
        return Ok(TextOptions::default());
    };
    known_options(BuiltinId::JsonEncode, &opts, &["indent", "sort_keys"])?;
    let most = MAX_INDENT as i64;
    let indent = match opts.get::<Value>("indent")? {
        Value::Nil => None,
        Value::Integer(n) if (0..=most).contains(&n) => Some(n as usize),
        // `2.0` is an integer to Lua's own functions (`string.rep("x", 2.0)`).
        Value::Number(n) if n.fract() == 0.0 && (0.0..=most as f64).contains(&n) => {
            Some(n as usize)
        }
        other => {
            return Err(mlua::Error::RuntimeError(format!(
                "{function}: indent must be an integer from 0 to {MAX_INDENT}, got {}",
                describe_value(&other)
            )));
        }
    };
    let sort_keys = match opts.get::<Value>("sort_keys")? {
        Value::Nil => false,
        Value::Boolean(b) => b,
        other => {
            return Err(mlua::Error::RuntimeError(format!(
                "{function}: sort_keys must be a boolean, got {}",
                describe_value(&other)
            )));
        }
    };
    Ok(TextOptions { indent, sort_keys })
}

/// `json.encode(value [, opts])`.
pub(in crate::environment::builtins) fn encode(
    lua: &Lua,
    tripwire: &Rc<Tripwire>,
) -> mlua::Result<Function> {
    let arrays = array_metatable(lua)?;
    let tripwire = Rc::clone(tripwire);
    let prefix = format!("{}: ", BuiltinId::JsonEncode.name());
    lua.create_function(move |lua, (value, opts): (Value, Option<Table>)| {
        let options = options(opts)?;
        let text = encode_text(lua, &tripwire, &arrays, &value, options)
            .map_err(|error| error.into_lua(&prefix))?;
        limit_on_memory(&tripwire, lua.create_string(&text))
    })
}
