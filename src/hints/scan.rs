//! The code of each source line as Lua's lexer sees it: every string made empty (`"…"`
//! becomes `""`, where the string ends), comments dropped, and the lines a long string
//! or comment spans kept, so that a habit is looked for in code only, never in text.
//! Beside it, each line as written, when it is whole (no string or comment runs into it
//! from another line), for the quoted fix; and the names the source defines.

use std::collections::HashSet;

use crate::conventions::lexer::{PieceKind, pieces};

/// One line of the source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Line<'a> {
    /// Its code: strings blanked, comments dropped.
    pub code: String,
    /// The line as written, when it stands on its own.
    pub text: Option<&'a str>,
}

/// The lines of `source`, up to line `last` (1-based) at most.
pub(crate) fn lines(source: &str, last: usize) -> Vec<Line<'_>> {
    let code = code_lines(source, last);
    let mut spanned = HashSet::new();
    let mut line = 0;
    for piece in pieces(source) {
        let text = &source[piece.range];
        let breaks = text.matches('\n').count();
        if piece.kind != PieceKind::Code && breaks > 0 {
            spanned.extend(line..=line + breaks);
        }
        line += breaks;
        if line >= last {
            break;
        }
    }
    code.into_iter()
        .zip(source.split('\n'))
        .enumerate()
        .map(|(i, (code, text))| Line {
            code,
            text: (!spanned.contains(&i)).then_some(text),
        })
        .collect()
}

/// The names the code of `lines` defines: after `local`, a function's name and
/// parameters, a `for`'s variables, and a global assigned at the start of a line. A
/// Python name so defined (`local None = 1`) is the code's own.
pub(crate) fn bound_names(lines: &[Line]) -> HashSet<String> {
    let mut bound = HashSet::new();
    for line in lines {
        let words = names_and_symbols(&line.code);
        let mut i = 0;
        while i < words.len() {
            match words[i] {
                "local" | "for" => i = bind_list(&words, i + 1, &mut bound),
                "function" => {
                    if let Some(name) = words.get(i + 1).filter(|w| is_name(w)) {
                        bound.insert(name.to_string());
                    }
                    let open = words[i..]
                        .iter()
                        .position(|w| *w == "(")
                        .map(|at| i + at + 1);
                    i = open.map_or(i + 1, |open| bind_list(&words, open, &mut bound));
                }
                _ => i += 1,
            }
        }
        if words.len() > 1 && is_name(words[0]) && matches!(words[1], "=" | ",") {
            bind_list(&words, 0, &mut bound);
        }
    }
    bound
}

/// Binds the names listed from `start` (`a, b <const>`), to the first word that is
/// neither a name nor a comma; returns where the list ends.
fn bind_list(words: &[&str], start: usize, bound: &mut HashSet<String>) -> usize {
    let mut i = start;
    while let Some(word) = words.get(i) {
        match *word {
            "," | "<" | ">" | "const" | "close" | "function" => {}
            word if is_name(word) => {
                bound.insert(word.to_string());
            }
            _ => break,
        }
        i += 1;
    }
    i
}

fn is_name(word: &str) -> bool {
    word.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && !matches!(word, "in" | "do" | "end" | "then")
}

/// `code` cut into names and single symbols (`=` and `==` apart), blanks dropped.
fn names_and_symbols(code: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(c) = rest.chars().next() {
        let len = if c.is_ascii_alphanumeric() || c == '_' {
            rest.bytes()
                .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
                .count()
        } else if rest.starts_with("==") {
            2
        } else {
            c.len_utf8()
        };
        if !c.is_whitespace() {
            out.push(&rest[..len]);
        }
        rest = &rest[len..];
    }
    out
}

/// The code of each line of `source`, up to line `last` (1-based) at most.
pub(crate) fn code_lines(source: &str, last: usize) -> Vec<String> {
    let end = source
        .match_indices('\n')
        .nth(last.saturating_sub(1))
        .map_or(source.len(), |(at, _)| at);
    let source = &source[..end];
    let mut code = String::with_capacity(source.len());
    for piece in pieces(source) {
        let text = &source[piece.range];
        if piece.kind == PieceKind::Code {
            code.push_str(text);
            continue;
        }
        // Keep the line breaks inside, so that lines still line up with the source.
        code.extend(text.chars().filter(|&c| c == '\n'));
        match piece.kind {
            PieceKind::ShortString => {
                let quote = &text[..1];
                code.push_str(quote);
                code.push_str(quote);
            }
            PieceKind::LongString => code.push_str("\"\""),
            PieceKind::Code | PieceKind::Comment => {}
        }
    }
    code.split('\n').map(str::to_string).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_blanked_and_comments_dropped() {
        let source = "x = 'a != b' .. \"c\\\"d\" -- e != f\ny = [[\nno != here\n]] ~= z --[==[ c\nstill ]==] w";
        let lines = code_lines(source, 10);
        assert_eq!(lines, ["x = '' .. \"\" ", "y = ", "", "\"\" ~= z ", " w"]);
        assert_eq!(code_lines(source, 2).len(), 2);
    }

    #[test]
    fn a_line_a_string_or_comment_runs_into_has_no_text() {
        let source = "a = 1\nb = [[x\ny]] c = 2\nd = 3 --[[\n]]\ne = 4";
        let texts: Vec<_> = lines(source, 10).into_iter().map(|l| l.text).collect();
        assert_eq!(
            texts,
            [Some("a = 1"), None, None, None, None, Some("e = 4")]
        );
    }

    #[test]
    fn names_the_code_defines_are_bound() {
        let source = "local None, x <const> = 1, 2\nfunction f(True, ...) end\n\
                      for k, v in pairs(t) do end\nFalse = 1\nlocal function g() end\n\
                      y = None == nil\nt.z = 1";
        let bound = bound_names(&lines(source, 10));
        for name in ["None", "x", "f", "True", "k", "v", "False", "g", "y"] {
            assert!(bound.contains(name), "{name}: {bound:?}");
        }
        assert!(!bound.contains("z") && !bound.contains("t") && !bound.contains("pairs"));
    }

    #[test]
    fn a_short_string_continued_on_the_next_line_is_text_there() {
        let source = "s = 'a \\\nb != c' ~= d\nx = 1";
        assert_eq!(code_lines(source, 3), ["s = ", "'' ~= d", "x = 1"]);
    }
}
