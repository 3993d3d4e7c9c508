//! `grep` (native, searching the whole text and building its result with the C API)
//! against the library's pure-Lua definition (`lines`, then `string.find` or `re.find`
//! on each line) on texts with every kind of line end, for plain strings, Lua patterns
//! (with and without a literal prefix) and regular expressions, with and without context.

use rlm_registry::Registry;
use rlm_registry::environment::{Environment, Limits};

/// The pure-Lua `grep` of `lua/text/search.lua`, with `re` for regular expressions, and
/// a printer of results (fields read through `pairs`, as any Lua code may).
const REFERENCE: &str = r#"
function reference_grep(text, pattern, context, plain)
  local all = lines(text)
  local matches = {}
  for index, line in ipairs(all) do
    local found
    if plain == "regex" then found = re.find(line, pattern) else found = string.find(line, pattern, 1, plain) end
    if found then
      local first = math.max(1, index - context)
      local last = math.min(#all, index + context)
      matches[#matches + 1] = {
        line = index,
        text = line,
        before = table.move(all, first, index - 1, 1, {}),
        after = table.move(all, index + 1, last, 1, {}),
      }
    end
  end
  return matches
end
function show(matches)
  local out = {}
  for _, m in ipairs(matches) do
    local fields = {}
    for k, v in pairs(m) do
      if type(v) == "table" then v = "{" .. table.concat(v, "|") .. "}#" .. #v end
      fields[#fields + 1] = k .. "=" .. string.format("%q", v)
    end
    table.sort(fields)
    out[#out + 1] = table.concat(fields, " ")
  end
  return #matches .. ": " .. table.concat(out, "; ")
end
"#;

const TEXTS: &[&str] = &[
    "",
    "\n",
    "ab",
    "ab\n",
    "ab\r\nxab\r\n\r\nab",
    "x\nab\nab\nab\nx\n",
    "abab ab\n\nyab\r\rab\r",
    "line one\nab\r\nthree ab\nfour\nab five\n\n\nab",
    "req 12 ms user=b ab\n3 ms user=d\n ms user=a\nab 7 ms user=c.\r\n",
];

const SEARCHES: &[(&str, &str)] = &[
    ("'ab'", "true"),
    ("'b'", "true"),
    ("''", "true"),
    ("'b\\r'", "true"),
    ("'\\n'", "true"),
    ("'ab'", "false"),
    ("'ab$'", "false"),
    ("'^ab'", "false"),
    ("'a%w'", "false"),
    ("'(a)(b)'", "false"),
    ("'%w+'", "false"),
    ("'ab*'", "false"),
    ("'%a+ ab'", "false"),
    ("'x?ab'", "false"),
    ("'%w+ ab'", "false"),
    ("'(%w)b'", "false"),
    ("'a(b)%1?'", "false"),
    ("'[ab]b\\r?'", "false"),
    ("'ab\\r'", "false"),
    ("'%d+ ms user=[a-c]'", "false"),
    ("'^%d+ ms'", "false"),
    ("'[^%s]b'", "false"),
    ("'%Wab'", "false"),
    ("'a-b$'", "false"),
    ("'()ms()'", "false"),
    ("'%f[%a]ab'", "false"),
    ("'%b()'", "false"),
    ("'[%]a]b'", "false"),
    ("[[ab$]]", "'regex'"),
    ("[[^ab]]", "'regex'"),
    ("[[a.]]", "'regex'"),
    ("[[\\bab\\b]]", "'regex'"),
    // The same text as a Lua pattern above: each kind keeps its own compiled form.
    ("'%w+ ab'", "'regex'"),
    ("'a%w'", "'regex'"),
];

#[test]
fn grep_agrees_with_the_pure_lua_definition() {
    let env = Environment::new(Registry::baked().clone(), Limits::default()).unwrap();
    env.execute(REFERENCE).unwrap();
    let mut differ = Vec::new();
    for text in TEXTS {
        env.set_context(text).unwrap();
        for (pattern, plain) in SEARCHES {
            for context in 0..3 {
                let code = format!(
                    "print(show(grep(context, {pattern}, {context}, {plain})))\n\
                     print(show(reference_grep(context, {pattern}, {context}, {plain})))"
                );
                let output = env.execute(&code).unwrap().output;
                let (ours, expected) = output.split_once('\n').unwrap();
                if ours != expected.trim_end_matches('\n') {
                    differ.push(format!(
                        "{text:?} {pattern} {context} {plain}\n  ours:     {ours}\n  expected: {expected}"
                    ));
                }
            }
        }
    }
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}

#[test]
fn grep_results_are_ordinary_tables() {
    let env = Environment::new(Registry::baked().clone(), Limits::default()).unwrap();
    env.set_context("a\nb a\nc\n").unwrap();
    let run = env
        .execute(
            r#"
            local m = grep(context, "a")
            m[1].before[1] = "changed"
            print(#m, #m[2].before, m[2].before[1], getmetatable(m[1]), getmetatable(m[1].after))
            local keys = {}
            for k in next, m[2] do keys[#keys + 1] = k end
            table.sort(keys)
            print(table.concat(keys, ","))
            "#,
        )
        .unwrap();
    assert_eq!(run.output, "2\t0\tnil\tnil\tnil\nafter,before,line,text\n");
}

#[test]
fn grep_raises_a_malformed_pattern_error_when_a_line_reaches_it() {
    let env = Environment::new(Registry::baked().clone(), Limits::default()).unwrap();
    env.set_context("xyz\nab\n").unwrap();
    let run = env
        .execute(
            r#"
            print(pcall(grep, context, "ab["))
            print(#grep(context, "zz["))
            "#,
        )
        .unwrap();
    assert!(run.output.contains("malformed pattern"), "{}", run.output);
    assert!(run.output.ends_with("0\n"), "{}", run.output);
}
