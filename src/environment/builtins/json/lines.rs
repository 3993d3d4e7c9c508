//! `json.lines`: the decoded non-blank lines of a JSON-lines text, a batch per call.

use std::ffi::c_int;
use std::rc::Rc;

use mlua::{Function, Lua, LuaString, Value, ffi};

use super::super::reading::{RecordSource, batched_iterator, text_arg};
use super::without_bom;
use crate::conventions::builtins::BuiltinId;
use crate::engines::meter::WorkMeter;
use crate::environment::limits::Tripwire;
use crate::environment::lua_json::{
    ARRAY_METATABLE_C, Builder, MAX_DEPTH, Tape, array_metatable, read_text,
};

/// Where one `json.lines` iteration stands.
struct Lines {
    text: LuaString,
    /// Where the next line starts.
    position: usize,
    /// The number of the last line read.
    line: usize,
    tape: Tape,
    /// The arrays' metatable's stack index in a batch's protected call.
    metatable: c_int,
}

impl Lines {
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
}

impl RecordSource for Lines {
    fn text(&self) -> &LuaString {
        &self.text
    }

    unsafe fn begin(&mut self, state: *mut ffi::lua_State) -> mlua::Result<()> {
        // SAFETY: as the trait promises: the buffer at 1, nothing else; room is made.
        unsafe {
            ffi::lua_getfield(state, ffi::LUA_REGISTRYINDEX, ARRAY_METATABLE_C.as_ptr());
            self.metatable = ffi::lua_gettop(state);
            if ffi::lua_checkstack(state, (2 * MAX_DEPTH + 8) as c_int) == 0 {
                return Err(mlua::Error::RuntimeError(
                    "json: out of Lua stack space".into(),
                ));
            }
        }
        Ok(())
    }

    unsafe fn push_next(
        &mut self,
        state: *mut ffi::lua_State,
        text: &[u8],
        meter: &mut WorkMeter,
    ) -> mlua::Result<bool> {
        let Some((start, end)) = self.next_line(text) else {
            return Ok(false);
        };
        let record = &text[start..end];
        let line = Some(self.line);
        let read = read_text(
            BuiltinId::JsonLines.name(),
            record,
            &mut self.tape,
            meter,
            line,
        );
        let pushed = read.and_then(|()| {
            let mut builder = Builder {
                state,
                input: record,
                tape: &self.tape,
                metatable: self.metatable,
                meter,
            };
            // SAFETY: as the trait promises of `state`; the tape and the record are owned
            // outside the protected call.
            unsafe { builder.push_value(&mut 0) }
        });
        self.tape.release_if_large();
        pushed.map(|()| true)
    }
}

/// `json.lines(text)`: an iterator over the decoded non-blank lines.
pub(in crate::environment::builtins) fn lines(
    lua: &Lua,
    tripwire: &Rc<Tripwire>,
) -> mlua::Result<Function> {
    array_metatable(lua)?;
    let tripwire = Rc::clone(tripwire);
    lua.create_function(move |lua, text: Value| {
        let text = text_arg(lua, BuiltinId::JsonLines, text)?;
        let bom = text.as_bytes().len() - without_bom(&text.as_bytes()).len();
        let source = Lines {
            text,
            position: bom,
            line: 0,
            tape: Tape::default(),
            metatable: 0,
        };
        batched_iterator(lua, &tripwire, source)
    })
}
