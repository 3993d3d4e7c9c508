//! What the commands that run Lua or call a model set up from their flags and the
//! environment: the LLM client, the limits of one execution, the `--context` file and
//! the user at the terminal. A bad setting is a usage error (exit 2).

use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;
use std::time::Duration;

use rlm_registry::environment::{Limits, User};
use rlm_registry::llm::{LlmClient, LlmConfig, LlmError};

use super::{EXIT_USAGE, Output};

/// The LLM client from the environment variables and the `--model` / `--base-url` flags.
/// Creating it sends nothing; a bad setting is reported when the model is first called.
pub(super) fn llm_client(model: Option<&str>, base_url: Option<&str>) -> Result<LlmClient, Output> {
    let failure = |error: LlmError| Output::failure(EXIT_USAGE, format!("error: {error}\n"));
    let mut config = LlmConfig::from_env().map_err(failure)?;
    if let Some(model) = model {
        config.model = model.to_string();
    }
    if let Some(base_url) = base_url {
        config.base_url = base_url.to_string();
    }
    LlmClient::new(config).map_err(failure)
}

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

/// A number of tokens on the command line: `8k`, `128k`, `1m` or `32768`, positive.
pub(super) fn window_tokens(text: &str) -> Result<u64, String> {
    let tokens = text
        .parse::<rlm_registry::eval::Size>()
        .map(|size| size.tokens())
        .map_err(|e| e.to_string())?;
    if tokens == 0 {
        return Err("the window must be at least 1 token".to_string());
    }
    Ok(tokens)
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
