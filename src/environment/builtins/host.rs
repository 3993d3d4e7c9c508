//! Host functions of the host's own providers, wrapped for Lua: over Lua values
//! ([`RawHandler`]) or over JSON ([`JsonHandler`]); and the function an out-of-scope name
//! is bound to.

use std::rc::Rc;
use std::sync::Arc;

use mlua::{Function, Lua, MultiValue, Value};

use super::state::BuiltinState;
use crate::catalog::Catalog;
use crate::environment::errors::{lua_message, raise_failures};
use crate::environment::journal;
use crate::environment::lua_json;
use crate::providers::host::JsonHandler;
use crate::providers::{Call, Effect, RawHandler};

/// A function that only raises `message`: what an out-of-scope name is bound to.
pub(super) fn refuse(lua: &Lua, message: String) -> mlua::Result<Function> {
    lua.create_function(move |_, _: MultiValue| -> mlua::Result<()> {
        Err(mlua::Error::RuntimeError(message.clone()))
    })
}

/// What a host handler is told about its call.
fn call<'a>(lua: &'a Lua, state: &BuiltinState, catalog: &Catalog, name: &'a str) -> Call<'a> {
    Call {
        lua,
        name,
        time_left: state.tripwire.time_left(),
        depth: catalog.scope().depth,
    }
}

/// A host function over Lua values.
pub(super) fn host_raw(
    lua: &Lua,
    state: &Rc<BuiltinState>,
    catalog: &Arc<Catalog>,
    name: &str,
    effect: Effect,
    handler: Arc<RawHandler>,
) -> mlua::Result<Function> {
    let (state, catalog, name) = (Rc::clone(state), Arc::clone(catalog), name.to_string());
    let inner = lua.create_function(move |lua, args: MultiValue| {
        let guard = &state.tripwire.guard;
        let result = journal::host::raw_call(lua, guard, &state.journal, effect, &name, || {
            handler(&call(lua, &state, &catalog, &name), args)
        });
        outcome(lua, result)
    })?;
    raise_failures(lua, inner)
}

/// A host function over JSON: arguments converted by the one Lua ↔ JSON mapping
/// ([`lua_json`]; missing trailing ones as `null`, extra ones dropped unless it takes
/// `...`), the result converted back (`null` is `nil`); an `Err`, or a value that cannot
/// cross, is a Lua error prefixed with the name.
pub(super) fn host_json(
    lua: &Lua,
    state: &Rc<BuiltinState>,
    catalog: &Arc<Catalog>,
    name: &str,
    params: &[crate::Param],
    effect: Effect,
    handler: Arc<JsonHandler>,
) -> mlua::Result<Function> {
    let (state, catalog, name) = (Rc::clone(state), Arc::clone(catalog), name.to_string());
    let arity = params.len();
    let varargs = params.last().is_some_and(|p| p.name() == "...");
    let prefix = format!("{name}: ");
    let inner = lua.create_function(move |lua, args: MultiValue| {
        let guard = &state.tripwire;
        let called = || -> mlua::Result<Value> {
            let mut values = lua_json::arguments_to_json(lua, guard, &args)
                .map_err(|error| error.into_lua(&prefix))?;
            values.resize(values.len().max(arity), serde_json::Value::Null);
            if !varargs {
                values.truncate(arity);
            }
            let result = journal::host::json_call(&state.journal, effect, &name, || {
                handler(&call(lua, &state, &catalog, &name), values)
            })
            .map_err(|error| mlua::Error::RuntimeError(format!("{prefix}{error}")))?;
            lua_json::to_lua(lua, guard, &result, "result").map_err(|error| error.into_lua(&prefix))
        };
        outcome(lua, called().map(|value| MultiValue::from_iter([value])))
    })?;
    raise_failures(lua, inner)
}

/// A handler's result as `true, results…` or `false, message` for [`raise_failures`];
/// running out of memory propagates as it is.
fn outcome(lua: &Lua, result: mlua::Result<MultiValue>) -> mlua::Result<MultiValue> {
    match result {
        Ok(mut values) => {
            values.push_front(Value::Boolean(true));
            Ok(values)
        }
        // Out of memory stays the memory limit; a limit a handler trips is re-raised by
        // the instruction hook whatever the message becomes.
        Err(error @ mlua::Error::MemoryError(_)) => Err(error),
        Err(error) => {
            let message = Value::String(lua.create_string(lua_message(&error))?);
            Ok(MultiValue::from_iter([Value::Boolean(false), message]))
        }
    }
}
