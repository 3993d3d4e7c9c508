//! Names an exposed registry function may not take (rule E008): the built-ins' globals
//! (derived from [`BUILTINS`](super::builtins::BUILTINS)), the reserved globals and Lua's;
//! and which of Lua's the sandbox removes.

/// Globals every environment defines that are not built-ins: the context variable and
/// the answer table. A registry function with one of these names would shadow them, so
/// it is rejected.
pub const RESERVED_GLOBALS: &[&str] = &[CONTEXT_GLOBAL, ANSWER_GLOBAL];

/// The global holding the session's context.
pub const CONTEXT_GLOBAL: &str = "context";

/// The global table of the reference RLM's answer protocol: `answer.content` is the
/// answer, and setting `answer.ready = true` ends the run with it, as `FINAL` would.
pub const ANSWER_GLOBAL: &str = "answer";

/// How the system prompt teaches the model to end a run. Both ways always work: `FINAL`
/// is a built-in of every environment, and so is the [`ANSWER_GLOBAL`] table; this only
/// chooses which one the rules describe (models fine-tuned on the reference RLM's harness
/// write the `answer` table).
///
/// ```
/// use rlm_registry::conventions::AnswerProtocol;
///
/// assert_eq!(AnswerProtocol::default(), AnswerProtocol::Final);
/// assert_eq!("answer".parse::<AnswerProtocol>(), Ok(AnswerProtocol::Answer));
/// assert_eq!(AnswerProtocol::Answer.name(), "answer");
/// assert!("done".parse::<AnswerProtocol>().unwrap_err().contains("final or answer"));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum AnswerProtocol {
    /// `FINAL(value)` / `FINAL_VAR("name")`.
    #[default]
    Final,
    /// The reference RLM's: `answer.content = value`, then `answer.ready = true`.
    Answer,
}

impl AnswerProtocol {
    /// Every name its `FromStr` takes, with what it means: a command line's choices and
    /// their help.
    pub const CHOICES: [(&'static str, &'static str); 2] = [
        ("final", "FINAL(value) or FINAL_VAR(\"name\")"),
        (
            "answer",
            "The reference RLM's: answer[\"content\"] = value, then answer[\"ready\"] = true",
        ),
    ];

    /// `final` or `answer`: the name on the command line, in `rlm.toml` and in a trace.
    pub const fn name(self) -> &'static str {
        match self {
            AnswerProtocol::Final => "final",
            AnswerProtocol::Answer => "answer",
        }
    }
}

impl std::fmt::Display for AnswerProtocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for AnswerProtocol {
    type Err = String;

    fn from_str(name: &str) -> Result<AnswerProtocol, String> {
        match name {
            "final" => Ok(AnswerProtocol::Final),
            "answer" => Ok(AnswerProtocol::Answer),
            other => Err(format!(
                "unknown answer protocol `{other}`: expected final or answer"
            )),
        }
    }
}

/// The global holding the Rust primitives the Lua library calls: the table of the
/// built-ins of [`BuiltinProvider::Primitives`](super::builtins::BuiltinProvider::Primitives).
pub const TEXT_PRIMITIVES_GLOBAL: &str = "_text_primitives";

/// The globals of the Lua 5.4 standard environment (base library and library tables).
pub const LUA_GLOBALS: &[&str] = &[
    "_G",
    "_ENV",
    "_VERSION",
    "assert",
    "collectgarbage",
    "coroutine",
    "debug",
    "dofile",
    "error",
    "getmetatable",
    "io",
    "ipairs",
    "load",
    "loadfile",
    "math",
    "next",
    "os",
    "package",
    "pairs",
    "pcall",
    "print",
    "rawequal",
    "rawget",
    "rawlen",
    "rawset",
    "require",
    "select",
    "setmetatable",
    "string",
    "table",
    "tonumber",
    "tostring",
    "type",
    "utf8",
    "warn",
    "xpcall",
];

/// The standard globals the sandbox removes: no environment defines them, and the hints
/// never suggest them.
// Listed here, below both the sandbox and the hints, so that each reads the one list.
pub const REMOVED_GLOBALS: &[&str] = &["dofile", "loadfile", "require", "io", "package", "debug"];

/// Whether `text` is a Lua name: ASCII letters, digits and `_`, not starting with a
/// digit (what a global, a field after a dot or a provider's name must be).
///
/// ```
/// use rlm_registry::conventions::is_lua_name;
/// assert!(is_lua_name("answer_2"));
/// assert!(!is_lua_name("2x") && !is_lua_name("a b") && !is_lua_name(""));
/// ```
pub fn is_lua_name(text: &str) -> bool {
    let mut chars = text.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// What `name` would override, if anything: `"built-in"` or `"Lua standard global"`.
///
/// ```
/// use rlm_registry::conventions::reserved_kind;
/// assert_eq!(reserved_kind("llm_query"), Some("built-in"));
/// assert_eq!(reserved_kind("pairs"), Some("Lua standard global"));
/// assert_eq!(reserved_kind("grep"), None);
/// ```
pub fn reserved_kind(name: &str) -> Option<&'static str> {
    if super::builtins::is_global(name) || RESERVED_GLOBALS.contains(&name) {
        Some("built-in")
    } else if LUA_GLOBALS.contains(&name) {
        Some("Lua standard global")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A name the loop splices into Lua code (`FINAL_VAR`'s) must be a name and nothing
    /// more.
    #[test]
    fn the_globals_every_environment_defines_are_reserved() {
        assert_eq!(reserved_kind("context"), Some("built-in"));
        assert_eq!(reserved_kind("answer"), Some("built-in"));
        assert_eq!(reserved_kind(TEXT_PRIMITIVES_GLOBAL), Some("built-in"));
    }

    #[test]
    fn only_lua_names_are_names() {
        assert!(is_lua_name("answer_2") && is_lua_name("_x"));
        assert!(!is_lua_name("2x") && !is_lua_name("a b") && !is_lua_name(""));
        assert!(!is_lua_name("a\"); os.exit() --") && !is_lua_name("é"));
    }
}
