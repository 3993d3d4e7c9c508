//! `rlm search`: rank the registry's functions for a query, or for a file of queries.

use std::fmt::Write;
use std::io::Read;
use std::path::PathBuf;

use clap::{Args, ValueEnum};
use rlm_registry::Registry;
use rlm_registry::search::{SearchOptions, SearchResult};
use serde_json::json;

use super::{EXIT_USAGE, Output, SourceArgs, with_registry};

/// `rlm search` arguments.
#[derive(Args, Debug)]
pub(crate) struct SearchArgs {
    /// What to look for, in words or as a function name.
    #[arg(required_unless_present = "queries", conflicts_with = "queries")]
    query: Option<String>,
    /// Batch mode: one query per line from FILE (`-` for standard input), one JSON line
    /// out per query, in order.
    #[arg(long, value_name = "FILE")]
    queries: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// The most results per query.
    #[arg(long, default_value_t = 5)]
    max_results: usize,
    /// Keep only functions with this capability (`---@tag` or automatic).
    #[arg(long, value_name = "C")]
    capability: Option<String>,
    /// Keep only functions from this source directory.
    #[arg(long, value_name = "DIR")]
    source_dir: Option<String>,
    /// Ranking: fast is BM25 only; balanced and accurate (LLM rerank / expansion) are not
    /// implemented yet.
    #[arg(long, value_enum, default_value_t = Mode::Fast)]
    mode: Mode,
    #[command(flatten)]
    source: SourceArgs,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Fast,
    Balanced,
    Accurate,
}

pub(crate) fn run(args: &SearchArgs) -> Output {
    if args.mode != Mode::Fast {
        let mode = format!("{:?}", args.mode).to_lowercase();
        return Output::failure(
            EXIT_USAGE,
            format!("error: --mode {mode} is not implemented yet; use --mode fast\n"),
        );
    }
    let options = SearchOptions {
        max_results: args.max_results,
        capability: args.capability.clone(),
        source: args.source_dir.clone(),
    };
    let batch = match &args.queries {
        Some(path) => match read_queries(path) {
            Ok(text) => Some(text),
            Err(message) => return Output::failure(EXIT_USAGE, message),
        },
        None => None,
    };
    with_registry(&args.source, |registry| match &batch {
        Some(text) => run_batch(registry, text, &options),
        None => {
            let query = args.query.as_deref().unwrap_or_default();
            run_one(registry, query, &options, args.json)
        }
    })
}

fn read_queries(path: &PathBuf) -> Result<String, String> {
    let mut text = String::new();
    let read = if path.as_os_str() == "-" {
        std::io::stdin().read_to_string(&mut text).map(|_| ())
    } else {
        std::fs::read_to_string(path).map(|t| text = t)
    };
    read.map(|()| text)
        .map_err(|e| format!("error: cannot read {}: {e}\n", path.display()))
}

fn run_batch(registry: &Registry, text: &str, options: &SearchOptions) -> Output {
    let mut out = String::new();
    for line in text.lines() {
        let query = line.trim();
        let results = registry.search(query, options);
        let _ = writeln!(out, "{}", json!({"query": query, "results": results}));
    }
    Output::success(out)
}

fn run_one(registry: &Registry, query: &str, options: &SearchOptions, as_json: bool) -> Output {
    let results = registry.search(query, options);
    if as_json {
        let value = json!({"query": query, "mode": "fast", "results": results});
        return Output::success(format!("{value}\n"));
    }
    if results.is_empty() {
        return Output::success(format!("no function matches `{query}`\n"));
    }
    Output::success(table(&results))
}

fn table(results: &[SearchResult]) -> String {
    let width = results.iter().map(|r| r.signature.len()).max().unwrap_or(0);
    let mut out = String::new();
    for r in results {
        let _ = writeln!(
            out,
            "{:>3.0}%  {:width$}  {}",
            r.confidence * 100.0,
            r.signature,
            r.summary
        );
        let _ = writeln!(out, "      {:width$}  ({})", "", r.match_reason);
    }
    out
}
