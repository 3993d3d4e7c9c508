//! `rlm eval`: generated (or the user's own) tasks answered by each method, results in
//! an output directory; `rlm eval generate` writes the generated tasks as JSONL.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use clap::{Args, Subcommand};

use rlm_registry::eval::{
    self, EvalMethod, EvalOptions, FAMILIES, Family, MANIFEST_FILE, Prices, Progress, RESULTS_FILE,
    RunManifest, Runner, Shard, Size, Task,
};
use rlm_registry::llm::Price;
use rlm_registry::setup::{CacheLocation, Defaults};

use super::run_args::{RunFlags, model};
use super::{EXIT_USAGE, EXIT_VIOLATIONS, Output, SourceArgs, with_catalog};

/// Options of `rlm eval`.
#[derive(Args, Debug, Clone)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct EvalArgs {
    #[command(subcommand)]
    command: Option<EvalCommand>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand, Debug, Clone)]
enum EvalCommand {
    /// Write the generated tasks as JSONL (`{"id", "question", "context", "answer",
    /// "scorer", "family", "size"}`), to give the same tasks to another system.
    Generate(GenerateArgs),
    /// Join the output directories of an eval's shards (`--shard K/N`) into one: the
    /// results, summary and report one run over every task writes. Refuses shards of
    /// different evals, a shard given twice, a missing or unfinished shard.
    Merge(MergeArgs),
}

#[derive(Args, Debug, Clone)]
struct MergeArgs {
    /// The shards' output directories, every shard of the split once.
    #[arg(value_name = "DIR", required = true)]
    dirs: Vec<PathBuf>,
    /// The directory to write: results.jsonl, eval.json, summary.md, report.html, traces/.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

/// Which tasks to generate.
#[derive(Args, Debug, Clone)]
struct SuiteArgs {
    // The help and the default come from the families' table, so that a family added
    // there is offered here with nothing else to change.
    #[arg(
        long,
        value_name = "LIST",
        help = suite_help(),
        long_help = suite_long_help(),
        default_value = ALL_FAMILIES.as_str()
    )]
    suite: String,
    /// Context sizes in tokens, comma-separated (8k, 128k, 1m, …).
    #[arg(long, value_name = "LIST", default_value = "8k")]
    sizes: String,
    /// Tasks per family and size.
    #[arg(long, value_name = "N", default_value_t = 5)]
    n: usize,
    /// The seed: the same seed gives the same tasks, byte for byte.
    #[arg(long, value_name = "N", default_value_t = 1)]
    seed: u64,
}

#[derive(Args, Debug, Clone)]
struct GenerateArgs {
    #[command(flatten)]
    suite: SuiteArgs,
    /// The JSONL file to write (`-` for standard output).
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
}

#[derive(Args, Debug, Clone)]
struct RunArgs {
    #[command(flatten)]
    suite: SuiteArgs,
    /// Run the tasks of this JSONL file instead of generated ones.
    #[arg(long, value_name = "FILE")]
    tasks: Option<PathBuf>,
    /// Methods, comma-separated: rlm, direct, rlm-bare.
    #[arg(long, value_name = "LIST", default_value = "rlm,direct")]
    methods: String,
    /// The output directory: results.jsonl, traces/, summary.md, report.html, eval.json.
    /// Running the same command again skips the results already there.
    #[arg(long, value_name = "DIR", default_value = "eval-out")]
    out: PathBuf,
    /// Tasks run at once.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=256))]
    jobs: u32,
    /// Run shard K of N (K from 1): a split of the tasks by id, the same whatever their
    /// order, so N workers given the same tasks run each task once. `rlm eval merge`
    /// joins the shards' directories.
    #[arg(long, value_name = "K/N", value_parser = parse_shard)]
    shard: Option<Shard>,
    /// Price per million prompt tokens, for the cost column (default: the model's
    /// `[prices]` entry in rlm.toml, else 0).
    #[arg(long, value_name = "PRICE", allow_negative_numbers = true)]
    price_in: Option<f64>,
    /// Price per million completion tokens (default: the model's `[prices]` entry in
    /// rlm.toml, else 0).
    #[arg(long, value_name = "PRICE", allow_negative_numbers = true)]
    price_out: Option<f64>,
    /// Turns of each agent before giving up.
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    max_iterations: u32,
    /// How deep `rlm_query` children may go.
    #[arg(long, value_name = "N", default_value_t = 1)]
    max_depth: usize,
    /// No progress bar.
    #[arg(short, long)]
    quiet: bool,
    #[command(flatten)]
    run: RunFlags,
    #[command(flatten)]
    source: SourceArgs,
}

/// The window of `rlm eval` when neither `--context-window`, RLM_CONTEXT_WINDOW nor
/// rlm.toml gives one: the `direct` method cuts contexts to it.
const DEFAULT_EVAL_WINDOW: u64 = 128_000;

/// The call cache's file in the output directory, unless `--cache` or `--no-cache`.
const CACHE_FILE: &str = "cache.sqlite";

/// Every family of the table, as `--suite` takes them: the default suite.
static ALL_FAMILIES: LazyLock<String> = LazyLock::new(|| family_names().join(","));

fn family_names() -> Vec<&'static str> {
    FAMILIES.iter().map(|family| family.name()).collect()
}

fn suite_help() -> String {
    format!(
        "Task families, comma-separated: {}",
        family_names().join(", ")
    )
}

/// The short help, then each family with its description.
fn suite_long_help() -> String {
    let mut help = suite_help();
    help.push('\n');
    for family in FAMILIES {
        help.push_str(&format!("\n- {family}: {}", family.description()));
    }
    help
}

pub(super) fn run(args: &EvalArgs) -> Output {
    match &args.command {
        Some(EvalCommand::Generate(generate)) => write_generated(generate),
        Some(EvalCommand::Merge(merge)) => merge_shards(merge),
        None => evaluate(&args.run),
    }
}

fn parse_shard(text: &str) -> Result<Shard, String> {
    text.parse()
}

fn merge_shards(args: &MergeArgs) -> Output {
    match eval::merge(&args.dirs, &args.out) {
        Ok(merged) => Output {
            stdout: merged.summary.into_bytes(),
            stderr: format!(
                "merged {} shards ({} results) into {}: {RESULTS_FILE}, summary.md, report.html, traces/, {MANIFEST_FILE}\n",
                merged.shards,
                merged.results.len(),
                args.out.display()
            ),
            code: 0,
        },
        Err(error @ eval::MergeError::Io { .. }) => {
            Output::failure(EXIT_VIOLATIONS, format!("error: {error}\n"))
        }
        Err(error) => usage(error),
    }
}

fn usage(message: impl std::fmt::Display) -> Output {
    Output::failure(EXIT_USAGE, format!("error: {message}\n"))
}

/// Parses a comma-separated list.
fn list<T: std::str::FromStr<Err = String>>(text: &str) -> Result<Vec<T>, Output> {
    let items: Vec<T> = text
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(str::parse)
        .collect::<Result<_, _>>()
        .map_err(usage)?;
    if items.is_empty() {
        return Err(usage(format!("the list `{text}` is empty")));
    }
    Ok(items)
}

fn generated(suite: &SuiteArgs) -> Result<Vec<Task>, Output> {
    let families: Vec<Family> = list(&suite.suite)?;
    let sizes: Vec<Size> = eval::parse_sizes(&suite.sizes).map_err(usage)?;
    if sizes.is_empty() {
        return Err(usage("--sizes is empty"));
    }
    Ok(eval::generate(&families, &sizes, suite.n, suite.seed))
}

fn write_generated(args: &GenerateArgs) -> Output {
    let tasks = match generated(&args.suite) {
        Ok(tasks) => tasks,
        Err(output) => return output,
    };
    if args.out.as_os_str() == "-" {
        let mut out = Vec::new();
        let _ = eval::write_tasks(&mut out, &tasks);
        return Output::success(String::from_utf8_lossy(&out).into_owned());
    }
    let written = std::fs::File::create(&args.out)
        .and_then(|file| eval::write_tasks(std::io::BufWriter::new(file), &tasks));
    match written {
        Ok(()) => Output {
            stdout: Vec::new(),
            stderr: format!("wrote {} tasks to {}\n", tasks.len(), args.out.display()),
            code: 0,
        },
        Err(error) => usage(format!("cannot write {}: {error}", args.out.display())),
    }
}

/// The tasks of `--tasks FILE`, with the directory their `context_file`s are relative to.
fn task_file(path: &Path) -> Result<(Vec<Task>, PathBuf), Output> {
    let file = std::fs::File::open(path)
        .map_err(|e| usage(format!("cannot read {}: {e}", path.display())))?;
    let tasks = eval::read_tasks(std::io::BufReader::new(file))
        .map_err(|e| usage(format!("{}: {e}", path.display())))?;
    let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
    Ok((tasks, base))
}

fn evaluate(args: &RunArgs) -> Output {
    let methods: Vec<EvalMethod> = match list(&args.methods) {
        Ok(methods) => methods,
        Err(output) => return output,
    };
    let loaded = match &args.tasks {
        Some(path) => task_file(path),
        None => generated(&args.suite).map(|tasks| (tasks, PathBuf::from("."))),
    };
    let (tasks, base) = match loaded {
        Ok(loaded) => loaded,
        Err(output) => return output,
    };
    let shard = args.shard.unwrap_or(Shard::WHOLE);
    // The cache lives in the output directory unless told otherwise: a run in a new
    // directory with `--cache` pointing at an old one's file replays its answers.
    if let Err(error) = std::fs::create_dir_all(&args.out) {
        return usage(format!("cannot create {}: {error}", args.out.display()));
    }
    let defaults = Defaults {
        context_window: Some(DEFAULT_EVAL_WINDOW),
        cache: Some(CacheLocation::File(args.out.join(CACHE_FILE))),
    };
    let setup = match args.run.setup(&args.source, &defaults) {
        Ok(setup) => setup,
        Err(output) => return output,
    };
    // One price table for the cost column and `--max-cost`; the flags override it.
    let table = setup.price().unwrap_or_default();
    let price = match Price::new(
        args.price_in.unwrap_or(table.input),
        args.price_out.unwrap_or(table.output),
    ) {
        Ok(price) => price,
        Err(_) => return usage("--price-in and --price-out must be non-negative numbers"),
    };
    let prices = Prices {
        input: price.input,
        output: price.output,
    };
    let llm = match model(&setup) {
        Ok(llm) => llm,
        Err(output) => return output,
    };
    with_catalog(&args.source, |catalog| {
        let options = EvalOptions {
            methods,
            jobs: args.jobs as usize,
            max_iterations: args.max_iterations,
            max_depth: args.max_depth,
            prompt_mode: setup.prompt_mode,
            answer_protocol: setup.answer_protocol,
            context_window: setup.context_window.unwrap_or(DEFAULT_EVAL_WINDOW),
            budgets: setup.budgets,
            price: Some(price).filter(|price| *price != Price::default()),
            registry: Arc::clone(catalog.registry()),
            providers: Some(Arc::clone(catalog.providers())),
            limits: None,
        };
        // Written before the first task, so that a shard cut short is known for one.
        let manifest = RunManifest::new(shard, &tasks, &options, &setup.llm.model, prices);
        if let Err(error) = manifest.write(&args.out) {
            return Output::failure(
                EXIT_VIOLATIONS,
                format!("error: cannot write into {}: {error}\n", args.out.display()),
            );
        }
        let mine = shard.select(&tasks);
        let runner = Runner::new(llm, options, &args.out).task_base(base);
        let bar = !args.quiet && std::io::stderr().is_terminal();
        let results = runner.run(&mine, |_, progress| {
            if bar {
                draw(progress);
            }
        });
        if bar {
            eprintln!();
        }
        let results = match results {
            Ok(results) => results,
            Err(error) => {
                return Output::failure(
                    EXIT_VIOLATIONS,
                    format!(
                        "error: {}: {error}\n",
                        args.out.join(RESULTS_FILE).display()
                    ),
                );
            }
        };
        let note = if shard.is_whole() {
            String::new()
        } else {
            format!(
                "\nShard {shard}: {} of the {} tasks. `rlm eval merge` joins the shards' directories into the summary of them all.\n",
                mine.len(),
                tasks.len()
            )
        };
        match eval::write_reports(&args.out, &results, prices, &note) {
            Ok(summary) => Output {
                stdout: summary.into_bytes(),
                stderr: format!(
                    "results in {}: {RESULTS_FILE}, summary.md, report.html, traces/, {MANIFEST_FILE}\n",
                    args.out.display()
                ),
                code: 0,
            },
            Err(error) => Output::failure(
                EXIT_VIOLATIONS,
                format!("error: cannot write into {}: {error}\n", args.out.display()),
            ),
        }
    })
}

/// One line on stderr, redrawn: a bar, tasks done, the score so far, tokens and time.
fn draw(progress: &Progress) {
    const WIDTH: usize = 30;
    let filled = WIDTH * progress.done / progress.total.max(1);
    let bar: String = "#".repeat(filled) + &"-".repeat(WIDTH - filled);
    let mut stderr = std::io::stderr();
    let _ = write!(
        stderr,
        "\r[{bar}] {}/{} · score {:.3} · {} tokens · {}",
        progress.done,
        progress.total,
        progress.mean_score(),
        progress.tokens,
        elapsed(progress.elapsed)
    );
    let _ = stderr.flush();
}

fn elapsed(time: Duration) -> String {
    let s = time.as_secs();
    format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}
