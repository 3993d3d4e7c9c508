//! Running the `rlm` binary from the crate's directory, as a user would.

use std::process::{Command, Output};

/// `rlm ARGS…`, run in the crate's directory, finished.
pub fn rlm(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rlm"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("rlm runs")
}

/// What it wrote on standard output (bytes that are not UTF-8 shown as U+FFFD).
pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// What it wrote on standard error.
pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}
