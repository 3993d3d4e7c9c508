//! JSON calls into the sandbox: `ToolCaller` validates named JSON arguments
//! against a function's schema and converts its Lua result back to JSON, and
//! `Environment::call_function` converts both ways for any function.

use crate::support;

use std::time::Duration;

use rlm_registry::Registry;
use rlm_registry::environment::{Environment, Limits};
use rlm_registry::tools::{CallError, ToolCaller};
use serde_json::json;
use support::tools::registry_with_callback;

fn caller() -> ToolCaller {
    ToolCaller::new(Registry::baked().clone(), Limits::default()).unwrap()
}

#[test]
fn json_calls_round_trip() {
    let caller = caller();
    assert_eq!(
        caller
            .call("word_count", &json!({"text": "one two three"}))
            .unwrap(),
        json!(3)
    );
    assert_eq!(
        caller.call("lines", &json!({"text": "a\nb\n\nc"})).unwrap(),
        json!(["a", "b", "", "c"])
    );
    // No lines: the empty table is `[]` where `string[]` is documented.
    assert_eq!(
        caller.call("lines", &json!({"text": ""})).unwrap(),
        json!([])
    );
    assert_eq!(
        caller
            .call("chunk_by_lines", &json!({"text": "1\n2\n3\n4\n5", "n": 2}))
            .unwrap(),
        json!(["1\n2", "3\n4", "5"])
    );
    assert_eq!(
        caller
            .call(
                "chunk_by_lines",
                &json!({"text": "1\n2\n3", "n": 2, "overlap": 1})
            )
            .unwrap(),
        json!(["1\n2", "2\n3"])
    );
    // A table-returning function: records become objects; an empty table is `{}`, as
    // `json.encode` writes it (`grep` documents `table[]`, which says no more).
    assert_eq!(
        caller
            .call(
                "grep",
                &json!({"text": "a\nerror x\nb", "pattern": "error", "context": 1})
            )
            .unwrap(),
        json!([{"line": 2, "text": "error x", "before": ["a"], "after": ["b"]}])
    );
    // An omitted optional parameter in the middle becomes nil.
    assert_eq!(
        caller
            .call(
                "grep",
                &json!({"text": "a.b\naxb", "pattern": ".", "plain": true})
            )
            .unwrap(),
        json!([{"line": 1, "text": "a.b", "before": {}, "after": {}}])
    );
}

#[test]
fn json_call_errors_are_precise() {
    let caller = caller();
    let error = caller.call("word_cont", &json!({"text": "x"})).unwrap_err();
    assert_eq!(
        error,
        CallError::UnknownFunction {
            name: "word_cont".into(),
            suggestion: Some("word_count".into())
        }
    );
    assert_eq!(
        error.to_string(),
        "unknown function `word_cont` (did you mean `word_count`?)"
    );

    let error = caller.call("word_count", &json!({})).unwrap_err();
    assert_eq!(
        error.to_string(),
        "invalid arguments for `word_count`: $: missing required property `text`"
    );
    let error = caller
        .call("chunk_by_lines", &json!({"text": "a", "n": 1.5}))
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "invalid arguments for `chunk_by_lines`: $.n: expected an integer, got 1.5"
    );
    let error = caller
        .call("word_count", &json!({"text": "a", "txt": "b"}))
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("unknown property `txt` (parameters: text)"),
        "{error}"
    );
    let error = caller.call("word_count", &json!(["a"])).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("expected an object of named arguments"),
        "{error}"
    );

    // A Lua error raised by the function.
    let error = caller
        .call("chunk_by_lines", &json!({"text": "a", "n": 0}))
        .unwrap_err();
    match &error {
        CallError::Execution { name, error } => {
            assert_eq!(name, "chunk_by_lines");
            assert!(error.message().contains("n must be at least 1"), "{error}");
        }
        other => panic!("{other:?}"),
    }

    let caller = ToolCaller::new(registry_with_callback(), Limits::default()).unwrap();
    assert!(matches!(
        caller.call("map_it", &json!({})),
        Err(CallError::NotExportable(_))
    ));
    assert_eq!(
        caller.call("twice", &json!({"x": 2.5})).unwrap(),
        json!(5.0)
    );
    assert_eq!(caller.tools().count(), 1);
    assert_eq!(caller.not_exportable().count(), 1);
}

#[test]
fn environment_call_function_converts_both_ways() {
    let env = Environment::new(Registry::baked().clone(), Limits::default()).unwrap();
    env.execute(
        "function echo(...) return ... end\n\
         function shape(t) return {n = #t.items, first = t.items[1], deep = {ok = t.flag}} end\n\
         function bad() return print end\n\
         function cyclic() local t = {}; t.t = t; return t end\n\
         function sparse() return {[1] = 'a', [3] = 'c'} end\n\
         function nan() return 0/0 end",
    )
    .unwrap();
    assert_eq!(env.call_function("echo", vec![]).unwrap(), json!(null));
    assert_eq!(
        env.call_function(
            "echo",
            vec![json!(1), json!("two"), json!(null), json!(true)]
        )
        .unwrap(),
        json!([1, "two", null, true])
    );
    assert_eq!(
        env.call_function("shape", vec![json!({"items": ["x", "y"], "flag": false})])
            .unwrap(),
        json!({"n": 2, "first": "x", "deep": {"ok": false}})
    );
    // The rules of `json.encode`, the path starting at `result`.
    let error = env.call_function("sparse", vec![]).unwrap_err();
    assert_eq!(
        error.message(),
        "the table at result is a sparse array (keys are not 1..n); fill the holes with json.null"
    );
    let error = env.call_function("bad", vec![]).unwrap_err();
    assert_eq!(error.message(), "cannot encode a function (at result)");
    let error = env.call_function("cyclic", vec![]).unwrap_err();
    assert_eq!(
        error.message(),
        "cycle: the table at result.t contains itself"
    );
    let error = env.call_function("nan", vec![]).unwrap_err();
    assert_eq!(error.message(), "NaN is not a JSON number (at result)");
    let error = env.call_function("missing_fn", vec![]).unwrap_err();
    assert_eq!(error.message(), "unknown function `missing_fn`");
    let error = env.call_function("wordcount", vec![]).unwrap_err();
    assert_eq!(
        error.message(),
        "unknown function `wordcount` (did you mean `word_count`?)"
    );
    // Limits apply.
    env.execute("function spin() while true do end end")
        .unwrap();
    let limited = Environment::new(
        Registry::baked().clone(),
        Limits {
            time: Duration::from_millis(50),
            ..Limits::default()
        },
    )
    .unwrap();
    limited
        .execute("function spin() while true do end end")
        .unwrap();
    let error = limited.call_function("spin", vec![]).unwrap_err();
    assert!(
        error.message().starts_with("time limit exceeded"),
        "{error}"
    );
    assert_eq!(
        limited
            .call_function("word_count", vec![json!("a b")])
            .unwrap(),
        json!(2)
    );
}
