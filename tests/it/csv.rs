//! The `csv` built-in, called from the sandbox as a model calls it: RFC 4180 quoting,
//! embedded newlines, ragged rows, custom separators, the iterator, encoding and its
//! round trip, errors, and the memory limit inside a parse.

use crate::support;

use rlm_registry::environment::{ExecError, LimitKind, Limits};
use support::sandbox::{caught, env, is_limit, output, patient};

/// Prints every row of `rows` as `key=value` pairs in `header` order, then extra keys.
const SHOW: &str = r#"
    local function show(rows, header)
      for i, row in ipairs(rows) do
        local parts = {}
        for _, name in ipairs(header) do parts[#parts + 1] = name .. '=' .. tostring(row[name]) end
        for k, v in pairs(row) do
          if type(k) == 'number' then parts[#parts + 1] = '[' .. k .. ']=' .. v end
        end
        print(i, table.concat(parts, ' | '))
      end
    end
"#;

#[test]
fn quoted_fields_hold_separators_quotes_and_newlines() {
    let env = env(Limits::default());
    env.set_context(
        "name,note\r\nAda,\"likes \"\"maths\"\", logic\"\r\n\"Bob\nSmith\",\"two\nlines\"\r\n",
    )
    .unwrap();
    let code = format!(
        "{SHOW} local rows, header = csv.parse(context) print(#rows, #header) show(rows, header)"
    );
    assert_eq!(
        output(&env, &code),
        "2\t2\n1\tname=Ada | note=likes \"maths\", logic\n2\tname=Bob\nSmith | note=two\nlines\n"
    );
}

#[test]
fn ragged_rows_lack_missing_fields_and_keep_extra_ones_by_column_number() {
    let env = env(Limits::default());
    env.set_context("a,b,c\n1,2,3\n4\n5,6,7,8,9\n,,\n").unwrap();
    let code = format!("{SHOW} local rows, header = csv.parse(context) show(rows, header)");
    let shown = output(&env, &code);
    let lines: Vec<&str> = shown.lines().collect();
    assert_eq!(lines[0], "1\ta=1 | b=2 | c=3");
    assert_eq!(lines[1], "2\ta=4 | b=nil | c=nil");
    assert!(
        lines[2].starts_with("3\ta=5 | b=6 | c=7 | ")
            && lines[2].contains("[4]=8")
            && lines[2].contains("[5]=9"),
        "{shown}"
    );
    assert_eq!(lines[3], "4\ta= | b= | c=");
    let arrays = "local rows = csv.parse(context, {header = false}) for i, r in ipairs(rows) do print(i, #r, table.concat(r, '/')) end";
    assert_eq!(
        output(&env, arrays),
        "1\t3\ta/b/c\n2\t3\t1/2/3\n3\t1\t4\n4\t5\t5/6/7/8/9\n5\t3\t//\n"
    );
}

#[test]
fn a_custom_separator_and_blank_lines() {
    let env = env(Limits::default());
    let code = r#"
        local rows = csv.parse('x;y\n1;"2;3"\n\n4;5\n', {sep = ';'})
        print(#rows, rows[1].y, rows[2].x)
        local tsv = csv.parse('a\tb\nc d\te\n', {sep = '\t', header = false})
        print(tsv[2][1], tsv[2][2])
        print(select('#', csv.parse('a,b\n', {header = false})), (select(2, csv.parse('a\n', {header = false}))))
        print(#csv.parse(''), #csv.parse('only,header\n'))
    "#;
    assert_eq!(output(&env, code), "2\t2;3\t4\nc d\te\n2\tnil\n0\t0\n");
}

#[test]
fn rows_iterates_as_parse_gives_them() {
    let env = env(Limits::default());
    env.set_context("id,name\n1,\"A, B\"\n2,C\n3\n").unwrap();
    let code = r#"
        local parsed = csv.parse(context)
        local n = 0
        for row in csv.rows(context) do
          n = n + 1
          assert(row.id == parsed[n].id and row.name == parsed[n].name, n)
          print(row.id, row.name)
        end
        print(n)
        for row in csv.rows(context, {header = false}) do io_rows = (io_rows or 0) + #row end
        print(io_rows)
    "#;
    assert_eq!(output(&env, code), "1\tA, B\n2\tC\n3\tnil\n3\n7\n");
}

#[test]
fn encode_quotes_as_rfc_4180_requires_and_round_trips() {
    let env = env(Limits::default());
    let text = "id,name,note\n1,Ada,\"likes \"\"maths\"\", logic\"\n2,\"Bob\nSmith\",\n3,plain,x\n";
    env.set_context(text).unwrap();
    assert_eq!(
        output(
            &env,
            "local rows, header = csv.parse(context) print(csv.encode(rows, {columns = header}) == context)"
        ),
        "true\n"
    );
    let code = r#"
        print(csv.encode({{b = 'x', a = 1}, {a = 2.5, c = true}}))
        print(csv.encode({{b = 'x', a = 1}}, {header = false, columns = {'b', 'a'}}))
        print(csv.encode({{'a;b', 'c'}, {1, json.null, 'q"'}}, {sep = ';'}))
        local rows = csv.parse(csv.encode({{'x,y', 'line\nbreak', ' lead'}}), {header = false})
        print(rows[1][1], rows[1][2], rows[1][3])
        print(csv.encode({}) == '')
    "#;
    assert_eq!(
        output(&env, code),
        "a,b,c\n1,x,\n2.5,,true\n\nx,1\n\n\"a;b\";c\n1;;\"q\"\"\"\n\nx,y\tline\nbreak\t lead\ntrue\n"
    );
}

#[test]
fn errors_say_what_is_wrong_and_where() {
    let env = env(Limits::default());
    let cases = [
        (
            "csv.parse('a,b,a\\n1,2,3\\n')",
            "csv.parse: the header names column \"a\" twice (the second time in column 3); pass {header = false} to read rows as arrays",
        ),
        (
            "csv.parse('a\\n', {sep = ';;'})",
            "csv.parse: sep must be one character, like \",\" or \"\\t\", got \";;\"",
        ),
        (
            "csv.parse('a\\n', {header = 'yes'})",
            "csv.parse: header must be true or false, got a string",
        ),
        (
            "for r in csv.rows('a,a\\n') do end",
            "csv.rows: the header names column \"a\" twice (the second time in column 2); pass {header = false} to read rows as arrays",
        ),
        (
            "csv.encode({{a = {}}})",
            "csv.encode: row 1, column \"a\" is a table; a field must be a string, number or boolean",
        ),
        (
            "csv.encode({{1, 2}, {3, print}})",
            "csv.encode: row 2, field 2 is a function; a field must be a string, number or boolean",
        ),
        (
            "csv.encode({1})",
            "csv.encode: row 1 must be a table, got integer",
        ),
        (
            "csv.encode('a,b')",
            "csv.encode: rows must be a table of rows, got string",
        ),
        (
            "csv.parse(nil)",
            "csv.parse: the text must be a string, got nil",
        ),
    ];
    for (code, expected) in cases {
        let message = caught(&env, code);
        assert!(message.ends_with(expected), "{code}: {message}");
    }
}

#[test]
fn a_memory_limit_hit_inside_a_huge_parse_is_a_limit_error_not_a_crash() {
    let limits = Limits {
        memory_bytes: 64 * 1024 * 1024,
        ..Limits::default()
    };
    let env = env(limits);
    let mut text = String::from("a,b,c,d\n");
    while text.len() < 16 << 20 {
        text.push_str("1,2,3,4\n");
    }
    env.set_context(text).unwrap();
    for code in [
        "local rows = csv.parse(context)",
        "local ok = pcall(csv.parse, context, {header = false}) print('swallowed')",
    ] {
        let failure = env.execute(code).unwrap_err();
        assert!(is_limit(&failure, LimitKind::Memory), "{code}: {failure:?}");
    }
    assert_eq!(output(&env, "print(#csv.parse('a\\n1\\n'))"), "1\n");
}

/// The limit error `code` ends with, failing the test if it ends otherwise.
fn limit_hit(env: &rlm_registry::environment::Environment, code: &str) -> LimitKind {
    match env.execute(code) {
        Err(ExecError::Limit { kind, .. }) => kind,
        other => panic!("`{code}`: {other:?}"),
    }
}

#[test]
fn a_record_of_millions_of_fields_counts_against_the_memory_limit() {
    let limits = Limits {
        memory_bytes: 64 * 1024 * 1024,
        ..Limits::default()
    };
    let env = env(limits);
    // 12 MB of text, one line of 6 million fields: the record alone (each field's end
    // kept as a machine word) is larger than the whole limit, before any table is made.
    env.set_context("a,".repeat(6_000_000)).unwrap();
    for code in [
        "local rows = csv.parse(context)",
        "local ok = pcall(csv.parse, context) print('swallowed')",
        "local ok = pcall(function() for row in csv.rows(context) do end end) print('swallowed')",
    ] {
        assert_eq!(limit_hit(&env, code), LimitKind::Memory, "{code}");
    }
    assert_eq!(output(&env, "print(#csv.parse('a\\n1\\n'))"), "1\n");
}

#[test]
fn a_time_limit_hit_inside_one_huge_header_stops_it() {
    let limits = Limits {
        time: std::time::Duration::from_millis(200),
        ..Limits::default()
    };
    let env = env(limits);
    let names: Vec<String> = (0..2_000_000).map(|i| format!("column{i}")).collect();
    env.set_context(names.join(",")).unwrap();
    for code in [
        "local rows = csv.parse(context)",
        "for row in csv.rows(context) do end",
    ] {
        let started = std::time::Instant::now();
        assert_eq!(limit_hit(&env, code), LimitKind::Time, "{code}");
        let took = started.elapsed();
        assert!(took < std::time::Duration::from_secs(2), "{code}: {took:?}");
    }
}

#[test]
fn sep_cannot_be_a_quote_or_a_line_break() {
    let env = env(Limits::default());
    for sep in ["'\"'", "'\\n'", "'\\r'"] {
        for call in [
            format!("csv.parse('a,b\\n', {{sep = {sep}}})"),
            format!("csv.rows('a,b\\n', {{sep = {sep}}})"),
            format!("csv.encode({{{{'a', 'b'}}}}, {{sep = {sep}}})"),
        ] {
            let message = caught(&env, &call);
            assert!(
                message.contains("sep cannot be a quote or a line break"),
                "{call}: {message}"
            );
        }
    }
}

#[test]
fn option_errors_name_the_type_with_its_article() {
    let env = env(Limits::default());
    assert!(
        caught(&env, "csv.parse('a', {sep = 5})").ends_with("got a number"),
        "sep"
    );
    assert!(
        caught(&env, "csv.parse('a', {header = 1})").ends_with("got a number"),
        "header"
    );
}

#[test]
fn encode_refuses_rows_mixing_arrays_and_keyed_tables_instead_of_dropping_fields() {
    let env = env(Limits::default());
    let cases = [
        (
            "csv.encode({{a = 1}, {1, 2}})",
            "csv.encode: row 2 is an array of fields, but row 1 is keyed by column name",
        ),
        (
            "csv.encode({{1, 2}, {a = 1}})",
            "csv.encode: row 2 is keyed by column name, but row 1 is an array of fields",
        ),
        (
            "csv.encode({{1, 2}}, {columns = {'a', 'b'}})",
            "csv.encode: row 1 is an array of fields, but columns picks fields by name",
        ),
        (
            "csv.encode({{a = 1, [1] = 'x'}})",
            "csv.encode: row 1 mixes column names and positions (keys \"a\" and 1)",
        ),
        (
            "csv.encode({{1, 2, x = 3}})",
            "csv.encode: row 1 mixes column names and positions (keys \"x\" and 1)",
        ),
        (
            "csv.encode({{[true] = 1}})",
            "csv.encode: row 1 has key true: a row's keys are column names (strings) or positions 1..n",
        ),
        (
            "csv.encode({[1] = {'a'}, [3] = {'c'}})",
            "csv.encode: rows must be an array (keys 1..n), but it has key 3",
        ),
        (
            "csv.encode({{'a'}, n = 1})",
            "csv.encode: rows must be an array (keys 1..n), but it has key \"n\"",
        ),
    ];
    for (code, expected) in cases {
        let message = caught(&env, code);
        assert!(message.ends_with(expected), "{code}: {message}");
    }
}

#[test]
fn encode_writes_a_hole_in_an_array_row_as_an_empty_field() {
    let env = env(Limits::default());
    let code = "local row = {} row[1] = 'a' row[4] = 'd' print(csv.encode({row, {}, {'x'}}))";
    assert_eq!(output(&env, code), "a,,,d\n\"\"\nx\n\n");
}

#[test]
fn an_unknown_option_is_an_error_not_ignored() {
    let env = env(Limits::default());
    let cases = [
        (
            "csv.parse('a\\tb\\n', {delimiter = '\\t'})",
            "csv.parse: unknown option `delimiter` (the options are: sep, header)",
        ),
        (
            "csv.rows('a\\n', {headers = false})",
            "csv.rows: unknown option `headers` (the options are: sep, header)",
        ),
        (
            "csv.encode({{1}}, {fieldnames = {'a'}})",
            "csv.encode: unknown option `fieldnames` (the options are: sep, header, columns)",
        ),
    ];
    for (code, expected) in cases {
        let message = caught(&env, code);
        assert!(message.ends_with(expected), "{code}: {message}");
    }
}

#[test]
fn encode_writes_more_than_a_million_rows_and_refuses_that_many_columns_plainly() {
    let env = env(patient(Limits::default()));
    let rows = "local rows = {} for i = 1, 1100000 do rows[i] = {i} end
        local text = csv.encode(rows) print(#text, text:sub(-8))";
    assert_eq!(output(&env, rows), "7688896\t1100000\n\n");
    let keyed = "local row = {} for i = 1, 1100000 do row['c' .. i] = 'x' end csv.encode({row})";
    assert_eq!(
        caught(&env, keyed),
        "input:1: csv.encode: 1100000 columns; it writes at most 500000"
    );
}
