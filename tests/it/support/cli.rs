//! Running the `rlm` binary as a user would: from the crate's directory, and with no LLM
//! or serve setting inherited from the shell that runs the tests, so a developer's own
//! `RLM_MODEL` or API key cannot change what a test sees.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// Settings the binary reads from the environment; a test that wants one sets it.
const INHERITED_SETTINGS: &[&str] = &[
    "RLM_API_KEY",
    "OPENAI_API_KEY",
    "RLM_BASE_URL",
    "OPENAI_BASE_URL",
    "RLM_MODEL",
    "RLM_PROMPT",
    "RLM_TIMEOUT_SECS",
    "RLM_SERVE_TOKEN",
    "RLM_CACHE",
    "RLM_LLM_CONCURRENCY",
    "RLM_CONTEXT_WINDOW",
    "RLM_ANSWER_PROTOCOL",
    "RLM_PROMPT_MODE",
    "RLM_MAX_REPLY_TOKENS",
    "RLM_REASONING_EFFORT",
    "RLM_MAX_COST",
    "RLM_COMPACT_AT",
];

/// `rlm ask ARGS` run in `dir`, asking the model `test-model` at `base_url`.
pub fn rlm_ask_in(dir: &Path, base_url: &str, args: &[&str]) -> Output {
    rlm_command()
        .current_dir(dir)
        .arg("ask")
        .args(args)
        .args(llm_args(base_url, "test-model"))
        .output()
        .expect("rlm runs")
}

/// A `Command` for `rlm`, in the crate's directory, with no inherited settings.
pub fn rlm_command() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_rlm"));
    command.current_dir(env!("CARGO_MANIFEST_DIR"));
    for name in INHERITED_SETTINGS {
        command.env_remove(name);
    }
    command
}

/// The same command for a test that drives `rlm serve` from tokio.
pub fn rlm_process() -> tokio::process::Command {
    rlm_command().into()
}

/// `rlm ARGS…`, finished.
pub fn rlm(args: &[&str]) -> Output {
    rlm_command().args(args).output().expect("rlm runs")
}

/// `rlm ARGS…` run in `dir` (where it reads `rlm.toml` from), finished.
pub fn rlm_in(dir: &Path, args: &[&str]) -> Output {
    rlm_command()
        .args(args)
        .current_dir(dir)
        .output()
        .expect("rlm runs")
}

/// `command` with `input` on its standard input, finished.
pub fn fed(mut command: Command, input: &[u8]) -> Output {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("rlm starts");
    // A process that exits before reading all of its input is the test's to report.
    let _ = child.stdin.take().expect("piped").write_all(input);
    child.wait_with_output().expect("rlm finishes")
}

/// The arguments that point a command at a test server.
pub fn llm_args(base_url: &str, model: &str) -> [String; 4] {
    [
        "--base-url".to_string(),
        base_url.to_string(),
        "--model".to_string(),
        model.to_string(),
    ]
}

/// What it wrote on standard output (bytes that are not UTF-8 shown as U+FFFD).
pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// What it wrote on standard error.
pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}
