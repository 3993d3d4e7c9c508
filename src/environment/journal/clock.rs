//! The clock and the random generator, journaled: `os.time`, `os.clock` and `os.date`
//! give back recorded values on re-execution, and `math.random` is seeded from a
//! journaled seed the first time it draws.

use std::hash::{BuildHasher, RandomState};
use std::rc::Rc;

use mlua::{Lua, MultiValue, Value};

use super::{Journal, JournalEntry};
use crate::environment::chunks::InternalChunk;
use crate::environment::limits::Tripwire;
use crate::environment::lua_json;

/// Replaces `os.time`, `os.clock`, `os.date`, `math.random` and `math.randomseed` with
/// their journaled forms.
pub(crate) fn install(
    lua: &Lua,
    journal: &Rc<Journal>,
    tripwire: &Rc<Tripwire>,
) -> mlua::Result<()> {
    let (replaying, guard) = (Rc::clone(journal), Rc::clone(tripwire));
    let take = lua.create_function(move |lua, call: String| {
        let Some(entry) = replaying.replay(&call) else {
            return Ok(MultiValue::from_iter([Value::Boolean(false)]));
        };
        let value = lua_json::to_lua(lua, &guard.guard, &entry.value, &call)
            .map_err(|error| error.into_lua(""))?;
        Ok(MultiValue::from_iter([Value::Boolean(true), value]))
    })?;
    let (recording, guard) = (Rc::clone(journal), Rc::clone(tripwire));
    let put = lua.create_function(move |lua, (call, value): (String, Value)| {
        let value = lua_json::to_json(lua, &guard.guard, &value, &call)
            .map_err(|error| error.into_lua(""))?;
        recording.record(JournalEntry::value(call, value));
        Ok(())
    })?;
    // A seed no other environment shares: the process's random hasher keys, mixed.
    let fresh_seed = lua.create_function(|_, ()| {
        Ok(RandomState::new().hash_one(std::time::SystemTime::now()) as i64)
    })?;
    JOURNALED.function(lua)?.call((take, put, fresh_seed))
}

static JOURNALED: InternalChunk = InternalChunk::new(
    "=journal",
    r##"
        local take, put, fresh_seed = ...
        local pcall, error, select = pcall, error, select
        local time, clock, date = os.time, os.clock, os.date
        local random, randomseed = math.random, math.randomseed
        -- The original is called through pcall, and its error raised again at level 2,
        -- so that the message points at the caller's line, as the original's would.
        local function journaled(call, original)
          return function(...)
            local found, value = take(call)
            if found then return value end
            local ok, result = pcall(original, ...)
            if not ok then error(result, 2) end
            put(call, result)
            return result
          end
        end
        os.time = journaled("os.time", time)
        os.clock = journaled("os.clock", clock)
        os.date = journaled("os.date", date)
        local seeded = false
        local function seed_once()
          if seeded then return end
          seeded = true
          local found, seed = take("math.randomseed")
          if not found then
            seed = fresh_seed()
            put("math.randomseed", seed)
          end
          randomseed(seed)
        end
        math.random = function(...)
          seed_once()
          local ok, value = pcall(random, ...)
          if not ok then error(value, 2) end
          return value
        end
        math.randomseed = function(...)
          if select("#", ...) == 0 then
            seeded = false
            seed_once()
            return
          end
          seeded = true
          local ok, err = pcall(randomseed, ...)
          if not ok then error(err, 2) end
        end
        "##,
);
