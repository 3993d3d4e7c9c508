//! The system-prompt addendum declaring every registry function.
//!
//! The same function renders the prompt at run time (`from_paths`, `from_map`) and at
//! build time (baked into the binary), which is what makes the two byte-identical.

use crate::conventions::Function;

/// Renders the prompt for `functions` (already in registry order: sorted by name).
///
/// Each function appears as a LuaLS-style stub: its doc comment exactly as written,
/// then `function name(params) end`. Models read this format fluently, and it carries
/// every parameter's type and description without a second notation.
pub(crate) fn render(functions: &[Function]) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "## Registry functions\n\nThese {} Lua functions are already defined as globals in the REPL; call them directly. Each is declared below with its documentation.\n\n```lua\n",
        functions.len()
    ));
    for (i, function) in functions.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&function.declaration());
        out.push('\n');
    }
    out.push_str("```\n");
    out
}

/// The compact addendum for large registries: one line per function (signature and
/// summary) and a pointer to `fn_search` and `help`, instead of every full doc. Empty for
/// an empty registry, like the full prompt.
pub(crate) fn render_compact(functions: &[Function]) -> String {
    if functions.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "## Registry functions\n\nThese {} Lua functions are already defined as globals in the REPL; call them directly. Only names and summaries are listed: call `fn_search(query)` to find functions for a task and `help(name)` for one function's full documentation before using it.\n\n",
        functions.len()
    );
    for function in functions {
        out.push_str(&format!(
            "- `{}`: {}\n",
            function.signature(),
            function.summary()
        ));
    }
    out
}
