//! The RLM loop end to end, against the scripted OpenAI-compatible server over real HTTP:
//! what the model is sent, what it gets back, and how runs end. Child agents, budgets,
//! the trace, the prompt and `rlm ask` have files of their own (`tests/it/rlm_loop_*.rs`).

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use rlm_registry::Registry;
use rlm_registry::environment::Limits;
use rlm_registry::llm::LlmError;
use rlm_registry::rlm::{Context, Rlm, RlmError};
use support::openai_server::{Behavior, OpenAiServer};
use support::rlm_loop::*;

#[test]
fn a_multi_turn_run_reaches_a_final_answer() {
    let server = OpenAiServer::start(
        vec![
            lua("n = line_count(context)\nprint('lines', n)"),
            lua("FINAL('There are ' .. n .. ' lines')"),
        ],
        Behavior::status(500),
    );
    let answer = rlm(&server, 10)
        .run("How many lines?", Some(Context::from("a\nb\nc\n")))
        .unwrap();
    assert_eq!(answer.text, "There are 3 lines");
    assert_eq!(answer.turns, 2);
    let bodies = bodies(&server);
    assert_eq!(bodies.len(), 2);
    // Turn 1: the system prompt and the question.
    let first = messages(&bodies[0]);
    assert_eq!(first.len(), 2);
    assert_eq!(first[0]["role"], "system");
    let system = first[0]["content"].as_str().unwrap();
    assert!(system.contains("`context` is a string of 6 bytes: 3 lines"));
    // The default, compact listing: a line of Lua per function, the registry's included.
    assert!(system.contains("\nllm_query(prompt, opts?)  -- Asks a sub-model one question"));
    assert!(system.contains("\nre.find(text, pattern, init?, flags?)\n"));
    assert!(system.contains(Registry::baked().compact_prompt().trim_end()));
    assert!(
        first[1]["content"]
            .as_str()
            .unwrap()
            .starts_with("How many lines?")
    );
    // Turn 2: the reply and its output were appended.
    let second = messages(&bodies[1]);
    assert_eq!(second.len(), 4);
    assert_eq!(second[2]["role"], "assistant");
    assert!(
        second[2]["content"]
            .as_str()
            .unwrap()
            .contains("line_count")
    );
    assert_eq!(last_message(&bodies[1]), "Output of block 1:\nlines\t3\n");
    let usage = answer.usage.total();
    assert_eq!((usage.calls, usage.total_tokens()), (2, 30));
}

#[test]
fn final_var_answers_with_a_variable() {
    let server = OpenAiServer::start(
        vec![lua(
            "local words = word_count(context)\nanswer = 'words: ' .. words\nFINAL_VAR('answer')",
        )],
        Behavior::status(500),
    );
    let answer = rlm(&server, 10)
        .run("Count the words", Some(Context::from("one two three")))
        .unwrap();
    assert_eq!(answer.text, "words: 3");
    assert_eq!(answer.turns, 1);
}

#[test]
fn final_of_a_table_answers_its_json_with_keys_sorted() {
    let server = OpenAiServer::start(
        vec![lua(
            "FINAL({b = {2, 3}, a = 1, nested = {z = true, y = json.null, x = {}}})",
        )],
        Behavior::status(500),
    );
    let answer = rlm(&server, 10).run("Q", None).unwrap();
    assert_eq!(
        answer.text,
        r#"{"a":1,"b":[2,3],"nested":{"x":{},"y":null,"z":true}}"#
    );
    assert_eq!(answer.value, None, "no schema: the answer is text");

    let server = OpenAiServer::start(
        vec![lua(
            "report = {count = 2, items = {'x', 'y'}}\nFINAL_VAR('report')",
        )],
        Behavior::status(500),
    );
    let answer = rlm(&server, 10).run("Q", None).unwrap();
    assert_eq!(answer.text, r#"{"count":2,"items":["x","y"]}"#);
}

#[test]
fn final_of_a_function_or_a_cyclic_table_is_an_error_the_model_reads_and_the_run_goes_on() {
    let server = OpenAiServer::start(
        vec![
            lua("local summarize = function() return 'done' end\nFINAL(summarize)"),
            lua("local t = {name = 'root', children = {}}\nt.children[1] = t\nFINAL(t)"),
            lua("FINAL({name = 'root'})"),
        ],
        Behavior::status(500),
    );
    let answer = rlm(&server, 10).run("Q", None).unwrap();
    assert_eq!(answer.text, r#"{"name":"root"}"#);
    assert_eq!(answer.turns, 3);
    let bodies = bodies(&server);
    let expected = [
        "Block 1 failed with a Lua error on line 2: FINAL takes a string, a number, a boolean or a table of those; got a function — call it and pass its result",
        "Block 1 failed with a Lua error on line 3: FINAL: the table refers to itself at answer.children[1]; pass a copy without the cycle",
    ];
    for (turn, expected) in expected.iter().enumerate() {
        let feedback = last_message(&bodies[turn + 1]);
        assert!(
            feedback.starts_with(expected),
            "turn {}: {feedback}",
            turn + 1
        );
    }

    // FINAL_VAR names the value by the variable.
    let server = OpenAiServer::start(
        vec![
            lua("report = {name = 'root', run = print}\nFINAL_VAR('report')"),
            lua("report.run = nil\nFINAL_VAR('report')"),
        ],
        Behavior::status(500),
    );
    let answer = rlm(&server, 10).run("Q", None).unwrap();
    assert_eq!(answer.text, r#"{"name":"root"}"#);
    let feedback = last_message(&bodies_of(&server)[1]);
    assert!(
        feedback.starts_with("Block 1 failed with a Lua error on line 2: FINAL_VAR takes a variable holding a string, a number, a boolean or a table of those; got a function at report.run — call it and pass its result"),
        "{feedback}"
    );
}

#[test]
fn every_block_runs_in_order_and_unlabeled_lua_fences_count() {
    let server = OpenAiServer::start(
        vec![
            Behavior::reply(
                "First:\n```lua\nx = 20\n```\nThen:\n```\nx = x + 1\nprint(x)\n```\n```text\nnot code\n```",
            ),
            lua("FINAL(x * 2)"),
        ],
        Behavior::status(500),
    );
    let answer = rlm(&server, 10).run("Compute", None).unwrap();
    assert_eq!(answer.text, "42");
    let feedback = last_message(&bodies(&server)[1]);
    assert!(
        feedback.contains("Block 1 ran and printed nothing"),
        "{feedback}"
    );
    assert!(feedback.contains("Output of block 2:\n21\n"), "{feedback}");
    assert!(
        feedback.contains("a ```text block was not run"),
        "{feedback}"
    );
}

#[test]
fn a_final_in_plain_text_is_accepted() {
    let server = OpenAiServer::start(
        vec![Behavior::reply(
            "I can tell without code.\n\nFINAL(\"forty-two\")",
        )],
        Behavior::status(500),
    );
    let answer = rlm(&server, 10).run("What?", None).unwrap();
    assert_eq!(answer.text, "forty-two");
    assert_eq!(server.request_count(), 1);

    // FINAL(name) with a variable of the session answers with its value; FINAL_VAR too.
    let server = OpenAiServer::start(
        vec![
            lua("result = 6 * 7"),
            Behavior::reply("The code worked.\nFINAL(result)"),
        ],
        Behavior::status(500),
    );
    assert_eq!(rlm(&server, 10).run("What?", None).unwrap().text, "42");
    let server = OpenAiServer::start(
        vec![Behavior::reply("```lua\ntotal = 5\n```\nFINAL_VAR(total)")],
        Behavior::status(500),
    );
    assert_eq!(rlm(&server, 10).run("What?", None).unwrap().text, "5");
}

#[test]
fn a_reply_without_code_gets_one_reminder() {
    let server = OpenAiServer::start(
        vec![
            Behavior::reply("Let me think about the context first."),
            lua("FINAL('ok')"),
        ],
        Behavior::status(500),
    );
    assert_eq!(rlm(&server, 10).run("Q", None).unwrap().text, "ok");
    let reminder = last_message(&bodies(&server)[1]);
    assert!(reminder.contains("no ```lua code block"), "{reminder}");
    assert!(reminder.contains("only reminder"), "{reminder}");

    // Twice in a row ends the run.
    let server = OpenAiServer::always(Behavior::reply("Hmm, interesting."));
    match rlm(&server, 10).run("Q", None) {
        Err(error @ RlmError::NoCode { .. }) => {
            assert!(error.to_string().contains("Hmm, interesting."), "{error}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(server.request_count(), 2);
}

#[test]
fn a_lua_error_goes_back_with_its_line_and_the_run_recovers() {
    let server = OpenAiServer::start(
        vec![
            lua("print('before')\nlocal t = nil\nprint(t.field)\nprint('after')"),
            lua("FINAL('recovered')"),
        ],
        Behavior::status(500),
    );
    let answer = rlm(&server, 10).run("Q", None).unwrap();
    assert_eq!(answer.text, "recovered");
    let feedback = last_message(&bodies(&server)[1]);
    assert!(
        feedback
            .starts_with("Block 1 failed with a Lua error on line 3: attempt to index a nil value"),
        "{feedback}"
    );
    assert!(feedback.contains("  3 | print(t.field)"), "{feedback}");
    assert!(
        feedback.contains("Output before the error:\nbefore\n"),
        "{feedback}"
    );
}

#[test]
fn an_unknown_function_gets_a_did_you_mean() {
    let server = OpenAiServer::start(
        vec![
            lua("print(word_cout(context))"),
            lua("FINAL(word_count(context))"),
        ],
        Behavior::status(500),
    );
    let answer = rlm(&server, 10)
        .run("Words?", Some(Context::from("a b")))
        .unwrap();
    assert_eq!(answer.text, "2");
    let feedback = last_message(&bodies(&server)[1]);
    assert!(
        feedback.contains("`word_cout` is not a function here"),
        "{feedback}"
    );
    assert!(
        feedback.contains("Did you mean `word_count`?"),
        "{feedback}"
    );
}

#[test]
fn a_limit_hit_goes_back_as_text_and_later_blocks_do_not_run() {
    let server = OpenAiServer::start(
        vec![
            Behavior::reply(
                "```lua\nkept = 1\nwhile true do end\n```\n```lua\nprint('never')\n```",
            ),
            lua("FINAL(kept)"),
        ],
        Behavior::status(500),
    );
    let limits = Limits {
        time: Duration::from_millis(100),
        ..Limits::default()
    };
    let answer = rlm(&server, 10).limits(limits).run("Q", None).unwrap();
    assert_eq!(answer.text, "1", "variables survive the limit");
    let feedback = last_message(&bodies(&server)[1]);
    assert!(
        feedback.starts_with("Block 1 hit the time limit"),
        "{feedback}"
    );
    assert!(feedback.contains("Block 2 was not run"), "{feedback}");
}

#[test]
fn long_output_is_truncated_with_a_note() {
    let server = OpenAiServer::start(
        vec![lua("print(string.rep('x', 1000))"), lua("FINAL('done')")],
        Behavior::status(500),
    );
    rlm(&server, 10).output_bytes(100).run("Q", None).unwrap();
    let feedback = last_message(&bodies(&server)[1]);
    assert!(
        feedback.contains(&format!("{}\n[... 901 more bytes cut", "x".repeat(100))),
        "{feedback}"
    );
}

#[cfg(feature = "cli")] // tracing-subscriber comes with the `cli` feature
#[test]
fn the_iteration_cap_ends_the_run_with_warnings_from_turn_5() {
    let server = OpenAiServer::always(lua("print('still looking')"));
    let logs = Shared::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let result = tracing::subscriber::with_default(subscriber, || rlm(&server, 6).run("Q", None));
    match result {
        Err(error @ RlmError::IterationLimit { max_iterations: 6 }) => {
            assert_eq!(
                error.to_string(),
                "iteration limit reached: no final answer after 6 turns"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(server.request_count(), 6);
    let logs = logs.text();
    assert!(!logs.contains("turn 4 of 6"), "{logs}");
    assert!(logs.contains("WARN"), "{logs}");
    assert!(logs.contains("RLM turn 5 of 6"), "{logs}");
    assert!(logs.contains("RLM turn 6 of 6"), "{logs}");
    // The model is told when the end is near.
    assert!(last_message(&bodies(&server)[5]).contains("1 turn left"));

    let default =
        Rlm::with_default_iterations(Arc::new(client(&server)), Registry::baked().clone());
    assert_eq!(default.max_iterations(), 10);
}

#[test]
fn too_many_consecutive_errors_end_the_run() {
    let server = OpenAiServer::always(lua("error('nope')"));
    match rlm(&server, 10).max_consecutive_errors(2).run("Q", None) {
        Err(RlmError::ConsecutiveErrors { count, last_error }) => {
            assert_eq!(count, 2);
            assert!(last_error.contains("nope"), "{last_error}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(server.request_count(), 2);

    // A good turn in between resets the count.
    let server = OpenAiServer::start(
        vec![
            lua("error('a')"),
            lua("print(1)"),
            lua("error('b')"),
            lua("FINAL('ok')"),
        ],
        Behavior::status(500),
    );
    let answer = rlm(&server, 10).max_consecutive_errors(2).run("Q", None);
    assert_eq!(answer.unwrap().text, "ok");
}

#[test]
fn an_llm_server_that_fails_mid_run_is_an_llm_error() {
    let server = OpenAiServer::start(vec![lua("x = 1")], Behavior::status(503));
    let report = rlm(&server, 10).run_report("Q", None, None);
    match &report.result {
        Err(RlmError::Llm(error @ LlmError::Status { status: 503, .. })) => {
            assert_eq!(error.attempts(), 2, "one retry");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(report.turns, 2);
    assert_eq!(report.usage.total().calls, 2);
    assert_eq!(report.usage.total().failed_calls, 1);

    let server = OpenAiServer::start(vec![lua("x = 1")], Behavior::Garbage("<html>".into()));
    let result = rlm(&server, 10).run("Q", None);
    assert!(
        matches!(
            result,
            Err(RlmError::Llm(LlmError::MalformedResponse { .. }))
        ),
        "{result:?}"
    );
}

#[test]
fn the_rlm_is_shareable_and_its_errors_are_sendable() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Rlm>();
    send_sync::<RlmError>();
}
