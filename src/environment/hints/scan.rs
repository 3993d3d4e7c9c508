//! The code of each source line as Lua's lexer sees it: every string made empty (`"…"`
//! becomes `""`, where the string ends), comments dropped, and the lines a long string
//! or comment spans kept, so that a habit is looked for in code only, never in text.

use crate::conventions::lexer::{PieceKind, pieces};

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
    fn a_short_string_continued_on_the_next_line_is_text_there() {
        let source = "s = 'a \\\nb != c' ~= d\nx = 1";
        assert_eq!(code_lines(source, 3), ["s = ", "'' ~= d", "x = 1"]);
    }
}
