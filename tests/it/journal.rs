//! The journal: what a block read from outside the sandbox (the clock, the random seed,
//! the user, host functions with effects) recorded in the trace and given back on
//! replay; checkpoints, restore and forks of an environment; `pairs` order stable
//! across environments and processes.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use rlm_registry::Registry;
use rlm_registry::environment::{Checkpoint, Environment, JournalEntry, User};
use rlm_registry::providers::{Effect, HostFunction, Provider, Providers, StoreProvider};
use rlm_registry::rlm::Replay;
use serde_json::{Value, json};

use crate::support::openai_server::{Behavior, OpenAiServer};
use crate::support::rlm_loop::{lua, rlm};

/// Code reading the clock and drawing random numbers, and printing all of it.
const CLOCK_AND_DICE: &str = "t, c, d = os.time(), os.clock(), os.date('%H:%M:%S')\n\
     local r = {} for i = 1, 5 do r[i] = math.random(1000000) end\n\
     print(t, c, d, table.concat(r, ','))";

/// The journal of the first block of the trace at `path`'s first turn.
fn first_block_journal(path: &std::path::Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    let turn: Value = text
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .find(|record| record["event"] == "turn")
        .unwrap();
    turn["outputs"][0]["journal"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// A run of `script` against the scripted server, with `providers`, traced: its
/// directory (kept alive) and its trace.
fn recorded(script: Vec<Behavior>, providers: Arc<Providers>) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.jsonl");
    let server = OpenAiServer::start(script, Behavior::status(500));
    rlm(&server, 5)
        .providers(providers)
        .trace_file(&path)
        .unwrap()
        .run("Q", None)
        .unwrap();
    (dir, path)
}

#[test]
fn the_clock_and_random_numbers_are_journaled_and_replay_identical() {
    let script = vec![lua(CLOCK_AND_DICE), lua("FINAL(t)")];
    let (_dir, path) = recorded(script, Arc::new(Providers::builtin()));
    let calls: Vec<String> = first_block_journal(&path)
        .iter()
        .map(|entry| entry["call"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(calls, ["os.time", "os.clock", "os.date", "math.randomseed"]);
    // Later, in another second, with another random state: the replay still matches.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let report = Replay::from_file(&path).unwrap().run().unwrap();
    assert!(report.is_identical(), "{report:?}");
}

#[test]
fn code_reading_the_clock_diverges_when_its_journal_is_taken_out() {
    let script = vec![lua("print(os.clock() + math.random())"), lua("FINAL('x')")];
    let (_dir, path) = recorded(script, Arc::new(Providers::builtin()));
    let text = std::fs::read_to_string(&path).unwrap();
    let stripped: String = text
        .lines()
        .map(|line| {
            let mut record: Value = serde_json::from_str(line).unwrap();
            if let Some(outputs) = record["outputs"].as_array_mut() {
                outputs.iter_mut().for_each(|block| {
                    block.as_object_mut().unwrap().remove("journal");
                });
            }
            format!("{record}\n")
        })
        .collect();
    let report = Replay::from_jsonl(&stripped).unwrap().run().unwrap();
    assert!(
        !report.is_identical(),
        "the journal is what made it identical"
    );
}

#[test]
fn a_store_write_is_journaled_once_and_replay_rebuilds_the_store() {
    let store_providers = || {
        let mut providers = Providers::builtin();
        providers.register(StoreProvider::new(1 << 20)).unwrap();
        Arc::new(providers)
    };
    let script = vec![
        lua("store_set('k', {1, 2})"),
        lua("print(json.encode(store_get('k')))"),
        lua("FINAL('done')"),
    ];
    let (_dir, path) = recorded(script, store_providers());
    assert_eq!(
        first_block_journal(&path),
        [json!({"call": "store_set"})],
        "one write, journaled once"
    );
    let report = Replay::from_file(&path)
        .unwrap()
        .providers(store_providers())
        .run()
        .unwrap();
    assert!(
        report.is_identical(),
        "the rebuilt store answers the read: {report:?}"
    );
}

/// A host function with an effect, counting its calls.
struct Counted {
    effect: Effect,
    calls: Arc<AtomicUsize>,
}

impl Provider for Counted {
    fn name(&self) -> &str {
        "counted"
    }
    fn description(&self) -> &str {
        "A counter."
    }
    fn functions(&self) -> Vec<HostFunction> {
        let calls = Arc::clone(&self.calls);
        vec![
            HostFunction::typed(
                "bump",
                "--- Counts a call.\n---@return integer n The calls so far",
                move |_, (): ()| Ok::<_, String>(calls.fetch_add(1, Ordering::SeqCst) + 1),
            )
            .effect(self.effect),
        ]
    }
}

fn environment_with(provider: impl Provider + 'static) -> Environment {
    let mut providers = Providers::builtin();
    providers.register(provider).unwrap();
    Environment::builder(Registry::baked().clone())
        .providers(Arc::new(providers))
        .build()
        .unwrap()
}

#[test]
fn an_external_function_is_not_called_again_on_restore_and_a_pure_one_is() {
    // A pure function is called again, so this impure one "declared pure" counts 2.
    for (effect, calls_after_restore) in [(Effect::External, 1), (Effect::Pure, 2)] {
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = || Counted {
            effect,
            calls: Arc::clone(&calls),
        };
        let env = environment_with(counted());
        env.execute("n = bump()").unwrap();
        let checkpoint = env.checkpoint().unwrap();
        let restored = environment_with(counted());
        assert!(restored.restore(&checkpoint).unwrap().is_empty());
        let n = restored.get_global("n").unwrap();
        assert_eq!(n, json!(calls_after_restore), "{effect:?}");
        assert_eq!(
            calls.load(Ordering::SeqCst),
            calls_after_restore,
            "{effect:?}"
        );
    }
}

#[test]
fn files_are_not_written_again_and_reads_give_the_recorded_text_on_restore() {
    use rlm_registry::providers::{FilesConfig, FilesProvider};
    let dir = tempfile::tempdir().unwrap();
    let files = || {
        let mut config = FilesConfig::new(dir.path());
        config.writable = true;
        FilesProvider::new(config).unwrap()
    };
    let env = environment_with(files());
    env.execute("write_file('a.txt', 'one') text = read_file('a.txt')")
        .unwrap();
    let checkpoint = env.checkpoint().unwrap();
    std::fs::write(dir.path().join("a.txt"), "changed since").unwrap();
    let restored = environment_with(files());
    restored.restore(&checkpoint).unwrap();
    assert_eq!(restored.get_global("text").unwrap(), json!("one"));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a.txt")).unwrap(),
        "changed since",
        "the write is not repeated"
    );
}

/// A fresh environment (no context) with `env`'s checkpoint restored, nothing diverged.
fn restored_from(env: &Environment) -> Environment {
    let restored = Environment::builder(Registry::baked().clone())
        .build()
        .unwrap();
    let diverged = restored.restore(&env.checkpoint().unwrap()).unwrap();
    assert!(diverged.is_empty(), "{diverged:?}");
    restored
}

struct Answers;

impl User for Answers {
    fn ask(&self, question: &str) -> Result<String, String> {
        Ok(format!("yes to {question}"))
    }
    fn notify(&self, _: &str) -> Result<(), String> {
        Ok(())
    }
}

#[test]
fn the_users_answer_is_given_back_where_there_is_no_user() {
    let env = Environment::builder(Registry::baked().clone())
        .user(Arc::new(Answers))
        .build()
        .unwrap();
    env.execute("a = ask_user('go?')").unwrap();
    assert_eq!(env.last_journal()[0].call, "ask_user");
    let restored = restored_from(&env);
    assert_eq!(restored.get_global("a").unwrap(), json!("yes to go?"));
    let live = restored.execute("ask_user('again?')").unwrap_err();
    assert!(
        live.message()
            .starts_with("input:1: ask_user is not available here"),
        "past the record there is no user: {}",
        live.message()
    );
}

#[test]
fn a_notification_is_journaled_and_not_sent_again() {
    let env = Environment::builder(Registry::baked().clone())
        .user(Arc::new(Answers))
        .build()
        .unwrap();
    env.execute("notify_user('half way')").unwrap();
    assert_eq!(
        env.last_journal(),
        [JournalEntry::value("notify_user", Value::Null)]
    );
    // No user here: a notification sent again would fail the step.
    let restored = restored_from(&env);
    assert_eq!(restored.last_journal(), env.last_journal());
}

#[test]
fn the_clock_and_random_numbers_are_equal_after_restore_and_in_a_fork() {
    let env = Environment::builder(Registry::baked().clone())
        .build()
        .unwrap();
    env.execute(CLOCK_AND_DICE).unwrap();
    let printed = env.execute(CLOCK_AND_DICE).unwrap().output;
    let draw = "print(math.random(1000000), os.time() == t)";
    let next = env.execute(draw).unwrap().output;
    let checkpoint = Checkpoint::from_bytes(&env.checkpoint().unwrap().to_bytes()).unwrap();
    let restored = Environment::builder(Registry::baked().clone())
        .build()
        .unwrap();
    assert_eq!(restored.restore(&checkpoint).unwrap(), Vec::<String>::new());
    for name in ["t", "c", "d"] {
        assert_eq!(
            restored.get_global(name).unwrap(),
            env.get_global(name).unwrap()
        );
    }
    // The generator's state came back too: the next draw is the same in both.
    let fork = env.fork().unwrap();
    let after = "print(math.random(1000000))";
    let expected = env.execute(after).unwrap().output;
    assert_eq!(restored.execute(after).unwrap().output, expected);
    assert_eq!(fork.execute(after).unwrap().output, expected);
    assert!(!printed.is_empty() && !next.is_empty());
}

#[test]
fn a_re_execution_asking_for_another_value_gets_a_live_one_and_it_is_noted() {
    let env = Environment::builder(Registry::baked().clone())
        .build()
        .unwrap();
    env.give_back_journal(vec![JournalEntry::value("os.clock", json!(0.5))]);
    env.execute("t = os.time()").unwrap();
    assert!(env.get_global("t").unwrap().as_i64().unwrap() > 1_600_000_000);
    let noted = env.take_journal_divergences();
    assert_eq!(noted.len(), 1, "{noted:?}");
    assert!(noted[0].contains("`os.time` where the record has `os.clock`"));
}

#[test]
fn a_fork_is_independent_and_keeps_the_context() {
    let env = Environment::builder(Registry::baked().clone())
        .build()
        .unwrap();
    env.set_context("a\nb\nc\n").unwrap();
    env.execute("seen = {count = line_count(context)}").unwrap();
    let fork = env.fork().unwrap();
    fork.execute("seen.count = seen.count + 1 extra = true")
        .unwrap();
    assert_eq!(env.get_global("seen").unwrap(), json!({"count": 3}));
    assert_eq!(env.get_global("extra").unwrap(), Value::Null);
    assert_eq!(fork.get_global("seen").unwrap(), json!({"count": 4}));
    assert_eq!(fork.execute("print(#context)").unwrap().output, "6\n");
}

#[test]
fn globals_set_from_the_host_and_failed_steps_are_restored_as_they_ran() {
    let env = Environment::builder(Registry::baked().clone())
        .build()
        .unwrap();
    env.set_global("given", &json!({"a": [1, 2]})).unwrap();
    env.execute("x = 1 error('stop') x = 2").unwrap_err();
    let restored = restored_from(&env);
    assert_eq!(restored.get_global("given").unwrap(), json!({"a": [1, 2]}));
    assert_eq!(restored.get_global("x").unwrap(), json!(1));
}

#[test]
fn a_bad_checkpoint_is_refused_with_a_clear_error() {
    let garbage = Checkpoint::from_bytes(b"\x00not json").unwrap_err();
    assert!(
        garbage
            .to_string()
            .starts_with("not a checkpoint this version reads"),
        "{garbage}"
    );

    let env = Environment::builder(Registry::baked().clone())
        .build()
        .unwrap();
    env.set_context("the context").unwrap();
    env.execute("x = 1").unwrap();
    let bytes = env.checkpoint().unwrap().to_bytes();
    let mut other_version: Value = serde_json::from_slice(&bytes).unwrap();
    other_version["version"] = json!(99);
    let error = Checkpoint::from_bytes(other_version.to_string().as_bytes()).unwrap_err();
    assert_eq!(
        error.to_string(),
        "not a checkpoint this version reads: it is version 99; this version reads version 1"
    );

    let checkpoint = Checkpoint::from_bytes(&bytes).unwrap();
    let elsewhere = Environment::builder(Registry::baked().clone())
        .build()
        .unwrap();
    elsewhere.set_context("another context").unwrap();
    let error = elsewhere.restore(&checkpoint).unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("the checkpoint was taken with another context (sha256 "),
        "{error}"
    );
    assert_eq!(
        elsewhere.get_global("x").unwrap(),
        Value::Null,
        "nothing ran"
    );

    let no_context = Environment::builder(Registry::baked().clone())
        .build()
        .unwrap();
    assert!(
        no_context
            .restore(&checkpoint)
            .unwrap_err()
            .to_string()
            .contains("this environment's is none")
    );

    let other_registry = Registry::from_map([(
        "f",
        "--- F.\n---@return integer\nfunction f() return 1 end\n",
    )])
    .unwrap();
    let registry_env = Environment::builder(other_registry).build().unwrap();
    registry_env.set_context("the context").unwrap();
    let error = registry_env.restore(&checkpoint).unwrap_err();
    assert!(error.to_string().contains("another registry"), "{error}");

    let used = Environment::builder(Registry::baked().clone())
        .build()
        .unwrap();
    used.set_context("the context").unwrap();
    used.execute("y = 2").unwrap();
    let error = used.restore(&checkpoint).unwrap_err();
    assert!(error.to_string().contains("fresh environment"), "{error}");
}

/// The order `pairs` visits 200 string keys in, in a fresh environment.
const PAIRS_ORDER: &str = "local t = {} for i = 1, 200 do t['key' .. i] = i end\n\
     local order = {} for k in pairs(t) do order[#order + 1] = k end\n\
     print(table.concat(order, ','))";

#[test]
fn pairs_order_over_string_keys_is_the_same_in_two_fresh_environments() {
    let order = || {
        let env = Environment::builder(Registry::baked().clone())
            .build()
            .unwrap();
        env.execute(PAIRS_ORDER).unwrap().output
    };
    let first = order();
    // Environments made at other addresses, at another time.
    let _spacer: Vec<Environment> = (0..3)
        .map(|_| {
            Environment::builder(Registry::baked().clone())
                .build()
                .unwrap()
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(1100));
    assert_eq!(order(), first);
}

#[test]
fn pairs_order_over_string_keys_is_the_same_in_two_processes() {
    use crate::support::cli::{rlm_command, stdout};
    let order = || stdout(&rlm_command().args(["exec", PAIRS_ORDER]).output().unwrap());
    let first = order();
    assert_eq!(first.split(',').count(), 200);
    std::thread::sleep(std::time::Duration::from_millis(1100));
    assert_eq!(order(), first);
}

#[test]
fn a_replayed_run_printing_pairs_order_does_not_diverge() {
    let script = vec![lua(PAIRS_ORDER), lua("FINAL('listed')")];
    let (_dir, path) = recorded(script, Arc::new(Providers::builtin()));
    let out = crate::support::cli::rlm_command()
        .arg("replay")
        .arg(&path)
        .output()
        .unwrap();
    let shown = crate::support::cli::stdout(&out);
    assert!(shown.starts_with("identical"), "{shown}");
}

/// A model that answers with the prompt's length, counting its calls.
struct Measure(AtomicUsize);

impl rlm_registry::llm::Llm for Measure {
    fn complete(
        &self,
        request: rlm_registry::llm::Request,
    ) -> Result<rlm_registry::llm::Completion, rlm_registry::llm::LlmError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        let length = request.messages[0].text().len();
        Ok(rlm_registry::llm::Completion::new(length.to_string()))
    }
}

#[test]
fn sub_call_answers_come_from_the_checkpoint_and_no_model_is_asked() {
    let model = Arc::new(Measure(AtomicUsize::new(0)));
    let env = Environment::builder(Registry::baked().clone())
        .llm(Arc::clone(&model) as Arc<dyn rlm_registry::llm::Llm>)
        .build()
        .unwrap();
    env.execute("one = llm_query('abc') many = llm_query_batched({'a', 'bb'})")
        .unwrap();
    assert_eq!(model.0.load(Ordering::SeqCst), 3);
    let restored = restored_from(&env);
    assert_eq!(restored.get_global("one").unwrap(), json!("3"));
    assert_eq!(restored.get_global("many").unwrap(), json!(["1", "2"]));
    assert_eq!(
        model.0.load(Ordering::SeqCst),
        3,
        "no model was asked again"
    );
}
