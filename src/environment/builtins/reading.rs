//! What the built-ins reading a large text share (`json`, `csv`): the text argument,
//! a memory refusal kept as the memory limit, the batched iterator and its collector.

use mlua::{Function, Lua, LuaString, Table, Value};

use crate::conventions::builtins::BuiltinId;
use crate::environment::chunks::InternalChunk;
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

/// Refuses a key of the options table `opts` that is not one of `known`: a misspelt
/// option, or one borrowed from elsewhere (Python's `delimiter` for `sep`), would
/// otherwise be ignored without a word.
pub(super) fn known_options(function: BuiltinId, opts: &Table, known: &[&str]) -> mlua::Result<()> {
    for pair in opts.pairs::<Value, Value>() {
        let key = pair?.0;
        if let Value::String(name) = &key
            && known.iter().any(|k| name.as_bytes() == k.as_bytes())
        {
            continue;
        }
        let key = match &key {
            Value::String(name) => format!("{:?}", name.to_string_lossy()),
            Value::Integer(i) => i.to_string(),
            Value::Number(n) => n.to_string(),
            Value::Boolean(b) => b.to_string(),
            other => format!("a {}", other.type_name()),
        };
        return Err(mlua::Error::RuntimeError(format!(
            "{}: unknown option {key} (the options are {})",
            function.name(),
            known.join(", ")
        )));
    }
    Ok(())
}

/// An iterator handing out `buffer[1..n]`, then calling `refill` (which fills the
/// buffer and returns `n`, 0 at the end) for more: `json.lines` and `csv.rows` decode a
/// batch per call into Rust, and a record costs no crossing of the boundary.
pub(super) fn buffered_iterator(
    lua: &Lua,
    refill: Function,
    buffer: Table,
) -> mlua::Result<Function> {
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
pub(super) struct Tidy {
    text: usize,
    next: usize,
}

/// The least garbage an iterator lets pile up before it collects.
const MIN_GARBAGE: usize = 16 << 20;

impl Tidy {
    pub(super) fn new(lua: &Lua, text: usize) -> Self {
        let mut tidy = Tidy { text, next: 0 };
        tidy.plan(lua.used_memory());
        tidy
    }

    fn plan(&mut self, live: usize) {
        let others = live.saturating_sub(self.text);
        self.next = live.saturating_add(others.max(MIN_GARBAGE));
    }

    /// Collects if enough garbage may have piled up since the last time.
    pub(super) fn after_record(&mut self, lua: &Lua) -> mlua::Result<()> {
        if lua.used_memory() >= self.next && lua.gc_is_running() {
            lua.gc_collect()?;
            self.plan(lua.used_memory());
        }
        Ok(())
    }
}
