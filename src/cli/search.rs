//! `rlm search`: rank the registry's functions for a query, or for a file of queries, in
//! the fast (BM25), balanced (+ LLM rerank) or accurate (+ LLM query expansion) mode.

use std::fmt::Write;
use std::io::Read;
use std::path::PathBuf;

use clap::{Args, ValueEnum};
use rlm_registry::catalog::Catalog;
use rlm_registry::llm::{LlmClient, map_concurrently};
use rlm_registry::search::llm_modes::{LlmSearch, search_with_llm};
use rlm_registry::search::{SearchMode, SearchOptions, SearchResult};
use serde_json::json;

use super::{EXIT_USAGE, LlmArgs, Output, SourceArgs, with_catalog};

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
    #[arg(long, value_name = "N", default_value_t = 5)]
    max_results: usize,
    /// Keep only functions with this capability (`---@tag` or automatic).
    #[arg(long, value_name = "C")]
    capability: Option<String>,
    /// Keep only functions from this source directory.
    #[arg(long, value_name = "DIR")]
    source_dir: Option<String>,
    /// Ranking. The LLM modes call the model given by --model / --base-url (or RLM_MODEL,
    /// RLM_BASE_URL…) and fall back to the fast order, with a warning, when it fails.
    #[arg(long, value_enum, default_value_t = Mode::Fast)]
    mode: Mode,
    #[command(flatten)]
    llm: LlmArgs,
    #[command(flatten)]
    source: SourceArgs,
}

/// `--mode`: the command-line names of [`SearchMode`].
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// BM25 only; no model involved.
    Fast,
    /// BM25, then the model reranks the candidates (one call per query).
    Balanced,
    /// The model expands the query, BM25 on the expansion, then a rerank (two calls).
    Accurate,
}

impl From<Mode> for SearchMode {
    fn from(mode: Mode) -> SearchMode {
        match mode {
            Mode::Fast => SearchMode::Fast,
            Mode::Balanced => SearchMode::Balanced,
            Mode::Accurate => SearchMode::Accurate,
        }
    }
}

pub(crate) fn run(args: &SearchArgs) -> Output {
    let mode = SearchMode::from(args.mode);
    let options = SearchOptions {
        max_results: args.max_results,
        capability: args.capability.clone(),
        source: args.source_dir.clone(),
    };
    // Only the LLM modes need a client: fast search works with no model configured.
    let llm = match mode {
        SearchMode::Fast => None,
        SearchMode::Balanced | SearchMode::Accurate => match args.llm.client(&args.source) {
            Ok(client) => Some(client),
            Err(output) => return output,
        },
    };
    let batch = match &args.queries {
        Some(path) => match read_queries(path) {
            Ok(text) => Some(text),
            Err(message) => return Output::failure(EXIT_USAGE, message),
        },
        None => None,
    };
    with_catalog(&args.source, |catalog| {
        let searcher = Searcher {
            catalog,
            llm: llm.as_ref(),
            options: &options,
            mode,
        };
        match &batch {
            Some(text) => run_batch(&searcher, text),
            None => run_one(
                &searcher,
                args.query.as_deref().unwrap_or_default(),
                args.json,
            ),
        }
    })
}

/// One search configuration, applied to each query.
struct Searcher<'a> {
    catalog: &'a Catalog,
    /// Present exactly for the LLM modes.
    llm: Option<&'a LlmClient>,
    options: &'a SearchOptions,
    mode: SearchMode,
}

impl Searcher<'_> {
    fn search(&self, query: &str) -> LlmSearch {
        match self.llm {
            Some(llm) => search_with_llm(self.catalog, llm, query, self.options, self.mode),
            None => LlmSearch::fast(self.catalog, query, self.options),
        }
    }
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

/// One JSON line per query, in order; a fallback is reported in the line itself. The
/// LLM modes run as many queries at once as the client allows concurrent calls.
fn run_batch(searcher: &Searcher, text: &str) -> Output {
    let queries: Vec<&str> = text.lines().map(str::trim).collect();
    let workers = searcher.llm.map_or(1, |llm| llm.config().max_concurrency);
    let mut out = String::new();
    for found in map_concurrently(queries, workers, |query| searcher.search(query)) {
        let _ = writeln!(out, "{}", json!(found));
    }
    Output::success(out)
}

fn run_one(searcher: &Searcher, query: &str, as_json: bool) -> Output {
    let found = searcher.search(query);
    if as_json {
        return Output::success(format!("{}\n", json!(found)));
    }
    let mut stdout = if found.results.is_empty() {
        format!("no function matches `{query}`\n")
    } else {
        table(&found.results)
    };
    if !found.expanded_terms.is_empty() {
        let _ = writeln!(
            stdout,
            "(query expanded with: {})",
            found.expanded_terms.join("; ")
        );
    }
    Output {
        stdout: stdout.into(),
        stderr: warnings(&found),
        code: 0,
    }
}

/// One line on stderr per LLM step that could not be used.
fn warnings(found: &LlmSearch) -> String {
    let mode = found.mode.name();
    let mut out = String::new();
    if let Some(reason) = &found.fallback {
        let _ = writeln!(
            out,
            "warning: {mode} search fell back to the BM25 order: {reason}"
        );
    }
    // A failed call is reported once, as the fallback above.
    if let Some(reason) = &found.expansion_fallback
        && found.fallback.as_ref() != Some(reason)
    {
        let _ = writeln!(out, "warning: the query was not expanded: {reason}");
    }
    out
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
