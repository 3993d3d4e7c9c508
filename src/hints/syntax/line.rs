//! A line's code as the cases read it: its words, and the shapes of Python that valid Lua
//! never holds (a compound assignment, a keyword argument, a comprehension, a slice, a
//! `#` comment, a colon opening a block, …), each a test of the code alone.

use std::collections::HashSet;

use super::super::kinds::{Kinds, ValueKind, looks_like_a_table};

/// The code of one line, split into what the cases look at.
pub(super) struct Line<'a> {
    /// The code, trimmed.
    pub(super) code: &'a str,
    /// Its names (identifiers and keywords) that are not a field (`x.name`, `x:name`).
    pub(super) words: Vec<&'a str>,
    /// The names the source defines itself.
    bound: &'a HashSet<String>,
    /// What the names hold, where known.
    kinds: &'a Kinds,
}

/// What Python's `in` (not a `for`'s) tests on a line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Membership {
    /// Whether text holds text: every right side is a string.
    Text,
    /// Whether a table holds a key or a value: a right side is, or is named as, a table.
    Table,
    /// A right side the code does not show.
    Unknown,
}

impl<'a> Line<'a> {
    /// `code` as the scanner gave it (strings blanked, comments dropped), in a source
    /// that defines the names `bound`, whose names hold `kinds`.
    pub(crate) fn new(code: &'a str, bound: &'a HashSet<String>, kinds: &'a Kinds) -> Line<'a> {
        let code = code.trim();
        Line {
            code,
            words: words(code),
            bound,
            kinds,
        }
    }

    /// What the line's `x in y` tests, if it has one. A line opening with `in`
    /// continues a Lua `for` written over two lines.
    pub(super) fn membership(&self) -> Option<Membership> {
        if self.has("for") || !self.has("in") || self.starts_with_word("in") {
            return None;
        }
        let operands = membership_operands(self.code);
        let mut all_text = !operands.is_empty();
        let mut a_table = false;
        for operand in operands {
            let kind = match operand {
                Operand::Literal => Some(ValueKind::Text),
                Operand::Name(name) => self.kinds.get(name),
                Operand::Other => None,
            };
            all_text &= kind == Some(ValueKind::Text);
            a_table |= kind == Some(ValueKind::Table)
                || matches!(operand, Operand::Name(name) if kind.is_none() && looks_like_a_table(name));
        }
        Some(if a_table {
            Membership::Table
        } else if all_text {
            Membership::Text
        } else {
            Membership::Unknown
        })
    }

    /// Whether the line is a Python `for` over text: `for ch in s:` with `s` a string.
    pub(super) fn walks_text(&self) -> bool {
        let Some(rest) = self.code.strip_prefix("for ") else {
            return false;
        };
        let Some((_, iterable)) = rest.split_once(" in ") else {
            return false;
        };
        // The block's colon, not a method's: the line ends or the body follows a blank.
        let Some((iterable, body)) = iterable.split_once(':') else {
            return false;
        };
        if !(body.is_empty() || body.starts_with(char::is_whitespace)) {
            return false;
        }
        let iterable = iterable.trim();
        iterable == "\"\"" || iterable == "''" || self.kinds.get(iterable) == Some(ValueKind::Text)
    }

    /// Python's `True`, `False` and `None` read on the line: not a field (`t.None`), not
    /// assigned or a table's key (`None = 1`), not a name the source defines.
    pub(super) fn python_names(&self) -> Vec<&'static str> {
        ["None", "True", "False"]
            .into_iter()
            .filter(|name| !self.bound.contains(*name) && self.reads(name))
            .collect()
    }

    /// Whether the line reads `word` somewhere, not only assigns it.
    fn reads(&self, word: &str) -> bool {
        self.code.match_indices(word).any(|(at, _)| {
            let before = self.code[..at].chars().next_back();
            let after_text = &self.code[at + word.len()..];
            let whole = !before
                .is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':'))
                && !after_text.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_');
            let after = after_text.trim_start();
            let assigned = after.starts_with('=') && !after.starts_with("==");
            whole && !assigned
        })
    }

    pub(super) fn has(&self, word: &str) -> bool {
        self.words.contains(&word)
    }

    pub(super) fn starts_with_word(&self, word: &str) -> bool {
        self.words.first() == Some(&word) && self.code.starts_with(word)
    }

    /// A block header in Python's form: `keyword …:`, on a line of its own or followed
    /// by its body, where Lua would need `opener` (`then`, `do`).
    pub(super) fn is_block(&self, keyword: &str, opener: &str) -> bool {
        self.starts_with_word(keyword)
            && (self.code.ends_with(':') || (bare_colon(self.code) && !self.has(opener)))
    }
}

/// The names of `code` that are not fields: a word after `.` or `:` is a field or a
/// method, and a word inside a number (`0x1F`, `1e5`) is not one.
fn words(code: &str) -> Vec<&str> {
    let bytes = code.as_bytes();
    let mut words = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b.is_ascii_alphanumeric() || b == b'_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            let field = start > 0 && matches!(bytes[start - 1], b'.' | b':');
            if !b.is_ascii_digit() && !field {
                words.push(&code[start..i]);
            }
        } else {
            i += 1;
        }
    }
    words
}

/// Lua's keywords that may stand between two expressions or end one.
const JOINING_KEYWORDS: &[&str] = &[
    "and", "or", "not", "then", "do", "end", "else", "elseif", "in", "until",
];

/// `"%d of %d" % (a, b)`: a string, `%`, then values in parentheses with a comma between
/// them, which Lua never allows.
pub(super) fn format_tuple(code: &str) -> bool {
    ["\"\"", "''"].iter().any(|string| {
        code.match_indices(string).any(|(at, _)| {
            let Some(rest) = code[at + 2..].trim_start().strip_prefix('%') else {
                return false;
            };
            let Some(inside) = rest.trim_start().strip_prefix('(') else {
                return false;
            };
            let mut depth = 0usize;
            for c in inside.chars() {
                match c {
                    '(' | '[' | '{' => depth += 1,
                    ')' | ']' | '}' if depth == 0 => return false,
                    ')' | ']' | '}' => depth -= 1,
                    ',' if depth == 0 => return true,
                    _ => {}
                }
            }
            false
        })
    })
}

/// `x = 1  # a note`: `#` right after a value, where Lua's length operator cannot stand
/// (`x #t` is never Lua), so it starts Python's comment.
pub(super) fn trailing_hash_comment(code: &str) -> bool {
    code.match_indices('#').any(|(at, _)| {
        let before = code[..at].trim_end();
        let word_len = before
            .bytes()
            .rev()
            .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
            .count();
        let word = &before[before.len() - word_len..];
        match before.chars().next_back() {
            Some(')' | ']' | '}' | '"' | '\'') => true,
            Some(_) if word_len > 0 => {
                let keyword = super::super::fix::LUA_KEYWORDS.contains(&word);
                !keyword || matches!(word, "true" | "false" | "nil")
            }
            _ => false,
        }
    })
}

/// `# a comment`: `#` opening the line and followed by two words in a row (or nothing,
/// or another `#` or `!`). `# t` alone may continue an expression (`1 +\n # t`).
pub(crate) fn hash_comment(code: &str) -> bool {
    let Some(text) = code.strip_prefix('#') else {
        return false;
    };
    if text.is_empty() || text.starts_with(['#', '!']) {
        return true;
    }
    let mut words = text.split_whitespace();
    match (words.next(), words.next()) {
        (Some(first), Some(second)) => {
            [first, second].iter().all(|word| {
                word.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                    && !JOINING_KEYWORDS.contains(word)
            }) && text.starts_with(' ')
        }
        _ => false,
    }
}

/// `"abc".upper()`: a field of a string literal, which Lua cannot read without
/// parentheses (`"a".."b"` is a concatenation, and valid).
pub(super) fn literal_method(code: &str) -> bool {
    ["\"\".", "''."].iter().any(|literal| {
        code.match_indices(literal).any(|(at, _)| {
            code[at + literal.len()..]
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        })
    })
}

/// `import json`, `def f(`, `assert x`: `word` opening the line, a space, then a name or a
/// number, which Lua reads as two expressions in a row (where a call, `f(x)`, `f"x"`,
/// `f{x}`, would be valid).
pub(super) fn word_then_name(line: &Line, word: &str) -> bool {
    line.starts_with_word(word)
        && line.code[word.len()..]
            .strip_prefix(' ')
            .and_then(|rest| rest.trim_start().chars().next())
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `x += 1` and its kin: an arithmetic operator right before `=` (not `==`, `~=`, `<=`,
/// `>=`, which are Lua's).
pub(super) fn compound_assignment(code: &str) -> bool {
    code.match_indices('=').any(|(at, _)| {
        let before = code[..at].trim_end_matches(' ');
        let next = code[at + 1..].chars().next();
        next != Some('=') && before.ends_with(['+', '-', '*', '/', '%'])
    })
}

/// `f(x, key=value)`: an argument that is an assignment, which Lua never allows. Tables
/// (`f{key = v}`, `f({key = v})`) and functions written in the call are left alone.
pub(super) fn keyword_argument(code: &str) -> bool {
    code.match_indices('(').any(|(open, _)| {
        let mut depth = 0usize;
        let mut argument_start = true;
        let mut rest = &code[open + 1..];
        while let Some(c) = rest.chars().next() {
            if c.is_ascii_alphabetic() || c == '_' {
                let len = rest
                    .bytes()
                    .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
                    .count();
                if &rest[..len] == "function" {
                    return false;
                }
                let after = rest[len..].trim_start();
                if depth == 0
                    && argument_start
                    && after.starts_with('=')
                    && !after.starts_with("==")
                {
                    return true;
                }
                argument_start = false;
                rest = &rest[len..];
                continue;
            }
            match c {
                '(' | '[' | '{' => depth += 1,
                ')' | ']' | '}' if depth == 0 => return false,
                ')' | ']' | '}' => depth -= 1,
                ',' if depth == 0 => argument_start = true,
                c if c.is_whitespace() => {}
                _ => argument_start = false,
            }
            rest = &rest[c.len_utf8()..];
        }
        false
    })
}

/// `[… for … in …]`: `for` inside square brackets, where Lua allows only an expression.
pub(super) fn comprehension(code: &str) -> bool {
    code.match_indices('[').any(|(at, _)| {
        let inside = &code[at + 1..];
        let words = words(&inside[..matching_close(inside)]);
        words.contains(&"for") && words.contains(&"in")
    })
}

/// Where the bracket opened just before `inside` closes in it (brackets nested inside
/// counted), or its end.
fn matching_close(inside: &str) -> usize {
    let mut depth = 0usize;
    for (at, c) in inside.char_indices() {
        match c {
            '[' | '(' | '{' => depth += 1,
            ']' | ')' | '}' if depth == 0 => return at,
            ']' | ')' | '}' => depth -= 1,
            _ => {}
        }
    }
    inside.len()
}

/// `[` where Lua expects a value: after `=` (not `==`), `(`, `return`, or opening the line.
pub(super) fn list_literal(code: &str) -> bool {
    code.match_indices('[').any(|(at, _)| {
        let before = code[..at].trim_end();
        !table_key(&code[at..])
            && (before.is_empty()
                || before.ends_with('(')
                || (before.ends_with('=') && !before.ends_with("=="))
                || before.ends_with(" return")
                || before == "return")
    })
}

/// Whether `bracketed` (from a `[`) is a key in a table constructor, `["a b"] = 1`, as a
/// constructor spread over lines has on a line of its own.
fn table_key(bracketed: &str) -> bool {
    bracketed.find(']').is_some_and(|close| {
        let after = bracketed[close + 1..].trim_start();
        after.starts_with('=') && !after.starts_with("==")
    })
}

/// `t[i:j]`, `s[:3]`, `s[-2:]`: a colon inside brackets that is not a method call.
pub(super) fn slice(code: &str) -> bool {
    code.match_indices('[').any(|(at, _)| {
        let inside = &code[at + 1..];
        bare_colon(&inside[..inside.find(']').unwrap_or(inside.len())])
    })
}

/// Whether `code` has a colon that is neither a method call (`s:find("x")`, `s:upper""`,
/// `t:f{}`) nor part of a label (`::continue::`): Python's, opening a block or a slice.
pub(super) fn bare_colon(code: &str) -> bool {
    let bytes = code.as_bytes();
    code.match_indices(':').any(|(colon, _)| {
        let label = bytes.get(colon + 1) == Some(&b':') || colon > 0 && bytes[colon - 1] == b':';
        // Lua code writes a method call without a space (`s:find`); Python puts one
        // after a block's colon (`for x in xs: print(x)`).
        let after = &code[colon + 1..];
        let name_len = after
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
            .count();
        let is_method_call = name_len > 0
            && !after.as_bytes()[0].is_ascii_digit()
            && after[name_len..]
                .trim_start()
                .starts_with(['(', '"', '\'', '{']);
        !label && !is_method_call
    })
}

/// The right side of a Python `in`, as the line's code shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Operand<'a> {
    /// A string literal.
    Literal,
    /// A name alone: not a field, an index or a call.
    Name(&'a str),
    /// Any other expression.
    Other,
}

/// The right side of each `in` of `code` (the word, not a field's name).
fn membership_operands(code: &str) -> Vec<Operand<'_>> {
    word_positions(code, "in")
        .map(|at| {
            let rest = code[at + 2..].trim_start();
            if rest.starts_with("\"\"") || rest.starts_with("''") {
                return Operand::Literal;
            }
            let len = rest
                .bytes()
                .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
                .count();
            let after = &rest[len..];
            // A block's colon ends the line or is followed by a blank; a method's is not.
            let suffix = after.starts_with(['.', '[', '(', '"', '\'', '{'])
                || after.strip_prefix(':').is_some_and(|a| {
                    a.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
                });
            let name = &rest[..len];
            let not_a_name = len == 0
                || rest.starts_with(|c: char| c.is_ascii_digit())
                || super::super::fix::LUA_KEYWORDS.contains(&name);
            if not_a_name || suffix {
                Operand::Other
            } else {
                Operand::Name(name)
            }
        })
        .collect()
}

/// Where `word` stands in `code` as a word of its own, not a field's or a method's name.
fn word_positions<'c>(code: &'c str, word: &'c str) -> impl Iterator<Item = usize> + 'c {
    code.match_indices(word)
        .map(|(at, _)| at)
        .filter(move |&at| {
            let before = code[..at].chars().next_back();
            let after = code[at + word.len()..].chars().next();
            let part_of_name = |c: char| c.is_ascii_alphanumeric() || c == '_';
            !before.is_some_and(|c| part_of_name(c) || matches!(c, '.' | ':'))
                && !after.is_some_and(part_of_name)
        })
}

/// Keywords that end the condition of an `elseif`, or show that no condition follows.
const NOT_IN_A_CONDITION: &[&str] = &[
    "break", "do", "else", "elseif", "end", "for", "function", "goto", "if", "local", "repeat",
    "return", "until", "while",
];

/// `… elif c then …`: Python's `elif` where a statement starts (the line's start, or after
/// a statement's end), then a condition and `then`. A Lua name `elif` is never there: it
/// would be two expressions in a row (`elif x`) or a call before a lone `then`.
pub(crate) fn elif_in_statement(line: &Line) -> bool {
    let code = line.code;
    word_positions(code, "elif").any(|at| {
        let before = code[..at].trim_end();
        let last_word_len = before
            .bytes()
            .rev()
            .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
            .count();
        let last_word = &before[before.len() - last_word_len..];
        let after_statement = before.is_empty()
            || before.ends_with([')', ']', '}', '"', '\''])
            || matches!(
                last_word,
                "then" | "end" | "else" | "do" | "true" | "false" | "nil"
            )
            || (last_word_len > 0 && !super::super::fix::LUA_KEYWORDS.contains(&last_word));
        let rest = &code[at + "elif".len()..];
        let condition = rest.trim_start();
        let starts_a_value = condition.starts_with(|c: char| {
            c.is_ascii_alphanumeric()
                || matches!(c, '_' | '(' | '-' | '#' | '"' | '\'' | '{' | '~' | '!')
        });
        let words = words(rest);
        let first_keyword = words
            .iter()
            .find(|w| **w == "then" || NOT_IN_A_CONDITION.contains(w));
        let operator_first = matches!(words.first(), Some(&("and" | "or" | "then")))
            && condition.starts_with(words[0]);
        after_statement && starts_a_value && !operator_first && first_keyword == Some(&"then")
    })
}

/// Whether `word` is followed by one of `next` somewhere in `words`.
pub(super) fn followed_by(words: &[&str], word: &str, next: &[&str]) -> bool {
    words
        .windows(2)
        .any(|pair| pair[0] == word && next.contains(&pair[1]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_comprehension_is_found_past_brackets_inside_it() {
        assert!(comprehension("x = [s[i:i + 1] for i in t]"));
        assert!(comprehension("x = [f(a, b) for a, b in t]"));
        assert!(!comprehension("x = t[f(y)] for_each(x)"));
    }

    #[test]
    fn a_hash_after_a_value_is_a_comment_and_a_length_after_a_keyword_is_not() {
        assert!(trailing_hash_comment("x = 1  # one"));
        assert!(trailing_hash_comment("print(x) # show"));
        assert!(trailing_hash_comment("s = \"\" # text"));
        assert!(!trailing_hash_comment("return #t"));
        assert!(!trailing_hash_comment("n = #t"));
        assert!(!trailing_hash_comment("if x and #t > 0 then"));
        assert!(!trailing_hash_comment("f(#t, # u)"));
    }

    #[test]
    fn lua_operators_are_not_compound_assignments() {
        assert!(compound_assignment("x += 1"));
        assert!(compound_assignment("x -= 1"));
        assert!(!compound_assignment(
            "a ~= b and c <= d and e >= f and g == h"
        ));
        assert!(!compound_assignment("x = -1"));
    }

    #[test]
    fn only_assignments_as_arguments_are_keyword_arguments() {
        assert!(keyword_argument("print(x, end=\"\")"));
        assert!(keyword_argument("sorted(xs, key=len, reverse=True)"));
        assert!(!keyword_argument("f(a == b, c <= d, {e = 1})"));
        assert!(!keyword_argument("pcall(function() x = 1 end)"));
        assert!(!keyword_argument("f(t[i], g(h))"));
    }

    #[test]
    fn a_length_continuing_an_expression_is_not_a_comment() {
        assert!(hash_comment("# count the lines"));
        assert!(hash_comment("#"));
        assert!(hash_comment("## section"));
        assert!(!hash_comment("# t"));
        assert!(!hash_comment("#t + 1"));
        assert!(!hash_comment("# t and x"));
    }

    #[test]
    fn a_concatenation_is_not_a_literal_method() {
        assert!(literal_method("print(\"\".upper())"));
        assert!(!literal_method("x = \"\"..\"\""));
    }

    #[test]
    fn method_calls_and_labels_are_not_python_colons() {
        assert!(bare_colon("if x: y"));
        assert!(bare_colon("lambda x: x"));
        assert!(bare_colon("for x in xs: print(x)"));
        assert!(!bare_colon("if text:find(\"\")"));
        assert!(!bare_colon("::continue::"));
        assert!(!bare_colon("goto continue ::done::"));
    }

    #[test]
    fn method_calls_in_brackets_are_not_slices() {
        assert!(slice("s[1:3]"));
        assert!(slice("s[:3]"));
        assert!(slice("s[-2:]"));
        assert!(!slice("t[s:len()]"));
        assert!(!slice("t[s:upper\"\"]"));
    }
}
