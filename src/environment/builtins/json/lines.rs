//! `json.lines`: the decoded non-blank lines of a JSON-lines text, a batch per call.

use std::cell::RefCell;
use std::rc::Rc;

use mlua::{Function, Lua, LuaString, Table, Value, ffi};

use super::super::reading::{Tidy, buffered_iterator, limit_on_memory, text_arg};
use super::decode::{Builder, Tape, read};
use super::{ARRAY_METATABLE_C, MAX_DEPTH, install_array_metatable, without_bom};
use crate::conventions::builtins::BuiltinId;
use crate::environment::limits::Tripwire;
use crate::environment::meter::WorkMeter;

/// Records `json.lines` decodes per call into Rust; its iterator, a Lua closure, hands
/// them out one by one, so a record costs no crossing of the Rust/Lua boundary.
const LINES_BATCH: usize = 64;

/// The state of one `json.lines` iteration.
struct LinesState {
    text: LuaString,
    /// Where the next line starts.
    position: usize,
    /// The number of the last line read.
    line: usize,
    tape: Tape,
    tidy: Tidy,
    /// An error met after some records of a batch: raised by the next call, once the
    /// records before it have been handed out.
    failed: Option<mlua::Error>,
}

impl LinesState {
    /// The next line that is not blank: where it starts and ends.
    fn next_line(&mut self, bytes: &[u8]) -> Option<(usize, usize)> {
        while self.position < bytes.len() {
            let start = self.position;
            let end = memchr::memchr(b'\n', &bytes[start..]).map_or(bytes.len(), |i| start + i);
            self.position = end + 1;
            self.line += 1;
            if !bytes[start..end].iter().all(u8::is_ascii_whitespace) {
                return Some((start, end));
            }
        }
        None
    }

    /// Decodes up to [`LINES_BATCH`] records into `buffer[1..n]` in one protected call;
    /// returns `n`, 0 at the end.
    fn refill(&mut self, lua: &Lua, tripwire: &Tripwire, buffer: &Table) -> mlua::Result<usize> {
        if let Some(error) = self.failed.take() {
            return Err(error);
        }
        self.tidy.after_record(lua)?;
        let text = self.text.clone();
        let bytes = text.as_bytes();
        let mut meter = WorkMeter::new(lua, tripwire);
        let mut count = 0usize;
        let mut failure = None;
        // SAFETY: each record pushed is one value of strings, numbers, booleans, light
        // userdata and tables, stored in the buffer (stack index 1); the tape, the text
        // and the state are owned outside this call, and nothing inside it owns memory
        // while a Lua function that may fail runs.
        let filled = unsafe {
            lua.exec_raw::<()>(buffer, |state| {
                ffi::lua_getfield(state, ffi::LUA_REGISTRYINDEX, ARRAY_METATABLE_C.as_ptr());
                let metatable = ffi::lua_gettop(state);
                if ffi::lua_checkstack(state, (2 * MAX_DEPTH + 8) as std::ffi::c_int) == 0 {
                    failure = Some(mlua::Error::RuntimeError(
                        "json: out of Lua stack space".into(),
                    ));
                }
                while failure.is_none() && count < LINES_BATCH {
                    let Some((start, end)) = self.next_line(&bytes) else {
                        break;
                    };
                    let record = &bytes[start..end];
                    let function = BuiltinId::JsonLines.name();
                    let line = Some(self.line);
                    if let Err(e) = read(function, record, &mut self.tape, &mut meter, line) {
                        failure = Some(e);
                        break;
                    }
                    let mut builder = Builder {
                        state,
                        input: record,
                        tape: &self.tape,
                        metatable,
                        meter: &mut meter,
                    };
                    if let Err(e) = builder.push_value(&mut 0) {
                        failure = Some(e);
                        break;
                    }
                    ffi::lua_rawseti(state, 1, count as ffi::lua_Integer + 1);
                    count += 1;
                }
                ffi::lua_settop(state, 0);
            })
        };
        limit_on_memory(tripwire, filled)?;
        match failure {
            Some(error) if count == 0 => limit_on_memory(tripwire, Err(error)),
            Some(error) => {
                self.failed = Some(error);
                Ok(count)
            }
            None => Ok(count),
        }
    }
}

/// `json.lines(text)`: an iterator over the decoded non-blank lines.
pub(in crate::environment::builtins) fn lines(
    lua: &Lua,
    tripwire: &Rc<Tripwire>,
) -> mlua::Result<Function> {
    install_array_metatable(lua)?;
    let tripwire = Rc::clone(tripwire);
    lua.create_function(move |lua, text: Value| {
        let text = text_arg(lua, BuiltinId::JsonLines, text)?;
        let buffer = lua.create_table_with_capacity(LINES_BATCH, 0)?;
        let bom = text.as_bytes().len() - without_bom(&text.as_bytes()).len();
        let state = RefCell::new(LinesState {
            tidy: Tidy::new(lua, text.as_bytes().len()),
            text,
            position: bom,
            line: 0,
            tape: Tape::default(),
            failed: None,
        });
        let tripwire = Rc::clone(&tripwire);
        let filled = buffer.clone();
        let refill =
            lua.create_function(move |lua, ()| state.borrow_mut().refill(lua, &tripwire, &filled))?;
        buffered_iterator(lua, refill, buffer)
    })
}
