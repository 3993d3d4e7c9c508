//! One host function: its documentation (LuaLS, checked when registered), its scope and
//! its handler, written either over Lua values or over serde types.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use mlua::{Lua, MultiValue};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::Scope;
use crate::conventions::builtins::BuiltinId;

/// A handler over Lua values: the arguments as Lua passed them, the results Lua gets.
pub type RawHandler = dyn Fn(&Call<'_>, MultiValue) -> mlua::Result<MultiValue> + Send + Sync;

/// A handler over JSON: positional arguments (missing trailing ones as `null`), one result.
pub(crate) type JsonHandler =
    dyn Fn(&Call<'_>, Vec<serde_json::Value>) -> Result<serde_json::Value, String> + Send + Sync;

/// How a host function runs.
#[derive(Clone)]
pub(crate) enum HostHandler {
    /// Implemented by the environment itself (the built-ins: `print`, `llm_query`, …).
    Builtin(BuiltinId),
    Raw(Arc<RawHandler>),
    Json(Arc<JsonHandler>),
}

/// What a host function does beyond computing its result: how a re-execution of the code
/// that called it (a resumed or replayed run, a restored checkpoint) treats the call.
/// Declared per function ([`HostFunction::effect`]); every call of a function that is not
/// [`Effect::Pure`] is journaled with its result.
///
/// ```
/// use rlm_registry::providers::{Effect, HostFunction};
///
/// let double = HostFunction::typed("double", "--- Doubles.\n---@param n integer\n---@return integer", |_, (n,): (i64,)| Ok::<_, String>(2 * n))
///     .effect(Effect::Pure);
/// assert_eq!(double.get_effect(), Effect::Pure);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Effect {
    /// Its result depends on its arguments alone: called again on re-execution.
    Pure,
    /// It keeps state in the host's memory (the store): called again on re-execution, so
    /// that the state is rebuilt, and given the recorded result.
    Memory,
    /// It reads or changes the world (files, programs, a person): never called again on
    /// re-execution, which gets the recorded result. The default, since a host function
    /// not declared otherwise may do anything.
    #[default]
    External,
}

/// What a handler knows about the call it serves.
pub struct Call<'a> {
    pub(crate) lua: &'a Lua,
    pub(crate) name: &'a str,
    pub(crate) time_left: Duration,
    pub(crate) depth: usize,
}

impl Call<'_> {
    /// The Lua state the call comes from (to build tables, strings, …).
    pub fn lua(&self) -> &Lua {
        self.lua
    }

    /// The name the function was called by.
    pub fn name(&self) -> &str {
        self.name
    }

    /// What is left of the execution's time limit: bound any blocking work by it (the
    /// limit cannot interrupt Rust code).
    pub fn time_left(&self) -> Duration {
        self.time_left
    }

    /// The calling agent's depth: 0 for the top level, 1 for its children, …
    pub fn depth(&self) -> usize {
        self.depth
    }
}

/// A Rust function the model can call from Lua, documented like a registry function.
///
/// `doc` is the LuaLS doc comment (`--- Description.`, `---@param name type desc`,
/// `---@return type desc`); the parameters are declared by the `@param` lines, in order.
/// It is checked by the same conventions as a registry function when its provider is
/// registered.
///
/// ```
/// use rlm_registry::providers::HostFunction;
///
/// // Arguments and result through serde: a tuple of the parameters, in order.
/// let add = HostFunction::typed(
///     "add",
///     "--- Adds two integers.\n---@param a integer\n---@param b integer\n---@return integer sum",
///     |_call, (a, b): (i64, i64)| Ok::<_, String>(a + b),
/// );
/// assert_eq!(add.name(), "add");
/// ```
#[derive(Clone)]
pub struct HostFunction {
    pub(crate) name: Cow<'static, str>,
    pub(crate) doc: Cow<'static, str>,
    pub(crate) scope: Scope,
    pub(crate) handler: HostHandler,
    pub(crate) effect: Effect,
}

impl HostFunction {
    /// A function whose handler takes the arguments as a tuple (or any type that
    /// deserializes from the JSON array of positional arguments; a missing trailing
    /// argument is `null`, so use `Option` for optional ones) and returns anything
    /// serializable. An `Err` reaches Lua as an ordinary error, prefixed with the name.
    pub fn typed<A, R, E>(
        name: impl Into<Cow<'static, str>>,
        doc: impl Into<Cow<'static, str>>,
        handler: impl Fn(&Call<'_>, A) -> Result<R, E> + Send + Sync + 'static,
    ) -> HostFunction
    where
        A: DeserializeOwned,
        R: Serialize,
        E: fmt::Display,
    {
        let json = move |call: &Call<'_>, args: Vec<serde_json::Value>| {
            let args = deserialize_args(args).map_err(|e| format!("bad arguments: {e}"))?;
            let result = handler(call, args).map_err(|e| e.to_string())?;
            serde_json::to_value(result).map_err(|e| format!("cannot convert the result: {e}"))
        };
        HostFunction::new(name, doc, HostHandler::Json(Arc::new(json)))
    }

    /// A function whose handler works on Lua values directly (tables, strings without a
    /// copy, several results). Errors are ordinary Lua errors.
    ///
    /// ```
    /// use rlm_registry::providers::HostFunction;
    ///
    /// let shout = HostFunction::raw(
    ///     "shout",
    ///     "--- Upper-cases a string.\n---@param s string\n---@return string",
    ///     |call, args| {
    ///         let s: mlua::String = mlua::FromLuaMulti::from_lua_multi(args, call.lua())?;
    ///         let upper = s.to_str()?.to_uppercase();
    ///         mlua::IntoLuaMulti::into_lua_multi(upper, call.lua())
    ///     },
    /// );
    /// assert_eq!(shout.name(), "shout");
    /// ```
    pub fn raw(
        name: impl Into<Cow<'static, str>>,
        doc: impl Into<Cow<'static, str>>,
        handler: impl Fn(&Call<'_>, MultiValue) -> mlua::Result<MultiValue> + Send + Sync + 'static,
    ) -> HostFunction {
        HostFunction::new(name, doc, HostHandler::Raw(Arc::new(handler)))
    }

    pub(crate) fn new(
        name: impl Into<Cow<'static, str>>,
        doc: impl Into<Cow<'static, str>>,
        handler: HostHandler,
    ) -> HostFunction {
        HostFunction {
            name: name.into(),
            doc: doc.into(),
            scope: Scope::Core,
            handler,
            effect: Effect::default(),
        }
    }

    /// Sets who may call it (default [`Scope::Core`]: every agent).
    pub fn scope(mut self, scope: Scope) -> HostFunction {
        self.scope = scope;
        self
    }

    /// Declares what it does beyond its result (default [`Effect::External`]).
    pub fn effect(mut self, effect: Effect) -> HostFunction {
        self.effect = effect;
        self
    }

    /// What it does beyond its result.
    pub fn get_effect(&self) -> Effect {
        self.effect
    }

    /// The global name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The doc comment as given.
    pub fn doc(&self) -> &str {
        &self.doc
    }

    /// Who may call it.
    pub fn get_scope(&self) -> Scope {
        self.scope
    }

    /// The definition the conventions check: the doc, then a declaration of `name`
    /// whose parameters are the `@param` names in order (`...` for varargs).
    pub(crate) fn declaration(&self, name: &str) -> String {
        let doc = self.doc.trim_end();
        let params = crate::conventions::documented_params(doc);
        format!("{doc}\nfunction {name}({}) end\n", params.join(", "))
    }
}

impl fmt::Debug for HostFunction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostFunction")
            .field("name", &self.name)
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

/// The positional arguments as `A`: a tuple or sequence from the array, `()` from none.
fn deserialize_args<A: DeserializeOwned>(args: Vec<serde_json::Value>) -> serde_json::Result<A> {
    let empty = args.is_empty();
    serde_json::from_value(serde_json::Value::Array(args)).or_else(|error| {
        if empty {
            serde_json::from_value(serde_json::Value::Null)
        } else {
            Err(error)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_declaration_lists_the_documented_parameters_in_order() {
        let f = HostFunction::typed(
            "f",
            "--- F.\n---@param a string\n---@param b? integer\n---@param ... any\n",
            |_, (): ()| Ok::<_, String>(()),
        );
        assert_eq!(
            f.declaration("f"),
            "--- F.\n---@param a string\n---@param b? integer\n---@param ... any\nfunction f(a, b, ...) end\n"
        );
    }
}
