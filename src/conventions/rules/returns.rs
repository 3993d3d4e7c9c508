//! E005: a function that returns a value documents it with `@return`.

use std::ops::Range;

use full_moon::ast::{Block, LastStmt, Stmt};

use super::super::context::{Definition, FileContext, node_span};
use super::super::diagnostic::{Code, Diagnostic};
use super::super::doc::ParsedDoc;

pub(crate) fn check(ctx: &mut FileContext<'_>, def: &Definition<'_>, doc: &ParsedDoc<'_>) {
    if !doc.returns.is_empty() {
        return;
    }
    if let Some(span) = first_value_return(def.body.block()) {
        let diagnostic = Diagnostic::at(
            Code::MissingReturn,
            ctx.file,
            ctx.source,
            span,
            format!(
                "`{}` returns a value but its doc has no `@return`",
                def.name
            ),
        )
        .with_help("add `---@return <type> [name] [description]` to the doc comment");
        ctx.report(diagnostic);
    }
}

/// The first `return <values>` of this function (not of functions nested in it).
fn first_value_return(block: &Block) -> Option<Range<usize>> {
    for stmt in block.stmts() {
        let nested = match stmt {
            Stmt::Do(s) => first_value_return(s.block()),
            Stmt::While(s) => first_value_return(s.block()),
            Stmt::Repeat(s) => first_value_return(s.block()),
            Stmt::NumericFor(s) => first_value_return(s.block()),
            Stmt::GenericFor(s) => first_value_return(s.block()),
            Stmt::If(s) => std::iter::once(s.block())
                .chain(s.else_if().into_iter().flatten().map(|e| e.block()))
                .chain(s.else_block())
                .find_map(first_value_return),
            _ => None,
        };
        if nested.is_some() {
            return nested;
        }
    }
    match block.last_stmt() {
        Some(LastStmt::Return(ret)) if !ret.returns().is_empty() => Some(node_span(ret)),
        _ => None,
    }
}
