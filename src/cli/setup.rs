//! What the commands that run Lua set up from their flags: the limits of one
//! execution, the context (`--context`, else `[context]` in rlm.toml) and the user at
//! the terminal (a run's model, cache,
//! window and budgets are `run_args.rs`'s). A bad setting is a usage error (exit 2).

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use rlm_registry::corpus::{Gathered, STDIN, gather};
use rlm_registry::environment::{Limits, User};
use rlm_registry::rlm::Context;

use super::{EXIT_USAGE, Output, SourceArgs};

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

/// `--context`, declared once for every command that takes it.
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct ContextArgs {
    /// What the code studies, as the global `context`: a file (its text), a folder
    /// (walked as ripgrep walks it: `.gitignore` and `.ignore` honoured, hidden and binary
    /// files left out), a quoted glob ('logs/*.log'), `-` for standard input, or a
    /// `.jsonl` file of records with a text field. Repeat it for several. One plain text
    /// or code file is a string; anything else (a PDF, an HTML page or an image alone
    /// too) is a corpus, a list of documents `{name, text, kind, bytes[, mime][, error][,
    /// meta]}`: HTML and PDF as their text, images as `kind = "image"`. Default: `[context] paths`
    /// in rlm.toml, if any.
    #[arg(long = "context", id = "context", value_name = "PATH")]
    pub paths: Vec<PathBuf>,
}

/// What holds standard input when `--context -` cannot have it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Stdin {
    /// Nothing: `-` reads it.
    Free,
    /// The code (`rlm run -`).
    Code,
    /// The MCP messages (`rlm serve` over stdio).
    Transport,
}

impl ContextArgs {
    /// The context the paths gather — `--context`, else `[context] paths` in the
    /// configuration file of `source` when there is one — `None` without any. `-` is
    /// refused where `stdin` already holds something else.
    pub(super) fn gather(
        &self,
        source: &SourceArgs,
        stdin: Stdin,
    ) -> Result<Option<Context>, Output> {
        if !self.paths.is_empty() {
            return gather_paths(&self.paths, stdin, "--context");
        }
        let Some(paths) = source.file_settings()?.context else {
            return Ok(None);
        };
        let file = source
            .config_path()
            .map(|path| path.display().to_string())
            .unwrap_or_else(|| "rlm.toml".to_string());
        gather_paths(&paths, stdin, &format!("{file}: [context] paths"))
    }
}

impl ContextArgs {
    /// The paths the context is gathered from (`--context`, else `[context] paths`), to
    /// be recorded; none without a context.
    pub(super) fn paths_given(&self, source: &SourceArgs) -> Result<Vec<PathBuf>, Output> {
        if !self.paths.is_empty() {
            return Ok(self.paths.clone());
        }
        Ok(source.file_settings()?.context.unwrap_or_default())
    }
}

/// The context `paths` gather; `given` names where they come from in an error.
fn gather_paths(paths: &[PathBuf], stdin: Stdin, given: &str) -> Result<Option<Context>, Output> {
    let holder = match stdin {
        Stdin::Free => None,
        Stdin::Code => Some("the code"),
        Stdin::Transport => Some("the MCP messages (serve over --http to read it)"),
    };
    if let Some(holder) = holder
        && paths.iter().any(|path| path.as_os_str() == STDIN)
    {
        return Err(Output::failure(
            EXIT_USAGE,
            format!("error: {given} names -, standard input, which already holds {holder} here\n"),
        ));
    }
    let gathered = gather(paths)
        .map_err(|error| Output::failure(EXIT_USAGE, format!("error: {given}: {error}\n")))?;
    if let Gathered::Corpus(corpus) = &gathered {
        // A document that could not be read is kept (the run goes on); the user hears of
        // it once.
        let mut stderr = std::io::stderr().lock();
        for warning in corpus.warnings() {
            let _ = writeln!(stderr, "warning: {warning}");
        }
    }
    Ok(Some(Context::from(gathered)))
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
