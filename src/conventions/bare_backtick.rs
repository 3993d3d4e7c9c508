//! A pre-parse guard: full_moon 3.0 panics (`unreachable!`) on a backtick outside a
//! string or comment (upstream issue #359), which Lua 5.4 rejects anyway. This scan finds
//! such a backtick so it becomes an E001 instead of a panic.

use super::lexer::{PieceKind, pieces};

/// Byte offset of the first backtick that is not inside a string or a comment.
pub(crate) fn first_bare_backtick(source: &str) -> Option<usize> {
    if !source.contains('`') {
        return None;
    }
    pieces(source)
        .filter(|piece| piece.kind == PieceKind::Code)
        .find_map(|piece| {
            let at = source[piece.range.clone()].find('`')?;
            Some(piece.range.start + at)
        })
}

#[cfg(test)]
mod tests {
    use super::first_bare_backtick;

    #[test]
    fn backticks_in_strings_and_comments_are_fine() {
        let code = "local s = \"`a`\" .. '`' .. [[`]] .. [==[ ` ]==] -- `x`\n--[[ ` ]] x = 1";
        assert_eq!(first_bare_backtick(code), None);
    }

    #[test]
    fn bare_backtick_is_found() {
        assert_eq!(first_bare_backtick("J`"), Some(1));
        assert_eq!(first_bare_backtick("local s = '\\'' x = `"), Some(19));
        assert_eq!(first_bare_backtick("-- c\n`"), Some(5));
    }
}
