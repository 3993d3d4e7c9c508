//! The `user` provider: `ask_user` and `notify_user`, through the host's [`User`] channel
//! (top-level agent only).
//!
//! [`User`]: super::User

use std::rc::Rc;

use mlua::{Function, Lua};

use super::User;
use super::state::BuiltinState;
use crate::conventions::builtins::BuiltinId;
use crate::environment::errors::lua_message;
use crate::environment::hook::hold_ticks;
use crate::environment::journal::host::json_call;
use crate::providers::Effect;

/// `ask_user(question)` → the answer.
pub(super) fn ask_user(lua: &Lua, state: Rc<BuiltinState>) -> mlua::Result<Function> {
    lua.create_function(move |_, question: String| {
        let answer = through_the_user(&state, BuiltinId::AskUser, |user| {
            user.ask(&question).map(serde_json::Value::String)
        })?;
        Ok(match answer {
            serde_json::Value::String(answer) => answer,
            other => other.to_string(),
        })
    })
}

/// `notify_user(message)`.
pub(super) fn notify_user(lua: &Lua, state: Rc<BuiltinState>) -> mlua::Result<Function> {
    lua.create_function(move |_, message: String| {
        through_the_user(&state, BuiltinId::NotifyUser, |user| {
            user.notify(&message).map(|()| serde_json::Value::Null)
        })
        .map(|_| ())
    })
}

/// A call of the person behind `builtin`: journaled, since the person is outside the
/// sandbox, so that code run again gets the recorded outcome and does not reach them.
fn through_the_user(
    state: &BuiltinState,
    builtin: BuiltinId,
    call: impl FnOnce(&dyn User) -> Result<serde_json::Value, String>,
) -> mlua::Result<serde_json::Value> {
    let name = builtin.name();
    let outcome = json_call(&state.journal, Effect::External, name, || {
        let user = state.user(builtin).map_err(|e| lua_message(&e))?;
        hold_ticks(|| call(user.as_ref()))
    });
    outcome.map_err(|e| match state.host.user {
        // Without a user the message says so as it is.
        None => mlua::Error::RuntimeError(e),
        Some(_) => mlua::Error::RuntimeError(format!("{name} failed: {e}")),
    })
}
