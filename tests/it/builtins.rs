//! The Rust built-ins in the environment, with the LLM ones over real HTTP against the
//! loopback OpenAI-compatible test server.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use rlm_registry::Registry;
use rlm_registry::environment::{Environment, ExecError, LimitKind, Limits, SubTask};
use rlm_registry::llm::{DEFAULT_REPLY_RESERVE, LlmClient, LlmConfig};
use rlm_registry::tokens;
use support::openai_server::{Behavior, OpenAiServer};

fn client(server: &OpenAiServer) -> LlmClient {
    let config = LlmConfig::new(server.base_url(), "test-model")
        .with_max_retries(1)
        .with_backoff(Duration::from_millis(1), Duration::from_millis(5))
        .with_timeout(Duration::from_secs(5));
    LlmClient::new(config).unwrap()
}

fn env_with(server: &OpenAiServer, limits: Limits) -> (Environment, LlmClient) {
    let client = client(server);
    let env = Environment::builder(Registry::baked().clone())
        .limits(limits)
        .llm(Arc::new(client.clone()))
        .build()
        .unwrap();
    (env, client)
}

fn output(env: &Environment, code: &str) -> String {
    env.execute(code)
        .unwrap_or_else(|e| panic!("`{code}`: {e}"))
        .output
}

#[test]
fn llm_query_returns_the_answer_and_counts_usage() {
    let server = OpenAiServer::always(Behavior::reply("forty-two"));
    let (env, client) = env_with(&server, Limits::default());
    assert_eq!(
        output(&env, "print(llm_query('what is the answer?'))"),
        "forty-two\n"
    );
    let body = server.requests()[0].json().unwrap();
    assert_eq!(body["messages"][0]["content"], "what is the answer?");
    let usage = client.usage().snapshot();
    assert_eq!(
        (usage.calls, usage.prompt_tokens, usage.completion_tokens),
        (1, 10, 5)
    );
}

#[test]
fn llm_query_batched_answers_in_order_concurrently() {
    let server = OpenAiServer::always(Behavior::echo(Duration::from_millis(50)));
    let (env, client) = env_with(&server, Limits::default());
    let code = "local prompts = {} for i = 1, 32 do prompts[i] = 'p' .. i end
                local answers = llm_query_batched(prompts)
                print(#answers, answers[1], answers[32])";
    assert_eq!(output(&env, code), "32\techo: p1\techo: p32\n");
    assert!(server.max_in_flight() > 1, "requests ran concurrently");
    assert_eq!(client.usage().snapshot().calls, 32);
}

#[test]
fn a_failed_batch_item_is_an_error_string_and_keeps_the_others() {
    let server = OpenAiServer::start(vec![Behavior::status(400)], Behavior::reply("fine"));
    let (env, _) = env_with(&server, Limits::default());
    let out = output(
        &env,
        "local a = llm_query_batched({'x'}) print(a[1]:sub(1, 6)) print(llm_query_batched({'y'})[1])",
    );
    assert_eq!(out, "error:\nfine\n");
}

#[test]
fn a_failing_server_is_a_clear_lua_error_and_the_environment_goes_on() {
    let server = OpenAiServer::start(
        vec![Behavior::status(500), Behavior::status(500)],
        Behavior::reply("back"),
    );
    let (env, _) = env_with(&server, Limits::default());
    match env.execute("print(llm_query('x'))") {
        Err(ExecError::Lua { message, .. }) => {
            assert!(message.contains("llm_query failed"), "{message}");
            assert!(message.contains("500"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    let caught = output(&env, "print(pcall(llm_query, 'x'))");
    assert_eq!(caught, "true\tback\n");
}

#[test]
fn llm_calls_are_limited_per_execution() {
    let server = OpenAiServer::always(Behavior::reply("ok"));
    let limits = Limits {
        llm_calls: 3,
        ..Limits::default()
    };
    let (env, _) = env_with(&server, limits);
    match env.execute("for i = 1, 10 do pcall(llm_query, 'x') end") {
        Err(ExecError::Limit { kind, .. }) => assert_eq!(kind, LimitKind::LlmCalls),
        other => panic!("{other:?}"),
    }
    assert_eq!(server.request_count(), 3);
    assert_eq!(
        output(&env, "print(llm_query('again'))"),
        "ok\n",
        "the count resets each execution"
    );
    assert!(matches!(
        env.execute("llm_query_batched({'a', 'b', 'c', 'd'})"),
        Err(ExecError::Limit {
            kind: LimitKind::LlmCalls,
            ..
        })
    ));
}

#[test]
fn without_an_llm_the_query_builtins_say_so() {
    let env = Environment::new(Registry::baked().clone(), Limits::default()).unwrap();
    let error = env.execute("llm_query('x')").unwrap_err();
    assert!(
        error.message().contains("no LLM is configured"),
        "{}",
        error.message()
    );
}

#[test]
fn final_and_final_var_record_the_answer() {
    let env = Environment::new(Registry::baked().clone(), Limits::default()).unwrap();
    assert_eq!(env.final_answer(), None);
    output(&env, "FINAL(42)");
    assert_eq!(env.final_answer().as_deref(), Some("42"));
    output(&env, "result = 'the answer' FINAL_VAR('result')");
    assert_eq!(env.final_answer().as_deref(), Some("the answer"));
    let error = env.execute("FINAL_VAR('missing')").unwrap_err();
    assert!(
        error.message().contains("no variable named 'missing'"),
        "{}",
        error.message()
    );
}

#[test]
fn llm_builtins_cannot_be_overwritten() {
    let env = Environment::new(Registry::baked().clone(), Limits::default()).unwrap();
    for name in ["llm_query", "llm_query_batched", "FINAL", "FINAL_VAR"] {
        let error = env.execute(&format!("{name} = nil")).unwrap_err();
        assert!(
            error.message().contains("cannot assign to built-in"),
            "{name}: {}",
            error.message()
        );
    }
}

#[test]
fn token_builtins_count_truncate_and_split_exactly() {
    let env = Environment::new(Registry::baked().clone(), Limits::default()).unwrap();
    let text = "The quick brown fox jumps over the lazy dog.";
    let expected = rlm_registry::tokens::count(text);
    assert_eq!(
        output(&env, &format!("print(token_count({text:?}))")),
        format!("{expected}\n")
    );
    assert_eq!(
        output(&env, "print(token_truncate('hello world', 1))"),
        "hello\n"
    );
    assert_eq!(
        output(
            &env,
            "local p = token_split('one two three four', 2) print(#p, p[1], p[2])"
        ),
        "2\tone two\t three four\n"
    );
    assert_eq!(output(&env, "print(token_budget() == math.huge)"), "true\n");
    for bad in [
        "token_split('x', 0)",
        "token_split('x', 2, 2)",
        "token_truncate('x', -1)",
    ] {
        assert!(env.execute(bad).is_err(), "{bad}");
    }
}

#[test]
fn token_counts_match_tiktoken_on_varied_text() {
    let bpe = tiktoken_rs::o200k_base().unwrap();
    let samples = [
        "plain ASCII words, numbers 1234567 and punctuation!?",
        "  leading spaces\n\n\ttabs and\r\nCRLF lines  ",
        "日本語のテキストと emoji 🙂🙂 and accents: café naïve",
        "fn main() { println!(\"{}\", x.len()); } // code",
        "",
    ];
    for sample in samples {
        assert_eq!(
            rlm_registry::tokens::count(sample),
            bpe.encode_ordinary(sample).len(),
            "{sample:?}"
        );
    }
}

#[test]
fn the_token_budget_is_spent_by_sub_calls_and_then_stops_them() {
    // Each call reserves its worst case (its prompt and 1,024 for the reply) and, as the
    // server reports it here, spends exactly that.
    let worst = tokens::count_chat(["a"]) as u64 + DEFAULT_REPLY_RESERVE;
    let server = OpenAiServer::always(Behavior::reply_with_usage("ok", worst - 10, 10));
    let env = Environment::builder(Registry::baked().clone())
        .llm(Arc::new(client(&server)))
        .token_budget(3 * worst)
        .build()
        .unwrap();
    assert_eq!(
        output(&env, "llm_query('a') print(token_budget())"),
        format!("{}\n", 2 * worst)
    );
    output(&env, "llm_query('b') llm_query('c')");
    match env.execute("llm_query('d')") {
        Err(ExecError::Limit { kind, message, .. }) => {
            assert_eq!(kind, LimitKind::TokenBudget);
            assert!(message.contains("token_budget"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(server.request_count(), 3);
    assert_eq!(output(&env, "print(token_budget())"), "0\n");
}

#[test]
fn a_sub_call_whose_worst_case_does_not_fit_the_token_budget_is_not_sent() {
    let server = OpenAiServer::always(Behavior::reply("ok"));
    let env = Environment::builder(Registry::baked().clone())
        .llm(Arc::new(client(&server)))
        .token_budget(100)
        .build()
        .unwrap();
    let message = env
        .execute("llm_query('a')")
        .unwrap_err()
        .message()
        .to_string();
    assert!(
        message.contains(
            "llm_query: not sent: the session's token budget has 100 of its 100 tokens left"
        ) && message.contains("this call may take up to 1,0")
            && message.contains("set by the environment's `token_budget`"),
        "{message}"
    );
    assert_eq!(
        output(&env, "print(llm_query_batched({'a'})[1]:sub(1, 34))"),
        "error: llm_query_batched: not sent\n"
    );
    assert_eq!(server.request_count(), 0);
}

#[test]
fn store_list_shows_only_what_the_session_made() {
    let env = Environment::new(Registry::baked().clone(), Limits::default()).unwrap();
    env.set_context("ctx").unwrap();
    output(
        &env,
        "notes = 'a long string' counts = {1, 2, 3} local hidden = 1 n = line_count('x')",
    );
    let list = "for _, v in ipairs(store_list()) do print(v.name, v.type, v.size, v.preview) end";
    let listed = output(&env, list);
    assert_eq!(
        listed,
        "context\tstring\t3\tctx\ncounts\ttable\t3\t{1=1, 2=2, 3=3}\nn\tnumber\tnil\t1\nnotes\tstring\t13\ta long string\n"
    );
    // The answer table every environment has is the session's once its code writes it.
    output(&env, "answer.content = 'draft'");
    assert!(output(&env, list).starts_with("answer\ttable\t2\t"));
    let summary = output(&env, "print(store_summarize('notes'))");
    assert_eq!(summary, "notes: string, 13 bytes\na long string\n");
    assert!(
        env.execute("store_summarize('nope')")
            .unwrap_err()
            .message()
            .contains("no variable named 'nope'")
    );
}

#[test]
fn help_documents_builtins_and_registry_functions() {
    let env = Environment::new(Registry::baked().clone(), Limits::default()).unwrap();
    let builtin = output(&env, "print(help('llm_query'))");
    assert!(
        builtin.contains("---@param prompt string") && builtin.contains("(built-in)"),
        "{builtin}"
    );
    let registry = output(&env, "print(help('grep'))");
    assert!(
        registry.contains("function grep(text, pattern, context, plain) end"),
        "{registry}"
    );
    let all = output(&env, "print(help())");
    assert!(
        all.contains("token_count") && all.contains("chunk_by_lines"),
        "{all}"
    );
    let unknown = env.execute("help('nope')").unwrap_err();
    assert!(
        unknown
            .message()
            .contains("no function named 'nope'; call help() to list them"),
        "{unknown}"
    );
    let misspelt = env.execute("help('countlines')").unwrap_err();
    assert!(
        misspelt
            .message()
            .contains("no function named 'countlines'; did you mean 'line_count'?"),
        "{misspelt}"
    );
}

#[test]
fn every_documented_builtin_is_reserved_and_present() {
    use rlm_registry::conventions::builtins::BUILTINS as DOCS;
    let env = Environment::new(Registry::baked().clone(), Limits::default()).unwrap();
    for doc in DOCS {
        // `re.find` and its siblings are reserved through their table's name.
        let global = doc.name.split('.').next().unwrap_or(doc.name);
        assert_eq!(
            rlm_registry::conventions::reserved_kind(global),
            Some("built-in"),
            "{} is not reserved",
            doc.name
        );
        assert!(
            doc.doc.contains(&format!("function {}(", doc.name)),
            "{}",
            doc.name
        );
        assert_eq!(
            output(&env, &format!("print(type({}))", doc.name)),
            "function\n",
            "{}",
            doc.name
        );
    }
}

#[test]
fn recursive_helpers_fan_out_through_the_real_builtins() {
    let server = OpenAiServer::always(Behavior::echo(Duration::from_millis(5)));
    let (env, client) = env_with(&server, Limits::default());
    env.set_context("word ".repeat(50)).unwrap();
    let out = output(
        &env,
        "local a = map_chunks({'one', 'two'}, 'Q?') print(#a, a[1]:sub(1, 8))
         print(map_reduce(context, 'How many words?', 20):sub(1, 5))",
    );
    assert_eq!(out, "2\techo: Q?\necho:\n");
    // 2 (map_chunks) + 3 chunks of at most 20 tokens + 1 combining call.
    assert_eq!(client.usage().snapshot().calls, 6);
}

struct ScriptedUser {
    answers: std::sync::Mutex<Vec<String>>,
    seen: std::sync::Mutex<Vec<String>>,
}

impl rlm_registry::environment::User for ScriptedUser {
    fn ask(&self, question: &str) -> Result<String, String> {
        self.seen.lock().unwrap().push(format!("ask: {question}"));
        self.answers
            .lock()
            .unwrap()
            .pop()
            .ok_or_else(|| "no more answers".to_string())
    }

    fn notify(&self, message: &str) -> Result<(), String> {
        self.seen.lock().unwrap().push(format!("notify: {message}"));
        Ok(())
    }
}

#[test]
fn ask_user_and_notify_user_reach_the_host() {
    let user = Arc::new(ScriptedUser {
        answers: std::sync::Mutex::new(vec!["blue".to_string()]),
        seen: std::sync::Mutex::new(Vec::new()),
    });
    let env = Environment::builder(Registry::baked().clone())
        .user(user.clone())
        .build()
        .unwrap();
    assert_eq!(
        output(
            &env,
            "notify_user('starting') print(ask_user('Favourite colour?'))"
        ),
        "blue\n"
    );
    assert_eq!(
        *user.seen.lock().unwrap(),
        ["notify: starting", "ask: Favourite colour?"]
    );
    let error = env.execute("ask_user('again?')").unwrap_err();
    assert!(
        error.message().contains("ask_user failed: no more answers"),
        "{}",
        error.message()
    );
}

#[test]
fn without_a_user_channel_ask_user_says_it_is_top_level_only() {
    let env = Environment::new(Registry::baked().clone(), Limits::default()).unwrap();
    let error = env.execute("ask_user('q')").unwrap_err();
    assert!(
        error.message().contains("only the top-level agent"),
        "{}",
        error.message()
    );
}

struct FakeChild;

/// Answers `child(prompt, context)`; with a schema, the JSON object `{prompt, context,
/// schema}`, as a child that met it would.
impl rlm_registry::environment::SubAgent for FakeChild {
    fn run(&self, task: &SubTask) -> Result<String, String> {
        if task.prompt == "fail" {
            return Err("the child gave up".into());
        }
        if let Some(schema) = &task.schema {
            let answer = serde_json::json!({"prompt": task.prompt, "context": task.context, "schema": schema.schema()});
            return Ok(answer.to_string());
        }
        Ok(format!(
            "child({}, {})",
            task.prompt,
            task.context.as_deref().unwrap_or("-")
        ))
    }
}

fn env_with_child() -> Environment {
    Environment::builder(Registry::baked().clone())
        .sub_agent(Arc::new(FakeChild))
        .build()
        .unwrap()
}

#[test]
fn rlm_query_takes_its_options_as_the_last_table_and_returns_a_typed_answer_as_lua() {
    let env = env_with_child();
    // Options second (no context) or third; a typed answer comes back as a table.
    let out = output(
        &env,
        "local a = rlm_query('count', {schema = {type = 'object', required = {'prompt'}}})\n\
         print(type(a), a.prompt, a.context == json.null, a.schema.type, a.schema.required[1])\n\
         local b = rlm_query('count', 'ctx', {schema = '{\"type\": \"object\"}'})\n\
         print(b.prompt, b.context, b.schema.type)",
    );
    assert_eq!(
        out,
        "table\tcount\ttrue\tobject\tprompt\ncount\tctx\tobject\n"
    );
    // Without options, the answer is the child's text, as before.
    assert_eq!(output(&env, "print(rlm_query('p', 'c'))"), "child(p, c)\n");
    // One schema for every child of a batch; a failed child is still its error string.
    let out = output(
        &env,
        "local a = rlm_query_batched({'x', 'fail'}, {schema = {type = 'object'}})\n\
         print(a[1].prompt, a[2])\n\
         local b = rlm_query_batched({'y'}, {'cy'}, {schema = {type = 'object'}})\n\
         print(b[1].prompt, b[1].context)",
    );
    assert_eq!(out, "x\terror: the child gave up\ny\tcy\n");
}

#[test]
fn bad_rlm_query_options_are_errors_that_say_what_is_wrong() {
    let env = env_with_child();
    for (code, expected) in [
        (
            "rlm_query('p', {shema = {}})",
            "rlm_query: unknown option `shema` (the options are: schema, images)",
        ),
        (
            "rlm_query('p', {schema = {type = 'strin'}})",
            "rlm_query: opts.schema is not a valid JSON Schema",
        ),
        (
            "rlm_query('p', {schema = '{type'})",
            "rlm_query: opts.schema is a string but not JSON",
        ),
        (
            "rlm_query('p', {schema = {f = print}})",
            "rlm_query: cannot encode a function (at opts.schema.f)",
        ),
        (
            "rlm_query('p', true)",
            "rlm_query: bad argument #2 (a context string or an options table expected, got boolean)",
        ),
        (
            "rlm_query('p', 'c', 'd')",
            "rlm_query: bad argument #3 (an options table expected, got string)",
        ),
        (
            "rlm_query_batched({'p'}, {}, 5)",
            "rlm_query_batched: bad argument #3 (an options table expected, got number)",
        ),
    ] {
        let message = env.execute(code).unwrap_err().message().to_string();
        assert!(message.contains(expected), "`{code}`: {message}");
    }
    // Without a host's child agents, rlm_query is a plain llm_query: no schema there.
    let plain = Environment::new(Registry::baked().clone(), Limits::default()).unwrap();
    let message = plain
        .execute("rlm_query('p', {schema = {type = 'object'}})")
        .unwrap_err()
        .message()
        .to_string();
    assert!(
        message.contains("opts.schema needs a child agent"),
        "{message}"
    );
}

#[test]
fn rlm_query_runs_the_host_sub_agent() {
    let env = Environment::builder(Registry::baked().clone())
        .sub_agent(Arc::new(FakeChild))
        .build()
        .unwrap();
    assert_eq!(
        output(&env, "print(rlm_query('task', 'ctx'))"),
        "child(task, ctx)\n"
    );
    let batch = output(
        &env,
        "local a = rlm_query_batched({'a', 'fail', 'c'}, {'x'}) print(a[1], a[2], a[3])",
    );
    assert_eq!(
        batch,
        "child(a, x)\terror: the child gave up\tchild(c, -)\n"
    );
    let error = env.execute("rlm_query('fail')").unwrap_err();
    assert!(
        error
            .message()
            .contains("rlm_query failed: the child gave up"),
        "{}",
        error.message()
    );
}

#[test]
fn rlm_query_at_the_depth_limit_falls_back_to_llm_query() {
    let server = OpenAiServer::always(Behavior::echo(Duration::from_millis(1)));
    let (env, _) = env_with(&server, Limits::default());
    let out = output(&env, "print(rlm_query('summarize', 'the text'))");
    assert!(out.starts_with("echo: summarize"), "{out}");
    let prompt = server.requests()[0].json().unwrap()["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        prompt.contains("<context>\nthe text\n</context>"),
        "{prompt}"
    );
}

#[test]
fn errors_of_rust_builtins_are_plain_strings_like_lua_c_functions() {
    let server = OpenAiServer::always(Behavior::status(500));
    let (env, _) = env_with(&server, Limits::default());
    let out = output(
        &env,
        r#"
        local calls = {
          function() local r = token_truncate("a", -1) return r end,
          function() local r = re.find("abc", "(") return r end,
          function() return lines(nil) end,
        }
        for _, call in ipairs(calls) do
          local ok, err = pcall(call)
          print(ok, type(err), ("[" .. err .. "]"):sub(1, 32))
        end
        local ok, err = pcall(re.gsub, "abc", "b", function() error("boom") end)
        print(err)
        "#,
    );
    assert_eq!(
        out,
        "false\tstring\t[input:3: token_truncate: n must\n\
         false\tstring\t[input:4: re.find: bad pattern \"\n\
         false\tstring\t[bad argument #1 to 'lines' (str\n\
         input:11: boom\n"
    );
}

/// The Rust primitives the Lua library calls are rows of the one built-ins table: every
/// environment has each of them, read-only, and none is offered to the model (not in
/// `help`, the prompt's built-ins or the providers).
#[test]
fn the_library_primitives_are_built_ins_hidden_from_the_model() {
    use rlm_registry::conventions::builtins::{BUILTINS, BuiltinProvider};
    use rlm_registry::providers::Providers;

    let env = Environment::new(Registry::baked().clone(), Limits::default()).unwrap();
    let primitives: Vec<_> = BuiltinProvider::Primitives.functions().collect();
    assert!(!primitives.is_empty());
    for primitive in &primitives {
        let field = primitive.name.strip_prefix("_text_primitives.").unwrap();
        let code = format!("print(type(_text_primitives.{field}))");
        assert_eq!(output(&env, &code), "function\n", "{}", primitive.name);
    }
    let assignment = env.execute("_text_primitives.grep = print").unwrap_err();
    assert!(
        assignment.message().contains("cannot assign to built-in"),
        "{}",
        assignment.message()
    );
    let listed = output(&env, "print(help())");
    assert!(!listed.contains("_text_primitives"), "{listed}");
    assert!(listed.contains("re.find"), "{listed}");
    let providers = Providers::builtin();
    for builtin in BUILTINS {
        let offered = providers.get(builtin.name).is_some();
        assert_eq!(
            offered,
            builtin.provider != BuiltinProvider::Primitives,
            "{}",
            builtin.name
        );
    }
}

/// While an execution runs, its thread gets a tick every millisecond (it arms the limits
/// hook); a model call held back from it is never interrupted, however long it takes.
#[test]
fn slow_model_calls_are_not_interrupted_by_the_limits_ticks() {
    let server = OpenAiServer::always(Behavior::echo(Duration::from_millis(150)));
    let (env, _) = env_with(&server, Limits::default());
    let out = output(
        &env,
        "for i = 1, 3 do print(llm_query('q' .. i)) end
         print(table.concat(llm_query_batched({'a', 'b'}), ' '))",
    );
    assert_eq!(out, "echo: q1\necho: q2\necho: q3\necho: a echo: b\n");
    assert_eq!(server.request_count(), 5, "no call was retried");
}

/// The ticks are held back for the whole of a blocking call out of Lua: a user channel
/// that sleeps with a system call that a signal would cut short (`nanosleep` answers
/// `EINTR`) sleeps its full time, while the execution around it is watched as usual.
#[cfg(target_os = "linux")]
#[test]
fn a_blocking_host_call_sees_no_tick() {
    struct SleepyUser;
    impl rlm_registry::environment::User for SleepyUser {
        fn ask(&self, _: &str) -> Result<String, String> {
            let pause = libc::timespec {
                tv_sec: 0,
                tv_nsec: 50_000_000,
            };
            // SAFETY: a plain-data request and no remainder pointer.
            let slept = unsafe { libc::nanosleep(&pause, std::ptr::null_mut()) };
            match slept {
                0 => Ok("rested".to_string()),
                _ => Err(format!("cut short: {}", std::io::Error::last_os_error())),
            }
        }
        fn notify(&self, _: &str) -> Result<(), String> {
            Ok(())
        }
    }
    let env = Environment::builder(Registry::baked().clone())
        .limits(Limits {
            time: Duration::from_secs(2),
            ..Limits::default()
        })
        .user(Arc::new(SleepyUser))
        .build()
        .unwrap();
    let out = output(
        &env,
        "for i = 1, 4 do answer = ask_user('?') end print(answer)",
    );
    assert_eq!(out, "rested\n");
    let stopped = env.execute("ask_user('?') while true do end").unwrap_err();
    assert!(
        matches!(
            stopped,
            ExecError::Limit {
                kind: LimitKind::Time,
                ..
            }
        ),
        "{stopped:?}"
    );
}
