//! The model's own line, rewritten from Python to Lua where the rewrite is mechanical, as
//! rustc's `help: try` quotes a fix: `count -= 1` is `count = count - 1`, `elif x > 0:`
//! is `elseif x > 0 then`, `{"a": 1}` is `{a = 1}`.
//!
//! The line is cut into tokens ([`tokens`]), rewritten statement by statement
//! ([`statement`], [`assignment`]) and expression by expression ([`expression`], its
//! values in [`primary`], its strings in [`strings`]); every Python habit on
//! the line is rewritten, or none is: one the rewrite has no mechanical answer for (`x in
//! t`, a slice, a keyword argument) leaves the line without a fix, and the hint states
//! the rule instead. A fix is quoted only when Lua's own parser compiles it (a block's
//! opening line inside the block it opens), so a quoted fix is always Lua.

mod assignment;
mod expression;
mod primary;
mod statement;
mod strings;
pub(super) mod tokens;

pub(crate) use tokens::LUA_KEYWORDS;

use std::collections::HashSet;

use mlua::{Lua, LuaOptions, StdLib, chunk::ChunkMode};

use super::Names;
use super::kinds::{Kinds, ValueKind};
use tokens::{Kind, Tree, written};

/// What the rewrite may assume about the names of the line and about what the error
/// showed.
pub(crate) struct Cx<'a> {
    /// The functions the environment has: a library function is named only when present,
    /// and a Python built-in is rewritten only when no function of that name exists.
    pub names: &'a Names,
    /// The names the source defines itself (`local len = …`, `function f(None)`): never
    /// taken for Python's.
    pub bound: &'a HashSet<String>,
    /// What the names hold, where the source or the session shows it: Python's `x in s`
    /// and `for c in s:` have a mechanical Lua only for text.
    pub kinds: &'a Kinds,
    pub evidence: Evidence,
}

impl Cx<'_> {
    /// Whether `name` is nothing the code or the environment defines, so that a Python
    /// name it matches is Python's.
    fn is_free(&self, name: &str) -> bool {
        !self.names.contains(name) && !self.bound.contains(name)
    }

    /// The value `items` as the receiver of a string method, when it is known to be
    /// text: a name holding a string (`s`), or a string literal in parentheses.
    fn text_receiver(&self, items: &[Tree]) -> Option<String> {
        match items {
            [item] if item.is_kind(Kind::Str) => Some(format!("({})", written(items))),
            [item] => item
                .name()
                .filter(|name| self.kinds.get(name) == Some(ValueKind::Text))
                .map(str::to_string),
            _ => None,
        }
    }
}

/// What Lua's error showed about the line, beyond what its code shows: rewrites that
/// would be guesses on code alone.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Evidence {
    /// A generic `for` was handed a table (`for x in xs do`): it walks a list.
    pub tables_iterate: bool,
    /// An index read nil where Python counts from 0 (`xs[0]`): `[0]` means the first.
    pub zero_based: bool,
    /// A string method was called with a dot (`s.upper()`): Lua's string methods on the
    /// line are method calls.
    pub dot_calls: bool,
}

impl Evidence {
    /// What either shows.
    pub fn and(self, other: Evidence) -> Evidence {
        Evidence {
            tables_iterate: self.tables_iterate || other.tables_iterate,
            zero_based: self.zero_based || other.zero_based,
            dot_calls: self.dot_calls || other.dot_calls,
        }
    }
}

/// What a rewritten line is, for the parser to compile it where it belongs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    /// Statements, whole: `count = count - 1`, `if x then y() end`.
    Statement,
    /// The first line of a block, which an `end` closes later: `while ok do`.
    Opener,
    /// A line inside an `if`: `elseif x > 0 then`, `else`.
    Continuation,
    /// A line inside an `if` that closes it: `elseif x > 0 then y() end`.
    Closing,
    /// A field of a table written over several lines: `a = 1,`.
    Entry,
}

/// A rewritten line.
struct Fixed {
    text: String,
    shape: Shape,
}

/// Lines longer than this are not rewritten: no one reads a quote of them.
const MAX_LINE: usize = 2_000;

/// The line `text` in Lua, when every Python habit on it has a mechanical rewrite, the
/// rewrite changes it and Lua compiles the result.
pub(crate) fn line(text: &str, cx: &Cx) -> Option<String> {
    let text = text.trim();
    if text.is_empty() || text.len() > MAX_LINE {
        return None;
    }
    let trees = tokens::trees(text)?;
    let fixed = statement::line(&trees, cx)?;
    let changed = squeezed(&fixed.text) != squeezed(text);
    // Statements may open a block that later lines close (`if x ~= 1 then`).
    let compiles = compiles(&fixed.text, fixed.shape)
        || (fixed.shape == Shape::Statement && compiles(&fixed.text, Shape::Opener));
    (changed && compiles).then_some(fixed.text)
}

/// `text` without its blanks: a rewrite that only spaces the line differently is none.
fn squeezed(text: &str) -> String {
    text.chars().filter(|c| !c.is_whitespace()).collect()
}

/// Whether Lua compiles `text` where a line of `shape` stands (inside a loop, so that
/// `break` is one).
fn compiles(text: &str, shape: Shape) -> bool {
    let chunk = match shape {
        Shape::Statement => format!("while true do\n{text}\nend"),
        Shape::Opener => format!("while true do\n{text}\nend\nend"),
        Shape::Continuation => format!("while true do\nif false then\n{text}\nend\nend"),
        Shape::Closing => format!("while true do\nif false then\n{text}\nend"),
        Shape::Entry => format!("return {{\n{text}\n}}"),
    };
    // A bare state: the chunk is compiled, never run.
    let Ok(lua) = Lua::new_with(StdLib::NONE, LuaOptions::default()) else {
        return false;
    };
    lua.load(chunk)
        .set_mode(ChunkMode::Text)
        .into_function()
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fix(text: &str) -> Option<String> {
        fix_with(text, Evidence::default())
    }

    fn fix_with(text: &str, evidence: Evidence) -> Option<String> {
        let names = Names::new([
            "print", "split", "strip", "tostring", "type", "pairs", "table", "string", "math",
            "lines",
        ]);
        let bound = HashSet::from(["mine".to_string(), "lines".to_string()]);
        let kinds = Kinds::from_pairs([("text", ValueKind::Text), ("seen", ValueKind::Table)]);
        let cx = Cx {
            names: &names,
            bound: &bound,
            kinds: &kinds,
            evidence,
        };
        line(text, &cx)
    }

    #[test]
    fn compound_assignments_keep_the_left_side_as_written() {
        assert_eq!(fix("count -= 1").unwrap(), "count = count - 1");
        assert_eq!(fix("t[i] += 2").unwrap(), "t[i] = t[i] + 2");
        assert_eq!(fix("x.y *= a + b").unwrap(), "x.y = x.y * (a + b)");
        assert_eq!(fix("n //= 2").unwrap(), "n = n // 2");
        assert_eq!(fix("n **= 2").unwrap(), "n = n ^ 2");
        assert_eq!(fix("n %= 3").unwrap(), "n = n % 3");
        assert_eq!(fix("s += \"x\"").unwrap(), "s = s .. \"x\"");
        assert_eq!(fix("local n = 1 n += 1").unwrap(), "local n = 1 n = n + 1");
        assert_eq!(fix("x ^= 1"), None, "xor or power: a guess");
        assert_eq!(fix("f().x += 1"), None, "the call would run twice");
        assert_eq!(
            fix("for _, n in ipairs(t) do total += n end").unwrap(),
            "for _, n in ipairs(t) do total = total + n end"
        );
        assert_eq!(
            fix("if x then n -= 1 else n += 1 end").unwrap(),
            "if x then n = n - 1 else n = n + 1 end"
        );
    }

    #[test]
    fn block_headers_get_then_and_do() {
        assert_eq!(fix("elif x > 0:").unwrap(), "elseif x > 0 then");
        assert_eq!(fix("if x > 0:").unwrap(), "if x > 0 then");
        assert_eq!(fix("if x: print(x)").unwrap(), "if x then print(x) end");
        assert_eq!(fix("while ok:").unwrap(), "while ok do");
        assert_eq!(fix("else:").unwrap(), "else");
        assert_eq!(fix("def f(a, b):").unwrap(), "function f(a, b)");
        assert_eq!(
            fix("def f(a: int, *rest) -> int:").unwrap(),
            "function f(a, ...)"
        );
        assert_eq!(fix("def f(a=1):"), None, "a default is not mechanical");
    }

    #[test]
    fn an_elif_inside_a_line_is_elseif() {
        assert_eq!(
            fix("if x == 1 then print('a') elif x == 2 then print('b') end").unwrap(),
            "if x == 1 then print('a') elseif x == 2 then print('b') end"
        );
        assert_eq!(
            fix("print('a') elif x == 2 then").unwrap(),
            "print('a') elseif x == 2 then",
            "inside an `if` opened above"
        );
        assert_eq!(
            fix("print('a') elif x == 2 then print('b') end").unwrap(),
            "print('a') elseif x == 2 then print('b') end",
            "closing it"
        );
        assert_eq!(
            fix("elif x == 2 then print('b') end").unwrap(),
            "elseif x == 2 then print('b') end"
        );
        assert_eq!(
            fix("local elif = x != 1").unwrap(),
            "local elif = x ~= 1",
            "a local named `elif` is the code's own"
        );
        assert_eq!(
            fix("if elif != 1 then end").unwrap(),
            "if elif ~= 1 then end"
        );
        assert_eq!(
            fix("if a != b then x() else if b then y() end end").unwrap(),
            "if a ~= b then x() else if b then y() end end",
            "`else if` is Lua's own, kept"
        );
    }

    #[test]
    fn membership_in_text_is_a_plain_find() {
        assert_eq!(
            fix("if \"a\" in text then").unwrap(),
            "if text:find(\"a\", 1, true) then"
        );
        assert_eq!(
            fix("if \"a\" not in text:").unwrap(),
            "if not text:find(\"a\", 1, true) then"
        );
        assert_eq!(
            fix("ok = x .. y in text and n > 0").unwrap(),
            "ok = text:find(x .. y, 1, true) and n > 0"
        );
        assert_eq!(
            fix("print(\"b\" in \"abc\")").unwrap(),
            "print((\"abc\"):find(\"b\", 1, true))"
        );
        assert_eq!(
            fix("v = \"y\" if \"a\" in text else \"n\"").unwrap(),
            "v = text:find(\"a\", 1, true) and \"y\" or \"n\""
        );
        assert_eq!(fix("if \"a\" in seen then"), None, "a table's");
        assert_eq!(fix("if \"a\" in other then"), None, "not known to be text");
        assert_eq!(fix("if n < x in text then"), None, "a chained comparison");
    }

    #[test]
    fn nil_and_booleans_joined_to_text_are_their_text() {
        assert_eq!(
            fix("print(\"value: \" .. None)").unwrap(),
            "print(\"value: \" .. tostring(nil))"
        );
        assert_eq!(
            fix("s = \"ok: \" + True").unwrap(),
            "s = \"ok: \" .. tostring(true)"
        );
        assert_eq!(
            fix("s = None .. \"a\" .. False").unwrap(),
            "s = tostring(nil) .. \"a\" .. tostring(false)"
        );
        assert_eq!(fix("print(None == x)").unwrap(), "print(nil == x)");
    }

    #[test]
    fn text_is_indexed_with_sub_and_walked_by_characters() {
        assert_eq!(fix("print(text[-1])").unwrap(), "print(text:sub(-1, -1))");
        assert_eq!(
            fix("print(text[0] != \"#\")").unwrap(),
            "print(text:sub(1, 1) ~= \"#\")"
        );
        assert_eq!(
            fix("print(\"abc\"[-2])").unwrap(),
            "print((\"abc\"):sub(-2, -2))"
        );
        assert_eq!(fix("print(seen[-1])").unwrap(), "print(seen[#seen])");
        assert_eq!(
            fix("for ch in text:").unwrap(),
            "for ch in text:gmatch(utf8.charpattern) do"
        );
        assert_eq!(
            fix("for ch in \"abc\": print(ch)").unwrap(),
            "for ch in (\"abc\"):gmatch(utf8.charpattern) do print(ch) end"
        );
        assert_eq!(fix("for i, ch in enumerate(text):"), None);
    }

    #[test]
    fn python_loops_become_lua_loops() {
        assert_eq!(
            fix("for x in items:").unwrap(),
            "for _, x in ipairs(items) do"
        );
        assert_eq!(fix("for i in range(n):").unwrap(), "for i = 0, n - 1 do");
        assert_eq!(
            fix("for i in range(3) do end").unwrap(),
            "for i = 0, 2 do end"
        );
        assert_eq!(fix("for i in range(1, n + 1):").unwrap(), "for i = 1, n do");
        assert_eq!(
            fix("for i in range(10, 0, -1):").unwrap(),
            "for i = 10, 1, -1 do"
        );
        assert_eq!(
            fix("for k, v in d.items():").unwrap(),
            "for k, v in pairs(d) do"
        );
        assert_eq!(
            fix("for i, x in enumerate(xs):").unwrap(),
            "for i, x in ipairs(xs) do"
        );
        assert_eq!(
            fix("for w in s.split():").unwrap(),
            "for _, w in ipairs(split(s)) do"
        );
        assert_eq!(
            fix("for k, v in pairs(t):").unwrap(),
            "for k, v in pairs(t) do"
        );
        assert_eq!(
            fix("for a, b in pairs_of:"),
            None,
            "tuples are not mechanical"
        );
        assert_eq!(
            fix("for x in xs do end"),
            None,
            "a table only with the evidence"
        );
        let tables = Evidence {
            tables_iterate: true,
            ..Evidence::default()
        };
        assert_eq!(
            fix_with("for x in {1, 2} do print(x) end", tables).unwrap(),
            "for _, x in ipairs({1, 2}) do print(x) end"
        );
    }

    #[test]
    fn operators_and_names_are_rewritten_with_the_operands_as_written() {
        assert_eq!(fix("if a != b then end").unwrap(), "if a ~= b then end");
        assert_eq!(fix("ok = a && !b || c").unwrap(), "ok = a and not b or c");
        assert_eq!(fix("y = x**2").unwrap(), "y = x^2");
        assert_eq!(fix("if x is None:").unwrap(), "if x == nil then");
        assert_eq!(fix("if x is not None:").unwrap(), "if x ~= nil then");
        assert_eq!(fix("v = None").unwrap(), "v = nil");
        assert_eq!(
            fix("flags = {True, False}").unwrap(),
            "flags = {true, false}"
        );
        assert_eq!(
            fix("v = t.None != opts.True").unwrap(),
            "v = t.None ~= opts.True"
        );
        assert_eq!(fix("if x in t:"), None, "membership is not mechanical");
    }

    #[test]
    fn conditional_expressions_and_lambdas() {
        assert_eq!(fix("return x if c else y").unwrap(), "return c and x or y");
        assert_eq!(
            fix("v = a or b if c or d else e").unwrap(),
            "v = (c or d) and (a or b) or e"
        );
        assert_eq!(
            fix("f = lambda x, y: x * y").unwrap(),
            "f = function(x, y) return x * y end"
        );
        assert_eq!(
            fix("table.sort(t, lambda a, b: a > b)").unwrap(),
            "table.sort(t, function(a, b) return a > b end)"
        );
    }

    #[test]
    fn python_literals_become_tables() {
        assert_eq!(
            fix("d = {\"a\": 1, \"b\": [1, 2]}").unwrap(),
            "d = {a = 1, b = {1, 2}}"
        );
        assert_eq!(
            fix("d = {\"key with space\": 1, 'end': 2, 3: x}").unwrap(),
            "d = {[\"key with space\"] = 1, ['end'] = 2, [3] = x}"
        );
        assert_eq!(fix("xs = [1, 2, 3]").unwrap(), "xs = {1, 2, 3}");
        assert_eq!(fix("\"a\": 1,").unwrap(), "a = 1,");
        assert_eq!(fix("xs = [x for x in t]"), None);
    }

    #[test]
    fn python_functions_and_methods_become_lua_calls() {
        assert_eq!(fix("print(len(x))").unwrap(), "print(#x)");
        assert_eq!(fix("n = len(a .. b)").unwrap(), "n = #(a .. b)");
        assert_eq!(fix("x.append(v)").unwrap(), "table.insert(x, v)");
        assert_eq!(
            fix("lines.append(v)").unwrap(),
            "table.insert(lines, v)",
            "a local named like a library function is the code's own"
        );
        assert_eq!(
            fix("table.insert(t, x != 1)").unwrap(),
            "table.insert(t, x ~= 1)"
        );
        assert_eq!(
            fix("parts = s.split(\",\")").unwrap(),
            "parts = split(s, \",\")"
        );
        assert_eq!(fix("s = s.strip()").unwrap(), "s = strip(s)");
        assert_eq!(fix("s = s.lower()").unwrap(), "s = s:lower()");
        assert_eq!(
            fix("print(\", \".join(t))").unwrap(),
            "print(table.concat(t, \", \"))"
        );
        assert_eq!(fix("print(str(x))").unwrap(), "print(tostring(x))");
        assert_eq!(fix("n = int(s)").unwrap(), "n = tonumber(s)");
        assert_eq!(fix("n = int(x / 2)").unwrap(), "n = math.floor(x / 2)");
        assert_eq!(fix("v = d.get(k, 0) + 1").unwrap(), "v = (d[k] or 0) + 1");
        assert_eq!(
            fix("print(mine(x))"),
            None,
            "the source's own function: no change"
        );
        assert_eq!(fix("t = sorted(t)"), None);
        assert_eq!(
            fix("m = max(xs)").unwrap(),
            "m = math.max(table.unpack(xs))"
        );
        assert_eq!(fix("m = min([1, 2])").unwrap(), "m = math.min(1, 2)");
        assert_eq!(fix("m = max(a, b)").unwrap(), "m = math.max(a, b)");
    }

    #[test]
    fn strings_in_python_forms_become_string_format() {
        assert_eq!(
            fix("print(f\"{name} has {n:.2f}%\")").unwrap(),
            "print(string.format(\"%s has %.2f%%\", name, n))"
        );
        assert_eq!(
            fix("print(\"{} items\".format(n))").unwrap(),
            "print(string.format(\"%s items\", n))"
        );
        assert_eq!(
            fix("print(\"%d of %d\" % (a, b))").unwrap(),
            "print(string.format(\"%d of %d\", a, b))"
        );
        assert_eq!(
            fix("print(\"total: \" + str(n))").unwrap(),
            "print(\"total: \" .. tostring(n))"
        );
        assert_eq!(fix("print(\"-\" * 40)").unwrap(), "print((\"-\"):rep(40))");
        assert_eq!(
            fix("print(\"abc\".upper())").unwrap(),
            "print((\"abc\"):upper())"
        );
    }

    #[test]
    fn statements_python_writes_without_parentheses() {
        assert_eq!(fix("print x, y").unwrap(), "print(x, y)");
        assert_eq!(
            fix("assert x > 0, \"positive\"").unwrap(),
            "assert(x > 0, \"positive\")"
        );
        assert_eq!(fix("del t[\"a\"]").unwrap(), "t[\"a\"] = nil");
        assert_eq!(fix("raise ValueError(\"bad\")").unwrap(), "error(\"bad\")");
        assert_eq!(fix("x = 1  # one").unwrap(), "x = 1  -- one");
        assert_eq!(fix("# count the lines").unwrap(), "-- count the lines");
        assert_eq!(fix("import json"), None);
        assert_eq!(fix("pass"), None);
    }

    #[test]
    fn indexes_from_zero_and_from_the_end() {
        assert_eq!(fix("print(xs[-1])").unwrap(), "print(xs[#xs])");
        assert_eq!(fix("print(xs[-2])").unwrap(), "print(xs[#xs - 1])");
        assert_eq!(
            fix("print(xs[0])"),
            None,
            "t[0] is Lua: only with the evidence"
        );
        let zero = Evidence {
            zero_based: true,
            ..Evidence::default()
        };
        assert_eq!(
            fix_with("print(xs[0] + 1)", zero).unwrap(),
            "print(xs[1] + 1)"
        );
        assert_eq!(fix("print(s[1:3])"), None, "a slice is not mechanical");
    }

    #[test]
    fn odd_lines_never_panic() {
        let deep = format!("x != {}1{}", "(".repeat(200), ")".repeat(200));
        let lines = [
            deep.as_str(),
            "for i in range(9223372036854775807):",
            "for i in range(1, 9223372036854775807, -1):",
            "t.insert(18446744073709551615, x) != 1",
            "print(xs[-18446744073709551616]) != 1",
            "print(f\"{\") != 1",
            "print(f\"}\") != 1",
            "print(f\"{x:}{y!r}{z=}\") != 1",
            "print(f\"{ {1: 2}[1] }\") != 1",
            "print(f[[{x}]]) != 1",
            "print([[{}]].format(1)) != 1",
            "s = \"é\" != 'ü' # ö",
            "\"\"\" != 1",
            "for in:",
            "for x in:",
            "def (:",
            "def f(:",
            "elif:",
            "else: else:",
            "lambda: :",
            "x = [ for ]",
            "x = {: 1}",
            "x = {\"a\":}",
            "raise",
            "del",
            "print",
            "n += ",
            "+= 1",
            ":",
            "#",
            "x = y if else",
            "x = (1, 2) if c else 3",
            "x = \"%(a)s\" % d",
            "x.get() != 1",
            "x.pop(1, 2, 3) != 1",
            "isinstance(x) != 1",
        ];
        for text in lines {
            let _ = fix(text);
        }
    }

    #[test]
    fn a_rewrite_that_does_not_compile_is_not_quoted() {
        assert_eq!(fix("x = 1_000 +"), None);
        assert_eq!(fix("s = \"\\d\" != x"), None, "Python's escape, not Lua's");
        assert_eq!(
            fix("if x != 1: break"),
            Some("if x ~= 1 then break end".into())
        );
        assert_eq!(
            fix("if x != 1 then").unwrap(),
            "if x ~= 1 then",
            "a block the next lines close"
        );
        assert_eq!(fix("x != 1 end"), None, "closing a block it did not open");
    }
}
