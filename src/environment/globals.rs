//! Globals as a host program holds them: a string as its bytes, anything else as JSON by
//! the one mapping ([`lua_json`](super::lua_json)), and a refusal told apart from a
//! failure. What a binding to another language reads and writes (`env["name"]` in
//! Python).

use std::cell::RefCell;
use std::fmt;

use mlua::Value;

use super::{Environment, ExecError, lua_json};

/// A global's value as a host holds it ([`Environment::get_global_value`]).
#[derive(Clone, Debug, PartialEq)]
pub enum GlobalValue {
    /// A string, as its bytes: any bytes, as Lua strings (and `context`) may hold.
    String(Vec<u8>),
    /// Any other value, by the one Lua ↔ JSON mapping: `nil` is `null`.
    Json(serde_json::Value),
}

/// Why a global could not be read or set as a [`GlobalValue`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GlobalError {
    /// The value cannot cross (a function, a cycle, a table of mixed keys, too deep): the
    /// mapping's message, naming where the value is (`x.items[2]`).
    Refused(String),
    /// Lua failed on the way (a registry file loaded by the lookup, an assignment to a
    /// built-in's name) or a limit was hit.
    Failed(ExecError),
}

impl fmt::Display for GlobalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GlobalError::Refused(message) => f.write_str(message),
            GlobalError::Failed(error) => error.fmt(f),
        }
    }
}

impl std::error::Error for GlobalError {}

impl Environment {
    /// The global `name` for a host: a string as its exact bytes (UTF-8 or not), any
    /// other value as [`Environment::get_global`] gives it, a value that cannot cross
    /// as a [`GlobalError::Refused`] naming where it is.
    ///
    /// ```
    /// use serde_json::json;
    /// use rlm_registry::{Registry, environment::{Environment, GlobalError, GlobalValue, Limits}};
    ///
    /// let env = Environment::new(Registry::baked().clone(), Limits::default())?;
    /// env.execute(r#"latin = "caf\xe9"  t = {n = 1}  f = {print}"#)?;
    /// assert_eq!(env.get_global_value("latin")?, GlobalValue::String(b"caf\xe9".to_vec()));
    /// assert_eq!(env.get_global_value("t")?, GlobalValue::Json(json!({"n": 1})));
    /// assert_eq!(env.get_global_value("unset")?, GlobalValue::Json(json!(null)));
    /// assert_eq!(
    ///     env.get_global_value("f").unwrap_err(),
    ///     GlobalError::Refused("cannot encode a function (at f[1])".into())
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn get_global_value(&self, name: &str) -> Result<GlobalValue, GlobalError> {
        let refusal = RefCell::new(None);
        let value = self.run(|| {
            let value = self.lua.globals().get::<Value>(name)?;
            if let Value::String(text) = &value {
                return Ok(GlobalValue::String(text.as_bytes().to_vec()));
            }
            lua_json::to_json(&self.lua, &self.tripwire, &value, name)
                .map(GlobalValue::Json)
                .map_err(|error| refused(error, &refusal))
        });
        // A registry file loaded on the way may have printed.
        self.take_output();
        value.map_err(|error| either(error, refusal))
    }

    /// Sets the global `name` for a host: a [`GlobalValue::String`] as a Lua string of
    /// exactly those bytes, a [`GlobalValue::Json`] as [`Environment::set_global`] sets
    /// it (`null` removes the global). A built-in's name cannot be assigned, as in Lua
    /// code.
    ///
    /// ```
    /// use serde_json::json;
    /// use rlm_registry::{Registry, environment::{Environment, GlobalError, GlobalValue, Limits}};
    ///
    /// let env = Environment::new(Registry::baked().clone(), Limits::default())?;
    /// env.set_global_value("raw", &GlobalValue::String(vec![0xff, b'a']))?;
    /// env.set_global_value("n", &GlobalValue::Json(json!([1, 2])))?;
    /// assert_eq!(env.execute("print(#raw, raw:byte(1), #n)")?.output, "2\t255\t2\n");
    /// let error = env.set_global_value("print", &GlobalValue::Json(json!(1))).unwrap_err();
    /// assert!(matches!(error, GlobalError::Failed(_)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_global_value(&self, name: &str, value: &GlobalValue) -> Result<(), GlobalError> {
        let refusal = RefCell::new(None);
        let set = self.run(|| {
            let value = match value {
                GlobalValue::String(bytes) => Value::String(self.lua.create_string(bytes)?),
                GlobalValue::Json(json) => lua_json::to_lua(&self.lua, &self.tripwire, json, name)
                    .map_err(|error| refused(error, &refusal))?,
            };
            self.lua.globals().set(name, value)
        });
        self.take_output();
        if set.is_ok() {
            match value {
                GlobalValue::String(bytes) => self.state.journal.global_bytes_set(name, bytes),
                GlobalValue::Json(json) => self.state.journal.global_set(name, json),
            }
        }
        set.map_err(|error| either(error, refusal))
    }
}

/// `error` as a Lua error, its message kept in `refusal` when it is a refusal: the
/// execution protocol only carries Lua errors, and a refusal must come out as one.
fn refused(error: lua_json::CrossError, refusal: &RefCell<Option<String>>) -> mlua::Error {
    if let lua_json::CrossError::Refused(refused) = &error {
        *refusal.borrow_mut() = Some(refused.message.clone());
    }
    error.into_lua("")
}

/// The refusal recorded on the way, if any, else the failure: a limit hit while a value
/// was being refused (the memory it took) is a failure, not a refusal.
fn either(error: ExecError, refusal: RefCell<Option<String>>) -> GlobalError {
    match (refusal.into_inner(), &error) {
        (Some(message), ExecError::Lua { .. }) => GlobalError::Refused(message),
        _ => GlobalError::Failed(error),
    }
}
