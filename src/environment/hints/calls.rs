//! Python's built-in functions and methods, called where Lua has none: found from the
//! error Lua raised ("attempt to call a nil value (global 'len')"), never from the source
//! alone, so they fire only when the call failed.

use super::Names;

/// A Python name and the Lua way, with the library function to name instead when the
/// environment has it.
struct Case {
    /// The Python names (a function, or a method after `.` or `:`).
    python: &'static [&'static str],
    /// The Lua way, with the standard library alone.
    lua: &'static str,
    /// A library function doing the same and how to call it, named only when present.
    library: Option<(&'static str, &'static str)>,
}

impl Case {
    fn hint(&self, names: &Names) -> String {
        match self.library {
            Some((name, usage)) if names.contains(name) => usage.to_string(),
            _ => self.lua.to_string(),
        }
    }
}

/// Python's built-in functions, called as globals.
const FUNCTIONS: &[Case] = &[
    Case {
        python: &["len"],
        lua: "Lua writes the length of a string or a sequence as `#x`.",
        library: None,
    },
    Case {
        python: &["str", "repr"],
        lua: "Lua makes text with `tostring(x)` (or `string.format(\"%d items\", n)`).",
        library: None,
    },
    Case {
        python: &["int"],
        lua: "Lua reads a number from text with `tonumber(s)`; `math.floor(x)` rounds down, `math.tointeger(x)` checks a whole number.",
        library: None,
    },
    Case {
        python: &["float"],
        lua: "Lua reads a number from text with `tonumber(s)`.",
        library: None,
    },
    Case {
        python: &["bool"],
        lua: "In Lua only `nil` and `false` are false: `x ~= nil and x ~= false`.",
        library: None,
    },
    Case {
        python: &["range"],
        lua: "Lua counts with `for i = 1, n do … end` (both ends included; `range(n)` is `for i = 0, n - 1 do`).",
        library: None,
    },
    Case {
        python: &["enumerate"],
        lua: "`for i, x in ipairs(xs) do … end` gives each index (from 1) and value.",
        library: None,
    },
    Case {
        python: &["sorted"],
        lua: "`table.sort(t)` sorts in place (`table.sort(t, function(a, b) return a > b end)` for another order).",
        library: Some((
            "sort_by",
            "`table.sort(t)` sorts in place; `sort_by(t, key)` returns a sorted copy.",
        )),
    },
    Case {
        python: &["reversed"],
        lua: "Lua walks a sequence backwards with `for i = #t, 1, -1 do … t[i] … end`.",
        library: None,
    },
    Case {
        python: &["max", "min", "abs", "round", "pow"],
        lua: "Lua's maths is in `math`: `math.max(a, b)`, `math.min`, `math.abs`, `math.floor(x + 0.5)`, `x ^ y`.",
        library: None,
    },
    Case {
        python: &["sum"],
        lua: "Lua adds in a loop: `local s = 0 for _, x in ipairs(xs) do s = s + x end`.",
        library: None,
    },
    Case {
        python: &["list", "dict", "set", "tuple", "defaultdict"],
        lua: "Lua's one container is the table: `{1, 2}` for a list, `{k = v}` for a dict, `{[x] = true}` for a set.",
        library: None,
    },
    Case {
        python: &["Counter"],
        lua: "Lua has no `Counter`: count in a table, `counts[x] = (counts[x] or 0) + 1`.",
        library: Some((
            "count",
            "Lua has no `Counter`: `count(xs)` counts the same way.",
        )),
    },
    Case {
        python: &["isinstance"],
        lua: "Lua tests a type with `type(x) == \"string\"` (\"number\", \"table\", …).",
        library: None,
    },
    Case {
        python: &["ord", "chr"],
        lua: "Lua's `string.byte(c)` and `string.char(n)` convert between characters and codes.",
        library: None,
    },
    Case {
        python: &["getattr", "hasattr", "setattr"],
        lua: "Lua reads a field with `t[key]` (nil when absent) and sets it with `t[key] = v`.",
        library: None,
    },
    Case {
        python: &["map", "filter"],
        lua: "Lua maps and filters in a loop: `local out = {} for _, x in ipairs(xs) do if keep(x) then out[#out + 1] = f(x) end end`.",
        library: None,
    },
    Case {
        python: &["open"],
        lua: "There are no files to open: the input is the string `context`.",
        library: None,
    },
    Case {
        python: &["f", "F", "rf", "fr"],
        lua: "Lua has no f-strings: `string.format(\"%s has %d\", name, n)` or `name .. \" has \" .. n`.",
        library: None,
    },
];

/// Python's methods, called on a string or a table (`x.split(…)` or `x:split(…)`).
const METHODS: &[Case] = &[
    Case {
        python: &["split"],
        lua: "Lua strings have no `split` method: `for part in s:gmatch(\"[^,]+\") do … end`.",
        library: Some((
            "split",
            "Lua strings have no `split` method: call `split(s, \",\")`.",
        )),
    },
    Case {
        python: &["strip", "lstrip", "rstrip"],
        lua: "Lua strings have no `strip` method: `s:match(\"^%s*(.-)%s*$\")` trims.",
        library: Some((
            "strip",
            "Lua strings have no `strip` method: call `strip(s)`.",
        )),
    },
    Case {
        python: &["startswith"],
        lua: "Lua strings have no `startswith` method: `s:sub(1, #prefix) == prefix`.",
        library: Some((
            "startswith",
            "Lua strings have no `startswith` method: call `startswith(s, prefix)`.",
        )),
    },
    Case {
        python: &["endswith"],
        lua: "Lua strings have no `endswith` method: `suffix == \"\" or s:sub(-#suffix) == suffix`.",
        library: Some((
            "endswith",
            "Lua strings have no `endswith` method: call `endswith(s, suffix)`.",
        )),
    },
    Case {
        python: &["replace"],
        lua: "Lua strings have no `replace` method: `s:gsub(old, new)` (`old` is a pattern: escape `%-.+*?[]^$()` with `%`).",
        library: Some((
            "replace",
            "Lua strings have no `replace` method: call `replace(s, old, new)` (plain text).",
        )),
    },
    Case {
        python: &["join"],
        lua: "Lua joins a list of strings with `table.concat(parts, sep)`.",
        library: None,
    },
    Case {
        python: &["append"],
        lua: "Lua appends with `t[#t + 1] = x` (or `table.insert(t, x)`).",
        library: None,
    },
    Case {
        python: &["extend"],
        lua: "Lua appends a list with `table.move(more, 1, #more, #t + 1, t)`.",
        library: None,
    },
    Case {
        python: &["pop"],
        lua: "Lua removes the last element with `table.remove(t)` (`table.remove(t, 1)` the first).",
        library: None,
    },
    Case {
        python: &["insert", "remove", "sort", "concat", "unpack"],
        lua: "Lua's table functions take the table first: `table.insert(t, x)`, `table.sort(t)`.",
        library: None,
    },
    Case {
        python: &["keys"],
        lua: "Tables have no `keys` method: `for k in pairs(t) do … end`.",
        library: Some(("keys", "Tables have no `keys` method: call `keys(t)`.")),
    },
    Case {
        python: &["values"],
        lua: "Tables have no `values` method: `for _, v in pairs(t) do … end`.",
        library: Some((
            "values",
            "Tables have no `values` method: call `values(t)`.",
        )),
    },
    Case {
        python: &["items"],
        lua: "Lua walks keys and values with `for k, v in pairs(t) do … end`.",
        library: None,
    },
    Case {
        python: &["get"],
        lua: "Lua reads a key with `t[k]` (nil when absent): `t[k] or default`.",
        library: None,
    },
    Case {
        python: &["update"],
        lua: "Lua merges in a loop: `for k, v in pairs(other) do t[k] = v end`.",
        library: None,
    },
    Case {
        python: &["count"],
        lua: "Lua counts a pattern's matches with `select(2, s:gsub(pattern, \"\"))`.",
        library: None,
    },
    Case {
        python: &["isdigit", "isalpha", "isspace", "isalnum"],
        lua: "Lua tests characters with patterns: `s:match(\"^%d+$\") ~= nil` (`%a` letters, `%s` space, `%w` both).",
        library: None,
    },
    Case {
        python: &["loads", "load_json"],
        lua: "There is no JSON reader here: take fields out with patterns, `text:match('\"name\":%s*\"(.-)\"')`.",
        library: Some(("json.decode", "Lua reads JSON with `json.decode(text)`.")),
    },
    Case {
        python: &["dumps"],
        lua: "There is no JSON writer here: build the text with `string.format` and `..`.",
        library: Some(("json.encode", "Lua writes JSON with `json.encode(value)`.")),
    },
    Case {
        python: &["index"],
        lua: "Lua finds text with `s:find(sub, 1, true)`; in a list, loop with `ipairs`.",
        library: None,
    },
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

/// The hint for calling the global `name`, if it is Python's.
pub(crate) fn function(name: &str, names: &Names) -> Option<String> {
    find(FUNCTIONS, name).map(|case| case.hint(names))
}

/// The hint for calling the method or field `name`, if it is Python's.
pub(crate) fn method(name: &str, names: &Names) -> Option<String> {
    find(METHODS, name).map(|case| case.hint(names))
}

/// The hint for indexing the nil global `name`, if it is a Python module.
pub(crate) fn module(name: &str) -> Option<String> {
    MODULES.contains(&name).then(|| {
        format!(
            "There is no `{name}` module: the functions are globals (`help()` lists them, `fn_search(\"…\")` finds one)."
        )
    })
}

fn find(cases: &'static [Case], name: &str) -> Option<&'static Case> {
    cases.iter().find(|case| case.python.contains(&name))
}
