//! Python's built-in functions and methods, called where Lua has none: found from the
//! error Lua raised ("attempt to call a nil value (global 'len')"), never from the source
//! alone, so they fire only when the call failed. Each name also says how a call of it is
//! written in Lua where that is mechanical, for the quoted fix ([`super::fix`]).

use super::{Found, Names};

/// A Python name, the Lua way, and how a call of it is rewritten.
struct Case<F: 'static> {
    /// The Python names (a function, or a method after `.` or `:`).
    python: &'static [&'static str],
    /// Said before the quoted fix of the line; `{name}` is the name called.
    lead: &'static str,
    /// The Lua way, with the standard library alone, when no fix is quoted.
    lua: &'static str,
    /// A library function doing the same and how to call it, named only when present.
    library: Option<(&'static str, &'static str)>,
    /// How a call of it is written in Lua.
    fix: F,
}

impl<F> Case<F> {
    fn found(&self, name: &str, names: &Names) -> Found {
        let rule = match self.library {
            Some((function, usage)) if names.contains(function) => usage,
            _ => self.lua,
        };
        Found {
            lead: Some(self.lead.replace("{name}", name)),
            rule: rule.to_string(),
        }
    }
}

/// How a call of a Python function is written in Lua.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CallFix {
    /// Not mechanically: the rule is all the hint says.
    No,
    /// `len(x)` is `#x`.
    Length,
    /// `str(x)` is `tostring(x)`: the same arguments to another function.
    Rename(&'static str),
    /// `max(a, b)` is `math.max(a, b)`: the function of that name in a Lua library.
    In(&'static str),
    /// `int(s)` is `tonumber(s)`, and `int(x / 2)` is `math.floor(x / 2)`.
    Number,
    /// `isinstance(x, str)` is `type(x) == "string"`.
    TypeTest,
    /// `round(x)` is `math.floor(x + 0.5)`.
    Round,
}

/// How a call of a Python method is written in Lua.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MethodFix {
    /// Not mechanically.
    No,
    /// `t.append(v)` is `table.insert(t, v)`: a function taking the receiver first.
    ReceiverFirst(&'static str),
    /// `s.split(",")` is `split(s, ",")`, when the library has the function.
    Library(&'static str),
    /// `s.strip()` is `strip(s)` with the library, else a pattern (`s.lstrip()` too).
    Strip,
    /// `json.loads(s)` is `json.decode(s)`, when the environment has it.
    Module(&'static str),
    /// `t.pop()` is `table.remove(t)`; `t.pop(0)` is `table.remove(t, 1)`.
    Pop,
    /// `t.insert(0, v)` is `table.insert(t, 1, v)`.
    Insert,
    /// `d.get(k)` is `d[k]`; `d.get(k, v)` is `(d[k] or v)`.
    Get,
    /// `sep.join(parts)` is `table.concat(parts, sep)`.
    Join,
    /// `s.isdigit()` is `s:match("^%d+$")`.
    CharClass,
}

/// Python's built-in functions, called as globals.
const FUNCTIONS: &[Case<CallFix>] = &[
    Case {
        python: &["len"],
        lead: "Lua writes `len(x)` as `#x`",
        lua: "Lua writes the length of a string or a sequence as `#x`.",
        library: None,
        fix: CallFix::Length,
    },
    Case {
        python: &["str", "repr"],
        lead: "Lua writes `{name}(x)` as `tostring(x)`",
        lua: "Lua makes text with `tostring(x)` (or `string.format(\"%d items\", n)`).",
        library: None,
        fix: CallFix::Rename("tostring"),
    },
    Case {
        python: &["int"],
        lead: "Lua reads a number with `tonumber(s)` and rounds down with `math.floor(x)`",
        lua: "Lua reads a number from text with `tonumber(s)`; `math.floor(x)` rounds down, `math.tointeger(x)` checks a whole number.",
        library: None,
        fix: CallFix::Number,
    },
    Case {
        python: &["float"],
        lead: "Lua reads a number with `tonumber(s)`",
        lua: "Lua reads a number from text with `tonumber(s)`.",
        library: None,
        fix: CallFix::Rename("tonumber"),
    },
    Case {
        python: &["bool"],
        lead: "In Lua only `nil` and `false` are false",
        lua: "In Lua only `nil` and `false` are false: `x ~= nil and x ~= false`.",
        library: None,
        fix: CallFix::No,
    },
    Case {
        python: &["range"],
        lead: RANGE_LEAD,
        lua: "Lua counts with `for i = 1, n do … end` (both ends included; `range(n)` is `for i = 0, n - 1 do`).",
        library: None,
        fix: CallFix::No,
    },
    Case {
        python: &["enumerate"],
        lead: ENUMERATE_LEAD,
        lua: "`for i, x in ipairs(xs) do … end` gives each index (from 1) and value.",
        library: None,
        fix: CallFix::No,
    },
    Case {
        python: &["sorted"],
        lead: "`table.sort(t)` sorts in place",
        lua: "`table.sort(t)` sorts in place (`table.sort(t, function(a, b) return a > b end)` for another order).",
        library: Some((
            "sort_by",
            "`table.sort(t)` sorts in place; `sort_by(t, key)` returns a sorted copy.",
        )),
        fix: CallFix::No,
    },
    Case {
        python: &["reversed"],
        lead: "Lua walks a sequence backwards with `for i = #t, 1, -1 do`",
        lua: "Lua walks a sequence backwards with `for i = #t, 1, -1 do … t[i] … end`.",
        library: None,
        fix: CallFix::No,
    },
    Case {
        python: &["max", "min", "abs"],
        lead: "Lua's `{name}` is `math.{name}`",
        lua: "Lua's maths is in `math`: `math.max(a, b)`, `math.min`, `math.abs`, `math.floor(x + 0.5)`, `x ^ y`.",
        library: None,
        fix: CallFix::In("math"),
    },
    Case {
        python: &["round"],
        lead: "Lua rounds with `math.floor(x + 0.5)`",
        lua: "Lua rounds with `math.floor(x + 0.5)`.",
        library: None,
        fix: CallFix::Round,
    },
    Case {
        python: &["pow"],
        lead: "Lua writes powers with `^`",
        lua: "Lua writes powers with `^`: `x ^ y`.",
        library: None,
        fix: CallFix::No,
    },
    Case {
        python: &["sum"],
        lead: "Lua adds in a loop",
        lua: "Lua adds in a loop: `local s = 0 for _, x in ipairs(xs) do s = s + x end`.",
        library: None,
        fix: CallFix::No,
    },
    Case {
        python: &["list", "dict", "set", "tuple", "defaultdict"],
        lead: "Lua's one container is the table",
        lua: "Lua's one container is the table: `{1, 2}` for a list, `{k = v}` for a dict, `{[x] = true}` for a set.",
        library: None,
        fix: CallFix::No,
    },
    Case {
        python: &["Counter"],
        lead: "Lua has no `Counter`",
        lua: "Lua has no `Counter`: count in a table, `counts[x] = (counts[x] or 0) + 1`.",
        library: Some((
            "count",
            "Lua has no `Counter`: `count(xs)` counts the same way.",
        )),
        fix: CallFix::No,
    },
    Case {
        python: &["isinstance"],
        lead: "Lua tests a type with `type(x)`",
        lua: "Lua tests a type with `type(x) == \"string\"` (\"number\", \"table\", …).",
        library: None,
        fix: CallFix::TypeTest,
    },
    Case {
        python: &["ord"],
        lead: "Lua writes `ord(c)` as `string.byte(c)`",
        lua: "Lua's `string.byte(c)` and `string.char(n)` convert between characters and codes.",
        library: None,
        fix: CallFix::Rename("string.byte"),
    },
    Case {
        python: &["chr"],
        lead: "Lua writes `chr(n)` as `string.char(n)`",
        lua: "Lua's `string.byte(c)` and `string.char(n)` convert between characters and codes.",
        library: None,
        fix: CallFix::Rename("string.char"),
    },
    Case {
        python: &["getattr", "hasattr", "setattr"],
        lead: "Lua reads a field with `t[key]`",
        lua: "Lua reads a field with `t[key]` (nil when absent) and sets it with `t[key] = v`.",
        library: None,
        fix: CallFix::No,
    },
    Case {
        python: &["map", "filter"],
        lead: "Lua maps and filters in a loop",
        lua: "Lua maps and filters in a loop: `local out = {} for _, x in ipairs(xs) do if keep(x) then out[#out + 1] = f(x) end end`.",
        library: None,
        fix: CallFix::No,
    },
    Case {
        python: &["open"],
        lead: "There are no files to open",
        lua: "There are no files to open: the input is the string `context`.",
        library: None,
        fix: CallFix::No,
    },
    Case {
        python: &["f", "F", "rf", "fr"],
        lead: "Lua has no f-strings; it formats with `string.format`",
        lua: "Lua has no f-strings: `string.format(\"%s has %d\", name, n)` or `name .. \" has \" .. n`.",
        library: None,
        fix: CallFix::No,
    },
];

/// What a hint about `range` says before the quoted loop.
pub(crate) const RANGE_LEAD: &str = "Lua counts with `for i = first, last do`, both ends included (`range(n)` counts from 0; Lua lists start at 1)";

/// What a hint about `enumerate` says before the quoted loop.
pub(crate) const ENUMERATE_LEAD: &str = "Lua's `ipairs` gives each index (from 1, not 0) and value";

/// Python's methods, called on a string or a table (`x.split(…)` or `x:split(…)`).
const METHODS: &[Case<MethodFix>] = &[
    Case {
        python: &["split"],
        lead: "Lua strings have no `split` method",
        lua: "Lua strings have no `split` method: `for part in s:gmatch(\"[^,]+\") do … end`.",
        library: Some((
            "split",
            "Lua strings have no `split` method: call `split(s, \",\")`.",
        )),
        fix: MethodFix::Library("split"),
    },
    Case {
        python: &["strip", "lstrip", "rstrip"],
        lead: "Lua strings have no `{name}` method",
        lua: "Lua strings have no `strip` method: `s:match(\"^%s*(.-)%s*$\")` trims.",
        library: Some((
            "strip",
            "Lua strings have no `strip` method: call `strip(s)`.",
        )),
        fix: MethodFix::Strip,
    },
    Case {
        python: &["startswith"],
        lead: "Lua strings have no `startswith` method",
        lua: "Lua strings have no `startswith` method: `s:sub(1, #prefix) == prefix`.",
        library: Some((
            "startswith",
            "Lua strings have no `startswith` method: call `startswith(s, prefix)`.",
        )),
        fix: MethodFix::Library("startswith"),
    },
    Case {
        python: &["endswith"],
        lead: "Lua strings have no `endswith` method",
        lua: "Lua strings have no `endswith` method: `suffix == \"\" or s:sub(-#suffix) == suffix`.",
        library: Some((
            "endswith",
            "Lua strings have no `endswith` method: call `endswith(s, suffix)`.",
        )),
        fix: MethodFix::Library("endswith"),
    },
    Case {
        python: &["replace"],
        lead: "Lua strings have no `replace` method",
        lua: "Lua strings have no `replace` method: `s:gsub(old, new)` (`old` is a pattern: escape `%-.+*?[]^$()` with `%`).",
        library: Some((
            "replace",
            "Lua strings have no `replace` method: call `replace(s, old, new)` (plain text).",
        )),
        fix: MethodFix::Library("replace"),
    },
    Case {
        python: &["join"],
        lead: "Lua joins a list of strings with `table.concat(list, sep)`",
        lua: "Lua joins a list of strings with `table.concat(parts, sep)`.",
        library: None,
        fix: MethodFix::Join,
    },
    Case {
        python: &["append"],
        lead: "Lua appends with `table.insert(t, x)`",
        lua: "Lua appends with `t[#t + 1] = x` (or `table.insert(t, x)`).",
        library: None,
        fix: MethodFix::ReceiverFirst("table.insert"),
    },
    Case {
        python: &["extend"],
        lead: "Lua appends a list with `table.move`",
        lua: "Lua appends a list with `table.move(more, 1, #more, #t + 1, t)`.",
        library: None,
        fix: MethodFix::No,
    },
    Case {
        python: &["pop"],
        lead: "Lua removes an element with `table.remove(t)`",
        lua: "Lua removes the last element with `table.remove(t)` (`table.remove(t, 1)` the first).",
        library: None,
        fix: MethodFix::Pop,
    },
    Case {
        python: &["insert"],
        lead: "Lua's table functions take the table first, and count from 1",
        lua: "Lua's table functions take the table first: `table.insert(t, x)`, `table.sort(t)`.",
        library: None,
        fix: MethodFix::Insert,
    },
    Case {
        python: &["sort"],
        lead: "Lua's table functions take the table first",
        lua: "Lua's table functions take the table first: `table.insert(t, x)`, `table.sort(t)`.",
        library: None,
        fix: MethodFix::ReceiverFirst("table.sort"),
    },
    Case {
        python: &["remove", "concat", "unpack"],
        lead: "Lua's table functions take the table first",
        lua: "Lua's table functions take the table first: `table.insert(t, x)`, `table.sort(t)`.",
        library: None,
        fix: MethodFix::No,
    },
    Case {
        python: &["keys"],
        lead: "Tables have no `keys` method",
        lua: "Tables have no `keys` method: `for k in pairs(t) do … end`.",
        library: Some(("keys", "Tables have no `keys` method: call `keys(t)`.")),
        fix: MethodFix::Library("keys"),
    },
    Case {
        python: &["values"],
        lead: "Tables have no `values` method",
        lua: "Tables have no `values` method: `for _, v in pairs(t) do … end`.",
        library: Some((
            "values",
            "Tables have no `values` method: call `values(t)`.",
        )),
        fix: MethodFix::Library("values"),
    },
    Case {
        python: &["items"],
        lead: "Lua walks keys and values with `pairs(t)`",
        lua: "Lua walks keys and values with `for k, v in pairs(t) do … end`.",
        library: None,
        fix: MethodFix::No,
    },
    Case {
        python: &["get"],
        lead: "Lua reads a key with `t[k]` (nil when absent)",
        lua: "Lua reads a key with `t[k]` (nil when absent): `t[k] or default`.",
        library: None,
        fix: MethodFix::Get,
    },
    Case {
        python: &["update"],
        lead: "Lua merges in a loop",
        lua: "Lua merges in a loop: `for k, v in pairs(other) do t[k] = v end`.",
        library: None,
        fix: MethodFix::No,
    },
    Case {
        python: &["count"],
        lead: "Lua counts a pattern's matches with `gsub`",
        lua: "Lua counts a pattern's matches with `select(2, s:gsub(pattern, \"\"))`.",
        library: None,
        fix: MethodFix::No,
    },
    Case {
        python: &["isdigit", "isalpha", "isspace", "isalnum"],
        lead: "Lua tests characters with patterns",
        lua: "Lua tests characters with patterns: `s:match(\"^%d+$\") ~= nil` (`%a` letters, `%s` space, `%w` both).",
        library: None,
        fix: MethodFix::CharClass,
    },
    Case {
        python: &["loads", "load_json"],
        lead: "Lua reads JSON with `json.decode(text)`",
        lua: "There is no JSON reader here: take fields out with patterns, `text:match('\"name\":%s*\"(.-)\"')`.",
        library: Some(("json.decode", "Lua reads JSON with `json.decode(text)`.")),
        fix: MethodFix::Module("json.decode"),
    },
    Case {
        python: &["dumps"],
        lead: "Lua writes JSON with `json.encode(value)`",
        lua: "There is no JSON writer here: build the text with `string.format` and `..`.",
        library: Some(("json.encode", "Lua writes JSON with `json.encode(value)`.")),
        fix: MethodFix::Module("json.encode"),
    },
    Case {
        python: &["index"],
        lead: "Lua finds text with `s:find(sub, 1, true)`",
        lua: "Lua finds text with `s:find(sub, 1, true)`; in a list, loop with `ipairs`.",
        library: None,
        fix: MethodFix::No,
    },
];

/// The methods of Lua's strings, called with a colon (`s:upper()`).
pub(crate) const LUA_STRING_METHODS: &[&str] = &[
    "byte", "find", "format", "gmatch", "gsub", "len", "lower", "match", "rep", "reverse", "sub",
    "upper",
];

/// Python modules a model reaches for, read as nil globals.
const MODULES: &[&str] = &[
    "collections",
    "itertools",
    "statistics",
    "datetime",
    "random",
    "sys",
    "numpy",
    "np",
    "pandas",
    "pd",
    "functools",
    // Built-ins in a full build, absent from a lean one.
    "json",
    "csv",
];

/// What to say about calling the global `name`, if it is Python's.
pub(crate) fn function(name: &str, names: &Names) -> Option<Found> {
    find(FUNCTIONS, name).map(|case| case.found(name, names))
}

/// What to say about calling the method or field `name`, if it is Python's.
pub(crate) fn method(name: &str, names: &Names) -> Option<Found> {
    find(METHODS, name).map(|case| case.found(name, names))
}

/// How a call of the Python function `name` is written in Lua, if it is Python's.
pub(crate) fn function_fix(name: &str) -> Option<CallFix> {
    find(FUNCTIONS, name).map(|case| case.fix)
}

/// How a call of the Python method `name` is written in Lua, if it is Python's.
pub(crate) fn method_fix(name: &str) -> Option<MethodFix> {
    find(METHODS, name).map(|case| case.fix)
}

/// The hint for indexing the nil global `name`, if it is a Python module.
pub(crate) fn module(name: &str) -> Option<String> {
    MODULES.contains(&name).then(|| {
        format!(
            "There is no `{name}` module: the functions are globals (`help()` lists them, `fn_search(\"…\")` finds one)."
        )
    })
}

fn find<F>(cases: &'static [Case<F>], name: &str) -> Option<&'static Case<F>> {
    cases.iter().find(|case| case.python.contains(&name))
}
