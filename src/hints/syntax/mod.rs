//! Python written on the line an error points at, found in its code alone (strings and
//! comments removed): each case is something valid Lua never holds, so it fires only on
//! a line that is Python, whatever the error said.

use std::collections::HashSet;

use super::Found;
use super::calls::{ENUMERATE_LEAD, RANGE_LEAD};

/// The code of one line, split into what the cases look at.
pub(crate) struct Line<'a> {
    /// The code, trimmed.
    code: &'a str,
    /// Its names (identifiers and keywords) that are not a field (`x.name`, `x:name`).
    words: Vec<&'a str>,
    /// The names the source defines itself.
    bound: &'a HashSet<String>,
}

impl<'a> Line<'a> {
    /// `code` as the scanner gave it (strings blanked, comments dropped), in a source
    /// that defines the names `bound`.
    pub(crate) fn new(code: &'a str, bound: &'a HashSet<String>) -> Line<'a> {
        let code = code.trim();
        Line {
            code,
            words: words(code),
            bound,
        }
    }

    /// Python's `True`, `False` and `None` read on the line: not a field (`t.None`), not
    /// assigned or a table's key (`None = 1`), not a name the source defines.
    fn python_names(&self) -> Vec<&'static str> {
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
    /// The Lua way, when the line's fix is not quoted.
    hint: &'static str,
    /// What is said before the quoted fix of the line; `None` where no rewrite of the
    /// line is mechanical.
    lead: Option<Lead>,
    /// Whether it is valid Lua that reads a nil global: it fails later, on another line.
    makes_nil: bool,
}

/// Python's compound assignments.
const COMPOUND_OPERATORS: &[&str] = &[
    "//=", "**=", "<<=", ">>=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=",
];

/// What a case says before the quoted fix.
#[derive(Clone, Copy)]
enum Lead {
    /// These words.
    Text(&'static str),
    /// "Lua has no `-=`", naming the operator the line uses.
    Compound,
    /// "Lua writes `None` as `nil`", naming the Python names the line uses.
    Names,
    /// What the loop the line writes needs said: `range` counting from 0, `enumerate`
    /// from 1, `pairs` for a dictionary, `ipairs` for a list.
    Loop,
}

impl Lead {
    fn say(self, line: &Line) -> String {
        match self {
            Lead::Text(text) => text.to_string(),
            Lead::Compound => {
                let op = COMPOUND_OPERATORS
                    .iter()
                    .filter_map(|op| line.code.find(op).map(|at| (at, *op)))
                    .min_by_key(|(at, op)| (*at, std::cmp::Reverse(op.len())))
                    .map_or("+=", |(_, op)| op);
                format!("Lua has no `{op}`")
            }
            Lead::Names => {
                let names: Vec<String> = line
                    .python_names()
                    .iter()
                    .map(|name| {
                        format!(
                            "`{name}` as `{}`",
                            name.to_lowercase().replace("none", "nil")
                        )
                    })
                    .collect();
                format!("Lua writes {}", names.join(" and "))
            }
            Lead::Loop if line.code.contains("range(") => RANGE_LEAD.to_string(),
            Lead::Loop if line.code.contains("enumerate(") => ENUMERATE_LEAD.to_string(),
            Lead::Loop
                if [".items(", ".keys(", ".values("]
                    .iter()
                    .any(|v| line.code.contains(v)) =>
            {
                "Lua walks a table's keys and values with `pairs(t)`, closing the loop with `end`"
                    .to_string()
            }
            Lead::Loop => {
                "Lua walks a list with `ipairs(xs)`, closing the loop with `end`".to_string()
            }
        }
    }
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
        lead: Some(Lead::Text("Lua writes not-equal as `~=`")),
        makes_nil: false,
    },
    Case {
        python: "a && b, a || b",
        found: |l| l.code.contains("&&") || l.code.contains("||"),
        hint: "Lua writes `and`, `or` and `not` as words: `a and b`, `a or b`, `not a`.",
        lead: Some(Lead::Text("Lua writes `and`, `or` and `not` as words")),
        makes_nil: false,
    },
    Case {
        python: "!x",
        found: |l| l.code.contains('!'),
        hint: "Lua writes `not x`; not-equal is `~=`.",
        lead: Some(Lead::Text("Lua writes `!x` as `not x`")),
        makes_nil: false,
    },
    Case {
        python: "x += 1",
        found: |l| compound_assignment(l.code),
        hint: "Lua has no `+=`, `-=` or `*=`: write `x = x + 1`.",
        lead: Some(Lead::Compound),
        makes_nil: false,
    },
    Case {
        python: "x ** 2",
        found: |l| l.code.contains("**"),
        hint: "Lua writes powers with `^`: `x ^ 2` (a float; `x * x` keeps an integer).",
        lead: Some(Lead::Text("Lua writes powers with `^`")),
        makes_nil: false,
    },
    Case {
        python: "\"\"\"text\"\"\"",
        found: |l| l.code.contains("\"\"\"") || l.code.contains("'''"),
        hint: "Lua has no triple-quoted strings: text over several lines goes in `[[ … ]]`.",
        lead: Some(Lead::Text("Lua has no triple-quoted strings")),
        makes_nil: false,
    },
    Case {
        python: "\", \".join(parts)",
        found: |l| l.code.contains("\"\".join") || l.code.contains("''.join"),
        hint: "Lua joins with `table.concat(parts, \", \")`.",
        lead: Some(Lead::Text("Lua joins with `table.concat(list, sep)`")),
        makes_nil: false,
    },
    Case {
        python: "\"{}: {}\".format(name, n)",
        found: |l| l.code.contains("\"\".format") || l.code.contains("''.format"),
        hint: FORMAT,
        lead: Some(Lead::Text("Lua formats with `string.format`")),
        makes_nil: false,
    },
    Case {
        python: "\"%d of %d\" % (a, b)",
        found: |l| format_tuple(l.code),
        hint: FORMAT,
        lead: Some(Lead::Text("Lua formats with `string.format`")),
        makes_nil: false,
    },
    Case {
        python: "def f(x):",
        found: |l| word_then_name(l, "def") && l.code.contains('('),
        hint: "Lua defines functions as `function f(x) … end`.",
        lead: Some(Lead::Text(
            "Lua defines a function as `function f(x) … end`",
        )),
        makes_nil: false,
    },
    Case {
        python: "print(x, end=\"\")",
        found: |l| keyword_argument(l.code),
        hint: "Lua has no keyword arguments (`key=…`, `end=\"\"`): pass the values in order, or one table `f{key = k}`.",
        lead: None,
        makes_nil: false,
    },
    Case {
        python: "lambda x: x * 2",
        found: |l| l.has("lambda") && bare_colon(l.code),
        hint: "Lua writes `lambda x: x * 2` as `function(x) return x * 2 end`.",
        lead: Some(Lead::Text(
            "Lua writes `lambda x: e` as `function(x) return e end`",
        )),
        makes_nil: false,
    },
    Case {
        python: "elif c:",
        found: |l| l.starts_with_word("elif") && (l.code.ends_with(':') || l.has("then")),
        hint: "Lua writes `elseif c then`.",
        lead: Some(Lead::Text("Lua writes `elif c:` as `elseif c then`")),
        makes_nil: false,
    },
    Case {
        python: "[f(x) for x in xs]",
        found: |l| comprehension(l.code),
        hint: "Lua has no comprehensions: fill a table in a loop, `local out = {} for _, x in ipairs(xs) do out[#out + 1] = f(x) end`.",
        lead: None,
        makes_nil: false,
    },
    Case {
        python: "import re / from x import y",
        found: |l| word_then_name(l, "import") || (word_then_name(l, "from") && l.has("import")),
        hint: "Nothing is imported in Lua here: the functions are globals already (`help()` lists them).",
        lead: None,
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
        lead: None,
        makes_nil: false,
    },
    Case {
        python: "raise ValueError(...)",
        found: |l| word_then_name(l, "raise"),
        hint: "Lua raises errors with `error(\"message\")`.",
        lead: Some(Lead::Text("Lua raises errors with `error(message)`")),
        makes_nil: false,
    },
    Case {
        python: "for x in xs:",
        found: |l| l.is_block("for", "do"),
        hint: "Lua loops are `for _, x in ipairs(xs) do … end` (`pairs(t)` for keys and values, `for i = 1, n do` to count).",
        lead: Some(Lead::Loop),
        makes_nil: false,
    },
    Case {
        python: "while c:",
        found: |l| l.is_block("while", "do"),
        hint: "Lua writes `while c do … end`.",
        lead: Some(Lead::Text("Lua writes `while c do … end`")),
        makes_nil: false,
    },
    Case {
        python: "if c: / else:",
        found: |l| l.is_block("if", "then") || l.code == "else:",
        hint: "Lua writes `if c then … elseif d then … else … end`, no colons.",
        lead: Some(Lead::Text("Lua writes `if c then … else … end`, no colons")),
        makes_nil: false,
    },
    Case {
        python: "class C:",
        found: |l| l.is_block("class", "do") || l.is_block("with", "do"),
        hint: "Lua has no `class` or `with`: a table of fields and functions does the work.",
        lead: None,
        makes_nil: false,
    },
    Case {
        python: "x = [1, 2, 3]",
        found: |l| list_literal(l.code),
        hint: "Lua tables use braces: `{1, 2, 3}`, `{key = value}`.",
        lead: Some(Lead::Text("Lua tables use braces")),
        makes_nil: false,
    },
    Case {
        python: "{\"key\": value}",
        found: |l| l.code.contains("{\"\":") || l.code.contains("{'':"),
        hint: "Lua tables are `{key = value}` or `{[\"some key\"] = value}`.",
        lead: Some(Lead::Text("Lua tables are `{key = value}`")),
        makes_nil: false,
    },
    Case {
        python: "\"key\": value,",
        found: |l| {
            ["\"\"", "''"].iter().any(|string| {
                l.code
                    .strip_prefix(string)
                    .is_some_and(|rest| rest.trim_start().starts_with(':'))
            })
        },
        hint: "Lua tables are `{key = value}` or `{[\"some key\"] = value}`.",
        lead: Some(Lead::Text("Lua tables are `{key = value}`")),
        makes_nil: false,
    },
    Case {
        python: "s[1:3]",
        found: |l| slice(l.code),
        hint: "Lua has no slices: `s:sub(i, j)` for text (from 1, both ends included), `{table.unpack(t, i, j)}` for a table.",
        lead: None,
        makes_nil: false,
    },
    Case {
        python: "# a comment",
        found: |l| hash_comment(l.code),
        hint: "Lua comments start with `--` (`#x` is the length of `x`).",
        lead: Some(Lead::Text("Lua comments start with `--`")),
        makes_nil: false,
    },
    Case {
        python: "x is None",
        found: |l| followed_by(&l.words, "is", &["None", "not"]),
        hint: "Lua compares with `==` and `~=`: `x == nil`, `x ~= nil`.",
        lead: Some(Lead::Text("Lua compares with `==` and `~=`")),
        makes_nil: false,
    },
    Case {
        python: "x if c else y",
        found: |l| !l.starts_with_word("if") && l.has("if") && l.has("else") && !l.has("then"),
        hint: "Lua's conditional expression is `c and x or y` (when `x` is neither false nor nil).",
        lead: Some(Lead::Text(
            "Lua's conditional expression is `c and x or y` (`y` also when `x` is false or nil)",
        )),
        makes_nil: false,
    },
    Case {
        python: "x in t, x not in t",
        // A line opening with `in` continues a Lua `for` written over two lines.
        found: |l| !l.has("for") && l.has("in") && !l.starts_with_word("in"),
        hint: "Lua's `in` belongs to `for`: test a key with `t[x] ~= nil`, a list with a loop.",
        lead: None,
        makes_nil: false,
    },
    Case {
        python: "print(*xs)",
        found: |l| l.code.contains("(*") || l.code.contains(", *"),
        hint: "Lua spreads a list into arguments with `table.unpack(xs)`.",
        lead: Some(Lead::Text(
            "Lua spreads a list into arguments with `table.unpack`",
        )),
        makes_nil: false,
    },
    Case {
        python: "assert x, \"message\"",
        found: |l| word_then_name(l, "assert") || word_then_name(l, "print"),
        hint: "`assert` and `print` are functions in Lua: `assert(x, \"message\")`, `print(x)`.",
        lead: Some(Lead::Text("`assert` and `print` are functions in Lua")),
        makes_nil: false,
    },
    Case {
        python: "del t[k]",
        found: |l| word_then_name(l, "del"),
        hint: "Lua removes a key with `t[k] = nil` (`table.remove(t, i)` in a list).",
        lead: Some(Lead::Text("Lua removes a key by setting it to `nil`")),
        makes_nil: false,
    },
    Case {
        python: "continue",
        found: |l| l.code == "continue",
        hint: "Lua has no `continue`: `goto continue`, with `::continue::` just before the loop's `end`.",
        lead: None,
        makes_nil: false,
    },
    Case {
        python: "\"abc\".upper()",
        found: |l| literal_method(l.code),
        hint: "A string literal's methods need parentheses and a colon in Lua: `(\"abc\"):upper()`.",
        lead: Some(Lead::Text(
            "Lua calls a string literal's methods in parentheses, with a colon",
        )),
        makes_nil: false,
    },
    Case {
        python: "pass",
        found: |l| l.code == "pass",
        hint: "Lua needs no `pass`: a block may be empty.",
        lead: None,
        makes_nil: false,
    },
    Case {
        python: "x = 1  # note",
        found: |l| trailing_hash_comment(l.code),
        hint: "Lua comments start with `--` (`#x` is the length of `x`).",
        lead: Some(Lead::Text("Lua comments start with `--`")),
        makes_nil: false,
    },
    Case {
        python: "True, False, None",
        found: |l| !l.python_names().is_empty(),
        hint: "Lua writes `true`, `false` and `nil` in lower case.",
        lead: Some(Lead::Names),
        makes_nil: true,
    },
];

/// What to say about the first case `code` holds, in a source defining `bound`.
pub(crate) fn find(code: &str, bound: &HashSet<String>) -> Option<Found> {
    let line = Line::new(code, bound);
    CASES
        .iter()
        .find(|case| (case.found)(&line))
        .map(|case| case.say(&line))
}

/// What to say about the first case `code` holds that makes a nil value (`None`), for a
/// nil value met on a later line.
pub(crate) fn find_nil(code: &str, bound: &HashSet<String>) -> Option<Found> {
    let line = Line::new(code, bound);
    CASES
        .iter()
        .find(|case| case.makes_nil && (case.found)(&line))
        .map(|case| case.say(&line))
}

impl Case {
    fn say(&self, line: &Line) -> Found {
        Found {
            lead: self.lead.map(|lead| lead.say(line)),
            rule: self.hint.to_string(),
        }
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
fn format_tuple(code: &str) -> bool {
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
fn trailing_hash_comment(code: &str) -> bool {
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
                let keyword = super::fix::LUA_KEYWORDS.contains(&word);
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

    fn hint(code: &str) -> Option<String> {
        find(code, &HashSet::new()).map(|found| found.rule)
    }

    #[test]
    fn each_case_finds_its_own_example() {
        for case in CASES {
            let code = &crate::hints::scan::code_lines(case.python, 1)[0];
            assert_eq!(hint(code).as_deref(), Some(case.hint), "{}", case.python);
        }
    }

    #[test]
    fn python_names_the_code_defines_fields_and_keys_are_not_python() {
        let none = HashSet::new();
        let bound = HashSet::from(["None".to_string()]);
        assert!(find("v = None", &none).is_some());
        assert!(find("v = None", &bound).is_none());
        for lua in [
            "v = t.None",
            "v = opts.True",
            "t = {None = 1}",
            "None = 1",
            "v = s:False()",
        ] {
            assert!(find(lua, &none).is_none(), "{lua}");
        }
        let found = find("ok = True and x ~= None", &none).unwrap();
        assert_eq!(
            found.lead.unwrap(),
            "Lua writes `None` as `nil` and `True` as `true`"
        );
    }

    #[test]
    fn the_lead_names_the_compound_operator_written() {
        let lead = |code: &str| find(code, &HashSet::new()).unwrap().lead.unwrap();
        assert_eq!(lead("n-=1"), "Lua has no `-=`");
        assert_eq!(lead("n //= 2"), "Lua has no `//=`");
        assert_eq!(lead("t[i] **= 2"), "Lua has no `**=`");
    }

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
