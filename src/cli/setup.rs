//! What the commands that run Lua set up from their flags: the limits of one
//! execution, the `--context` file and the user at the terminal (a run's model, cache,
//! window and budgets are `run_args.rs`'s). A bad setting is a usage error (exit 2).

use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;
use std::time::Duration;

use rlm_registry::environment::{Limits, User};

use super::{EXIT_USAGE, Output};

/// The limits of one execution from `--time-limit SECONDS` and `--memory-limit MIB`.
pub(super) fn limits(time_limit: f64, memory_limit: usize) -> Result<Limits, Output> {
    if !(time_limit.is_finite() && time_limit > 0.0 && time_limit <= 1e9) {
        return Err(Output::failure(
            EXIT_USAGE,
            "error: --time-limit must be a positive number of seconds\n".into(),
        ));
    }
    if memory_limit == 0 {
        return Err(Output::failure(
            EXIT_USAGE,
            "error: --memory-limit must be at least 1 MiB\n".into(),
        ));
    }
    Ok(Limits {
        time: Duration::from_secs_f64(time_limit),
        memory_bytes: memory_limit.saturating_mul(1024 * 1024),
        ..Limits::default()
    })
}

/// The bytes of `--context FILE`, if given.
pub(super) fn read_context(path: Option<&Path>) -> Result<Option<Vec<u8>>, Output> {
    match path {
        Some(path) => std::fs::read(path).map(Some).map_err(|error| {
            Output::failure(
                EXIT_USAGE,
                format!("error: cannot read {}: {error}\n", path.display()),
            )
        }),
        None => Ok(None),
    }
}

/// The user at the terminal: questions and notes go to stderr, answers come from stdin.
pub(super) struct Terminal;

impl User for Terminal {
    fn ask(&self, question: &str) -> Result<String, String> {
        if !std::io::stdin().is_terminal() {
            return Err("no terminal to ask on (standard input is not a terminal); run rlm interactively to answer questions".into());
        }
        let mut stderr = std::io::stderr();
        write!(stderr, "? {question}\n> ")
            .and_then(|_| stderr.flush())
            .map_err(|e| e.to_string())?;
        let mut answer = String::new();
        match std::io::stdin().lock().read_line(&mut answer) {
            Ok(0) => Err("the terminal closed before an answer was given".into()),
            Ok(_) => Ok(answer.trim_end_matches(['\r', '\n']).to_string()),
            Err(error) => Err(error.to_string()),
        }
    }

    fn notify(&self, message: &str) -> Result<(), String> {
        writeln!(std::io::stderr(), "[rlm] {message}").map_err(|e| e.to_string())
    }
}
