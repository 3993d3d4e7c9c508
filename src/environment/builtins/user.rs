//! The `user` provider: `ask_user` and `notify_user`, through the host's [`User`] channel
//! (top-level agent only).
//!
//! [`User`]: super::User

use std::rc::Rc;

use mlua::{Function, Lua};

use super::state::BuiltinState;
use crate::conventions::builtins::BuiltinId;
use crate::environment::hook::hold_ticks;
use crate::environment::journal::host::json_call;
use crate::providers::Effect;

/// `ask_user(question)` → the answer.
pub(super) fn ask_user(lua: &Lua, state: Rc<BuiltinState>) -> mlua::Result<Function> {
    lua.create_function(move |_, question: String| {
        let name = BuiltinId::AskUser.name();
        // The person is outside the sandbox: a re-execution gets the recorded answer.
        let answer = json_call(&state.journal, Effect::External, name, || {
            let user = state.user(BuiltinId::AskUser).map_err(|e| e.to_string())?;
            hold_ticks(|| user.ask(&question)).map(serde_json::Value::String)
        });
        match answer {
            Ok(serde_json::Value::String(answer)) => Ok(answer),
            Ok(other) => Ok(other.to_string()),
            // Without a user the message says so as it is.
            Err(e) if state.host.user.is_none() => Err(mlua::Error::RuntimeError(e)),
            Err(e) => Err(mlua::Error::RuntimeError(format!("{name} failed: {e}"))),
        }
    })
}

/// `notify_user(message)`.
pub(super) fn notify_user(lua: &Lua, state: Rc<BuiltinState>) -> mlua::Result<Function> {
    lua.create_function(move |_, message: String| {
        let user = state.user(BuiltinId::NotifyUser)?;
        hold_ticks(|| user.notify(&message)).map_err(|e| {
            mlua::Error::RuntimeError(format!("{} failed: {e}", BuiltinId::NotifyUser.name()))
        })
    })
}
