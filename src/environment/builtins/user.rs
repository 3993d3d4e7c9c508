//! The `user` provider: `ask_user` and `notify_user`, through the host's [`User`] channel
//! (top-level agent only).
//!
//! [`User`]: super::User

use std::rc::Rc;

use mlua::{Function, Lua};

use super::state::BuiltinState;
use crate::conventions::builtins::BuiltinId;
use crate::environment::hook::hold_ticks;

/// `ask_user(question)` → the answer.
pub(super) fn ask_user(lua: &Lua, state: Rc<BuiltinState>) -> mlua::Result<Function> {
    lua.create_function(move |_, question: String| {
        let user = state.user(BuiltinId::AskUser)?;
        hold_ticks(|| user.ask(&question)).map_err(|e| {
            mlua::Error::RuntimeError(format!("{} failed: {e}", BuiltinId::AskUser.name()))
        })
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
