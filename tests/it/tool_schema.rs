//! LuaLS types → JSON Schema: every schema is checked by validating good and
//! bad sample arguments with the `jsonschema` crate and with the crate's own validator,
//! which must agree; then a documented function's whole parameter schema.

use rlm_registry::Registry;
use rlm_registry::spec::function_tool;
use rlm_registry::tools::call::validate;
use rlm_registry::tools::{parse_type, type_schema};
use serde_json::{Value, json};

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
        let tool = match function_tool(function) {
            Ok(tool) => tool,
            // A Lua function argument (`map`, `sort_by`'s key, …) has no JSON form.
            Err(e)
                if e.to_string()
                    .contains("a `function` cannot be passed as JSON") =>
            {
                continue;
            }
            Err(e) => panic!("{e}"),
        };
        assert!(
            jsonschema::validator_for(&tool.parameters).is_ok(),
            "{name}: {}",
            tool.parameters
        );
    }
}
