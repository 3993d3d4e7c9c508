//! E008: an exposed function may not take the name of a built-in or a Lua standard global.

use super::super::context::{Definition, FileContext};
use super::super::diagnostic::{Code, Diagnostic};
use super::super::names::reserved_kind;

pub(crate) fn check(ctx: &mut FileContext<'_>, def: &Definition<'_>) {
    if let Some(kind) = reserved_kind(&def.name) {
        let diagnostic = Diagnostic::at(
            Code::ReservedName,
            ctx.file,
            ctx.source,
            def.name_span.clone(),
            format!("`{}` would override the {kind} of that name", def.name),
        )
        .with_help(format!(
            "rename the function (e.g. `my_{}`), or make it `local` if only this file uses it",
            def.name
        ));
        ctx.report(diagnostic);
    }
}
