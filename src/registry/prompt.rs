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
        "## Registry functions\n\n{} already defined as globals in the REPL; call them directly. Each is declared below with its documentation.\n\n```lua\n",
        these_functions_are(functions.len())
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

/// The compact addendum: one line of Lua per function (signature and summary, see
/// [`Function::listing_line`]) and a pointer to `help` and `fn_search`, instead of every
/// full doc. Empty for an empty registry, like the full prompt.
pub(crate) fn render_compact(functions: &[Function]) -> String {
    if functions.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "## Registry functions\n\n{} already defined as globals in the REPL; call them directly. Signatures and summaries only: `help(\"name\")` prints one's full documentation, `fn_search(\"what you need\")` finds functions for a task.\n\n```lua\n",
        these_functions_are(functions.len())
    );
    for function in functions {
        out.push_str(&function.listing_line());
        out.push('\n');
    }
    out.push_str("```\n");
    out
}

/// "These 47 Lua functions are", or for one "This Lua function is".
fn these_functions_are(count: usize) -> String {
    match count {
        1 => "This Lua function is".to_string(),
        n => format!("These {n} Lua functions are"),
    }
}
