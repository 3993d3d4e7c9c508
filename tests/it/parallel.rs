//! `parallel` and `parallel_map`: plain functions as coroutines, their sub-calls sent
//! together, against the scripted server (which counts what it receives and how many
//! requests it had in flight at once).

use crate::support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use rlm_registry::Registry;
use rlm_registry::environment::{Environment, ExecError, LimitKind, Limits};
use rlm_registry::llm::DEFAULT_REPLY_RESERVE;
use rlm_registry::tokens;
use support::openai_server::{Behavior, OpenAiServer};
use support::rlm_loop::{client, lua, rlm};

fn env(server: &OpenAiServer, limits: Limits) -> Environment {
    Environment::builder(Registry::baked().clone())
        .limits(limits)
        .llm(Arc::new(client(server)))
        .build()
        .unwrap()
}

fn output(env: &Environment, code: &str) -> String {
    env.execute(code)
        .unwrap_or_else(|e| panic!("`{code}`: {e}"))
        .output
}

#[test]
fn results_come_in_order_and_the_calls_go_out_together() {
    let server = OpenAiServer::always(Behavior::echo(Duration::from_millis(150)));
    let env = env(&server, Limits::default());
    let out = output(
        &env,
        "local r, e = parallel_map({'a', 'b', 'c', 'd'}, function(x, i) return i .. '=' .. llm_query(x) end)\n\
         print(table.concat(r, ' | '), next(e))\n\
         local p = parallel(function() return llm_query('one') end, function() return llm_query('two') end)\n\
         print(p[1], p[2])",
    );
    assert_eq!(
        out,
        "1=echo: a | 2=echo: b | 3=echo: c | 4=echo: d\tnil\necho: one\techo: two\n"
    );
    assert_eq!(server.request_count(), 6);
    assert_eq!(
        server.max_in_flight(),
        4,
        "the four calls of a round at once"
    );
}

#[test]
fn code_between_calls_needs_no_change() {
    // Each function asks, reads the answer and asks again on it: two rounds in all.
    let server = OpenAiServer::always(Behavior::echo(Duration::from_millis(100)));
    let env = env(&server, Limits::default());
    let started = Instant::now();
    let out = output(
        &env,
        "local r = parallel_map({'a', 'b', 'c'}, function(x)\n\
           local first = llm_query(x)\n\
           local again = llm_query_batched({first:upper(), 'more'})\n\
           return again[1] .. '/' .. again[2]\n\
         end)\n\
         print(r[1]); print(r[3])",
    );
    assert_eq!(out, "echo: ECHO: A/echo: more\necho: ECHO: C/echo: more\n");
    assert_eq!(server.request_count(), 9);
    assert_eq!(
        server.max_in_flight(),
        6,
        "the second round's six requests at once"
    );
    assert!(
        started.elapsed() < Duration::from_millis(900),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn a_failed_entry_is_nil_with_its_message_and_the_others_go_on() {
    // The one request, entry 4's, fails.
    let server = OpenAiServer::start(
        vec![Behavior::status(400)],
        Behavior::echo(Duration::from_millis(20)),
    );
    let env = env(&server, Limits::default());
    let out = output(
        &env,
        "local r, e = parallel_map({1, 2, 3, 4, 5}, function(x)\n\
           if x == 2 then error('two is bad') end\n\
           if x == 4 then local answer = llm_query('x') return answer end\n\
           return x * 10\n\
         end)\n\
         print(r[1], r[2], r[3], r[4], r[5])\n\
         print(e[1], e[2], e[3], e[5])\n\
         print(e[4])",
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "10\tnil\t30\tnil\t50");
    assert_eq!(lines[1], "nil\tinput:2: two is bad\tnil\tnil");
    assert!(lines[2].starts_with("input:3: llm_query failed"), "{out}");
    assert_eq!(server.request_count(), 1);
}

#[test]
fn a_function_that_never_calls_the_model_runs_without_one() {
    let env = Environment::new(Registry::baked().clone(), Limits::default()).unwrap();
    let out = output(
        &env,
        "local r, e = parallel(function() return 1 end, function() local t = {} for i = 1, 3 do t[i] = i * i end return table.concat(t, ',') end)\n\
         print(r[1], r[2], next(e))\n\
         local m = parallel_map({}, function() end)\n\
         print(next(m))\n\
         local ok, err = pcall(parallel_map, {'x'}, function() return llm_query('x') end)\n\
         print(ok)",
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "1\t1,4,9\tnil");
    assert_eq!(lines[1], "nil");
    assert_eq!(lines[2], "true", "the missing model is that entry's error");
    let out = output(
        &env,
        "local _, e = parallel_map({'x'}, function() return llm_query('x') end)\nprint(e[1])",
    );
    assert!(out.contains("llm_query is not available"), "{out}");
}

#[test]
fn nested_parallel_sends_every_level_in_one_round() {
    let server = OpenAiServer::always(Behavior::echo(Duration::from_millis(150)));
    let env = env(&server, Limits::default());
    let out = output(
        &env,
        "local r = parallel_map({'a', 'b'}, function(x)\n\
           local inner = parallel_map({1, 2, 3}, function(i) return llm_query(x .. i) end)\n\
           return table.concat(inner, ',')\n\
         end)\n\
         print(r[1]); print(r[2])",
    );
    assert_eq!(
        out,
        "echo: a1,echo: a2,echo: a3\necho: b1,echo: b2,echo: b3\n"
    );
    assert_eq!(server.max_in_flight(), 6, "both levels' calls in one round");
}

#[test]
fn a_limit_hit_inside_one_ends_the_whole_execution() {
    let server = OpenAiServer::always(Behavior::echo(Duration::from_millis(10)));
    let limits = Limits {
        time: Duration::from_millis(300),
        ..Limits::default()
    };
    let env = env(&server, limits);
    let started = Instant::now();
    let result = env.execute(
        "local r, e = parallel(function() return llm_query('x') end, function() while true do end end)\n\
         print('not reached', r, e)",
    );
    match result {
        Err(ExecError::Limit { kind, output, .. }) => {
            assert_eq!(kind, LimitKind::Time);
            assert_eq!(output, "");
        }
        other => panic!("{other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(3));
    // pcall around the whole of it cannot swallow the limit either.
    let result = env.execute(
        "print(pcall(parallel_map, {1, 2}, function(i) if i == 2 then local s = '' while true do s = s .. 'x' end end return i end))",
    );
    assert!(matches!(result, Err(ExecError::Limit { .. })), "{result:?}");
    assert_eq!(
        output(&env, "print(parallel(function() return 'after' end)[1])"),
        "after\n"
    );
}

#[test]
fn arguments_and_yields_of_the_code_s_own_are_errors_naming_them() {
    let env = Environment::new(Registry::baked().clone(), Limits::default()).unwrap();
    let error = |code: &str| env.execute(code).unwrap_err().message().to_string();
    assert!(
        error("parallel(1)")
            .starts_with("input:1: parallel: bad argument #1 (a function expected, got number)"),
        "{}",
        error("parallel(1)")
    );
    assert!(error("parallel_map('x', print)").contains("input:1: parallel_map: bad argument #1"));
    assert!(error("parallel_map({}, print, {size = 2})").starts_with(
        "input:1: parallel_map: unknown option `size` (the options are: concurrency)"
    ));
    assert!(error("parallel_map({}, print, {concurrency = 0})").contains("at least 1"));
    let out = output(
        &env,
        "local _, e = parallel(function() coroutine.yield(1) end)\nprint(e[1])\n\
         local co = coroutine.wrap(function() coroutine.yield('own') end)\n\
         print(parallel(function() return co() end)[1])",
    );
    assert_eq!(
        out,
        "parallel: function 1 yielded outside a sub-call; a function run by parallel may yield only in coroutines of its own\nown\n"
    );
}

#[test]
fn the_concurrency_option_bounds_what_runs_at_once() {
    let server = OpenAiServer::always(Behavior::echo(Duration::from_millis(50)));
    let env = env(&server, Limits::default());
    let out = output(
        &env,
        "local r = parallel_map({1, 2, 3, 4, 5, 6, 7}, function(i) return llm_query(tostring(i)) end, {concurrency = 3})\n\
         print(#r, r[7])",
    );
    assert_eq!(out, "7\techo: 7\n");
    assert_eq!(server.max_in_flight(), 3);
}

#[test]
fn rlm_query_children_run_in_parallel() {
    // The root's code starts three children at once; each answers at its first turn.
    let server = OpenAiServer::start(
        vec![lua(
            "local r, e = parallel_map({'a', 'b', 'c'}, function(t) return rlm_query('task ' .. t) end)\n\
             FINAL(table.concat(r, ',') .. ' ' .. tostring(next(e)))",
        )],
        lua("FINAL('child done')").after(Duration::from_millis(150)),
    );
    let report = rlm(&server, 5).max_depth(2).run_report("Q", None, None);
    let answer = report.result.expect("the run answers");
    assert_eq!(answer, "child done,child done,child done nil");
    assert_eq!(server.request_count(), 4);
    assert_eq!(server.max_in_flight(), 3, "the three children at once");
    assert_eq!(report.usage.by_depth[1].calls, 3);
}

#[test]
fn a_session_token_budget_sends_only_the_calls_whose_worst_case_fits() {
    // Each answer reports 15 tokens; each call may take its prompt and 1,024 more.
    let server = OpenAiServer::always(Behavior::reply("ok"));
    let worst = tokens::count_chat(["q"]) as u64 + DEFAULT_REPLY_RESERVE;
    let env = Environment::builder(Registry::baked().clone())
        .llm(Arc::new(client(&server)))
        .token_budget(3 * worst + worst / 2)
        .build()
        .unwrap();
    let out = output(
        &env,
        "local items = {}\nfor i = 1, 20 do items[i] = i end\n\
         local r, e = parallel_map(items, function() return llm_query('q') end, {concurrency = 20})\n\
         local n = 0\nfor i = 1, 20 do if r[i] then n = n + 1 end end\n\
         print(n, token_budget())\nprint(e[20])",
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], format!("3\t{}", 3 * worst + worst / 2 - 45));
    assert!(
        lines[1].contains("llm_query: not sent: the session's token budget has"),
        "{out}"
    );
    assert_eq!(server.request_count(), 3);
}
