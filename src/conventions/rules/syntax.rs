//! E001: the file must be valid Lua 5.4, and shallow enough to parse without risk.

use super::super::context::FileContext;
use super::super::depth::{MAX_NESTING, TooDeep};
use super::super::diagnostic::{Code, Diagnostic};

/// Reports every error full_moon found.
pub(crate) fn parse_errors(ctx: &mut FileContext<'_>, errors: &[full_moon::Error]) {
    for error in errors {
        let (start, end) = error.range();
        let diagnostic = Diagnostic::at(
            Code::Syntax,
            ctx.file,
            ctx.source,
            start.bytes()..end.bytes().max(start.bytes()),
            format!("syntax error: {}", error.error_message()),
        )
        .with_help("this file must be valid Lua 5.4");
        ctx.report(diagnostic);
    }
}

/// Reports input nested too deeply to parse (see `depth`).
pub(crate) fn too_deep(ctx: &mut FileContext<'_>, at: TooDeep) {
    let diagnostic = Diagnostic::at(
        Code::Syntax,
        ctx.file,
        ctx.source,
        at.offset..at.offset + 1,
        format!("code nested more than {MAX_NESTING} levels deep"),
    )
    .with_help("Lua itself accepts at most 200 nested levels; flatten the expression or split it into functions");
    ctx.report(diagnostic);
}

/// A backtick outside strings and comments: not Lua, and full_moon cannot lex it.
pub(crate) fn unexpected_backtick(ctx: &mut FileContext<'_>, offset: usize) {
    let diagnostic = Diagnostic::at(
        Code::Syntax,
        ctx.file,
        ctx.source,
        offset..offset + 1,
        "syntax error: unexpected character '`'",
    )
    .with_help("backticks are not Lua syntax; put the text in a string or a comment");
    ctx.report(diagnostic);
}
