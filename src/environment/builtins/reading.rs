//! What the built-ins reading a large text share (`json`, `csv`): the text argument,
//! the options table, how a message shows a value, a memory refusal kept as the memory
//! limit, and the batched iterator (`json.lines`, `csv.rows`) with its collector: a
//! [`RecordSource`] says how to read one record.
//!
//! Both build their tables with the Lua C API in one protected call, from data owned
//! outside that call (the JSON event tape, the csv reader and its record), so a Lua
//! allocation failing at the memory limit unwinds past nothing that owns memory.
//!
//! The iterators are one `batched_iterator`: each call into Rust fills a buffer with up to
//! 64 records, and a Lua closure hands them out one by one, so a record costs no crossing
//! of the Rust/Lua boundary. An error met after some records is raised once they have
//! been handed out, so the loop sees every record before the error. The iterator
//! collects its own garbage (`Tidy`) each time the heap has grown by as much as
//! everything but the text it iterates: the usual doubling, with the text, which stays
//! live, left out.

use std::cell::RefCell;
use std::rc::Rc;

use mlua::{Function, Lua, LuaString, Table, Value, ffi};

use crate::conventions::builtins::BuiltinId;
use crate::engines::meter::WorkMeter;
use crate::environment::chunks::InternalChunk;
pub(super) use crate::environment::errors::describe_value;
use crate::environment::errors::{is_memory_error, per_state, plain_message};
use crate::environment::limits::{LimitKind, Tripwire};

/// A Lua allocation refused at the memory limit, recorded as that limit: the protected
/// calls re-raise a tripped limit, so `pcall` cannot swallow it.
pub(super) fn limit_on_memory<T>(tripwire: &Tripwire, result: mlua::Result<T>) -> mlua::Result<T> {
    result.map_err(|error| {
        if is_memory_error(&error) {
            tripwire.trip(LimitKind::Memory)
        } else {
            error
        }
    })
}

/// A text argument: a string (a number is taken as its text, as Lua's own functions do).
pub(super) fn text_arg(lua: &Lua, function: BuiltinId, value: Value) -> mlua::Result<LuaString> {
    match value {
        Value::String(text) => Ok(text),
        Value::Integer(_) | Value::Number(_) => match lua.coerce_string(value)? {
            Some(text) => Ok(text),
            None => Err(mlua::Error::RuntimeError(format!(
                "{}: the text must be a string",
                function.name()
            ))),
        },
        other => Err(mlua::Error::RuntimeError(format!(
            "{}: the text must be a string, got {}",
            function.name(),
            if other.is_nil() {
                "nil".to_string()
            } else {
                format!("a {}", other.type_name())
            }
        ))),
    }
}

/// Records a batched iterator reads into Rust per call; its Lua closure hands them out
/// one by one, so a record costs no crossing of the Rust/Lua boundary.
const BATCH: usize = 64;

/// Where the records of a batched iterator (`json.lines`, `csv.rows`) come from.
pub(super) trait RecordSource {
    /// The text the records are read from.
    fn text(&self) -> &LuaString;

    /// Work before each batch, outside the protected call (`csv.rows` reads its header
    /// the first time); its error is raised.
    fn prepare(&mut self, _lua: &Lua, _tripwire: &Tripwire) -> mlua::Result<()> {
        Ok(())
    }

    /// A table the batch needs on the stack, at index 2 (`csv.rows`' header names).
    fn keys(&self) -> Option<Table> {
        None
    }

    /// Readies the stack at the start of a batch's protected call (the buffer is at
    /// index 1, [`RecordSource::keys`] at 2).
    ///
    /// # Safety
    /// `state` is in the protected call, its stack as said.
    unsafe fn begin(&mut self, _state: *mut ffi::lua_State) -> mlua::Result<()> {
        Ok(())
    }

    /// Pushes the next record read from `text`, or returns false at the end.
    ///
    /// # Safety
    /// `state` is in the protected call; the record pushed is one value that owns nothing
    /// on the Rust side (strings, numbers, booleans, light userdata, tables of them), and
    /// nothing owns memory here while a Lua function that may fail runs.
    unsafe fn push_next(
        &mut self,
        state: *mut ffi::lua_State,
        text: &[u8],
        meter: &mut WorkMeter,
    ) -> mlua::Result<bool>;
}

/// One iteration's state: its source, its collector, and an error met after some records
/// of a batch, raised by the next call once the records before it have been handed out.
struct Batches<S> {
    source: S,
    tidy: Tidy,
    pending: Option<mlua::Error>,
}

impl<S: RecordSource> Batches<S> {
    /// Reads up to [`BATCH`] records into `buffer[1..n]` in one protected call; returns
    /// `n`, 0 at the end. An error met before any record is raised now; a memory refusal
    /// is the memory limit.
    fn refill(&mut self, lua: &Lua, tripwire: &Tripwire, buffer: &Table) -> mlua::Result<usize> {
        if let Some(error) = self.pending.take() {
            return Err(error);
        }
        self.tidy.after_record(lua)?;
        self.source.prepare(lua, tripwire)?;
        let text = self.source.text().clone();
        let bytes = text.as_bytes();
        let mut meter = WorkMeter::new(lua, tripwire);
        let (mut count, mut failure) = (0usize, None);
        let source = &mut self.source;
        // SAFETY: the records pushed are stored in the buffer (stack index 1), as
        // `RecordSource::push_next` promises of them; the text and the source are owned
        // outside this call.
        let filled = unsafe {
            lua.exec_raw::<()>((buffer, source.keys()), |state| {
                if let Err(e) = source.begin(state) {
                    failure = Some(e);
                }
                while failure.is_none() && count < BATCH {
                    match source.push_next(state, &bytes, &mut meter) {
                        Ok(true) => {
                            count += 1;
                            ffi::lua_rawseti(state, 1, count as ffi::lua_Integer);
                        }
                        Ok(false) => break,
                        Err(e) => failure = Some(e),
                    }
                }
                ffi::lua_settop(state, 0);
            })
        };
        limit_on_memory(tripwire, filled)?;
        match failure {
            Some(error) if count == 0 => limit_on_memory(tripwire, Err(error)),
            Some(error) => {
                self.pending = Some(error);
                Ok(count)
            }
            None => Ok(count),
        }
    }
}

/// An iterator over the records of `source`, read a batch per call into Rust and handed
/// out by a Lua closure: a failure is raised as a plain string at the loop's line, as a
/// built-in's error is.
pub(super) fn batched_iterator<S: RecordSource + 'static>(
    lua: &Lua,
    tripwire: &Rc<Tripwire>,
    source: S,
) -> mlua::Result<Function> {
    let batches = RefCell::new(Batches {
        tidy: Tidy::new(lua, source.text().as_bytes().len()),
        source,
        pending: None,
    });
    let buffer = lua.create_table_with_capacity(BATCH, 0)?;
    let filled = buffer.clone();
    let tripwire = Rc::clone(tripwire);
    let refill =
        lua.create_function(move |lua, ()| batches.borrow_mut().refill(lua, &tripwire, &filled))?;
    buffered_iterator(lua, refill, buffer)
}

/// An iterator handing out `buffer[1..n]`, then calling `refill` (which fills the
/// buffer and returns `n`, 0 at the end) for more.
fn buffered_iterator(lua: &Lua, refill: Function, buffer: Table) -> mlua::Result<Function> {
    let iterator = per_state(lua, "rlm.buffered_iterator", || {
        BUFFERED_ITERATOR.function(lua)?.call((
            lua.globals().get::<Function>("pcall")?,
            lua.globals().get::<Function>("error")?,
            plain_message(lua)?,
        ))
    })?;
    iterator.call::<Function>((refill, buffer))
}

/// The iterator of [`buffered_iterator`]; a failure of `refill` is raised as a plain
/// string at the loop's line, as a built-in's error is.
static BUFFERED_ITERATOR: InternalChunk = InternalChunk::new(
    "=builtin",
    r#"
        local pcall, error, message = ...
        return function(refill, buffer)
          local n, i = 0, 0
          return function()
            i = i + 1
            if i > n then
              local ok, count = pcall(refill)
              if not ok then
                n, i = 0, 0
                error(message(count))
              end
              n, i = count, 1
              if n == 0 then
                i = 0
                return nil
              end
            end
            return buffer[i]
          end
        end
        "#,
);

/// Keeps an iterator's garbage from piling up: Lua starts a collection when the heap has
/// doubled since the last one, and the text being iterated (often a 100 MB `context`)
/// counts in that heap, so without this each record's short strings would fill Lua's
/// string table by the million (every new string then costs a cache miss) before the
/// collector ran. This collects when the heap has grown by as much as everything but
/// the text (at least [`MIN_GARBAGE`]): the usual doubling, the text left out.
struct Tidy {
    text: usize,
    next: usize,
}

/// The least garbage an iterator lets pile up before it collects.
const MIN_GARBAGE: usize = 16 << 20;

impl Tidy {
    fn new(lua: &Lua, text: usize) -> Self {
        let mut tidy = Tidy { text, next: 0 };
        tidy.plan(lua.used_memory());
        tidy
    }

    fn plan(&mut self, live: usize) {
        let others = live.saturating_sub(self.text);
        self.next = live.saturating_add(others.max(MIN_GARBAGE));
    }

    /// Collects if enough garbage may have piled up since the last time.
    fn after_record(&mut self, lua: &Lua) -> mlua::Result<()> {
        if lua.used_memory() >= self.next && lua.gc_is_running() {
            lua.gc_collect()?;
            self.plan(lua.used_memory());
        }
        Ok(())
    }
}
