//! E002 and E003: every exposed function has a `---` doc comment with a description.

use super::super::context::{Definition, FileContext};
use super::super::diagnostic::{Code, Diagnostic};
use super::super::doc::{self, DocBlock};

/// The doc block above `def`, or an E002 if there is none.
pub(crate) fn require_doc<'s>(
    ctx: &mut FileContext<'s>,
    def: &Definition<'_>,
) -> Option<DocBlock<'s>> {
    let block = doc::find_doc_block(ctx.source, def.leading.clone());
    if block.is_none() {
        let diagnostic = Diagnostic::at(
            Code::MissingDoc,
            ctx.file,
            ctx.source,
            def.span.start..def.name_span.end,
            format!("exposed function `{}` has no `---` doc comment directly above it", def.name),
        )
        .with_help(format!(
            "add a doc comment on the lines right above, e.g. `--- What {} does.` (no blank line in between), or make it `local` to keep it private",
            def.name
        ));
        ctx.report(diagnostic);
    }
    block
}

/// E003 when the doc has tags but no description text.
pub(crate) fn require_description(
    ctx: &mut FileContext<'_>,
    def: &Definition<'_>,
    block: &DocBlock<'_>,
    description: &str,
) {
    if description.trim().is_empty() {
        let diagnostic = Diagnostic::at(
            Code::MissingDescription,
            ctx.file,
            ctx.source,
            block.first_line_span(),
            format!("the doc comment of `{}` has no description", def.name),
        )
        .with_help("start the doc comment with a sentence saying what the function does, e.g. `--- Splits text into lines.`");
        ctx.report(diagnostic);
    }
}
