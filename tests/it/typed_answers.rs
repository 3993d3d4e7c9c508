//! Typed answers: with a JSON Schema, the prompt shows it, `FINAL(value)` (or a ready
//! `answer` table) is converted to JSON by the one Lua ↔ JSON mapping and checked; a
//! value that does not match does not end the run but comes back with each violation,
//! and a child given its own schema through `rlm_query`'s options returns its checked
//! value to the parent's code as a Lua table.

use crate::support;

use rlm_registry::conventions::AnswerProtocol;
use rlm_registry::environment::AnswerSchema;
use rlm_registry::rlm::{Context, RlmError};
use serde_json::{Value, json};
use support::openai_server::{Behavior, OpenAiServer};
use support::rlm_loop::*;

/// `{count: integer >= 0, items: [string]}`, both required.
fn schema() -> AnswerSchema {
    AnswerSchema::new(json!({
        "type": "object",
        "properties": {
            "count": {"type": "integer", "minimum": 0},
            "items": {"type": "array", "items": {"type": "string"}}
        },
        "required": ["count", "items"]
    }))
    .unwrap()
}

#[test]
fn a_schema_met_on_the_first_try_ends_the_run_with_the_json() {
    let server = OpenAiServer::start(
        vec![lua("FINAL({count = 2, items = {'a', 'b'}})")],
        Behavior::status(500),
    );
    let trace = Shared::default();
    let answer = rlm(&server, 5)
        .answer_schema(schema())
        .trace(trace.clone())
        .run("List them.", Some(Context::from("a\nb\n")))
        .unwrap();
    assert_eq!(answer.text, r#"{"count":2,"items":["a","b"]}"#);
    assert_eq!(answer.value, Some(json!({"count": 2, "items": ["a", "b"]})));
    assert_eq!(answer.turns, 1);
    // The prompt shows the schema and how a Lua value becomes JSON.
    let system = system_prompt_of(&bodies(&server), 0);
    assert!(system.contains("## The answer's schema"), "{system}");
    assert!(system.contains("\"minimum\": 0"), "{system}");
    assert!(
        system.contains("`json.array()` for an empty one"),
        "{system}"
    );
    // The trace records the schema and the answer's JSON text.
    let events = trace.events();
    assert_eq!(events[0]["answer_schema"], *schema().schema());
    assert_eq!(turns(&events)[0]["final"], answer.text.as_str());
}

#[test]
fn a_violation_is_fed_back_with_its_path_and_fixed() {
    let server = OpenAiServer::start(
        vec![
            // A count as text and an empty list as the unmarked empty table {}.
            lua("x = 1\nFINAL({count = 'two', items = {}})\nprint('not reached')"),
            lua("FINAL({count = 2, items = json.array()})"),
        ],
        Behavior::status(500),
    );
    let answer = rlm(&server, 5)
        .answer_schema(schema())
        .run("Q", None)
        .unwrap();
    assert_eq!(answer.value, Some(json!({"count": 2, "items": []})));
    assert_eq!(answer.turns, 2);
    let feedback = last_message(&bodies(&server)[1]);
    assert!(
        feedback.starts_with(
            "Block 1 failed with a Lua error on line 2: the answer does not match its schema (2 problems):"
        ),
        "{feedback}"
    );
    for expected in [
        "\n- at answer.count: \"two\" is not of type \"integer\"",
        "\n- at answer.items: {} is not of type \"array\" (an empty Lua table is the object {}: write json.array() for an empty array)",
        "\nFix the value and give the answer again.",
        "  2 | FINAL({count = 'two', items = {}})",
    ] {
        assert!(feedback.contains(expected), "{expected}\n{feedback}");
    }
}

#[test]
fn a_violation_never_fixed_ends_at_the_iteration_cap_with_the_last_refusal() {
    // Four refusals in a row: more than the three consecutive errors that end a run
    // whose code fails, since a refused answer is not an error of the code.
    let server = OpenAiServer::start(
        vec![
            lua("FINAL({count = -1, items = {}})"),
            lua("FINAL({count = 'x', items = {}})"),
            lua("FINAL({items = {'a'}})"),
            lua("FINAL({count = 1.5, items = {'a'}})"),
        ],
        Behavior::status(500),
    );
    let error = rlm(&server, 4)
        .answer_schema(schema())
        .run("Q", None)
        .unwrap_err();
    assert_eq!(server.request_count(), 4);
    let RlmError::AnswerRejected {
        max_iterations,
        last_refusal,
    } = &error
    else {
        panic!("{error:?}");
    };
    assert_eq!(*max_iterations, 4);
    assert!(
        last_refusal.contains("- at answer.count: 1.5 is not of type \"integer\""),
        "{last_refusal}"
    );
    assert!(
        error
            .to_string()
            .starts_with("iteration limit reached: no answer matching the schema after 4 turns; the last answer was refused: the answer does not match its schema"),
        "{error}"
    );
}

#[test]
fn a_child_gets_its_own_schema_and_the_parent_a_lua_table() {
    let server = OpenAiServer::start(
        vec![
            // Root: a typed child; the answer arrives as a table.
            lua(
                "local found = rlm_query('Count the lines', context, {schema = {type = 'object', properties = {lines = {type = 'integer'}}, required = {'lines'}}})\nprint(type(found), found.lines)\ntotal = found.lines",
            ),
            // Child: a first answer that does not match, then one that does.
            lua("FINAL({lines = 'two'})"),
            lua("FINAL({lines = line_count(context)})"),
            // Root again: it answers with plain text (no schema of its own).
            lua("FINAL('the child counted ' .. total)"),
        ],
        Behavior::status(500),
    );
    let trace = Shared::default();
    let answer = rlm(&server, 5)
        .trace(trace.clone())
        .run("Q", Some(Context::from("x\ny\n")))
        .unwrap();
    assert_eq!(answer.text, "the child counted 2");
    assert_eq!(answer.value, None, "the root had no schema");
    let bodies = bodies(&server);
    let child_system = system_prompt_of(&bodies, 1);
    assert!(
        child_system.contains("## The answer's schema"),
        "{child_system}"
    );
    assert!(child_system.contains("as the Lua value your answer's JSON describes"));
    assert!(!system_prompt_of(&bodies, 0).contains("## The answer's schema"));
    assert!(
        last_message(&bodies[2]).contains("at answer.lines: \"two\" is not of type \"integer\"")
    );
    assert_eq!(last_message(&bodies[3]), "Output of block 1:\ntable\t2\n");
    let events = trace.events();
    let child_start = events
        .iter()
        .find(|e| e["event"] == "start" && e["agent"] == "0.1")
        .unwrap();
    assert_eq!(child_start["answer_schema"]["required"], json!(["lines"]));
    assert_eq!(events[0]["answer_schema"], Value::Null);
}

#[test]
fn the_answer_table_is_checked_and_made_not_ready_when_refused() {
    let server = OpenAiServer::start(
        vec![
            lua("answer.content = {count = 1}\nanswer.ready = true"),
            // Left ready, the refused content would fail this block too.
            lua("print(answer.ready)"),
            lua("answer.content.items = {'only'}\nanswer.ready = true"),
        ],
        Behavior::status(500),
    );
    let answer = rlm(&server, 5)
        .answer_protocol(AnswerProtocol::Answer)
        .answer_schema(schema())
        .run("Q", None)
        .unwrap();
    assert_eq!(answer.value, Some(json!({"count": 1, "items": ["only"]})));
    let bodies = bodies(&server);
    let feedback = last_message(&bodies[1]);
    assert!(
        feedback.contains("\"items\" is a required property"),
        "{feedback}"
    );
    assert_eq!(last_message(&bodies[2]), "Output of block 1:\nfalse\n");
}

#[test]
fn a_final_written_as_json_outside_code_is_checked_too() {
    let server = OpenAiServer::start(
        vec![
            Behavior::reply("Here it is.\nFINAL({\"count\": \"one\", \"items\": []})"),
            Behavior::reply("FINAL({\"count\": 1, \"items\": [\"a\"]})"),
        ],
        Behavior::status(500),
    );
    let answer = rlm(&server, 5)
        .answer_schema(schema())
        .run("Q", None)
        .unwrap();
    assert_eq!(answer.value, Some(json!({"count": 1, "items": ["a"]})));
    let feedback = last_message(&bodies(&server)[1]);
    assert!(
        feedback.starts_with("Your FINAL outside the code could not be used: the answer does not match its schema (1 problem):"),
        "{feedback}"
    );
}

#[cfg(feature = "cli")]
mod cli {
    use super::*;
    use crate::support::cli::{llm_args, rlm_command};

    #[test]
    fn ask_with_a_schema_prints_the_answer_as_json() {
        let dir = tempfile::tempdir().unwrap();
        let schema_file = dir.path().join("answer.json");
        std::fs::write(&schema_file, schema().schema().to_string()).unwrap();
        let server = OpenAiServer::always(lua("FINAL({items = {'b', 'a'}, count = 2})"));
        let out = rlm_command()
            .args(["ask", "Q", "-q", "--schema"])
            .arg(&schema_file)
            .args(llm_args(&server.base_url(), "test-model"))
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(printed, json!({"count": 2, "items": ["b", "a"]}));

        std::fs::write(&schema_file, r#"{"type": "strin"}"#).unwrap();
        let out = rlm_command()
            .args(["ask", "Q", "--schema"])
            .arg(&schema_file)
            .args(llm_args(&server.base_url(), "test-model"))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("not a valid JSON Schema"), "{stderr}");
    }
}
