//! Lua source cut into code, strings and comments, as Lua's own lexer would cut it.
//!
//! Three checks need to know whether a character is code or text: the guard that finds a
//! backtick full_moon would panic on, the `EXPR --> EXPECTED` split of doc examples, and
//! the Python-habit hints (which must never fire on a `!=` inside a string). They all
//! read [`pieces`], so that a string or comment is the same thing to each of them.
//!
//! The cut follows Lua 5.4's lexer: `--` starts a comment, long to its closing bracket
//! when a long bracket (`[[`, `[==[`) follows, else to the end of the line; a long
//! bracket in code starts a long string; a quote starts a short string, which a
//! backslash escapes out of (`\"`, and `\` before a line break or `\z` before blanks
//! continue it on the next line) and an unescaped line break ends (Lua then reports an
//! unfinished string). An unclosed long string or comment runs to the end.

use std::ops::Range;

/// What a stretch of source is to Lua's lexer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PieceKind {
    /// Anything outside strings and comments: names, keywords, numbers, symbols, blanks.
    Code,
    /// A quoted string, quotes included.
    ShortString,
    /// A long-bracket string, brackets included.
    LongString,
    /// A comment, `--` included, without the line break ending it.
    Comment,
}

/// One stretch of source: its kind and its byte range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Piece {
    pub kind: PieceKind,
    pub range: Range<usize>,
}

/// The pieces of `source`, in order, covering every byte of it. Every range starts and
/// ends on a character boundary. `x = 'a' -- b` is code, a short string, code and a
/// comment.
pub(crate) fn pieces(source: &str) -> impl Iterator<Item = Piece> + '_ {
    let bytes = source.as_bytes();
    let mut at = 0;
    std::iter::from_fn(move || {
        if at >= bytes.len() {
            return None;
        }
        let start = at;
        let (kind, end) = match piece_at(bytes, start) {
            Some(piece) => piece,
            None => (PieceKind::Code, code_end(bytes, start)),
        };
        at = end;
        Some(Piece {
            kind,
            range: start..end,
        })
    })
}

/// The string or comment starting at `at`, with where it ends, if one does.
fn piece_at(bytes: &[u8], at: usize) -> Option<(PieceKind, usize)> {
    match bytes[at] {
        b'-' if bytes.get(at + 1) == Some(&b'-') => {
            let end = match long_bracket_level(bytes, at + 2) {
                Some(level) => long_bracket_end(bytes, at + 2, level),
                None => line_end(bytes, at),
            };
            Some((PieceKind::Comment, end))
        }
        b'[' => {
            let level = long_bracket_level(bytes, at)?;
            Some((PieceKind::LongString, long_bracket_end(bytes, at, level)))
        }
        quote @ (b'"' | b'\'') => {
            Some((PieceKind::ShortString, short_string_end(bytes, at, quote)))
        }
        _ => None,
    }
}

/// Where the code starting at `at` ends: at the next string or comment.
fn code_end(bytes: &[u8], at: usize) -> usize {
    (at + 1..bytes.len())
        .find(|&i| piece_at(bytes, i).is_some())
        .unwrap_or(bytes.len())
}

/// The level of a long bracket opening at `at` (`[[` is 0, `[==[` is 2).
fn long_bracket_level(bytes: &[u8], at: usize) -> Option<usize> {
    if bytes.get(at) != Some(&b'[') {
        return None;
    }
    let level = bytes[at + 1..].iter().take_while(|&&b| b == b'=').count();
    (bytes.get(at + 1 + level) == Some(&b'[')).then_some(level)
}

/// Just past the bracket closing the long bracket of `level` opened at `at`, or the end.
fn long_bracket_end(bytes: &[u8], at: usize, level: usize) -> usize {
    let body = at + level + 2;
    let mut close = vec![b'='; level + 2];
    close[0] = b']';
    close[level + 1] = b']';
    bytes[body.min(bytes.len())..]
        .windows(close.len())
        .position(|window| window == close.as_slice())
        .map_or(bytes.len(), |found| body + found + close.len())
}

/// Just past the closing `quote` of the short string opened at `at`, or at the line
/// break (or end) where it is left unfinished.
fn short_string_end(bytes: &[u8], at: usize, quote: u8) -> usize {
    let mut i = at + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i = escape_end(bytes, i),
            b'\n' | b'\r' => return i,
            byte if byte == quote => return i + 1,
            _ => i += 1,
        }
    }
    bytes.len()
}

/// Just past the escape starting with the backslash at `at`: `\z` takes the blanks
/// after it, line breaks included; `\` and a line break (`\r\n` too) continue the string.
fn escape_end(bytes: &[u8], at: usize) -> usize {
    match bytes.get(at + 1) {
        Some(b'z') => {
            let blanks = bytes[at + 2..]
                .iter()
                .take_while(|b| b.is_ascii_whitespace())
                .count();
            at + 2 + blanks
        }
        Some(b'\r') if bytes.get(at + 2) == Some(&b'\n') => at + 3,
        Some(b'\n') if bytes.get(at + 2) == Some(&b'\r') => at + 3,
        Some(_) => at + 2,
        None => at + 1,
    }
}

/// The line break (or end) ending the line that `at` is on.
fn line_end(bytes: &[u8], at: usize) -> usize {
    bytes[at..]
        .iter()
        .position(|&b| b == b'\n' || b == b'\r')
        .map_or(bytes.len(), |found| at + found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cut(source: &str) -> Vec<(PieceKind, &str)> {
        pieces(source)
            .map(|piece| (piece.kind, &source[piece.range]))
            .collect()
    }

    #[test]
    fn code_strings_and_comments_are_told_apart() {
        use PieceKind::*;
        assert_eq!(
            cut("x = 'a' .. \"b\" -- c\ny = [[d]] --[==[ e\n]==] z"),
            [
                (Code, "x = "),
                (ShortString, "'a'"),
                (Code, " .. "),
                (ShortString, "\"b\""),
                (Code, " "),
                (Comment, "-- c"),
                (Code, "\ny = "),
                (LongString, "[[d]]"),
                (Code, " "),
                (Comment, "--[==[ e\n]==]"),
                (Code, " z"),
            ]
        );
    }

    #[test]
    fn escapes_keep_a_short_string_open() {
        use PieceKind::*;
        assert_eq!(
            cut(r#""a\"b" x"#),
            [(ShortString, r#""a\"b""#), (Code, " x")]
        );
        assert_eq!(cut("'a\\\nb' x"), [(ShortString, "'a\\\nb'"), (Code, " x")]);
        assert_eq!(
            cut("'a\\z\n   b' x"),
            [(ShortString, "'a\\z\n   b'"), (Code, " x")]
        );
        assert_eq!(cut("'a\\\r\nb'"), [(ShortString, "'a\\\r\nb'")]);
    }

    #[test]
    fn an_unfinished_short_string_ends_at_its_line() {
        use PieceKind::*;
        assert_eq!(cut("'a\nb"), [(ShortString, "'a"), (Code, "\nb")]);
        assert_eq!(cut("x = \"a\\"), [(Code, "x = "), (ShortString, "\"a\\")]);
    }

    #[test]
    fn unclosed_long_brackets_run_to_the_end() {
        use PieceKind::*;
        assert_eq!(
            cut("x = [==[ a ]] b"),
            [(Code, "x = "), (LongString, "[==[ a ]] b")]
        );
        assert_eq!(cut("--[[ a"), [(Comment, "--[[ a")]);
        assert_eq!(cut("--[="), [(Comment, "--[=")]);
    }

    #[test]
    fn brackets_that_are_not_long_are_code() {
        use PieceKind::*;
        assert_eq!(cut("t[ [=x] ]"), [(Code, "t[ [=x] ]")]);
        assert_eq!(cut("a - -b"), [(Code, "a - -b")]);
    }

    #[test]
    fn pieces_cover_multibyte_text_on_character_boundaries() {
        let source = "s = 'é\\é' -- ü\nt = [[ö]]";
        let mut covered = 0;
        for piece in pieces(source) {
            assert_eq!(piece.range.start, covered);
            assert!(source.is_char_boundary(piece.range.end));
            covered = piece.range.end;
        }
        assert_eq!(covered, source.len());
    }
}
