//! `json.encode`: one Lua value as JSON text, with its path in every error.

use std::fmt::Write as _;
use std::rc::Rc;

use mlua::{Function, Lua, Table, Value, ffi};

use super::super::reading::{describe_value, known_options, limit_on_memory};
use super::{MAX_DEPTH, install_array_metatable, is_null};
use crate::conventions::builtins::BuiltinId;
use crate::engines::meter::{VALUE_COST, WorkMeter};
use crate::environment::errors::{quoted, shown};
use crate::environment::limits::Tripwire;

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
        known_options(BuiltinId::JsonEncode, &opts, &["indent", "sort_keys"])?;
        let indent = match opts.get::<Value>("indent")? {
            Value::Nil => None,
            Value::Integer(n) if (0..=16).contains(&n) => Some(n as usize),
            // `2.0` is an integer to Lua's own functions (`string.rep("x", 2.0)`).
            Value::Number(n) if n.fract() == 0.0 && (0.0..=16.0).contains(&n) => Some(n as usize),
            other => {
                return Err(mlua::Error::RuntimeError(format!(
                    "{function}: indent must be an integer from 0 to 16, got {}",
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
        Ok(EncodeOptions { indent, sort_keys })
    }
}

/// The end of every error about a table's keys.
const KEYS_RULE: &str = "an object's keys must all be strings, an array's 1..n";

/// `json.encode(value [, opts])`.
pub(in crate::environment::builtins) fn encode(
    lua: &Lua,
    tripwire: &Rc<Tripwire>,
) -> mlua::Result<Function> {
    let metatable = install_array_metatable(lua)?;
    let tripwire = Rc::clone(tripwire);
    lua.create_function(move |lua, (value, opts): (Value, Option<Table>)| {
        let options = EncodeOptions::from_table(opts)?;
        let mut encoder = Encoder {
            lua,
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
    lua: &'a Lua,
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
        // Escaped, a byte takes up to six (`\u001f`).
        let more = text.len().saturating_mul(6).saturating_add(2);
        self.meter
            .check_growth(self.out.len(), self.out.capacity(), more)?;
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
            self.marked_array(table, path)
        } else {
            self.table_by_keys(table, path)
        };
        self.visiting.pop();
        written
    }

    /// A table without the array mark: an array if its keys are 1..n, an object if they
    /// are strings, `{}` if it has none.
    fn table_by_keys(&mut self, table: &Table, path: &mut String) -> mlua::Result<()> {
        // An object is written as its keys are met (sorted, only their bytes are kept):
        // holding every key and value at once would take a handle each, and mlua has
        // room for about a million.
        let sort = self.options.sort_keys;
        let mut sorted: Vec<Vec<u8>> = Vec::new();
        let (mut strings, mut integers, mut largest) = (0usize, 0usize, 0usize);
        for pair in table.pairs::<Value, Value>() {
            let (key, value) = pair?;
            match key {
                Value::String(key) if integers == 0 => {
                    if sort {
                        sorted.push(key.as_bytes().to_vec());
                    } else {
                        self.entry(strings, &key.as_bytes(), &value, path)?;
                    }
                    strings += 1;
                }
                Value::Integer(i) if strings == 0 && i >= 1 => {
                    integers += 1;
                    largest = largest.max(usize::try_from(i).unwrap_or(usize::MAX));
                }
                other => {
                    let among = if integers > 0 {
                        " among integer keys"
                    } else if strings == 0 {
                        ""
                    } else {
                        " among string keys"
                    };
                    return Err(encode_error(format!(
                        "the table at {path} has key {}{among}: {KEYS_RULE}",
                        describe_value(&other),
                    )));
                }
            }
        }
        if integers > 0 {
            // Keys 1..n, n of them: `#t` could not tell, as a border of a table with holes
            // can be any of them.
            if largest != integers {
                return Err(encode_error(format!(
                    "the table at {path} is a sparse array (keys are not 1..n); fill the holes with json.null"
                )));
            }
            return self.array(table, integers, path);
        }
        sorted.sort_unstable();
        for (i, key) in sorted.iter().enumerate() {
            let value: Value = table.raw_get(self.lua.create_string(key)?)?;
            self.entry(i, key, &value, path)?;
        }
        if strings == 0 {
            self.out.push(b'{');
        } else {
            self.newline(self.visiting.len() - 1);
        }
        self.out.push(b'}');
        Ok(())
    }

    /// Writes the `i`th (from 0) entry of an object, opening the object at the first.
    fn entry(
        &mut self,
        i: usize,
        key: &[u8],
        value: &Value,
        path: &mut String,
    ) -> mlua::Result<()> {
        self.out.push(if i == 0 { b'{' } else { b',' });
        self.newline(self.visiting.len());
        self.string(key, path)?;
        self.out.push(b':');
        if self.options.indent.is_some() {
            self.out.push(b' ');
        }
        let length = path.len();
        push_key(path, key);
        self.value(value, path)?;
        path.truncate(length);
        Ok(())
    }

    /// A table with the array mark: its keys must be 1..n, as an unmarked array's, so
    /// that no value is left out (the length operator alone would stop at a hole).
    fn marked_array(&mut self, table: &Table, path: &mut String) -> mlua::Result<()> {
        if let Some(length) = sequence_length(self.lua, table)? {
            return self.array(table, length, path);
        }
        // Not 1..n: the slower walk below names the key at fault.
        let (mut count, mut last) = (0usize, 0i64);
        for pair in table.pairs::<Value, Value>() {
            match pair?.0 {
                Value::Integer(i) if i >= 1 => {
                    count += 1;
                    last = last.max(i);
                }
                other => {
                    return Err(encode_error(format!(
                        "the array at {path} has key {}: an array's keys must be 1..n",
                        describe_value(&other)
                    )));
                }
            }
        }
        if usize::try_from(last).ok() != Some(count) {
            return Err(encode_error(format!(
                "the array at {path} is sparse (keys are not 1..n); fill the holes with json.null"
            )));
        }
        self.array(table, count, path)
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

/// The length of `table` if its keys are exactly 1..n, read with the C API: mlua's
/// `pairs` would make a value of every element, nearly doubling an encode's time.
fn sequence_length(lua: &Lua, table: &Table) -> mlua::Result<Option<usize>> {
    let mut length = None;
    // SAFETY: walks the table (stack index 1) with `lua_next`, which allocates nothing
    // and cannot fail on a table left unchanged, and leaves the stack as it found it.
    unsafe {
        lua.exec_raw::<()>(table, |state| {
            let (mut count, mut last) = (0usize, 0usize);
            ffi::lua_pushnil(state);
            while ffi::lua_next(state, 1) != 0 {
                ffi::lua_pop(state, 1);
                let position = (ffi::lua_isinteger(state, -1) != 0)
                    .then(|| usize::try_from(ffi::lua_tointeger(state, -1)).unwrap_or(0));
                match position {
                    Some(i) if i >= 1 => {
                        count += 1;
                        last = last.max(i);
                    }
                    _ => {
                        ffi::lua_pop(state, 1);
                        return;
                    }
                }
            }
            if count == last {
                length = Some(count);
            }
        })?;
    }
    Ok(length)
}

/// `path.key`, or `path["odd key"]` when the key is not a plain name.
fn push_key(path: &mut String, key: &[u8]) {
    let plain = !key.is_empty()
        && !key[0].is_ascii_digit()
        && key.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'_');
    if plain {
        path.push('.');
        path.push_str(&shown(key));
    } else {
        let _ = write!(path, "[{}]", quoted(key));
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

    #[test]
    fn paths_name_keys_plainly_when_they_can() {
        let mut path = "value".to_string();
        push_key(&mut path, b"items");
        push_key(&mut path, b"two words");
        assert_eq!(path, "value.items[\"two words\"]");
    }
}
