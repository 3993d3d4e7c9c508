//! A pre-parse guard: full_moon 3.0 panics (`unreachable!`) on a backtick outside a
//! string or comment (upstream issue #359), which Lua 5.4 rejects anyway. This scan finds
//! such a backtick so it becomes an E001 instead of a panic.

/// Byte offset of the first backtick that is not inside a string or a comment.
pub(crate) fn first_bare_backtick(source: &str) -> Option<usize> {
    if !source.contains('`') {
        return None;
    }
    let bytes = source.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        i = match bytes[i] {
            b'`' => return Some(i),
            b'-' if bytes.get(i + 1) == Some(&b'-') => skip_comment(bytes, i + 2),
            b'[' => match long_bracket_level(bytes, i) {
                Some(level) => skip_long_bracket(bytes, i, level),
                None => i + 1,
            },
            quote @ (b'"' | b'\'') => skip_short_string(bytes, i + 1, quote),
            _ => i + 1,
        };
    }
    None
}

fn skip_comment(bytes: &[u8], start: usize) -> usize {
    if let Some(level) = long_bracket_level(bytes, start) {
        return skip_long_bracket(bytes, start, level);
    }
    bytes[start..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(bytes.len(), |p| start + p + 1)
}

/// `[[`, `[=[`, `[==[` … at `start`: the number of `=`.
fn long_bracket_level(bytes: &[u8], start: usize) -> Option<usize> {
    if bytes.get(start) != Some(&b'[') {
        return None;
    }
    let equals = bytes[start + 1..]
        .iter()
        .take_while(|&&b| b == b'=')
        .count();
    (bytes.get(start + 1 + equals) == Some(&b'[')).then_some(equals)
}

fn skip_long_bracket(bytes: &[u8], start: usize, level: usize) -> usize {
    let mut close = vec![b']'];
    close.extend(std::iter::repeat_n(b'=', level));
    close.push(b']');
    let body = start + level + 2;
    bytes[body..]
        .windows(close.len())
        .position(|w| w == close.as_slice())
        .map_or(bytes.len(), |p| body + p + close.len())
}

fn skip_short_string(bytes: &[u8], start: usize, quote: u8) -> usize {
    let mut i = start;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'\n' => return i + 1,
            b if b == quote => return i + 1,
            _ => i += 1,
        }
    }
    bytes.len()
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
