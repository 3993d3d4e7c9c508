//! The call cache (`--cache FILE`): against the scripted server, which counts the
//! requests it gets, a run asked again sends nothing, processes share one file, a bad file
//! costs a warning and never the run (any bytes at all, as a property), the size cap
//! evicts the least recently used, `{cache = false}` asks anew, `rlm cache stats | clear`
//! read the file, and behind a cache a client's concurrency and a round's order hold.

use std::path::Path;
use std::process::Output;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use proptest::prelude::*;

use rlm_registry::Registry;
use rlm_registry::environment::Environment;
use rlm_registry::eval::{Scorer, Task};
use rlm_registry::llm::{
    CacheKey, CacheStore, Cached, CallCache, Completion, Llm, LlmClient, LlmConfig, LlmError,
    Request,
};
use rlm_registry::rlm::Rlm;
use serde_json::Value;

use crate::support::cli::{llm_args, rlm_command, stderr, stdout};
use crate::support::openai_server::{Behavior, OpenAiServer};
use crate::support::rlm_loop::{client, events_of, lua, turns};

const WARNING: &str = "warning: the call cache";

fn ask(server: &OpenAiServer, cache: &Path, args: &[&str]) -> Output {
    rlm_command()
        .arg("ask")
        .args(args)
        .args(["--cache", cache.to_str().unwrap()])
        .args(llm_args(&server.base_url(), "test-model"))
        .output()
        .expect("rlm runs")
}

fn cache_command(args: &[&str]) -> Output {
    rlm_command()
        .arg("cache")
        .args(args)
        .output()
        .expect("rlm runs")
}

/// A run of three calls: the root's first turn, its `llm_query`, its second turn.
fn three_call_server() -> OpenAiServer {
    OpenAiServer::start(
        vec![
            lua("x = llm_query('Name a colour.')\nprint(x)"),
            Behavior::reply_with_usage("teal", 7, 1),
            lua("FINAL('the colour is ' .. x)"),
        ],
        Behavior::status(500),
    )
}

/// The turn lines of a trace without what differs between two runs of it: timings, the
/// running token total and the `cached` mark.
fn comparable_turns(trace: &Path) -> Vec<Value> {
    let events = events_of(&std::fs::read_to_string(trace).unwrap());
    turns(&events)
        .into_iter()
        .map(|turn| {
            let mut turn = turn.clone();
            let object = turn.as_object_mut().unwrap();
            for field in ["elapsed_ms", "llm_ms", "at_ms", "run_tokens", "cached"] {
                object.remove(field);
            }
            for block in object["outputs"].as_array_mut().unwrap() {
                let block = block.as_object_mut().unwrap();
                block.remove("elapsed_ms");
                for call in block
                    .get_mut("sub_calls")
                    .and_then(|calls| calls.as_array_mut())
                    .into_iter()
                    .flatten()
                {
                    call.as_object_mut().unwrap().remove("cached");
                }
            }
            turn
        })
        .collect()
}

fn warnings(output: &Output) -> usize {
    stderr(output).matches(WARNING).count()
}

#[test]
fn a_second_identical_run_sends_nothing_and_gives_the_same_answer_and_trace() {
    let server = three_call_server();
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache.sqlite");
    let first_trace = dir.path().join("first.jsonl");
    let first = ask(
        &server,
        &cache,
        &["Q", "--trace", first_trace.to_str().unwrap()],
    );
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    assert_eq!(stdout(&first), "the colour is teal\n");
    assert_eq!(server.request_count(), 3);

    let second_trace = dir.path().join("second.jsonl");
    let second = ask(
        &server,
        &cache,
        &["Q", "--trace", second_trace.to_str().unwrap()],
    );
    assert_eq!(second.status.code(), Some(0), "{}", stderr(&second));
    assert_eq!(server.request_count(), 3, "nothing sent the second time");
    assert_eq!(stdout(&second), stdout(&first));
    assert_eq!(
        comparable_turns(&second_trace),
        comparable_turns(&first_trace)
    );
    let events = events_of(&std::fs::read_to_string(&second_trace).unwrap());
    for turn in turns(&events) {
        assert_eq!(turn["cached"], true, "{turn}");
        for block in turn["outputs"].as_array().unwrap() {
            for call in block["sub_calls"].as_array().into_iter().flatten() {
                assert_eq!(call["cached"], true, "a sub-call's hit is marked: {call}");
            }
        }
        assert_eq!(
            turn["run_tokens"], 0,
            "a cached answer costs nothing: {turn}"
        );
    }
    let first_events = events_of(&std::fs::read_to_string(&first_trace).unwrap());
    assert!(
        turns(&first_events)
            .iter()
            .all(|t| t.get("cached").is_none())
    );
    let live = stderr(&second);
    assert!(live.contains("· cached"), "{live}");
    assert!(live.contains("total    0 calls"), "{live}");
    assert!(live.contains("3 cached (38 tokens saved)"), "{live}");
    assert_eq!(warnings(&second), 0, "{live}");
}

/// The prompt of an `llm_query` built with `json.encode` of fifty keys: Lua keeps them in
/// an order seeded anew in every process, so only keys written sorted make the second
/// process's prompt the first one's, and its answer a hit.
#[test]
fn a_prompt_built_with_json_encode_is_served_from_the_cache_in_another_process() {
    let code = "local fields = {}\nfor i = 1, 50 do fields['field' .. i] = i end\n\
                x = llm_query('Summarise ' .. json.encode(fields))\nprint(x)";
    let server = OpenAiServer::start(
        vec![lua(code), Behavior::reply("fifty fields"), lua("FINAL(x)")],
        Behavior::status(500),
    );
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache.sqlite");
    let first = ask(&server, &cache, &["Q"]);
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    assert_eq!(stdout(&first), "fifty fields\n");
    assert_eq!(server.request_count(), 3);
    let sub_call = server.requests()[1].json().unwrap();
    let prompt = sub_call["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_string();
    let mut keys: Vec<String> = (1..=50).map(|i| format!("field{i}")).collect();
    keys.sort();
    let fields: Vec<String> = keys
        .iter()
        .map(|key| format!("\"{key}\":{}", &key["field".len()..]))
        .collect();
    assert_eq!(prompt, format!("Summarise {{{}}}", fields.join(",")));

    let second = ask(&server, &cache, &["Q"]);
    assert_eq!(second.status.code(), Some(0), "{}", stderr(&second));
    assert_eq!(stdout(&second), "fifty fields\n");
    assert_eq!(server.request_count(), 3, "the second process sent nothing");
}

#[test]
fn a_hit_spends_no_budget() {
    let server = three_call_server();
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache.sqlite");
    // Under a budget the prompt says so (`budget()`): both runs have one, so that they
    // send the same requests.
    let first = ask(&server, &cache, &["Q", "--max-time", "3600"]);
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    // Two calls would stop a run of three calls that were sent, and 20 tokens do not
    // hold one fresh call's worst case: the hits are answered all the same, and spend
    // none of either.
    let out = ask(
        &server,
        &cache,
        &[
            "Q",
            "--max-llm-calls",
            "2",
            "--max-tokens",
            "20",
            "--max-time",
            "3600",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "the colour is teal\n");
    assert_eq!(server.request_count(), 3);
    assert!(
        stderr(&out).contains("total    0 calls"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn two_processes_share_one_cache_file() {
    // Each question gets its own answer whatever the order the processes send them in.
    let server = OpenAiServer::always(Behavior::ByPrompt(
        (0..2)
            .map(|i| {
                (
                    format!("question {i}"),
                    lua(&format!("FINAL('answer {i}')")).after(Duration::from_millis(150)),
                )
            })
            .collect(),
    ));
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("shared.sqlite");
    let spawn = |i: usize| {
        rlm_command()
            .args(["ask", &format!("question {i}"), "--cache"])
            .arg(&cache)
            .args(llm_args(&server.base_url(), "test-model"))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("rlm starts")
    };
    for round in 0..2 {
        let children: Vec<_> = (0..2).map(spawn).collect();
        for (i, child) in children.into_iter().enumerate() {
            let out = child.wait_with_output().unwrap();
            assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
            assert_eq!(stdout(&out), format!("answer {i}\n"));
            assert_eq!(warnings(&out), 0, "round {round}: {}", stderr(&out));
        }
        assert_eq!(server.request_count(), 2, "round {round}");
    }
    let stats = CallCache::inspect(&cache).unwrap().stats().unwrap();
    assert_eq!((stats.entries, stats.hits, stats.misses), (2, 2, 2));
}

#[test]
fn a_corrupted_cache_file_warns_once_and_the_run_goes_on_uncached() {
    let server = three_call_server();
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache.sqlite");
    let garbage = b"SQLite format 3\0 and then nothing a database holds".repeat(100);
    std::fs::write(&cache, &garbage).unwrap();
    let out = ask(&server, &cache, &["Q"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "the colour is teal\n");
    assert_eq!(server.request_count(), 3);
    assert_eq!(warnings(&out), 1, "{}", stderr(&out));
    assert_eq!(std::fs::read(&cache).unwrap(), garbage, "left as it was");
    let stats = cache_command(&["stats", cache.to_str().unwrap()]);
    assert_eq!(stats.status.code(), Some(1), "{}", stderr(&stats));
}

#[test]
fn a_truncated_cache_file_never_gives_a_wrong_answer_or_fails_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache.sqlite");
    // Enough answers for the file to span many pages.
    {
        let filler = CallCache::open(&cache);
        for i in 0..300 {
            let key = CacheKey::of("elsewhere", "m", &Request::from(format!("filler {i}")));
            filler.store(&key, &Completion::new("x".repeat(2000)));
        }
    }
    let server = three_call_server();
    assert_eq!(ask(&server, &cache, &["Q"]).status.code(), Some(0));
    let size = std::fs::metadata(&cache).unwrap().len();
    for keep in [size / 2, 100] {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(&cache)
            .unwrap();
        file.set_len(keep).unwrap();
        drop(file);
        let server = three_call_server();
        let out = ask(&server, &cache, &["Q"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(stdout(&out), "the colour is teal\n");
        let live = stderr(&out);
        assert_eq!(warnings(&out), 1, "kept {keep} bytes: {live}");
        let warning = live.lines().find(|line| line.contains(WARNING)).unwrap();
        assert!(
            warning.starts_with(&format!(
                "warning: the call cache {} cannot be used (",
                cache.display()
            )) && warning.ends_with("); going on uncached"),
            "{warning}"
        );
        assert_eq!(
            server.request_count(),
            3,
            "kept {keep} bytes: every call sent, none answered from the cut file"
        );
    }
}

#[test]
fn another_schema_version_warns_and_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache.sqlite");
    drop(CallCache::open(&cache));
    let connection = rusqlite::Connection::open(&cache).unwrap();
    connection
        .execute_batch("PRAGMA user_version = 99")
        .unwrap();
    drop(connection);
    let server = three_call_server();
    let out = ask(&server, &cache, &["Q"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(warnings(&out), 1, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("schema version 99"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn eviction_at_the_cap_drops_the_least_recently_used_not_the_first_stored() {
    // Each answer is about 0.4 MiB: a 1 MiB cache holds two.
    let padding = "-".repeat(400 * 1024);
    let server = OpenAiServer::always(Behavior::ByPrompt(
        (0..3)
            .map(|i| {
                (
                    format!("question {i}"),
                    Behavior::reply(&format!(
                        "```lua\nFINAL('answer {i}')\n```\n<!--{padding}-->"
                    )),
                )
            })
            .collect(),
    ));
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache.sqlite");
    let ask_capped = |i: usize| {
        let question = format!("question {i}");
        let out = ask(&server, &cache, &[&question, "--cache-max-mb", "1"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(stdout(&out), format!("answer {i}\n"));
    };
    ask_capped(0);
    ask_capped(1);
    assert_eq!(server.request_count(), 2);
    // A hit writes an answer's time of use at a resolution of a second: used again past
    // it, the first answer stored becomes the most recently used.
    std::thread::sleep(Duration::from_millis(1100));
    ask_capped(0);
    assert_eq!(server.request_count(), 2, "a hit");
    ask_capped(2);
    assert_eq!(server.request_count(), 3);
    let stats = CallCache::inspect(&cache).unwrap().stats().unwrap();
    assert_eq!(stats.entries, 2, "{stats:?}");
    assert!(stats.bytes <= 1 << 20, "{stats:?}");
    ask_capped(0);
    assert_eq!(
        server.request_count(),
        3,
        "the first stored, used since, is kept (first in, first out would have dropped it)"
    );
    ask_capped(2);
    assert_eq!(server.request_count(), 3, "the newest is kept");
    ask_capped(1);
    assert_eq!(server.request_count(), 4, "the least recently used went");
}

#[test]
fn llm_query_with_cache_false_asks_for_a_fresh_answer() {
    let server = OpenAiServer::start(
        vec![
            Behavior::reply("first"),
            Behavior::reply("second"),
            Behavior::reply("third"),
        ],
        Behavior::status(500),
    );
    let dir = tempfile::tempdir().unwrap();
    let cache = Arc::new(CallCache::open(dir.path().join("cache.sqlite")));
    let env = Environment::builder(Registry::baked().clone())
        .llm(Arc::new(Cached::new(client(&server), cache)))
        .build()
        .unwrap();
    let run = |code: &str| env.execute(code).map(|e| e.output);
    assert_eq!(
        run(
            "print(llm_query('p'), llm_query('p'), llm_query('p', {cache = false}), llm_query('p'))"
        )
        .unwrap(),
        "first\tfirst\tsecond\tsecond\n",
        "the fresh answer is stored"
    );
    assert_eq!(server.request_count(), 2);
    assert_eq!(
        run("print(table.concat(llm_query_batched({'p', 'p'}), ','))").unwrap(),
        "second,second\n"
    );
    assert_eq!(
        run("print(table.concat(llm_query_batched({'p'}, {cache = false}), ','))").unwrap(),
        "third\n"
    );
    assert_eq!(server.request_count(), 3, "sent, whatever the cache holds");

    let error = run("llm_query('p', {cahce = false})")
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("llm_query: unknown option `cahce` (the options are: cache, images)"),
        "{error}"
    );
    let error = run("llm_query('p', {cache = 'no'})")
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("llm_query: opts.cache must be true or false, got string"),
        "{error}"
    );
    let error = run("llm_query('p', 3)").unwrap_err().to_string();
    assert!(
        error.contains("llm_query: bad argument #2 (an options table expected, got number)"),
        "{error}"
    );
}

#[test]
fn cache_stats_and_clear_read_and_empty_the_file() {
    let server = three_call_server();
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache.sqlite");
    let path = cache.to_str().unwrap();
    assert_eq!(ask(&server, &cache, &["Q"]).status.code(), Some(0));
    assert_eq!(ask(&server, &cache, &["Q"]).status.code(), Some(0));

    let stats = cache_command(&["stats", path]);
    assert_eq!(stats.status.code(), Some(0), "{}", stderr(&stats));
    let text = stdout(&stats);
    assert!(text.contains("entries  3 ("), "{text}");
    assert!(text.contains("hits     3 (50% of lookups)"), "{text}");
    assert!(text.contains("misses   3\n"), "{text}");
    assert!(
        text.contains("oldest   0 s ago") || text.contains("oldest   1 s ago"),
        "{text}"
    );

    // RLM_CACHE names the file when no argument does.
    let cleared = rlm_command()
        .args(["cache", "clear"])
        .env("RLM_CACHE", &cache)
        .output()
        .unwrap();
    assert_eq!(cleared.status.code(), Some(0), "{}", stderr(&cleared));
    assert_eq!(stdout(&cleared), format!("removed 3 answers from {path}\n"));
    let text = stdout(&cache_command(&["stats", path]));
    assert!(text.contains("entries  0 (0 B of answers)"), "{text}");
    assert!(text.contains("oldest   -\n"), "{text}");

    let missing = dir.path().join("missing.sqlite");
    let out = cache_command(&["stats", missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(!missing.exists(), "stats creates nothing");
    let out = rlm_command()
        .args(["cache", "stats"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("which cache?"), "{}", stderr(&out));
}

#[test]
fn rlm_toml_names_the_cache_and_no_cache_turns_it_off() {
    let server = OpenAiServer::always(lua("FINAL('ok')"));
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("rlm.toml"),
        "[cache]\npath = \"answers.sqlite\"\nmax_mb = 16\n",
    )
    .unwrap();
    let run = |extra: &[&str]| {
        rlm_command()
            .args(["ask", "Q"])
            .args(extra)
            .args(llm_args(&server.base_url(), "test-model"))
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    assert_eq!(run(&[]).status.code(), Some(0));
    assert!(dir.path().join("answers.sqlite").is_file());
    assert_eq!(run(&[]).status.code(), Some(0));
    assert_eq!(server.request_count(), 1);
    let out = run(&["--no-cache"]);
    assert_eq!(stdout(&out), "ok\n");
    assert_eq!(server.request_count(), 2, "sent");
}

#[test]
fn an_eval_run_again_with_its_cache_sends_nothing_and_gives_the_same_results() {
    let server = OpenAiServer::always(Behavior::ByPrompt(vec![
        ("(The context".to_string(), lua("FINAL('42')")),
        ("Question:".to_string(), Behavior::reply("42")),
        (String::new(), Behavior::status(500)),
    ]));
    let dir = tempfile::tempdir().unwrap();
    let tasks = dir.path().join("tasks.jsonl");
    let task = |id: &str, question: &str| Task {
        id: id.into(),
        question: question.into(),
        context: Some(format!("Somewhere in here, the answer to {id} is 42.\n")),
        context_file: None,
        answer: "42".into(),
        scorer: Scorer::Exact,
        family: None,
        size: None,
        schema: None,
        corpus: false,
    };
    rlm_registry::eval::write_tasks(
        std::fs::File::create(&tasks).unwrap(),
        &[task("a", "What is the answer?"), task("b", "And again?")],
    )
    .unwrap();
    let eval = |out: &Path, extra: &[&str]| {
        let output = rlm_command()
            .args(["eval", "--tasks", tasks.to_str().unwrap(), "--out"])
            .arg(out)
            .args(extra)
            .args(llm_args(&server.base_url(), "test-model"))
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        output
    };
    let first = dir.path().join("first");
    eval(&first, &[]);
    assert!(
        first.join("cache.sqlite").is_file(),
        "OUT/cache.sqlite by default"
    );
    let sent = server.request_count();
    assert_eq!(sent, 4, "two tasks, rlm and direct");

    let second = dir.path().join("second");
    let cache = first.join("cache.sqlite");
    let summary = stdout(&eval(&second, &["--cache", cache.to_str().unwrap()]));
    assert_eq!(server.request_count(), sent, "nothing sent");
    let outcome = |out: &Path| -> Vec<(String, String, f64)> {
        let mut results: Vec<(String, String, f64)> =
            std::fs::read_to_string(out.join("results.jsonl"))
                .unwrap()
                .lines()
                .map(|line| {
                    let r: Value = serde_json::from_str(line).unwrap();
                    (
                        format!("{}.{}", r["id"], r["method"]),
                        r["answer"].as_str().unwrap().to_string(),
                        r["score"].as_f64().unwrap(),
                    )
                })
                .collect();
        results.sort_by(|a, b| a.0.cmp(&b.0));
        results
    };
    assert_eq!(outcome(&second), outcome(&first));
    assert!(
        summary.contains("Call cache: 4 calls answered from the cache"),
        "{summary}"
    );

    let third = dir.path().join("third");
    eval(&third, &["--no-cache"]);
    assert!(!third.join("cache.sqlite").exists());
    assert_eq!(server.request_count(), 2 * sent);
}

/// A client of the scripted server that sends at most `concurrency` requests at once.
fn client_at(server: &OpenAiServer, concurrency: usize) -> LlmClient {
    let config = LlmConfig::new(server.base_url(), "test-model")
        .with_max_retries(0)
        .with_timeout(Duration::from_secs(10))
        .with_max_concurrency(concurrency);
    LlmClient::new(config).unwrap()
}

/// A `parallel_map` of `count` sub-calls (`item 1`, …), its entries given to `finish`
/// (`print`, `FINAL`) one a line: each gives how many answers had come back when it
/// started, then its answer.
fn parallel_map_code(count: usize, finish: &str) -> String {
    format!(
        "answered = 0\n\
         local items = {{}}\n\
         for i = 1, {count} do items[i] = 'item ' .. i end\n\
         local r = parallel_map(items, function(item)\n\
           local before = answered\n\
           local answer = llm_query(item)\n\
           answered = answered + 1\n\
           return before .. ' ' .. answer\n\
         end)\n\
         {finish}(table.concat(r, '\\n'))"
    )
}

/// What [`parallel_map_code`] prints when the calls go in rounds of four: entry `i`
/// starts once the rounds before it are answered, and its answer is its own.
fn in_rounds_of_four(count: usize) -> String {
    (1..=count)
        .map(|i| format!("{} echo: item {i}\n", (i - 1) / 4 * 4))
        .collect()
}

#[test]
fn behind_a_cache_the_clients_concurrency_and_a_rounds_order_hold() {
    let server = OpenAiServer::always(Behavior::echo(Duration::from_millis(60)));
    let dir = tempfile::tempdir().unwrap();
    let cache = Arc::new(CallCache::open(dir.path().join("cache.sqlite")));
    let env = Environment::builder(Registry::baked().clone())
        .llm(Arc::new(Cached::new(client_at(&server, 4), cache)))
        .build()
        .unwrap();
    let run = |count: usize| {
        env.execute(&parallel_map_code(count, "print"))
            .unwrap()
            .output
    };

    // Half of them first, so that the next run finds its first rounds in the cache.
    assert_eq!(run(20), in_rounds_of_four(20));
    assert_eq!(server.request_count(), 20);
    assert_eq!(
        run(40),
        in_rounds_of_four(40),
        "hits and misses in their places"
    );
    assert_eq!(server.request_count(), 40, "only the misses sent");
    assert_eq!(
        server.max_in_flight(),
        4,
        "the client's four at once, whatever the cache answered"
    );
}

#[test]
fn behind_a_cache_and_a_run_s_budgets_a_round_keeps_the_clients_concurrency() {
    let code = parallel_map_code(40, "FINAL");
    let server = OpenAiServer::always(Behavior::ByPrompt(vec![
        ("Count to forty".to_string(), lua(&code)),
        (String::new(), Behavior::echo(Duration::from_millis(60))),
    ]));
    let dir = tempfile::tempdir().unwrap();
    let cache = Arc::new(CallCache::open(dir.path().join("cache.sqlite")));
    let rlm = Rlm::new(
        Arc::new(client_at(&server, 4)),
        Registry::baked().clone(),
        3,
    )
    .cache(cache);
    let report = rlm.run_report("Count to forty.", None, None);
    assert_eq!(
        report.result.as_deref().ok(),
        Some(in_rounds_of_four(40).trim_end()),
        "{:?}",
        report.result
    );
    assert_eq!(server.request_count(), 41, "one turn and forty sub-calls");
    assert_eq!(server.max_in_flight(), 4);
}

/// Answers `model: <prompt>`, counting the requests.
#[derive(Default)]
struct Counting(AtomicUsize);

impl Llm for Counting {
    fn complete(&self, request: Request) -> Result<Completion, LlmError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(Completion::new(format!("model: {}", request.messages[0].text())).with_tokens(3, 2))
    }
}

/// The bytes of a working cache file holding answers to `q0` … `q9` (keys of a model that
/// reports no server, as [`Counting`] does), to cut and scramble.
fn working_cache_file() -> &'static [u8] {
    static FILE: OnceLock<Vec<u8>> = OnceLock::new();
    FILE.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cache.sqlite");
        let cache = CallCache::open(&path);
        for i in 0..10 {
            let key = CacheKey::of("", "", &Request::from(format!("q{i}")));
            cache.store(&key, &Completion::new(format!("stored {i}")));
        }
        drop(cache);
        std::fs::read(&path).unwrap()
    })
}

/// A cache file's bytes: any at all, or a working file cut short and with bytes changed.
fn cache_file_bytes() -> impl Strategy<Value = (Vec<u8>, bool)> {
    let any_bytes = prop::collection::vec(any::<u8>(), 0..4096).prop_map(|bytes| (bytes, true));
    let scrambled = (
        prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..24),
        prop::option::of(any::<prop::sample::Index>()),
    )
        .prop_map(|(changes, cut)| {
            let mut bytes = working_cache_file().to_vec();
            for (at, byte) in changes {
                let at = at.index(bytes.len());
                bytes[at] = byte;
            }
            if let Some(cut) = cut {
                bytes.truncate(cut.index(bytes.len()));
            }
            (bytes, false)
        });
    prop_oneof![any_bytes, scrambled]
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 96,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Whatever the file holds, the cache opens it without a panic and every call is
    /// answered: by the file while it works, else (one warning, then uncached) by the model.
    #[test]
    fn any_bytes_as_the_cache_file_give_a_working_cache_or_an_uncached_run((bytes, arbitrary) in cache_file_bytes()) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cache.sqlite");
        std::fs::write(&path, &bytes).unwrap();
        let cache = Arc::new(CallCache::open(&path));
        let model = Arc::new(Counting::default());
        let llm = Cached::new(Arc::clone(&model), Arc::clone(&cache) as Arc<dyn CacheStore>);

        let answer = llm.complete("q3".into());
        let answer = answer.map_err(|e| TestCaseError::fail(e.to_string()))?;
        if arbitrary {
            // Bytes that are not a file this crate wrote hold no answer to give back.
            prop_assert_eq!(answer.content, "model: q3");
            prop_assert!(!answer.cached);
        }
        let batch = llm.complete_batch(vec!["q1".into(), "a new question".into()]);
        prop_assert_eq!(batch.len(), 2);
        for answer in &batch {
            prop_assert!(answer.is_ok(), "{:?}", answer);
        }
        prop_assert_eq!(
            batch[1].as_ref().unwrap().content.as_str(),
            "model: a new question"
        );
        let again = llm.complete("a new question".into()).unwrap();
        prop_assert_eq!(again.content.as_str(), "model: a new question");
        if cache.is_active() {
            // Nothing cut or changed (an empty file is a new cache): it keeps what it is
            // given. A scrambled file that still opens may lose a row without a word
            // (SQLite checks no sums), or fail when every row is read: no panic either way.
            if arbitrary || bytes == working_cache_file() {
                prop_assert!(again.cached, "a working file keeps what it is given");
            }
            let _ = cache.stats();
        } else {
            prop_assert!(!again.cached);
            prop_assert!(cache.stats().is_err(), "a file given up on is not read");
            if arbitrary && !bytes.is_empty() {
                prop_assert_eq!(std::fs::read(&path).unwrap(), bytes, "left as it was");
            }
        }
        drop(llm);
        drop(cache);
        // `rlm cache stats | clear` on it: an answer or an error, never a panic.
        if let Ok(inspected) = CallCache::inspect(&path) {
            let _ = inspected.stats();
            let _ = inspected.clear();
        }
    }
}
