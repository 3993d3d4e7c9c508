//! The `json` built-in, called from the sandbox as a model calls it: round trips, the
//! mapping (integers, floats, empty arrays and objects, `json.null`), every error with its
//! position or path, nesting, `json.lines`, and the execution's limits inside a decode.

use std::time::Duration;

use crate::support;

use rlm_registry::environment::{LimitKind, Limits};
use support::sandbox::{caught_here as caught, env, is_limit, output, patient};

#[test]
fn round_trips_keep_nested_values_unicode_and_escapes() {
    let env = env(Limits::default());
    let text = r#"{"name":"Zoë ☃ 🎉","quote":"say \"hi\"\n\ttab \\ slash \/","nested":{"list":[1,[2,[3,{"deep":true}]]],"flag":false},"ctl":"\u0001"}"#;
    let code = format!(
        "local v = json.decode([==[{text}]==])
         print(v.name, v.nested.list[2][2][2].deep, v.nested.flag)
         print(v.quote)
         local again = json.decode(json.encode(v))
         print(json.encode(again, {{sort_keys = true}}) == json.encode(v, {{sort_keys = true}}))
         print(json.encode(v.ctl), json.encode('é'), json.encode('\\u{{1F389}}'))"
    );
    assert_eq!(
        output(&env, &code),
        "Zoë ☃ 🎉\ttrue\tfalse\nsay \"hi\"\n\ttab \\ slash /\ntrue\n\"\\u0001\"\t\"é\"\t\"🎉\"\n"
    );
}

#[test]
fn integers_stay_integers_and_those_past_64_bits_become_floats() {
    let env = env(Limits::default());
    let code = r#"
        local v = json.decode('[0, -7, 9223372036854775807, -9223372036854775808, 9223372036854775808, 1e2, 100000000000000000000000]')
        for i = 1, #v do io_line = (io_line or '') .. math.type(v[i]) .. ' ' end
        print(io_line)
        print(v[3], v[4], v[5] == 2^63)
        print(json.encode({1, -2, math.maxinteger, math.mininteger}))
    "#;
    assert_eq!(
        output(&env, code),
        "integer integer integer integer float float float \n\
         9223372036854775807\t-9223372036854775808\ttrue\n\
         [1,-2,9223372036854775807,-9223372036854775808]\n"
    );
}

#[test]
fn floats_round_trip_exactly() {
    let env = env(Limits::default());
    let code = r#"
        local xs = {0.1, -2.5, 1e300, 5e-324, 1/3, 3.0}
        local back = json.decode(json.encode(xs))
        for i = 1, #xs do assert(back[i] == xs[i], i) assert(math.type(back[i]) == 'float', i) end
        print(json.encode({0.5, 3.0, 1e21, -0.0}))
    "#;
    assert_eq!(output(&env, code), "[0.5,3.0,1e+21,-0.0]\n");
}

#[test]
fn empty_arrays_and_objects_keep_their_kind() {
    let env = env(Limits::default());
    let code = r#"
        local v = json.decode('{"a": [], "o": {}, "nested": [[], {}, [[]]]}')
        print(json.encode(v.a), json.encode(v.o), json.encode(v.nested))
        print(json.encode(json.array()), json.encode({}), json.encode(json.array({1, 2})))
        local t = json.array()
        t[1] = 'x'
        print(json.encode(t), getmetatable(v.a) == getmetatable(t))
    "#;
    assert_eq!(
        output(&env, code),
        "[]\t{}\t[[],{},[[]]]\n[]\t{}\t[1,2]\n[\"x\"]\ttrue\n"
    );
}

#[test]
fn the_arrays_shared_metatable_is_protected() {
    let env = env(Limits::default());
    let code = r#"
        local t = json.array()
        print(getmetatable(t), getmetatable(json.decode('[1]')))
        print(pcall(function() getmetatable(t).__gc = print end))
        print(pcall(setmetatable, t, {}))
        print(json.encode(json.array()))
    "#;
    assert_eq!(
        output(&env, code),
        "json.array\tjson.array\n\
         false\tinput:4: attempt to index a string value\n\
         false\tcannot change a protected metatable\n\
         []\n"
    );
}

#[test]
fn null_is_json_null_and_encodes_back_as_null() {
    let env = env(Limits::default());
    let code = r#"
        local v = json.decode('{"a": null, "list": [1, null, 3]}')
        print(v.a == json.null, #v.list, v.list[2] == json.null, json.decode('null') == json.null)
        print(json.encode(v.list), json.encode(json.null), json.encode(nil))
        print(json.encode({a = json.null}))
    "#;
    assert_eq!(
        output(&env, code),
        "true\t3\ttrue\ttrue\n[1,null,3]\tnull\tnull\n{\"a\":null}\n"
    );
    let message = caught(&env, "json.null = 1");
    assert!(
        message.contains("cannot assign to built-in 'json.null'"),
        "{message}"
    );
}

#[test]
fn every_decode_error_names_what_and_its_line_and_column() {
    let env = env(Limits::default());
    let cases = [
        (
            "{\n\"a\": 1\n\"b\": 2}",
            "expected ',' or '}' at line 3, column 1",
        ),
        (
            "[1, 2",
            "unexpected end of input (while parsing a list) at line 1, column 5",
        ),
        (
            "{\"a\": 1",
            "unexpected end of input (while parsing an object) at line 1, column 7",
        ),
        (
            "",
            "unexpected end of input (while parsing a value) at line 1, column 0",
        ),
        (
            "\"abc",
            "unexpected end of input (while parsing a string) at line 1, column 4",
        ),
        ("[1,]", "trailing comma at line 1, column 4"),
        ("{\"a\" 1}", "expected ':' at line 1, column 6"),
        ("{1: 2}", "key must be a string at line 1, column 2"),
        (
            "[tru]",
            "invalid literal (expected true, false or null) at line 1, column 5",
        ),
        ("[1] x", "trailing characters at line 1, column 5"),
        ("[01]", "invalid number at line 1, column 3"),
        ("\"\\q\"", "invalid escape at line 1, column 3"),
        (
            "\"\\ud800 \"",
            "a lone surrogate in a \\u escape at line 1, column 8",
        ),
        (
            "\"\\ud800\\u0041\"",
            "a lone surrogate in a \\u escape at line 1, column 13",
        ),
        (
            "\"a\u{1}b\"",
            "control character (\\u0000-\\u001F) found while parsing a string at line 1, column 3",
        ),
        ("[1e999]", "number out of range at line 1, column 6"),
        ("'single'", "expected value at line 1, column 1"),
    ];
    for (input, expected) in cases {
        let code = format!("json.decode({})", lua_string(input.as_bytes()));
        assert_eq!(
            caught(&env, &code),
            format!("json.decode: {expected}"),
            "{input:?}"
        );
    }
    let invalid_utf8 = caught(&env, "json.decode('\"a\\xff\"')");
    assert_eq!(
        invalid_utf8,
        "json.decode: invalid unicode code point at line 1, column 3"
    );
    assert_eq!(
        caught(&env, "json.decode({})"),
        "json.decode: the text must be a string, got a table"
    );
    assert_eq!(output(&env, "print(json.decode(42))"), "42\n");
}

/// A Lua string literal holding exactly `bytes`.
fn lua_string(bytes: &[u8]) -> String {
    let mut literal = String::from("\"");
    for &b in bytes {
        literal.push_str(&format!("\\{b}"));
    }
    literal.push('"');
    literal
}

#[test]
fn nesting_a_thousand_deep_is_refused_cleanly_both_ways() {
    let env = env(Limits::default());
    let deep = format!("{}{}", "[".repeat(1000), "]".repeat(1000));
    let code = format!("json.decode('{deep}')");
    assert_eq!(
        caught(&env, &code),
        "json.decode: nested deeper than 100 levels at line 1, column 101"
    );
    let objects = "{\"a\":".repeat(1000);
    let code = format!("json.decode('{objects}')");
    assert!(caught(&env, &code).starts_with("json.decode: nested deeper than 100 levels"));
    // 100 levels are fine.
    let hundred = format!("{}{}", "[".repeat(100), "]".repeat(100));
    assert_eq!(
        output(
            &env,
            &format!("print(json.encode(json.decode('{hundred}')) == '{hundred}')")
        ),
        "true\n"
    );
    let message = caught(
        &env,
        "local t = {} local cur = t for i = 1, 1000 do cur.x = {} cur = cur.x end json.encode(t)",
    );
    assert!(
        message.starts_with("json.encode: nested deeper than 100 levels (at value.x.x.x"),
        "{message}"
    );
    assert_eq!(output(&env, "print(json.encode({1}))"), "[1]\n");
}

#[test]
fn encode_errors_name_the_problem_and_its_path() {
    let env = env(Limits::default());
    let cases = [
        ("{f = print}", "cannot encode a function (at value.f)"),
        (
            "{items = {1, coroutine.create(print)}}",
            "cannot encode a thread (at value.items[2])",
        ),
        (
            "{a = {1, 2, {0/0}}}",
            "NaN is not a JSON number (at value.a[3][1])",
        ),
        ("{x = math.huge}", "inf is not a JSON number (at value.x)"),
        (
            "{['odd key'] = -math.huge}",
            "-inf is not a JSON number (at value[\"odd key\"])",
        ),
        (
            "{1, 2, x = 3}",
            "the table at value has key \"x\" among integer keys: an object's keys must all be strings, an array's 1..n",
        ),
        (
            "{a = {[true] = 1}}",
            "the table at value.a has key true: an object's keys must all be strings, an array's 1..n",
        ),
        (
            "{[1] = 1, [3] = 3}",
            "the table at value is a sparse array (keys are not 1..n); fill the holes with json.null",
        ),
        (
            // Four keys and a border `#t` of 4, but key 6 and the hole at 2 say sparse.
            "{1, nil, 3, 4, [6] = 6}",
            "the table at value is a sparse array (keys are not 1..n); fill the holes with json.null",
        ),
        (
            "{s = 'a\\xff'}",
            "the string at value.s is not valid UTF-8 (byte 2)",
        ),
        (
            "{['k\\xff'] = 1}",
            "the string at value is not valid UTF-8 (byte 2)",
        ),
    ];
    for (value, expected) in cases {
        assert_eq!(
            caught(&env, &format!("json.encode({value})")),
            format!("json.encode: {expected}"),
            "{value}"
        );
    }
    let cycle = caught(&env, "local t = {a = {}} t.a.back = t json.encode(t)");
    assert_eq!(
        cycle,
        "json.encode: cycle: the table at value.a.back contains itself"
    );
    let shared = output(&env, "local s = {1} print(json.encode({s, s}))");
    assert_eq!(shared, "[[1],[1]]\n", "a table met twice is not a cycle");
}

#[test]
fn encode_indents_and_writes_keys_in_byte_order() {
    let env = env(Limits::default());
    let code = r#"
        local v = {b = {1, 2}, a = {c = json.array()}, d = 'x'}
        print(json.encode(v, {indent = 2}))
        print(json.encode(v))
        print(json.encode({k2 = 1, k10 = 2, B = 3, a = 4, ['é'] = 5, [''] = 6, ['a b'] = 7}))
    "#;
    assert_eq!(
        output(&env, code),
        "{\n  \"a\": {\n    \"c\": []\n  },\n  \"b\": [\n    1,\n    2\n  ],\n  \"d\": \"x\"\n}\n\
         {\"a\":{\"c\":[]},\"b\":[1,2],\"d\":\"x\"}\n\
         {\"\":6,\"B\":3,\"a\":4,\"a b\":7,\"k10\":2,\"k2\":1,\"é\":5}\n"
    );
    assert_eq!(
        caught(&env, "json.encode({}, {indent = 'two'})"),
        "json.encode: indent must be an integer from 0 to 16, got \"two\""
    );
}

#[test]
fn sort_keys_is_accepted_as_python_takes_it_and_changes_nothing() {
    let env = env(Limits::default());
    let code = "local v = {zeta = 1, alpha = {omega = 2, beta = 3}}
        print(json.encode(v, {sort_keys = true}))
        print(json.encode(v, {sort_keys = false}))";
    assert_eq!(
        output(&env, code),
        "{\"alpha\":{\"beta\":3,\"omega\":2},\"zeta\":1}\n".repeat(2)
    );
    assert_eq!(
        caught(&env, "json.encode({}, {sort_keys = 1})"),
        "json.encode: sort_keys must be a boolean, got 1"
    );
}

#[test]
fn json_lines_skips_blank_lines_and_errors_name_the_input_line() {
    let env = env(Limits::default());
    env.set_context("{\"id\": 1, \"tags\": []}\n\n   \n{\"id\": 2}\r\n[3]\nnull\n")
        .unwrap();
    let code = r#"
        local n = 0
        for rec in json.lines(context) do
          n = n + 1
          print(n, json.encode(rec, {sort_keys = true}))
        end
    "#;
    assert_eq!(
        output(&env, code),
        "1\t{\"id\":1,\"tags\":[]}\n2\t{\"id\":2}\n3\t[3]\n4\tnull\n"
    );
    env.set_context("{\"ok\": 1}\n\n{\"ok\": 2}\n{\"ok\" 3}\n")
        .unwrap();
    let message = caught(&env, "for rec in json.lines(context) do end");
    assert_eq!(message, "json.lines: expected ':' at line 4, column 7");
    assert_eq!(
        output(
            &env,
            "for r in json.lines('') do print(r) end print('done')"
        ),
        "done\n"
    );
}

#[test]
fn a_memory_limit_hit_inside_a_huge_decode_is_a_limit_error_not_a_crash() {
    let limits = Limits {
        memory_bytes: 64 * 1024 * 1024,
        ..Limits::default()
    };
    let env = env(limits);
    // 16 MB of small numbers: 8 million values, far more than 64 MiB once decoded.
    let huge = format!("[{}1]", "1,".repeat(8_000_000));
    env.set_context(huge).unwrap();
    for code in [
        "local v = json.decode(context)",
        "local ok = pcall(json.decode, context) print('swallowed')",
    ] {
        let failure = env.execute(code).unwrap_err();
        assert!(is_limit(&failure, LimitKind::Memory), "{code}: {failure:?}");
        assert_eq!(failure.output(), "", "{code}");
    }
    assert_eq!(
        output(&env, "print(json.encode(json.decode('[1]')))"),
        "[1]\n"
    );
}

#[test]
fn a_time_limit_hit_inside_a_decode_stops_it() {
    let limits = Limits {
        time: Duration::from_millis(200),
        ..Limits::default()
    };
    let env = env(limits);
    let records: Vec<String> = (0..400_000)
        .map(|i| format!("{{\"id\": {i}, \"name\": \"user {i}\", \"tags\": [\"a\", \"b\"]}}"))
        .collect();
    env.set_context(format!("[{}]", records.join(","))).unwrap();
    // One decode of 20 MB takes longer than the limit: it stops inside.
    let failure = env.execute("local v = json.decode(context)").unwrap_err();
    assert!(is_limit(&failure, LimitKind::Time), "{failure:?}");
}

#[test]
fn json_is_documented_in_help() {
    let env = env(Limits::default());
    let help = output(&env, "print(help('json.decode'))");
    assert!(help.contains("json.null"), "{help}");
    assert!(output(&env, "print(help())").contains("json.lines"));
    assert_eq!(
        output(&env, "print(help('json.null'))"),
        "--- The JSON null: what json.decode gives for null and json.encode writes as null.\njson.null (built-in value)\n"
    );
    assert_eq!(
        output(&env, "print(type(json.null), type(json.decode))"),
        "userdata\tfunction\n"
    );
}

#[test]
fn json_lines_hands_out_the_records_before_a_bad_line_then_its_error() {
    let env = env(Limits::default());
    env.set_context("{\"ok\": 1}\n\n{\"ok\": 2}\n{\"ok\" 3}\n{\"ok\": 4}\n")
        .unwrap();
    let code = "local seen = 0
        local ok, e = pcall(function() for rec in json.lines(context) do seen = seen + rec.ok end end)
        print(seen, ok, e)";
    assert_eq!(
        output(&env, code),
        "3\tfalse\tinput:2: json.lines: expected ':' at line 4, column 7\n"
    );
}

#[test]
fn json_lines_hands_out_every_record_across_batches_in_order() {
    let env = env(Limits::default());
    let text: String = (1..=1000).map(|i| format!("{{\"i\": {i}}}\n\n")).collect();
    env.set_context(text).unwrap();
    let code = "local n, sum, ordered = 0, 0, true
        for rec in json.lines(context) do n = n + 1 sum = sum + rec.i ordered = ordered and rec.i == n end
        print(n, sum, ordered)";
    assert_eq!(output(&env, code), "1000\t500500\ttrue\n");
    let two =
        "local a, b = json.lines('1\\n2'), json.lines('3\\n4') print(a(), b(), a(), b(), a(), b())";
    assert_eq!(output(&env, two), "1\t3\t2\t4\tnil\tnil\n");
}

#[test]
fn encode_takes_an_integer_valued_float_indent_and_names_a_bad_one_plainly() {
    let env = env(Limits::default());
    assert_eq!(
        output(&env, "print(json.encode({1}, {indent = 2.0}))"),
        "[\n  1\n]\n"
    );
    assert_eq!(
        caught(&env, "json.encode({}, {indent = 2.5})"),
        "json.encode: indent must be an integer from 0 to 16, got 2.5"
    );
    assert_eq!(
        caught(&env, "json.encode({}, {indent = 1e10})"),
        "json.encode: indent must be an integer from 0 to 16, got 10000000000"
    );
}

#[test]
fn a_key_that_is_neither_a_string_nor_a_position_is_named_without_inventing_neighbours() {
    let env = env(Limits::default());
    let cases = [
        (
            "{[0] = 1}",
            "the table at value has key 0: an object's keys must all be strings, an array's 1..n",
        ),
        (
            "{[-1] = 1}",
            "the table at value has key -1: an object's keys must all be strings, an array's 1..n",
        ),
        (
            "{[1.5] = 1}",
            "the table at value has key 1.5: an object's keys must all be strings, an array's 1..n",
        ),
        (
            "{a = {[true] = 1}}",
            "the table at value.a has key true: an object's keys must all be strings, an array's 1..n",
        ),
        (
            "{[print] = 1}",
            "the table at value has key a function: an object's keys must all be strings, an array's 1..n",
        ),
    ];
    for (value, expected) in cases {
        assert_eq!(
            caught(&env, &format!("json.encode({value})")),
            format!("json.encode: {expected}"),
            "{value}"
        );
    }
}

#[test]
fn a_marked_array_with_other_keys_is_an_error_not_silently_cut() {
    let env = env(Limits::default());
    let cases = [
        (
            "json.array({1, 2, a = 1})",
            "json.encode: the array at value has key \"a\": an array's keys must be 1..n",
        ),
        (
            "json.array({a = 1})",
            "json.encode: the array at value has key \"a\": an array's keys must be 1..n",
        ),
        (
            "{list = json.array({[2] = 'b', [5] = 'e'})}",
            "json.encode: the array at value.list is sparse (keys are not 1..n); fill the holes with json.null",
        ),
    ];
    for (value, expected) in cases {
        assert_eq!(
            caught(&env, &format!("json.encode({value})")),
            expected,
            "{value}"
        );
    }
    let decoded = "local v = json.decode('[1, null, 3]') print(json.encode(v))";
    assert_eq!(output(&env, decoded), "[1,null,3]\n");
}

#[test]
fn argument_errors_name_the_function_with_its_table() {
    let env = env(Limits::default());
    assert_eq!(
        caught(&env, "json.encode(1, 5)"),
        "bad argument #2 to 'json.encode' (table expected, got number)"
    );
    assert_eq!(
        caught(&env, "csv.encode({}, 'x')"),
        "bad argument #2 to 'csv.encode' (table expected, got string)"
    );
}

#[test]
fn a_byte_order_mark_before_the_text_is_skipped() {
    let env = env(Limits::default());
    let code = r#"
        print(json.decode('\239\187\191{"a": 1}').a)
        for rec in json.lines('\239\187\191[1]\n[2]\n') do print(rec[1]) end
    "#;
    assert_eq!(output(&env, code), "1\n1\n2\n");
}

#[test]
fn a_lone_surrogate_escape_is_named_as_such() {
    let env = env(Limits::default());
    for text in [
        r#""\ude00""#,
        r#""\ud83d\u0041""#,
        r#""\ud83d""#,
        r#""\ud83dx""#,
    ] {
        let message = caught(&env, &format!("json.decode([[{text}]])"));
        assert!(
            message.starts_with("json.decode: a lone surrogate in a \\u escape at line 1"),
            "{text}: {message}"
        );
    }
}

#[test]
fn an_unknown_encode_option_is_an_error_not_ignored() {
    let env = env(Limits::default());
    assert_eq!(
        caught(&env, "json.encode({}, {sort = true})"),
        "json.encode: unknown option `sort` (the options are: indent, sort_keys)"
    );
    assert_eq!(
        caught(&env, "json.encode({}, {[1] = true})"),
        "json.encode: unknown option of type number (the options are: indent, sort_keys)"
    );
}

#[test]
fn an_object_of_more_than_a_million_keys_encodes_in_key_order() {
    // Strings are values Rust holds a handle for, of which there is room for about a
    // million: most of these are read again by key when their turn comes.
    let env = env(patient(Limits::default()));
    let code = "local t = {} for i = 1, 1100000 do t['k' .. i] = 'v' end
        local text = json.encode(t)
        local back = json.decode(text)
        print(back.k1, back.k1100000, text:sub(1, 26), text:sub(-14))";
    assert_eq!(
        output(&env, code),
        "v\tv\t{\"k1\":\"v\",\"k10\":\"v\",\"k100\"\t\"k999999\":\"v\"}\n"
    );
}

#[test]
fn json_lines_cut_short_says_a_document_over_several_lines_is_for_json_decode() {
    let env = env(Limits::default());
    assert_eq!(
        caught(&env, "for rec in json.lines('{\\n\"a\": 1\\n}') do end"),
        "json.lines: unexpected end of input (while parsing an object) at line 1, column 1 (json.lines reads one whole value per line; json.decode reads one document)"
    );
}
