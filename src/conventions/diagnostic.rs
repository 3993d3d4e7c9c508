//! Diagnostics: what a convention violation looks like, and how it is rendered.
//!
//! Every problem found while loading Lua is a [`Diagnostic`] carrying a stable [`Code`],
//! a position (file, 1-based line and column, byte span), a message and a help line.
//! [`render`] turns a batch of them into the same rustc-style text that `cargo build`
//! and `rlm check` print.

use std::fmt;
use std::ops::Range;

use annotate_snippets::{AnnotationKind, Group, Level, Renderer, Snippet};

/// The stable code of a diagnostic. The error catalogue of `docs/conventions.md` shows
/// an example of each.
///
/// ```
/// use rlm_registry::conventions::Code;
/// assert_eq!(Code::MissingDoc.as_str(), "E002");
/// assert_eq!(Code::MissingDoc.to_string(), "E002");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Code {
    /// E001: Lua syntax error (also: nesting too deep to parse safely).
    Syntax,
    /// E002: exposed function without a `---` doc comment directly above it.
    MissingDoc,
    /// E003: doc comment with no description text.
    MissingDescription,
    /// E004: parameter without `@param`, or `@param` naming no parameter.
    ParamMismatch,
    /// E005: function returns a value but has no `@return`.
    MissingReturn,
    /// E006: name not accessible (method on a non-local table, or a global defined below the top level).
    Inaccessible,
    /// E007: top-level side effect.
    SideEffect,
    /// E008: overrides a built-in or a Lua standard global.
    ReservedName,
    /// E009: the same function defined twice in one file.
    Duplicate,
    /// E010: unreadable file or directory, or not UTF-8.
    Unreadable,
    /// E011: `from_map` key does not match the single function its definition defines.
    MapKeyMismatch,
    /// E012: an example in a doc comment does not compile (or its fence is not closed).
    BrokenExample,
    /// N001: a function overrides one loaded earlier (a note, not an error).
    Override,
}

impl Code {
    /// Every code, in catalogue order.
    pub const ALL: [Code; 13] = [
        Code::Syntax,
        Code::MissingDoc,
        Code::MissingDescription,
        Code::ParamMismatch,
        Code::MissingReturn,
        Code::Inaccessible,
        Code::SideEffect,
        Code::ReservedName,
        Code::Duplicate,
        Code::Unreadable,
        Code::MapKeyMismatch,
        Code::BrokenExample,
        Code::Override,
    ];

    /// The code as printed: `E001` … `E012`, `N001`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Code::Syntax => "E001",
            Code::MissingDoc => "E002",
            Code::MissingDescription => "E003",
            Code::ParamMismatch => "E004",
            Code::MissingReturn => "E005",
            Code::Inaccessible => "E006",
            Code::SideEffect => "E007",
            Code::ReservedName => "E008",
            Code::Duplicate => "E009",
            Code::Unreadable => "E010",
            Code::MapKeyMismatch => "E011",
            Code::BrokenExample => "E012",
            Code::Override => "N001",
        }
    }

    /// The severity every diagnostic with this code has.
    pub const fn severity(self) -> Severity {
        match self {
            Code::Override => Severity::Note,
            _ => Severity::Error,
        }
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How bad a diagnostic is. Only errors make a load fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Severity {
    /// The load fails.
    Error,
    /// Worth a look; the load succeeds.
    Warning,
    /// Information, such as an override between directories.
    Note,
}

impl Severity {
    /// `error`, `warning` or `note`, as in `rlm check --format json`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Note => "note",
        }
    }
}

/// One problem (or note) found while loading a registry.
///
/// ```
/// use rlm_registry::Registry;
///
/// let err = Registry::from_map([("f", "function f() end")]).unwrap_err();
/// let d = &err.diagnostics()[0];
/// assert_eq!((d.code.as_str(), d.line, d.column), ("E002", 1, 1));
/// assert!(d.help.is_some());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// The stable code.
    pub code: Code,
    /// Always `code.severity()`; kept as a field for easy matching and serialisation.
    pub severity: Severity,
    /// What is wrong, in one sentence.
    pub message: String,
    /// How to fix it.
    pub help: Option<String>,
    /// The file as it was named to the loader (relative paths stay relative).
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
    /// Byte range in the file that the caret underlines (may be empty).
    pub span: Range<usize>,
}

impl Diagnostic {
    /// A diagnostic at `span` of `source`; line and column are computed from the span.
    pub fn at(
        code: Code,
        file: &str,
        source: &str,
        span: Range<usize>,
        message: impl Into<String>,
    ) -> Self {
        let (line, column) = line_column(source, span.start);
        Diagnostic::new(code, file, (line, column), span, message.into())
    }

    /// A diagnostic about a whole file or directory, with no position inside it.
    pub fn whole_file(code: Code, file: &str, message: impl Into<String>) -> Self {
        Diagnostic::new(code, file, (1, 1), 0..0, message.into())
    }

    fn new(
        code: Code,
        file: &str,
        (line, column): (usize, usize),
        span: Range<usize>,
        message: String,
    ) -> Self {
        Diagnostic {
            code,
            severity: code.severity(),
            message,
            help: None,
            file: file.to_string(),
            line,
            column,
            span,
        }
    }

    /// The same diagnostic with a help line.
    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }
}

impl fmt::Display for Diagnostic {
    /// One line: `file:line:column: error[E002]: message`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}[{}]: {}",
            self.file,
            self.line,
            self.column,
            self.severity.as_str(),
            self.code,
            self.message
        )
    }
}

/// 1-based line and character column of byte `offset` in `source`.
pub(crate) fn line_column(source: &str, offset: usize) -> (usize, usize) {
    let offset = floor_char_boundary(source, offset.min(source.len()));
    let before = &source[..offset];
    let line = before.bytes().filter(|&b| b == b'\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

pub(crate) fn floor_char_boundary(source: &str, mut offset: usize) -> usize {
    while !source.is_char_boundary(offset) {
        offset -= 1;
    }
    offset
}

/// Renders diagnostics the way rustc does: header with code, `--> path:line:col`, the
/// source line, a caret under the span, and `= help:`. `source_of` gives a file's text
/// (None for files that could not be read: those render without a snippet).
///
/// ```
/// use rlm_registry::Registry;
///
/// let err = Registry::from_map([("f", "function f() end")]).unwrap_err();
/// let text = err.render(false);
/// assert!(text.contains("error[E002]"));
/// assert!(text.contains("--> <map:f>:1:1"));
/// assert!(text.contains("function f() end"));
/// ```
pub fn render<'a>(
    diagnostics: &[Diagnostic],
    source_of: impl Fn(&str) -> Option<&'a str>,
    color: bool,
) -> String {
    let renderer = renderer(color);
    let mut out = String::new();
    for diagnostic in diagnostics {
        out.push_str(&renderer.render(&report(diagnostic, source_of(&diagnostic.file))));
        out.push_str("\n\n");
    }
    out
}

fn report<'a>(d: &'a Diagnostic, source: Option<&'a str>) -> Vec<Group<'a>> {
    let level = match d.severity {
        Severity::Error => Level::ERROR,
        Severity::Warning => Level::WARNING,
        Severity::Note => Level::NOTE,
    };
    let at = Located {
        file: &d.file,
        source,
        span: d.span.clone(),
    };
    vec![group(
        level,
        d.code.as_str(),
        &d.message,
        at,
        d.help.as_deref(),
    )]
}

/// Where a message points: a file, its text if readable, and a byte span in it.
pub(crate) struct Located<'a> {
    pub file: &'a str,
    pub source: Option<&'a str>,
    pub span: Range<usize>,
}

/// One rustc-style message: `level[id]: message`, the snippet with a caret, the help.
fn group<'a>(
    level: Level<'a>,
    id: &'a str,
    message: &'a str,
    at: Located<'a>,
    help: Option<&'a str>,
) -> Group<'a> {
    let title = level.primary_title(message).id(id);
    let mut group = match at.source {
        Some(source) => {
            let span = clamp_span(source, at.span);
            title.element(
                Snippet::source(source)
                    .path(at.file)
                    .annotation(AnnotationKind::Primary.span(span)),
            )
        }
        None => title.element(annotate_snippets::Origin::path(at.file)),
    };
    if let Some(help) = help {
        group = group.element(Level::HELP.message(help));
    }
    group
}

/// Renders one error that is not a convention violation (a configuration file's, say)
/// exactly like the diagnostics: `error[id]: message`, path:line:col, snippet, help.
#[allow(dead_code)] // used by the runtime's config file, not by build.rs
pub(crate) fn render_error(
    id: &str,
    message: &str,
    at: Located<'_>,
    help: Option<&str>,
    color: bool,
) -> String {
    let renderer = renderer(color);
    renderer.render(&[group(Level::ERROR, id, message, at, help)])
}

fn renderer(color: bool) -> Renderer {
    if color {
        Renderer::styled()
    } else {
        Renderer::plain()
    }
}

/// A span the renderer can point at: inside the text, on char boundaries, and never
/// spanning lines (rustc-style carets stay on the line of the position).
fn clamp_span(source: &str, span: Range<usize>) -> Range<usize> {
    let start = floor_char_boundary(source, span.start.min(source.len()));
    let line_end = source[start..]
        .find('\n')
        .map_or(source.len(), |i| start + i);
    let end = floor_char_boundary(source, span.end.clamp(start, line_end));
    start..end
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_column_counts_characters_not_bytes() {
        let source = "a\nées x";
        let x = source.find('x').unwrap();
        assert_eq!(line_column(source, x), (2, 5));
        assert_eq!(line_column(source, 0), (1, 1));
    }

    #[test]
    fn render_shows_path_snippet_caret_code_and_help() {
        let source = "local x = 1\nfoo()\n";
        let d = Diagnostic::at(Code::SideEffect, "a.lua", source, 12..17, "side effect")
            .with_help("remove it");
        let text = render(&[d], |_| Some(source), false);
        assert!(text.contains("error[E007]: side effect"), "{text}");
        assert!(text.contains("--> a.lua:2:1"), "{text}");
        assert!(text.contains("foo()"), "{text}");
        assert!(text.contains("^^^^^"), "{text}");
        assert!(text.contains("= help: remove it"), "{text}");
    }

    #[test]
    fn render_without_source_still_names_the_file() {
        let d = Diagnostic::whole_file(Code::Unreadable, "gone.lua", "cannot read");
        let text = render(&[d], |_| None, false);
        assert!(text.contains("error[E010]: cannot read"), "{text}");
        assert!(text.contains("gone.lua"), "{text}");
    }
}
