//! Tool definitions (SPEC §6): LuaLS types → JSON Schema checked by validating sample
//! arguments with the `jsonschema` crate, the three export formats, JSON calls into the
//! sandbox, and the dispatch loop's cap and error paths against the scripted server.

mod support;

use std::sync::Arc;
use std::time::Duration;

use rlm_registry::Registry;
use rlm_registry::environment::{Environment, Limits};
use rlm_registry::llm::{ChatMessage, ChatRole, LlmClient, LlmConfig};
use rlm_registry::tools::call::validate;
use rlm_registry::tools::{
    CallError, DispatchError, ToolCaller, ToolDispatcher, ToolFormat, export, function_tool,
    parse_type, type_schema,
};
use serde_json::{Value, json};
use support::openai_server::{Behavior, OpenAiServer};

/// Checks `ty`'s schema against every good and bad sample, with `jsonschema` and with
/// the crate's own validator, which must agree.
fn check(ty: &str, good: &[Value], bad: &[Value]) {
    let schema = type_schema(ty).unwrap_or_else(|e| panic!("`{ty}`: {e}"));
    let validator = jsonschema::validator_for(&schema)
        .unwrap_or_else(|e| panic!("`{ty}` → invalid schema {schema}: {e}"));
    let parsed = parse_type(ty).unwrap();
    for sample in good {
        assert!(
            validator.is_valid(sample),
            "`{ty}` ({schema}) should accept {sample}"
        );
        assert!(
            validate(sample, &parsed, "$").is_ok(),
            "own validator: `{ty}` should accept {sample}"
        );
    }
    for sample in bad {
        assert!(
            !validator.is_valid(sample),
            "`{ty}` ({schema}) should reject {sample}"
        );
        assert!(
            validate(sample, &parsed, "$").is_err(),
            "own validator: `{ty}` should reject {sample}"
        );
    }
}

#[test]
fn primitives() {
    check(
        "string",
        &[json!("a"), json!("")],
        &[json!(1), json!(null), json!([])],
    );
    check(
        "number",
        &[json!(1), json!(1.5), json!(-3)],
        &[json!("1"), json!(true)],
    );
    check(
        "integer",
        &[json!(1), json!(-7), json!(2.0)],
        &[json!(1.5), json!("1")],
    );
    check(
        "boolean",
        &[json!(true), json!(false)],
        &[json!(0), json!("true")],
    );
    check("nil", &[json!(null)], &[json!(0), json!("")]);
    for any in ["any", "unknown"] {
        check(
            any,
            &[json!(1), json!("x"), json!(null), json!({"a": [1]})],
            &[],
        );
        assert_eq!(type_schema(any).unwrap(), json!({}));
    }
    assert_eq!(type_schema("integer").unwrap(), json!({"type": "integer"}));
}

#[test]
fn optional_types_drop_nil_at_the_top_and_keep_it_inside() {
    // A parameter `x integer?` is not required; the value itself must still be an integer.
    let (ty, optional) = parse_type("integer?").unwrap().strip_nil();
    assert!(optional);
    assert_eq!(ty.schema(), json!({"type": "integer"}));
    let (_, optional) = parse_type("string|nil").unwrap().strip_nil();
    assert!(optional);
    let (_, optional) = parse_type("string").unwrap().strip_nil();
    assert!(!optional);
    // Inside an array, nil is a real alternative.
    check("(string|nil)[]", &[json!(["a", null])], &[json!([1])]);
    check("integer?[]", &[json!([1, null])], &[json!(["a"])]);
}

#[test]
fn arrays_maps_and_tables() {
    check(
        "string[]",
        &[json!([]), json!(["a", "b"])],
        &[json!("a"), json!([1]), json!({"a": "b"})],
    );
    check(
        "integer[][]",
        &[json!([[1], [2, 3]])],
        &[json!([1]), json!([[1.5]])],
    );
    check(
        "table<string, integer>",
        &[json!({}), json!({"a": 1, "b": 2})],
        &[json!({"a": "x"}), json!([1])],
    );
    check(
        "{ [string]: boolean }",
        &[json!({"x": true})],
        &[json!({"x": 1})],
    );
    // Integer keys are a sequence in JSON.
    check(
        "table<integer, string>",
        &[json!(["a"])],
        &[json!({"1": "a"}), json!([1])],
    );
    check(
        "table",
        &[json!({}), json!([1, "a"]), json!({"k": null})],
        &[json!("t"), json!(1)],
    );
    assert!(parse_type("table<boolean, string>").is_err());
}

#[test]
fn records() {
    let ty = "{ name: string, count?: integer, tags: string[]|nil, nested: { ok: boolean } }";
    check(
        ty,
        &[
            json!({"name": "a", "nested": {"ok": true}}),
            json!({"name": "a", "count": 2, "tags": ["x"], "nested": {"ok": false}, "extra": 1}),
        ],
        &[
            json!({"nested": {"ok": true}}),
            json!({"name": "a", "count": "2", "nested": {"ok": true}}),
            json!({"name": "a", "nested": {}}),
            json!(["a"]),
        ],
    );
    let schema = type_schema(ty).unwrap();
    assert_eq!(schema["required"], json!(["name", "nested"]));
    assert_eq!(
        schema["properties"]["tags"],
        json!({"type": "array", "items": {"type": "string"}})
    );
    check("{}", &[json!({})], &[json!([])]);
    assert!(parse_type("{ a: string, a: integer }").is_err());
}

#[test]
fn unions_and_string_literal_enums() {
    check(
        "\"asc\"|\"desc\"",
        &[json!("asc"), json!("desc")],
        &[json!("up"), json!(1)],
    );
    assert_eq!(
        type_schema("'a' | 'b' | 'c'").unwrap(),
        json!({"type": "string", "enum": ["a", "b", "c"]})
    );
    assert_eq!(
        type_schema("\"only\"").unwrap(),
        json!({"type": "string", "enum": ["only"]})
    );
    check(
        "string|integer",
        &[json!("a"), json!(3)],
        &[json!(1.5), json!(null), json!([])],
    );
    assert_eq!(
        type_schema("string|integer").unwrap(),
        json!({"anyOf": [{"type": "string"}, {"type": "integer"}]})
    );
    check(
        "string[]|{ k: string }",
        &[json!(["a"]), json!({"k": "v"})],
        &[json!({"k": 1}), json!("a")],
    );
    // `any` absorbs the other alternatives.
    assert_eq!(type_schema("any|string").unwrap(), json!({}));
}

#[test]
fn unrepresentable_types_say_why() {
    for (ty, reason) in [
        ("fun(x: integer): string", "function"),
        ("function", "function"),
        ("userdata", "userdata"),
        ("thread", "thread"),
        ("MyClass", "unknown type `MyClass`"),
        ("string|fun()", "function"),
        ("table<string, fun()>", "function"),
        ("", "empty"),
        ("string[", "expected"),
        ("{ a: }", "unexpected `}`"),
        ("\"open", "unterminated"),
        ("1", "number literal"),
    ] {
        let error = parse_type(ty).expect_err(ty);
        assert!(error.0.contains(reason), "`{ty}`: {error}");
    }
}

#[test]
fn the_parser_never_panics_and_parsed_schemas_are_valid() {
    const ALPHABET: &[&str] = &[
        "string", "integer", "number", "boolean", "nil", "any", "table", "fun", "x", "?", "|",
        "[]", "[", "]", "<", ">", ",", "{", "}", ":", "(", ")", "\"a\"", "'b'", "...", " ", "é",
        "-", "1", ";", "\"", "`",
    ];
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut parsed = 0;
    for _ in 0..20_000 {
        let len = (next() % 12) as usize;
        let text: String = (0..len)
            .map(|_| ALPHABET[(next() % ALPHABET.len() as u64) as usize])
            .collect();
        if let Ok(ty) = parse_type(&text) {
            parsed += 1;
            let schema = ty.schema();
            assert!(
                jsonschema::validator_for(&schema).is_ok(),
                "`{text}` → invalid schema {schema}"
            );
        }
    }
    assert!(parsed > 100, "only {parsed} random types parsed");
    // Deep nesting is refused, not a stack overflow.
    let deep = format!("{}string{}", "(".repeat(10_000), ")".repeat(10_000));
    assert!(parse_type(&deep).unwrap_err().0.contains("deeper"));
    let deep = "{ a: ".repeat(5_000);
    assert!(parse_type(&deep).is_err());
    let deep = format!("string{}", "[]".repeat(10_000));
    assert!(parse_type(&deep).is_ok());
}

fn one_function(source: &str, name: &str) -> Registry {
    Registry::from_map([(name, source)]).unwrap_or_else(|e| panic!("{}", e.render(false)))
}

#[test]
fn a_function_becomes_a_tool() {
    let registry = one_function(
        "--- Sorts things.\n\
         ---@param items string[] The items\n\
         ---@param order? \"asc\"|\"desc\" Sort order\n\
         ---@param limit integer|nil At most this many\n\
         ---@param ... string Extra items\n\
         ---@return string[] sorted The sorted items\n\
         function sort_things(items, order, limit, ...) return items end",
        "sort_things",
    );
    let tool = function_tool(registry.get("sort_things").unwrap()).unwrap();
    assert_eq!(tool.name, "sort_things");
    assert_eq!(tool.description, "Sorts things.");
    assert_eq!(
        tool.parameters,
        json!({
            "type": "object",
            "properties": {
                "items": {"type": "array", "items": {"type": "string"}, "description": "The items"},
                "order": {"type": "string", "enum": ["asc", "desc"], "description": "Sort order"},
                "limit": {"type": "integer", "description": "At most this many"},
                "args": {"type": "array", "items": {"type": "string"}, "description": "Extra items"},
            },
            "required": ["items"],
            "additionalProperties": false,
        })
    );
    let validator = jsonschema::validator_for(&tool.parameters).unwrap();
    assert!(validator.is_valid(&json!({"items": ["b"], "order": "asc", "args": ["c"]})));
    assert!(!validator.is_valid(&json!({"order": "asc"})));
    assert!(!validator.is_valid(&json!({"items": [], "bogus": 1})));

    let with_callback = one_function(
        "--- Maps.\n---@param f fun(x: any): any The mapper\n---@return any\nfunction map_it(f) return f end",
        "map_it",
    );
    let error = function_tool(with_callback.get("map_it").unwrap()).unwrap_err();
    assert_eq!(error.name, "map_it");
    assert!(
        error.reason.starts_with("parameter `f`: a function"),
        "{error}"
    );
}

#[test]
fn every_baked_function_is_a_valid_tool() {
    for (name, function) in Registry::baked().iter_functions() {
        let tool = function_tool(function).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            jsonschema::validator_for(&tool.parameters).is_ok(),
            "{name}: {}",
            tool.parameters
        );
    }
}

#[test]
fn export_formats() {
    let registry = Registry::baked();
    let count = registry.functions().len();

    let (openai, skipped) = export(registry, ToolFormat::OpenAi);
    assert!(skipped.is_empty(), "{skipped:?}");
    let openai = openai.as_array().unwrap();
    assert_eq!(openai.len(), count);
    let word_count = openai
        .iter()
        .find(|t| t["function"]["name"] == "word_count")
        .unwrap();
    assert_eq!(word_count["type"], "function");
    assert_eq!(
        word_count["function"]["parameters"]["properties"]["text"]["type"],
        "string"
    );
    assert_eq!(
        word_count["function"]["parameters"]["required"],
        json!(["text"])
    );
    assert!(
        !word_count["function"]["description"]
            .as_str()
            .unwrap()
            .is_empty()
    );

    let (anthropic, _) = export(registry, ToolFormat::Anthropic);
    let first = &anthropic.as_array().unwrap()[0];
    let keys: Vec<&String> = first.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["description", "input_schema", "name"]);
    assert_eq!(first["input_schema"]["type"], "object");

    let (mcp, _) = export(registry, ToolFormat::Mcp);
    let tools = mcp["tools"].as_array().unwrap();
    assert_eq!(tools.len(), count);
    assert!(tools.iter().all(|t| t["inputSchema"]["type"] == "object"));

    // Functions that cannot be tools are left out and reported.
    let registry = registry_with_callback();
    let (list, skipped) = export(&registry, ToolFormat::OpenAi);
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_eq!(skipped.len(), 1);
    assert_eq!(skipped[0].name, "map_it");
    assert_eq!("MCP".parse::<ToolFormat>(), Ok(ToolFormat::Mcp));
    assert!("xml".parse::<ToolFormat>().is_err());
}

fn registry_with_callback() -> Registry {
    Registry::from_map([
        (
            "map_it",
            "--- Maps.\n---@param f fun(x: any): any The mapper\n---@return any\nfunction map_it(f) return f end",
        ),
        (
            "twice",
            "--- Doubles.\n---@param x number\n---@return number\nfunction twice(x) return 2 * x end",
        ),
    ])
    .unwrap()
}

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
    // A table-returning function: records become objects, empty tables arrays.
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
        json!([{"line": 1, "text": "a.b", "before": [], "after": []}])
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
    assert_eq!(
        env.call_function("sparse", vec![]).unwrap(),
        json!({"1": "a", "3": "c"})
    );
    let error = env.call_function("bad", vec![]).unwrap_err();
    assert!(
        error
            .message()
            .contains("a function cannot be written as JSON"),
        "{error}"
    );
    let error = env.call_function("cyclic", vec![]).unwrap_err();
    assert!(error.message().contains("deeper than"), "{error}");
    let error = env.call_function("nan", vec![]).unwrap_err();
    assert!(
        error.message().contains("cannot be written as JSON"),
        "{error}"
    );
    let error = env.call_function("missing_fn", vec![]).unwrap_err();
    assert_eq!(error.message(), "unknown function `missing_fn`");
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

fn client_for(server: &OpenAiServer) -> LlmClient {
    LlmClient::new(
        LlmConfig::new(server.base_url(), "tool-model")
            .with_timeout(Duration::from_secs(5))
            .with_max_retries(0),
    )
    .unwrap()
}

/// The tool messages of a recorded request body, as (tool_call_id, content).
fn tool_results(body: &Value) -> Vec<(String, String)> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["tool_call_id"].as_str().unwrap().to_string(),
                m["content"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn dispatch_runs_tools_and_returns_the_text_answer() {
    let server = OpenAiServer::start(
        vec![
            Behavior::tool_calls(&[
                ("c1", "word_count", r#"{"text": "a b c"}"#),
                ("c2", "shout", r#"{"text": "hi"}"#),
            ]),
            Behavior::reply("3 words"),
        ],
        Behavior::status(500),
    );
    let mut dispatcher = ToolDispatcher::with_default_iterations();
    assert_eq!(dispatcher.max_iterations(), 10);
    let skipped = dispatcher.register_registry(Registry::baked().clone(), Limits::default());
    assert!(skipped.is_empty());
    dispatcher.register_handler(
        "shout",
        "Upper-cases text.",
        json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
        |args| Ok(json!(args["text"].as_str().unwrap_or("").to_uppercase())),
    );
    let conversation = dispatcher
        .dispatch(
            vec![
                ChatMessage::system("Use tools."),
                ChatMessage::user("Count."),
            ],
            &client_for(&server),
        )
        .unwrap();
    let last = conversation.last().unwrap();
    assert_eq!(last.role, ChatRole::Assistant);
    assert_eq!(last.content.as_deref(), Some("3 words"));
    assert_eq!(conversation.len(), 6); // system, user, tool calls, 2 results, answer

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let first = requests[0].json().unwrap();
    assert_eq!(first["model"], "tool-model");
    let names: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"word_count") && names.contains(&"shout"));
    let second = requests[1].json().unwrap();
    let assistant = &second["messages"][2];
    assert_eq!(assistant["role"], "assistant");
    assert_eq!(assistant["content"], Value::Null);
    assert_eq!(assistant["tool_calls"][0]["function"]["name"], "word_count");
    assert_eq!(
        tool_results(&second),
        [
            ("c1".to_string(), "3".to_string()),
            ("c2".to_string(), "\"HI\"".to_string())
        ]
    );
}

#[test]
fn dispatch_sends_errors_back_to_the_model() {
    let server = OpenAiServer::start(
        vec![
            Behavior::tool_calls(&[
                ("u", "no_such_tool", "{}"),
                ("h", "fails", "{}"),
                ("s", "word_count", r#"{"text": 5}"#),
                ("l", "chunk_by_lines", r#"{"text": "a", "n": 0}"#),
                ("j", "word_count", "{not json"),
            ]),
            Behavior::reply("sorry"),
        ],
        Behavior::status(500),
    );
    let mut dispatcher = ToolDispatcher::new(3);
    dispatcher.register_registry(Registry::baked().clone(), Limits::default());
    dispatcher.register_handler("fails", "Always fails.", json!({"type": "object"}), |_| {
        Err("disk on fire".to_string())
    });
    let conversation = dispatcher
        .dispatch(vec![ChatMessage::user("go")], &client_for(&server))
        .unwrap();
    assert_eq!(
        conversation.last().unwrap().content.as_deref(),
        Some("sorry")
    );
    let results = tool_results(&server.requests()[1].json().unwrap());
    let text = |id: &str| results.iter().find(|(i, _)| i == id).unwrap().1.clone();
    assert!(text("u").starts_with("error: unknown tool `no_such_tool`; available tools: "));
    assert!(text("u").contains("word_count"));
    assert_eq!(text("h"), "error: disk on fire");
    assert_eq!(
        text("s"),
        "error: invalid arguments for `word_count`: $.text: expected a string, got 5"
    );
    assert!(
        text("l").starts_with("error: `chunk_by_lines` failed:"),
        "{}",
        text("l")
    );
    assert!(text("l").contains("n must be at least 1"));
    assert!(text("j").starts_with("error: the arguments of `word_count` are not valid JSON"));
}

#[test]
fn dispatch_stops_at_the_cap() {
    let server = OpenAiServer::always(Behavior::tool_calls(&[(
        "again",
        "word_count",
        r#"{"text": "x y"}"#,
    )]));
    let mut dispatcher = ToolDispatcher::new(3);
    dispatcher.register_registry(Arc::new(Registry::baked().clone()), Limits::default());
    let error = dispatcher
        .dispatch(vec![ChatMessage::user("loop")], &client_for(&server))
        .unwrap_err();
    match &error {
        DispatchError::IterationLimit {
            max_iterations,
            messages,
        } => {
            assert_eq!(*max_iterations, 3);
            // user + 3 × (tool calls + result)
            assert_eq!(messages.len(), 7);
            assert!(
                messages
                    .iter()
                    .filter(|m| m.role == ChatRole::Tool)
                    .all(|m| m.content.as_deref() == Some("2"))
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        error.to_string(),
        "the model was still calling tools after 3 iterations"
    );
    assert_eq!(server.request_count(), 3);

    // A zero cap still lets the model answer once.
    let server = OpenAiServer::always(Behavior::reply("fine"));
    let conversation = ToolDispatcher::new(0)
        .dispatch(vec![ChatMessage::user("hi")], &client_for(&server))
        .unwrap();
    assert_eq!(
        conversation.last().unwrap().content.as_deref(),
        Some("fine")
    );
}

#[test]
fn dispatch_reports_model_failures() {
    let server = OpenAiServer::always(Behavior::status(400));
    let error = ToolDispatcher::new(5)
        .dispatch(vec![ChatMessage::user("hi")], &client_for(&server))
        .unwrap_err();
    assert!(matches!(error, DispatchError::Llm(_)), "{error:?}");
    // No tools registered: the request carries no `tools` field.
    assert!(server.requests()[0].json().unwrap().get("tools").is_none());
}

#[test]
fn cli_prints_tool_lists() {
    use std::process::Command;
    let rlm = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_rlm"))
            .args(args)
            .output()
            .unwrap()
    };

    let out = rlm(&["tools"]);
    assert!(out.status.success());
    let openai: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        openai.as_array().unwrap().len(),
        Registry::baked().functions().len()
    );
    assert_eq!(openai[0]["type"], "function");

    let out = rlm(&["tools", "--format", "anthropic"]);
    let anthropic: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(anthropic[0]["input_schema"].is_object());

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("f.lua"),
        "--- Maps.\n---@param f fun(x: any): any The mapper\n---@return any\nfunction map_it(f) return f end\n\
         --- Doubles.\n---@param x number The number\n---@return number\nfunction twice(x) return 2 * x end\n",
    )
    .unwrap();
    let path = dir.path().to_str().unwrap();
    let out = rlm(&["tools", "--format", "mcp", "--no-baked", "--path", path]);
    assert!(out.status.success());
    let mcp: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        mcp,
        json!({"tools": [{
            "name": "twice",
            "description": "Doubles.",
            "inputSchema": {
                "type": "object",
                "properties": {"x": {"type": "number", "description": "The number"}},
                "required": ["x"],
                "additionalProperties": false,
            },
        }]})
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("note: left out `map_it`: parameter `f`: a function"),
        "{stderr}"
    );

    let out = rlm(&["tools", "--format", "xml"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn dispatch_calls_host_functions_of_a_catalog() {
    use rlm_registry::catalog::Catalog;
    use rlm_registry::providers::{AgentScope, HostFunction, Providers};
    let server = OpenAiServer::start(
        vec![
            Behavior::tool_calls(&[
                ("h", "price_of", r#"{"item": "apple"}"#),
                ("r", "word_count", r#"{"text": "a b"}"#),
                ("b", "token_count", r#"{"text": "a b"}"#),
            ]),
            Behavior::reply("done"),
        ],
        Behavior::status(500),
    );
    let mut providers = Providers::builtin();
    providers
        .register_function(
            "shop",
            HostFunction::typed(
                "price_of",
                "--- The price of an item, in cents.\n---@param item string\n---@return integer",
                |_, (item,): (String,)| Ok::<_, String>(item.len() as i64 * 10),
            ),
        )
        .unwrap();
    let catalog = Catalog::new(
        Registry::baked().clone(),
        Arc::new(providers),
        AgentScope::TOP,
    );
    let mut dispatcher = ToolDispatcher::with_default_iterations();
    dispatcher.register_catalog(catalog, Limits::default());
    let names: Vec<String> = dispatcher
        .definitions()
        .iter()
        .map(|d| d["function"]["name"].as_str().unwrap().to_string())
        .collect();
    assert!(names.contains(&"price_of".to_string()));
    assert!(
        !names.contains(&"token_count".to_string()),
        "built-ins are not tools here"
    );
    dispatcher
        .dispatch(vec![ChatMessage::user("price?")], &client_for(&server))
        .unwrap();
    let results = tool_results(&server.requests()[1].json().unwrap());
    let text = |id: &str| results.iter().find(|(i, _)| i == id).unwrap().1.clone();
    assert_eq!(text("h"), "50");
    assert_eq!(text("r"), "2");
    assert!(text("b").starts_with("error: unknown tool `token_count`"));
}
