//! E007: loading a file has no side effects. At top level only function definitions,
//! `local` declarations and assignments into file-local tables are allowed.

use std::ops::Range;

use full_moon::ast::{Return, Stmt};

use super::super::context::{FileContext, first_line, node_span};
use super::super::diagnostic::{Code, Diagnostic};

/// A top-level statement that is neither a definition nor a local declaration.
pub(crate) fn statement(ctx: &mut FileContext<'_>, stmt: &Stmt) {
    let kind = match stmt {
        Stmt::FunctionCall(_) => "a function call",
        Stmt::Do(_) => "a `do` block",
        Stmt::While(_) => "a `while` loop",
        Stmt::Repeat(_) => "a `repeat` loop",
        Stmt::NumericFor(_) | Stmt::GenericFor(_) => "a `for` loop",
        Stmt::If(_) => "an `if` statement",
        Stmt::Goto(_) => "a `goto`",
        Stmt::Label(_) => "a label",
        _ => "a statement",
    };
    report(
        ctx,
        first_line(ctx.source, node_span(stmt)),
        format!("{kind} runs when the file is loaded"),
    );
}

/// `x = 1` (or `t.k = v` on a non-local table) at top level.
pub(crate) fn global_assignment(ctx: &mut FileContext<'_>, target: &str, span: Range<usize>) {
    report(
        ctx,
        span,
        format!("assignment to global `{target}` runs when the file is loaded"),
    );
}

/// `return M` and the like at the end of a file.
pub(crate) fn top_level_return(ctx: &mut FileContext<'_>, ret: &Return) {
    report(
        ctx,
        first_line(ctx.source, node_span(ret)),
        "a top-level `return` runs when the file is loaded".to_string(),
    );
}

fn report(ctx: &mut FileContext<'_>, span: Range<usize>, message: String) {
    let diagnostic = Diagnostic::at(Code::SideEffect, ctx.file, ctx.source, span, message).with_help(
        "registry files may only define functions, `local` values and fields of local tables at top level; move this code into a function",
    );
    ctx.report(diagnostic);
}
