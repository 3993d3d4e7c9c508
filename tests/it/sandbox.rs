//! The sandbox, by category: removed facilities, bytecode, the string
//! metatable, built-ins, isolation between environments, and every limit with its
//! evasions. After each limit hit, the environment must keep working and keep its
//! variables.

use crate::support;

use std::time::Duration;

use rlm_registry::Registry;
use rlm_registry::environment::{Environment, ExecError, LimitKind, Limits};

fn limits() -> Limits {
    Limits {
        time: Duration::from_millis(300),
        memory_bytes: 64 * 1024 * 1024,
        output_bytes: 64 * 1024,
        ..Limits::default()
    }
}

fn env() -> Environment {
    Environment::new(Registry::baked().clone(), limits()).unwrap()
}

fn output(env: &Environment, code: &str) -> String {
    match env.execute(code) {
        Ok(run) => run.output,
        Err(error) => panic!("`{code}` failed: {error}"),
    }
}

fn lua_error(env: &Environment, code: &str) -> String {
    match env.execute(code) {
        Err(ExecError::Lua { message, .. }) => message,
        other => panic!("`{code}` should fail with a Lua error, got {other:?}"),
    }
}

/// Runs `code`, expects `kind` of limit, then checks the environment still works and
/// kept the variable `kept` set before. A limit that fails to stop `code` hangs, and
/// fails here.
fn assert_limit(kind: LimitKind, code: &str) {
    let code = code.to_string();
    support::hang::finishes(&format!("`{code}`"), move || {
        // When another limit is expected, time gets room, so a loaded machine cannot make
        // it trip first.
        let limits = if kind == LimitKind::Time {
            limits()
        } else {
            Limits {
                time: Duration::from_secs(60),
                ..limits()
            }
        };
        let env = Environment::new(Registry::baked().clone(), limits).unwrap();
        output(&env, "kept = 42");
        match env.execute(&code) {
            Err(ExecError::Limit {
                kind: hit, message, ..
            }) => {
                assert_eq!(hit, kind, "`{code}`: {message}");
                assert!(
                    message.contains(&format!("{kind} limit exceeded")),
                    "{message}"
                );
            }
            other => panic!("`{code}` should hit the {kind} limit, got {other:?}"),
        }
        assert_eq!(
            output(&env, "print(kept)"),
            "42\n",
            "the environment keeps its variables after `{code}`"
        );
    });
}

mod removed_facilities {
    use super::*;

    #[test]
    fn dangerous_globals_are_absent() {
        let env = env();
        for name in ["io", "package", "require", "debug", "dofile", "loadfile"] {
            assert_eq!(output(&env, &format!("print({name})")), "nil\n", "{name}");
        }
    }

    #[test]
    fn os_keeps_only_time_clock_date_difftime() {
        let env = env();
        let listed = output(
            &env,
            "local k = {} for n in pairs(os) do k[#k+1] = n end table.sort(k) print(table.concat(k, ','))",
        );
        assert_eq!(listed, "clock,date,difftime,time\n");
        assert_eq!(
            output(&env, "print(os.execute, os.exit, os.getenv, os.remove)"),
            "nil\tnil\tnil\tnil\n"
        );
    }

    #[test]
    fn collectgarbage_allows_only_count() {
        let env = env();
        assert_eq!(
            output(&env, "print(type(collectgarbage('count')))"),
            "number\n"
        );
        for option in ["collect", "stop", "step", "incremental", "generational"] {
            let message = lua_error(&env, &format!("collectgarbage('{option}')"));
            assert!(message.contains("only \"count\""), "{message}");
        }
    }
}

mod bytecode {
    use super::*;

    #[test]
    fn string_dump_is_gone_also_through_string_methods() {
        let env = env();
        assert_eq!(output(&env, "print(string.dump, ('').dump)"), "nil\tnil\n");
    }

    #[test]
    fn load_rejects_binary_chunks() {
        let env = env();
        let out = output(&env, r#"print(load("\27Lua\84\0"))"#);
        assert!(
            out.starts_with("nil\tattempt to load a binary chunk"),
            "{out}"
        );
        let via_reader = output(
            &env,
            r#"local parts = {"\27Lua", "x"} local i = 0 print(load(function() i = i + 1 return parts[i] end))"#,
        );
        assert!(
            via_reader.starts_with("nil\tattempt to load a binary chunk"),
            "{via_reader}"
        );
    }

    #[test]
    fn load_refuses_text_in_binary_mode_and_stays_in_the_sandbox() {
        let env = env();
        assert_eq!(
            output(&env, "print(load('return io', 'x', 'b'))"),
            "nil\tattempt to load a text chunk (mode is 'b')\n"
        );
        assert_eq!(
            output(&env, "print(load('return io', 'x', 't')())"),
            "nil\n"
        );
        assert_eq!(
            output(&env, "secret = 7 print(load('return secret')())"),
            "7\n"
        );
        assert_eq!(
            output(
                &env,
                "print(load('return secret', 'x', 't', {secret = 1})())"
            ),
            "1\n"
        );
    }
}

mod string_metatable {
    use super::*;

    #[test]
    fn getmetatable_of_a_string_reveals_nothing() {
        let env = env();
        assert_eq!(output(&env, "print(getmetatable(''))"), "false\n");
        let message = lua_error(&env, "getmetatable('').__index = {}");
        assert!(message.contains("index"), "{message}");
    }

    #[test]
    fn string_methods_still_work() {
        let env = env();
        assert_eq!(
            output(&env, "print(('abc'):upper(), ('x'):rep(3))"),
            "ABC\txxx\n"
        );
    }
}

mod builtins {
    use super::*;

    #[test]
    fn builtins_cannot_be_overwritten() {
        let env = env();
        for code in [
            "print = nil",
            "_G.print = 1",
            "rawset(_G, 'print', 1)",
            "_ENV.print = 1",
        ] {
            let message = lua_error(&env, code);
            assert!(
                message.contains("cannot assign to built-in 'print'"),
                "{code}: {message}"
            );
        }
        assert_eq!(output(&env, "print('still here')"), "still here\n");
    }

    #[test]
    fn the_globals_metatable_is_protected() {
        let env = env();
        assert_eq!(output(&env, "print(getmetatable(_G))"), "false\n");
        let message = lua_error(&env, "setmetatable(_G, {})");
        assert!(message.contains("protected metatable"), "{message}");
    }

    #[test]
    fn print_is_captured_with_tabs_and_tostring() {
        let env = env();
        let out = output(
            &env,
            "print(1, 'a', nil, true, setmetatable({}, {__tostring = function() return 'T' end}))",
        );
        assert_eq!(out, "1\ta\tnil\ttrue\tT\n");
    }
}

mod isolation {
    use super::*;

    #[test]
    fn two_environments_share_nothing() {
        let a = env();
        let b = env();
        output(
            &a,
            "shared = 'a' string.upper = function() return 'hacked' end table.secret = 1",
        );
        assert_eq!(
            output(&b, "print(shared, ('x'):upper(), table.secret)"),
            "nil\tX\tnil\n"
        );
        assert_eq!(output(&a, "print(shared, ('x'):upper())"), "a\thacked\n");
    }

    #[test]
    fn state_persists_across_executions() {
        let env = env();
        output(
            &env,
            "counter = 1 function bump() counter = counter + 1 end",
        );
        output(&env, "bump() bump()");
        assert_eq!(output(&env, "print(counter)"), "3\n");
    }

    #[test]
    fn a_lua_error_keeps_the_output_and_the_line() {
        let env = env();
        match env.execute("print('before')\nlocal x = nil + 1") {
            Err(ExecError::Lua {
                message, output, ..
            }) => {
                assert_eq!(output, "before\n");
                assert!(message.starts_with("input:2:"), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }
}

mod time_limit {
    use super::*;

    #[test]
    fn plain_loop() {
        assert_limit(LimitKind::Time, "while true do end");
    }

    #[test]
    fn load_reader_handing_out_blanks_forever() {
        // The parser skips blanks without holding them: only the time limit ends it.
        assert_limit(
            LimitKind::Time,
            "local s = string.rep(' ', 1e6) print(load(function() return s end))",
        );
    }

    #[test]
    fn loop_inside_pcall() {
        assert_limit(
            LimitKind::Time,
            "while true do pcall(function() while true do end end) end",
        );
    }

    #[test]
    fn pcall_then_carrying_on() {
        assert_limit(
            LimitKind::Time,
            "pcall(function() while true do end end) print('escaped')",
        );
    }

    #[test]
    fn xpcall_with_a_looping_handler() {
        assert_limit(
            LimitKind::Time,
            "xpcall(function() error('x') end, function() while true do end end)",
        );
    }

    #[test]
    fn coroutine_resume_and_wrap() {
        assert_limit(
            LimitKind::Time,
            "local co = coroutine.create(function() while true do end end) coroutine.resume(co) print('escaped')",
        );
        assert_limit(
            LimitKind::Time,
            "coroutine.wrap(function() while true do end end)()",
        );
    }

    /// Coroutines run under a hook of their own, set when they are made: also those made
    /// inside a coroutine, and those a coroutine closes with a looping `__close`.
    #[test]
    fn coroutines_within_coroutines_and_their_close() {
        assert_limit(
            LimitKind::Time,
            "coroutine.wrap(function() coroutine.wrap(function() while true do end end)() end)()",
        );
        assert_limit(
            LimitKind::Time,
            "local co = coroutine.create(function() local x <close> = setmetatable({}, {__close = function() while true do end end}) coroutine.yield() end)
             coroutine.resume(co) coroutine.close(co)",
        );
        assert_limit(
            LimitKind::Time,
            "local co = coroutine.wrap(function() coroutine.yield() while true do end end) co() co()",
        );
    }

    /// A loop that makes no call and takes no jump but its own, started after many
    /// executions that ended quickly: every execution is watched from its start.
    #[test]
    fn a_tight_loop_after_many_short_executions() {
        let env = env();
        for i in 0..200 {
            output(&env, &format!("x = {i}"));
        }
        assert!(matches!(
            env.execute("local n = 0 repeat n = n + 1 until n < 0"),
            Err(ExecError::Limit {
                kind: LimitKind::Time,
                ..
            })
        ));
        assert_eq!(output(&env, "print(x)"), "199\n");
    }

    /// An execution that runs inside another's host call (a child agent's, started by
    /// `rlm_query` while its parent waits) is held to its own limits.
    #[test]
    fn an_execution_inside_a_host_call_is_stopped_by_its_own_limit() {
        use std::sync::Arc;

        struct LoopingChild;
        impl rlm_registry::environment::SubAgent for LoopingChild {
            fn run(&self, _: &rlm_registry::environment::SubTask) -> Result<String, String> {
                let child = Environment::new(Registry::baked().clone(), limits()).unwrap();
                match child.execute("while true do end") {
                    Err(ExecError::Limit { kind, .. }) => Ok(format!("child stopped: {kind}")),
                    other => Err(format!("the child was not stopped: {other:?}")),
                }
            }
        }
        let parent = Environment::builder(Registry::baked().clone())
            .limits(Limits {
                time: Duration::from_secs(30),
                ..limits()
            })
            .sub_agent(Arc::new(LoopingChild))
            .build()
            .unwrap();
        assert_eq!(
            output(&parent, "print(rlm_query('loop'))"),
            "child stopped: time\n"
        );
    }

    #[test]
    fn tostring_metamethod() {
        assert_limit(
            LimitKind::Time,
            "print(setmetatable({}, {__tostring = function() while true do end end}))",
        );
    }

    #[test]
    fn gc_metamethod() {
        assert_limit(
            LimitKind::Time,
            "for i = 1, 1e5 do setmetatable({}, {__gc = function() while true do end end}) end while true do end",
        );
    }

    #[test]
    fn gc_metamethod_that_loops_is_stopped_at_the_end_of_the_execution() {
        assert_limit(
            LimitKind::Time,
            "setmetatable({}, {__gc = function() while true do end end}) for i = 1, 1e4 do local t = {i} end",
        );
    }

    #[test]
    fn close_metamethod() {
        assert_limit(
            LimitKind::Time,
            "do local x <close> = setmetatable({}, {__close = function() while true do end end}) end",
        );
    }

    #[test]
    fn error_object_with_looping_tostring() {
        assert_limit(
            LimitKind::Time,
            "error(setmetatable({}, {__tostring = function() while true do end end}))",
        );
    }

    #[test]
    fn dropping_an_environment_with_a_looping_finalizer_does_not_hang() {
        // On a watched thread: the environment is not `Send`, so it is made there.
        support::hang::finishes("dropping the environment", || {
            let env = env();
            output(
                &env,
                "keep = setmetatable({}, {__gc = function() while true do end end})",
            );
            drop(env);
        });
    }

    /// An environment with every use serialized, moved between threads (as the Python
    /// package moves one to each caller's thread).
    struct Moved(Environment);

    // SAFETY: used by one thread at a time, the join ordering one's uses before the
    // next's; nothing of it is tied to the thread that made it (the crate's own claim,
    // which this test checks).
    unsafe impl Send for Moved {}

    #[test]
    fn an_environment_moved_to_another_thread_still_stops_an_endless_loop() {
        let moved = support::hang::finishes("making the environment", || {
            let env = env();
            output(&env, "kept = 42");
            // This thread's timer is made and used here, on the thread that made it.
            output(&env, "for i = 1, 10 do end");
            Moved(env)
        });
        let moved = support::hang::finishes("the loop on another thread", move || {
            let moved = moved;
            match moved.0.execute("while true do end") {
                Err(ExecError::Limit { kind, .. }) => assert_eq!(kind, LimitKind::Time),
                other => panic!("the loop should hit the time limit, got {other:?}"),
            }
            moved
        });
        assert_eq!(output(&moved.0, "print(kept)"), "42\n");
    }

    /// A child agent that runs an execution of its own on the calling thread, inside the
    /// parent's host call, as a child agent's loop does.
    struct NestedChild;

    impl rlm_registry::environment::SubAgent for NestedChild {
        fn run(&self, task: &rlm_registry::environment::SubTask) -> Result<String, String> {
            let child = env();
            child
                .execute(&task.prompt)
                .map(|run| run.output)
                .map_err(|error| error.to_string())
        }
    }

    #[test]
    fn an_execution_nested_in_another_on_the_same_thread_leaves_the_outer_one_checked() {
        support::hang::finishes("the outer loop after a nested execution", || {
            let env = Environment::builder(Registry::baked().clone())
                .limits(limits())
                .sub_agent(std::sync::Arc::new(NestedChild))
                .build()
                .unwrap();
            // Both executions run past their first check (1,000 instructions), so the
            // outer one's timer ticks when the nested one starts: the nested one must
            // leave it ticking for the outer loop after it.
            let code = "for i = 1, 5000 do end \
                nested = rlm_query('for i = 1, 5000 do end print(6 * 7)') \
                while true do end";
            match env.execute(code) {
                Err(ExecError::Limit { kind, .. }) => assert_eq!(kind, LimitKind::Time),
                other => panic!("the loop should hit the time limit, got {other:?}"),
            }
            assert_eq!(output(&env, "print(nested == '42\\n')"), "true\n");
        });
    }
}

mod memory_limit {
    use super::*;

    #[test]
    fn string_bomb() {
        assert_limit(
            LimitKind::Memory,
            "local s = 'x' while true do s = s .. s end",
        );
    }

    #[test]
    fn table_bomb() {
        assert_limit(
            LimitKind::Memory,
            "local t = {} for i = 1, 1e9 do t[i] = {i} end",
        );
    }

    #[test]
    fn bomb_inside_pcall() {
        assert_limit(
            LimitKind::Memory,
            "pcall(function() local s = 'x' while true do s = s .. s end end) print('escaped')",
        );
    }

    #[test]
    fn string_rep_bomb() {
        assert_limit(LimitKind::Memory, "local s = string.rep('x', 1e9)");
    }

    #[test]
    fn load_reader_handing_out_a_large_piece_forever() {
        // One name growing without end: the parser holds it, in Lua's memory.
        assert_limit(
            LimitKind::Memory,
            "local s = string.rep('x', 1e7) print(load(function() return s end))",
        );
    }
}

mod output_limit {
    use super::*;

    #[test]
    fn printing_forever() {
        assert_limit(
            LimitKind::Output,
            "while true do print('spam spam spam') end",
        );
    }

    #[test]
    fn printing_inside_pcall() {
        assert_limit(
            LimitKind::Output,
            "pcall(function() while true do print('spam') end end) print('escaped')",
        );
    }

    #[test]
    fn output_before_the_limit_is_kept_up_to_the_limit() {
        let env = env();
        match env.execute("for i = 1, 1e6 do print('0123456789') end") {
            Err(ExecError::Limit { output, .. }) => assert_eq!(output.len(), limits().output_bytes),
            other => panic!("{other:?}"),
        }
    }
}

mod recursion_limit {
    use super::*;

    #[test]
    fn deep_recursion() {
        assert_limit(
            LimitKind::Recursion,
            "local function f(n) return 1 + f(n + 1) end f(1)",
        );
    }

    #[test]
    fn deep_recursion_inside_pcall() {
        assert_limit(
            LimitKind::Recursion,
            "local function f(n) return 1 + f(n + 1) end pcall(f, 1) print('escaped')",
        );
    }

    #[test]
    fn moderate_recursion_is_fine() {
        let env = env();
        let out = output(
            &env,
            "local function f(n) if n == 0 then return 0 end return 1 + f(n - 1) end print(f(500))",
        );
        assert_eq!(out, "500\n");
    }

    #[test]
    fn infinite_tail_calls_hit_the_time_limit() {
        assert_limit(
            LimitKind::Time,
            "local function f(n) return f(n + 1) end f(1)",
        );
    }
}

/// The primitives behind the text functions are reachable from code, past the Lua side's
/// checks: an overlap as large as the chunk is clamped, never a panic or an endless loop.
#[test]
fn text_primitives_called_directly_clamp_their_overlap() {
    let env = env();
    assert_eq!(
        output(
            &env,
            "local p = _text_primitives
             print(#p.chunk_by_lines('a\\nb\\nc\\nd', 2, 5), #p.chunk_by_size('abcdefgh', 4, 9))"
        ),
        "3\t5\n"
    );
}

/// Searching or asking `help` with any text ends well inside the time limit: a query of
/// a hundred thousand distinct words (its terms were deduplicated in quadratic time),
/// and a 3 MB name (compared with every function's name for a "did you mean").
#[test]
fn fn_search_and_help_with_huge_arguments_end_in_time() {
    let env = Environment::new(
        Registry::baked().clone(),
        Limits {
            time: Duration::from_secs(10),
            ..limits()
        },
    )
    .unwrap();
    let out = output(
        &env,
        "local w = {} for i = 1, 1e5 do w[i] = 'w' .. i end
         print(type(fn_search(table.concat(w, ' '))))
         local ok, e = pcall(help, string.rep('x', 3e6))
         print(ok, #e < 200)",
    );
    assert_eq!(out, "table\nfalse\ttrue\n");
}
