//! Discovery (SPEC §6): BM25 search over a registry, capability tags, sources and lookup
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
//! use rlm_registry::search::SearchOptions;
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

pub(crate) mod index;
#[cfg(feature = "runtime")]
pub mod llm_modes;

use std::cell::RefCell;
use std::sync::Arc;

use serde::Serialize;

use crate::conventions::builtins::{self, BuiltinDoc};
use crate::{Function, Registry};
pub use index::{
    FIELDS, Index, StrTable, WEIGHTS, capabilities, capabilities_of, field_texts, name_key,
    tokenize,
};
use tokenize::Tokenizer;

/// How a search ranks: BM25 alone, or BM25 refined by a language model (see
/// [`llm_modes`]). The LLM modes fall back to the fast order when the model's output
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

/// Why a result matched: one field and the query words found in it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Signal {
    /// `bm25` for a field match, `exact_name` when the query is the function's name.
    pub signal_type: &'static str,
    /// The field (`name`, `description`, `capabilities`, `keywords`), or `name`.
    pub field: &'static str,
    /// The query words that matched, in query order.
    pub terms: Vec<String>,
    /// The field's share of the score.
    pub weight: f64,
}

/// A ranked function, unexplained: what [`Registry::search_hits`] returns.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hit<'r> {
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

/// One search result.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SearchResult {
    /// `lua:<name>`.
    pub id: String,
    /// The function's name.
    pub name: String,
    /// `name(a, b?)`.
    pub signature: String,
    /// The first sentence of the description.
    pub summary: String,
    /// The source directory.
    pub source: String,
    /// Explicit and automatic capabilities.
    pub capabilities: Vec<String>,
    /// The raw score (BM25, plus the exact-name bonus).
    pub score: f64,
    /// In 0..1, increasing with the score: a result never has less confidence than one
    /// ranked below it.
    pub confidence: f64,
    /// A human-readable summary of the signals.
    pub match_reason: String,
    /// The evidence behind the score.
    pub signals: Vec<Signal>,
}

/// One distinct word of a query.
struct QueryTerm {
    /// As typed, lower-cased.
    word: String,
    /// The indexed term, if the word occurs anywhere.
    term: Option<u32>,
}

/// The distinct non-stop words of `query`, in order.
fn query_terms(index: &Index, query: &str) -> Vec<QueryTerm> {
    let tokenizer = Tokenizer::new();
    let mut terms: Vec<QueryTerm> = Vec::new();
    tokenize::for_each_word(query, |word| {
        let Some(found) = index.word(&tokenizer, word) else {
            return;
        };
        let term = found.ok();
        let seen = terms.iter().any(|t| match term {
            Some(_) => t.term == term,
            None => t.term.is_none() && t.word == word,
        });
        if !seen {
            terms.push(QueryTerm {
                word: word.to_string(),
                term,
            });
        }
    });
    terms
}

/// Per-thread score accumulators, reused so a query does not allocate one per function.
#[derive(Default)]
struct Scratch {
    scores: Vec<f32>,
    /// The functions with a score, when few are (see [`Scratch::accumulate`]).
    touched: Vec<u32>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::default();
}

/// A candidate: score and function.
type Ranked = (f32, u32);

/// Best first; equal scores in registry (name) order.
fn better(a: Ranked, b: Ranked) -> bool {
    a.0 > b.0 || (a.0 == b.0 && a.1 < b.1)
}

impl Scratch {
    /// Sums the postings of `terms` over the first `n` functions. Returns whether it kept
    /// the list of touched functions: worth it only when the postings are few next to
    /// `n`; otherwise a branch-free add and one scan of all `n` scores is faster.
    fn accumulate(&mut self, index: &Index, terms: &[QueryTerm], n: usize) -> bool {
        if self.scores.len() < n {
            self.scores.resize(n, 0.0);
        }
        let scores = &mut self.scores[..n];
        let lists = terms
            .iter()
            .filter_map(|t| t.term)
            .map(|t| index.postings(t));
        let total: usize = lists.clone().map(|(docs, _, _)| docs.len()).sum();
        let sparse = total * 8 < n;
        for (docs, term_scores, _) in lists {
            let pairs = docs.iter().zip(term_scores);
            if sparse {
                for (&doc, &score) in pairs {
                    if let Some(slot) = scores.get_mut(doc as usize) {
                        if *slot == 0.0 {
                            self.touched.push(doc);
                        }
                        *slot += score;
                    }
                }
            } else {
                for (&doc, &score) in pairs {
                    if let Some(slot) = scores.get_mut(doc as usize) {
                        *slot += score;
                    }
                }
            }
        }
        sparse
    }

    /// The `k` best matches that pass `keep`, best first. Resets the accumulators for
    /// the next query.
    fn top(
        &mut self,
        n: usize,
        sparse: bool,
        k: usize,
        mut keep: impl FnMut(u32) -> bool,
    ) -> Vec<Ranked> {
        let mut top = TopK::new(k);
        if sparse {
            for &doc in &self.touched {
                if let Some(slot) = self.scores.get_mut(doc as usize) {
                    let score = std::mem::take(slot);
                    if score >= top.floor {
                        top.offer((score, doc), &mut keep);
                    }
                }
            }
            self.touched.clear();
        } else {
            let scores = &mut self.scores[..n];
            for (doc, &score) in scores.iter().enumerate() {
                // In function order a tie with the k-th best comes later, so it loses.
                if score > top.floor || (score == top.floor && !top.is_full()) {
                    top.offer((score, doc as u32), &mut keep);
                }
            }
            scores.fill(0.0);
        }
        top.ranked
    }
}

/// The best `k` candidates offered, best first.
struct TopK {
    k: usize,
    ranked: Vec<Ranked>,
    /// No candidate below this can enter: the scan compares against it and moves on.
    floor: f32,
}

impl TopK {
    fn new(k: usize) -> TopK {
        TopK {
            k,
            ranked: Vec::with_capacity(k + 1),
            floor: f32::MIN_POSITIVE,
        }
    }

    fn is_full(&self) -> bool {
        self.ranked.len() == self.k
    }

    fn offer(&mut self, candidate: Ranked, keep: &mut impl FnMut(u32) -> bool) {
        if self.is_full() && self.ranked.last().is_some_and(|&l| !better(candidate, l)) {
            return;
        }
        if keep(candidate.1) {
            let at = self.ranked.partition_point(|&t| better(t, candidate));
            self.ranked.insert(at, candidate);
            self.ranked.truncate(self.k);
            if self.ranked.len() == self.k {
                self.floor = self.ranked.last().map_or(self.floor, |l| l.0);
            }
        }
    }
}

/// The function a query names exactly: `word_count`, `wordCount` or `word count`.
fn exact_name(index: &Index, functions: &[Function], query: &str) -> Option<u32> {
    let query = query.trim();
    if let Ok(i) = functions.binary_search_by(|f| f.name().cmp(query)) {
        return Some(i as u32);
    }
    index.names.get(&name_key(query))
}

/// A query, ranked: what both [`Registry::search_hits`] and [`Registry::search`] are
/// made from.
struct Ranking {
    terms: Vec<QueryTerm>,
    /// Best first.
    top: Vec<Ranked>,
    /// The function named exactly by the query, and the bonus that put it first.
    exact: Option<(u32, f32)>,
    /// Confidence is `score / (score + scale)`.
    scale: f32,
}

/// Ranks `functions` (those `index` was built from) for `query`.
fn ranking(index: &Index, functions: &[Function], query: &str, options: &SearchOptions) -> Ranking {
    let n = functions.len().min(index.len());
    // There are never more results than functions (and `usize::MAX` must not allocate).
    let k = options.max_results.min(n);
    let terms = query_terms(index, query);
    // Confidence scale: what matching every query word in the description scores.
    let scale: f32 = terms
        .iter()
        .map(|t| t.term.map_or(index.max_idf, |i| index.idf[i as usize]))
        .sum::<f32>()
        * WEIGHTS[1]
        + 1.0;
    if k == 0 {
        return Ranking {
            terms,
            top: Vec::new(),
            exact: None,
            scale,
        };
    }
    let exact = exact_name(index, functions, query).filter(|&i| (i as usize) < n);
    let keep = |doc: u32| Some(doc) != exact && passes(index, functions, doc, options);
    let mut top = SCRATCH.with(|scratch| match scratch.try_borrow_mut() {
        Ok(mut scratch) => rank(&mut scratch, index, &terms, n, k, keep),
        Err(_) => rank(&mut Scratch::default(), index, &terms, n, k, keep),
    });
    // The exact name outranks everything: its score gains the best score plus one.
    let exact = exact
        .filter(|&i| passes(index, functions, i, options))
        .map(|i| {
            let own: f32 = terms
                .iter()
                .filter_map(|t| t.term)
                .map(|t| index.field_scores_of(t, i).iter().sum::<f32>())
                .sum();
            let bonus = top.first().map_or(own, |first| first.0.max(own)) + 1.0;
            top.insert(0, (own + bonus, i));
            top.truncate(k);
            (i, bonus)
        });
    Ranking {
        terms,
        top,
        exact,
        scale,
    }
}

fn rank(
    scratch: &mut Scratch,
    index: &Index,
    terms: &[QueryTerm],
    n: usize,
    k: usize,
    keep: impl FnMut(u32) -> bool,
) -> Vec<Ranked> {
    let sparse = scratch.accumulate(index, terms, n);
    scratch.top(n, sparse, k, keep)
}

fn passes(index: &Index, functions: &[Function], doc: u32, options: &SearchOptions) -> bool {
    let capability_ok = options
        .capability
        .as_ref()
        .is_none_or(|c| index.has_capability(doc as usize, &c.to_lowercase()));
    let source_ok = options.source.as_ref().is_none_or(|s| {
        functions
            .get(doc as usize)
            .is_some_and(|f| source_matches(f.dir(), s))
    });
    capability_ok && source_ok
}

/// The explained result for `hit`, the `doc`th function, one of `ranking`'s.
fn result(index: &Index, doc: u32, hit: Hit<'_>, ranking: &Ranking) -> SearchResult {
    let function = hit.function;
    let terms = &ranking.terms;
    let exact_bonus = ranking
        .exact
        .and_then(|(i, bonus)| (i == doc).then_some(bonus));
    let mut signals = Vec::new();
    if let Some(bonus) = exact_bonus {
        signals.push(Signal {
            signal_type: "exact_name",
            field: "name",
            terms: vec![function.name().to_string()],
            weight: f64::from(bonus),
        });
    }
    let shares: Vec<(&QueryTerm, [f32; 4])> = terms
        .iter()
        .filter_map(|t| Some((t, index.field_scores_of(t.term?, doc))))
        .collect();
    for (field, field_name) in FIELDS.iter().enumerate() {
        let matched: Vec<String> = shares
            .iter()
            .filter(|(_, s)| s[field] > 0.0)
            .map(|(t, _)| t.word.clone())
            .collect();
        if !matched.is_empty() {
            let weight: f32 = shares.iter().map(|(_, s)| s[field]).sum();
            signals.push(Signal {
                signal_type: "bm25",
                field: field_name,
                terms: matched,
                weight: f64::from(weight),
            });
        }
    }
    let match_reason = match_reason(function.name(), exact_bonus.is_some(), &signals);
    SearchResult {
        id: ["lua:", function.name()].concat(),
        name: function.name().to_string(),
        signature: hit.signature.to_string(),
        summary: hit.summary.to_string(),
        source: function.dir().to_string(),
        capabilities: index
            .capabilities(doc as usize)
            .map(str::to_string)
            .collect(),
        score: hit.score,
        confidence: hit.confidence,
        match_reason,
        signals,
    }
}

/// "exact name match `x`", or one "FIELD matches WORD, WORD" per field, joined by "; ".
fn match_reason(name: &str, exact: bool, signals: &[Signal]) -> String {
    if exact {
        return format!("exact name match `{name}`");
    }
    let mut reason = String::new();
    for signal in signals {
        if !reason.is_empty() {
            reason.push_str("; ");
        }
        reason.push_str(signal.field);
        reason.push_str(" matches ");
        for (i, term) in signal.terms.iter().enumerate() {
            if i > 0 {
                reason.push_str(", ");
            }
            reason.push_str(term);
        }
    }
    reason
}

/// Whether `dir` is `source`, or ends with it as whole path components.
fn source_matches(dir: &str, source: &str) -> bool {
    let dir = dir.trim_end_matches('/');
    let source = source.trim_end_matches('/');
    dir == source || dir.ends_with(&format!("/{source}"))
}

/// A function or built-in found by id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entry<'r> {
    /// A registry function (`lua:<name>`).
    Lua(&'r Function),
    /// A built-in (`builtin:<name>`).
    Builtin(&'static BuiltinDoc),
}

/// A source directory and how many of the registry's functions come from it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Source {
    /// The directory, as named to the loader.
    pub dir: String,
    /// Functions it provides (winners only).
    pub functions: usize,
}

/// Something to search for functions: a [`Registry`], or everything one agent may call
/// (`providers::Catalog`, with the runtime). The LLM modes work over either.
pub trait FunctionSearch {
    /// The best matches for `query`, best first.
    fn search(&self, query: &str, options: &SearchOptions) -> Vec<SearchResult>;
}

impl FunctionSearch for Registry {
    fn search(&self, query: &str, options: &SearchOptions) -> Vec<SearchResult> {
        Registry::search(self, query, options)
    }
}

/// Stores the index in the registry; called when a runtime registry is assembled.
pub(crate) fn prime(registry: &Registry) {
    registry.search_index();
}

impl Registry {
    /// The registry function whose name is most like `name` (Jaro-Winkler above 0.8),
    /// for "did you mean" suggestions.
    ///
    /// ```
    /// let registry = rlm_registry::Registry::baked();
    /// # #[cfg(feature = "text")]
    /// assert_eq!(registry.closest_name("grep_txt"), Some("grep_text"));
    /// ```
    pub fn closest_name(&self, name: &str) -> Option<&str> {
        self.functions()
            .iter()
            .map(|f| (strsim::jaro_winkler(name, f.name()), f.name()))
            .filter(|(score, _)| *score > 0.8)
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, n)| n)
    }

    /// The search index: baked in for [`Registry::baked`] and generated registries,
    /// built at load for `from_paths` / `from_map`.
    pub fn search_index(&self) -> &Index {
        match self.search.baked {
            Some(index) => index,
            None => self
                .search
                .built
                .get_or_init(|| Arc::new(Index::build(self.functions()))),
        }
    }

    /// Searches the registry's functions; see the [module docs](crate::search). Each
    /// result explains itself (signals, match reason); [`Registry::search_hits`] ranks
    /// the same way without the explanations, and without allocating per result.
    pub fn search(&self, query: &str, options: &SearchOptions) -> Vec<SearchResult> {
        let ranking = ranking(self.search_index(), self.functions(), query, options);
        self.hits(&ranking)
            .map(|(doc, hit)| result(self.search_index(), doc, hit, &ranking))
            .collect()
    }

    /// The functions [`Registry::search`] would return, in the same order with the same
    /// scores and confidences, borrowed instead of explained: the fast path for callers
    /// that only need the ranking.
    ///
    /// ```
    /// use rlm_registry::search::SearchOptions;
    /// let registry = rlm_registry::Registry::baked();
    /// # #[cfg(feature = "text")] {
    /// let hits = registry.search_hits("count the words", &SearchOptions::default());
    /// assert_eq!(hits[0].function.name(), "word_count");
    /// assert_eq!(hits[0].signature, "word_count(text)");
    /// # }
    /// ```
    pub fn search_hits(&self, query: &str, options: &SearchOptions) -> Vec<Hit<'_>> {
        let ranking = ranking(self.search_index(), self.functions(), query, options);
        self.hits(&ranking).map(|(_, hit)| hit).collect()
    }

    /// `ranking`'s functions as hits, with their index.
    fn hits<'r, 'k>(
        &'r self,
        ranking: &'k Ranking,
    ) -> impl Iterator<Item = (u32, Hit<'r>)> + use<'r, 'k> {
        let (index, functions) = (self.search_index(), self.functions());
        ranking.top.iter().filter_map(move |&(score, doc)| {
            let i = doc as usize;
            let hit = Hit {
                function: functions.get(i)?,
                signature: index.signatures.get(i).map_or("", |s| s),
                summary: index.summaries.get(i).map_or("", |s| s),
                score: f64::from(score),
                confidence: f64::from(score / (score + ranking.scale)),
            };
            Some((doc, hit))
        })
    }

    /// The capabilities of `function` as indexed: its `---@tag`s, then the automatic ones.
    pub fn capabilities_of(&self, function: &Function) -> Vec<String> {
        match self
            .functions()
            .iter()
            .position(|f| std::ptr::eq(f, function))
        {
            Some(i) => self
                .search_index()
                .capabilities(i)
                .map(str::to_string)
                .collect(),
            None => capabilities_of(function),
        }
    }

    /// The functions with `capability` (case-insensitive), optionally only from `source`,
    /// in name order.
    pub fn with_capability(&self, capability: &str, source: Option<&str>) -> Vec<&Function> {
        let capability = capability.to_lowercase();
        let index = self.search_index();
        self.functions()
            .iter()
            .enumerate()
            .filter(|(i, f)| {
                index.has_capability(*i, &capability)
                    && source.is_none_or(|s| source_matches(f.dir(), s))
            })
            .map(|(_, f)| f)
            .collect()
    }

    /// Every source directory, in load order, with how many functions it provides.
    pub fn sources(&self) -> Vec<Source> {
        let mut sources: Vec<Source> = Vec::new();
        for chunk in self.chunks() {
            if !sources.iter().any(|s| s.dir == chunk.dir()) {
                sources.push(Source {
                    dir: chunk.dir().to_string(),
                    functions: 0,
                });
            }
        }
        for function in self.functions() {
            if let Some(source) = sources.iter_mut().find(|s| s.dir == function.dir()) {
                source.functions += 1;
            }
        }
        sources
    }

    /// Looks up `lua:<name>` or `builtin:<name>`; a bare name tries the registry, then
    /// the built-ins.
    ///
    /// ```
    /// use rlm_registry::search::Entry;
    /// let registry = rlm_registry::Registry::baked();
    /// assert!(matches!(registry.lookup("builtin:llm_query"), Some(Entry::Builtin(_))));
    /// assert!(registry.lookup("lua:no_such_function").is_none());
    /// ```
    pub fn lookup(&self, id: &str) -> Option<Entry<'_>> {
        if let Some(name) = id.strip_prefix("lua:") {
            return self.get(name).map(Entry::Lua);
        }
        if let Some(name) = id.strip_prefix("builtin:") {
            return builtins::doc(name).map(Entry::Builtin);
        }
        self.get(id)
            .map(Entry::Lua)
            .or_else(|| builtins::doc(id).map(Entry::Builtin))
    }

    /// A compact prompt addendum for large registries: one line per function (signature
    /// and summary) and a pointer to `fn_search` and `help`, instead of every full doc.
    /// Empty for an empty registry, like [`Registry::system_prompt`].
    pub fn compact_prompt(&self) -> String {
        if self.is_empty() {
            return String::new();
        }
        let mut out = format!(
            "## Registry functions\n\nThese {} Lua functions are already defined as globals in the REPL; call them directly. Only names and summaries are listed: call `fn_search(query)` to find functions for a task and `help(name)` for one function's full documentation before using it.\n\n",
            self.len()
        );
        for function in self.functions() {
            out.push_str(&format!(
                "- `{}`: {}\n",
                function.signature(),
                function.summary()
            ));
        }
        out
    }
}

/// A function's description as JSON (what `rlm list --json` prints per function and
/// what a server's `GET /v1/functions` lists): name, signature, summary, description,
/// params, returns, file, line, dir.
///
/// ```
/// let registry = rlm_registry::Registry::from_map([("hi", "--- Says hi.\nfunction hi() end")]).unwrap();
/// let json = rlm_registry::search::function_json(registry.get("hi").unwrap());
/// assert_eq!(json["signature"], "hi()");
/// assert_eq!(json["summary"], "Says hi.");
/// ```
pub fn function_json(function: &Function) -> serde_json::Value {
    let params: Vec<_> = function
        .params()
        .iter()
        .map(|p| {
            serde_json::json!({"name": p.name(), "type": p.ty(), "optional": p.optional(), "description": p.description()})
        })
        .collect();
    let returns: Vec<_> = function
        .returns()
        .iter()
        .map(|r| serde_json::json!({"type": r.ty(), "name": r.name(), "description": r.description()}))
        .collect();
    serde_json::json!({
        "name": function.name(),
        "signature": function.signature(),
        "summary": function.summary(),
        "description": function.description(),
        "params": params,
        "returns": returns,
        "file": function.file(),
        "line": function.line(),
        "dir": function.dir(),
    })
}
