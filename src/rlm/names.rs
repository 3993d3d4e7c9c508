//! The names a model may call, for the "did you mean" of an unknown function: built-ins,
//! registry and provider functions in the agent's scope, and the Lua standard globals the
//! sandbox keeps.

use crate::catalog::Catalog;
use crate::conventions::LUA_GLOBALS;
use crate::environment::REMOVED_GLOBALS;
use crate::spec::closest_name;

/// The names a model may call: built-ins, registry functions, and the sandbox's Lua
/// standard globals.
pub(crate) struct Names(Vec<String>);

/// Not a global at all, though Lua lists it with them: never suggested.
const NOT_CALLABLE: &str = "_ENV";

impl Names {
    /// The names `catalog` offers, and the standard globals the sandbox keeps.
    pub fn new(catalog: &Catalog) -> Names {
        let mut names: Vec<String> = catalog
            .functions()
            .iter()
            .map(|c| c.function.name().to_string())
            .collect();
        names.extend(
            LUA_GLOBALS
                .iter()
                .filter(|name| !REMOVED_GLOBALS.contains(name) && **name != NOT_CALLABLE)
                .map(|name| name.to_string()),
        );
        Names(names)
    }

    /// The known name most like `name`, if one is close enough.
    pub fn closest(&self, name: &str) -> Option<&str> {
        closest_name(name, self.0.iter().map(String::as_str))
    }
}

/// The global name in "attempt to call a nil value (global 'foo')".
pub(crate) fn unknown_function(message: &str) -> Option<&str> {
    let start = message.find("attempt to call a nil value (global '")? + 37;
    let rest = &message[start..];
    let end = rest.find("')")?;
    Some(&rest[..end])
}
