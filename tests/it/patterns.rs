//! The sandbox's Rust port of Lua's pattern matching (`string.find`, `match`, `gmatch`,
//! `gsub`): compared with the C implementation on a table of cases and on random
//! patterns, then shown to stop pathological patterns at the time limit.

use crate::support;

use std::time::Duration;

use rlm_registry::Registry;
use rlm_registry::environment::{Environment, ExecError, LimitKind, Limits};
use support::reference::Reference;

/// Helpers defined in both interpreters. They avoid the functions under test, and `show`
/// prints the number of values and each value's type (strings quoted, bytes escaped).
const PRELUDE: &str = r#"
function q(s)
  local out = {}
  for i = 1, #s do
    local b = s:byte(i)
    if b >= 32 and b < 127 and b ~= 92 and b ~= 34 then
      out[#out + 1] = string.char(b)
    else
      out[#out + 1] = string.format("\\x%02x", b)
    end
  end
  return '"' .. table.concat(out) .. '"'
end
function repr(v)
  if type(v) == "string" then return q(v) end
  if type(v) == "table" or type(v) == "function" then return type(v) end
  return tostring(v)
end
function render(...)
  local n = select('#', ...)
  local parts = {}
  for i = 1, n do parts[i] = repr((select(i, ...))) end
  return n .. ": " .. table.concat(parts, " ")
end
function show(...) print(render(...)) end
-- Every result of a gmatch loop (at most 60), as text.
function gm(s, p, init)
  local it = string.gmatch(s, p, init)
  local out = {}
  for _ = 1, 60 do
    local r = table.pack(it())
    out[#out + 1] = "{" .. render(table.unpack(r, 1, r.n)) .. "}"
    if r[1] == nil then break end
  end
  return table.concat(out, " ")
end
ALL = {}
for i = 0, 255 do ALL[#ALL + 1] = string.char(i) end
ALL = table.concat(ALL)
"#;

/// Output, or the error message and the output before it.
type Outcome = Result<String, (String, String)>;

/// The reference with the prelude loaded: stock Lua 5.4 with its C string library.
fn reference() -> Reference {
    let reference = Reference::new();
    assert_eq!(reference_run(&reference, PRELUDE), Ok(String::new()));
    reference
}

/// The reference's outcome as text (bytes that are not UTF-8 shown as U+FFFD).
fn reference_run(reference: &Reference, code: &str) -> Outcome {
    let text = |bytes: Vec<u8>| String::from_utf8_lossy(&bytes).into_owned();
    match reference.run(code.as_bytes()) {
        Ok(output) => Ok(text(output)),
        Err((message, output)) => Err((message, text(output))),
    }
}

fn sandbox(limits: Limits) -> Environment {
    let env = Environment::new(Registry::baked().clone(), limits).unwrap();
    assert_eq!(run_sandbox(&env, PRELUDE), Ok(String::new()));
    env
}

fn run_sandbox(env: &Environment, code: &str) -> Outcome {
    match env.execute(code) {
        Ok(run) => Ok(run.output),
        // Lua's message, as C Lua's; the hint after it is the sandbox's own addition.
        Err(error @ ExecError::Lua { .. }) => Err((
            error.message_without_hint().to_string(),
            error.output().to_string(),
        )),
        Err(limit) => panic!("`{code}` hit a limit: {limit}"),
    }
}

/// Runs every case in both interpreters; returns the cases whose outcomes differ.
fn differences(cases: &[String]) -> Vec<String> {
    let reference = reference();
    let env = sandbox(Limits::default());
    let mut differ = Vec::new();
    for code in cases {
        let expected = reference_run(&reference, code);
        let actual = run_sandbox(&env, code);
        if expected != actual {
            differ.push(format!(
                "{code}\n  C Lua: {expected:?}\n  ours:  {actual:?}"
            ));
        }
    }
    differ
}

fn assert_same(cases: &[String]) {
    let differ = differences(cases);
    assert!(
        differ.is_empty(),
        "{} of {} cases differ:\n{}",
        differ.len(),
        cases.len(),
        differ.join("\n")
    );
}

fn owned(cases: &[&str]) -> Vec<String> {
    cases.iter().map(|c| c.to_string()).collect()
}

const FIND: &[&str] = &[
    r#"show(string.find("hello world", "o"))"#,
    r#"show(string.find("hello world", "o", 6))"#,
    r#"show(string.find("hello world", "o", -3))"#,
    r#"show(string.find("hello world", "o", -100))"#,
    r#"show(string.find("hello world", "o", 100))"#,
    r#"show(string.find("hello world", "l", 0))"#,
    r#"show(string.find("hello", "", 6))"#,
    r#"show(string.find("hello", "", 7))"#,
    r#"show(string.find("hello", "", 0))"#,
    r#"show(string.find("hello", "", -1))"#,
    r#"show(string.find("", ""))"#,
    r#"show(string.find("", "", 2))"#,
    r#"show(string.find("", "a"))"#,
    r#"show(string.find("a.b", ".", 1, true))"#,
    r#"show(string.find("a.b", "%."))"#,
    r#"show(string.find("a+b", "+", 1, true))"#,
    r#"show(string.find("abc", "b", nil, true))"#,
    r#"show(string.find("a.c", ".", 2, 1))"#,
    r#"show(("abc"):find("b", 1, false))"#,
    r#"show(string.find("a(b", "(", 1, true))"#,
    r#"show(string.find("hello", "l+"))"#,
    r#"show(string.find("hello", "(l)(l)"))"#,
    r#"show(string.find("hello", "()ll()"))"#,
    r#"show(string.find("hello", "^h"))"#,
    r#"show(string.find("hello", "^e"))"#,
    r#"show(string.find("aXb", "^X", 2))"#,
    r#"show(string.find("hello", "lo$"))"#,
    r#"show(string.find(12345, 34))"#,
    r#"show(string.find("x=1.5", 1.5, 1, true))"#,
    r#"show(string.find("abc", "b", "2"))"#,
    r#"show(string.find("abc", "b", 2.0))"#,
    r#"show(string.find("abc", "c", 2^53))"#,
    r#"show(string.find("abc", "b", math.mininteger))"#,
    r#"show(string.find("abc", "b", math.maxinteger))"#,
    r#"show(string.find("a\0b", "\0"))"#,
    r#"show(string.find("a\0b", "%z"))"#,
    r#"show(string.find("a\0b\0", "[\0]", 3))"#,
    r#"show(string.find("a\0b", "a\0b", 1, true))"#,
    r#"show(string.find("a\0b", "b\0"))"#,
    r#"show(string.find(string.rep("ab", 1000) .. "c", "abc", 1, true))"#,
    r#"show(string.find(string.rep("ab", 1000) .. "c", "abc"))"#,
    r#"show(string.find("abc", "abcd", 1, true))"#,
    r#"show(string.find("aaab", "aab", 1, true))"#,
    r#"show(("héllo wörld"):find("ö"))"#,
    r#"show(("\255\254\0\1"):find("[\254-\255]+"))"#,
    r#"show(select('#', string.find("abc", "x")))"#,
    // Argument errors, by name as called and through pcall.
    r#"show(string.find(nil, "x"))"#,
    r#"show(string.find("abc"))"#,
    r#"show(("abc"):find({}))"#,
    r#"show(("abc"):find("b", {}))"#,
    r#"show(pcall(string.find, "abc", "b", 1.5))"#,
    r#"show(pcall(string.find, "abc", "b", "x"))"#,
    r#"show(pcall(string.find, "abc", "b", "1.5"))"#,
    r#"show(pcall(string.find, true, "b"))"#,
    r#"show(pcall(string.find, setmetatable({}, {__name = "Thing"}), "b"))"#,
    r#"local f = string.find; show(pcall(function() local a, b = f(nil, "x"); return a end))"#,
    r#"show(pcall(string.find, "a", "%"))"#,
    r#"show(string.find("a", "%"))"#,
];

const MATCH: &[&str] = &[
    r#"show(string.match("key = value", "(%w+)%s*=%s*(%w+)"))"#,
    r#"show(string.match("hello", "xyz"))"#,
    r#"show(string.match("hello", "l+", 4))"#,
    r#"show(string.match("hello", "l+", -2))"#,
    r#"show(string.match("hello", "l*", 10))"#,
    r#"show(string.match("abc", "", 4))"#,
    r#"show(string.match("abc", "", 5))"#,
    r#"show(string.match("2024-01-15", "(%d+)-(%d+)-(%d+)"))"#,
    r#"show(string.match("  trim me  ", "^%s*(.-)%s*$"))"#,
    r#"show(string.match("hello", "()ll()"))"#,
    r#"show(string.match("hello", "()"))"#,
    r#"show(string.match("hello", "^h"))"#,
    r#"show(string.match("hello", "o$"))"#,
    r#"show(string.match("hello", "l$"))"#,
    r#"show(string.match("a$b", "a$b"))"#,
    r#"show(string.match("a^b", "a^b"))"#,
    r#"show(string.match("abc", "^"))"#,
    r#"show(string.match("abc", "$"))"#,
    r#"show(string.match("", "^$"))"#,
    r#"show(string.match("x", "^$"))"#,
    r#"show(string.match("$", "$$"))"#,
    r#"show(string.match("aaa", "a*"))"#,
    r#"show(string.match("aaa", "a-"))"#,
    r#"show(string.match("aaa", "a-$"))"#,
    r#"show(string.match("aaa", "a+"))"#,
    r#"show(string.match("aaa", "a?"))"#,
    r#"show(string.match("baa", "ba?"))"#,
    r#"show(string.match("bbb", "x*"))"#,
    r#"show(string.match("bbb", "x+"))"#,
    r#"show(string.match("abc", "x?a"))"#,
    r#"show(string.match("aaab", "a-b"))"#,
    r#"show(string.match("xxaxxb", ".-b"))"#,
    r#"show(string.match("abba c", "[ab]*"))"#,
    r#"show(string.match("3.14", "%d+%.?%d*"))"#,
    r#"show(string.match("42", "%d+%.?%d*"))"#,
    r#"show(string.match("<a><b>", "<(.-)>"))"#,
    r#"show(string.match("<a><b>", "<(.*)>"))"#,
    r#"show(string.match("ab", "((a)(b))"))"#,
    r#"show(string.match("abc", "(a(b(c)))"))"#,
    r#"show(string.match("hello", "(h)(e)(l)(l)(o)"))"#,
    r#"show(string.match(" abc  x", "(a*(.)%w(%s*))"))"#,
    r#"show(string.match("hello", "(l)%1"))"#,
    r#"show(string.match("abcabc", "(abc)%1"))"#,
    r#"show(string.match('say "hi" now', '(["\'])(.-)%1'))"#,
    r#"show(string.match("xyzxyz", "(x)(y)(z)%1%2%3"))"#,
    r#"show(string.match("a", "()%1"))"#,
    r#"show(pcall(string.match, "aa", "(a)%2"))"#,
    r#"show(pcall(string.match, "aa", "(a%1)"))"#,
    r#"show(pcall(string.match, "a", "%0"))"#,
    r#"show(string.match(string.rep("ab", 3) .. "x", "(.-)%1%1x"))"#,
    r#"show(string.match("hello world", "%w+", 6))"#,
    r#"show(string.match(123456, "3(%d)"))"#,
    r#"show(string.match("héllo", "[\128-\255]+"))"#,
    r#"show(string.match("日本語", "[\192-\255][\128-\191]*"))"#,
    r#"show(string.match("\0\1\2", "%c+"))"#,
    r#"show(string.match("x", "(a"))"#,
];

const SETS_AND_SPECIALS: &[&str] = &[
    r#"show(string.match("education", "[aeiou]+"))"#,
    r#"show(string.match("strength", "[^aeiou]+"))"#,
    r#"show(string.match("xyzbeefg", "[a-f]+"))"#,
    r#"show(string.match("  _id2 = 1", "[%a_][%w_]*"))"#,
    r#"show(string.match("a]b", "[%]]"))"#,
    r#"show(string.match("a]b", "[]]"))"#,
    r#"show(string.match("]]ab", "[^]]+"))"#,
    r#"show(string.match("x-a", "[a-]+"))"#,
    r#"show(string.match("x-a", "[-a]+"))"#,
    r#"show(string.match("x-a", "[%-]"))"#,
    r#"show(string.match("m-z", "[a%-z]+"))"#,
    r#"show(string.match("abc", "[z-a]"))"#,
    r#"show(string.match("v1.25x", "[%d.]+"))"#,
    r#"show(string.match("one two", "[^%s]+"))"#,
    r#"show(string.match("\1\2x", "[\0-\31]+"))"#,
    r#"show(string.match("a^b", "[b^]+"))"#,
    r#"show(string.match("a^b", "[%^]"))"#,
    r#"show(string.match("[x]", "%[(.)%]"))"#,
    r#"show(string.match("a.b", "%.(.)"))"#,
    r#"show(string.match("100%", "%d+%%"))"#,
    r#"show(string.match("a+b", "a%+b"))"#,
    r#"show(string.match("f(x)", "%((.)%)"))"#,
    r#"show(string.match("A-b", "[%u-]+"))"#,
    r#"show(string.match("a-%", "[%%-]+"))"#,
    r#"show(string.match("abc", "[a-c-]+"))"#,
    r#"show(pcall(string.match, "a", "[a"))"#,
    r#"show(pcall(string.match, "a", "[a%"))"#,
    r#"show(pcall(string.match, "a", "["))"#,
    r#"show(pcall(string.match, "a", "[^"))"#,
    r#"show(pcall(string.match, "a", "[%"))"#,
    r#"show(pcall(string.match, "a", "[]"))"#,
    r#"show(pcall(string.match, "a", "%"))"#,
    r#"show(pcall(string.match, "a", "a%"))"#,
    r#"show(pcall(string.find, "a", "(a"))"#,
    r#"show(pcall(string.match, "a", "a)"))"#,
    r#"show(pcall(string.match, "a", "(()"))"#,
    r#"show(pcall(string.match, "a", string.rep("()", 33)))"#,
    r#"show(pcall(string.match, "a", string.rep("()", 32)))"#,
    r#"show(pcall(string.find, string.rep("a", 250), string.rep("a?", 250)))"#,
    r#"show(pcall(string.find, string.rep("a", 150), string.rep("a?", 150)))"#,
    r#"show(pcall(string.find, string.rep("a", 199), string.rep("(", 20) .. string.rep("a?", 180)))"#,
    r#"show(string.match("f(a(b)c) d", "%b()"))"#,
    r#"show(string.match("f[a]", "%b()"))"#,
    r#"show(string.match("((x)", "%b()"))"#,
    r#"show(string.match('"q" x', '%b""'))"#,
    r#"show(string.match("if x then y end end", "%bie"))"#,
    r#"show(pcall(string.match, "a", "%b"))"#,
    r#"show(pcall(string.match, "a", "%b("))"#,
    r#"show(string.gsub("a(b)c(d(e))", "%b()", "[]"))"#,
    r#"show(string.gsub("THE (quick) fox", "%f[%a]%a+", "W"))"#,
    r#"show(string.find("hello world", "%f[%w]%w+", 2))"#,
    r#"show(string.gsub("aaa bbb", "%f[%l]", "|"))"#,
    r#"show(string.gsub("x1y22z", "%f[%d]", "<"))"#,
    r#"show(string.gsub("x1y22z", "%f[%D]", ">"))"#,
    r#"show(string.find("abc", "%f[%z]"))"#,
    r#"show(string.find("abc", "%f[^%z]"))"#,
    r#"show(string.gsub("the cat", "%f[%w]%w+%f[%W]", "<%0>"))"#,
    r#"show(pcall(string.find, "a", "%fa"))"#,
    r#"show(pcall(string.find, "a", "%f"))"#,
    r#"show(pcall(string.find, "a", "%f[a"))"#,
];

const GSUB: &[&str] = &[
    r#"show(string.gsub("hello world", "(%w+)", "%1 %1"))"#,
    r#"show(string.gsub("hello world", "%w+", "%0 %0", 1))"#,
    r#"show(string.gsub("hello world from Lua", "(%w+)%s*(%w+)", "%2 %1"))"#,
    r#"show(string.gsub("$name-$version.tar.gz", "%$(%w+)", {name = "lua", version = "5.4"}))"#,
    r#"show(string.gsub("4+5 = $return 4+5$", "%$(.-)%$", function(s) return load(s)() end))"#,
    r#"show(string.gsub("abc", "%w", "%0%0"))"#,
    r#"show(string.gsub("abc", "%w", "%%"))"#,
    r#"show(string.gsub("abc", "%w", "%1"))"#,
    r#"show(string.gsub("abc", "()b", "%1"))"#,
    r#"show(string.gsub("abc", "(b)", "[%1%0]"))"#,
    r#"show(string.gsub("abc", "b", "%2"))"#,
    r#"show(string.gsub("abc", "(b)", "%2"))"#,
    r#"show(string.gsub("abc", "x", "%9"))"#,
    r#"show(string.gsub("abc", "b", "x%"))"#,
    r#"show(string.gsub("abc", "b", "%x"))"#,
    r#"show(pcall(string.gsub, "abc", "b", "%x"))"#,
    r#"show(string.gsub("hello world", "o", "0", 1))"#,
    r#"show(string.gsub("hello world", "o", "0", 0))"#,
    r#"show(string.gsub("hello world", "o", "0", -1))"#,
    r#"show(string.gsub("hello world", "o", "0", "1"))"#,
    r#"show(pcall(string.gsub, "hello world", "o", "0", 2.5))"#,
    r#"show(string.gsub("hello", "l", "L", 2.0))"#,
    r#"show(string.gsub("aaa", "^a", "b"))"#,
    r#"show(string.gsub("aaa", "^", ">"))"#,
    r#"show(string.gsub("aaa", "$", "<"))"#,
    r#"show(string.gsub("abc", "", "-"))"#,
    r#"show(string.gsub("abc", "x*", "-"))"#,
    r#"show(string.gsub("abc", "b*", "-"))"#,
    r#"show(string.gsub("abc", "%w*", "-"))"#,
    r#"show(string.gsub("", "", "x"))"#,
    r#"show(string.gsub("", "x", "y"))"#,
    r#"show(string.gsub("abc", ".", {a = 1, b = 1.5}))"#,
    r#"show(string.gsub("abc", ".", {a = 2^53, c = false}))"#,
    r#"show(string.gsub("abc", ".", {a = true}))"#,
    r#"show(pcall(string.gsub, "abc", ".", {b = {}}))"#,
    r#"show(string.gsub("abc", "()", {[1] = "x", [3] = "y"}))"#,
    r#"show(string.gsub("abc", "%w", setmetatable({}, {__index = function(t, k) return k:upper() end})))"#,
    r#"show(string.gsub("k=v, x=y", "(%w+)=(%w+)", function(a, b) return b .. "=" .. a end))"#,
    r#"show(string.gsub("abc", "%w", function(c) if c == "b" then return nil end return c:byte() end))"#,
    r#"show(string.gsub("abc", "%w", function() return false end))"#,
    r#"show(string.gsub("abc", "()", function(p) return p end))"#,
    r#"show(string.gsub("abc", "(a)()", function(...) return select('#', ...) end))"#,
    r#"show(pcall(string.gsub, "abc", "b", function() return {} end))"#,
    r#"show(string.gsub("abc", "b", function() return {} end))"#,
    r#"show(pcall(string.gsub, "abc", "b", function() error("boom") end))"#,
    r#"show(pcall(string.gsub, "abc", "b", function() error("lvl2", 2) end))"#,
    r#"local ok, e = pcall(string.gsub, "abc", "b", function() error({code = 7}) end); show(ok, type(e), e.code)"#,
    r#"local ok, e = pcall(string.gsub, "abc", "b", function() error() end); show(ok, e)"#,
    r#"show(pcall(string.gsub, "abc", "b", setmetatable({}, {__index = function() error("idx") end})))"#,
    r#"show(string.gsub("abc", "b", 5))"#,
    r#"show(string.gsub("abc", "b", 2.5))"#,
    r#"show(string.gsub(123, "4", "x"))"#,
    r#"show(string.gsub(123, "2", "x"))"#,
    r#"show(pcall(string.gsub, "abc", "b"))"#,
    r#"show(string.gsub("abc", "b", true))"#,
    r#"show(("abc"):gsub("b", nil))"#,
    r#"show(pcall(string.gsub, "abc", "b", true, {}))"#,
    r#"show(string.gsub("hello world", "%s", "_"))"#,
    r#"show(string.gsub("日本語", "[\192-\255][\128-\191]*", "<%0>"))"#,
    r#"show(string.gsub("a\0b\0c", "%z", "0"))"#,
    r#"show(string.gsub("abc", "[ac]", "%0\0"))"#,
    r#"show(string.gsub("abc", ".", "x", math.maxinteger))"#,
    r#"show(string.gsub("abc", "(a)(b)(c)", "%3%2%1"))"#,
    r#"show(string.gsub("one two", "(%w+)", "<%1>"))"#,
    r#"local co = coroutine.wrap(function() return string.gsub("ab", ".", coroutine.yield) end); show(pcall(co))"#,
];

const GMATCH: &[&str] = &[
    r#"print(gm("hello world from lua", "%a+"))"#,
    r#"print(gm("k1=v1, k2=v2", "(%w+)=(%w+)"))"#,
    r#"print(gm("abc", ""))"#,
    r#"print(gm("abc", "x*"))"#,
    r#"print(gm("abc", "b*"))"#,
    r#"print(gm("aaa", "a-"))"#,
    r#"print(gm("aaa", "a*"))"#,
    r#"print(gm("hello", "()"))"#,
    r#"print(gm("hello", "()l()"))"#,
    r#"print(gm("hello", "^h"))"#,
    r#"print(gm("^h^h", "^h"))"#,
    r#"print(gm("hello", "o$"))"#,
    r#"print(gm("hello world", "%a+", 3))"#,
    r#"print(gm("hello", ".", -2))"#,
    r#"print(gm("hello", ".", 10))"#,
    r#"print(gm("hello", ".", 6))"#,
    r#"print(gm("hello", "", 6))"#,
    r#"print(gm("hello", "", 7))"#,
    r#"print(gm("hello", "", -100))"#,
    r#"print(gm("", ""))"#,
    r#"print(gm("日本語", utf8.charpattern))"#,
    r#"print(gm("a,b,,c", "([^,]*)"))"#,
    r#"print(gm("one two  three", "%S+"))"#,
    r#"print(gm("(a)(b)", "%b()"))"#,
    r#"print(gm("THE (quick) fox", "%f[%a]%a+"))"#,
    r#"print(gm(12321, "2"))"#,
    r#"print(gm("abc", "%"))"#,
    r#"print(pcall(gm, "abc", "[a"))"#,
    r#"show(pcall(string.gmatch, nil, "x"))"#,
    r#"show(pcall(string.gmatch, "x"))"#,
    r#"show(pcall(string.gmatch, "x", "x", 1.5))"#,
    r#"show(string.gmatch("x", "x", {}))"#,
    r#"local it = ("ab"):gmatch("."); show(it(), it(), it(), it())"#,
    r#"for k, v in string.gmatch("a=1, b=2", "(%w+)=(%w+)") do print(k, v) end"#,
    r#"for w in ("x y z"):gmatch("%a") do print(w) end"#,
    r#"for a in ("abc"):gmatch("(") do print(a) end"#,
    r#"local n = 0; for _ in string.gmatch(string.rep("ab", 1000), "ab") do n = n + 1 end; print(n)"#,
];

/// The fast paths: plain and special-free `find` answered without the matcher (also
/// with non-string, non-integer and extra arguments that must take the full path), literal
/// and one-class patterns (with `+`, anchored or not) in `find`, `match`, `gmatch` and
/// `gsub`, and searches longer than one scan window (1 MiB).
const FAST_PATHS: &[&str] = &[
    r#"show(string.find("a\nb\nc", "\n", 3, true))"#,
    r#"show(string.find("a\nb\nc", "\n", 3))"#,
    r#"show(string.find("abc", "c", 3.0))"#,
    r#"show(pcall(string.find, "abc", "c", 1.5))"#,
    r#"show(pcall(string.find, "abc", "c", "2"))"#,
    r#"show(pcall(string.find, "abc", "c", {}))"#,
    r#"show(string.find(12345, 34))"#,
    r#"show(string.find("abc", "b", nil, nil))"#,
    r#"show(string.find("abc", "b", 1, false, "extra"))"#,
    r#"show(pcall(string.find, nil, "b"))"#,
    r#"show(pcall(string.find, "abc"))"#,
    r#"show(string.find("a)b", ")"))"#,
    r#"show(pcall(string.match, "a)b", ")"))"#,
    r#"show(string.find("a]b", "]"))"#,
    r#"local function tail(s) return s:match("(") end show(pcall(tail, "a"))"#,
    r#"local function tail(s) return string.find(s, "%") end show(pcall(tail, "a"))"#,
    r#"show(pcall(string.match, "aaa", string.rep("(a", 33)))"#,
    r#"show(string.match("key=val; k2=v2", "(%w+)=(%w+)", 6))"#,
    r#"show(string.find("key=val", "()=()"))"#,
    r#"show(string.match("  x", "^%s*()"))"#,
    r#"show(string.match("x=1, y=22", "%d+"))"#,
    r#"show(string.match("x=1, y=22", "%d+", 5))"#,
    r#"show(string.match("x=1, y=22", "^%a"))"#,
    r#"show(string.match("x=1, y=22", "^%d+"))"#,
    r#"show(string.find("  lead", "^ +"))"#,
    r#"show(string.find("lead", "[^\n]+"))"#,
    r#"show(string.find("", "[^\n]+"))"#,
    r#"show(string.find("abc", ".", -1))"#,
    r#"show(string.match("abc", "^b"))"#,
    r#"show(string.match("a.b", "%."))"#,
    r#"show(string.match("100%", "%%"))"#,
    r#"show(string.match("a$b", "$+"))"#,
    r#"show(string.match("a*b", "*"))"#,
    r#"show(string.match("a^b", "^^"))"#,
    r#"print(gm("one\ntwo\n\nthree\n", "[^\n]+"))"#,
    r#"print(gm("one two  three", "%S+"))"#,
    r#"print(gm("abcabc", "bc"))"#,
    r#"print(gm("aaaa", "aa"))"#,
    r#"print(gm("abc", "."))"#,
    r#"print(gm("abc", "^a"))"#,
    r#"print(gm("^a^b", "^"))"#,
    r#"print(gm("x1y22z333", "%d+", 3))"#,
    r#"show(string.gsub("a\nb\n", "\n", ""))"#,
    r#"show(string.gsub("a\nb\n", "\n", "%0%0"))"#,
    r#"show(pcall(string.gsub, "a\nb\n", "\n", "%1"))"#,
    r#"show(pcall(string.gsub, "a\nb\n", "\n", "%2"))"#,
    r#"show(string.gsub("aaaa", "aa", "b"))"#,
    r#"show(string.gsub("hello world", "o", "0", 1))"#,
    r#"show(string.gsub("hello world", "%a+", string.upper))"#,
    r#"show(string.gsub("hello world", "%a+", {hello = "HI"}))"#,
    r#"show(string.gsub("hello world", "%a+", function() return false end))"#,
    r#"show(string.gsub("hello", "^h", "J"))"#,
    r#"show(string.gsub("hello", "^e", "J"))"#,
    r#"show(string.gsub("  x  ", "%s+", " "))"#,
    r#"show(string.gsub("abc", "[%a]", "%0-"))"#,
    r#"local s = string.rep("x", 3 * 2^20) .. "needle" .. string.rep("y", 10); show(s:find("needle")); show(s:find("needle", 1, true)); show(s:find("nope", 1, true)); show(s:find("y+"))"#,
    r#"local s = string.rep("x", 3 * 2^20) .. "ab1"; print(gm(s, "ab")); print(gm(s, "%d")); local n = 0; for m in s:gmatch("x+") do n = n + #m end; print(n)"#,
    r#"local s = string.rep("ab\n", 1e5); local n, at = 0, 1; while true do local f = s:find("\n", at, true); if not f then break end; n = n + 1; at = f + 1 end; print(n)"#,
];

/// `%x` and `[^%x]` over all 256 bytes, for every class and its complement.
fn class_cases() -> Vec<String> {
    let mut cases = Vec::new();
    for class in "acdglpsuwxz".chars() {
        for class in [class, class.to_ascii_uppercase()] {
            cases.push(format!(r#"show(ALL:gsub("%{class}", ""))"#));
            cases.push(format!(r#"show(ALL:gsub("[^%{class}]", ""))"#));
        }
    }
    for escaped in [
        '.', '%', '[', ']', '(', ')', '-', '+', '*', '?', '^', '$', 'q', '1',
    ] {
        cases.push(format!(
            r#"show(pcall(string.gsub, ALL, "%{escaped}", '#'))"#
        ));
    }
    cases.push(r#"show(ALL:gsub(".", ""))"#.to_string());
    cases.push(r#"show(ALL:gsub("[%w%s]", ""))"#.to_string());
    cases.push(r#"show(ALL:gsub("[^%p%c]", ""))"#.to_string());
    cases.push(r#"show(ALL:gsub("[!-/]", ""))"#.to_string());
    cases.push(r#"show(ALL:gsub("[\128-\255]+", ""))"#.to_string());
    cases
}

#[test]
fn find_matches_c_lua() {
    assert_same(&owned(FIND));
}

#[test]
fn match_matches_c_lua() {
    assert_same(&owned(MATCH));
}

#[test]
fn sets_balances_frontiers_and_errors_match_c_lua() {
    assert_same(&owned(SETS_AND_SPECIALS));
}

#[test]
fn gsub_matches_c_lua() {
    assert_same(&owned(GSUB));
}

#[test]
fn gmatch_matches_c_lua() {
    assert_same(&owned(GMATCH));
}

#[test]
fn fast_paths_match_c_lua() {
    assert_same(&owned(FAST_PATHS));
}

#[test]
fn character_classes_match_c_lua_on_every_byte() {
    assert_same(&class_cases());
}

#[test]
fn there_are_enough_cases() {
    let count = FIND.len()
        + MATCH.len()
        + SETS_AND_SPECIALS.len()
        + GSUB.len()
        + GMATCH.len()
        + class_cases().len();
    assert!(count >= 250, "{count} cases");
}

/// xorshift64*: deterministic, so a failure is reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

/// A Lua string literal for any bytes.
fn literal(bytes: &str) -> String {
    let mut out = String::from("\"");
    for b in bytes.bytes() {
        out.push_str(&format!("\\x{b:02x}"));
    }
    out.push('"');
    out
}

const PATTERN_PIECES: &[&str] = &[
    "a", "b", ".", "%", "[", "]", "^", "$", "*", "+", "-", "?", "(", ")", "%a", "%d", "%1", "%2",
    "%b()", "%f[a]", "()", "[^a]", "[a-c]", "%s", "a*", "b-", ".?",
];
const SUBJECT_PIECES: &[&str] = &[
    "a", "b", "c", "(", ")", "1", "2", " ", "-", "]", "ab", "\u{e9}",
];

/// Pieces of patterns that are well formed on their own, so that most random patterns
/// match something instead of failing to compile.
const WELL_FORMED_PIECES: &[&str] = &[
    "a", "b", ".", "a*", "b+", ".-", "a?", "[ab]", "[^b]+", "%a+", "%d", "%s*", "(a)", "(.-)",
    "(b*)", "()", "%b()", "%f[%w]", "%1", "$", "^", "1", " ", "[%d%s]",
];

/// One snippet per case: every function on one random pattern and subject, each result
/// (or error) shown.
fn random_cases(seed: u64, count: usize, pieces: &[&str]) -> Vec<String> {
    let mut rng = Rng(seed);
    (0..count)
        .map(|_| {
            let pattern: String = (0..1 + rng.below(8)).map(|_| rng.pick(pieces)).collect();
            let subject: String = (0..rng.below(11))
                .map(|_| rng.pick(SUBJECT_PIECES))
                .collect();
            let init = rng.below(25) as i64 - 12;
            let n = rng.below(4);
            format!(
                "local s, p, i = {}, {}, {init}\n\
                 show(pcall(string.find, s, p))\n\
                 show(pcall(string.find, s, p, i))\n\
                 show(pcall(string.find, s, p, i, true))\n\
                 show(pcall(string.match, s, p, i))\n\
                 show(pcall(gm, s, p))\n\
                 show(pcall(gm, s, p, i))\n\
                 show(pcall(string.gsub, s, p, \"<%0>\"))\n\
                 show(pcall(string.gsub, s, p, \"%1\", {n}))\n\
                 show(pcall(string.gsub, s, p, function(...) return select('#', ...) end))",
                literal(&subject),
                literal(&pattern)
            )
        })
        .collect()
}

/// `PATTERN_CASES` and `PATTERN_SEED` run more or other random cases.
fn random_settings(default_seed: u64) -> (u64, usize) {
    let read = |name: &str| std::env::var(name).ok().and_then(|v| v.parse().ok());
    let seed = read("PATTERN_SEED").unwrap_or(default_seed);
    let count = read("PATTERN_CASES").map_or(3000, |n: u64| n as usize);
    (seed, count)
}

#[test]
fn random_patterns_match_c_lua() {
    let (seed, count) = random_settings(0x5eed_1234_abcd_ef01);
    assert_same(&random_cases(seed, count, PATTERN_PIECES));
}

#[test]
fn random_well_formed_patterns_match_c_lua() {
    let (seed, count) = random_settings(0x0dd_ba11_cafe_f00d);
    assert_same(&random_cases(seed, count, WELL_FORMED_PIECES));
}

// ---------------------------------------------------------------------------------------
// Limits.
// ---------------------------------------------------------------------------------------

/// Runs `code` under a 300 ms limit (a generous one when another limit is expected, so
/// a loaded machine cannot make time trip first), expects `kind`, then checks the
/// environment still works (the variable set before survives, pattern functions work).
/// The pathological patterns would run for ages: only the limit ends them, so a matcher
/// that stopped checking it hangs, and fails here.
fn assert_limit(kind: LimitKind, code: &str) {
    let code = code.to_string();
    support::hang::finishes(&format!("`{code}`"), move || {
        let env = Environment::new(
            Registry::baked().clone(),
            Limits {
                time: if kind == LimitKind::Time {
                    Duration::from_millis(300)
                } else {
                    Duration::from_secs(60)
                },
                memory_bytes: 64 * 1024 * 1024,
                ..Limits::default()
            },
        )
        .unwrap();
        env.execute("kept = 42").unwrap();
        match env.execute(&code) {
            Err(ExecError::Limit { kind: hit, .. }) => assert_eq!(hit, kind, "`{code}`"),
            other => panic!("`{code}` should hit the {kind} limit, got {other:?}"),
        }
        let after = env
            .execute(r#"print(kept, ("key=value"):match("(%w+)=(%w+)"))"#)
            .unwrap();
        assert_eq!(after.output, "42\tkey\tvalue\n", "after `{code}`");
    });
}

const PATHOLOGICAL: &str = r#"string.rep("a", 1e5), ".-.-.-.-.-.-b""#;

#[test]
fn backtracking_find_hits_the_time_limit() {
    assert_limit(LimitKind::Time, &format!("string.find({PATHOLOGICAL})"));
    assert_limit(
        LimitKind::Time,
        r#"string.rep("a", 1e5):find(".-.-.-.-.-.-b")"#,
    );
}

#[test]
fn backtracking_match_gmatch_and_gsub_hit_the_time_limit() {
    assert_limit(LimitKind::Time, &format!("string.match({PATHOLOGICAL})"));
    assert_limit(
        LimitKind::Time,
        &format!("for m in string.gmatch({PATHOLOGICAL}) do end"),
    );
    assert_limit(
        LimitKind::Time,
        &format!("string.gsub({PATHOLOGICAL}, 'x')"),
    );
    assert_limit(
        LimitKind::Time,
        &format!("string.gsub({PATHOLOGICAL}, function() end)"),
    );
    assert_limit(
        LimitKind::Time,
        r#"string.rep("a", 1e5):find(".*.*.*.*.*.*b")"#,
    );
}

#[test]
fn back_references_and_balances_hit_the_time_limit() {
    assert_limit(
        LimitKind::Time,
        r#"string.rep("a", 30000):match("(.-)%1b")"#,
    );
    assert_limit(LimitKind::Time, r#"string.rep("(", 1e5):find("%b()")"#);
}

#[test]
fn protected_calls_cannot_swallow_the_time_limit() {
    assert_limit(
        LimitKind::Time,
        &format!("print(pcall(string.find, {PATHOLOGICAL}))"),
    );
    assert_limit(
        LimitKind::Time,
        &format!("print(xpcall(string.match, function(e) return e end, {PATHOLOGICAL}))"),
    );
    assert_limit(
        LimitKind::Time,
        &format!(
            "for i = 1, 3 do pcall(function() return string.gsub({PATHOLOGICAL}, '') end) end"
        ),
    );
    assert_limit(
        LimitKind::Time,
        &format!(
            "local co = coroutine.create(function() return string.match({PATHOLOGICAL}) end)\n\
             print(coroutine.resume(co))"
        ),
    );
}

#[test]
fn a_gsub_result_growing_outside_lua_hits_the_memory_limit() {
    assert_limit(
        LimitKind::Memory,
        r#"local big = string.rep("b", 1e4); string.rep("a", 1e5):gsub(".", big)"#,
    );
    assert_limit(
        LimitKind::Memory,
        r#"local big = string.rep("b", 1e4); string.rep("a", 1e5):gsub(".", function() return big end)"#,
    );
}

#[test]
fn ordinary_patterns_over_a_large_text_never_come_near_a_generous_time_limit() {
    // Their speed is measured by `cargo bench --bench context`; this catches a matcher
    // gone pathological (a fraction of a second becoming a minute), never a slow machine.
    let env = sandbox(Limits {
        time: support::hang::HANG_BOUND,
        ..Limits::default()
    });
    let run = env.execute(
        r#"
        local text = string.rep("the quick brown fox jumps over the lazy dog\n", 20000)
        local words = 0
        for _ in text:gmatch("%a+") do words = words + 1 end
        local lines = select(2, text:gsub("\n", "\n"))
        local found = 0
        for i = 1, 20000 do if ("key" .. i .. "=value"):find("^%w+=") then found = found + 1 end end
        print(words, lines, found)
        "#,
    );
    match run {
        Ok(run) => assert_eq!(run.output, "180000\t20000\t20000\n"),
        Err(error) => panic!("ordinary patterns did not finish: {error:?}"),
    }
}
