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

/// How many of the values waiting in [`Walk::entries`] may be Lua values held by a
/// handle (strings, tables, functions): mlua has room for about a million handles and
/// panics past it, so an object of more values than this has the rest read again by key
/// when its turn comes.
const MOST_HELD_HANDLES: usize = 1 << 16;

/// One key of an object being walked: its bytes, `keys[start..end]` of the walk, its
/// first eight bytes as a number (compared first: most keys differ there, and comparing
/// two numbers is cheaper than comparing two slices), and its value as the table's pass
/// gave it, or `Nil` for one to read again by key.
struct Entry {
    start: usize,
    end: usize,
    prefix: u64,
    value: Value,
}

impl Entry {
    /// `key`'s first eight bytes, big-endian and padded with zeros, so that two
    /// prefixes compare as the bytes do (a tie is broken by the whole keys).
    fn prefix(key: &[u8]) -> u64 {
        let mut first = [0u8; 8];
        let n = key.len().min(8);
        first[..n].copy_from_slice(&key[..n]);
        u64::from_be_bytes(first)
    }
}

/// The buffers a walk gathers objects' keys in: a caller that walks often
/// (`json.encode`) keeps them from one walk to the next, so that each walk does not grow
/// them anew. They are empty between walks.
#[derive(Default)]
pub(crate) struct KeyBuffers {
    /// The keys of the objects being walked, outermost first, each object's after its
    /// parent's: grown to the widest path of objects.
    keys: Vec<u8>,
    /// The entries of the objects being walked, in the same order as their keys.
    entries: Vec<Entry>,
}

/// The most key bytes kept between walks; a walk past it leaves its larger buffers to
/// be freed, so that one huge object does not hold their memory outside Lua for good.
const KEPT_KEY_BYTES: usize = 1 << 16;

/// One walk: the sink it feeds and what it keeps on the way.
pub(super) struct Walk<'a, S> {
    lua: &'a Lua,
    sink: S,
    /// The arrays' metatable ([`super::array_metatable`]).
    arrays: &'a Table,
    /// The tables being walked, outermost first: meeting one again is a cycle.
    visiting: Vec<*const std::ffi::c_void>,
    buffers: KeyBuffers,
    /// How many values in `buffers.entries` hold a handle.
    held_handles: usize,
    /// How many may ([`MOST_HELD_HANDLES`]; fewer in tests, to reach the rereading).
    most_held_handles: usize,
    meter: WorkMeter<'a>,
}

impl<'a, S: Sink> Walk<'a, S> {
    /// A walk gathering objects' keys in `buffers` (empty, as [`Walk::take_buffers`]
    /// gives them back).
    pub(super) fn new(
        lua: &'a Lua,
        arrays: &'a Table,
        sink: S,
        meter: WorkMeter<'a>,
        buffers: KeyBuffers,
    ) -> Self {
        Walk {
            lua,
            sink,
            arrays,
            visiting: Vec::new(),
            buffers,
            held_handles: 0,
            most_held_handles: MOST_HELD_HANDLES,
            meter,
        }
    }

    /// What the walk holds outside Lua: the sink's bytes and the waiting keys.
    fn held(&self) -> usize {
        let entries = self.buffers.entries.capacity() * std::mem::size_of::<Entry>();
        self.sink.held() + self.buffers.keys.capacity() + entries
    }

    /// The key buffers, emptied, for the next walk; none that has grown past
    /// [`KEPT_KEY_BYTES`]. A walk cut short by an error may have left entries behind.
    pub(super) fn take_buffers(&mut self) -> KeyBuffers {
        let mut buffers = std::mem::take(&mut self.buffers);
        buffers.entries.clear();
        buffers.keys.clear();
        self.held_handles = 0;
        let entry_bytes = std::mem::size_of::<Entry>();
        if buffers.keys.capacity() > KEPT_KEY_BYTES
            || buffers.entries.capacity() * entry_bytes > KEPT_KEY_BYTES
        {
            return KeyBuffers::default();
        }
        buffers
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
        self.meter.hold(self.held());
        self.meter.check()?;
        Ok(self.sink)
    }

    /// Walks `value`; `path` says where it is (`value.items[3]`).
    fn value(&mut self, value: &Value, path: &mut String) -> Result<(), CrossError> {
        self.meter.hold(self.held());
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
    /// are strings, `{}` if it has none. What the table left in the walk's buffers is
    /// dropped whatever the outcome.
    fn table_by_keys(&mut self, table: &Table, path: &mut String) -> Result<(), CrossError> {
        let (keys, entries) = (self.buffers.keys.len(), self.buffers.entries.len());
        let walked = self.array_or_object(table, path);
        for entry in self.buffers.entries.drain(entries..) {
            if holds_handle(&entry.value) {
                self.held_handles -= 1;
            }
        }
        self.buffers.keys.truncate(keys);
        walked
    }

    fn array_or_object(&mut self, table: &Table, path: &mut String) -> Result<(), CrossError> {
        // An object's keys are gathered in one pass, then written in byte order, so that
        // the text is the same in every process (the module docs say why).
        let first = self.buffers.entries.len();
        let (mut strings, mut integers, mut largest) = (0usize, 0usize, 0usize);
        for pair in table.pairs::<Value, Value>() {
            let (key, value) = pair?;
            match key {
                Value::String(key) if integers == 0 => {
                    // The keys gathered count against the limits as they grow, before a
                    // value is written.
                    self.meter.hold(self.held());
                    self.meter.spend(VALUE_COST)?;
                    let key = key.as_bytes();
                    let start = self.buffers.keys.len();
                    self.buffers.keys.extend_from_slice(&key);
                    let value = if !holds_handle(&value) {
                        value
                    } else if self.held_handles < self.most_held_handles {
                        self.held_handles += 1;
                        value
                    } else {
                        Value::Nil
                    };
                    self.buffers.entries.push(Entry {
                        start,
                        end: self.buffers.keys.len(),
                        prefix: Entry::prefix(&key),
                        value,
                    });
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
        let KeyBuffers { keys, entries } = &mut self.buffers;
        // Keys are distinct, so the unstable sort gives the one order.
        entries[first..].sort_unstable_by(|a, b| {
            a.prefix
                .cmp(&b.prefix)
                .then_with(|| keys[a.start..a.end].cmp(&keys[b.start..b.end]))
        });
        self.sink.begin_object();
        for i in 0..strings {
            let entry = &mut self.buffers.entries[first + i];
            let (start, end) = (entry.start, entry.end);
            let value = match std::mem::replace(&mut entry.value, Value::Nil) {
                Value::Nil => {
                    let key = self.lua.create_string(&self.buffers.keys[start..end])?;
                    table.raw_get(key)?
                }
                held => {
                    if holds_handle(&held) {
                        self.held_handles -= 1;
                    }
                    held
                }
            };
            let key = &self.buffers.keys[start..end];
            let text = utf8(key, path)?;
            self.sink.before_string(&self.meter, text.len())?;
            self.sink.object_key(text, i == 0);
            let length = path.len();
            push_key(path, key);
            self.value(&value, path)?;
            path.truncate(length);
            self.sink.end_item();
        }
        self.sink.end_object();
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

/// Whether mlua holds `value` by a handle (a slot of its own stack) while it lives.
fn holds_handle(value: &Value) -> bool {
    !matches!(
        value,
        Value::Nil
            | Value::Boolean(_)
            | Value::LightUserData(_)
            | Value::Integer(_)
            | Value::Number(_)
    )
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
    use crate::engines::limits::{Guard, Limits};
    use crate::environment::lua_json::array_metatable;
    use crate::environment::lua_json::text::TextSink;

    /// `code`'s value as compact JSON text, the walk holding at most `most_held`
    /// handles.
    fn encoded(code: &str, most_held: usize) -> String {
        let lua = Lua::new();
        let guard = Guard::new(Limits::default());
        let arrays = array_metatable(&lua).unwrap();
        let value: Value = lua.load(code).eval().unwrap();
        let mut walk = Walk::new(
            &lua,
            &arrays,
            TextSink::compact(Vec::new()),
            WorkMeter::new(&lua, &guard),
            KeyBuffers::default(),
        );
        walk.most_held_handles = most_held;
        walk.root(&value, "value").unwrap();
        assert_eq!(walk.held_handles, 0, "every handle given back");
        assert!(walk.buffers.entries.is_empty() && walk.buffers.keys.is_empty());
        String::from_utf8(walk.finish().unwrap().into_bytes()).unwrap()
    }

    #[test]
    fn objects_are_written_in_byte_order_of_their_keys_however_many_values_wait() {
        let code = "local t = {} for i = 1, 40 do t['k' .. i] = {v = 'x' .. i, [\"B\"] = i} end
                    t.A, t.a, t.empty = 'upper', 'lower', {} return t";
        let all_held = encoded(code, MOST_HELD_HANDLES);
        // Past the cap, the values waiting are read again by key: the same text.
        assert_eq!(encoded(code, 3), all_held);
        assert_eq!(encoded(code, 0), all_held);
        assert!(
            all_held
                .starts_with(r#"{"A":"upper","a":"lower","empty":{},"k1":{"B":1,"v":"x1"},"k10":"#),
            "{all_held}"
        );
        assert!(
            all_held.ends_with(r#""k9":{"B":9,"v":"x9"}}"#),
            "{all_held}"
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
