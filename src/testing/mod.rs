//! `rlm test`: runs a registry's doc-comment examples and `*_test.lua` files in the
//! sandbox and reports each as passed, failed or errored.
//!
//! - **Examples** (see [`examples`](crate::conventions::examples)): each fenced block of
//!   each function runs in a fresh environment holding the registry; an `EXPR -->
//!   EXPECTED` line that does not hold fails it.
//! - **Test files**: a `*_test.lua` file returns a table of test functions, name →
//!   function; each runs in a fresh environment and passes unless it raises.
//!
//! Both see the helpers `check(actual, expected [, message])` (deep equality),
//! `check_error(fn, text [, message])` and `show(value)`. A failed check is a *failure*;
//! any other error (a syntax error, calling nil, a limit) is an *error*. `llm_query`
//! is answered by [`EchoLlm`], which returns the prompt: no model is called, so the
//! results do not depend on one. `context` holds [`SAMPLE_CONTEXT`], four log lines.
//!
//! ```
//! use std::sync::Arc;
//! use rlm_registry::Registry;
//! use rlm_registry::testing::{TestOutcome, run_examples};
//!
//! let src = "--- Doubles.\n---\n--- ```lua\n--- double(2) --> 4\n--- double(3) --> 7\n--- ```\n---@param x number\n---@return number\nfunction double(x) return 2 * x end";
//! let registry = Arc::new(Registry::from_map([("double", src)]).unwrap());
//! let results = run_examples(&registry);
//! assert_eq!(results.len(), 1);
//! assert!(matches!(&results[0].outcome, TestOutcome::Failed(m) if m.ends_with("double(3): expected 7, got 6")));
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;
use walkdir::WalkDir;

use crate::Registry;
use crate::conventions::Function;
use crate::conventions::examples::{examples_in, is_test_file, lua_string};
use crate::environment::{Environment, ExecError};
use crate::llm::{Completion, Llm, LlmError, Message, Request};

/// The helpers every example and test file sees (`check`, `check_error`, `show`).
pub const PRELUDE: &str = include_str!("prelude.lua");

/// The `context` examples and tests see: a few lines of a log, so that an example may
/// show a call on `context` as the model would write it.
pub const SAMPLE_CONTEXT: &str = "2024-05-01T12:00:00Z ERROR disk full on /var\n\
2024-05-01T12:00:05Z INFO retry scheduled\n\
2024-05-01T12:00:09Z ERROR timeout after 30 ms\n\
2024-05-01T12:01:00Z INFO request handled in 12 ms\n";

/// The global a failed check sets, telling a failure from an error.
const FAILED_FLAG: &str = "__rlm_check_failed";

/// What a result is the result of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TestKind {
    /// A fenced example in a function's doc comment.
    Example,
    /// One function of a `*_test.lua` file.
    Test,
}

/// How a test or example ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TestOutcome {
    /// Every check held.
    Passed,
    /// A check did not hold: the message says what was expected and what came.
    Failed(String),
    /// It could not run to the end: a syntax error, a Lua error, a limit.
    Errored(String),
}

impl TestOutcome {
    /// `passed`, `failed` or `errored`.
    pub fn name(&self) -> &'static str {
        match self {
            TestOutcome::Passed => "passed",
            TestOutcome::Failed(_) => "failed",
            TestOutcome::Errored(_) => "errored",
        }
    }

    /// The message of a failure or an error.
    pub fn message(&self) -> Option<&str> {
        match self {
            TestOutcome::Passed => None,
            TestOutcome::Failed(message) | TestOutcome::Errored(message) => Some(message),
        }
    }
}

/// One example or test and how it ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestResult {
    /// Example or test function.
    pub kind: TestKind,
    /// The function the example documents, or the test's name.
    pub name: String,
    /// The file it is in.
    pub file: String,
    /// The example's first code line; 0 for a test function.
    pub line: usize,
    /// How it ended.
    pub outcome: TestOutcome,
}

/// Every example of every function of `registry`, in name order.
pub fn run_examples(registry: &Arc<Registry>) -> Vec<TestResult> {
    let names: Vec<&str> = registry.iter_functions().map(|(name, _)| name).collect();
    names
        .into_iter()
        .flat_map(|name| run_function_examples(registry, name))
        .collect()
}

/// The examples of the function `name` (none if there is no such function).
pub fn run_function_examples(registry: &Arc<Registry>, name: &str) -> Vec<TestResult> {
    match registry.get(name) {
        Some(function) => run_examples_of(registry, name, function),
        None => Vec::new(),
    }
}

fn run_examples_of(registry: &Arc<Registry>, name: &str, function: &Function) -> Vec<TestResult> {
    let doc_lines: Vec<&str> = function.doc().lines().collect();
    // The doc sits right above the definition, so its first line's number follows.
    let doc_start = (function.line() as usize).saturating_sub(doc_lines.len());
    let result = |line: usize, outcome: TestOutcome| TestResult {
        kind: TestKind::Example,
        name: name.to_string(),
        file: function.file().to_string(),
        line,
        outcome,
    };
    let examples = match examples_in(&doc_lines) {
        Ok(examples) => examples,
        Err(unclosed) => {
            let message = "the example is not closed (E012)".to_string();
            return vec![result(
                doc_start + unclosed.line,
                TestOutcome::Errored(message),
            )];
        }
    };
    examples
        .iter()
        .map(|example| {
            let line = doc_start + example.first_line;
            let chunk = example.chunk(line.saturating_sub(1));
            let chunk_name = format!("@{}", function.file());
            result(line, run_chunk(registry, chunk.as_bytes(), &chunk_name))
        })
        .collect()
}

/// Every `*_test.lua` file under `paths` (files or directories), sorted by path; each
/// test function runs in a fresh environment holding `registry`.
pub fn run_test_files(registry: &Arc<Registry>, paths: &[PathBuf]) -> Vec<TestResult> {
    test_files(paths)
        .iter()
        .flat_map(|file| run_test_file(registry, file))
        .collect()
}

/// The test files under `paths`, in sorted order.
pub fn test_files(paths: &[PathBuf]) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = paths
        .iter()
        .flat_map(|path| WalkDir::new(path).follow_links(true).sort_by_file_name())
        .filter_map(Result::ok)
        .filter(|entry| entry.file_type().is_file() && is_test_file(entry.path()))
        .map(|entry| entry.into_path())
        .collect();
    files.dedup();
    files
}

fn run_test_file(registry: &Arc<Registry>, path: &Path) -> Vec<TestResult> {
    let file = path.display().to_string();
    let result = |name: &str, outcome: TestOutcome| TestResult {
        kind: TestKind::Test,
        name: name.to_string(),
        file: file.clone(),
        line: 0,
        outcome,
    };
    let source = match std::fs::read(path) {
        Ok(source) => source,
        Err(error) => return vec![result("(file)", TestOutcome::Errored(error.to_string()))],
    };
    let names = match test_names(registry, &source, &file) {
        Ok(names) => names,
        Err(message) => return vec![result("(file)", TestOutcome::Errored(message))],
    };
    names
        .iter()
        .map(|name| {
            let mut call = loaded_tests(&source, &file);
            call.extend_from_slice(format!("[{}]()", lua_string(name)).as_bytes());
            result(name, run_chunk(registry, &call, "=test"))
        })
        .collect()
}

/// The names of the test functions a test file returns, sorted.
fn test_names(registry: &Arc<Registry>, source: &[u8], file: &str) -> Result<Vec<String>, String> {
    let env = environment(registry).map_err(|error| error.to_string())?;
    let mut list = b"local names = {}\nfor name, test in pairs(".to_vec();
    list.extend_from_slice(&loaded_tests(source, file));
    list.extend_from_slice(
        b") do\n  if type(test) == 'function' then names[#names + 1] = name end\nend\ntable.sort(names)\nprint(table.concat(names, '\\n'))",
    );
    let listed = env
        .execute_bytes(&list)
        .map_err(|error| format!("the file did not load: {}", error.message()))?;
    Ok(listed.output.lines().map(str::to_string).collect())
}

/// A Lua expression loading the test file and calling it: its table of tests. The
/// source, as its bytes, is quoted in a long bracket whose level does not occur in it,
/// closed on a line of its own (a file ending in `]` would otherwise close it early).
fn loaded_tests(source: &[u8], file: &str) -> Vec<u8> {
    let closes = |level: &str| {
        let close = format!("]{level}]");
        source.windows(close.len()).any(|w| w == close.as_bytes())
    };
    let level = (0..)
        .map(|n| "=".repeat(n))
        .find(|level| !closes(level))
        .unwrap_or_default();
    let mut chunk = format!("assert(load([{level}[\n").into_bytes();
    chunk.extend_from_slice(source);
    let name = lua_string(&format!("@{file}"));
    chunk.extend_from_slice(format!("\n]{level}], {name}, 't'))()").as_bytes());
    chunk
}

/// Runs one chunk in a fresh environment: passed, failed (a check) or errored.
fn run_chunk(registry: &Arc<Registry>, chunk: &[u8], chunk_name: &str) -> TestOutcome {
    let env = match environment(registry) {
        Ok(env) => env,
        Err(error) => return TestOutcome::Errored(error.to_string()),
    };
    match env.execute_named(chunk, chunk_name) {
        Ok(_) => TestOutcome::Passed,
        Err(error) if check_failed(&env, &error) => {
            TestOutcome::Failed(error.message().to_string())
        }
        Err(error) => TestOutcome::Errored(error.message().to_string()),
    }
}

fn check_failed(env: &Environment, error: &ExecError) -> bool {
    matches!(error, ExecError::Lua { .. })
        && env
            .execute(&format!("print({FAILED_FLAG} == true)"))
            .is_ok_and(|flag| flag.output == "true\n")
}

/// A fresh environment with the registry, the echo model, the sample context and the
/// prelude.
fn environment(registry: &Arc<Registry>) -> Result<Environment, Box<dyn std::error::Error>> {
    let env = Environment::builder(Arc::clone(registry))
        .llm(Arc::new(EchoLlm))
        .build()?;
    env.set_context(SAMPLE_CONTEXT)?;
    env.execute_named(PRELUDE.as_bytes(), "=prelude")?;
    Ok(env)
}

/// The model of `rlm test`: answers every request with its last message, unchanged, so
/// that examples of functions calling `llm_query` run without a model and give the
/// same results everywhere.
///
/// ```
/// use rlm_registry::llm::{Llm, Request};
/// use rlm_registry::testing::EchoLlm;
///
/// assert_eq!(EchoLlm.complete(Request::from("hello"))?.content, "hello");
/// # Ok::<(), rlm_registry::llm::LlmError>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct EchoLlm;

impl Llm for EchoLlm {
    fn complete(&self, request: Request) -> Result<Completion, LlmError> {
        let last = request.messages.last().map(Message::text);
        Ok(Completion::new(last.unwrap_or_default()))
    }
}

/// Counts of a run's outcomes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TestSummary {
    /// Examples and tests that passed.
    pub passed: usize,
    /// Those whose checks did not hold.
    pub failed: usize,
    /// Those that could not run to the end.
    pub errored: usize,
}

impl TestSummary {
    /// The counts of `results`.
    ///
    /// ```
    /// use rlm_registry::testing::TestSummary;
    /// assert_eq!(TestSummary::of(&[]), TestSummary::default());
    /// ```
    pub fn of(results: &[TestResult]) -> TestSummary {
        let mut summary = TestSummary::default();
        for result in results {
            match result.outcome {
                TestOutcome::Passed => summary.passed += 1,
                TestOutcome::Failed(_) => summary.failed += 1,
                TestOutcome::Errored(_) => summary.errored += 1,
            }
        }
        summary
    }

    /// Whether everything passed.
    pub fn ok(&self) -> bool {
        self.failed == 0 && self.errored == 0
    }
}

impl std::fmt::Display for TestSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "test result: {}. {} passed; {} failed; {} errored",
            if self.ok() { "ok" } else { "FAILED" },
            self.passed,
            self.failed,
            self.errored
        )
    }
}
