//! `rlm ask --resume TRACE`: the run TRACE records goes on, set up as it was, with the
//! flags given again over the record.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rlm_registry::environment::AnswerSchema;
use rlm_registry::rlm::{Context, Resume, trajectory::Setup};
use rlm_registry::setup::{Defaults, RunSettings};

use super::ask::{
    AskArgs, Chosen, answered, cancel_on_signals, finish, read_schema, warnings_on_stderr,
};
use super::run_args::{Given, model};
use super::setup::{ContextArgs, Stdin, Terminal, limits};
use super::{EXIT_USAGE, Output, with_catalog};

/// Resumes the run `trace` records.
pub(super) fn resume(args: &AskArgs, trace: &Path) -> Output {
    let usage = |message: String| Output::failure(EXIT_USAGE, format!("error: {message}\n"));
    let resume = match Resume::from_file(trace) {
        Ok(resume) => resume,
        Err(error) => return usage(format!("--resume {}: {error}", trace.display())),
    };
    if let Some(answer) = resume.finished() {
        let note = match args.quiet {
            true => String::new(),
            false => "the run had finished: its answer, nothing sent\n".to_string(),
        };
        return answered(answer.to_string(), note);
    }
    let recorded = resume.setup().clone();
    let chosen = chosen(args, &recorded);
    let overrides = overrides(args, &recorded);
    let limits = match limits(chosen.time_limit, chosen.memory_limit) {
        Ok(limits) => limits,
        Err(output) => return output,
    };
    let setup = match settings(args, &recorded)
        .and_then(|given| args.source.run_setup(&given, &Defaults::default()))
    {
        Ok(setup) => setup,
        Err(output) => return output,
    };
    let llm = match model(&setup) {
        Ok(llm) => llm,
        Err(output) => return output,
    };
    let (context, paths) = match context(args, &recorded) {
        Ok(context) => context,
        Err(output) => return output,
    };
    let schema = match schema(args, &recorded) {
        Ok(schema) => schema,
        Err(output) => return output,
    };
    warnings_on_stderr(args.quiet);
    with_catalog(&args.source, |catalog| {
        let mut rlm = Chosen {
            limits,
            context_paths: paths,
            schema,
            ..chosen
        }
        .rlm(&setup, llm, catalog);
        if !args.quiet {
            rlm = rlm.live_view(std::io::stderr());
        }
        rlm = rlm.cancel_on(cancel_on_signals());
        let resume = resume.force(args.force).overrides(overrides);
        match resume.run(rlm, context, Some(Arc::new(Terminal))) {
            Ok(report) => finish(report, args.quiet, String::new(), Some(trace)),
            Err(error) => usage(format!("--resume {}: {error}", trace.display())),
        }
    })
}

/// The settings with defaults: given, else recorded, else the default.
fn chosen(args: &AskArgs, recorded: &Setup) -> Chosen {
    let defaults = Chosen::of(&args.limits);
    let Some(limits) = recorded.limits else {
        return defaults;
    };
    Chosen {
        max_iterations: args.limits.max_iterations.unwrap_or(limits.max_iterations),
        max_depth: args.limits.max_depth.unwrap_or(limits.max_depth),
        time_limit: args
            .limits
            .time_limit
            .unwrap_or(limits.block.time_ms as f64 / 1000.0),
        memory_limit: args
            .limits
            .memory_limit
            .unwrap_or(limits.block.memory_bytes / (1024 * 1024)),
        output_bytes: args.limits.output_bytes.unwrap_or(limits.output_bytes),
        ..defaults
    }
}

/// The run's setup flags, each not given taken from the record: the model, its server
/// (never its key), the window, the prompt and the budgets.
fn settings(args: &AskArgs, recorded: &Setup) -> Result<RunSettings, Output> {
    let flags = &args.run;
    let settings = Given {
        llm: Some(&flags.llm),
        window: Some(&flags.window),
        prompt: Some(&flags.prompt),
        budgets: Some(&flags.budgets),
        cache: Some(&flags.cache),
    }
    .settings()?;
    Ok(settings.or_recorded(recorded))
}

/// The names of the settings given again with another value than the record's.
fn overrides(args: &AskArgs, recorded: &Setup) -> Vec<String> {
    let Some(limits) = recorded.limits else {
        return Vec::new();
    };
    let budgets = &args.run.budgets;
    let differs = [
        (
            "max_iterations",
            args.limits
                .max_iterations
                .is_some_and(|n| n != limits.max_iterations),
        ),
        (
            "max_depth",
            args.limits.max_depth.is_some_and(|n| n != limits.max_depth),
        ),
        (
            "output_bytes",
            args.limits
                .output_bytes
                .is_some_and(|n| n != limits.output_bytes),
        ),
        ("time_limit", args.limits.time_limit.is_some()),
        ("memory_limit", args.limits.memory_limit.is_some()),
        (
            "max_tokens",
            budgets
                .max_tokens
                .is_some_and(|n| Some(n) != limits.budgets.total_tokens),
        ),
        (
            "max_llm_calls",
            budgets
                .max_llm_calls
                .is_some_and(|n| Some(n) != limits.budgets.llm_calls),
        ),
        ("max_time", budgets.max_time.is_some()),
        (
            "max_cost",
            budgets
                .max_cost
                .is_some_and(|usd| Some(usd) != limits.budgets.max_cost.map(|c| c.usd())),
        ),
        (
            "model",
            args.run.llm.model.is_some() && args.run.llm.model != recorded.model,
        ),
        (
            "base_url",
            args.run.llm.base_url.is_some() && args.run.llm.base_url != recorded.base_url,
        ),
    ];
    differs
        .iter()
        .filter(|(_, differs)| *differs)
        .map(|(name, _)| name.to_string())
        .collect()
}

/// The context: `--context` when given, else gathered again from the recorded paths.
/// A run recorded with a context whose paths cannot be read asks for `--context`.
fn context(args: &AskArgs, recorded: &Setup) -> Result<(Option<Context>, Vec<PathBuf>), Output> {
    let given = !args.context.paths.is_empty();
    let paths: Vec<PathBuf> = match given {
        true => args.context.paths.clone(),
        false => recorded
            .context_paths
            .iter()
            .flatten()
            .map(PathBuf::from)
            .collect(),
    };
    if paths.is_empty() {
        if recorded.context.is_some() {
            return Err(Output::failure(
                EXIT_USAGE,
                "error: the run had a context whose paths the trace does not record (standard input, or a run not started by `rlm ask`): give it with --context\n".into(),
            ));
        }
        return Ok((None, paths));
    }
    let gathered = ContextArgs {
        paths: paths.clone(),
    }
    .gather(&args.source, Stdin::Free);
    match gathered {
        Ok(context) => Ok((context, paths)),
        Err(output) if given => Err(output),
        Err(output) => Err(Output::failure(
            EXIT_USAGE,
            format!(
                "{}error: the recorded context cannot be read again: give it with --context (where it is now)\n",
                output.stderr
            ),
        )),
    }
}

/// The answer's schema: `--schema` when given, else the recorded one.
fn schema(args: &AskArgs, recorded: &Setup) -> Result<Option<AnswerSchema>, Output> {
    if let Some(path) = &args.schema {
        return read_schema(path).map(Some);
    }
    recorded
        .answer_schema
        .clone()
        .map(AnswerSchema::new)
        .transpose()
        .map_err(|error| {
            Output::failure(
                EXIT_USAGE,
                format!("error: the recorded answer schema: {error}\n"),
            )
        })
}
