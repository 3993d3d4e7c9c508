//! What the walk over a file ([`analyze`](super::analyze)) hands to each rule
//! ([`rules`](super::rules)): the file and its diagnostics, one exposed definition, and
//! byte spans for carets. Both read this module; neither reads the other's helpers.

use std::ops::Range;

use full_moon::ast::{FunctionBody, Parameter};
use full_moon::node::Node;
use full_moon::tokenizer::TokenReference;

use super::diagnostic::Diagnostic;

/// The file being checked, and the diagnostics found so far.
pub(crate) struct FileContext<'a> {
    pub file: &'a str,
    pub source: &'a str,
    pub diagnostics: Vec<Diagnostic>,
}

impl FileContext<'_> {
    pub fn report(&mut self, diagnostic: Diagnostic) {
        self.diagnostics.push(diagnostic);
    }
}

/// A top-level definition of an exposed (global) function.
pub(crate) struct Definition<'a> {
    pub name: String,
    /// The name token, where diagnostics about the function point.
    pub name_span: Range<usize>,
    /// The whole statement, without surrounding comments.
    pub span: Range<usize>,
    /// Comments and whitespace between the previous token and the statement.
    pub leading: Range<usize>,
    pub body: &'a FunctionBody,
}

impl Definition<'_> {
    /// The parameter names of the definition, `...` for varargs, with their spans.
    pub fn parameters(&self) -> Vec<(String, Range<usize>)> {
        self.body
            .parameters()
            .iter()
            .map(|p| match p {
                Parameter::Ellipsis(token) | Parameter::Name(token) => {
                    (token.token().to_string(), token_span(token))
                }
                #[allow(unreachable_patterns)]
                _ => (p.to_string(), node_span(p)),
            })
            .collect()
    }
}

/// Byte span of a node, without its leading and trailing trivia.
pub(crate) fn node_span(node: &impl Node) -> Range<usize> {
    match node.range() {
        Some((start, end)) => start.bytes()..end.bytes(),
        None => 0..0,
    }
}

/// Byte span of a token, without trivia.
pub(crate) fn token_span(token: &TokenReference) -> Range<usize> {
    token.token().start_position().bytes()..token.token().end_position().bytes()
}

/// The part of `span` on its first line, so carets stay on one line.
pub(crate) fn first_line(source: &str, span: Range<usize>) -> Range<usize> {
    let end = source[span.clone()]
        .find('\n')
        .map_or(span.end, |i| span.start + i);
    span.start..end
}
