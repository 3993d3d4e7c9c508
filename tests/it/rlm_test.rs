//! `rlm test` and the examples in doc comments: passing, failing and erroring examples
//! and test files with their exit codes and reports, a broken example refused by
//! `rlm check` at its line, and every example of the crate's own library passing.

use crate::support;

use std::sync::Arc;

use rlm_registry::Registry;
use rlm_registry::conventions::examples::examples_in;
use rlm_registry::testing::{TestOutcome, TestSummary, run_examples};
use support::cli::{rlm, stdout};

fn json_report(dir: &str) -> serde_json::Value {
    let output = rlm(&["test", "--no-baked", "--path", dir, "--format", "json"]);
    serde_json::from_slice(&output.stdout).expect("rlm test --format json prints JSON")
}

#[test]
fn passing_examples_and_tests_exit_0_with_a_summary() {
    let output = rlm(&[
        "test",
        "--no-baked",
        "--path",
        "tests/fixtures/rlm_test/passing",
    ]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(
        text.contains("example of double (tests/fixtures/rlm_test/passing/doubling.lua:4) ... ok"),
        "{text}"
    );
    assert!(
        text.contains(
            "test doubles_integers (tests/fixtures/rlm_test/passing/doubling_test.lua) ... ok"
        ),
        "{text}"
    );
    assert!(
        text.ends_with("test result: ok. 4 passed; 0 failed; 0 errored\n"),
        "{text}"
    );
}

/// A test file is Lua source: bytes that are not UTF-8 in its strings are kept, and a
/// last line ending in `]` with no newline after it loads as any other.
#[test]
fn a_test_file_keeps_its_bytes_and_may_end_in_a_bracket() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("bytes_test.lua"),
        b"local T = {'caf\xe9'}\nreturn {\n  keeps_latin1 = function() check(#T[1], 4) check(T[1]:byte(4), 233) end,\n} -- T[1]",
    )
    .unwrap();
    let output = rlm(&["test", "--no-baked", "--path", dir.path().to_str().unwrap()]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(text.contains("test keeps_latin1 ("), "{text}");
    assert!(
        text.ends_with("test result: ok. 1 passed; 0 failed; 0 errored\n"),
        "{text}"
    );
}

#[test]
fn llm_query_in_an_example_is_answered_by_the_echo_model() {
    let report = json_report("tests/fixtures/rlm_test/passing");
    let summarize = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "summarize")
        .expect("the summarize example ran");
    assert_eq!(summarize["outcome"], "passed", "{summarize}");
}

#[test]
fn a_failing_example_exits_1_naming_its_line_and_both_values() {
    let output = rlm(&[
        "test",
        "--no-baked",
        "--path",
        "tests/fixtures/rlm_test/failing",
    ]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(
        text.contains("example of add (tests/fixtures/rlm_test/failing/adding.lua:4) ... FAILED"),
        "{text}"
    );
    assert!(
        text.contains(
            "tests/fixtures/rlm_test/failing/adding.lua:4: add(1, 2): expected 3, got -1"
        ),
        "{text}"
    );
    assert!(
        text.contains("add(2, 2)\n  expected: 4\n  actual:   0"),
        "{text}"
    );
    assert!(
        text.ends_with("test result: FAILED. 0 passed; 2 failed; 0 errored\n"),
        "{text}"
    );
}

#[test]
fn an_erroring_example_or_test_file_exits_1_as_errored() {
    let output = rlm(&[
        "test",
        "--no-baked",
        "--path",
        "tests/fixtures/rlm_test/erroring",
    ]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(
        text.contains("missing.lua:8: attempt to call a nil value (global 'missing_function')"),
        "{text}"
    );
    assert!(
        text.contains("test (file) (tests/fixtures/rlm_test/erroring/syntax_test.lua) ... ERROR"),
        "{text}"
    );
    assert!(
        text.ends_with("test result: FAILED. 0 passed; 0 failed; 2 errored\n"),
        "{text}"
    );
}

#[test]
fn the_json_report_has_one_entry_per_example_and_test() {
    let report = json_report("tests/fixtures/rlm_test/failing");
    assert_eq!(report["ok"], false);
    assert_eq!(
        report["summary"],
        serde_json::json!({"passed": 0, "failed": 2, "errored": 0})
    );
    let example = &report["results"][0];
    assert_eq!(example["kind"], "example");
    assert_eq!(example["name"], "add");
    assert_eq!(example["line"], 4);
    assert_eq!(example["outcome"], "failed");
    let test = &report["results"][1];
    assert_eq!(
        (test["kind"].as_str(), test["line"].is_null()),
        (Some("test"), true)
    );
}

#[test]
fn a_broken_example_fails_rlm_check_and_rlm_test_at_its_line() {
    let file = "tests/fixtures/bad/E012_broken_example.lua";
    let check = rlm(&["check", "--no-baked", "--path", file]);
    assert_eq!(check.status.code(), Some(1));
    let report = String::from_utf8_lossy(&check.stdout);
    assert!(
        report.contains("error[E012]") && report.contains("E012_broken_example.lua:5:1"),
        "{report}"
    );
    let test = rlm(&["test", "--no-baked", "--path", file]);
    assert_eq!(
        test.status.code(),
        Some(2),
        "a registry that does not load runs nothing"
    );
    assert!(String::from_utf8_lossy(&test.stderr).contains("error[E012]"));
}

#[test]
fn a_missing_path_is_a_usage_error() {
    let output = rlm(&["test", "--path", "tests/fixtures/rlm_test/no_such_dir"]);
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn every_function_of_the_crates_library_has_an_example() {
    let without: Vec<&str> = Registry::baked()
        .iter_functions()
        .filter(|(_, f)| {
            let lines: Vec<&str> = f.doc().lines().collect();
            examples_in(&lines).map_or(true, |examples| examples.is_empty())
        })
        .map(|(name, _)| name)
        .collect();
    assert!(
        without.is_empty(),
        "functions without an example: {without:?}"
    );
}

#[test]
fn every_example_of_the_crates_library_passes() {
    let results = run_examples(&Arc::new(Registry::baked().clone()));
    let problems: Vec<String> = results
        .iter()
        .filter(|r| r.outcome != TestOutcome::Passed)
        .map(|r| format!("{} ({}:{}): {:?}", r.name, r.file, r.line, r.outcome))
        .collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(TestSummary::of(&results).passed >= Registry::baked().functions().len());
}
