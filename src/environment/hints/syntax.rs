//! Python written on the line an error points at, found in its code alone (strings and
//! comments removed): each case is something valid Lua never holds, so it fires only on
//! a line that is Python, whatever the error said.

/// The code of one line, split into what the cases look at.
pub(crate) struct Line<'a> {
    /// The code, trimmed.
    code: &'a str,
    /// Its names (identifiers and keywords) that are not a field (`x.name`, `x:name`).
    words: Vec<&'a str>,
}

impl<'a> Line<'a> {
    /// `code` as the scanner gave it (strings blanked, comments dropped).
    pub(crate) fn new(code: &'a str) -> Line<'a> {
        let code = code.trim();
        Line {
            code,
            words: words(code),
        }
    }

    fn has(&self, word: &str) -> bool {
        self.words.contains(&word)
    }

    fn starts_with_word(&self, word: &str) -> bool {
        self.words.first() == Some(&word) && self.code.starts_with(word)
    }

    /// A block header in Python's form: `keyword …:`, on a line of its own or followed
    /// by its body, where Lua would need `opener` (`then`, `do`).
    fn is_block(&self, keyword: &str, opener: &str) -> bool {
        self.starts_with_word(keyword)
            && (self.code.ends_with(':') || (bare_colon(self.code) && !self.has(opener)))
    }
}

/// A Python habit and the Lua way, one line.
struct Case {
    /// What the model wrote, as the table of `docs/python-to-lua.md` shows it.
    #[allow(dead_code)] // Read by the test that each case finds its own example.
    python: &'static str,
    /// Whether the line holds it.
    found: fn(&Line) -> bool,
    /// The Lua way.
    hint: &'static str,
    /// Whether it is valid Lua that reads a nil global: it fails later, on another line.
    makes_nil: bool,
}

/// How Lua formats, for `"…".format(…)` and `"…" % x`.
pub(crate) const FORMAT: &str =
    "Lua formats with `string.format(\"%s: %d\", name, n)` (`%s`, `%d`, `%.2f`; no `{}`).";

/// The cases, most specific first: the first that matches gives the hint.
const CASES: &[Case] = &[
    Case {
        python: "a != b",
        found: |l| l.code.contains("!="),
        hint: "Lua writes not-equal as `~=`: `a ~= b`.",
        makes_nil: false,
    },
    Case {
        python: "a && b, a || b",
        found: |l| l.code.contains("&&") || l.code.contains("||"),
        hint: "Lua writes `and`, `or` and `not` as words: `a and b`, `a or b`, `not a`.",
        makes_nil: false,
    },
    Case {
        python: "!x",
        found: |l| l.code.contains('!'),
        hint: "Lua writes `not x`; not-equal is `~=`.",
        makes_nil: false,
    },
    Case {
        python: "x += 1",
        found: |l| compound_assignment(l.code),
        hint: "Lua has no `+=`, `-=` or `*=`: write `x = x + 1`.",
        makes_nil: false,
    },
    Case {
        python: "x ** 2",
        found: |l| l.code.contains("**"),
        hint: "Lua writes powers with `^`: `x ^ 2` (a float; `x * x` keeps an integer).",
        makes_nil: false,
    },
    Case {
        python: "\"\"\"text\"\"\"",
        found: |l| l.code.contains("\"\"\"") || l.code.contains("'''"),
        hint: "Lua has no triple-quoted strings: text over several lines goes in `[[ … ]]`.",
        makes_nil: false,
    },
    Case {
        python: "\", \".join(parts)",
        found: |l| l.code.contains("\"\".join") || l.code.contains("''.join"),
        hint: "Lua joins with `table.concat(parts, \", \")`.",
        makes_nil: false,
    },
    Case {
        python: "\"{}: {}\".format(name, n)",
        found: |l| l.code.contains("\"\".format") || l.code.contains("''.format"),
        hint: FORMAT,
        makes_nil: false,
    },
    Case {
        python: "print(x, end=\"\")",
        found: |l| keyword_argument(l.code),
        hint: "Lua has no keyword arguments (`key=…`, `end=\"\"`): pass the values in order, or one table `f{key = k}`.",
        makes_nil: false,
    },
    Case {
        python: "def f(x):",
        found: |l| word_then_name(l, "def") && l.code.contains('('),
        hint: "Lua defines functions as `local function f(x) … end`.",
        makes_nil: false,
    },
    Case {
        python: "lambda x: x * 2",
        found: |l| l.has("lambda") && bare_colon(l.code),
        hint: "Lua writes `lambda x: x * 2` as `function(x) return x * 2 end`.",
        makes_nil: false,
    },
    Case {
        python: "elif c:",
        found: |l| l.starts_with_word("elif") && (l.code.ends_with(':') || l.has("then")),
        hint: "Lua writes `elseif c then`.",
        makes_nil: false,
    },
    Case {
        python: "[f(x) for x in xs]",
        found: |l| comprehension(l.code),
        hint: "Lua has no comprehensions: fill a table in a loop, `local out = {} for _, x in ipairs(xs) do out[#out + 1] = f(x) end`.",
        makes_nil: false,
    },
    Case {
        python: "import re / from x import y",
        found: |l| word_then_name(l, "import") || (word_then_name(l, "from") && l.has("import")),
        hint: "Nothing is imported in Lua here: the functions are globals already (`help()` lists them).",
        makes_nil: false,
    },
    Case {
        python: "try: / except E:",
        found: |l| {
            l.is_block("try", "do")
                || l.is_block("finally", "do")
                || (l.starts_with_word("except") && l.code.ends_with(':'))
        },
        hint: "Lua catches errors with `local ok, err = pcall(f, arg)` and raises them with `error(\"message\")`.",
        makes_nil: false,
    },
    Case {
        python: "raise ValueError(...)",
        found: |l| word_then_name(l, "raise"),
        hint: "Lua raises errors with `error(\"message\")`.",
        makes_nil: false,
    },
    Case {
        python: "for x in xs:",
        found: |l| l.is_block("for", "do"),
        hint: "Lua loops are `for _, x in ipairs(xs) do … end` (`pairs(t)` for keys and values, `for i = 1, n do` to count).",
        makes_nil: false,
    },
    Case {
        python: "while c:",
        found: |l| l.is_block("while", "do"),
        hint: "Lua writes `while c do … end`.",
        makes_nil: false,
    },
    Case {
        python: "if c: / else:",
        found: |l| l.is_block("if", "then") || l.code == "else:",
        hint: "Lua writes `if c then … elseif d then … else … end`, no colons.",
        makes_nil: false,
    },
    Case {
        python: "class C:",
        found: |l| l.is_block("class", "do") || l.is_block("with", "do"),
        hint: "Lua has no `class` or `with`: a table of fields and functions does the work.",
        makes_nil: false,
    },
    Case {
        python: "x = [1, 2, 3]",
        found: |l| list_literal(l.code),
        hint: "Lua tables use braces: `{1, 2, 3}`, `{key = value}`.",
        makes_nil: false,
    },
    Case {
        python: "{\"key\": value}",
        found: |l| l.code.contains("{\"\":") || l.code.contains("{'':"),
        hint: "Lua tables are `{key = value}` or `{[\"some key\"] = value}`.",
        makes_nil: false,
    },
    Case {
        python: "s[1:3]",
        found: |l| slice(l.code),
        hint: "Lua has no slices: `s:sub(i, j)` for text (from 1, both ends included), `{table.unpack(t, i, j)}` for a table.",
        makes_nil: false,
    },
    Case {
        python: "# a comment",
        found: |l| hash_comment(l.code),
        hint: "Lua comments start with `--` (`#x` is the length of `x`).",
        makes_nil: false,
    },
    Case {
        python: "x is None",
        found: |l| followed_by(&l.words, "is", &["None", "not"]),
        hint: "Lua compares with `==` and `~=`: `x == nil`, `x ~= nil`.",
        makes_nil: false,
    },
    Case {
        python: "x if c else y",
        found: |l| !l.starts_with_word("if") && l.has("if") && l.has("else") && !l.has("then"),
        hint: "Lua's conditional expression is `c and x or y` (when `x` is neither false nor nil).",
        makes_nil: false,
    },
    Case {
        python: "x in t, x not in t",
        // A line opening with `in` continues a Lua `for` written over two lines.
        found: |l| !l.has("for") && l.has("in") && !l.starts_with_word("in"),
        hint: "Lua's `in` belongs to `for`: test a key with `t[x] ~= nil`, a list with a loop.",
        makes_nil: false,
    },
    Case {
        python: "print(*xs)",
        found: |l| l.code.contains("(*") || l.code.contains(", *"),
        hint: "Lua spreads a list into arguments with `table.unpack(xs)`.",
        makes_nil: false,
    },
    Case {
        python: "assert x, \"message\"",
        found: |l| word_then_name(l, "assert") || word_then_name(l, "print"),
        hint: "`assert` and `print` are functions in Lua: `assert(x, \"message\")`, `print(x)`.",
        makes_nil: false,
    },
    Case {
        python: "del t[k]",
        found: |l| word_then_name(l, "del"),
        hint: "Lua removes a key with `t[k] = nil` (`table.remove(t, i)` in a list).",
        makes_nil: false,
    },
    Case {
        python: "continue",
        found: |l| l.code == "continue",
        hint: "Lua has no `continue`: `goto continue`, with `::continue::` just before the loop's `end`.",
        makes_nil: false,
    },
    Case {
        python: "\"abc\".upper()",
        found: |l| literal_method(l.code),
        hint: "A string literal's methods need parentheses and a colon in Lua: `(\"abc\"):upper()`.",
        makes_nil: false,
    },
    Case {
        python: "pass",
        found: |l| l.code == "pass",
        hint: "Lua needs no `pass`: a block may be empty.",
        makes_nil: false,
    },
    Case {
        python: "True, False, None",
        found: |l| l.has("True") || l.has("False") || l.has("None"),
        hint: "Lua writes `true`, `false` and `nil` in lower case.",
        makes_nil: true,
    },
];

/// The hint for the first case `code` holds.
pub(crate) fn hint(code: &str) -> Option<&'static str> {
    let line = Line::new(code);
    CASES
        .iter()
        .find(|case| (case.found)(&line))
        .map(|case| case.hint)
}

/// The hint for the first case `code` holds that makes a nil value (`None`), for a nil
/// value met on a later line.
pub(crate) fn nil_hint(code: &str) -> Option<&'static str> {
    let line = Line::new(code);
    CASES
        .iter()
        .find(|case| case.makes_nil && (case.found)(&line))
        .map(|case| case.hint)
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

/// `# a comment`: `#` opening the line and followed by two words in a row (or nothing,
/// or another `#` or `!`). `# t` alone may continue an expression (`1 +\n # t`).
fn hash_comment(code: &str) -> bool {
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
fn literal_method(code: &str) -> bool {
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
fn word_then_name(line: &Line, word: &str) -> bool {
    line.starts_with_word(word)
        && line.code[word.len()..]
            .strip_prefix(' ')
            .and_then(|rest| rest.trim_start().chars().next())
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `x += 1` and its kin: an arithmetic operator right before `=` (not `==`, `~=`, `<=`,
/// `>=`, which are Lua's).
fn compound_assignment(code: &str) -> bool {
    code.match_indices('=').any(|(at, _)| {
        let before = code[..at].trim_end_matches(' ');
        let next = code[at + 1..].chars().next();
        next != Some('=') && before.ends_with(['+', '-', '*', '/', '%'])
    })
}

/// `f(x, key=value)`: an argument that is an assignment, which Lua never allows. Tables
/// (`f{key = v}`, `f({key = v})`) and functions written in the call are left alone.
fn keyword_argument(code: &str) -> bool {
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
fn comprehension(code: &str) -> bool {
    code.match_indices('[').any(|(at, _)| {
        let inside = &code[at + 1..];
        let inside = &inside[..inside.find(']').unwrap_or(inside.len())];
        let words = words(inside);
        words.contains(&"for") && words.contains(&"in")
    })
}

/// `[` where Lua expects a value: after `=` (not `==`), `(`, `return`, or opening the line.
fn list_literal(code: &str) -> bool {
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
fn slice(code: &str) -> bool {
    code.match_indices('[').any(|(at, _)| {
        let inside = &code[at + 1..];
        bare_colon(&inside[..inside.find(']').unwrap_or(inside.len())])
    })
}

/// Whether `code` has a colon that is neither a method call (`s:find("x")`, `s:upper""`,
/// `t:f{}`) nor part of a label (`::continue::`): Python's, opening a block or a slice.
fn bare_colon(code: &str) -> bool {
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

/// Whether `word` is followed by one of `next` somewhere in `words`.
fn followed_by(words: &[&str], word: &str, next: &[&str]) -> bool {
    words
        .windows(2)
        .any(|pair| pair[0] == word && next.contains(&pair[1]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_case_finds_its_own_example() {
        for case in CASES {
            let code = &crate::environment::hints::scan::code_lines(case.python, 1)[0];
            assert_eq!(hint(code), Some(case.hint), "{}", case.python);
        }
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
    fn a_call_is_not_a_python_statement() {
        for python in [
            "def f(x):",
            "import json",
            "raise ValueError(\"x\")",
            "del t[1]",
        ] {
            assert!(hint(python).is_some(), "{python}");
        }
        for lua in [
            "def(x)",
            "import(\"json\")",
            "raise(err)",
            "del(t, 1)",
            "elif = 1",
        ] {
            assert_eq!(hint(lua), None, "{lua}");
        }
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
