//! One Lua ↔ JSON mapping for every surface: each case of `tests/fixtures/json_mapping`
//! comes out as the same JSON, or is refused with the same message, through
//! `json.encode` / `json.decode`, `Environment::call_function`, `get_global` /
//! `set_global` (and their host forms, `get_global_value` / `set_global_value`), a host
//! function, and the JSON API and MCP `tools/call` of a real `rlm serve --http`; JSON
//! values go into Lua the same way through each of them; and `json.encode` writes the
//! same text in every process.

use crate::support;

use std::path::Path;
use std::sync::{Arc, Mutex};

use rlm_registry::Registry;
use rlm_registry::environment::{
    Environment, ExecError, GlobalError, GlobalValue, LimitKind, Limits,
};
use rlm_registry::providers::{HostFunction, Providers};
use rmcp::model::CallToolResult;
use serde_json::{Value, json};
use support::sandbox::{caught_here as caught, output, patient};
use support::serve::{ServedProcess, bounded, call, is_error, request, text};

const FIXTURES: &str = "tests/fixtures/json_mapping";

/// `{"x": {"x": … {}}}`, `levels` objects deep.
fn nested_objects(levels: usize) -> Value {
    (1..levels).fold(json!({}), |inner, _| json!({ "x": inner }))
}

/// `[[…[]]]`, `levels` arrays deep.
fn nested_arrays(levels: usize) -> Value {
    (1..levels).fold(json!([]), |inner, _| json!([inner]))
}

/// The cases that cross, with the JSON each must be on every surface.
fn crossing() -> Vec<(&'static str, Value)> {
    vec![
        (
            "nested",
            json!({"a": {"b": [1, 2, {"c": "x", "d": false}]}, "s": "héllo ✓", "t": true}),
        ),
        ("nully", json!({"value": "a", "missing": null, "empty": {}})),
        ("null", json!(null)),
        ("empty", json!({})),
        ("empty_array", json!([])),
        ("array", json!([1, "two", null, {}])),
        ("sequence_with_null", json!([1, null, 3])),
        (
            "big_integers",
            json!([
                9007199254740993i64,
                -9007199254740993i64,
                i64::MAX,
                i64::MIN
            ]),
        ),
        ("floats", json!([0.1, 2.0, -2.5, 1.5e300, 1e-300, 5e-324])),
        (
            "escapes",
            json!({"s": "tab\there \"quoted\" back\\slash \u{1} end"}),
        ),
        ("keys", json!({"two words": 1, "": 2, "✓": 3})),
        ("deep_ok", nested_objects(100)),
        ("nothing", json!(null)),
        ("several", json!([1, "two", null])),
    ]
}

/// The cases refused, with the message each is refused with, the path's start left as
/// `{root}` (`value` in `json.encode`, `result` for a call, …).
fn refused() -> Vec<(&'static str, String)> {
    vec![
        ("nan", "NaN is not a JSON number (at {root}.x)".into()),
        ("inf", "inf is not a JSON number (at {root}.list[2])".into()),
        ("neg_inf", "-inf is not a JSON number (at {root})".into()),
        (
            "non_utf8",
            "the string at {root}.s is not valid UTF-8 (byte 2)".into(),
        ),
        (
            "cycle",
            "cycle: the table at {root}.items[1] contains itself".into(),
        ),
        (
            "too_deep",
            format!(
                "nested deeper than 100 levels (at {{root}}{})",
                ".x".repeat(100)
            ),
        ),
        ("a_function", "cannot encode a function (at {root}.f)".into()),
        (
            "mixed_keys",
            "the table at {root} has key \"x\" among integer keys: an object's keys must all be strings, an array's 1..n".into(),
        ),
    ]
}

fn at(message: &str, root: &str) -> String {
    message.replace("{root}", root)
}

/// The fixture registry (over the baked one).
fn registry() -> Registry {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURES);
    match Registry::baked().with_paths(&[fixtures]) {
        Ok(registry) => registry,
        Err(error) => panic!("fixture registry: {}", error.render(false)),
    }
}

/// The built-in providers and the host function `probe`, which hands its argument back
/// and keeps what it was given in `seen`.
fn providers_with_probe(seen: Arc<Mutex<Vec<Value>>>) -> Arc<Providers> {
    let probe = HostFunction::typed(
        "probe",
        "--- Hands its argument back.\n---@param value any The value\n---@return any value The same value",
        move |_, (value,): (Value,)| {
            seen.lock().unwrap().push(value.clone());
            Ok::<_, String>(value)
        },
    );
    let mut providers = Providers::builtin();
    providers.register_function("probes", probe).unwrap();
    Arc::new(providers)
}

/// An environment over the fixtures with `probe`, and what `probe` was given.
fn environment() -> (Environment, Arc<Mutex<Vec<Value>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let env = Environment::builder(registry())
        .providers(providers_with_probe(Arc::clone(&seen)))
        .build()
        .unwrap();
    (env, seen)
}

/// The Lua expression of a case's value: all its values, for the case returning several.
fn case_value(case: &str) -> String {
    match case {
        "several" => "{json_case('several')}".to_string(),
        _ => format!("json_case('{case}')"),
    }
}

#[test]
fn every_case_crosses_as_the_same_json_on_every_in_process_surface() {
    let (env, seen) = environment();
    for (case, expected) in crossing() {
        let value = case_value(case);
        // `json.encode`, its keys sorted as serde_json sorts an object's: the same text.
        let sorted = output(
            &env,
            &format!("print(json.encode({value}, {{sort_keys = true}}))"),
        );
        assert_eq!(sorted, format!("{expected}\n"), "{case}: json.encode");
        let plain = output(&env, &format!("print(json.encode({value}))"));
        let parsed: Value = serde_json::from_str(&plain).unwrap();
        assert_eq!(parsed, expected, "{case}: json.encode unsorted");
        // `json.decode` gives back a value that encodes the same.
        let decoded = output(
            &env,
            &format!("print(json.encode(json.decode(json.encode({value})), {{sort_keys = true}}))"),
        );
        assert_eq!(decoded, sorted, "{case}: json.decode");
        // `call_function`.
        let called = env.call_function("json_case", vec![json!(case)]).unwrap();
        assert_eq!(called, expected, "{case}: call_function");
        // `get_global`, then `set_global` of the same JSON read back by Lua.
        env.execute(&format!("x = {value}")).unwrap();
        assert_eq!(env.get_global("x").unwrap(), expected, "{case}: get_global");
        assert_eq!(
            env.get_global_value("x").unwrap(),
            GlobalValue::Json(expected.clone()),
            "{case}: get_global_value"
        );
        env.set_global("y", &expected).unwrap();
        let set = output(&env, "print(json.encode(y, {sort_keys = true}))");
        assert_eq!(set, sorted, "{case}: set_global");
        env.set_global_value("y", &GlobalValue::Json(expected.clone()))
            .unwrap();
        let set = output(&env, "print(json.encode(y, {sort_keys = true}))");
        assert_eq!(set, sorted, "{case}: set_global_value");
        // A host function: the JSON it is given, and the Lua value it hands back.
        seen.lock().unwrap().clear();
        let round = output(
            &env,
            &format!("print(json.encode(probe({value}), {{sort_keys = true}}))"),
        );
        assert_eq!(
            seen.lock().unwrap().as_slice(),
            std::slice::from_ref(&expected),
            "{case}: host argument"
        );
        assert_eq!(round, sorted, "{case}: host result");
    }
}

#[test]
fn every_refusal_reads_the_same_on_every_in_process_surface() {
    let (env, _) = environment();
    for (case, message) in refused() {
        let value = case_value(case);
        assert_eq!(
            caught(&env, &format!("json.encode({value})")),
            format!("json.encode: {}", at(&message, "value")),
            "{case}: json.encode"
        );
        let error = env
            .call_function("json_case", vec![json!(case)])
            .unwrap_err();
        assert_eq!(
            error.message(),
            at(&message, "result"),
            "{case}: call_function"
        );
        env.execute(&format!("x = {value}")).unwrap();
        let error = env.get_global("x").unwrap_err();
        assert_eq!(error.message(), at(&message, "x"), "{case}: get_global");
        assert_eq!(
            env.get_global_value("x").unwrap_err(),
            GlobalError::Refused(at(&message, "x")),
            "{case}: get_global_value"
        );
        assert_eq!(
            caught(&env, &format!("probe({value})")),
            format!("probe: {}", at(&message, "argument 1")),
            "{case}: host argument"
        );
    }
}

#[test]
fn json_values_go_into_lua_the_same_way_on_every_in_process_surface() {
    let (env, _) = environment();
    for (case, value) in crossing() {
        let text = value.to_string();
        // A call's argument, as Lua encodes it back.
        let called = env.call_function("json_text", vec![value.clone()]).unwrap();
        assert_eq!(called, json!(text), "{case}: call_function");
        // A global.
        env.set_global("y", &value).unwrap();
        assert_eq!(
            output(&env, "print(json.encode(y, {sort_keys = true}))"),
            format!("{text}\n"),
            "{case}: set_global"
        );
        // `json.decode` of its text.
        env.set_global("text", &json!(text)).unwrap();
        assert_eq!(
            output(
                &env,
                "print(json.encode(json.decode(text), {sort_keys = true}))"
            ),
            format!("{text}\n"),
            "{case}: json.decode"
        );
    }
}

#[test]
fn json_nested_too_deep_for_lua_is_refused_on_every_in_process_surface() {
    let (env, _) = environment();
    let deep = nested_arrays(101);
    let path = "[1]".repeat(100);
    let message = |root: &str| format!("nested deeper than 100 levels (at {root}{path})");
    let error = env
        .call_function("json_text", vec![deep.clone()])
        .unwrap_err();
    assert_eq!(error.message(), message("argument 1"));
    let error = env.set_global("y", &json!({"a": deep})).unwrap_err();
    assert_eq!(
        error.message(),
        format!("nested deeper than 100 levels (at y.a{})", &path[3..])
    );
    let error = env
        .set_global_value("y", &GlobalValue::Json(json!({"a": deep})))
        .unwrap_err();
    assert_eq!(
        error,
        GlobalError::Refused(format!(
            "nested deeper than 100 levels (at y.a{})",
            &path[3..]
        ))
    );
    env.set_global("text", &json!(deep.to_string())).unwrap();
    let decoded = caught(&env, "json.decode(text)");
    assert!(
        decoded.starts_with("json.decode: nested deeper than 100 levels at line 1, column "),
        "{decoded}"
    );
    // A hundred levels are fine everywhere.
    let hundred = nested_arrays(100);
    let called = env
        .call_function("json_text", vec![hundred.clone()])
        .unwrap();
    assert_eq!(called, json!(hundred.to_string()));
}

#[test]
fn a_host_function_result_crosses_by_the_same_rules_with_null_as_nil() {
    let seen = Arc::new(Mutex::new(json!(null)));
    let given = Arc::clone(&seen);
    let reply = HostFunction::typed(
        "reply",
        "--- Answers the JSON the test set.\n---@return any value The value",
        move |_, (): ()| Ok::<_, String>(given.lock().unwrap().clone()),
    );
    let mut providers = Providers::builtin();
    providers.register_function("replies", reply).unwrap();
    let env = Environment::builder(registry())
        .providers(Arc::new(providers))
        .build()
        .unwrap();
    for (case, value) in crossing() {
        *seen.lock().unwrap() = value.clone();
        assert_eq!(
            output(&env, "print(json.encode(reply(), {sort_keys = true}))"),
            format!("{value}\n"),
            "{case}"
        );
    }
    *seen.lock().unwrap() = json!(null);
    assert_eq!(output(&env, "print(reply() == nil)"), "true\n");
    *seen.lock().unwrap() = json!({"deep": nested_arrays(101)});
    assert_eq!(
        caught(&env, "reply()"),
        format!(
            "reply: nested deeper than 100 levels (at result.deep{})",
            "[1]".repeat(99)
        )
    );
}

/// The text of an MCP tool error, or the structured result of a success.
fn mcp_outcome(result: &CallToolResult) -> Result<Value, String> {
    if is_error(result) {
        return Err(text(result));
    }
    Ok(result
        .structured_content
        .clone()
        .unwrap_or_else(|| serde_json::from_str(&text(result)).unwrap()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_json_api_and_mcp_of_a_real_server_give_the_same_json_and_the_same_refusals() {
    bounded(async {
        let mut command = support::cli::rlm_process();
        command.args(["serve", "--http", "127.0.0.1:0", "--path", FIXTURES]);
        let served = ServedProcess::spawn(command).await;
        let url = |path: &str| format!("http://{}{path}", served.address);
        let post =
            |path: &str, body: Value| request("POST", url(path), Some(&body.to_string()), None);
        let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(url("/mcp"));
        let mcp = rmcp::ServiceExt::serve((), transport).await.unwrap();

        // The value that a registry function returns, with `json.null` and `{}` in it.
        assert_eq!(
            post("/v1/functions/nully", json!({"value": "a"})).await,
            (
                200,
                json!({"result": {"value": "a", "missing": null, "empty": {}}})
            )
        );

        for (case, expected) in crossing() {
            let arguments = json!({"name": case});
            let answer = post("/v1/functions/json_case", arguments.clone()).await;
            assert_eq!(
                answer,
                (200, json!({"result": expected})),
                "{case}: JSON API"
            );
            let called = call(&mcp, "json_case", arguments).await;
            assert_eq!(
                mcp_outcome(&called),
                Ok(json!({"result": expected})),
                "{case}: MCP"
            );

            // The same JSON as an argument, as Lua encodes it back.
            let text = json!(expected.to_string());
            let arguments = json!({"value": expected});
            let answer = post("/v1/functions/json_text", arguments.clone()).await;
            assert_eq!(
                answer,
                (200, json!({"result": text})),
                "{case}: JSON API argument"
            );
            let called = call(&mcp, "json_text", arguments).await;
            assert_eq!(
                mcp_outcome(&called),
                Ok(json!({"result": text})),
                "{case}: MCP argument"
            );
        }

        for (case, message) in refused() {
            let failed = format!("`json_case` failed: {}", at(&message, "result"));
            let arguments = json!({"name": case});
            let answer = post("/v1/functions/json_case", arguments.clone()).await;
            assert_eq!(answer, (422, json!({"error": failed})), "{case}: JSON API");
            let called = call(&mcp, "json_case", arguments).await;
            assert_eq!(mcp_outcome(&called), Err(failed), "{case}: MCP");
        }

        let deep = json!({"value": nested_arrays(101)});
        let failed = format!(
            "`json_text` failed: nested deeper than 100 levels (at argument 1{})",
            "[1]".repeat(100)
        );
        let answer = post("/v1/functions/json_text", deep.clone()).await;
        assert_eq!(
            answer,
            (422, json!({"error": failed})),
            "JSON API, too deep"
        );
        let called = call(&mcp, "json_text", deep).await;
        assert_eq!(mcp_outcome(&called), Err(failed), "MCP, too deep");

        mcp.cancel().await.unwrap();
    })
    .await;
}

#[test]
fn a_null_global_is_nil_and_a_built_in_cannot_be_set() {
    let (env, _) = environment();
    env.set_global("y", &json!([1])).unwrap();
    env.set_global("y", &json!(null)).unwrap();
    assert_eq!(output(&env, "print(y)"), "nil\n");
    assert_eq!(env.get_global("y").unwrap(), json!(null));
    let error = env.set_global("print", &json!(1)).unwrap_err();
    assert_eq!(error.message(), "cannot assign to built-in 'print'");
    assert_eq!(output(&env, "print('still')"), "still\n");
}

/// `x = {x, x}` thirty times over is a billion leaves to JSON, which has no references:
/// what each surface makes outside Lua counts against the memory limit as it grows.
#[test]
fn a_table_repeated_a_billion_times_stops_at_the_memory_limit_on_every_surface() {
    let env = Environment::builder(registry())
        .providers(providers_with_probe(Arc::default()))
        .limits(patient(Limits {
            memory_bytes: 16 << 20,
            ..Limits::default()
        }))
        .build()
        .unwrap();
    env.execute(
        "function doubled() local x = {'leaf'} for _ = 1, 30 do x = {x, x} end return x end",
    )
    .unwrap();
    env.execute("x = doubled()").unwrap();
    let is_memory = |error: ExecError| {
        assert!(
            matches!(
                error,
                ExecError::Limit {
                    kind: LimitKind::Memory,
                    ..
                }
            ),
            "{error}"
        );
    };
    is_memory(env.execute("json.encode(x)").unwrap_err());
    is_memory(env.call_function("doubled", vec![]).unwrap_err());
    is_memory(env.get_global("x").unwrap_err());
    is_memory(env.execute("probe(x)").unwrap_err());
    // The environment works on.
    assert_eq!(
        output(&env, "print(json.encode({#x, x[1] == x[2]}))"),
        "[2,true]\n"
    );
}

#[test]
fn a_host_reads_and_sets_a_string_as_its_bytes_and_tells_a_refusal_from_a_failure() {
    let env = Environment::new(
        Registry::baked().clone(),
        Limits {
            memory_bytes: 8 * 1024 * 1024,
            ..Limits::default()
        },
    )
    .unwrap();
    // A string crosses whole, as its bytes, UTF-8 or not; inside a table it is JSON's.
    env.set_global_value("raw", &GlobalValue::String(vec![b'a', 0xff, 0]))
        .unwrap();
    assert_eq!(output(&env, "print(#raw, raw:byte(2))"), "3\t255\n");
    assert_eq!(
        env.get_global_value("raw").unwrap(),
        GlobalValue::String(vec![b'a', 0xff, 0])
    );
    env.execute("t = {raw}").unwrap();
    assert_eq!(
        env.get_global_value("t").unwrap_err(),
        GlobalError::Refused("the string at t[1] is not valid UTF-8 (byte 2)".into())
    );
    // A built-in's name is a Lua failure, not a refusal; so is a limit.
    let error = env
        .set_global_value("print", &GlobalValue::Json(json!(1)))
        .unwrap_err();
    assert!(
        matches!(&error, GlobalError::Failed(ExecError::Lua { message, .. }) if message.contains("cannot assign to built-in 'print'")),
        "{error:?}"
    );
    let error = env
        .set_global_value("big", &GlobalValue::String(vec![b'x'; 16 * 1024 * 1024]))
        .unwrap_err();
    assert!(
        matches!(
            error,
            GlobalError::Failed(ExecError::Limit {
                kind: LimitKind::Memory,
                ..
            })
        ),
        "{error:?}"
    );
    assert_eq!(
        env.get_global_value("big").unwrap(),
        GlobalValue::Json(json!(null))
    );
    // Removing a global is setting it to null.
    env.set_global_value("raw", &GlobalValue::Json(json!(null)))
        .unwrap();
    assert_eq!(output(&env, "print(raw)"), "nil\n");
}

/// Lua keeps a table's keys in an order its string hashes decide, seeded anew in every
/// process: fifty keys all but never come out in the same order twice, unless written
/// sorted.
#[test]
fn json_encode_writes_the_same_text_in_every_process_with_its_keys_sorted() {
    let code =
        "local t = {} for i = 1, 50 do t['key' .. i] = {i, 'v' .. i} end print(json.encode(t))";
    let texts: Vec<String> = (0..2)
        .map(|_| {
            let out = support::cli::rlm(&["exec", code]);
            assert_eq!(out.status.code(), Some(0), "{}", support::cli::stderr(&out));
            support::cli::stdout(&out)
        })
        .collect();
    assert_eq!(texts[0], texts[1]);
    let mut keys: Vec<String> = (1..=50).map(|i| format!("key{i}")).collect();
    keys.sort();
    let fields: Vec<String> = keys
        .iter()
        .map(|key| {
            let i = &key["key".len()..];
            format!("\"{key}\":[{i},\"v{i}\"]")
        })
        .collect();
    assert_eq!(texts[0], format!("{{{}}}\n", fields.join(",")));
}
