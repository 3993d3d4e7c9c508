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
//! A runtime registry builds its index when it loads; the baked one on first use.
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

pub mod capabilities;
mod index;
pub mod tokenize;

use std::collections::HashMap;
use std::sync::Arc;

use serde::Serialize;

use crate::environment::builtins::{self, BuiltinDoc};
use crate::{Function, Registry};
use index::{FIELDS, Inverted};
use tokenize::Tokenizer;

pub use index::WEIGHTS;

/// How a search ranks. Only [`SearchMode::Fast`] (BM25) is implemented in the library;
/// the LLM modes are not implemented yet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SearchMode {
    /// BM25 only.
    #[default]
    Fast,
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

/// A registry's search index. Built by [`SearchIndex::build`] or, shared, by
/// [`Registry::search_index`].
#[derive(Debug)]
pub struct SearchIndex {
    tokenizer: Tokenizer,
    inverted: Inverted,
    /// Per function (registry order): capabilities, explicit first.
    capabilities: Vec<Vec<String>>,
    /// Lower-cased function name → index.
    names: HashMap<String, u32>,
    /// Per function: signature and summary, computed once so results only copy them.
    display: Vec<(String, String)>,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tokenizer(english)")
    }
}

/// The four indexed texts of a function (name, description, capabilities, keywords),
/// given its capabilities: what the index tokenizes, for comparisons with other engines.
pub fn field_texts(function: &Function, capabilities: &[String]) -> [String; 4] {
    let mut keywords = String::new();
    for p in function.params() {
        keywords.push_str(p.name());
        keywords.push(' ');
        keywords.push_str(p.description());
        keywords.push(' ');
    }
    for r in function.returns() {
        keywords.push_str(r.description());
        keywords.push(' ');
    }
    let file = function.file();
    let stem = file.rsplit(['/', '\\']).next().unwrap_or(file);
    keywords.push_str(stem.trim_end_matches(".lua"));
    [
        function.name().to_string(),
        function.description().to_string(),
        capabilities.join(" "),
        keywords,
    ]
}

/// The capabilities of `function`: its `---@tag`s, then the automatic ones.
pub fn capabilities_of(function: &Function) -> Vec<String> {
    let mut all: Vec<String> = function.tags().iter().map(|t| t.to_string()).collect();
    for tag in capabilities::automatic(function.name(), function.description()) {
        if !all.iter().any(|t| t == tag) {
            all.push(tag.to_string());
        }
    }
    all
}

impl SearchIndex {
    /// Indexes `functions` (in registry order).
    pub fn build(functions: &[Function]) -> SearchIndex {
        let tokenizer = Tokenizer::new();
        let capabilities: Vec<Vec<String>> = functions.iter().map(capabilities_of).collect();
        let docs: Vec<[String; 4]> = functions
            .iter()
            .zip(&capabilities)
            .map(|(f, c)| field_texts(f, c))
            .collect();
        let inverted = Inverted::build(&tokenizer, &docs);
        let names = functions
            .iter()
            .enumerate()
            .map(|(i, f)| (f.name().to_lowercase(), i as u32))
            .collect();
        let display = functions
            .iter()
            .map(|f| (f.signature(), f.summary()))
            .collect();
        SearchIndex {
            tokenizer,
            inverted,
            capabilities,
            names,
            display,
        }
    }

    /// Number of indexed functions.
    pub fn len(&self) -> usize {
        self.capabilities.len()
    }

    /// Whether nothing is indexed.
    pub fn is_empty(&self) -> bool {
        self.capabilities.is_empty()
    }

    /// The capabilities of the `i`th function of the registry.
    pub fn capabilities(&self, i: usize) -> &[String] {
        self.capabilities.get(i).map_or(&[], Vec::as_slice)
    }

    /// Ranks `functions` (the ones this index was built from) for `query`.
    pub fn search(
        &self,
        functions: &[Function],
        query: &str,
        options: &SearchOptions,
    ) -> Vec<SearchResult> {
        // Query terms, each once: (term id if indexed, the word as typed).
        let mut terms: Vec<(Option<u32>, String, String)> = Vec::new();
        self.tokenizer.for_each_term(query, |word, stem| {
            if !terms.iter().any(|(_, _, s)| *s == stem) {
                let id = self.inverted.terms.get(&stem).copied();
                terms.push((id, word.to_string(), stem));
            }
        });
        let n = functions.len().min(self.len());
        let mut scores = vec![0f32; n];
        let mut touched: Vec<u32> = Vec::new();
        for (id, _, _) in &terms {
            let Some(id) = id else { continue };
            for p in &self.inverted.postings[*id as usize] {
                if let Some(score) = scores.get_mut(p.doc as usize) {
                    if *score == 0.0 {
                        touched.push(p.doc);
                    }
                    *score += p.score;
                }
            }
        }
        // A query that is exactly a name (`word_count`, `word count`, `wordCount`).
        let exact = self.exact_name(query).filter(|&i| (i as usize) < n);
        let best = touched
            .iter()
            .map(|&d| scores[d as usize])
            .fold(0f32, f32::max);
        let bonus = best + 1.0;
        if let Some(i) = exact {
            if scores[i as usize] == 0.0 {
                touched.push(i);
            }
            scores[i as usize] += bonus;
        }
        let mut ranked: Vec<(f32, u32)> = touched
            .into_iter()
            .filter(|&d| self.passes(&functions[d as usize], d as usize, options))
            .map(|d| (scores[d as usize], d))
            .collect();
        let by_rank = |a: &(f32, u32), b: &(f32, u32)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
        let k = options.max_results;
        if k == 0 {
            return Vec::new();
        }
        if ranked.len() > k {
            ranked.select_nth_unstable_by(k - 1, by_rank);
            ranked.truncate(k);
        }
        ranked.sort_unstable_by(by_rank);
        // Confidence scale: what matching every query word in the description scores.
        let scale: f32 = terms
            .iter()
            .map(|(id, _, _)| id.map_or(self.inverted.max_idf, |i| self.inverted.idf[i as usize]))
            .sum::<f32>()
            * WEIGHTS[1]
            + 1.0;
        ranked
            .into_iter()
            .map(|(score, d)| {
                let exact_bonus = (exact == Some(d)).then_some(bonus);
                self.result(&functions[d as usize], d, score, scale, &terms, exact_bonus)
            })
            .collect()
    }

    fn exact_name(&self, query: &str) -> Option<u32> {
        let trimmed = query.trim();
        if let Some(&i) = self.names.get(&trimmed.to_lowercase()) {
            return Some(i);
        }
        let mut words = Vec::new();
        tokenize::for_each_word(trimmed, |w| words.push(w.to_string()));
        self.names.get(&words.join("_")).copied()
    }

    fn passes(&self, function: &Function, i: usize, options: &SearchOptions) -> bool {
        let capability_ok = options
            .capability
            .as_ref()
            .is_none_or(|c| self.capabilities(i).contains(&c.to_lowercase()));
        let source_ok = options
            .source
            .as_ref()
            .is_none_or(|s| source_matches(function.dir(), s));
        capability_ok && source_ok
    }

    fn result(
        &self,
        function: &Function,
        doc: u32,
        score: f32,
        scale: f32,
        terms: &[(Option<u32>, String, String)],
        exact_bonus: Option<f32>,
    ) -> SearchResult {
        let mut signals = Vec::new();
        if let Some(bonus) = exact_bonus {
            signals.push(Signal {
                signal_type: "exact_name",
                field: "name",
                terms: vec![function.name().to_string()],
                weight: f64::from(bonus),
            });
        }
        for (field, field_name) in FIELDS.iter().enumerate() {
            let mut matched = Vec::new();
            let mut weight = 0f32;
            for (id, word, _) in terms {
                let Some(id) = *id else { continue };
                let list = &self.inverted.postings[id as usize];
                if let Ok(at) = list.binary_search_by_key(&doc, |p| p.doc) {
                    let share = self.inverted.field_share(id, &list[at], field);
                    if share > 0.0 {
                        matched.push(word.clone());
                        weight += share;
                    }
                }
            }
            if !matched.is_empty() {
                signals.push(Signal {
                    signal_type: "bm25",
                    field: field_name,
                    terms: matched,
                    weight: f64::from(weight),
                });
            }
        }
        let match_reason = if exact_bonus.is_some() {
            format!("exact name match `{}`", function.name())
        } else {
            let parts: Vec<String> = signals
                .iter()
                .map(|s| format!("{} matches {}", s.field, s.terms.join(", ")))
                .collect();
            parts.join("; ")
        };
        SearchResult {
            id: format!("lua:{}", function.name()),
            name: function.name().to_string(),
            signature: self.display[doc as usize].0.clone(),
            summary: self.display[doc as usize].1.clone(),
            source: function.dir().to_string(),
            capabilities: self.capabilities(doc as usize).to_vec(),
            score: f64::from(score),
            confidence: f64::from(score / (score + scale)),
            match_reason,
            signals,
        }
    }
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

    /// The search index, built on first use (at load for `from_paths` / `from_map`).
    pub fn search_index(&self) -> &SearchIndex {
        self.search
            .0
            .get_or_init(|| Arc::new(SearchIndex::build(self.functions())))
    }

    /// Searches the registry's functions; see the [module docs](crate::search).
    pub fn search(&self, query: &str, options: &SearchOptions) -> Vec<SearchResult> {
        self.search_index().search(self.functions(), query, options)
    }

    /// The capabilities of `function` as indexed: its `---@tag`s, then the automatic ones.
    pub fn capabilities_of(&self, function: &Function) -> Vec<String> {
        match self
            .functions()
            .iter()
            .position(|f| std::ptr::eq(f, function))
        {
            Some(i) => self.search_index().capabilities(i).to_vec(),
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
                index.capabilities(*i).contains(&capability)
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
    pub fn compact_prompt(&self) -> String {
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
