//! The `csv` built-in: `csv.parse`, `csv.rows` and `csv.encode`, on the `csv` crate
//! (RFC 4180: quoted fields may hold the separator, doubled quotes and newlines).
//!
//! Fields are strings, as Python's `csv` gives them. With a header (the default) a row
//! is a table keyed by column name: a row shorter than the header lacks the missing
//! columns' keys, and a row longer than it keeps its extra fields under their column
//! numbers (`row[5]`), so nothing is lost and nothing is made up. Without a header a row
//! is an array of its fields. A header naming a column twice is an error. Blank lines
//! are skipped.
//!
//! Rows are built with the Lua C API, the header's names pushed once and reused as keys,
//! a whole `csv.parse` in one protected call; the reader and its record are owned
//! outside that call, so an allocation failing in Lua (the memory limit) leaks nothing.
//!
//! ```
//! use rlm_registry::{Registry, environment::{Environment, Limits}};
//!
//! let env = Environment::new(Registry::baked().clone(), Limits::default())?;
//! let run = env.execute(r#"
//!   local rows, header = csv.parse('name,note\nAda,"likes ""maths"", logic"\n')
//!   print(#rows, header[2], rows[1].note)
//!   print(csv.encode(rows, {columns = header}))
//! "#)?;
//! assert_eq!(run.output, "1\tnote\tlikes \"maths\", logic\nname,note\nAda,\"likes \"\"maths\"\", logic\"\n\n");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::ffi::c_int;
use std::rc::Rc;

use csv::{ByteRecord, Reader, ReaderBuilder, Terminator, WriterBuilder};
use mlua::{Function, Lua, LuaString, MultiValue, Table, Value, ffi};

use crate::conventions::builtins::BuiltinId;
use crate::environment::limits::Tripwire;
use crate::environment::meter::{VALUE_COST, WorkMeter};

use super::reading::{Tidy, buffered_iterator, limit_on_memory, text_arg};

fn error(function: BuiltinId, message: String) -> mlua::Error {
    mlua::Error::RuntimeError(format!("{}: {message}", function.name()))
}

/// `sep` and `header`, from a call's options table.
#[derive(Clone, Copy)]
struct ReadOptions {
    sep: u8,
    header: bool,
}

impl ReadOptions {
    fn from_table(function: BuiltinId, opts: Option<&Table>) -> mlua::Result<Self> {
        let Some(opts) = opts else {
            return Ok(ReadOptions {
                sep: b',',
                header: true,
            });
        };
        Ok(ReadOptions {
            sep: separator(function, opts)?,
            header: flag(function, opts, "header", true)?,
        })
    }

    fn reader<R: std::io::Read>(self, input: R) -> Reader<R> {
        ReaderBuilder::new()
            .delimiter(self.sep)
            .has_headers(false)
            .flexible(true)
            .from_reader(input)
    }
}

/// `opts.sep`: one byte (a one-character ASCII string), default `,`.
fn separator(function: BuiltinId, opts: &Table) -> mlua::Result<u8> {
    match opts.get::<Value>("sep")? {
        Value::Nil => Ok(b','),
        Value::String(sep) if sep.as_bytes().len() == 1 => Ok(sep.as_bytes()[0]),
        other => Err(error(
            function,
            format!(
                "sep must be one character, like \",\" or \"\\t\", got {}",
                match &other {
                    Value::String(s) => format!("{:?}", s.to_string_lossy()),
                    other => format!("a {}", other.type_name()),
                }
            ),
        )),
    }
}

fn flag(function: BuiltinId, opts: &Table, name: &str, default: bool) -> mlua::Result<bool> {
    match opts.get::<Value>(name)? {
        Value::Nil => Ok(default),
        Value::Boolean(b) => Ok(b),
        other => Err(error(
            function,
            format!("{name} must be true or false, got a {}", other.type_name()),
        )),
    }
}

fn read_error(function: BuiltinId, e: &csv::Error) -> mlua::Error {
    error(function, e.to_string())
}

/// The header's names, refusing one named twice.
fn checked_header(function: BuiltinId, record: &ByteRecord) -> mlua::Result<()> {
    let mut seen = BTreeSet::new();
    for (i, name) in record.iter().enumerate() {
        if !seen.insert(name) {
            return Err(error(
                function,
                format!(
                    "the header names column {:?} twice (the second time in column {}); pass {{header = false}} to read rows as arrays",
                    String::from_utf8_lossy(name),
                    i + 1
                ),
            ));
        }
    }
    Ok(())
}

/// Pushes one row: keyed by the names in the table at `keys` (a stack index) when there
/// is one, else an array.
///
/// # Safety
/// `state` must have room for three more values.
unsafe fn push_row(
    state: *mut ffi::lua_State,
    record: &ByteRecord,
    keys: Option<(c_int, usize)>,
    meter: &mut WorkMeter,
) -> mlua::Result<()> {
    let fields = record.len();
    unsafe {
        match keys {
            Some((keys, names)) => {
                ffi::lua_createtable(state, 0, c_int::try_from(fields).unwrap_or(0));
                for (i, field) in record.iter().enumerate() {
                    if i < names {
                        ffi::lua_rawgeti(state, keys, i as ffi::lua_Integer + 1);
                    } else {
                        ffi::lua_pushinteger(state, i as ffi::lua_Integer + 1);
                    }
                    ffi::lua_pushlstring(state, field.as_ptr().cast(), field.len());
                    ffi::lua_rawset(state, -3);
                }
            }
            None => {
                ffi::lua_createtable(state, c_int::try_from(fields).unwrap_or(0), 0);
                for (i, field) in record.iter().enumerate() {
                    ffi::lua_pushlstring(state, field.as_ptr().cast(), field.len());
                    ffi::lua_rawseti(state, -2, i as ffi::lua_Integer + 1);
                }
            }
        }
    }
    meter.spend(record.as_slice().len() + VALUE_COST * (fields + 1))
}

/// Pushes the header's names as an array.
///
/// # Safety
/// `state` must have room for two more values.
unsafe fn push_names(state: *mut ffi::lua_State, record: &ByteRecord) {
    unsafe {
        ffi::lua_createtable(state, c_int::try_from(record.len()).unwrap_or(0), 0);
        for (i, name) in record.iter().enumerate() {
            ffi::lua_pushlstring(state, name.as_ptr().cast(), name.len());
            ffi::lua_rawseti(state, -2, i as ffi::lua_Integer + 1);
        }
    }
}

/// `csv.parse(text [, opts])` → rows, header (nil without one).
pub(super) fn parse(lua: &Lua, tripwire: &Rc<Tripwire>) -> mlua::Result<Function> {
    let tripwire = Rc::clone(tripwire);
    lua.create_function(move |lua, (text, opts): (Value, Option<Table>)| {
        let function = BuiltinId::CsvParse;
        let text = text_arg(lua, function, text)?;
        let options = ReadOptions::from_table(function, opts.as_ref())?;
        let bytes = text.as_bytes();
        let mut reader = options.reader(&bytes[..]);
        let mut header = ByteRecord::new();
        if options.header {
            reader
                .read_byte_record(&mut header)
                .map_err(|e| read_error(function, &e))?;
            checked_header(function, &header)?;
        }
        let mut record = ByteRecord::new();
        let mut meter = WorkMeter::new(lua, &tripwire);
        let mut read = Ok(());
        let collecting = lua.gc_is_running();
        lua.gc_stop();
        // SAFETY: the fill pushes two values (the names or nil, then the rows), only
        // strings, integers and tables of them; the reader and records are owned outside.
        let built = unsafe {
            lua.exec_raw::<MultiValue>((), |state| {
                let keys = if options.header {
                    push_names(state, &header);
                    Some((ffi::lua_gettop(state), header.len()))
                } else {
                    ffi::lua_pushnil(state);
                    None
                };
                ffi::lua_createtable(state, 0, 0);
                let mut n: ffi::lua_Integer = 0;
                read = loop {
                    match reader.read_byte_record(&mut record) {
                        Ok(true) => {}
                        Ok(false) => break Ok(()),
                        Err(e) => break Err(read_error(function, &e)),
                    }
                    if let Err(e) = push_row(state, &record, keys, &mut meter) {
                        break Err(e);
                    }
                    n += 1;
                    ffi::lua_rawseti(state, -2, n);
                };
            })
        };
        if collecting {
            lua.gc_restart();
        }
        let mut built = limit_on_memory(&tripwire, built)?.into_iter();
        read?;
        let names = built.next().unwrap_or(Value::Nil);
        let rows = built.next().unwrap_or(Value::Nil);
        Ok((rows, names))
    })
}

/// Rows `csv.rows` reads per call into Rust; its iterator, a Lua closure, hands them out
/// one by one.
const ROWS_BATCH: usize = 64;

/// A Lua string read as a byte stream, for a reader that outlives one call.
struct LuaText {
    text: LuaString,
    position: usize,
}

impl std::io::Read for LuaText {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let bytes = self.text.as_bytes();
        let rest = bytes.get(self.position..).unwrap_or_default();
        let n = rest.len().min(buf.len());
        buf[..n].copy_from_slice(&rest[..n]);
        self.position += n;
        Ok(n)
    }
}

/// The state of one `csv.rows` iteration.
struct RowsState {
    reader: Reader<LuaText>,
    record: ByteRecord,
    /// The header's names (a Lua array), once read.
    names: Option<(Table, usize)>,
    started: bool,
    header: bool,
}

/// `csv.rows(text [, opts])` → an iterator over the rows.
pub(super) fn rows(lua: &Lua, tripwire: &Rc<Tripwire>) -> mlua::Result<Function> {
    let tripwire = Rc::clone(tripwire);
    lua.create_function(move |lua, (text, opts): (Value, Option<Table>)| {
        let function = BuiltinId::CsvRows;
        let text = text_arg(lua, function, text)?;
        let options = ReadOptions::from_table(function, opts.as_ref())?;
        let tidy = RefCell::new(Tidy::new(lua, text.as_bytes().len()));
        let state = RefCell::new(RowsState {
            reader: options.reader(LuaText { text, position: 0 }),
            record: ByteRecord::new(),
            names: None,
            started: false,
            header: options.header,
        });
        let tripwire = Rc::clone(&tripwire);
        let buffer = lua.create_table_with_capacity(ROWS_BATCH, 0)?;
        let filled = buffer.clone();
        let refill = lua.create_function(move |lua, ()| {
            tidy.borrow_mut().after_record(lua)?;
            let mut state = state.borrow_mut();
            let state = &mut *state;
            if !state.started {
                state.started = true;
                if state.header {
                    let mut header = ByteRecord::new();
                    state
                        .reader
                        .read_byte_record(&mut header)
                        .map_err(|e| read_error(function, &e))?;
                    checked_header(function, &header)?;
                    let names = header
                        .iter()
                        .map(|name| lua.create_string(name))
                        .collect::<mlua::Result<Vec<_>>>()?;
                    let names = lua.create_sequence_from(names)?;
                    state.names = Some((names, header.len()));
                }
            }
            let mut meter = WorkMeter::new(lua, &tripwire);
            let mut failure = None;
            let mut count = 0usize;
            let names = state.names.as_ref();
            let args = (&filled, names.map(|(table, _)| table.clone()));
            let (reader, record) = (&mut state.reader, &mut state.record);
            // SAFETY: pushes up to ROWS_BATCH rows of strings and integers into the
            // buffer (stack index 1); the reader and the record are owned outside.
            let done = unsafe {
                lua.exec_raw::<()>(args, |lua_state| {
                    let keys = names.map(|(_, n)| (2, *n));
                    while count < ROWS_BATCH {
                        match reader.read_byte_record(record) {
                            Ok(true) => {}
                            Ok(false) => break,
                            Err(e) => {
                                failure = Some(read_error(function, &e));
                                break;
                            }
                        }
                        if let Err(e) = push_row(lua_state, record, keys, &mut meter) {
                            failure = Some(e);
                            break;
                        }
                        ffi::lua_rawseti(lua_state, 1, count as ffi::lua_Integer + 1);
                        count += 1;
                    }
                    ffi::lua_settop(lua_state, 0);
                })
            };
            limit_on_memory(&tripwire, done)?;
            match failure {
                Some(error) => limit_on_memory(&tripwire, Err(error)),
                None => Ok(count),
            }
        })?;
        buffered_iterator(lua, refill, buffer)
    })
}

/// `csv.encode(rows [, opts])` → the CSV text.
pub(super) fn encode(lua: &Lua, tripwire: &Rc<Tripwire>) -> mlua::Result<Function> {
    let tripwire = Rc::clone(tripwire);
    lua.create_function(move |lua, (rows, opts): (Value, Option<Table>)| {
        let function = BuiltinId::CsvEncode;
        let Value::Table(rows) = rows else {
            return Err(error(
                function,
                format!("rows must be a table of rows, got {}", rows.type_name()),
            ));
        };
        let sep = match &opts {
            Some(opts) => separator(function, opts)?,
            None => b',',
        };
        let header = match &opts {
            Some(opts) => flag(function, opts, "header", true)?,
            None => true,
        };
        let columns = match &opts {
            Some(opts) => opts
                .get::<Option<Vec<LuaString>>>("columns")
                .map_err(|_| error(function, "columns must be an array of column names".into()))?,
            None => None,
        };
        let rows = row_tables(&rows)?;
        let mut writer = WriterBuilder::new()
            .delimiter(sep)
            .terminator(Terminator::Any(b'\n'))
            .flexible(true)
            .from_writer(Vec::new());
        let mut meter = WorkMeter::new(lua, &tripwire);
        let keyed = columns.is_some() || rows.first().is_some_and(|row| row.raw_len() == 0);
        let write_error = |e: csv::Error| error(function, e.to_string());
        if keyed {
            let columns = match columns {
                Some(columns) => columns,
                None => sorted_keys(&rows)?,
            };
            if header {
                let names: Vec<Vec<u8>> = columns.iter().map(|c| c.as_bytes().to_vec()).collect();
                writer.write_record(&names).map_err(write_error)?;
            }
            let mut fields: Vec<Vec<u8>> = Vec::with_capacity(columns.len());
            for (i, row) in rows.iter().enumerate() {
                fields.clear();
                for column in &columns {
                    let value: Value = row.raw_get(column)?;
                    let place = || format!("row {}, column {:?}", i + 1, column.to_string_lossy());
                    fields.push(field(lua, value, place)?);
                }
                writer.write_record(&fields).map_err(write_error)?;
                meter.hold(writer.get_ref().capacity());
                meter.spend(VALUE_COST * (fields.len() + 1))?;
            }
        } else {
            let mut fields: Vec<Vec<u8>> = Vec::new();
            for (i, row) in rows.iter().enumerate() {
                fields.clear();
                for j in 1..=row.raw_len() {
                    let value: Value = row.raw_get(j)?;
                    fields.push(field(lua, value, || format!("row {}, field {j}", i + 1))?);
                }
                writer.write_record(&fields).map_err(write_error)?;
                meter.hold(writer.get_ref().capacity());
                meter.spend(VALUE_COST * (fields.len() + 1))?;
            }
        }
        let text = writer
            .into_inner()
            .map_err(|e| error(function, e.to_string()))?;
        limit_on_memory(&tripwire, lua.create_string(&text))
    })
}

/// The rows of `csv.encode`'s argument, each a table.
fn row_tables(rows: &Table) -> mlua::Result<Vec<Table>> {
    (1..=rows.raw_len())
        .map(|i| match rows.raw_get::<Value>(i)? {
            Value::Table(row) => Ok(row),
            other => Err(error(
                BuiltinId::CsvEncode,
                format!("row {i} must be a table, got {}", other.type_name()),
            )),
        })
        .collect()
}

/// Every string key of the rows, sorted: the columns when none are given.
fn sorted_keys(rows: &[Table]) -> mlua::Result<Vec<LuaString>> {
    let mut keys: BTreeSet<Vec<u8>> = BTreeSet::new();
    let mut strings = Vec::new();
    for row in rows {
        for pair in row.pairs::<Value, Value>() {
            if let (Value::String(key), _) = pair?
                && keys.insert(key.as_bytes().to_vec())
            {
                strings.push(key);
            }
        }
    }
    strings.sort_by_cached_key(|s| s.as_bytes().to_vec());
    Ok(strings)
}

/// One field's text: strings as they are, numbers as `tostring` writes them, booleans
/// as `true`/`false`, nil and `json.null` empty; `place` names it in an error.
fn field(lua: &Lua, value: Value, place: impl Fn() -> String) -> mlua::Result<Vec<u8>> {
    match value {
        Value::Nil => Ok(Vec::new()),
        Value::LightUserData(p) if p.0.is_null() => Ok(Vec::new()),
        Value::String(s) => Ok(s.as_bytes().to_vec()),
        Value::Integer(i) => Ok(i.to_string().into_bytes()),
        Value::Boolean(b) => Ok(b.to_string().into_bytes()),
        Value::Number(_) => Ok(lua
            .coerce_string(value)?
            .map(|s| s.as_bytes().to_vec())
            .unwrap_or_default()),
        other => Err(error(
            BuiltinId::CsvEncode,
            format!(
                "{} is a {}; a field must be a string, number or boolean",
                place(),
                other.type_name()
            ),
        )),
    }
}
