//! The reference RLM's answer protocol beside `FINAL`: every environment has an `answer`
//! table, and setting `answer.ready = true` ends the run with `answer.content`, exactly
//! as `FINAL(answer.content)` would: at the root and in a child, with the same trace and
//! the same export. `--answer-protocol` chooses which of the two the prompt teaches.

use crate::support;

use rlm_registry::Registry;
use rlm_registry::conventions::AnswerProtocol;
use rlm_registry::environment::{Environment, Limits};
use rlm_registry::rlm::Context;
use rlm_registry::trace::{ExportOptions, Trace, export_rlm};
use serde_json::Value;
use support::openai_server::{Behavior, OpenAiServer};
use support::rlm_loop::*;

fn env() -> Environment {
    Environment::new(Registry::baked().clone(), Limits::default()).unwrap()
}

#[test]
fn every_environment_starts_with_an_answer_that_is_not_ready() {
    let env = env();
    let out = env
        .execute("print(type(answer), answer.content == '', answer.ready)")
        .unwrap();
    assert_eq!(out.output, "table\ttrue\tfalse\n");
    assert_eq!(env.final_answer(), None);
}

#[test]
fn ready_ends_with_the_content_converted_as_final_converts_it() {
    for (code, expected) in [
        (
            "answer.content = 'forty-two' answer.ready = true",
            "forty-two",
        ),
        ("answer['content'] = 42 answer['ready'] = true", "42"),
        ("answer = {content = 1.5, ready = true}", "1.5"),
        (
            "answer.content = setmetatable({}, {__tostring = function() return 'shown' end}) answer.ready = true",
            "shown",
        ),
        (
            "answer.content = {b = {2, 3}, a = 1} answer.ready = true",
            r#"{"a":1,"b":[2,3]}"#,
        ),
    ] {
        let env = env();
        env.execute(code).unwrap();
        assert_eq!(env.final_answer().as_deref(), Some(expected), "`{code}`");
    }
}

#[test]
fn only_a_ready_of_true_on_an_answer_table_ends_the_run() {
    for code in [
        "answer.content = 'draft'",
        "answer.content = 'draft' answer.ready = 'yes'",
        "answer.content = 'draft' answer.ready = 1",
        "answer = 'done'",
        "answer = nil",
        "answer = setmetatable({}, {__index = {ready = true, content = 'x'}})",
    ] {
        let env = env();
        env.execute(code).unwrap();
        assert_eq!(env.final_answer(), None, "`{code}`");
    }
}

#[test]
fn final_called_first_wins_and_a_failed_execution_gives_no_answer() {
    let env = env();
    env.execute("answer.content = 'second' answer.ready = true FINAL('first')")
        .unwrap();
    assert_eq!(env.final_answer().as_deref(), Some("first"));

    let env = self::env();
    assert!(
        env.execute("answer.content = 'x' answer.ready = true error('boom')")
            .is_err()
    );
    assert_eq!(env.final_answer(), None, "the execution failed");
    // The table stays ready: the next execution that succeeds ends the run.
    env.execute("print('again')").unwrap();
    assert_eq!(env.final_answer().as_deref(), Some("x"));
}

#[test]
fn a_content_with_no_json_form_is_an_error_naming_answer_content_and_is_not_ready() {
    let env = env();
    let error = env
        .execute("answer.content = {total = 3, recount = function() end} answer.ready = true")
        .unwrap_err();
    assert_eq!(
        error.message(),
        "answer.content must be a string, a number, a boolean or a table of those; got a function at answer.content.recount — call it and pass its result"
    );
    assert_eq!(env.final_answer(), None);
    let out = env.execute("print(answer.ready)").unwrap();
    assert_eq!(
        out.output, "false\n",
        "refused, the table is made not ready"
    );
}

/// The same scripted run ended once with `FINAL` and once with the answer table, at the
/// root and in a child: the same answer, turns, traced final answers and export.
#[test]
fn answer_ready_ends_a_run_and_a_child_as_final_does() {
    let run = |child_end: &str, root_end: &str| {
        let server = OpenAiServer::start(
            vec![
                lua("print(rlm_query('Count the lines', 'x\\ny\\n'))"),
                lua(child_end),
                lua(root_end),
            ],
            Behavior::status(500),
        );
        let trace = Shared::default();
        let answer = rlm(&server, 10)
            .trace(trace.clone())
            .run("Q", Some(Context::from("root context")))
            .unwrap();
        let finals: Vec<Value> = turns(&trace.events())
            .iter()
            .map(|turn| turn["final"].clone())
            .collect();
        let export = export_rlm(
            &Trace::parse(&trace.text()).unwrap(),
            &ExportOptions::default(),
        );
        let exported: Vec<Value> = events_of(&export)
            .iter()
            .map(|line| line["final_answer"].clone())
            .collect();
        (answer.text, answer.turns, finals, exported)
    };
    let with_final = run(
        "FINAL(line_count(context) .. ' lines')",
        "FINAL('the child found 2')",
    );
    let with_answer = run(
        "answer.content = line_count(context) .. ' lines' answer.ready = true",
        "answer['content'] = 'the child found 2'\nanswer['ready'] = true",
    );
    assert_eq!(with_final.0, "the child found 2");
    assert_eq!(with_answer, with_final);
    assert!(
        with_final.2.contains(&Value::from("2 lines")),
        "{:?}",
        with_final.2
    );
}

/// `answer_protocol(Answer)` makes the prompt teach the answer table; the trace records
/// the choice; and a run ended that way answers, traces and exports as a `FINAL` run
/// taught `FINAL` does.
#[test]
fn the_protocol_taught_is_recorded_and_a_run_ends_the_same_either_way() {
    let run = |protocol: AnswerProtocol, end: &str| {
        let server = OpenAiServer::start(vec![lua("n = 6 * 7"), lua(end)], Behavior::status(500));
        let trace = Shared::default();
        let answer = rlm(&server, 10)
            .answer_protocol(protocol)
            .trace(trace.clone())
            .run("Q", None)
            .unwrap();
        let system = system_prompt_of(&bodies(&server), 0);
        let events = trace.events();
        let export = export_rlm(
            &Trace::parse(&trace.text()).unwrap(),
            &ExportOptions::default(),
        );
        let exported: Vec<Value> = events_of(&export)
            .iter()
            .map(|line| line["final_answer"].clone())
            .collect();
        (answer.text, system, events, exported)
    };
    let (final_text, final_system, final_events, final_export) =
        run(AnswerProtocol::Final, "FINAL(n)");
    let (answer_text, answer_system, answer_events, answer_export) = run(
        AnswerProtocol::Answer,
        "answer['content'] = n\nanswer['ready'] = true",
    );
    assert!(final_system.contains("call `FINAL(answer)`"));
    assert!(!final_system.contains("answer[\"ready\"]"));
    assert!(answer_system.contains("set `answer[\"ready\"] = true`"));
    assert!(!answer_system.contains("call `FINAL(answer)`"));
    assert_eq!(final_events[0]["answer_protocol"], "final");
    assert_eq!(answer_events[0]["answer_protocol"], "answer");
    assert_eq!(
        (answer_text, answer_export),
        (final_text.clone(), final_export)
    );
    assert_eq!(final_text, "42");
    assert_eq!(turns(&answer_events)[1]["final"], "42");
}

/// The eval's `rlm` method teaches the protocol it is given, and scores the answer the
/// table gives as it scores `FINAL`'s.
#[test]
fn the_eval_rlm_method_takes_the_protocol() {
    use rlm_registry::eval::{EvalMethod, EvalOptions, Runner, Scorer, Task};
    let task = Task {
        id: "t".into(),
        question: "What is 6 x 7?".into(),
        context: Some("six sevens".into()),
        context_file: None,
        answer: "42".into(),
        scorer: Scorer::Exact,
        family: None,
        size: None,
        schema: None,
        corpus: false,
    };
    let server = OpenAiServer::always(lua("answer['content'] = '42'\nanswer['ready'] = true"));
    let out = tempfile::tempdir().unwrap();
    let options = EvalOptions {
        methods: vec![EvalMethod::Rlm],
        answer_protocol: AnswerProtocol::Answer,
        ..EvalOptions::default()
    };
    let runner = Runner::new(std::sync::Arc::new(client(&server)), options, out.path());
    let results = runner.run(std::slice::from_ref(&task), |_, _| {}).unwrap();
    assert_eq!(
        (results[0].score, results[0].answer.as_deref()),
        (1.0, Some("42"))
    );
    let trace =
        std::fs::read_to_string(out.path().join(results[0].trace.as_ref().unwrap())).unwrap();
    assert_eq!(events_of(&trace)[0]["answer_protocol"], "answer");
    assert!(system_prompt_of(&bodies(&server), 0).contains("answer[\"ready\"] = true"));
}

#[test]
fn ask_takes_the_protocol_from_the_flag_or_rlm_toml() {
    use crate::support::cli::{llm_args, rlm_command};
    let dir = tempfile::tempdir().unwrap();
    let ask = |args: &[&str]| {
        let server = OpenAiServer::always(lua("answer.content = 'done' answer.ready = true"));
        let out = rlm_command()
            .current_dir(dir.path())
            .args(["ask", "Q", "-q"])
            .args(args)
            .args(llm_args(&server.base_url(), "test-model"))
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "done\n");
        system_prompt_of(&bodies(&server), 0)
    };
    let taught_answer = "set `answer[\"ready\"] = true`";
    assert!(!ask(&[]).contains(taught_answer), "final by default");
    assert!(ask(&["--answer-protocol", "answer"]).contains(taught_answer));
    std::fs::write(
        dir.path().join("rlm.toml"),
        "[model]\nanswer_protocol = \"answer\"\n",
    )
    .unwrap();
    assert!(ask(&[]).contains(taught_answer));
    assert!(
        !ask(&["--answer-protocol", "final"]).contains(taught_answer),
        "the flag wins"
    );
}
