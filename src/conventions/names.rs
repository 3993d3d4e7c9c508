//! Names an exposed registry function may not take (rule E008).

/// The built-ins every environment defines in Rust (SPEC §4). A registry function with
/// one of these names would shadow the real thing, so it is rejected.
pub const BUILTINS: &[&str] = &[
    "print",
    "llm_query",
    "llm_query_batched",
    "rlm_query",
    "rlm_query_batched",
    "token_count",
    "token_truncate",
    "token_split",
    "token_budget",
    "FINAL",
    "FINAL_VAR",
    "store_list",
    "store_summarize",
    "ask_user",
    "notify_user",
    "fn_search",
    "help",
    "re",
    "_text_primitives",
    "context",
];

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

/// What `name` would override, if anything: `"built-in"` or `"Lua standard global"`.
///
/// ```
/// use rlm_registry::conventions::reserved_kind;
/// assert_eq!(reserved_kind("llm_query"), Some("built-in"));
/// assert_eq!(reserved_kind("pairs"), Some("Lua standard global"));
/// assert_eq!(reserved_kind("grep"), None);
/// ```
pub fn reserved_kind(name: &str) -> Option<&'static str> {
    if BUILTINS.contains(&name) {
        Some("built-in")
    } else if LUA_GLOBALS.contains(&name) {
        Some("Lua standard global")
    } else {
        None
    }
}
