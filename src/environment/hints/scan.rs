//! The code of one source line as Lua's lexer sees it: string contents blanked (`"…"`
//! becomes `""`), comments dropped, and long strings or comments that began on an earlier
//! line followed, so that a habit is looked for in code only, never in text.

/// Where the lexer is at the start of a line.
#[derive(Clone, Copy, PartialEq)]
enum State {
    Code,
    /// Inside a long string (`[[…]]`, `[==[…]==]`) of this level.
    LongString(usize),
    /// Inside a long comment (`--[[…]]`) of this level.
    LongComment(usize),
}

/// The code of each line of `source`, up to line `last` (1-based) at most.
pub(crate) fn code_lines(source: &str, last: usize) -> Vec<String> {
    let mut state = State::Code;
    source
        .split('\n')
        .take(last)
        .map(|text| {
            let (code, next) = scan(text, state);
            state = next;
            code
        })
        .collect()
}

/// The code of `text` starting in `state`, and the state at its end.
fn scan(text: &str, mut state: State) -> (String, State) {
    let bytes = text.as_bytes();
    let mut code = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        match state {
            State::LongString(level) | State::LongComment(level) => {
                let Some(end) = find_long_close(&text[i..], level) else {
                    return (code, state);
                };
                if matches!(state, State::LongString(_)) {
                    code.push_str("\"\"");
                }
                i += end;
                state = State::Code;
            }
            State::Code => {
                let rest = &text[i..];
                if let Some(comment) = rest.strip_prefix("--") {
                    match long_open(comment) {
                        Some((level, len)) => {
                            i += 2 + len;
                            state = State::LongComment(level);
                        }
                        None => return (code, State::Code),
                    }
                } else if let Some((level, len)) = long_open(rest) {
                    i += len;
                    state = State::LongString(level);
                } else if bytes[i] == b'"' || bytes[i] == b'\'' {
                    let quote = bytes[i];
                    code.push(quote as char);
                    code.push(quote as char);
                    i += short_string_len(&bytes[i..], quote);
                } else {
                    let c = rest.chars().next().unwrap_or(' ');
                    code.push(c);
                    i += c.len_utf8();
                }
            }
        }
    }
    (code, state)
}

/// The level and length of a long bracket opening `text` (`[[` is 0, `[==[` is 2).
fn long_open(text: &str) -> Option<(usize, usize)> {
    let rest = text.strip_prefix('[')?;
    let level = rest.bytes().take_while(|&b| b == b'=').count();
    rest[level..].starts_with('[').then_some((level, level + 2))
}

/// The offset just past the closing bracket of `level` in `text`.
fn find_long_close(text: &str, level: usize) -> Option<usize> {
    let close = format!("]{}]", "=".repeat(level));
    text.find(&close).map(|at| at + close.len())
}

/// The length of the short string opening `bytes` with `quote` (to the end of the line
/// when it is not closed: Lua reports that as an error of its own).
fn short_string_len(bytes: &[u8], quote: u8) -> usize {
    let mut i = 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b if b == quote => return i + 1,
            _ => i += 1,
        }
    }
    bytes.len()
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
}
