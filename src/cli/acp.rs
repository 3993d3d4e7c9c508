//! `rlm acp`: the RLM as an Agent Client Protocol agent on stdin/stdout, for editors and
//! harnesses; configured as `rlm ask` is (model, limits and budgets per prompt, the
//! registry, `--context`). Only JSON-RPC goes to stdout; warnings go to stderr.

use std::io::BufReader;
use std::path::PathBuf;

use clap::Args;

use rlm_registry::acp::AcpAgent;
use rlm_registry::setup::Defaults;

use super::ask::{Chosen, LoopArgs, warnings_on_stderr};
use super::run_args::{RunFlags, model};
use super::setup::{ContextArgs, limits};
use super::{EXIT_USAGE, EXIT_VIOLATIONS, Output, SourceArgs, with_catalog};

/// Options of `rlm acp`.
#[derive(Args, Debug, Clone)]
pub(crate) struct AcpArgs {
    #[command(flatten)]
    source: SourceArgs,
    #[command(flatten)]
    context: ContextArgs,
    #[command(flatten)]
    run: RunFlags,
    #[command(flatten)]
    limits: LoopArgs,
    /// Keep every session in this folder (made if missing): its prompts and the traces of
    /// their runs, written as they run, so that `session/load` can rebuild it later, with
    /// no model request (advertised as `loadSession`).
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    /// No warnings on stderr.
    #[arg(short, long)]
    quiet: bool,
}

pub(super) fn run(args: &AcpArgs) -> Output {
    let chosen = Chosen::of(&args.limits);
    let limits = match limits(chosen.time_limit, chosen.memory_limit) {
        Ok(limits) => limits,
        Err(output) => return output,
    };
    let setup = match args.run.setup(&args.source, &Defaults::default()) {
        Ok(setup) => setup,
        Err(output) => return output,
    };
    let llm = match model(&setup) {
        Ok(llm) => llm,
        Err(output) => return output,
    };
    let context_paths = match args.context.paths_given(&args.source) {
        Ok(paths) => paths,
        Err(output) => return output,
    };
    if let Some(problem) = unusable(&context_paths) {
        return Output::failure(EXIT_USAGE, problem);
    }
    if let Some(dir) = &args.state_dir
        && let Err(error) = std::fs::create_dir_all(dir)
    {
        let message = format!("error: --state-dir {}: {error}\n", dir.display());
        return Output::failure(EXIT_USAGE, message);
    }
    warnings_on_stderr(args.quiet);
    with_catalog(&args.source, |catalog| {
        // Each session records its own context's paths.
        let rlm = Chosen { limits, ..chosen }.rlm(&setup, llm, catalog);
        let mut agent = AcpAgent::new(rlm).context_paths(context_paths);
        if let Some(dir) = &args.state_dir {
            agent = agent.state_dir(dir);
        }
        match agent.serve(BufReader::new(std::io::stdin()), std::io::stdout()) {
            Ok(()) => Output::success(Vec::new()),
            Err(error) => Output::failure(
                EXIT_VIOLATIONS,
                format!("error: reading the client's messages: {error}\n"),
            ),
        }
    })
}

/// Why the context's paths cannot serve: `-` (standard input carries the protocol) or a
/// path that does not exist.
fn unusable(paths: &[std::path::PathBuf]) -> Option<String> {
    let mut message = String::new();
    for path in paths {
        if path.as_os_str() == "-" {
            message.push_str("error: --context -: standard input carries the ACP messages\n");
        } else if let Err(error) = std::fs::metadata(path) {
            message.push_str(&format!("error: --context {}: {error}\n", path.display()));
        }
    }
    (!message.is_empty()).then_some(message)
}
