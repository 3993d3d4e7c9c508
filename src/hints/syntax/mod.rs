//! Python written on the line an error points at, found in its code alone (strings and
//! comments removed): each case is something valid Lua never holds, so it fires only on
//! a line that is Python, whatever the error said.
//!
//! The cases are here, in one table, most specific first; `line` reads a line's code for
//! them: its words, and the shapes of Python that take more than a substring to see.

use std::collections::HashSet;

use super::Found;
use super::calls::{ENUMERATE_LEAD, RANGE_LEAD};
use super::kinds::Kinds;

mod line;

// The fixer's tokenizer tells a `#` comment from a length the same way.
pub(super) use line::hash_comment;
use line::{
    Line, Membership, bare_colon, compound_assignment, comprehension, elif_in_statement,
    followed_by, format_tuple, keyword_argument, list_literal, literal_method, slice,
    trailing_hash_comment, word_then_name,
};

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
            Lead::Loop if line.walks_text() => {
                "Lua walks a string's characters with `s:gmatch(utf8.charpattern)`, closing the loop with `end`"
                    .to_string()
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
        found: |l| l.is_block("elif", "then"),
        hint: "Lua writes `elseif c then`.",
        lead: Some(Lead::Text("Lua writes `elif c:` as `elseif c then`")),
        makes_nil: false,
    },
    Case {
        python: "if a then f() elif b then g() end",
        found: |l| elif_in_statement(l),
        hint: "Lua writes `elseif`, one word: `if a then … elseif b then … end`.",
        lead: Some(Lead::Text("Lua writes `elseif`, one word")),
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
        python: "\"a\" in \"text\", \"a\" not in \"text\"",
        found: |l| l.membership() == Some(Membership::Text),
        hint: "Lua finds text in a string with `s:find(x, 1, true)` (`true`: plain text, not a pattern); its `in` belongs to `for`.",
        lead: Some(Lead::Text(
            "Lua finds text in a string with `s:find(x, 1, true)`",
        )),
        makes_nil: false,
    },
    Case {
        python: "x in t, x not in t",
        found: |l| l.membership() == Some(Membership::Table),
        hint: "Lua's `in` belongs to `for`: test a key with `t[x] ~= nil`, a list with a loop.",
        lead: None,
        makes_nil: false,
    },
    Case {
        python: "x in s",
        found: |l| l.membership() == Some(Membership::Unknown),
        hint: "Lua's `in` belongs to `for`: find text in a string with `s:find(x, 1, true)`; test a table's key with `t[x] ~= nil`, a list with a loop.",
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

/// What to say about the first case `code` holds, in a source defining `bound`, its
/// names holding `kinds`.
pub(crate) fn find(code: &str, bound: &HashSet<String>, kinds: &Kinds) -> Option<Found> {
    let line = Line::new(code, bound, kinds);
    CASES
        .iter()
        .find(|case| (case.found)(&line))
        .map(|case| case.say(&line))
}

/// What to say about the first case `code` holds that makes a nil value (`None`), for a
/// nil value met on a later line.
pub(crate) fn find_nil(code: &str, bound: &HashSet<String>, kinds: &Kinds) -> Option<Found> {
    let line = Line::new(code, bound, kinds);
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

#[cfg(test)]
mod tests {
    use super::super::kinds::ValueKind;
    use super::*;

    fn hint(code: &str) -> Option<String> {
        find(code, &HashSet::new(), &Kinds::default()).map(|found| found.rule)
    }

    #[test]
    fn each_case_finds_its_own_example() {
        for case in CASES {
            let code = &super::super::scan::code_lines(case.python, 1)[0];
            assert_eq!(hint(code).as_deref(), Some(case.hint), "{}", case.python);
        }
    }

    #[test]
    fn python_names_the_code_defines_fields_and_keys_are_not_python() {
        let none = HashSet::new();
        let no_kinds = Kinds::default();
        let bound = HashSet::from(["None".to_string()]);
        assert!(find("v = None", &none, &no_kinds).is_some());
        assert!(find("v = None", &bound, &no_kinds).is_none());
        for lua in [
            "v = t.None",
            "v = opts.True",
            "t = {None = 1}",
            "None = 1",
            "v = s:False()",
        ] {
            assert!(find(lua, &none, &no_kinds).is_none(), "{lua}");
        }
        let found = find("ok = True and x ~= None", &none, &no_kinds).unwrap();
        assert_eq!(
            found.lead.unwrap(),
            "Lua writes `None` as `nil` and `True` as `true`"
        );
    }

    #[test]
    fn the_lead_names_the_compound_operator_written() {
        let lead = |code: &str| {
            find(code, &HashSet::new(), &Kinds::default())
                .unwrap()
                .lead
                .unwrap()
        };
        assert_eq!(lead("n-=1"), "Lua has no `-=`");
        assert_eq!(lead("n //= 2"), "Lua has no `//=`");
        assert_eq!(lead("t[i] **= 2"), "Lua has no `**=`");
    }

    #[test]
    fn an_elif_is_found_where_a_statement_starts() {
        let elseif = Some("Lua writes `elseif`, one word: `if a then … elseif b then … end`.");
        for python in [
            "if x == 1 then print('') elif x == 2 then print('') end",
            "elif x == 2 then",
            "print('') elif x then",
            "end elif (x) then",
        ] {
            assert_eq!(hint(python).as_deref(), elseif, "{python}");
        }
        assert_eq!(
            hint("elif x == 2:").as_deref(),
            Some("Lua writes `elseif c then`.")
        );
        assert_eq!(
            hint("elif x == 2: print(x)").as_deref(),
            Some("Lua writes `elseif c then`.")
        );
        for lua in [
            "local elif = 1",
            "if elif then elif = elif + 1 end",
            "if a then x() else if b then y() end end",
            "if a and elif then end",
            "t.elif = 1 if t then end",
            "print(elif) if x then end",
            "if a then elif(x) end if b then end",
        ] {
            assert_eq!(hint(lua), None, "{lua}");
        }
    }

    #[test]
    fn what_in_tests_is_told_by_what_its_right_side_holds() {
        let text = "Lua finds text in a string with `s:find(x, 1, true)` (`true`: plain text, not a pattern); its `in` belongs to `for`.";
        let table =
            "Lua's `in` belongs to `for`: test a key with `t[x] ~= nil`, a list with a loop.";
        let unknown = "Lua's `in` belongs to `for`: find text in a string with `s:find(x, 1, true)`; test a table's key with `t[x] ~= nil`, a list with a loop.";
        let kinds = Kinds::from_pairs([
            ("s", ValueKind::Text),
            ("t", ValueKind::Table),
            ("lines", ValueKind::Text),
        ]);
        let rule = |code: &str| find(code, &HashSet::new(), &kinds).map(|found| found.rule);
        for (code, expected) in [
            ("if \"\" in s then", text),
            ("if \"\" not in s then", text),
            ("if \"\" in \"\" then", text),
            ("if \"\" in lines then", text),
            ("if \"\" in t then", table),
            ("if \"\" in words then", table),
            ("if \"\" in s and \"\" in t then", table),
            ("if \"\" in other then", unknown),
            ("if \"\" in s.x then", unknown),
            ("if \"\" in s:lower() then", unknown),
        ] {
            assert_eq!(rule(code).as_deref(), Some(expected), "{code}");
        }
        assert_eq!(rule("for k, v in pairs(t) do"), None);
        let lead = |code: &str| find(code, &HashSet::new(), &kinds).and_then(|found| found.lead);
        let walks = "Lua walks a string's characters with `s:gmatch(utf8.charpattern)`, closing the loop with `end`";
        assert_eq!(lead("for c in s:").as_deref(), Some(walks));
        assert_eq!(lead("for c in s: print(c)").as_deref(), Some(walks));
        assert_ne!(lead("for c in t:").as_deref(), Some(walks));
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
}
