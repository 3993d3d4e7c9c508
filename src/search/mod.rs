//! Discovery: BM25 search over a registry, capability tags, sources and lookup
//! by id.
//!
//! Four fields are indexed per function, with the weights of a tool registry: the name
//! (10), the description (5), the capabilities (3: explicit `---@tag`s plus the automatic
//! ones of [`capabilities`]) and keywords (2: parameter names and descriptions, return
//! descriptions, the file's name). Text is split into words (`word_count` and
//! `wordCount` give word, count), lower-cased, stripped of stop words and stemmed
//! (Snowball English). Scoring is BM25 per field, weighted and summed (as SQLite FTS5's
//! `bm25(t, 10, 5, 3, 2)`); a query that is exactly a function's name ranks it first.
//!
//! A runtime registry builds its [`Index`] when it loads; the baked registry's index is
//! computed by `build.rs` and compiled in, like its functions. A query looks its words
//! up in hash tables, adds precomputed scores and keeps the best few: no stemming of
//! known words, no allocation per candidate.
//!
//! ```
//! use rlm_registry::Registry;
//! use rlm_registry::search::{FunctionSearch, SearchOptions};
//!
//! let registry = Registry::from_map([
//!     ("word_count", "--- Counts the words of a text.\n---@param text string\n---@return integer\nfunction word_count(text) return 0 end"),
//!     ("shout", "--- Upper-cases a text.\n---@param s string\n---@return string\nfunction shout(s) return s end"),
//! ])?;
//! let hits = registry.search("how many words are in this text", &SearchOptions::default());
//! assert_eq!(hits[0].name, "word_count");
//! assert!(hits[0].confidence > 0.0 && hits[0].confidence < 1.0);
//! # Ok::<(), rlm_registry::LoadError>(())
//! ```

pub mod bm25;
mod explain;
#[cfg(feature = "runtime")]
pub mod llm_modes;
mod ranking;

use serde::Serialize;

use crate::{Function, Registry};
pub use explain::{SearchResult, Signal};
// The index data lives with the registry (it is baked with it); these names stay
// reachable from here, where searching is explained.
pub use crate::registry::index::{
    FIELDS, Index, StrTable, WEIGHTS, capabilities, capabilities_of, field_texts, name_key,
    tokenize,
};
pub use crate::registry::{Source, source_matches};

/// How a search ranks: BM25 alone, or BM25 refined by a language model (see
/// `llm_modes`, feature `runtime`). The LLM modes fall back to the fast order when the model's output
/// does not parse or the model cannot be reached.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SearchMode {
    /// BM25 only.
    #[default]
    Fast,
    /// BM25, then an LLM reranks the candidates.
    Balanced,
    /// An LLM expands the query, BM25 runs on the expansion, then an LLM reranks.
    Accurate,
}

impl SearchMode {
    /// The mode's name, as `--mode` and `fn_search`'s `mode` option take it and as it
    /// serializes: `fast`, `balanced` or `accurate`.
    ///
    /// ```
    /// use rlm_registry::search::SearchMode;
    ///
    /// assert_eq!(SearchMode::Balanced.name(), "balanced");
    /// assert_eq!(SearchMode::Balanced.name().parse(), Ok(SearchMode::Balanced));
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            SearchMode::Fast => "fast",
            SearchMode::Balanced => "balanced",
            SearchMode::Accurate => "accurate",
        }
    }
}

impl std::str::FromStr for SearchMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "fast" => Ok(SearchMode::Fast),
            "balanced" => Ok(SearchMode::Balanced),
            "accurate" => Ok(SearchMode::Accurate),
            other => Err(format!(
                "unknown search mode `{other}` (expected fast, balanced or accurate)"
            )),
        }
    }
}

/// What to search for besides the query.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchOptions {
    /// The most results to return (default 5).
    pub max_results: usize,
    /// Keep only functions with this capability (explicit or automatic), case-insensitive.
    pub capability: Option<String>,
    /// Keep only functions loaded from this source directory (as in [`Function::dir`], or
    /// its last path components).
    pub source: Option<String>,
}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions {
            max_results: 5,
            capability: None,
            source: None,
        }
    }
}

/// A ranked function, unexplained: what [`search_hits`] returns.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SearchHit<'r> {
    /// The function.
    pub function: &'r Function,
    /// `name(a, b?)`.
    pub signature: &'r str,
    /// The first sentence of the description.
    pub summary: &'r str,
    /// As in [`SearchResult::score`].
    pub score: f64,
    /// As in [`SearchResult::confidence`].
    pub confidence: f64,
}

/// Something to search for functions: a [`Registry`], or everything one agent may call
/// (`providers::Catalog`, with the runtime). The LLM modes work over either.
pub trait FunctionSearch {
    /// The best matches for `query`, best first.
    fn search(&self, query: &str, options: &SearchOptions) -> Vec<SearchResult>;
}

impl FunctionSearch for Registry {
    /// Searches the registry's functions; see the [module docs](crate::search). Each
    /// result explains itself (signals, match reason); [`search_hits`] ranks the same
    /// way without the explanations.
    fn search(&self, query: &str, options: &SearchOptions) -> Vec<SearchResult> {
        let index = self.index();
        let ranking = ranking::ranking(index, self.functions(), query, options);
        hits(self, &ranking)
            .map(|(doc, hit)| explain::result(index, doc, hit, &ranking))
            .collect()
    }
}

/// The functions [`FunctionSearch::search`] would return for `registry`, in the same
/// order with the same scores and confidences, borrowed instead of explained: the fast
/// path for callers that only need the ranking.
///
/// ```
/// use rlm_registry::search::{SearchOptions, search_hits};
/// let registry = rlm_registry::Registry::baked();
/// # #[cfg(feature = "text")] {
/// let hits = search_hits(registry, "count the words", &SearchOptions::default());
/// assert_eq!(hits[0].function.name(), "word_count");
/// assert_eq!(hits[0].signature, "word_count(text)");
/// # }
/// ```
pub fn search_hits<'r>(
    registry: &'r Registry,
    query: &str,
    options: &SearchOptions,
) -> Vec<SearchHit<'r>> {
    let ranking = ranking::ranking(registry.index(), registry.functions(), query, options);
    hits(registry, &ranking).map(|(_, hit)| hit).collect()
}

/// `ranking`'s functions as hits, with their position in the registry.
fn hits<'r, 'k>(
    registry: &'r Registry,
    ranking: &'k ranking::Ranking,
) -> impl Iterator<Item = (u32, SearchHit<'r>)> + use<'r, 'k> {
    let (index, functions) = (registry.index(), registry.functions());
    ranking.top.iter().filter_map(move |&(score, doc)| {
        let i = doc as usize;
        let hit = SearchHit {
            function: functions.get(i)?,
            signature: index.signatures.get(i).map_or("", |s| s),
            summary: index.summaries.get(i).map_or("", |s| s),
            score: f64::from(score),
            confidence: f64::from(score / (score + ranking.scale)),
        };
        Some((doc, hit))
    })
}
