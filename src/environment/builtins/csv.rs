//! The `csv` built-in: `csv.parse`, `csv.rows` and `csv.encode`, on the `csv` crate
//! (RFC 4180: quoted fields may hold the separator, doubled quotes and newlines). Reading
//! drives its parser, `csv_core`, a MiB of input at a time into buffers grown here, so a
//! record's size counts against the memory limit and a huge one stops at a limit.
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

use csv::{Terminator, WriterBuilder};
use csv_core::ReadRecordResult;
use mlua::{FromLua, Function, Lua, LuaString, Table, Value, ffi};

use crate::conventions::builtins::BuiltinId;
use crate::environment::limits::Tripwire;
use crate::environment::meter::{VALUE_COST, WorkMeter};

use super::reading::{Tidy, buffered_iterator, known_options, limit_on_memory, text_arg};

fn error(function: BuiltinId, message: String) -> mlua::Error {
    mlua::Error::RuntimeError(format!("{}: {message}", function.name()))
}

/// `a number`, `a table`: a value's Lua type with its article, for messages.
fn a_type(value: &Value) -> String {
    match value {
        Value::Integer(_) | Value::Number(_) => "a number".to_string(),
        other => format!("a {}", other.type_name()),
    }
}

/// A key as a message shows it: `"name"`, `3`, `true`, `a function`.
fn describe_key(key: &Value) -> String {
    match key {
        Value::String(s) => format!("{:?}", s.to_string_lossy()),
        Value::Integer(i) => i.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Boolean(b) => b.to_string(),
        other => a_type(other),
    }
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
        known_options(function, opts, &["sep", "header"])?;
        Ok(ReadOptions {
            sep: separator(function, opts)?,
            header: flag(function, opts, "header", true)?,
        })
    }
}

/// `opts.sep`: one byte (a one-character ASCII string), default `,`; not the quote or a
/// line break, which would make the text unreadable.
fn separator(function: BuiltinId, opts: &Table) -> mlua::Result<u8> {
    match opts.get::<Value>("sep")? {
        Value::Nil => Ok(b','),
        Value::String(sep) if matches!(*sep.as_bytes(), [b'"' | b'\n' | b'\r']) => Err(error(
            function,
            format!(
                "sep cannot be a quote or a line break, got {:?}",
                sep.to_string_lossy()
            ),
        )),
        Value::String(sep) if sep.as_bytes().len() == 1 => Ok(sep.as_bytes()[0]),
        other => Err(error(
            function,
            format!(
                "sep must be one character, like \",\" or \"\\t\", got {}",
                match &other {
                    Value::String(s) => format!("{:?}", s.to_string_lossy()),
                    other => a_type(other),
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
            format!("{name} must be true or false, got {}", a_type(&other)),
        )),
    }
}

/// Input handed to the parser at a time: the limits are checked between two, so that
/// even one record spanning the whole text stops at a limit.
const INPUT_CHUNK: usize = 1 << 20;

/// One record, in buffers grown here rather than by the `csv` crate's reader, so that
/// their size counts against the memory limit as they grow (a line of a million empty
/// fields holds a machine word per field).
#[derive(Default)]
struct Record {
    /// The fields' bytes, one after the other.
    bytes: Vec<u8>,
    /// Where each field ends in `bytes`.
    ends: Vec<usize>,
    /// The number of fields.
    len: usize,
}

impl Record {
    fn fields(&self) -> impl Iterator<Item = &[u8]> {
        let ends = &self.ends[..self.len];
        let starts = std::iter::once(0).chain(ends.iter().copied());
        starts
            .zip(ends)
            .map(|(start, &end)| &self.bytes[start..end])
    }

    /// Bytes held, with room for `more` more.
    fn held(&self, more: usize) -> usize {
        self.bytes.len() + self.ends.len() * std::mem::size_of::<usize>() + more
    }
}

/// Reads the records of a text with `csv_core` (RFC 4180, lenient as the `csv` crate
/// is: it never fails), a chunk of input at a time. Blank lines are skipped, and a
/// UTF-8 byte order mark at the start is dropped.
struct Records {
    core: csv_core::Reader,
    /// Where the next record starts in the text.
    position: usize,
}

impl Records {
    fn new(sep: u8) -> Self {
        Records {
            core: csv_core::ReaderBuilder::new().delimiter(sep).build(),
            position: 0,
        }
    }

    /// Reads the next record of `text` into `record`: false at the end. Only a limit
    /// stops it.
    fn next(
        &mut self,
        text: &[u8],
        record: &mut Record,
        meter: &mut WorkMeter,
    ) -> mlua::Result<bool> {
        let (mut written, mut ended) = (0, 0);
        loop {
            let rest = text.get(self.position..).unwrap_or_default();
            let input = &rest[..rest.len().min(INPUT_CHUNK)];
            let (result, read, wrote, ends) = self.core.read_record(
                input,
                &mut record.bytes[written..],
                &mut record.ends[ended..],
            );
            self.position += read;
            written += wrote;
            ended += ends;
            meter.spend(read)?;
            match result {
                ReadRecordResult::InputEmpty => {}
                ReadRecordResult::OutputFull => {
                    let more = record.bytes.len().max(64);
                    meter.check_holding(record.held(more))?;
                    record.bytes.resize(record.bytes.len() + more, 0);
                }
                ReadRecordResult::OutputEndsFull => {
                    let more = record.ends.len().max(16);
                    let bytes = more * std::mem::size_of::<usize>();
                    meter.check_holding(record.held(bytes))?;
                    record.ends.resize(record.ends.len() + more, 0);
                }
                ReadRecordResult::Record => {
                    record.len = ended;
                    meter.hold(record.held(0));
                    return Ok(true);
                }
                ReadRecordResult::End => {
                    record.len = 0;
                    return Ok(false);
                }
            }
        }
    }
}

/// Reads the header and makes its names (a Lua array) and their number, refusing a
/// name given twice; an empty text has no names. The check is made in Lua, whose
/// memory counts against the limit, in the one protected call making the names.
fn header_names(
    lua: &Lua,
    tripwire: &Tripwire,
    function: BuiltinId,
    text: &[u8],
    records: &mut Records,
    record: &mut Record,
    meter: &mut WorkMeter,
) -> mlua::Result<(Table, usize)> {
    records.next(text, record, meter)?;
    let mut twice = None;
    let mut failure = Ok(());
    // SAFETY: pushes two tables and strings into them, then drops the second; the record
    // and the meter are owned outside the call.
    let names = unsafe {
        lua.exec_raw::<Table>((), |state| {
            ffi::lua_createtable(state, c_int::try_from(record.len).unwrap_or(0), 0);
            ffi::lua_createtable(state, 0, c_int::try_from(record.len).unwrap_or(0));
            for (i, name) in record.fields().enumerate() {
                ffi::lua_pushlstring(state, name.as_ptr().cast(), name.len());
                ffi::lua_pushvalue(state, -1);
                if ffi::lua_rawget(state, 2) != ffi::LUA_TNIL {
                    twice = Some(i);
                    break;
                }
                ffi::lua_pop(state, 1);
                ffi::lua_pushvalue(state, -1);
                ffi::lua_pushboolean(state, 1);
                ffi::lua_rawset(state, 2);
                ffi::lua_rawseti(state, 1, i as ffi::lua_Integer + 1);
                failure = meter.spend(name.len() + 2 * VALUE_COST);
                if failure.is_err() {
                    break;
                }
            }
            ffi::lua_settop(state, 1);
        })
    };
    let names = limit_on_memory(tripwire, names)?;
    failure?;
    if let Some(i) = twice {
        let name = record.fields().nth(i).unwrap_or_default();
        return Err(error(
            function,
            format!(
                "the header names column {:?} twice (the second time in column {}); pass {{header = false}} to read rows as arrays",
                String::from_utf8_lossy(name),
                i + 1
            ),
        ));
    }
    Ok((names, record.len))
}

/// Pushes one row: keyed by the names in the table at `keys` (a stack index) when there
/// is one, else an array. The limits are checked as the fields go, so that a row of
/// millions stops at a limit.
///
/// # Safety
/// `state` must have room for three more values.
unsafe fn push_row(
    state: *mut ffi::lua_State,
    record: &Record,
    keys: Option<(c_int, usize)>,
    meter: &mut WorkMeter,
) -> mlua::Result<()> {
    let fields = c_int::try_from(record.len).unwrap_or(0);
    unsafe {
        match keys {
            Some((keys, names)) => {
                ffi::lua_createtable(state, 0, fields);
                for (i, field) in record.fields().enumerate() {
                    if i < names {
                        ffi::lua_rawgeti(state, keys, i as ffi::lua_Integer + 1);
                    } else {
                        ffi::lua_pushinteger(state, i as ffi::lua_Integer + 1);
                    }
                    ffi::lua_pushlstring(state, field.as_ptr().cast(), field.len());
                    ffi::lua_rawset(state, -3);
                    meter.spend(field.len() + VALUE_COST)?;
                }
            }
            None => {
                ffi::lua_createtable(state, fields, 0);
                for (i, field) in record.fields().enumerate() {
                    ffi::lua_pushlstring(state, field.as_ptr().cast(), field.len());
                    ffi::lua_rawseti(state, -2, i as ffi::lua_Integer + 1);
                    meter.spend(field.len() + VALUE_COST)?;
                }
            }
        }
    }
    meter.spend(VALUE_COST)
}

/// `csv.parse(text [, opts])` → rows, header (nil without one).
pub(super) fn parse(lua: &Lua, tripwire: &Rc<Tripwire>) -> mlua::Result<Function> {
    let tripwire = Rc::clone(tripwire);
    lua.create_function(move |lua, (text, opts): (Value, Option<Table>)| {
        let function = BuiltinId::CsvParse;
        let text = text_arg(lua, function, text)?;
        let options = ReadOptions::from_table(function, opts.as_ref())?;
        let bytes = text.as_bytes();
        let mut records = Records::new(options.sep);
        let mut record = Record::default();
        let mut meter = WorkMeter::new(lua, &tripwire);
        let names = match options.header {
            true => Some(header_names(
                lua,
                &tripwire,
                function,
                &bytes,
                &mut records,
                &mut record,
                &mut meter,
            )?),
            false => None,
        };
        let mut read = Ok(());
        let collecting = lua.gc_is_running();
        lua.gc_stop();
        // SAFETY: the names (or nil) are at stack index 1; the fill pushes the rows, a
        // table of strings, integers and tables of them, and leaves only it. The reader
        // and the record are owned outside the call.
        let built = unsafe {
            lua.exec_raw::<Option<Table>>(names.as_ref().map(|(names, _)| names), |state| {
                let keys = names.as_ref().map(|&(_, n)| (1, n));
                ffi::lua_createtable(state, 0, 0);
                let rows = ffi::lua_gettop(state);
                let mut n: ffi::lua_Integer = 0;
                read = loop {
                    match records.next(&bytes, &mut record, &mut meter) {
                        Ok(true) => {}
                        Ok(false) => break Ok(()),
                        Err(e) => break Err(e),
                    }
                    if let Err(e) = push_row(state, &record, keys, &mut meter) {
                        break Err(e);
                    }
                    n += 1;
                    ffi::lua_rawseti(state, rows, n);
                };
                ffi::lua_settop(state, rows);
                ffi::lua_remove(state, 1);
            })
        };
        if collecting {
            lua.gc_restart();
        }
        let rows = limit_on_memory(&tripwire, built)?;
        read?;
        Ok((rows, names.map(|(names, _)| names)))
    })
}

/// Rows `csv.rows` reads per call into Rust; its iterator, a Lua closure, hands them out
/// one by one.
const ROWS_BATCH: usize = 64;

/// The state of one `csv.rows` iteration.
struct RowsState {
    text: LuaString,
    records: Records,
    record: Record,
    header: bool,
    /// The header's names (a Lua array) and their number, once read.
    names: Option<(Table, usize)>,
    started: bool,
    /// The header's error, raised again by every later call.
    failed: Option<mlua::Error>,
    tidy: Tidy,
}

impl RowsState {
    /// Reads up to [`ROWS_BATCH`] rows into `buffer[1..n]` in one protected call;
    /// returns `n`, 0 at the end.
    fn refill(&mut self, lua: &Lua, tripwire: &Tripwire, buffer: &Table) -> mlua::Result<usize> {
        let function = BuiltinId::CsvRows;
        if let Some(error) = &self.failed {
            return Err(error.clone());
        }
        self.tidy.after_record(lua)?;
        let text = self.text.clone();
        let bytes = text.as_bytes();
        let mut meter = WorkMeter::new(lua, tripwire);
        if !self.started {
            self.started = true;
            if self.header {
                let (records, record) = (&mut self.records, &mut self.record);
                match header_names(lua, tripwire, function, &bytes, records, record, &mut meter) {
                    Ok(names) => self.names = Some(names),
                    Err(error) => {
                        self.failed = Some(error.clone());
                        return Err(error);
                    }
                }
            }
        }
        let mut failure = None;
        let mut count = 0usize;
        let names = self.names.as_ref();
        let args = (buffer, names.map(|(table, _)| table));
        let (records, record) = (&mut self.records, &mut self.record);
        // SAFETY: pushes up to ROWS_BATCH rows of strings and integers into the buffer
        // (stack index 1), the names at index 2; the reader and the record are owned
        // outside.
        let done = unsafe {
            lua.exec_raw::<()>(args, |state| {
                let keys = names.map(|&(_, n)| (2, n));
                while count < ROWS_BATCH {
                    match records.next(&bytes, record, &mut meter) {
                        Ok(true) => {}
                        Ok(false) => break,
                        Err(e) => {
                            failure = Some(e);
                            break;
                        }
                    }
                    if let Err(e) = push_row(state, record, keys, &mut meter) {
                        failure = Some(e);
                        break;
                    }
                    ffi::lua_rawseti(state, 1, count as ffi::lua_Integer + 1);
                    count += 1;
                }
                ffi::lua_settop(state, 0);
            })
        };
        limit_on_memory(tripwire, done)?;
        match failure {
            Some(error) => limit_on_memory(tripwire, Err(error)),
            None => Ok(count),
        }
    }
}

/// `csv.rows(text [, opts])` → an iterator over the rows.
pub(super) fn rows(lua: &Lua, tripwire: &Rc<Tripwire>) -> mlua::Result<Function> {
    let tripwire = Rc::clone(tripwire);
    lua.create_function(move |lua, (text, opts): (Value, Option<Table>)| {
        let function = BuiltinId::CsvRows;
        let text = text_arg(lua, function, text)?;
        let options = ReadOptions::from_table(function, opts.as_ref())?;
        let state = RefCell::new(RowsState {
            tidy: Tidy::new(lua, text.as_bytes().len()),
            text,
            records: Records::new(options.sep),
            record: Record::default(),
            header: options.header,
            names: None,
            started: false,
            failed: None,
        });
        let tripwire = Rc::clone(&tripwire);
        let buffer = lua.create_table_with_capacity(ROWS_BATCH, 0)?;
        let filled = buffer.clone();
        let refill =
            lua.create_function(move |lua, ()| state.borrow_mut().refill(lua, &tripwire, &filled))?;
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
        if let Some(opts) = &opts {
            known_options(function, opts, &["sep", "header", "columns"])?;
        }
        let sep = match &opts {
            Some(opts) => separator(function, opts)?,
            None => b',',
        };
        let header = match &opts {
            Some(opts) => flag(function, opts, "header", true)?,
            None => true,
        };
        let columns = match &opts {
            Some(opts) => column_names(lua, opts)?,
            None => None,
        };
        let shapes = row_shapes(lua, &rows)?;
        let keyed = keyed_rows(&shapes, columns.is_some())?;
        let mut writer = WriterBuilder::new()
            .delimiter(sep)
            .terminator(Terminator::Any(b'\n'))
            .flexible(true)
            .from_writer(Vec::new());
        let mut meter = WorkMeter::new(lua, &tripwire);
        let write_error = |e: csv::Error| error(function, e.to_string());
        let mut text = Vec::new();
        // Each row is fetched as it is written: holding them all would take a handle
        // each, and mlua has room for about a million.
        if keyed {
            let columns = match columns {
                Some(columns) => columns,
                None => sorted_keys(lua, &rows, shapes.len())?,
            };
            if header {
                for column in &columns {
                    writer
                        .write_field(&*column.as_bytes())
                        .map_err(write_error)?;
                }
                writer.write_record(None::<&[u8]>).map_err(write_error)?;
            }
            for i in 1..=shapes.len() {
                let row: Table = rows.raw_get(i)?;
                for column in &columns {
                    let value: Value = row.raw_get(column)?;
                    let place = || format!("row {i}, column {:?}", column.to_string_lossy());
                    field(lua, value, place, &mut text)?;
                    writer.write_field(&text).map_err(write_error)?;
                    meter.spend(text.len() + VALUE_COST)?;
                }
                writer.write_record(None::<&[u8]>).map_err(write_error)?;
                meter.hold(writer.get_ref().capacity());
                meter.spend(VALUE_COST)?;
            }
        } else {
            for (i, shape) in (1..).zip(&shapes) {
                let row: Table = rows.raw_get(i)?;
                let length = match shape {
                    RowShape::Fields(length) => *length,
                    RowShape::Empty | RowShape::Keyed => 0,
                };
                for j in 1..=length {
                    let value: Value = row.raw_get(j)?;
                    field(lua, value, || format!("row {i}, field {j}"), &mut text)?;
                    writer.write_field(&text).map_err(write_error)?;
                    meter.spend(text.len() + VALUE_COST)?;
                }
                writer.write_record(None::<&[u8]>).map_err(write_error)?;
                meter.hold(writer.get_ref().capacity());
                meter.spend(VALUE_COST)?;
            }
        }
        let text = writer
            .into_inner()
            .map_err(|e| error(function, e.to_string()))?;
        limit_on_memory(&tripwire, lua.create_string(&text))
    })
}

/// The shapes of the rows of `csv.encode`'s argument, which must be an array of tables,
/// so that no row is left out unseen.
fn row_shapes(lua: &Lua, rows: &Table) -> mlua::Result<Vec<RowShape>> {
    let length = rows.raw_len();
    let (mut sequence, mut shapes) = (true, Vec::with_capacity(length));
    // SAFETY: reads `rows` and its rows with `lua_rawgeti` and `lua_next`, which allocate
    // nothing and cannot fail on tables left unchanged; the stack is left as it was.
    unsafe {
        lua.exec_raw::<()>(rows, |state| {
            sequence = raw_is_sequence(state, length);
            for i in 1..=length {
                if !sequence {
                    break;
                }
                ffi::lua_rawgeti(state, 1, i as ffi::lua_Integer);
                let shape = match ffi::lua_type(state, -1) {
                    ffi::LUA_TTABLE => raw_row_shape(state).ok_or(true),
                    _ => Err(false),
                };
                shapes.push(shape);
                ffi::lua_pop(state, 1);
            }
        })?;
    }
    if !sequence {
        return Err(not_a_sequence(rows, length));
    }
    // A row that is not a table, or whose keys are of neither kind or of both, is
    // described here.
    (1..)
        .zip(shapes)
        .map(|(i, shape)| match shape {
            Ok(shape) => Ok(shape),
            Err(true) => row_shape(&rows.raw_get::<Table>(i)?, i),
            Err(false) => Err(error(
                BuiltinId::CsvEncode,
                format!(
                    "row {i} must be a table, got {}",
                    rows.raw_get::<Value>(i)?.type_name()
                ),
            )),
        })
        .collect()
}

/// The most columns `csv.encode` writes: each is held as a handle while the rows are
/// written, and mlua has room for about a million.
const MAX_COLUMNS: usize = 500_000;

fn too_many_columns(count: usize) -> mlua::Result<()> {
    if count > MAX_COLUMNS {
        return Err(error(
            BuiltinId::CsvEncode,
            format!("{count} columns; it writes at most {MAX_COLUMNS}"),
        ));
    }
    Ok(())
}

/// `opts.columns`, if given.
fn column_names(lua: &Lua, opts: &Table) -> mlua::Result<Option<Vec<LuaString>>> {
    let bad = || {
        error(
            BuiltinId::CsvEncode,
            "columns must be an array of column names".into(),
        )
    };
    match opts.get::<Value>("columns")? {
        Value::Nil => Ok(None),
        Value::Table(columns) => {
            too_many_columns(columns.raw_len())?;
            let columns = Value::Table(columns);
            Ok(Some(
                Vec::<LuaString>::from_lua(columns, lua).map_err(|_| bad())?,
            ))
        }
        _ => Err(bad()),
    }
}

/// Whether the keys of the table at stack index 1 are exactly 1..`length`.
///
/// # Safety
/// Index 1 of `state`'s stack must be a table, with room for two more values.
unsafe fn raw_is_sequence(state: *mut ffi::lua_State, length: usize) -> bool {
    unsafe {
        ffi::lua_pushnil(state);
        while ffi::lua_next(state, 1) != 0 {
            ffi::lua_pop(state, 1);
            let position = (ffi::lua_isinteger(state, -1) != 0)
                .then(|| usize::try_from(ffi::lua_tointeger(state, -1)).unwrap_or(0));
            if !position.is_some_and(|i| (1..=length).contains(&i)) {
                ffi::lua_pop(state, 1);
                return false;
            }
        }
    }
    true
}

/// The error for a rows table with a key other than 1..`length`, naming it.
fn not_a_sequence(rows: &Table, length: usize) -> mlua::Error {
    let key = rows
        .pairs::<Value, Value>()
        .filter_map(Result::ok)
        .map(|(key, _)| key)
        .find(|key| {
            !matches!(key, Value::Integer(i)
                if usize::try_from(*i).is_ok_and(|i| (1..=length).contains(&i)))
        });
    error(
        BuiltinId::CsvEncode,
        format!(
            "rows must be an array (keys 1..n), but it has key {}",
            key.as_ref().map_or("?".to_string(), describe_key)
        ),
    )
}

/// What one row of `csv.encode` is, from its keys.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum RowShape {
    /// No keys: an empty row of either kind.
    Empty,
    /// Fields by position, this many (the largest key: a hole is an empty field).
    Fields(usize),
    /// Fields by column name.
    Keyed,
}

/// The shape of the table on top of the stack, or `None` if it has a key of neither
/// kind, or keys of both: reading it with mlua's `pairs` instead would double the time
/// of an encode.
///
/// # Safety
/// The top of `state`'s stack must be a table, with room for two more values.
unsafe fn raw_row_shape(state: *mut ffi::lua_State) -> Option<RowShape> {
    let (mut names, mut length, mut odd) = (false, None::<usize>, false);
    unsafe {
        ffi::lua_pushnil(state);
        while ffi::lua_next(state, -2) != 0 {
            ffi::lua_pop(state, 1);
            match ffi::lua_type(state, -1) {
                ffi::LUA_TSTRING => names = true,
                ffi::LUA_TNUMBER if ffi::lua_isinteger(state, -1) != 0 => {
                    match usize::try_from(ffi::lua_tointeger(state, -1)) {
                        Ok(i) if i >= 1 => length = Some(length.unwrap_or(0).max(i)),
                        _ => odd = true,
                    }
                }
                _ => odd = true,
            }
        }
    }
    match (odd, names, length) {
        (true, _, _) | (false, true, Some(_)) => None,
        (false, true, None) => Some(RowShape::Keyed),
        (false, false, Some(length)) => Some(RowShape::Fields(length)),
        (false, false, None) => Some(RowShape::Empty),
    }
}

/// The shape of row `n`, refusing keys that are neither names nor positions, and a row
/// with both (one kind would be left out).
fn row_shape(row: &Table, n: usize) -> mlua::Result<RowShape> {
    let mut name: Option<LuaString> = None;
    let mut first_position: Option<i64> = None;
    let mut length = 0usize;
    for pair in row.pairs::<Value, Value>() {
        match pair?.0 {
            Value::String(key) => {
                name.get_or_insert(key);
            }
            Value::Integer(i) if i >= 1 => {
                first_position = Some(first_position.map_or(i, |p| p.min(i)));
                length = length.max(usize::try_from(i).unwrap_or(usize::MAX));
            }
            key => {
                return Err(error(
                    BuiltinId::CsvEncode,
                    format!(
                        "row {n} has key {}: a row's keys are column names (strings) or positions 1..n",
                        describe_key(&key)
                    ),
                ));
            }
        }
    }
    match (name, first_position) {
        (Some(name), Some(position)) => Err(error(
            BuiltinId::CsvEncode,
            format!(
                "row {n} mixes column names and positions (keys {:?} and {position})",
                name.to_string_lossy()
            ),
        )),
        (Some(_), None) => Ok(RowShape::Keyed),
        (None, Some(_)) => Ok(RowShape::Fields(length)),
        (None, None) => Ok(RowShape::Empty),
    }
}

/// Whether the rows are keyed by column name (else arrays of fields): as `columns` says
/// when given, else as the first row that is not empty says (keyed if all are, none if
/// there are no rows), every other row alike.
fn keyed_rows(shapes: &[RowShape], columns: bool) -> mlua::Result<bool> {
    let first = shapes.iter().position(|shape| *shape != RowShape::Empty);
    let keyed = columns || first.map_or(!shapes.is_empty(), |i| shapes[i] == RowShape::Keyed);
    let what = |shape: RowShape| match shape {
        RowShape::Keyed => "keyed by column name",
        _ => "an array of fields",
    };
    for (i, &shape) in shapes.iter().enumerate() {
        let fits = match shape {
            RowShape::Empty => true,
            RowShape::Keyed => keyed,
            RowShape::Fields(_) => !keyed,
        };
        if fits {
            continue;
        }
        let but = match first {
            Some(first) if !columns => {
                format!("row {} is {}", first + 1, what(shapes[first]))
            }
            _ => "columns picks fields by name".to_string(),
        };
        return Err(error(
            BuiltinId::CsvEncode,
            format!("row {} is {}, but {but}", i + 1, what(shape)),
        ));
    }
    Ok(keyed)
}

/// Every key of the keyed rows, sorted: the columns when none are given.
fn sorted_keys(lua: &Lua, rows: &Table, count: usize) -> mlua::Result<Vec<LuaString>> {
    let mut keys: BTreeSet<Vec<u8>> = BTreeSet::new();
    for i in 1..=count {
        let row: Table = rows.raw_get(i)?;
        for pair in row.pairs::<Value, Value>() {
            if let (Value::String(key), _) = pair? {
                keys.insert(key.as_bytes().to_vec());
            }
        }
    }
    too_many_columns(keys.len())?;
    keys.iter().map(|key| lua.create_string(key)).collect()
}

/// One field's text, into `text`: strings as they are, numbers as `tostring` writes
/// them, booleans as `true`/`false`, nil and `json.null` empty; `place` names it in an
/// error.
fn field(
    lua: &Lua,
    value: Value,
    place: impl Fn() -> String,
    text: &mut Vec<u8>,
) -> mlua::Result<()> {
    text.clear();
    match value {
        Value::Nil => {}
        Value::LightUserData(p) if p.0.is_null() => {}
        Value::String(s) => text.extend_from_slice(&s.as_bytes()),
        Value::Integer(i) => text.extend_from_slice(i.to_string().as_bytes()),
        Value::Boolean(b) => text.extend_from_slice(if b { b"true" } else { b"false" }),
        Value::Number(_) => {
            if let Some(s) = lua.coerce_string(value)? {
                text.extend_from_slice(&s.as_bytes());
            }
        }
        other => {
            return Err(error(
                BuiltinId::CsvEncode,
                format!(
                    "{} is a {}; a field must be a string, number or boolean",
                    place(),
                    other.type_name()
                ),
            ));
        }
    }
    Ok(())
}
