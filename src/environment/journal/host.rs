//! Host functions' calls under the journal, as their [`Effect`] asks: a pure one is
//! simply called; the others' outcomes are journaled, and on re-execution an external
//! one is not called at all while a memory one is called (its state is rebuilt) and
//! given the recorded outcome.

use mlua::{Lua, MultiValue};
use serde_json::Value as Json;

use super::{Journal, JournalEntry};
use crate::engines::limits::Guard;
use crate::environment::errors::lua_message;
use crate::environment::lua_json;
use crate::providers::Effect;

/// A call of the JSON host function `name`: `live` runs it.
pub(crate) fn json_call(
    journal: &Journal,
    effect: Effect,
    name: &str,
    live: impl FnOnce() -> Result<Json, String>,
) -> Result<Json, String> {
    if effect == Effect::Pure {
        return live();
    }
    if let Some(entry) = journal.replay(name) {
        if effect == Effect::Memory {
            // Called for the state it keeps; the recorded outcome is what the code got.
            let _ = live();
        }
        return match entry.error {
            Some(error) => Err(error),
            None => Ok(entry.value),
        };
    }
    let result = live();
    journal.record(match &result {
        Ok(value) => JournalEntry::value(name, value.clone()),
        Err(error) => JournalEntry::error(name, error.clone()),
    });
    result
}

/// A call of the host function `name` over Lua values: its results are journaled as a
/// JSON array. Results JSON cannot hold (a function) are not journaled: a re-execution
/// then calls it live.
pub(crate) fn raw_call(
    lua: &Lua,
    guard: &Guard,
    journal: &Journal,
    effect: Effect,
    name: &str,
    live: impl FnOnce() -> mlua::Result<MultiValue>,
) -> mlua::Result<MultiValue> {
    if effect == Effect::Pure {
        return live();
    }
    if let Some(entry) = journal.replay(name) {
        if effect == Effect::Memory {
            let _ = live()?;
        }
        if let Some(error) = entry.error {
            return Err(mlua::Error::RuntimeError(error));
        }
        let values = match entry.value {
            Json::Array(values) => values,
            other => vec![other],
        };
        return lua_json::arguments_to_lua(lua, guard, &values).map_err(|e| e.into_lua(""));
    }
    let result = live();
    match &result {
        Ok(values) => {
            if let Ok(values) = lua_json::arguments_to_json(lua, guard, values) {
                journal.record(JournalEntry::value(name, Json::Array(values)));
            }
        }
        Err(mlua::Error::MemoryError(_)) => {}
        Err(error) => journal.record(JournalEntry::error(name, lua_message(error))),
    }
    result
}
