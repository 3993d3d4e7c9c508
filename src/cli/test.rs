//! `rlm test`: run the examples in doc comments and the `*_test.lua` files.

use std::io::IsTerminal;
use std::sync::Arc;

use rlm_registry::Registry;
use rlm_registry::testing::{self, TestKind, TestOutcome, TestResult, TestSummary};
use serde_json::json;

use super::{EXIT_USAGE, EXIT_VIOLATIONS, Format, Output, SourceArgs};

pub(super) fn run(source: &SourceArgs, format: Format) -> Output {
    if let Some(missing) = source.missing_paths_error() {
        return missing;
    }
    let registry = match source.load() {
        Ok(registry) => Arc::new(registry),
        Err(error) => {
            let color = std::io::stderr().is_terminal();
            return Output::failure(EXIT_USAGE, format!("{}\n", error.render(color)));
        }
    };
    let results = run_tests(source, &registry);
    let summary = TestSummary::of(&results);
    let stdout = match format {
        Format::Human => human(&results, &summary),
        Format::Json => format!("{}\n", to_json(&results, &summary)),
    };
    Output {
        stdout: stdout.into(),
        stderr: String::new(),
        code: if summary.ok() { 0 } else { EXIT_VIOLATIONS },
    }
}

/// With paths, the examples of the functions they define and their test files; with
/// none, the examples of the base registry.
fn run_tests(source: &SourceArgs, registry: &Arc<Registry>) -> Vec<TestResult> {
    let first_tested_chunk = if source.paths.is_empty() {
        0
    } else {
        source.base().chunks().len()
    };
    let tested = registry
        .functions()
        .iter()
        .filter(|f| f.chunk() >= first_tested_chunk)
        .map(|f| f.name());
    let mut results: Vec<TestResult> = tested
        .flat_map(|name| testing::run_function_examples(registry, name))
        .collect();
    results.extend(testing::run_test_files(registry, &source.paths));
    results
}

fn human(results: &[TestResult], summary: &TestSummary) -> String {
    let mut text = String::new();
    for result in results {
        let status = match result.outcome {
            TestOutcome::Passed => "ok",
            TestOutcome::Failed(_) => "FAILED",
            TestOutcome::Errored(_) => "ERROR",
        };
        text.push_str(&format!(
            "{} {} ... {status}\n",
            what(result),
            where_(result)
        ));
    }
    let problems: Vec<&TestResult> = results
        .iter()
        .filter(|r| r.outcome != TestOutcome::Passed)
        .collect();
    if !problems.is_empty() {
        text.push_str("\nfailures:\n");
        for result in problems {
            let message = result.outcome.message().unwrap_or_default();
            text.push_str(&format!(
                "\n{} {}:\n{message}\n",
                what(result),
                where_(result)
            ));
        }
    }
    text.push_str(&format!("\n{summary}\n"));
    text
}

fn what(result: &TestResult) -> String {
    match result.kind {
        TestKind::Example => format!("example of {}", result.name),
        TestKind::Test => format!("test {}", result.name),
    }
}

fn where_(result: &TestResult) -> String {
    match result.kind {
        TestKind::Example => format!("({}:{})", result.file, result.line),
        TestKind::Test => format!("({})", result.file),
    }
}

fn to_json(results: &[TestResult], summary: &TestSummary) -> serde_json::Value {
    let results: Vec<serde_json::Value> = results
        .iter()
        .map(|result| {
            json!({
                "kind": result.kind,
                "name": result.name,
                "file": result.file,
                "line": (result.kind == TestKind::Example).then_some(result.line),
                "outcome": result.outcome.name(),
                "message": result.outcome.message(),
            })
        })
        .collect();
    json!({ "summary": summary, "ok": summary.ok(), "results": results })
}
