//! Property tests of the one Lua ↔ JSON mapping (`environment/lua_json/`), run by
//! `cargo test` on stable with a fixed number of cases, so they take seconds: the stable
//! counterpart of fuzzing it (fuzz/README.md).
//!
//! - JSON → Lua → JSON gives back the same JSON, for arbitrary JSON within the limits
//!   (64-bit integers, finite floats, any Unicode text, nesting a few levels deep), by
//!   every path: `set_global` / `get_global` (`serde_json::Value` both ways),
//!   `json.decode` / `json.encode` (text both ways), and across the two.
//! - Lua → JSON of arbitrary Lua values (mixed, sparse and odd keys, strings that are not
//!   UTF-8, NaN, functions, cycles, tables met twice, tables marked as arrays) never
//!   panics, and the two writers of the one walk agree: `json.encode` succeeds exactly
//!   when `get_global` does, with the same JSON, or both refuse with the same words.

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use rlm_registry::Registry;
use rlm_registry::environment::{Environment, Limits};
use serde_json::{Map, Number, Value as Json};

/// Cases per property: enough to meet every kind of value many times, few enough for a
/// debug build to run them in a couple of seconds.
const CASES: u32 = 256;

/// [`CASES`], or as many as PROPTEST_CASES says: more, as a longer fuzzing session runs.
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|cases| cases.parse().ok())
        .unwrap_or(CASES)
}

fn runner() -> TestRunner {
    TestRunner::new(Config {
        cases: cases(),
        // A failure is shown with its shrunk input; no file is written into the tree.
        failure_persistence: None,
        ..Config::default()
    })
}

/// The functions the properties call, in an environment kept for all the cases.
fn environment() -> Environment {
    let env = Environment::new(Registry::baked().clone(), Limits::default()).unwrap();
    env.execute(
        "function roundtrip_text(s) return json.encode(json.decode(s)) end
         function encode_value()
           local ok, result = pcall(json.encode, value)
           return ok, tostring(result)
         end",
    )
    .unwrap();
    env
}

fn text(chars: std::ops::Range<usize>) -> impl Strategy<Value = String> {
    prop::collection::vec(any::<char>(), chars).prop_map(|chars| chars.into_iter().collect())
}

/// Arbitrary JSON that the mapping carries both ways unchanged: integers within 64 bits
/// (one past them becomes a float, as documented), finite floats, any text, arrays and
/// objects a few levels deep.
fn json_value() -> impl Strategy<Value = Json> {
    let leaf = prop_oneof![
        Just(Json::Null),
        any::<bool>().prop_map(Json::Bool),
        any::<i64>().prop_map(Json::from),
        any::<u32>().prop_map(Json::from),
        any::<f64>().prop_filter_map("finite", |f| Number::from_f64(f).map(Json::Number)),
        (-1000i32..1000).prop_map(|n| Json::from(f64::from(n) / 8.0)),
        text(0..12).prop_map(Json::String),
    ];
    leaf.prop_recursive(5, 96, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Json::Array),
            prop::collection::vec((text(0..6), inner), 0..8)
                .prop_map(|entries| Json::Object(entries.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

#[test]
fn json_crosses_into_lua_and_back_unchanged_by_every_path() {
    let env = environment();
    runner()
        .run(&json_value(), |value| {
            // serde_json::Value → Lua → serde_json::Value.
            env.set_global("value", &value).unwrap();
            prop_assert_eq!(&env.get_global("value").unwrap(), &value);

            // serde_json::Value → Lua → text.
            let encoded = env.call_function("encode_value", vec![]).unwrap();
            prop_assert_eq!(&encoded[0], &Json::Bool(true), "{}", encoded);
            let written: Json = serde_json::from_str(encoded[1].as_str().unwrap()).unwrap();
            prop_assert_eq!(&written, &value);

            // Text → Lua → text.
            let text = serde_json::to_string(&value).unwrap();
            let again = env
                .call_function("roundtrip_text", vec![Json::String(text)])
                .unwrap();
            let again: Json = serde_json::from_str(again.as_str().unwrap()).unwrap();
            prop_assert_eq!(&again, &value);
            Ok(())
        })
        .unwrap();
}

/// A Lua value to build: what JSON can hold and what it cannot.
#[derive(Clone, Debug)]
enum Lua {
    Nil,
    Null,
    Bool(bool),
    Int(i64),
    /// Any float: NaN and the infinities included.
    Float(f64),
    /// Any bytes: text that is not UTF-8 included.
    Bytes(Vec<u8>),
    Function,
    /// A table, marked with `json.array` or not, with these entries set in order.
    Table {
        array: bool,
        entries: Vec<(Key, Lua)>,
    },
    /// A table made earlier in the same value: an enclosing one (a cycle) or another
    /// (a table met twice).
    Seen(usize),
}

/// A table key: integers around `1..n` (so arrays, sparse ones and key `0` are common),
/// floats, booleans, strings (some not UTF-8).
#[derive(Clone, Debug)]
enum Key {
    Int(i64),
    Float(f64),
    Bool(bool),
    Bytes(Vec<u8>),
}

fn bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => prop::collection::vec(b'a'..=b'e', 0..4),
        1 => prop::collection::vec(any::<u8>(), 0..6),
    ]
}

fn key() -> impl Strategy<Value = Key> {
    prop_oneof![
        4 => (-1i64..6).prop_map(Key::Int),
        1 => any::<i64>().prop_map(Key::Int),
        1 => prop_oneof![Just(0.5), Just(1.0), Just(-2.0), Just(1e300)].prop_map(Key::Float),
        1 => any::<bool>().prop_map(Key::Bool),
        4 => bytes().prop_map(Key::Bytes),
    ]
}

fn lua_value() -> impl Strategy<Value = Lua> {
    let leaf = prop_oneof![
        Just(Lua::Nil),
        Just(Lua::Null),
        any::<bool>().prop_map(Lua::Bool),
        any::<i64>().prop_map(Lua::Int),
        prop_oneof![
            any::<f64>(),
            Just(f64::NAN),
            Just(f64::INFINITY),
            Just(f64::NEG_INFINITY),
            Just(-0.0),
        ]
        .prop_map(Lua::Float),
        bytes().prop_map(Lua::Bytes),
        Just(Lua::Function),
        (0usize..8).prop_map(Lua::Seen),
    ];
    leaf.prop_recursive(4, 64, 6, |inner| {
        (any::<bool>(), prop::collection::vec((key(), inner), 0..6))
            .prop_map(|(array, entries)| Lua::Table { array, entries })
    })
}

/// Lua source for a string of these bytes.
fn quoted(bytes: &[u8]) -> String {
    let escaped: String = bytes.iter().map(|b| format!("\\x{b:02x}")).collect();
    format!("\"{escaped}\"")
}

fn integer(i: i64) -> String {
    // The literal of i64::MIN would read as a float (its magnitude is one past i64::MAX).
    if i == i64::MIN {
        "math.mininteger".to_string()
    } else {
        format!("({i})")
    }
}

fn float(f: f64) -> String {
    if f.is_nan() {
        "(0/0)".to_string()
    } else if f.is_infinite() {
        if f > 0.0 { "(1/0)" } else { "(-1/0)" }.to_string()
    } else {
        // Debug is the shortest text that reads back the same, always with `.` or `e`,
        // so Lua reads it as this float.
        format!("({f:?})")
    }
}

/// Lua statements that build `value` into the tables `T[0]`, `T[1]` …, and the
/// expression for it; `tables` counts the tables made so far.
fn build(value: &Lua, code: &mut String, tables: &mut usize) -> String {
    match value {
        Lua::Nil => "nil".to_string(),
        Lua::Null => "json.null".to_string(),
        Lua::Bool(b) => b.to_string(),
        Lua::Int(i) => integer(*i),
        Lua::Float(f) => float(*f),
        Lua::Bytes(bytes) => quoted(bytes),
        Lua::Function => "function() end".to_string(),
        Lua::Seen(i) if *tables == 0 => format!("T[{i}]"),
        Lua::Seen(i) => format!("T[{}]", i % *tables),
        Lua::Table { array, entries } => {
            let me = *tables;
            *tables += 1;
            code.push_str(&format!("T[{me}] = {{}}\n"));
            for (key, value) in entries {
                let key = match key {
                    Key::Int(i) => integer(*i),
                    Key::Float(f) => float(*f),
                    Key::Bool(b) => b.to_string(),
                    Key::Bytes(bytes) => quoted(bytes),
                };
                let value = build(value, code, tables);
                code.push_str(&format!("T[{me}][{key}] = {value}\n"));
            }
            if *array {
                code.push_str(&format!("json.array(T[{me}])\n"));
            }
            format!("T[{me}]")
        }
    }
}

#[test]
fn any_lua_value_encodes_or_is_refused_the_same_way_by_both_writers() {
    let env = environment();
    // How many values were encoded and how many refused: both must be common, or the
    // property says little about one of them.
    let (encodings, refusals) = (std::cell::Cell::new(0u32), std::cell::Cell::new(0u32));
    runner()
        .run(&lua_value(), |value| {
            let mut code = "T = {}\n".to_string();
            let mut tables = 0;
            let expression = build(&value, &mut code, &mut tables);
            code.push_str(&format!("value = {expression}\n"));
            env.execute(&code).unwrap();

            let by_value = env.get_global("value");
            let by_text = env.call_function("encode_value", vec![]).unwrap();
            let (encoded, result) = (&by_text[0], by_text[1].as_str().unwrap());
            match by_value {
                Ok(json) => {
                    prop_assert_eq!(encoded, &Json::Bool(true), "{}", result);
                    let written: Json = serde_json::from_str(result).unwrap();
                    prop_assert_eq!(&written, &json);
                    // What json.encode wrote reads back as the same JSON.
                    let again = env
                        .call_function("roundtrip_text", vec![Json::String(result.into())])
                        .unwrap();
                    let again: Json = serde_json::from_str(again.as_str().unwrap()).unwrap();
                    prop_assert_eq!(&again, &json);
                    encodings.set(encodings.get() + 1);
                }
                Err(error) => {
                    prop_assert_eq!(encoded, &Json::Bool(false), "{}", result);
                    prop_assert_eq!(result, format!("json.encode: {}", error.message()));
                    refusals.set(refusals.get() + 1);
                }
            }
            Ok(())
        })
        .unwrap();
    let (encoded, refused) = (encodings.get(), refusals.get());
    eprintln!("{encoded} values encoded, {refused} refused");
    assert!(
        encoded >= cases() / 10 && refused >= cases() / 10,
        "{encoded} encoded, {refused} refused"
    );
}
