//! Lua → JSON: the one walk over a Lua value. It decides what each value is in JSON and
//! refuses what JSON cannot hold (the rules in the [module docs](super)), and hands what
//! it decided to a [`Sink`]: the text writer of `json.encode` or a `serde_json::Value`
//! builder. Every refusal names the path to the value.

use std::fmt::Write as _;

use mlua::{Lua, Table, Value, ffi};

use super::{CrossError, MAX_DEPTH, Refusal, RefusalKind, is_null};
use crate::engines::meter::{VALUE_COST, WorkMeter};
use crate::environment::errors::{describe_value, quoted, shown};

/// What receives the walk's JSON, in document order. Arrays and objects are opened and
/// closed around their values; each value of an array is announced by
/// [`Sink::array_item`], each of an object by [`Sink::object_key`], and followed by
/// [`Sink::end_item`].
pub(super) trait Sink {
    fn null(&mut self);
    fn boolean(&mut self, b: bool);
    fn integer(&mut self, i: i64);
    /// A finite float.
    fn float(&mut self, f: f64);
    fn string(&mut self, s: &str);
    /// An array of `len` values.
    fn begin_array(&mut self, len: usize);
    fn array_item(&mut self, first: bool);
    fn end_array(&mut self);
    fn begin_object(&mut self);
    fn object_key(&mut self, key: &str, first: bool);
    fn end_object(&mut self);
    fn end_item(&mut self) {}
    /// Bytes the sink holds outside Lua, counted with Lua's memory against the limit.
    fn held(&self) -> usize;
    /// Checks the limits before the sink takes a string of `len` bytes, when it is long
    /// enough for the sink to outgrow the limit before the next periodic check.
    fn before_string(&self, meter: &WorkMeter, len: usize) -> mlua::Result<()>;
}

/// The end of every refusal about a table's keys.
const KEYS_RULE: &str = "an object's keys must all be strings, an array's 1..n";

fn refused(message: String) -> CrossError {
    CrossError::Refused(Refusal::other(message))
}

/// One walk: the sink it feeds and what it keeps on the way.
pub(super) struct Walk<'a, S> {
    lua: &'a Lua,
    sink: S,
    /// The arrays' metatable ([`super::array_metatable`]).
    arrays: &'a Table,
    sort_keys: bool,
    /// The tables being walked, outermost first: meeting one again is a cycle.
    visiting: Vec<*const std::ffi::c_void>,
    meter: WorkMeter<'a>,
}

impl<'a, S: Sink> Walk<'a, S> {
    pub(super) fn new(
        lua: &'a Lua,
        arrays: &'a Table,
        sink: S,
        sort_keys: bool,
        meter: WorkMeter<'a>,
    ) -> Self {
        Walk {
            lua,
            sink,
            arrays,
            sort_keys,
            visiting: Vec::new(),
            meter,
        }
    }

    /// Walks one whole value, named `root` in a refusal.
    pub(super) fn root(&mut self, value: &Value, root: &str) -> Result<(), CrossError> {
        let mut path = root.to_string();
        self.value(value, &mut path)
    }

    pub(super) fn sink_mut(&mut self) -> &mut S {
        &mut self.sink
    }

    /// The sink, once the limits have been checked with all it holds.
    pub(super) fn finish(mut self) -> Result<S, CrossError> {
        self.meter.hold(self.sink.held());
        self.meter.check()?;
        Ok(self.sink)
    }

    /// Walks `value`; `path` says where it is (`value.items[3]`).
    fn value(&mut self, value: &Value, path: &mut String) -> Result<(), CrossError> {
        self.meter.hold(self.sink.held());
        self.meter.spend(VALUE_COST)?;
        match value {
            Value::Nil => self.sink.null(),
            _ if is_null(value) => self.sink.null(),
            Value::Boolean(b) => self.sink.boolean(*b),
            Value::Integer(i) => self.sink.integer(*i),
            Value::Number(n) if n.is_finite() => self.sink.float(*n),
            Value::Number(n) => {
                return Err(refused(format!("{n} is not a JSON number (at {path})")));
            }
            Value::String(s) => {
                let bytes = s.as_bytes();
                let text = utf8(&bytes, path)?;
                self.sink.before_string(&self.meter, text.len())?;
                self.sink.string(text);
            }
            Value::Table(table) => self.table(table, path)?,
            other => {
                return Err(CrossError::Refused(Refusal {
                    message: format!("cannot encode a {} (at {path})", other.type_name()),
                    kind: RefusalKind::NoJsonForm {
                        type_name: other.type_name(),
                        path: path.clone(),
                    },
                }));
            }
        }
        Ok(())
    }

    fn table(&mut self, table: &Table, path: &mut String) -> Result<(), CrossError> {
        let pointer = table.to_pointer();
        if self.visiting.contains(&pointer) {
            return Err(CrossError::Refused(Refusal {
                message: format!("cycle: the table at {path} contains itself"),
                kind: RefusalKind::Cycle { path: path.clone() },
            }));
        }
        if self.visiting.len() >= MAX_DEPTH {
            return Err(refused(format!(
                "nested deeper than {MAX_DEPTH} levels (at {path})"
            )));
        }
        self.visiting.push(pointer);
        let walked = if table.metatable().as_ref() == Some(self.arrays) {
            self.marked_array(table, path)
        } else {
            self.table_by_keys(table, path)
        };
        self.visiting.pop();
        walked
    }

    /// A table without the array mark: an array if its keys are 1..n, an object if they
    /// are strings, `{}` if it has none.
    fn table_by_keys(&mut self, table: &Table, path: &mut String) -> Result<(), CrossError> {
        // An object is walked as its keys are met (sorted, only their bytes are kept):
        // holding every key and value at once would take a handle each, and mlua has
        // room for about a million.
        let sort = self.sort_keys;
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
                    return Err(refused(format!(
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
                return Err(refused(format!(
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
            self.sink.begin_object();
        }
        self.sink.end_object();
        Ok(())
    }

    /// Walks the `i`th (from 0) entry of an object, opening the object at the first.
    fn entry(
        &mut self,
        i: usize,
        key: &[u8],
        value: &Value,
        path: &mut String,
    ) -> Result<(), CrossError> {
        if i == 0 {
            self.sink.begin_object();
        }
        let text = utf8(key, path)?;
        self.sink.before_string(&self.meter, text.len())?;
        self.sink.object_key(text, i == 0);
        let length = path.len();
        push_key(path, key);
        self.value(value, path)?;
        path.truncate(length);
        self.sink.end_item();
        Ok(())
    }

    /// A table with the array mark: its keys must be 1..n, as an unmarked array's, so
    /// that no value is left out (the length operator alone would stop at a hole).
    fn marked_array(&mut self, table: &Table, path: &mut String) -> Result<(), CrossError> {
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
                    return Err(refused(format!(
                        "the array at {path} has key {}: an array's keys must be 1..n",
                        describe_value(&other)
                    )));
                }
            }
        }
        if usize::try_from(last).ok() != Some(count) {
            return Err(refused(format!(
                "the array at {path} is sparse (keys are not 1..n); fill the holes with json.null"
            )));
        }
        self.array(table, count, path)
    }

    fn array(&mut self, table: &Table, length: usize, path: &mut String) -> Result<(), CrossError> {
        self.sink.begin_array(length);
        for i in 1..=length {
            self.sink.array_item(i == 1);
            let value: Value = table.raw_get(i)?;
            let before = path.len();
            let _ = write!(path, "[{i}]");
            self.value(&value, path)?;
            path.truncate(before);
            self.sink.end_item();
        }
        self.sink.end_array();
        Ok(())
    }
}

/// `bytes` as text, or the refusal of a string that is not UTF-8.
fn utf8<'b>(bytes: &'b [u8], path: &str) -> Result<&'b str, CrossError> {
    std::str::from_utf8(bytes).map_err(|e| {
        refused(format!(
            "the string at {path} is not valid UTF-8 (byte {})",
            e.valid_up_to() + 1
        ))
    })
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

/// `path.key`, or `path["odd key"]` when the key is not a plain name: how a refusal
/// names where a value is (positions are `[n]`, from 1 as Lua counts). A host converting
/// its own values to JSON names them the same way.
///
/// ```
/// use rlm_registry::environment::lua_json::push_key;
///
/// let mut path = "x".to_string();
/// push_key(&mut path, b"items");
/// push_key(&mut path, b"two words");
/// assert_eq!(path, "x.items[\"two words\"]");
/// ```
pub fn push_key(path: &mut String, key: &[u8]) {
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
