//! E012: every example in a doc comment compiles, and every fence is closed.
//!
//! The example's chunk (see [`examples`](crate::conventions::examples)) is parsed as
//! `rlm test` will load it, so an `EXPR --> EXPECTED` line whose parts are not
//! expressions is reported here, at build time, with the line it is on.

use super::super::context::{Definition, FileContext};
use super::super::diagnostic::{Code, Diagnostic};
use super::super::doc::DocBlock;
use super::super::examples::{Example, examples_in};
use super::super::{Unparsable, parse_guarded};

pub(crate) fn check(ctx: &mut FileContext<'_>, def: &Definition<'_>, block: &DocBlock<'_>) {
    let lines: Vec<&str> = block.lines.iter().map(|(_, line)| *line).collect();
    match examples_in(&lines) {
        Ok(examples) => {
            for example in &examples {
                check_example(ctx, def, block, example);
            }
        }
        Err(unclosed) => report(
            ctx,
            block,
            unclosed.line,
            format!("the example in the doc of `{}` is not closed", def.name),
            "end the example with a line `--- ```",
        ),
    }
}

fn check_example(
    ctx: &mut FileContext<'_>,
    def: &Definition<'_>,
    block: &DocBlock<'_>,
    example: &Example,
) {
    let chunk = example.chunk(0);
    let line_at = |offset: usize| chunk[..offset].matches('\n').count() + 1;
    let first_error = match parse_guarded(&chunk) {
        Err(Unparsable::Backtick(offset)) => {
            Some((line_at(offset), "unexpected character '`'".to_string()))
        }
        Err(Unparsable::TooDeep(at)) => {
            Some((line_at(at.offset), "code nested too deeply".to_string()))
        }
        Ok(parsed) => parsed
            .errors()
            .first()
            .map(|error| (error.range().0.line(), error.error_message().to_string())),
    };
    if let Some((line, message)) = first_error {
        let last = example.lines.len().saturating_sub(1);
        let doc_line = example.first_line + line.saturating_sub(1).min(last);
        report(
            ctx,
            block,
            doc_line,
            format!("an example of `{}` does not compile: {message}", def.name),
            "an example is Lua; a line `EXPR --> EXPECTED` needs an expression on each side",
        );
    }
}

fn report(
    ctx: &mut FileContext<'_>,
    block: &DocBlock<'_>,
    line: usize,
    message: String,
    help: &str,
) {
    let (offset, text) = block.lines[line.min(block.lines.len() - 1)];
    let diagnostic = Diagnostic::at(
        Code::BrokenExample,
        ctx.file,
        ctx.source,
        offset..offset + text.len(),
        message,
    )
    .with_help(help);
    ctx.report(diagnostic);
}
