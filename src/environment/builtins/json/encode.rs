//! `json.encode`: its options, then the mapping's text writer.

use std::cell::RefCell;
use std::rc::Rc;

use mlua::{Function, Lua, Table, Value};

use super::super::options::check_known as known_options;
use super::super::reading::{describe_value, limit_on_memory};
use crate::conventions::builtins::BuiltinId;
use crate::environment::limits::Tripwire;
use crate::environment::lua_json::{
    KeyBuffers, MAX_INDENT, TextOptions, array_metatable, encode_text,
};

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
    // Keys are always sorted (the mapping's module docs say why); the option stays
    // accepted, as Python's `json.dumps` has it, so that code written for either runs.
    match opts.get::<Value>("sort_keys")? {
        Value::Nil | Value::Boolean(_) => {}
        other => {
            return Err(mlua::Error::RuntimeError(format!(
                "{function}: sort_keys must be a boolean, got {}",
                describe_value(&other)
            )));
        }
    }
    Ok(TextOptions { indent })
}

/// The largest text buffer kept for the next call: one huge document must not hold its
/// memory outside Lua for good.
const KEPT_TEXT_BYTES: usize = 1 << 16;

/// `json.encode(value [, opts])`.
pub(in crate::environment::builtins) fn encode(
    lua: &Lua,
    tripwire: &Rc<Tripwire>,
) -> mlua::Result<Function> {
    let arrays = array_metatable(lua)?;
    let tripwire = Rc::clone(tripwire);
    let prefix = format!("{}: ", BuiltinId::JsonEncode.name());
    // Kept from one call to the next: encoding record after record then grows no buffer.
    let kept_keys = RefCell::new(KeyBuffers::default());
    let kept_text = RefCell::new(Vec::new());
    lua.create_function(move |lua, (value, opts): (Value, Option<Table>)| {
        let options = options(opts)?;
        let mut buffers = kept_keys.take();
        let text = encode_text(
            lua,
            &tripwire,
            &arrays,
            &value,
            options,
            &mut buffers,
            kept_text.take(),
        );
        kept_keys.replace(buffers);
        let text = text.map_err(|error| error.into_lua(&prefix))?;
        let encoded = limit_on_memory(&tripwire, lua.create_string(&text));
        if text.capacity() <= KEPT_TEXT_BYTES {
            kept_text.replace(text);
        }
        encoded
    })
}
