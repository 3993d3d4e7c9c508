//! Python habits answered: code a model writes as Python fails with the Lua way in one
//! line — its own line quoted in Lua where the rewrite is mechanical, the rule where it is
//! not — on every surface (the environment, `rlm exec`, `rlm run`, the JSON API, MCP
//! `run_lua`, the loop); every quoted fix compiles; an unknown function gets a "did you
//! mean"; and valid Lua never gets a hint, nor Lua that only looks like Python.

use crate::support;

use std::path::{Path, PathBuf};

use rlm_registry::Registry;
use rlm_registry::environment::{Environment, ExecError, Limits};
use rlm_registry::hints::{Names, hint};
use rlm_registry::rlm::Context;
use serde_json::json;
use support::cli::rlm as rlm_binary;
use support::openai_server::{Behavior, OpenAiServer};
use support::rlm_loop::{bodies, last_message, lua, rlm};
use support::serve::{TestServer, bounded, is_error, options, request, run_lua, text};

/// What a model writes, and the fix its hint quotes: the failing line (or the line above
/// it that caused the failure) rewritten in Lua, as the model wrote it otherwise.
/// `docs/python-to-lua.md` shows this table, generated from it.
const QUOTED: &[(&str, &str)] = &[
    // Operators and Python's names.
    ("if n != 0 then print(n) end", "if n ~= 0 then print(n) end"),
    (
        "print(len(context) != 0 and \"yes\" or \"no\")",
        "print(#context ~= 0 and \"yes\" or \"no\")",
    ),
    ("if a && b then end", "if a and b then end"),
    ("if a || b then end", "if a or b then end"),
    ("if !a then end", "if not a then end"),
    ("if x is None then end", "if x == nil then end"),
    ("if x is not None then end", "if x ~= nil then end"),
    ("print(2 ** 3)", "print(2 ^ 3)"),
    ("local v = None\nprint(v.x)", "local v = nil"),
    ("local ok = True\nprint(ok.x)", "local ok = true"),
    ("local done = False\nprint(done.x)", "local done = false"),
    // Compound assignments, the target as written.
    ("local count = 3\ncount -= 1", "count = count - 1"),
    ("local n = 1\nn += 1", "n = n + 1"),
    ("local n = 1\nn *= 2", "n = n * 2"),
    ("local n = 8\nn /= 2", "n = n / 2"),
    ("local n = 8\nn //= 3", "n = n // 3"),
    ("local n = 8\nn %= 3", "n = n % 3"),
    ("local n = 2\nn **= 3", "n = n ^ 3"),
    ("local n = 2\nn -= n - 1", "n = n - (n - 1)"),
    ("local t, i = {0, 0}, 1\nt[i] += 2", "t[i] = t[i] + 2"),
    ("local s = \"a\"\ns += \"b\"", "s = s .. \"b\""),
    (
        "local total = 0\nfor _, n in ipairs({1, 2}) do total += n end",
        "for _, n in ipairs({1, 2}) do total = total + n end",
    ),
    // Blocks.
    ("local x = 1\nif x > 0:\n    print(x)", "if x > 0 then"),
    (
        "if #context > 0: print(context)",
        "if #context > 0 then print(context) end",
    ),
    (
        "local x = 1\nif x > 1 then\nelif x > 0:\n  print(x)\nend",
        "elseif x > 0 then",
    ),
    ("if x then\nelif y then end", "elseif y then end"),
    (
        "local x = 2\nif x == 1 then print('a') elif x == 2 then print('b') end",
        "if x == 1 then print('a') elseif x == 2 then print('b') end",
    ),
    (
        "local x = 2\nif x == 1 then\n  print('a')\nelif x == 2 then\n  print('b')\nend",
        "elseif x == 2 then",
    ),
    (
        "local n = 0\nif n != 1 then\n  print(n)\nend",
        "if n ~= 1 then",
    ),
    ("if x then\nelse:\n    print(1)\nend", "else"),
    ("local ok = true\nwhile ok:\n    ok = false", "while ok do"),
    ("while true:\n    break", "while true do"),
    ("def f(a, b):\n    return a + b", "function f(a, b)"),
    (
        "def f(a, b): return a + b",
        "function f(a, b) return a + b end",
    ),
    (
        "def total(xs: list) -> int:\n    return 0",
        "function total(xs)",
    ),
    // Loops.
    (
        "local items = {1}\nfor x in items:\n    print(x)",
        "for _, x in ipairs(items) do",
    ),
    (
        "xs = {1, 2}\nfor x in xs: print(x)",
        "for _, x in ipairs(xs) do print(x) end",
    ),
    (
        "for x in {1, 2} do print(x) end",
        "for _, x in ipairs({1, 2}) do print(x) end",
    ),
    (
        "local n = 3\nfor i in range(n):\n    print(i)",
        "for i = 0, n - 1 do",
    ),
    ("for i in range(3) do end", "for i = 0, 2 do end"),
    (
        "local xs = {1}\nfor i in range(1, len(xs) + 1):\n    print(i)",
        "for i = 1, #xs do",
    ),
    (
        "for i in range(10, 0, -1):\n    print(i)",
        "for i = 10, 1, -1 do",
    ),
    (
        "local d = {}\nfor k, v in d.items():\n    print(k)",
        "for k, v in pairs(d) do",
    ),
    (
        "for k, v in ({}).items() do end",
        "for k, v in pairs({}) do end",
    ),
    (
        "local d = {} for k in d.keys() do end",
        "local d = {} for k in pairs(d) do end",
    ),
    (
        "for i, x in enumerate({1}) do end",
        "for i, x in ipairs({1}) do end",
    ),
    (
        "for line in context.split(\"\\n\"):\n    print(line)",
        "for _, line in ipairs(split(context, \"\\n\")) do",
    ),
    (
        "local lines = {}\nfor line in lines:\n    if \"ERROR\" in line:\n        print(line)",
        "for _, line in ipairs(lines) do",
    ),
    (
        "for ch in context:\n    print(ch)",
        "for ch in context:gmatch(utf8.charpattern) do",
    ),
    // Expressions.
    (
        "local x = 1\nlocal v = 1 if x else 2",
        "local v = x and 1 or 2",
    ),
    (
        "local c = true\nreturn 1 if c else 2",
        "return c and 1 or 2",
    ),
    (
        "local f = lambda x: x * 2",
        "local f = function(x) return x * 2 end",
    ),
    (
        "local t = {3, 1}\ntable.sort(t, lambda a, b: a > b)",
        "table.sort(t, function(a, b) return a > b end)",
    ),
    // Membership: a plain `find` in text; a table's has no mechanical Lua.
    (
        "local s = \"abc\"\nif \"a\" in s then print(s) end",
        "if s:find(\"a\", 1, true) then print(s) end",
    ),
    (
        "local s = \"abc\"\nif \"z\" not in s then\n  print(s)\nend",
        "if not s:find(\"z\", 1, true) then",
    ),
    (
        "if \"b\" in context then print(1) end",
        "if context:find(\"b\", 1, true) then print(1) end",
    ),
    // Literals.
    ("local xs = [1, 2, 3]", "local xs = {1, 2, 3}"),
    (
        "local d = {\"a\": 1, \"b\": [1, 2]}",
        "local d = {a = 1, b = {1, 2}}",
    ),
    (
        "local d = {\"key with space\": 1, \"end\": 2, 3: None}",
        "local d = {[\"key with space\"] = 1, [\"end\"] = 2, [3] = nil}",
    ),
    ("local d = {\n  \"a\": 1,\n}", "a = 1,"),
    ("local s = \"\"\"text\"\"\"", "local s = \"text\""),
    ("# count the lines\nprint(1)", "-- count the lines"),
    ("local n = 1  # one\nprint(n)", "local n = 1  -- one"),
    // Strings.
    ("print(\"total: \" + 1)", "print(\"total: \" .. 1)"),
    (
        "print(\"value: \" .. None)",
        "print(\"value: \" .. tostring(nil))",
    ),
    ("print(\"n: \" + str(3))", "print(\"n: \" .. tostring(3))"),
    (
        "local n = 3\nprint(f\"{n} items\")",
        "print(string.format(\"%s items\", n))",
    ),
    (
        "local x = 2.5\nprint(f\"x = {x:.2f}, 100%\")",
        "print(string.format(\"x = %.2f, 100%%\", x))",
    ),
    (
        "print(\"%d items\" % 3)",
        "print(string.format(\"%d items\", 3))",
    ),
    (
        "print(\"%d of %d\" % (1, 2))",
        "print(string.format(\"%d of %d\", 1, 2))",
    ),
    (
        "print(\"{} items\".format(3))",
        "print(string.format(\"%s items\", 3))",
    ),
    ("print(\"ab\" * 3)", "print((\"ab\"):rep(3))"),
    ("print(\"abc\".upper())", "print((\"abc\"):upper())"),
    ("local s = \"A\"\nprint(s.lower())", "print(s:lower())"),
    (
        "local s = \"x\" print(s.upper())",
        "local s = \"x\" print(s:upper())",
    ),
    (
        "print(string.upper(\"x\").lower())",
        "print(string.upper(\"x\"):lower())",
    ),
    (
        "local s = \"x\"\nprint(s.find(\"x\"))",
        "print(s:find(\"x\"))",
    ),
    // Python's functions.
    ("print(len(context))", "print(#context)"),
    ("print(str(1))", "print(tostring(1))"),
    ("print(int(\"1\"))", "print(tonumber(\"1\"))"),
    ("print(int(7 / 2))", "print(math.floor(7 / 2))"),
    ("print(float(\"1.5\"))", "print(tonumber(\"1.5\"))"),
    ("print(max(1, 2))", "print(math.max(1, 2))"),
    ("print(max([1, 2, 3]))", "print(math.max(1, 2, 3))"),
    (
        "local xs = {1, 2}\nprint(min(xs))",
        "print(math.min(table.unpack(xs)))",
    ),
    ("print(abs(-1))", "print(math.abs(-1))"),
    ("print(round(2.5))", "print(math.floor(2.5 + 0.5))"),
    ("print(isinstance(1, int))", "print(type(1) == \"number\")"),
    (
        "print(not isinstance(\"a\", str))",
        "print(not (type(\"a\") == \"string\"))",
    ),
    ("print(ord(\"a\"))", "print(string.byte(\"a\"))"),
    ("print(chr(97))", "print(string.char(97))"),
    ("print(*{1, 2})", "print(table.unpack({1, 2}))"),
    // Python's methods.
    (
        "local parts = context.split(\",\")",
        "local parts = split(context, \",\")",
    ),
    (
        "local parts = context:split(\",\")",
        "local parts = split(context, \",\")",
    ),
    ("local s = (\"  a \").strip()", "local s = strip(\"  a \")"),
    (
        "local s = \" a \"\nprint(s.lstrip())",
        "print(s:match(\"^%s*(.-)$\"))",
    ),
    (
        "print(context.startswith(\"a\"))",
        "print(startswith(context, \"a\"))",
    ),
    (
        "print(context.endswith(\"a\"))",
        "print(endswith(context, \"a\"))",
    ),
    (
        "print(context.replace(\"a\", \"b\"))",
        "print(replace(context, \"a\", \"b\"))",
    ),
    (
        "local t = {} t.append(1)",
        "local t = {} table.insert(t, 1)",
    ),
    (
        "local t = {}\nt.insert(0, \"a\")",
        "table.insert(t, 1, \"a\")",
    ),
    ("local t = {} t.pop()", "local t = {} table.remove(t)"),
    ("local t = {} t.sort()", "local t = {} table.sort(t)"),
    (
        "print(\", \".join({\"a\", \"b\"}))",
        "print(table.concat({\"a\", \"b\"}, \", \"))",
    ),
    (
        "local sep = \", \"\nprint(sep.join({\"a\"}))",
        "print(table.concat({\"a\"}, sep))",
    ),
    (
        "local d = {} print(d.get(\"k\"))",
        "local d = {} print(d[\"k\"])",
    ),
    (
        "local d = {} print(d.get(\"k\", 0) + 1)",
        "local d = {} print((d[\"k\"] or 0) + 1)",
    ),
    (
        "local s = \"12\"\nprint(s.isdigit())",
        "print(s:match(\"^%d+$\"))",
    ),
    // Python's statements.
    ("raise ValueError(\"bad\")", "error(\"bad\")"),
    (
        "local x = 1\nassert x > 0, \"positive\"",
        "assert(x > 0, \"positive\")",
    ),
    ("print context", "print(context)"),
    ("local t = {a = 1}\ndel t[\"a\"]", "t[\"a\"] = nil"),
    // Indexes.
    (
        "local xs = {5} print(xs[0] + 1)",
        "local xs = {5} print(xs[1] + 1)",
    ),
    (
        "local xs = {\"a\"} print(xs[-1] .. \"\")",
        "local xs = {\"a\"} print(xs[#xs] .. \"\")",
    ),
    (
        "print(context[0] .. \"!\")",
        "print(context:sub(1, 1) .. \"!\")",
    ),
    (
        "print(context[-1] .. \"!\")",
        "print(context:sub(-1, -1) .. \"!\")",
    ),
];

/// What a model writes where no rewrite of the line is mechanical, and a piece of the
/// rule its hint states instead.
const RULES: &[(&str, &str)] = &[
    (
        "local t = {\"a\"} print(t.join(\",\"))",
        "`table.concat(parts, sep)`",
    ),
    ("import json", "Nothing is imported"),
    ("from collections import Counter", "Nothing is imported"),
    ("try:\n    x = 1", "pcall(f, arg)"),
    (
        "local ok, e = pcall(error)\nexcept Exception:",
        "pcall(f, arg)",
    ),
    ("local xs = [x for x in t]", "Lua has no comprehensions"),
    ("print(sorted({3, 1}))", "`table.sort(t)` sorts in place"),
    ("print(context[1:3])", "Lua has no slices"),
    ("if 1 in t then end", "Lua's `in` belongs to `for`"),
    (
        "local words = {}\nif \"a\" in words then end",
        "Lua's `in` belongs to `for`: test a key",
    ),
    (
        "if \"a\" in s then end",
        "find text in a string with `s:find(x, 1, true)`; test a table's key",
    ),
    (
        "local pairs_of = {}\nfor a, b in pairs_of:\n    print(a)",
        "`for _, x in ipairs(xs) do … end`",
    ),
    ("def f(a=1):\n    return a", "`function f(x) … end`"),
    (
        "local c = collections.Counter({})",
        "There is no `collections` module",
    ),
    ("print(1, end=\"\")", "Lua has no keyword arguments"),
    ("table.sort(xs, key=len)", "Lua has no keyword arguments"),
    (
        "for i = 1, 3 do\n  if i == 2 then\n    continue\n  end\nend",
        "`goto continue`",
    ),
    ("print(sum({1, 2}) + reversed({1}))", "backwards"),
    ("print(countlines(context))", "Did you mean `line_count`?"),
    ("print(wordcount(context))", "Did you mean `word_count`?"),
    ("print(count_lines(context))", "Did you mean `line_count`?"),
    ("print(WordCount(context))", "Did you mean `word_count`?"),
    (
        "print(strng.format(\"%d\", 1))",
        "`strng` is not defined here. Did you mean `string`?",
    ),
];

fn environment() -> Environment {
    let env = Environment::new(Registry::baked().clone(), Limits::default()).unwrap();
    env.set_context("a b\nc\n").unwrap();
    env
}

fn failure(code: &str) -> ExecError {
    match environment().execute(code) {
        Ok(run) => panic!("{code:?} ran (printed {:?}) instead of failing", run.output),
        Err(error) => error,
    }
}

/// The hint `code` fails with, checked to be one line and the last line of the message.
fn one_line_hint(code: &str) -> String {
    let error = failure(code);
    let hint = error
        .hint()
        .unwrap_or_else(|| panic!("{code:?}: no hint for {:?}", error.message()))
        .to_string();
    assert!(!hint.contains('\n'), "{code:?}: one line: {hint:?}");
    let message = error.message();
    assert!(
        message.ends_with(&format!("\nhint: {hint}")),
        "{code:?}: the message carries the hint: {message:?}"
    );
    assert!(
        message.starts_with(error.message_without_hint()),
        "{message:?}"
    );
    hint
}

#[test]
fn each_mechanical_habit_gets_its_own_line_quoted_in_lua() {
    for (code, fix) in QUOTED {
        let hint = one_line_hint(code);
        assert!(
            hint.ends_with(&format!(": `{fix}`.")),
            "{code:?}: {hint:?} should quote `{fix}`"
        );
    }
}

#[test]
fn each_habit_with_no_mechanical_rewrite_gets_its_rule() {
    for (code, expected) in RULES {
        let hint = one_line_hint(code);
        assert!(hint.contains(expected), "{code:?}: {hint:?}");
    }
}

/// Whether the sandbox's own `load` compiles `fix` where a line of it can stand: as
/// statements, as a block's first line, inside an `if`, or as a table's field.
fn sandbox_compiles(env: &Environment, fix: &str) -> bool {
    let program = format!(
        "local line = [==[{fix}]==]\n\
         for _, chunk in ipairs({{\n\
           'while true do\\n' .. line .. '\\nend',\n\
           'while true do\\n' .. line .. '\\nend\\nend',\n\
           'while true do\\nif false then\\n' .. line .. '\\nend\\nend',\n\
           'while true do\\nif false then\\n' .. line .. '\\nend',\n\
           'return {{\\n' .. line .. '\\n}}',\n\
         }}) do\n\
           if load(chunk, 'fix', 't') then return print('compiles') end\n\
         end\n\
         print('does not compile')"
    );
    env.execute(&program).unwrap().output == "compiles\n"
}

#[test]
fn every_quoted_fix_compiles_with_the_sandbox_load() {
    let env = environment();
    assert!(!sandbox_compiles(&env, "x = = 1"), "the check can fail");
    for (code, fix) in QUOTED {
        assert!(sandbox_compiles(&env, fix), "{code:?}: `{fix}` is not Lua");
    }
}

/// The line (1-based) of `code` the hint of its failure `error` quotes: the failing one,
/// or the one the hint names.
fn quoted_line(error: &ExecError) -> usize {
    let failing: usize = error_line(error.message()).unwrap();
    error
        .hint()
        .unwrap()
        .split_once("; line ")
        .and_then(|(_, rest)| rest.split(' ').next()?.parse().ok())
        .unwrap_or(failing)
}

/// The line of the code an error message (`input:LINE: …`) points at.
fn error_line(message: &str) -> Option<usize> {
    message
        .strip_prefix("input:")?
        .split(':')
        .next()?
        .parse()
        .ok()
}

/// Runs `code` with its line `line` replaced by `fix` (indented as it was): an error on
/// that line is what the quoted fix itself raised. Other lines may still be Python, and
/// fail; a fix that is `error(…)` raises its own message by design.
fn fix_runs_in_place(code: &str, line: usize, fix: &str) -> Result<(), String> {
    let program: Vec<String> = code
        .lines()
        .enumerate()
        .map(|(i, text)| {
            if i + 1 == line {
                let indent = &text[..text.len() - text.trim_start().len()];
                format!("{indent}{fix}")
            } else {
                text.to_string()
            }
        })
        .collect();
    let Err(error) = environment().execute(&program.join("\n")) else {
        return Ok(());
    };
    let message = error.message_without_hint();
    let raised_by_design = fix.starts_with("error(")
        && !message.contains("attempt to")
        && !message.contains("bad argument");
    if error_line(message) == Some(line) && !raised_by_design {
        return Err(message.to_string());
    }
    Ok(())
}

#[test]
fn every_quoted_fix_runs_where_the_line_stood() {
    // The check can fail: `.. nil` compiles and then fails as `.. None` did.
    assert!(
        fix_runs_in_place("print(\"value: \" .. None)", 1, "print(\"value: \" .. nil)").is_err()
    );
    assert!(
        fix_runs_in_place(
            "local s = \"ab\"\nprint(s[0] .. \"\")",
            2,
            "print(s[1] .. \"\")"
        )
        .is_err()
    );
    for (code, fix) in QUOTED {
        let line = quoted_line(&failure(code));
        if let Err(message) = fix_runs_in_place(code, line, fix) {
            panic!("{code:?}: the quoted `{fix}` fails in place of line {line}: {message}");
        }
    }
}

#[test]
fn a_long_fix_is_cut_with_an_ellipsis_and_never_cut_before_its_change() {
    let long = "a".repeat(150);
    let hint = one_line_hint(&format!("if n != 0 then print(\"{long}\") end"));
    assert!(
        hint.starts_with("Lua writes not-equal as `~=`: `if n ~= 0 then print(\"aaa"),
        "{hint}"
    );
    assert!(hint.ends_with("a…`."), "cut with the ellipsis: {hint}");
    assert!(hint.chars().count() < 160, "{hint}");
    // The change past the cut: the rule, not a quote that shows none of it.
    let hint = one_line_hint(&format!("print(\"{long}\", 1 != 2)"));
    assert_eq!(hint, "Lua writes not-equal as `~=`: `a ~= b`.");
}

/// The quoted fixes of [`QUOTED`] as `docs/python-to-lua.md` shows them: the Python
/// line the hint is about, and the fix it quotes, as the environment says them now.
fn quoted_fixes_table() -> String {
    let cell = |text: &str| format!("`{}`", text.replace('|', "\\|"));
    let mut table = String::from("| a model writes | the hint quotes |\n|---|---|\n");
    for (code, _) in QUOTED {
        let error = failure(code);
        let hint = error.hint().unwrap();
        let fix = hint
            .rsplit_once(": `")
            .and_then(|(_, quote)| quote.strip_suffix("`."))
            .unwrap();
        // The hint names the line it quotes when it is not the failing one.
        let line = quoted_line(&error);
        let python = code.lines().nth(line - 1).unwrap().trim();
        table.push_str(&format!("| {} | {} |\n", cell(python), cell(fix)));
    }
    table
}

const PAGE: &str = "docs/python-to-lua.md";
const TABLE_START: &str = "<!-- The table below is generated from tests/it/python_habits.rs: RLM_BLESS=1 cargo test --all-features --test it python_habits rewrites it. -->\n";
const TABLE_END: &str = "<!-- End of the generated table. -->\n";

#[test]
fn the_docs_table_of_quoted_fixes_is_what_the_hints_say() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(PAGE);
    let page = std::fs::read_to_string(&path).unwrap();
    let start = page.find(TABLE_START).expect("the table's start marker") + TABLE_START.len();
    let end = start
        + page[start..]
            .find(TABLE_END)
            .expect("the table's end marker");
    let table = quoted_fixes_table();
    if support::bad_fixtures::blessing() {
        std::fs::write(&path, format!("{}{table}{}", &page[..start], &page[end..])).unwrap();
        return;
    }
    assert_eq!(
        page[start..end],
        table,
        "{PAGE} differs from the hints; RLM_BLESS=1 cargo test --all-features --test it python_habits rewrites it"
    );
}

#[test]
fn an_unknown_function_gets_a_did_you_mean_with_words_in_any_order() {
    for (code, name, suggestion) in [
        ("print(countlines(context))", "countlines", "line_count"),
        ("print(wordcount(context))", "wordcount", "word_count"),
    ] {
        let hint = failure(code).hint().unwrap().to_string();
        assert_eq!(
            hint,
            format!(
                "`{name}` is not a function here. Did you mean `{suggestion}`? (help(\"{suggestion}\") shows how to call it.)"
            )
        );
    }
    let hint = failure("zzzzqqq()").hint().unwrap().to_string();
    assert_eq!(
        hint,
        "`zzzzqqq` is not a function here. help() lists every function you can call."
    );
}

#[test]
fn the_session_own_functions_are_suggested_too() {
    let env = environment();
    env.execute("function tally_words(s) return 1 end").unwrap();
    let error = env.execute("print(tallywords(context))").unwrap_err();
    assert!(
        error
            .hint()
            .unwrap()
            .contains("Did you mean `tally_words`?"),
        "{:?}",
        error.hint()
    );
}

#[test]
fn an_error_that_is_not_a_habit_gets_no_hint() {
    for code in [
        "error('boom')",
        "local t = nil print(t.x)",
        "print(1 + {})",
        "local x = = 1",
        "for i = 1 do end",
    ] {
        let error = failure(code);
        assert_eq!(error.hint(), None, "{code:?}: {:?}", error.message());
        assert!(!error.message().contains("hint:"), "{:?}", error.message());
    }
}

#[test]
fn lua_that_names_things_like_python_fails_without_a_python_hint() {
    for code in [
        // Python's names, the code's own: a local, a table's keys, fields.
        "local None = 1\nprint(None + {})",
        "local None = 1\nlocal t = nil\nprint(t.x)",
        "local t = {None = 1, True = 2}\nprint(t.None .. {})",
        "local opts = {True = 1}\nprint(opts.True + {})",
        "local True, False = 1, 2\nprint(True .. {}, False)",
        // A field named like a Python method, of a table that has it or lacks it.
        "local list = {append = 1}\nlist.append(2)",
        "local q = {}\nq.append.x = 1",
        "local q = {append = {}}\nprint(q.append.x.y)",
    ] {
        let error = failure(code);
        assert_eq!(error.hint(), None, "{code:?}: {:?}", error.message());
    }
}

#[test]
fn an_error_that_only_looks_like_python_gets_no_hint() {
    for code in [
        // Python in strings and comments, and a real Lua syntax error elsewhere.
        "local s = \"a != b\" x",
        "print(\"hello!\" ..)",
        "local s = \"count -= 1\" -- n -= 1\nlocal y = = 2",
        "local s = [[\nfor x in xs:\n  n += 1\n]]\nlocal y = = 2",
        "--[[ elif x:\nx **= 2 ]] local y = = 2",
        "local s = 'x is None' .. ) ",
    ] {
        let error = failure(code);
        assert_eq!(error.hint(), None, "{code:?}: {:?}", error.message());
    }
}

// ---- zero hints on valid Lua -----------------------------------------------------

/// Every `.lua` file of the repository (the crate's `lua/`, the fixtures, examples,
/// fuzz seeds), build output and version control left out.
fn lua_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    walkdir::WalkDir::new(root)
        .into_iter()
        .filter_entry(|entry| {
            let name = entry.file_name().to_string_lossy();
            !(entry.depth() == 1 && (name == "target" || name.starts_with('.')))
        })
        .filter_map(Result::ok)
        .filter(|entry| entry.path().extension().is_some_and(|ext| ext == "lua"))
        .map(|entry| entry.into_path())
        .collect()
}

/// The ```` ```lua ```` blocks of the repository's Markdown files (README, docs).
fn markdown_lua_blocks() -> Vec<(PathBuf, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut blocks = Vec::new();
    for entry in walkdir::WalkDir::new(root)
        .into_iter()
        .filter_entry(|entry| {
            let name = entry.file_name().to_string_lossy();
            !(entry.depth() == 1 && (name == "target" || name.starts_with('.')))
        })
        .filter_map(Result::ok)
        .filter(|entry| entry.path().extension().is_some_and(|ext| ext == "md"))
    {
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        let mut block: Option<String> = None;
        for line in text.lines() {
            match (&mut block, line.trim_start()) {
                (None, "```lua") => block = Some(String::new()),
                (Some(code), "```") => {
                    blocks.push((entry.path().to_path_buf(), std::mem::take(code)));
                    block = None;
                }
                (Some(code), _) => {
                    code.push_str(line);
                    code.push('\n');
                }
                (None, _) => {}
            }
        }
    }
    blocks
}

/// Whether `source` is Lua 5.4 (compiles).
fn compiles(source: &[u8]) -> bool {
    mlua::Lua::new().load(source).into_function().is_ok()
}

/// The failures a line of valid code could plausibly meet, none naming a Python function:
/// a syntax error (which makes the detector look at this line and every line above it)
/// and the runtime errors an ordinary bug raises.
fn plausible_errors(line: usize) -> [String; 4] {
    [
        format!("input:{line}: unexpected symbol near 'x'"),
        format!("input:{line}: '=' expected near <eof>"),
        format!("input:{line}: attempt to perform arithmetic on a nil value"),
        format!("input:{line}: attempt to index a nil value (local 't')"),
    ]
}

/// The hints `source` gets when each of its lines fails in each plausible way.
fn hints_on_every_line(source: &str, names: &Names) -> Vec<(usize, String)> {
    let lines = source.lines().count();
    (1..=lines)
        .flat_map(|line| plausible_errors(line).map(|message| (line, message)))
        .filter_map(|(line, message)| hint(source, &message, names).map(|hint| (line, hint)))
        .collect()
}

/// Valid Lua written to look like Python (`"a".."b"`, `{[0] = x}`, `1 +\n # t`, Python in
/// strings and comments), beside the repository's ordinary Lua.
const LOOKALIKE: &str = "tests/fixtures/python_habits/valid_lua_that_looks_like_python.lua";

#[test]
fn valid_lua_in_the_repository_never_gets_a_hint() {
    let names =
        rlm_registry::hints::Names::new(Registry::baked().specs().map(|f| f.name().to_string()));
    let mut checked_lines = 0;
    let mut checked_files = 0;
    let mut lookalike_checked = false;
    for path in lua_files() {
        let bytes = std::fs::read(&path).unwrap();
        let lookalike = path.ends_with(LOOKALIKE);
        assert!(
            !lookalike || compiles(&bytes),
            "{LOOKALIKE} must be valid Lua"
        );
        if !compiles(&bytes) {
            continue; // A fixture of broken Lua: not valid Lua, nothing to hold to.
        }
        lookalike_checked |= lookalike;
        // As the environment reads source that is not UTF-8.
        let source = String::from_utf8_lossy(&bytes);
        let hints = hints_on_every_line(&source, &names);
        assert!(hints.is_empty(), "{}: {hints:?}", path.display());
        checked_files += 1;
        checked_lines += source.lines().count();
    }
    for (path, source) in markdown_lua_blocks() {
        if !compiles(source.as_bytes()) {
            continue; // A sketch with `…` in it, say.
        }
        let hints = hints_on_every_line(&source, &names);
        assert!(hints.is_empty(), "{}: {source}\n{hints:?}", path.display());
        checked_lines += source.lines().count();
    }
    assert!(lookalike_checked, "{LOOKALIKE} was checked");
    assert!(checked_files >= 20, "{checked_files} files checked");
    assert!(checked_lines >= 1_000, "{checked_lines} lines checked");
}

#[test]
fn the_zero_hint_check_does_find_python() {
    // The same check on Python written as Lua finds something on most lines: it is not
    // vacuous.
    let python = "def count(xs):\n    n = 0\n    for x in xs:\n        n += 1\n    return n\n\
                  if n != 0 and x is not None:\n    print(len(xs))\n";
    let lines: Vec<usize> = hints_on_every_line(python, &Names::default())
        .into_iter()
        .map(|(line, _)| line)
        .collect();
    for line in [1, 3, 4, 6] {
        assert!(lines.contains(&line), "line {line} in {lines:?}");
    }
}

// ---- every surface ---------------------------------------------------------------

const HABIT: &str = "print(len(context))";
const ITS_HINT: &str = "hint: Lua writes `len(x)` as `#x`: `print(#context)`.";

#[test]
fn rlm_exec_shows_the_hint() {
    let out = rlm_binary(&["exec", HABIT]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr,
        format!("error: input:1: attempt to call a nil value (global 'len')\n{ITS_HINT}\n")
    );
}

#[test]
fn rlm_run_shows_the_hint() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("habit.lua");
    std::fs::write(&file, "local n = 0\nif n != 1 then print(n) end\n").unwrap();
    let out = rlm_binary(&["run", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.ends_with("\nhint: Lua writes not-equal as `~=`: `if n ~= 1 then print(n) end`.\n"),
        "{stderr}"
    );
}

/// What `rlm exec CODE` writes on stderr, failing.
fn rlm_exec_error(args: &[&str]) -> String {
    let out = rlm_binary(args);
    assert_eq!(out.status.code(), Some(1), "{args:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn rlm_exec_quotes_elseif_for_an_elif_in_the_line() {
    let stderr = rlm_exec_error(&[
        "exec",
        "if x == 1 then print('a') elif x == 2 then print('b') end",
    ]);
    assert_eq!(
        stderr,
        "error: input:1: syntax error near 'x'\n\
         hint: Lua writes `elseif`, one word: \
         `if x == 1 then print('a') elseif x == 2 then print('b') end`.\n"
    );
    let stderr = rlm_exec_error(&[
        "exec",
        "x = 2\nif x == 1 then\n  print('a')\nelif x == 2 then\n  print('b')\nend",
    ]);
    assert!(
        stderr.ends_with("\nhint: Lua writes `elseif`, one word: `elseif x == 2 then`.\n"),
        "{stderr}"
    );
}

#[test]
fn rlm_exec_leaves_else_if_alone_where_it_is_lua() {
    // A nested `if` with its own `end`: valid Lua, failing for another reason.
    let stderr = rlm_exec_error(&[
        "exec",
        "x = 2 if x == 1 then print('a') else if x == 2 then print(y + 1) end end",
    ]);
    assert_eq!(
        stderr,
        "error: input:1: attempt to perform arithmetic on a nil value (global 'y')\n"
    );
}

#[test]
fn rlm_exec_quotes_a_plain_find_for_in_on_text() {
    let stderr = rlm_exec_error(&["exec", "local s = \"abc\"\nif \"a\" in s then print(s) end"]);
    assert!(
        stderr.ends_with(
            "\nhint: Lua finds text in a string with `s:find(x, 1, true)`: \
             `if s:find(\"a\", 1, true) then print(s) end`.\n"
        ),
        "{stderr}"
    );
    let stderr = rlm_exec_error(&[
        "exec",
        "local s = \"abc\"\nif \"z\" not in s then print(s) end",
    ]);
    assert!(
        stderr.ends_with("`if not s:find(\"z\", 1, true) then print(s) end`.\n"),
        "{stderr}"
    );
    // Known at run time: the context is text.
    let dir = tempfile::tempdir().unwrap();
    let context = dir.path().join("context.txt");
    std::fs::write(&context, "an ERROR here").unwrap();
    let stderr = rlm_exec_error(&[
        "exec",
        "--context",
        context.to_str().unwrap(),
        "if \"ERROR\" in context then print(1) end",
    ]);
    assert!(
        stderr.ends_with("`if context:find(\"ERROR\", 1, true) then print(1) end`.\n"),
        "{stderr}"
    );
}

#[test]
fn rlm_exec_keeps_the_table_advice_for_in_on_a_table_and_says_both_when_unknown() {
    let table =
        "hint: Lua's `in` belongs to `for`: test a key with `t[x] ~= nil`, a list with a loop.\n";
    for code in [
        "local seen = {}\nif \"a\" in seen then end",
        "if \"a\" in lines then end",
    ] {
        let stderr = rlm_exec_error(&["exec", code]);
        assert!(stderr.ends_with(table), "{code:?}: {stderr}");
    }
    let stderr = rlm_exec_error(&["exec", "if \"a\" in s then end"]);
    assert!(
        stderr.ends_with(
            "hint: Lua's `in` belongs to `for`: find text in a string with `s:find(x, 1, true)`; \
             test a table's key with `t[x] ~= nil`, a list with a loop.\n"
        ),
        "{stderr}"
    );
}

#[test]
fn rlm_exec_quotes_a_fix_for_none_joined_to_text_that_runs() {
    let stderr = rlm_exec_error(&["exec", "print(\"value: \" .. None)"]);
    assert_eq!(
        stderr,
        "error: input:1: attempt to concatenate a nil value (global 'None')\n\
         hint: Lua writes `None` as `nil`: `print(\"value: \" .. tostring(nil))`.\n"
    );
    let out = rlm_binary(&["exec", "print(\"value: \" .. tostring(nil))"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "value: nil\n");
}

const UNKNOWN: &str = "print(countlines(context))";
const ITS_SUGGESTION: &str = "hint: `countlines` is not a function here. Did you mean \
                              `line_count`? (help(\"line_count\") shows how to call it.)";

#[test]
fn rlm_exec_suggests_the_closest_function() {
    let out = rlm_binary(&["exec", UNKNOWN]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "error: input:1: attempt to call a nil value (global 'countlines')\n{ITS_SUGGESTION}\n"
        )
    );
}

#[test]
fn rlm_run_suggests_the_closest_function() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("unknown.lua");
    std::fs::write(&file, format!("local n = 0\n{UNKNOWN}\n")).unwrap();
    let out = rlm_binary(&["run", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.ends_with(&format!("\n{ITS_SUGGESTION}\n")),
        "{stderr}"
    );
}

/// What the JSON API answers when `code` fails in a new session with `context`: a 422
/// with the error's JSON.
async fn json_api_failure(code: &str, context: &str) -> serde_json::Value {
    let server = TestServer::start(options()).await;
    let (status, created) = request("POST", server.url("/v1/sessions"), None, None).await;
    assert_eq!(status, 201);
    let exec = server.url(&format!(
        "/v1/sessions/{}/exec",
        created["id"].as_str().unwrap()
    ));
    let body = json!({"code": code, "context": context}).to_string();
    let (status, failed) = request("POST", exec, Some(&body), None).await;
    assert_eq!(status, 422);
    failed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_json_api_suggests_the_closest_function() {
    bounded(async {
        let failed = json_api_failure(UNKNOWN, "a\nb").await;
        let error = failed["error"].as_str().unwrap();
        assert!(error.ends_with(&format!("\n{ITS_SUGGESTION}")), "{error}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_json_api_shows_the_hint() {
    bounded(async {
        let failed = json_api_failure(HABIT, "abc").await;
        assert_eq!(failed["kind"], "lua");
        let error = failed["error"].as_str().unwrap();
        assert!(error.ends_with(&format!("\n{ITS_HINT}")), "{error}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_run_lua_shows_the_hint() {
    bounded(async {
        let server = TestServer::start(options()).await;
        let client = server.mcp().await;
        let result = run_lua(&client, "print('before')\nprint(wordcount(context))").await;
        assert!(is_error(&result));
        assert_eq!(
            text(&result),
            "before\ninput:2: attempt to call a nil value (global 'wordcount')\n\
             hint: `wordcount` is not a function here. Did you mean `word_count`? \
             (help(\"word_count\") shows how to call it.)"
        );
        client.cancel().await.unwrap();
    })
    .await;
}

#[test]
fn the_loop_feedback_shows_the_hint_after_the_failing_line() {
    let server = OpenAiServer::start(
        vec![lua(HABIT), lua("FINAL(#context)")],
        Behavior::status(500),
    );
    let answer = rlm(&server, 10)
        .run("How long?", Some(Context::from("abc")))
        .unwrap();
    assert_eq!(answer.text, "3");
    let feedback = last_message(&bodies(&server)[1]);
    assert!(
        feedback.starts_with(
            "Block 1 failed with a Lua error on line 1: attempt to call a nil value (global 'len')\n  \
             1 | print(len(context))\n\
             Hint: Lua writes `len(x)` as `#x`: `print(#context)`."
        ),
        "{feedback}"
    );
}
