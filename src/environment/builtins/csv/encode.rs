//! Writing: `csv.encode`, one row at a time, RFC 4180 quoting.

use std::collections::BTreeSet;
use std::rc::Rc;

use csv::{Terminator, WriterBuilder};
use mlua::{FromLua, Function, Lua, LuaString, Table, Value, ffi};

use super::super::options::check_known as known_options;
use super::super::reading::{describe_value, limit_on_memory};
use super::{error, flag, separator};
use crate::conventions::builtins::BuiltinId;
use crate::engines::meter::{VALUE_COST, WorkMeter};
use crate::environment::errors::quoted;
use crate::environment::limits::Tripwire;

/// `csv.encode(rows [, opts])` → the CSV text.
pub(in crate::environment::builtins) fn encode(
    lua: &Lua,
    tripwire: &Rc<Tripwire>,
) -> mlua::Result<Function> {
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
                    let place = || format!("row {i}, column {}", quoted(&column.as_bytes()));
                    write_field(lua, &mut writer, &mut meter, value, place, write_error)?;
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
                    let place = || format!("row {i}, field {j}");
                    write_field(lua, &mut writer, &mut meter, value, place, write_error)?;
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
            key.as_ref().map_or("?".to_string(), describe_value)
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
                        describe_value(&key)
                    ),
                ));
            }
        }
    }
    match (name, first_position) {
        (Some(name), Some(position)) => Err(error(
            BuiltinId::CsvEncode,
            format!(
                "row {n} mixes column names and positions (keys {} and {position})",
                quoted(&name.as_bytes())
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

/// Writes one field: a string, number or boolean (nil and `json.null` are empty), after
/// checking the memory limit with room for it quoted (every quote doubled), then counts
/// it. A string is written from Lua's bytes, with no copy.
fn write_field(
    lua: &Lua,
    writer: &mut csv::Writer<Vec<u8>>,
    meter: &mut WorkMeter,
    value: Value,
    place: impl Fn() -> String,
    write_error: impl Fn(csv::Error) -> mlua::Error,
) -> mlua::Result<()> {
    let (number, borrowed);
    let bytes: &[u8] = match &value {
        Value::Nil => b"",
        Value::LightUserData(p) if p.0.is_null() => b"",
        Value::Boolean(b) => {
            if *b {
                b"true"
            } else {
                b"false"
            }
        }
        Value::String(s) => {
            borrowed = s.as_bytes();
            &borrowed
        }
        Value::Integer(i) => {
            number = i.to_string().into_bytes();
            &number
        }
        Value::Number(_) => {
            let text = lua.coerce_string(value.clone())?;
            number = text.map(|s| s.as_bytes().to_vec()).unwrap_or_default();
            &number
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
    };
    let (length, capacity) = (writer.get_ref().len(), writer.get_ref().capacity());
    // Held as each field is written, not only after each row: a row's width is its
    // largest position, which may be far past its fields (`{[2^40] = 1}`), and a column
    // of keyed rows is written, empty, in every row without it.
    meter.hold(capacity);
    meter.check_growth(
        length,
        capacity,
        bytes.len().saturating_mul(2).saturating_add(2),
    )?;
    writer.write_field(bytes).map_err(write_error)?;
    meter.spend(bytes.len() + VALUE_COST)
}
