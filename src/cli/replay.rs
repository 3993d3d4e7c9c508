//! `rlm replay TRACE`: a recorded run run again with no server, compared with its trace
//! ([`Replay`]).

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;

use rlm_registry::rlm::Replay;

use super::setup::{ContextArgs, Stdin};
use super::{EXIT_USAGE, EXIT_VIOLATIONS, Output, SourceArgs, with_catalog};

/// Options of `rlm replay`.
#[derive(Args, Debug, Clone)]
pub(crate) struct ReplayArgs {
    /// The trace, as `rlm ask --trace FILE` wrote it.
    trace: PathBuf,
    /// The context of the recorded run, as `rlm ask --context` (or rlm.toml's `[context]`)
    /// took it, checked against the SHA-256 the trace records.
    #[command(flatten)]
    context: ContextArgs,
    /// Replay even with another context than the recorded one, or without it.
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    source: SourceArgs,
}

pub(super) fn run(args: &ReplayArgs) -> Output {
    let usage =
        |error: &dyn std::fmt::Display| Output::failure(EXIT_USAGE, format!("error: {error}\n"));
    let replay = match Replay::from_file(&args.trace) {
        Ok(replay) => replay.force(args.force),
        Err(error) => return usage(&error),
    };
    let replay = match args.context.gather(&args.source, Stdin::Free) {
        Ok(Some(context)) => replay.context(context),
        Ok(None) => replay,
        Err(output) => return output,
    };
    let mut replayed = false;
    let output = with_catalog(&args.source, |catalog| {
        replayed = true;
        let replay = replay
            .registry(Arc::clone(catalog.registry()))
            .providers(Arc::clone(catalog.providers()));
        match replay.run() {
            Ok(report) if report.is_identical() => Output::success(report.to_string()),
            Ok(report) => Output {
                stdout: report.to_string().into(),
                stderr: String::new(),
                code: EXIT_VIOLATIONS,
            },
            Err(error) => usage(&error),
        }
    });
    // Exit 1 is kept for a divergence: a registry that does not load is an error here.
    if !replayed && output.code == EXIT_VIOLATIONS {
        return Output::failure(EXIT_USAGE, output.stderr);
    }
    output
}
