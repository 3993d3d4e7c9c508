//! The sandbox against C Lua 5.4 (the unsandboxed `mlua::Lua::new()`, which is the
//! vendored C Lua) at the edges: error levels through `string.gsub`, `setmetatable`'s
//! errors, `load` (chunk names, messages, modes, results), `print` of any bytes and
//! source that is not UTF-8. Where the sandbox differs on purpose (`collectgarbage`,
//! binary chunks) its behaviour is asserted on its own. No message may name an internal
//! chunk of the sandbox.

use crate::support;

use rlm_registry::Registry;
use rlm_registry::environment::{Environment, ExecError, Limits, escape_output};
use support::reference::{Outcome, Reference};

fn sandbox() -> Environment {
    Environment::new(Registry::baked().clone(), Limits::default()).unwrap()
}

fn run_sandbox(env: &Environment, code: &[u8]) -> Outcome {
    match env.execute_bytes(code) {
        Ok(_) => Ok(env.last_output_bytes()),
        // Lua's message, as C Lua's; the hint after it is the sandbox's own addition.
        Err(error @ ExecError::Lua { .. }) => Err((
            error.message_without_hint().to_string(),
            env.last_output_bytes(),
        )),
        Err(limit) => panic!("{} hit a limit: {limit}", String::from_utf8_lossy(code)),
    }
}

/// Runs every case in both interpreters and fails listing those whose outcomes differ.
fn assert_same_as_c_lua(cases: &[&[u8]]) {
    let reference = Reference::new();
    let env = sandbox();
    let differ: Vec<String> = cases
        .iter()
        .filter_map(|code| {
            let expected = reference.run(code);
            let actual = run_sandbox(&env, code);
            (expected != actual).then(|| {
                format!(
                    "{}\n  C Lua: {expected:?}\n  ours:  {actual:?}",
                    String::from_utf8_lossy(code)
                )
            })
        })
        .collect();
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}

#[test]
fn gsub_replacement_errors_report_the_positions_c_lua_reports() {
    assert_same_as_c_lua(&[
        // Level 3 from a replacement function: the line that called gsub.
        b"local function f() local r = ('abc'):gsub('%w', function() error('boom', 3) end) return r end\nprint(pcall(f))",
        b"print(pcall(string.gsub, 'abc', '%w', function() error('boom', 2) end))",
        b"print(pcall(string.gsub, 'abc', '%w', function() error('boom') end))",
        b"local ok, e = pcall(string.gsub, 'abc', '%w', function() error({code = 7}) end)\nprint(ok, type(e), e.code)",
        // `__index` raising with level 2: gsub is a C function, so no position.
        b"local t = setmetatable({}, {__index = function(_, k) error('no ' .. k, 2) end})\nprint(pcall(string.gsub, 'abc', '%w', t))",
        b"local t = setmetatable({}, {__index = function(_, k) error('no ' .. k, 2) end})\nlocal function f() local r = ('abc'):gsub('%w', t) return r end\nprint(pcall(f))",
        b"local t = setmetatable({}, {__index = function(_, k) return k:upper() end})\nprint(('abc'):gsub('%w', t))",
        b"print(('abc'):gsub('%w', function(c) if c == 'b' then return nil end return c .. c end))",
        b"print(('abc'):gsub('(%w)', {a = 1, b = true}))",
        b"print(pcall(string.gsub, 'abc', '%w', function() return {} end))",
        b"print(('hello world'):gsub('^(%w+)', function(w) return w:upper() end))",
        b"print(('abc'):gsub('', function() return '-' end))",
        b"print(('abc'):gsub('%w', function(c) return c end, 2))",
        b"print(string.gsub('abc', 'b*', function(m) return '<' .. m .. '>' end))",
        // The replacement may yield when gsub runs in a coroutine? C Lua refuses: same message.
        b"local co = coroutine.wrap(function() return ('ab'):gsub('%w', coroutine.yield) end)\nprint(pcall(co))",
    ]);
}

#[test]
fn setmetatable_errors_name_setmetatable() {
    assert_same_as_c_lua(&[
        b"print(pcall(setmetatable, nil, {}))",
        b"print(pcall(setmetatable, {}, 1))",
        b"print(pcall(setmetatable, {}))",
        b"local function f() setmetatable(1, {}) end\nprint(pcall(f))",
        b"local function f() setmetatable({}, 'x') end\nprint(pcall(f))",
        b"local t = setmetatable({}, {__metatable = 'locked'})\nprint(pcall(setmetatable, t, {}))",
        b"local function f() local t = setmetatable({}, {__metatable = 1}) setmetatable(t, nil) end\nprint(pcall(f))",
        b"local t = {}\nprint(setmetatable(t, nil) == t, getmetatable(setmetatable(t, {__index = {x = 1}})).__index.x, t.x)",
        b"print(select('#', setmetatable({}, {})))",
    ]);
}

#[test]
fn load_names_reports_and_returns_as_c_lua_does() {
    assert_same_as_c_lua(&[
        b"print(load('x = '))",
        b"print(load('x = \\n = y'))",
        b"print(load('return +', '=chunk'))",
        b"print(load('return +', '@file.lua'))",
        b"print(load('return +', 'named'))",
        b"print(load('return +', nil))",
        b"print(type(load(function() return nil end)))",
        b"print(select('#', load('return 1', nil)))",
        b"print(select('#', load('return 1')))",
        b"print(load('return 1', 'n', 'b'))",
        b"print(load('return 1', 'n', 't')())",
        b"print(load('return 1', 'n', 'bt')())",
        b"print(load('return 1', 'n', 'x'))",
        b"print(load('return y', 'n', 't', {y = 5})())",
        b"print(load(42))",
        b"local parts, i = {'return ', '1 + ', '1'}, 0\nprint(load(function() i = i + 1 return parts[i] end)())",
        b"print(type(load('error(\"x\")', '=here')))",
        b"print(pcall(load('error(\"x\")')))",
        b"print(pcall(load('error(\"x\")', '=here')))",
        // Names and messages keep bytes that are not UTF-8.
        b"print(load('x = \\'\\233'))",
        b"print(load('x = \\'\xe9\\n'))",
        b"print(pcall(load('error(\"x\")', 'caf\\233')))",
        b"print(pcall(load('error(\"x\")', '=caf\xe9')))",
        b"print(load('return +', 'a\\0b'))",
    ]);
}

#[test]
fn load_raises_on_bad_arguments_and_takes_any_env_as_c_lua_does() {
    assert_same_as_c_lua(&[
        b"print(pcall(load, {}))",
        b"print(pcall(load, true))",
        b"print(pcall(load))",
        b"local function f() return load(nil) end\nprint(pcall(f))",
        b"print(pcall(load, 'return 1', {}))",
        b"print(pcall(load, 'return 1', 'n', {}))",
        b"print(pcall(load, 'return 1', 'n', true))",
        b"print(load('return 1', 7, 't')())",
        b"print(pcall(load('return x', 'n', 't', nil)))",
        b"print(pcall(load('return x', 'n', 't', 5)))",
        b"print(load('return 1', 'n', 't', 5)())",
        b"print(pcall(load('x = 1', '=n', 't', 'text')))",
        b"local env = setmetatable({}, {__index = function(_, k) return k .. '!' end})\nprint(load('return hello', 'n', 't', env)())",
        b"print(load('local a = 1 return a', 'n', 't', nil)())",
        // The mode is checked first, then the chunk name, then the chunk.
        b"print(pcall(load, {}, {}))",
        b"print(pcall(load, {}, 'n', {}))",
        b"print(pcall(load, 'return 1', {}, {}))",
        // A reader's piece may be a number, float or integer, as `lua_isstring` allows.
        b"local parts, i = {'return ', 1.5, ' + ', 2}, 0\nprint(load(function() i = i + 1 return parts[i] end)())",
    ]);
}

#[test]
fn load_parses_a_readers_pieces_as_they_come_as_c_lua_does() {
    assert_same_as_c_lua(&[
        // A token split across pieces.
        b"local parts, i = {'ret', 'urn 4', '2'}, 0\nprint(load(function() i = i + 1 return parts[i] end)())",
        // The parser stops at the first error, whatever the reader would hand out next.
        b"local calls = 0\nprint(load(function() calls = calls + 1 return 'x = = 1 ' end))\nprint(calls)",
        b"local calls = 0\nprint(load(function() calls = calls + 1 return '(' end))\nprint(calls < 1000)",
        // An empty piece ends the chunk; later pieces are never asked for.
        b"local parts, i = {'return 1', '', 'error()'}, 0\nprint(load(function() i = i + 1 return parts[i] end)())\nprint(i)",
        // A bad piece, or a failing reader, after good ones.
        b"local parts, i = {'return ', {}}, 0\nprint(load(function() i = i + 1 return parts[i] end))",
        b"local i = 0\nprint(load(function() i = i + 1 if i > 2 then error('stop') end return ' ' end))",
        b"local i = 0\nlocal f, e = load(function() i = i + 1 if i > 2 then error({}) end return ' ' end)\nprint(f, type(e), i)",
        // The mode is checked against the first piece.
        b"local parts, i = {'', 'return 1'}, 0\nprint(load(function() i = i + 1 return parts[i] end, 'n', 'b'))",
        b"local parts, i = {'\\27', 'Lua'}, 0\nprint(load(function() i = i + 1 return parts[i] end, 'n', 't'))",
        b"print(load('return 1', 'n', 'b\\0t'))",
    ]);
}

#[test]
fn print_writes_the_bytes_printed() {
    assert_same_as_c_lua(&[
        b"print('\\200')",
        b"print('caf\\xe9', '\\xff\\xfe')",
        b"print('\\\\x41 is not an escape')",
        b"print('\\xe2\\x82', '\\xac')",
        b"print(('\\0\\1\\127\\128\\255'):rep(2))",
    ]);
    let env = sandbox();
    let run = env.execute("print('\\200', 'caf\\xc3\\xa9')").unwrap();
    assert_eq!(
        run.output, "\\xc8\tcafé\n",
        "the text shows the byte as `\\xNN`"
    );
    assert_eq!(env.last_output_bytes(), b"\xc8\tcaf\xc3\xa9\n");
}

#[test]
fn source_that_is_not_utf8_runs() {
    assert_same_as_c_lua(&[
        b"print(#'\xe9t\xe9', '\xe9')",
        b"-- commentaire \xe9\nprint('ok')",
        b"local s = '\xff\xfe' print(s:byte(1, -1))",
    ]);
}

#[test]
fn collectgarbage_errors_are_strings() {
    let env = sandbox();
    let run = env
        .execute(
            r#"
            local ok, e = pcall(collectgarbage, "collect")
            print(ok, type(e), e:find("not available", 1, true) ~= nil)
            ok, e = pcall(collectgarbage)
            print(ok, type(e), e)
            ok, e = pcall(collectgarbage, {})
            print(ok, e)
            print(type(collectgarbage("count")), math.type(collectgarbage("count")))
            "#,
        )
        .unwrap();
    assert_eq!(
        run.output,
        "false\tstring\ttrue\n\
         false\tstring\tcollectgarbage() is not available in the sandbox; only \"count\" is\n\
         false\tbad argument #1 to 'collectgarbage' (string expected, got table)\n\
         number\tfloat\n"
    );
}

#[test]
fn binary_chunks_are_refused_whatever_the_mode() {
    let run = sandbox()
        .execute(
            r#"
            print(load("\27Lua"))
            print(load("\27Lua", "b", "b"))
            print(load("\27Lua", "t", "t"))
            "#,
        )
        .unwrap();
    assert_eq!(
        run.output,
        "nil\tattempt to load a binary chunk (the sandbox loads text chunks only)\n\
         nil\tattempt to load a binary chunk (the sandbox loads text chunks only)\n\
         nil\tattempt to load a binary chunk (mode is 't')\n"
    );
}

/// Snippets that fail in every way the sandbox's own wrappers could show through.
const ERRORING: &[&str] = &[
    "('abc'):gsub('%w', function() error('x', 3) end)",
    "('abc'):gsub('%w', function() error('x', 4) end)",
    "('abc'):gsub('%w', setmetatable({}, {__index = function() error('x', 2) end}))",
    "('abc'):gsub('%w', setmetatable({}, {__index = function() error('x', 3) end}))",
    "('abc'):gsub('%w', function() return {} end)",
    "('abc'):gsub('(', 'x')",
    "('abc'):find('%')",
    "('abc'):gmatch('[a')()",
    "setmetatable(nil, {})",
    "setmetatable({}, 1)",
    "setmetatable(setmetatable({}, {__metatable = 1}), {})",
    "collectgarbage('collect')",
    "collectgarbage('step')",
    "assert(load('x ='))",
    "load('error(\"y\", 2)')()",
    "string.rep()",
    "re.find('a', '(')",
    "local t = setmetatable({}, {__gc = function() error('in gc', 2) end}) t = nil",
    "error('plain', 2)",
];

#[test]
fn no_message_names_an_internal_chunk() {
    let env = sandbox();
    let internal = [
        "sandbox:",
        "patterns:",
        "builtin:",
        "host:",
        "store:",
        "=re",
        "re:",
    ];
    for snippet in ERRORING {
        let caught = format!("local ok, e = pcall(function() {snippet} end) print(tostring(e))");
        let messages = [
            env.execute(&caught).map(|run| run.output),
            env.execute(snippet).map(|run| run.output),
        ];
        for message in messages {
            let text = match message {
                Ok(output) => output,
                Err(error) => format!("{}{}", error.output(), error.message()),
            };
            for name in internal {
                assert!(
                    !text.contains(name),
                    "`{snippet}` gave a message naming an internal chunk: {text}"
                );
            }
        }
    }
}

#[test]
fn the_output_text_shows_each_byte_that_is_not_utf8_as_an_escape() {
    let all: Vec<u8> = (0x80..=0xff).collect();
    let expected: String = all.iter().map(|b| format!("\\x{b:02x}")).collect();
    assert_eq!(escape_output(&all), expected);
    assert_eq!(
        escape_output(b"ok \\x41"),
        "ok \\x41",
        "valid text is unchanged"
    );
}

#[test]
fn protected_calls_count_error_levels_as_c_lua_does() {
    assert_same_as_c_lua(&[
        b"local function f() error('x', 3) end\nprint(pcall(function() f() end))",
        b"print(pcall(function() local ok, e = pcall(error, 'y', 3) return e end))",
        b"print(pcall(pcall))",
        b"print(pcall(function() error('z', 3) end))",
        b"print(xpcall(function() error('z', 3) end, function(m) return 'h: ' .. m end))",
        b"print(pcall(xpcall))",
        b"print(pcall(xpcall, print))",
        b"print(xpcall(function(...) return ... end, print, 1, 2))",
        b"print(pcall(coroutine.resume))",
        b"print(pcall(coroutine.resume, {}))",
        b"print(pcall(coroutine.close, 1))",
        b"local co = coroutine.create(function(a) local b = coroutine.yield(a + 1) error('e' .. b) end)\nprint(coroutine.resume(co, 1))\nprint(coroutine.resume(co, 5))\nprint(coroutine.resume(co))\nprint(coroutine.close(co))",
        b"local co = coroutine.wrap(function() local ok, v = pcall(function() return coroutine.yield(1) + 1 end) return ok, v end)\nprint(co())\nprint(co(41))",
        b"print(select('#', pcall(function() end)), pcall(function() return 1, nil, 3 end))",
        b"print(pcall(error))",
        b"print(pcall(error, nil))",
        b"print(pcall(error, setmetatable({}, {__tostring = function() return 'obj' end})))",
    ]);
}

#[test]
fn gmatch_over_long_subjects_matches_c_lua() {
    let mut cases = Vec::new();
    for pattern in [
        "[^\\n]+", "%a+", "%d", "a+", "a", ".", "[%w_]+", "%s+", "\\n", "[^a]", "%A+", "x+",
    ] {
        for init in ["1", "100", "-50", "5000"] {
            cases.push(format!(
                "local s = ('ab\\n12 x_y\\r\\n\\naaa'):rep(600) .. 'tail'\n\
                 local n, total, last = 0, 0, '' \
                 for w in s:gmatch('{pattern}', {init}) do n = n + 1 total = total + #w last = w end \
                 print(n, total, last)"
            ));
        }
    }
    let cases: Vec<&[u8]> = cases.iter().map(|c| c.as_bytes()).collect();
    assert_same_as_c_lua(&cases);
}
