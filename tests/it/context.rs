//! Work over large contexts: the `re` built-in (semantics, flags, offsets, errors, the
//! read-only table) and the Rust text primitives behind the Lua library (regex options,
//! and the limits they check while they run).

use crate::support;

use rlm_registry::environment::{Environment, ExecError, LimitKind, Limits};
use std::time::Duration;
use support::sandbox::{env, is_limit, output, patient};

fn error(env: &Environment, code: &str) -> ExecError {
    env.execute(code)
        .expect_err(&format!("{code}\nshould fail"))
}

#[test]
fn re_find_gives_byte_offsets_that_agree_with_string_sub() {
    let env = env(Limits::default());
    let out = output(
        &env,
        r#"
        local text = "café: id=42; id=7"
        local s, e, digits = re.find(text, [[id=(\d+)]])
        print(s, e, digits, text:sub(s, e))
        print(re.find(text, [[id=(\d+)]], e + 1))
        print(re.find(text, [[id=(\d+)]], -4))
        print(re.find(text, "nope"))
        print(re.find(text, "(x)?id"))
        "#,
    );
    assert_eq!(
        out,
        "8\t12\t42\tid=42\n15\t18\t7\n15\t18\t7\nnil\n8\t9\tnil\n"
    );
}

#[test]
fn re_match_and_gmatch_give_groups_or_the_whole_match() {
    let env = env(Limits::default());
    let out = output(
        &env,
        r#"
        print(re.match("key = value", [[(\w+)\s*=\s*(\w+)]]))
        print(re.match("abc 123", [[\d+]]))
        print(re.match("abc", [[^b]]))
        for k, v in re.gmatch("a=1, b=22", [[(\w)=(\d+)]]) do io_line = (io_line or "") .. k .. v .. ";" end
        print(io_line)
        local empties = {}
        for m in re.gmatch("ab", "x*") do empties[#empties + 1] = "[" .. m .. "]" end
        print(table.concat(empties))
        for letter, digit in re.gmatch("a1b", [[([a-z])(\d)?]]) do print(letter, digit) end
        -- After a match, an empty match where it ended is skipped, as string.gmatch does.
        local spans = {}
        for m in re.gmatch("ab", [[a|]]) do spans[#spans + 1] = "[" .. m .. "]" end
        print(table.concat(spans))
        "#,
    );
    assert_eq!(
        out,
        "key\tvalue\n123\nnil\na1;b22;\n[][][]\na\t1\nb\tnil\n[a][]\n"
    );
}

#[test]
fn re_find_all_count_split_follow_python() {
    let env = env(Limits::default());
    let out = output(
        &env,
        r#"
        local t = re.find_all("a1 b22 c333", [[\d+]])
        print(#t, t[1], t[3])
        local g = re.find_all("a1 b22", [[([a-z])(\d+)]])
        print(#g, g[2][1], g[2][2])
        local one = re.find_all("a1 b22", [[[a-z](\d+)]])
        print(one[1], one[2])
        print(re.count("Error error ERROR", "error"), re.count("Error error ERROR", "error", "i"))
        local parts = re.split("a, b,c ,  d", [[\s*,\s*]])
        print(#parts, table.concat(parts, "|"))
        print(table.concat(re.split("a,b,c", ",", 1), "|"))
        "#,
    );
    assert_eq!(out, "3\t1\t333\n2\tb\t22\n1\t22\n1\t3\n4\ta|b|c|d\na|b,c\n");
}

#[test]
fn re_gsub_expands_groups_and_calls_functions() {
    let env = env(Limits::default());
    let out = output(
        &env,
        r#"
        print(re.gsub("2024-05-17", [[(\d+)-(\d+)-(\d+)]], "$3/$2/$1"))
        print(re.gsub("John Smith", [[(?P<first>\w+) (?P<last>\w+)]], "${last}, ${first}"))
        print(re.gsub("a b c", [[\w]], string.upper))
        print(re.gsub("a b c", [[\w]], { a = "A" }))
        print(re.replace("x x x", "x", "y", 2))
        print(re.gsub("cost $5", [[\$(\d)]], "$$$1"))
        print(re.gsub("abc", "z", "y"))
        "#,
    );
    assert_eq!(
        out,
        "17/05/2024\t1\nSmith, John\t1\nA B C\t3\nA b c\t3\ny y x\t2\ncost $5\t1\nabc\t0\n"
    );
}

#[test]
fn re_flags_change_case_lines_and_dots() {
    let env = env(Limits::default());
    let out = output(
        &env,
        r#"
        local text = "Alpha\nbeta\nGAMMA"
        print(re.count(text, "^[a-z]+$"), re.count(text, "^[a-z]+$", "m"), re.count(text, "^[a-z]+$", "mi"))
        print(re.count(text, "a.b"), re.count(text, "a.b", "s"))
        print(re.count(text, "(?i)gamma"))
        "#,
    );
    assert_eq!(out, "0\t1\t3\n0\t1\n1\n");
}

#[test]
fn bad_patterns_and_flags_are_clear_errors() {
    let env = env(Limits::default());
    let message = error(&env, r#"re.find("abc", "a(b")"#)
        .message()
        .to_string();
    assert!(
        message.contains("re.find")
            && message.contains("unclosed group")
            && message.contains("at character 2"),
        "{message}"
    );
    let message = error(&env, r#"re.count("abc", "[z-a]")"#)
        .message()
        .to_string();
    assert!(
        message.contains("re.count") && message.contains("bad pattern"),
        "{message}"
    );
    let message = error(&env, r#"re.find("abc", "a", 1, "q")"#)
        .message()
        .to_string();
    assert!(message.contains("unknown flag 'q'"), "{message}");
    let message = error(&env, r#"re.find("abc", [[\w{1000}{1000}]])"#)
        .message()
        .to_string();
    assert!(
        message.contains("too large") || message.contains("exceeds"),
        "{message}"
    );
    let message = error(&env, r#"re.gsub("abc", "b", true)"#)
        .message()
        .to_string();
    assert!(message.contains("string, function or table"), "{message}");
    // The environment keeps working after each of them.
    assert_eq!(output(&env, r#"print(re.find("abc", "b"))"#), "2\t2\n");
}

#[test]
fn re_is_a_read_only_builtin() {
    let env = env(Limits::default());
    assert!(
        error(&env, "re = {}")
            .message()
            .contains("cannot assign to built-in 're'")
    );
    assert!(
        error(&env, "re.find = print")
            .message()
            .contains("cannot assign to built-in 're.find'")
    );
    assert_eq!(output(&env, "print(getmetatable(re))"), "false\n");
    assert_eq!(output(&env, r#"print(re.find("ab", "b"))"#), "2\t2\n");
}

#[test]
fn grep_and_find_all_accept_regular_expressions() {
    let env = env(Limits::default());
    env.set_context("ok 1\nERROR disk\nok 2\nWARN cpu\nerror net\n")
        .unwrap();
    let out = output(
        &env,
        r#"
        local m = grep(context, [[^(?i)error]], 1, "regex")
        print(#m, m[1].line, m[1].before[1], m[1].after[1], m[2].line, m[2].text)
        print(grep_text(context, [[^WARN|^ok 1$]], 0, "regex"))
        print(table.concat(find_all(context, [[\d]], true), ","))
        print(table.concat(find_all(context, "ok"), ","))
        "#,
    );
    assert_eq!(
        out,
        "2\t2\tok 1\tok 2\t5\terror net\n1: ok 1\n--\n4: WARN cpu\n4,20\n1,17\n"
    );
}

/// A context big enough that a primitive on it runs far past a 1 ms limit in a debug build.
fn big_context(env: &Environment) {
    env.set_context("word another\n".repeat(2_000_000)).unwrap();
}

#[test]
fn a_time_limit_stops_a_primitive_inside_its_scan() {
    let limits = Limits {
        time: Duration::from_millis(1),
        ..Limits::default()
    };
    let env = env(limits);
    big_context(&env);
    for call in [
        "word_count(context)",
        "lines(context)",
        "chunk_by_lines(context, 10)",
        "grep(context, 'x', 0, true)",
        "re.count(context, [[\\w+]])",
    ] {
        // Were the limit checked only after the call, "after" would be printed first.
        let failure = error(&env, &format!("{call} print('after')"));
        assert!(is_limit(&failure, LimitKind::Time), "{call}: {failure:?}");
        assert_eq!(
            failure.output(),
            "",
            "{call} ran to the end before stopping"
        );
    }
}

#[test]
fn result_tables_of_primitives_count_against_the_memory_limit() {
    let limits = Limits {
        memory_bytes: 48 * 1024 * 1024,
        ..Limits::default()
    };
    let env = env(limits);
    let numbered: String = (0..1_000_000).map(|i| format!("line {i}\n")).collect();
    env.set_context(numbered).unwrap();
    assert_eq!(output(&env, "print(line_count(context))"), "1000000\n");
    for call in ["lines(context)", "re.find_all(context, [[\\d+]])"] {
        let failure = error(&env, &format!("t = {call}"));
        assert!(is_limit(&failure, LimitKind::Memory), "{call}: {failure:?}");
    }
    assert_eq!(output(&env, "print(#head(context, 2))"), "13\n");
}

/// A key function of the collection primitives that runs out of memory or time stops the
/// execution, also when the call is inside `pcall`.
#[cfg(feature = "collections")]
#[test]
fn a_limit_hit_in_a_key_function_stops_the_execution_under_pcall() {
    let limits = Limits {
        memory_bytes: 16 * 1024 * 1024,
        time: Duration::from_secs(1),
        ..Limits::default()
    };
    let env = env(limits);
    for name in ["sort_by", "count_by", "group_by"] {
        let hog = "function(x) local t = {} while true do t[#t + 1] = {} end end";
        let failure = error(&env, &format!("print(pcall({name}, {{3, 1, 2}}, {hog}))"));
        assert!(is_limit(&failure, LimitKind::Memory), "{name}: {failure:?}");
        let spin = "function(x) while true do end end";
        let failure = error(&env, &format!("print(pcall({name}, {{3, 1, 2}}, {spin}))"));
        assert!(is_limit(&failure, LimitKind::Time), "{name}: {failure:?}");
    }
}

/// `sort_by` copies list keys out of Lua to sort them: the copies count against the memory
/// limit as they are made, so a list shared many times over cannot take memory past it.
#[cfg(feature = "collections")]
#[test]
fn sort_by_counts_the_copies_of_shared_list_keys_against_the_memory_limit() {
    let limits = Limits {
        memory_bytes: 32 * 1024 * 1024,
        ..Limits::default()
    };
    let env = env(limits);
    // Each key is a million numbers to copy (24 MB), from 2000 slots of Lua memory.
    let failure = error(
        &env,
        "local l0 = {} for i = 1, 1000 do l0[i] = i end \
         local l1 = {} for i = 1, 1000 do l1[i] = l0 end \
         local xs = {} for i = 1, 20 do xs[i] = i end \
         print(pcall(sort_by, xs, function() return l1 end))",
    );
    assert!(is_limit(&failure, LimitKind::Memory), "{failure:?}");
}

/// A sort of many long list keys stops at the time limit, not when it is done: done, it
/// would take hours, so a sort that stopped checking the limit hangs, and fails here.
#[cfg(feature = "collections")]
#[test]
fn sort_by_stops_at_the_time_limit_while_comparing_long_keys() {
    let failure = support::hang::finishes("sort_by under a time limit", || {
        let env = env(Limits {
            time: Duration::from_secs(1),
            ..Limits::default()
        });
        // Every comparison walks a shared prefix of a million numbers first (built by
        // doubling, in C, so that making it takes a moment of the second).
        output(
            &env,
            "prefix = {1} while #prefix < 1000000 do table.move(prefix, 1, #prefix, #prefix + 1) end \
             xs = {} for i = 1, 10000 do xs[i] = {k = {prefix, (i * 7919) % 10007}} end",
        );
        error(&env, "print(pcall(sort_by, xs, 'k'))")
    });
    assert!(is_limit(&failure, LimitKind::Time), "{failure:?}");
}

/// The collection primitives (`count`, `count_by`, `group_by`, `sort_by`, `most_common`):
/// the memory limit holds while they build their result, a time limit stops a key
/// function that never returns, and a key function's error reaches the caller.
#[cfg(feature = "collections")]
#[test]
fn collection_primitives_check_the_limits_and_pass_key_errors_on() {
    // Time is generous here, so that the real work never runs into it on a loaded
    // machine; the runaway key function below gets an environment with a short limit.
    let limits = Limits {
        memory_bytes: 48 * 1024 * 1024,
        time: support::hang::HANG_BOUND,
        ..Limits::default()
    };
    let env = env(limits);
    output(
        &env,
        "xs = {} for i = 1, 200000 do xs[i] = {n = i % 1000, s = 'item ' .. i} end",
    );
    assert_eq!(
        output(
            &env,
            "print(sort_by(xs, 'n', true)[1].n, count_by(xs, 'n')[7], #group_by(xs, 'n')[7])"
        ),
        "999\t200\t200\n"
    );
    let failure = error(
        &env,
        "keep = {} for i = 1, 100 do keep[i] = sort_by(xs, function(x) return {x.s, x.n} end) end",
    );
    assert!(is_limit(&failure, LimitKind::Memory), "{failure:?}");
    output(&env, "keep = nil");
    let runaway = support::hang::finishes("a sort with an endless key", || {
        let env = self::env(Limits {
            time: Duration::from_millis(300),
            ..Limits::default()
        });
        error(
            &env,
            "sort_by({{n = 1}, {n = 2}}, function(x) while true do end end)",
        )
    });
    assert!(is_limit(&runaway, LimitKind::Time), "{runaway:?}");
    for call in [
        "sort_by(xs, function(x) error('bad key ' .. x.n) end)",
        "count_by(xs, function(x) error('bad key ' .. x.n) end)",
        "group_by(xs, function(x) error('bad key ' .. x.n) end)",
    ] {
        let failure = error(&env, call);
        assert!(
            failure.message().contains("bad key 1"),
            "{call}: {failure:?}"
        );
    }
    assert_eq!(
        output(&env, "print(most_common(count_by(xs, 'n'), 1)[1][2])"),
        "200\n"
    );
}

/// The Rust builders pause the collector while they build, and what they allocated
/// meanwhile is charged to it afterwards: called again and again, their garbage is
/// collected as plain Lua's would be, instead of piling up to the memory limit.
#[test]
fn garbage_of_repeated_native_builders_is_collected() {
    let env = env(patient(Limits {
        memory_bytes: 4 << 30,
        ..Limits::default()
    }));
    let lines: String = (0..100_000)
        .map(|i| format!("2024-05-01 INFO request {i} handled path=/api/v1\n"))
        .collect();
    env.set_context(lines).unwrap();
    let heap = |code: &str| -> f64 {
        let printed = output(&env, &format!("{code}\nprint(collectgarbage('count'))"));
        printed.trim().parse().unwrap()
    };
    let base = heap("");
    let once = heap("local r = grep(context, 'path=/api/', 0, true) r = lines(context)") - base;
    let after = heap(
        "for i = 1, 30 do local r = grep(context, 'path=/api/', 0, true) r = lines(context) end",
    ) - base;
    // Without the charge, thirty calls leave about thirty results' worth of garbage.
    assert!(
        after < 6.0 * once,
        "one call: {once} KiB, thirty: {after} KiB"
    );
}

/// Beside a large live heap, small results of the Rust builders are charged to the
/// collector once their garbage could be half the heap, as Lua paces its own cycles (a
/// cycle per call would walk the whole heap each time); their garbage still stays bounded.
#[test]
fn garbage_of_small_native_results_beside_a_large_heap_stays_bounded() {
    let env = env(Limits {
        memory_bytes: 4 << 30,
        ..Limits::default()
    });
    let heap = |code: &str| -> f64 {
        let printed = output(&env, &format!("{code}\nprint(collectgarbage('count'))"));
        printed.trim().parse().unwrap()
    };
    let live = heap("held = {} for i = 1, 200000 do held[i] = {n = i, s = 'v' .. i} end");
    let words = "words = {} for i = 1, 2000 do words[i] = 'w' .. i end";
    let after = heap(&format!(
        "{words}\nfor i = 1, 3000 do local r = count(words) end"
    ));
    // 3,000 counts of 2,000 words allocate several times the live heap in all.
    assert!(
        after < 2.0 * live,
        "live heap: {live} KiB, after 3,000 counts: {after} KiB"
    );
}

/// Limits of 1 MiB, the code's allocations well under it.
fn one_mib() -> Limits {
    Limits {
        memory_bytes: 1024 * 1024,
        ..Limits::default()
    }
}

#[test]
fn a_context_larger_than_the_memory_limit_loads_and_the_code_stays_limited() {
    let env = env(one_mib());
    env.set_context(vec![b'x'; 8 * 1024 * 1024]).unwrap();
    assert_eq!(
        output(&env, "print(#context, context:sub(-2))"),
        "8388608\txx\n"
    );
    assert_eq!(
        output(
            &env,
            "local t = {} for i = 1, 1000 do t[i] = i end print(#t)"
        ),
        "1000\n"
    );
    let error = error(&env, "local copy = context:upper() print(#copy)");
    assert!(is_limit(&error, LimitKind::Memory), "{error:?}");
    assert!(
        error.message().contains("besides the context")
            && error.message().contains("--memory-limit"),
        "the message says what counts and which setting raises it: {}",
        error.message()
    );
}

#[test]
fn a_replaced_context_leaves_no_allowance_behind() {
    let env = env(one_mib());
    env.set_context(vec![b'x'; 8 * 1024 * 1024]).unwrap();
    env.set_context("small").unwrap();
    // The big context's room went with it: 4 MiB of the code's own is refused.
    let error = error(&env, "local s = string.rep('y', 4 * 1024 * 1024) print(#s)");
    assert!(is_limit(&error, LimitKind::Memory), "{error:?}");
    assert_eq!(output(&env, "print(context)"), "small\n");
}

#[test]
fn chunks_and_documents_larger_than_the_memory_limit_load_too() {
    let env = env(one_mib());
    let chunk = vec![b'c'; 1024 * 1024];
    env.set_context_list([&chunk, &chunk, &chunk]).unwrap();
    assert_eq!(output(&env, "print(#context, #context[3])"), "3\t1048576\n");
    let fields = |name: &str| {
        serde_json::json!({ "name": name, "kind": "text" })
            .as_object()
            .cloned()
            .unwrap()
    };
    env.set_context_documents([(fields("a"), &chunk[..]), (fields("b"), &chunk[..])])
        .unwrap();
    assert_eq!(
        output(&env, "print(#context, context[2].name, #context[2].text)"),
        "2\tb\t1048576\n"
    );
}

#[test]
fn a_context_written_in_place_is_the_bytes_given_and_outside_the_limit() {
    use std::io::Read;
    let env = env(one_mib());
    let text: Vec<u8> = (0..6 * 1024 * 1024)
        .map(|i| b"abcdefghij\n"[i % 11])
        .collect();
    env.set_context_with(text.len(), |bytes| text.as_slice().read_exact(bytes))
        .unwrap();
    assert_eq!(
        output(&env, "print(#context, context:sub(1, 12), context:sub(-3))"),
        "6291456\tabcdefghij\na\tdef\n"
    );
    assert_eq!(output(&env, "print(line_count(context))"), "571951\n");
    // Long strings are not interned: another string of the same bytes is its own.
    assert_eq!(output(&env, "print(('x'):rep(3) == 'xxx')"), "true\n");
    let error = error(&env, "local copy = context:upper()");
    assert!(is_limit(&error, LimitKind::Memory), "{error:?}");
}

#[test]
fn a_failed_in_place_read_is_an_error_and_leaves_no_context() {
    let env = env(Limits::default());
    let failed = env.set_context_with(1024 * 1024, |_| {
        Err(std::io::Error::other("the disk went away"))
    });
    let message = failed.unwrap_err().message().to_string();
    assert!(
        message.contains("cannot read the context: the disk went away"),
        "{message}"
    );
    assert_eq!(output(&env, "print(context)"), "nil\n");
    let small = env.set_context_with(10, |_| Err(std::io::Error::other("short")));
    assert!(small.is_err());
    assert_eq!(output(&env, "print(1 + 1)"), "2\n");
}
