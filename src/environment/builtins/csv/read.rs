//! Reading: `csv.parse` and `csv.rows`, on `csv_core` a chunk of input at a time.

use std::ffi::c_int;
use std::rc::Rc;

use csv_core::ReadRecordResult;
use mlua::{Function, Lua, LuaString, Table, Value, ffi};

use super::super::reading::{RecordSource, batched_iterator, limit_on_memory, text_arg};
use super::{ReadOptions, error};
use crate::conventions::builtins::BuiltinId;
use crate::engines::meter::{VALUE_COST, WorkMeter, with_collector_paused};
use crate::environment::errors::quoted;
use crate::environment::limits::Tripwire;

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
                "the header names column {} twice (the second time in column {}); pass {{header = false}} to read rows as arrays",
                quoted(name),
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
pub(in crate::environment::builtins) fn parse(
    lua: &Lua,
    tripwire: &Rc<Tripwire>,
) -> mlua::Result<Function> {
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
        // SAFETY: the names (or nil) are at stack index 1; the fill pushes the rows, a
        // table of strings, integers and tables of them, and leaves only it. The reader
        // and the record are owned outside the call.
        let built = with_collector_paused(lua, true, || unsafe {
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
        });
        let rows = limit_on_memory(&tripwire, built)?;
        read?;
        Ok((rows, names.map(|(names, _)| names)))
    })
}

/// Where one `csv.rows` iteration stands.
struct Rows {
    text: LuaString,
    records: Records,
    record: Record,
    header: bool,
    /// The header's names (a Lua array) and their number, once read.
    names: Option<(Table, usize)>,
    started: bool,
    /// The header's error, raised again by every later call.
    failed: Option<mlua::Error>,
}

impl RecordSource for Rows {
    fn text(&self) -> &LuaString {
        &self.text
    }

    /// Reads the header, the first time.
    fn prepare(&mut self, lua: &Lua, tripwire: &Tripwire) -> mlua::Result<()> {
        if let Some(error) = &self.failed {
            return Err(error.clone());
        }
        if std::mem::replace(&mut self.started, true) || !self.header {
            return Ok(());
        }
        let text = self.text.clone();
        let (records, record) = (&mut self.records, &mut self.record);
        let mut meter = WorkMeter::new(lua, tripwire);
        let function = BuiltinId::CsvRows;
        match header_names(
            lua,
            tripwire,
            function,
            &text.as_bytes(),
            records,
            record,
            &mut meter,
        ) {
            Ok(names) => self.names = Some(names),
            Err(error) => {
                self.failed = Some(error.clone());
                return Err(error);
            }
        }
        Ok(())
    }

    fn keys(&self) -> Option<Table> {
        self.names.as_ref().map(|(names, _)| names.clone())
    }

    unsafe fn push_next(
        &mut self,
        state: *mut ffi::lua_State,
        text: &[u8],
        meter: &mut WorkMeter,
    ) -> mlua::Result<bool> {
        if !self.records.next(text, &mut self.record, meter)? {
            return Ok(false);
        }
        let keys = self.names.as_ref().map(|&(_, n)| (2, n));
        // SAFETY: as the trait promises of `state`, with the names at index 2; the row
        // is strings and integers in a table.
        unsafe { push_row(state, &self.record, keys, meter)? };
        Ok(true)
    }
}

/// `csv.rows(text [, opts])` → an iterator over the rows.
pub(in crate::environment::builtins) fn rows(
    lua: &Lua,
    tripwire: &Rc<Tripwire>,
) -> mlua::Result<Function> {
    let tripwire = Rc::clone(tripwire);
    lua.create_function(move |lua, (text, opts): (Value, Option<Table>)| {
        let function = BuiltinId::CsvRows;
        let text = text_arg(lua, function, text)?;
        let options = ReadOptions::from_table(function, opts.as_ref())?;
        let source = Rows {
            text,
            records: Records::new(options.sep),
            record: Record::default(),
            header: options.header,
            names: None,
            started: false,
            failed: None,
        };
        batched_iterator(lua, &tripwire, source)
    })
}
