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
