//! Python habits answered: code a model writes as Python fails with the Lua way in one
//! line, on every surface (the environment, `rlm exec`, `rlm run`, the JSON API, MCP
//! `run_lua`, the loop), an unknown function gets a "did you mean", and valid Lua never
//! gets a hint.

use crate::support;

use std::path::{Path, PathBuf};

use rlm_registry::Registry;
use rlm_registry::environment::hints::{Names, hint};
use rlm_registry::environment::{Environment, ExecError, Limits};
use rlm_registry::rlm::Context;
use serde_json::json;
use support::cli::rlm as rlm_binary;
use support::openai_server::{Behavior, OpenAiServer};
use support::rlm_loop::{bodies, last_message, lua, rlm};
use support::serve::{TestServer, bounded, is_error, options, request, run_lua, text};

/// What a model writes, and a piece of the hint it must get.
const CORPUS: &[(&str, &str)] = &[
    (
        "if n != 0 then print(n) end",
        "Lua writes not-equal as `~=`",
    ),
    (
        "print(len(context))",
        "the length of a string or a sequence as `#x`",
    ),
    (
        "local parts = context.split(\",\")",
        "Lua strings have no `split`",
    ),
    (
        "local parts = context:split(\",\")",
        "Lua strings have no `split`",
    ),
    (
        "local s = (\"  a \").strip()",
        "Lua strings have no `strip`",
    ),
    ("local t = {} t.append(1)", "`t[#t + 1] = x`"),
    (
        "print(\", \".join({\"a\", \"b\"}))",
        "`table.concat(parts, \", \")`",
    ),
    (
        "local t = {\"a\"} print(t.join(\",\"))",
        "`table.concat(parts, sep)`",
    ),
    ("import json", "Nothing is imported"),
    ("from collections import Counter", "Nothing is imported"),
    ("def f(x):\n    return x", "`local function f(x) … end`"),
    ("if x then\nelif y then end", "`elseif c then`"),
    (
        "local ok = True\nprint(ok.x)",
        "`true`, `false` and `nil` in lower case",
    ),
    (
        "local v = None\nprint(v.x)",
        "`true`, `false` and `nil` in lower case",
    ),
    (
        "local done = False\nprint(done.x)",
        "`true`, `false` and `nil` in lower case",
    ),
    ("print(f\"{context}\")", "Lua has no f-strings"),
    ("for i in range(3) do end", "`for i = 1, n do … end`"),
    (
        "for i in range(3):\n    print(i)",
        "`for _, x in ipairs(xs) do … end`",
    ),
    ("local n = 1\nn += 1", "Lua has no `+=`"),
    ("local n = 1\nn -= 1", "Lua has no `+=`, `-=`"),
    ("local n = 1\nn *= 2", "Lua has no `+=`, `-=` or `*=`"),
    (
        "xs = {1, 2}\nfor x in xs:\n    print(x)",
        "`for _, x in ipairs(xs) do … end`",
    ),
    (
        "for x in {1, 2} do print(x) end",
        "`for _, x in ipairs(xs) do … end`",
    ),
    (
        "xs = {1, 2}\nfor x in xs: print(x)",
        "`for _, x in ipairs(xs) do … end`",
    ),
    (
        "if #context > 0: print(context)",
        "`if c then … elseif d then … else … end`",
    ),
    ("local xs = {} print(xs[0] + 1)", "Lua sequences start at 1"),
    ("local xs = {} print(xs[-1] .. \"\")", "the last `t[#t]`"),
    (
        "# count the lines\nprint(1)",
        "Lua comments start with `--`",
    ),
    (
        "print(string.upper(\"x\").lower())",
        "with a colon: `s:lower(…)`",
    ),
    (
        "local s = \"x\" print(s.upper())",
        "with a colon: `s:upper(…)`",
    ),
    ("try:\n    x = 1", "pcall(f, arg)"),
    (
        "local ok, e = pcall(error)\nexcept Exception:",
        "pcall(f, arg)",
    ),
    (
        "local f = lambda x: x * 2",
        "`function(x) return x * 2 end`",
    ),
    ("if a && b then end", "`and`, `or` and `not` as words"),
    ("if a || b then end", "`and`, `or` and `not` as words"),
    ("if !a then end", "Lua writes `not x`"),
    ("if x is None then end", "`x == nil`"),
    ("if x is not None then end", "`x ~= nil`"),
    ("print(str(1))", "`tostring(x)`"),
    ("print(int(\"1\"))", "`tonumber(s)`"),
    ("print(float(\"1.5\"))", "`tonumber(s)`"),
    (
        "for k, v in ({}).items() do end",
        "`for k, v in pairs(t) do … end`",
    ),
    (
        "local d = {} for k in d.keys() do end",
        "Tables have no `keys` method",
    ),
    (
        "for i, x in enumerate({1}) do end",
        "`for i, x in ipairs(xs) do … end`",
    ),
    ("local xs = [x for x in t]", "Lua has no comprehensions"),
    (
        "local s = \"\"\"text\"\"\"",
        "Lua has no triple-quoted strings",
    ),
    ("print(2 ** 3)", "Lua writes powers with `^`"),
    ("print(sorted({3, 1}))", "`table.sort(t)` sorts in place"),
    ("local xs = [1, 2, 3]", "Lua tables use braces"),
    ("local d = {\"a\": 1}", "`{key = value}`"),
    ("print(context[1:3])", "Lua has no slices"),
    ("local v = 1 if x else 2", "`c and x or y`"),
    ("if 1 in t then end", "Lua's `in` belongs to `for`"),
    ("while true:\n    break", "`while c do … end`"),
    (
        "if x:\n    print(x)",
        "`if c then … elseif d then … else … end`",
    ),
    ("raise ValueError(\"bad\")", "`error(\"message\")`"),
    ("print(\"total: \" + 1)", "Lua joins strings with `..`"),
    (
        "local c = collections.Counter({})",
        "There is no `collections` module",
    ),
    ("print(isinstance(1, int))", "`type(x) == \"string\"`"),
    (
        "print(context.startswith(\"a\"))",
        "Lua strings have no `startswith`",
    ),
    (
        "print(context.endswith(\"a\"))",
        "Lua strings have no `endswith`",
    ),
    (
        "print(context.replace(\"a\", \"b\"))",
        "Lua strings have no `replace`",
    ),
    ("local t = {} t.pop()", "`table.remove(t)`"),
    ("local t = {} t.sort()", "`table.sort(t)`"),
    ("local d = {} print(d.get(\"k\"))", "`t[k] or default`"),
    ("print(max(1, 2))", "`math.max(a, b)`"),
    ("print(abs(-1))", "`math.abs`"),
    (
        "print(\"%d items\" % 3)",
        "Lua formats with `string.format(",
    ),
    (
        "print(\"{} items\".format(3))",
        "Lua formats with `string.format(",
    ),
    ("print(1, end=\"\")", "Lua has no keyword arguments"),
    ("table.sort(xs, key=len)", "Lua has no keyword arguments"),
    ("print(\"ab\" * 3)", "`s:rep(n)`"),
    ("print(*{1, 2})", "`table.unpack(xs)`"),
    (
        "local x = 1\nassert x > 0, \"positive\"",
        "`assert(x, \"message\")`",
    ),
    ("print context", "`print(x)`"),
    ("local t = {a = 1}\ndel t[\"a\"]", "`t[k] = nil`"),
    (
        "for i = 1, 3 do\n  if i == 2 then\n    continue\n  end\nend",
        "`goto continue`",
    ),
    ("print(\"abc\".upper())", "`(\"abc\"):upper()`"),
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

#[test]
fn each_python_habit_fails_with_its_lua_way_in_one_line() {
    for (code, expected) in CORPUS {
        let error = failure(code);
        let hint = error
            .hint()
            .unwrap_or_else(|| panic!("{code:?}: no hint for {:?}", error.message()));
        assert!(hint.contains(expected), "{code:?}: {hint:?}");
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
    }
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
    let names = rlm_registry::environment::hints::Names::new(
        Registry::baked().specs().map(|f| f.name().to_string()),
    );
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
const ITS_HINT: &str = "hint: Lua writes the length of a string or a sequence as `#x`.";

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
        stderr.ends_with("\nhint: Lua writes not-equal as `~=`: `a ~= b`.\n"),
        "{stderr}"
    );
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
             Hint: Lua writes the length of a string or a sequence as `#x`."
        ),
        "{feedback}"
    );
}
