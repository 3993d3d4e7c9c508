//! The LLM search modes: `balanced` (BM25, then an LLM reranks the candidates) and
//! `accurate` (an LLM expands the query, BM25 runs on the query and the expansion, then
//! an LLM reranks). Entry point: [`search_with_llm`].
//!
//! # Pipeline
//!
//! 1. **Candidates.** BM25 ([`Registry::search`](super::FunctionSearch::search)) with the caller's filters, but a wider
//!    cut than asked: [`candidate_count`] (`max(4 × max_results, 20)`, at most 40 unless
//!    more results were asked for), so the reranker can promote a function BM25 placed
//!    just below the cut.
//! 2. **Expansion** (accurate only). One request asks for up to [`MAX_EXPANSIONS`]
//!    extra search phrases as a JSON array of strings. BM25 runs on each, with the same
//!    filters. The original query is weighted first: its top `max_results` hits (the
//!    fast results) head the candidates, in BM25 order; the rest of the pool is the
//!    original's remaining hits merged with the functions only the phrases found, by
//!    confidence, an expansion's multiplied by [`EXPANSION_WEIGHT`] (confidences are
//!    comparable across queries, BM25 scores are not). A function several phrases find
//!    counts once, with its best (maximum) confidence: the phrases are often
//!    near-synonyms, and a sum would reward matching one idea several times. A result
//!    found through a phrase carries a `query_expansion` [`Signal`] naming it.
//! 3. **Rerank.** One request lists the numbered candidates (signature and one-line
//!    summary) and asks for a JSON array of names, best first. The named candidates
//!    come first in the model's order; the ones it leaves out follow in BM25 order.
//!    Each reranked result gets an `llm_rerank` [`Signal`] and a match reason that says
//!    so. Fewer than two candidates leave nothing to order, and no request is sent.
//!
//! Both requests are deterministic (temperature 0) and short, so that small local
//! models answer them well.
//!
//! # Parsing
//!
//! The model's answer may be bare JSON, JSON in a ```` ``` ```` fence, JSON inside
//! prose, a `{"key": [...]}` object, or (small models do this) a Python-style list with
//! single quotes. A reasoning model's thinking is skipped, read as everywhere else a
//! reply is read ([`Completion::answer`](crate::llm::Completion::answer)). The first array that yields
//! something usable wins. In a ranking, a name may be written `word_count`,
//! `word_count(text)`, `lua:word_count` or in another case, or be a candidate's number;
//! unknown and repeated names are ignored.
//!
//! # Fallback
//!
//! Never a panic and never a lost result: when the rerank cannot be used (the call
//! failed: server down, HTTP 500 after the client's retries…; or nothing usable
//! parsed), the results keep the BM25 order and [`LlmSearch::fallback`] says why: the
//! fast results, followed in accurate mode by what only the expansion found when the
//! query alone fills fewer than `max_results`. An expansion that does not parse just
//! means the original query alone ([`LlmSearch::expansion_fallback`]); an expansion
//! whose *call* failed also skips the rerank (the same server would be tried, and
//! waited for, again). Either way a model that cannot help gives the fast results.
//!
//! # Confidence
//!
//! After a rerank, a result's confidence is
//! `RERANK_WEIGHT × rank_score + (1 − RERANK_WEIGHT) × bm25_confidence`, where
//! `rank_score` is `1 − i / n` for the model's `i`-th pick (0-based) of `n` candidates
//! and 0 for a candidate it left out; then each confidence is capped by the one above
//! it. So confidences stay in 0..1 and never increase down the list: a result the
//! model ranks higher never shows less confidence than one below it. The same cap
//! applies to the accurate-mode candidates, whose order puts the original query first.
//! `score` stays the BM25 score of the query that found the function.
//!
//! ```
//! use rlm_registry::Registry;
//! use rlm_registry::llm::{Completion, Llm, LlmError, Request};
//! use rlm_registry::search::llm_modes::search_with_llm;
//! use rlm_registry::search::{FunctionSearch, SearchMode, SearchOptions};
//!
//! /// A model that always gives the same answer.
//! struct Fixed(&'static str);
//! impl Llm for Fixed {
//!     fn complete(&self, _request: Request) -> Result<Completion, LlmError> {
//!         Ok(Completion::new(self.0))
//!     }
//! }
//!
//! let registry = Registry::from_map([
//!     ("word_count", "--- Counts the words of a text.\n---@param text string\n---@return integer\nfunction word_count(text) return 0 end"),
//!     ("shout", "--- Upper-cases a text.\n---@param text string\n---@return string\nfunction shout(text) return text end"),
//! ])?;
//! let options = SearchOptions::default();
//!
//! // The model prefers `shout`; `word_count`, which it left out, follows.
//! let found = search_with_llm(&registry, &Fixed(r#"["shout"]"#), "text", &options, SearchMode::Balanced);
//! assert_eq!(found.results[0].name, "shout");
//! assert_eq!(found.results.len(), 2);
//! assert!(found.fallback.is_none());
//! assert!(found.results[0].confidence >= found.results[1].confidence);
//!
//! // An answer that does not parse: the BM25 order, and the reason.
//! let found = search_with_llm(&registry, &Fixed("I am not sure."), "text", &options, SearchMode::Balanced);
//! assert_eq!(found.results, registry.search("text", &options));
//! assert!(found.fallback.unwrap().contains("not a JSON array"));
//! # Ok::<(), rlm_registry::LoadError>(())
//! ```

use std::collections::HashMap;

use serde::Serialize;
use serde_json::Value;

use super::{FunctionSearch, SearchMode, SearchOptions, SearchResult, Signal};
use crate::llm::{Llm, Message, Request};
use crate::text_format::{byte_prefix, cut_chars};

/// The fewest candidates the reranker sees (when that many match).
pub const MIN_CANDIDATES: usize = 20;
/// The most candidates the reranker sees, unless more results were asked for: it keeps
/// the prompt near a thousand tokens, which small local models handle.
pub const MAX_CANDIDATES: usize = 40;
/// The most expansion phrases used in accurate mode; further ones are ignored.
pub const MAX_EXPANSIONS: usize = 5;
/// How much an expansion phrase's confidence counts against the original query's when
/// the lists are fused: a little less, so the user's own words win ties and near-ties.
pub const EXPANSION_WEIGHT: f64 = 0.8;
/// The share of the model's ranking in a reranked confidence; the rest is BM25's.
pub const RERANK_WEIGHT: f64 = 0.5;

/// Characters of a summary shown to the reranker, and of the query in a prompt: enough
/// to judge, short enough for small models.
const PROMPT_TEXT_CHARS: usize = 160;
/// Characters of one expansion phrase kept.
const PHRASE_CHARS: usize = 100;
/// Bytes of a model answer searched for JSON, and `[` positions tried: bounds the work
/// on a runaway answer.
const MAX_ANSWER_BYTES: usize = 64 * 1024;
const MAX_ARRAY_STARTS: usize = 64;
/// Characters of the model's answer quoted in a fallback reason.
const SNIPPET_CHARS: usize = 80;

/// What a search in one of the [`SearchMode`]s found, and how it went. Serializes as
/// the object `rlm search --json` prints (empty and absent fields left out).
///
/// ```
/// use rlm_registry::Registry;
/// use rlm_registry::search::llm_modes::LlmSearch;
/// use rlm_registry::search::{FunctionSearch, SearchMode, SearchOptions};
///
/// let found = LlmSearch::fast(Registry::baked(), "count words", &SearchOptions::default());
/// assert_eq!(found.mode, SearchMode::Fast);
/// assert!(found.fallback.is_none() && found.expanded_terms.is_empty());
/// let json = serde_json::to_value(&found).unwrap();
/// assert_eq!(json["mode"], "fast");
/// assert!(json.get("fallback").is_none());
/// ```
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LlmSearch {
    /// The query as given.
    pub query: String,
    /// The mode asked for.
    pub mode: SearchMode,
    /// The phrases the model added (accurate mode), in its order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub expanded_terms: Vec<String>,
    /// Why the rerank was not applied and the results are in BM25 order (the fast
    /// results, then, in accurate mode, what only the expansion found); `None` when it
    /// was applied or not needed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
    /// Accurate mode: why the query was not expanded and the original query was
    /// searched alone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expansion_fallback: Option<String>,
    /// The results, best first: at most `max_results`, all passing the filters.
    pub results: Vec<SearchResult>,
}

impl LlmSearch {
    /// A plain BM25 search, as [`SearchMode::Fast`]: no model involved, so the caller
    /// needs none.
    ///
    /// ```
    /// use rlm_registry::Registry;
    /// use rlm_registry::search::llm_modes::LlmSearch;
    /// use rlm_registry::search::{FunctionSearch, SearchOptions};
    ///
    /// let registry = Registry::baked();
    /// let options = SearchOptions::default();
    /// assert_eq!(LlmSearch::fast(registry, "grep", &options).results, registry.search("grep", &options));
    /// ```
    pub fn fast(registry: &dyn FunctionSearch, query: &str, options: &SearchOptions) -> LlmSearch {
        LlmSearch::plain(query, SearchMode::Fast, registry.search(query, options))
    }

    fn plain(query: &str, mode: SearchMode, results: Vec<SearchResult>) -> LlmSearch {
        LlmSearch {
            query: query.to_string(),
            mode,
            expanded_terms: Vec::new(),
            fallback: None,
            expansion_fallback: None,
            results,
        }
    }
}

/// The most LLM calls one search in `mode` makes: 0 (fast), 1 (balanced: the rerank),
/// 2 (accurate: the expansion and the rerank). What a caller with a call budget, such as
/// the `fn_search` built-in, reserves.
///
/// ```
/// use rlm_registry::search::SearchMode;
/// use rlm_registry::search::llm_modes::llm_calls;
///
/// assert_eq!(llm_calls(SearchMode::Fast), 0);
/// assert_eq!(llm_calls(SearchMode::Accurate), 2);
/// ```
pub fn llm_calls(mode: SearchMode) -> usize {
    match mode {
        SearchMode::Fast => 0,
        SearchMode::Balanced => 1,
        SearchMode::Accurate => 2,
    }
}

/// How many BM25 candidates the reranker sees for `max_results` results:
/// `max(4 × max_results, MIN_CANDIDATES)`, capped at [`MAX_CANDIDATES`] but never below
/// `max_results`.
///
/// ```
/// use rlm_registry::search::llm_modes::candidate_count;
///
/// assert_eq!(candidate_count(5), 20);
/// assert_eq!(candidate_count(8), 32);
/// assert_eq!(candidate_count(20), 40);
/// assert_eq!(candidate_count(60), 60);
/// ```
pub fn candidate_count(max_results: usize) -> usize {
    max_results
        .saturating_mul(4)
        .clamp(MIN_CANDIDATES, MAX_CANDIDATES)
        .max(max_results)
}

/// Searches `registry` for `query` in `mode`, with `llm` for the rerank and the
/// expansion; see the [module docs](self) for the pipeline, the fallback and the
/// confidence. [`SearchMode::Fast`] makes no call. Never panics and never fails: when
/// the model cannot help, the BM25 order is kept and [`LlmSearch::fallback`] says why.
///
/// ```
/// use rlm_registry::Registry;
/// use rlm_registry::llm::{Completion, Llm, LlmError, Request};
/// use rlm_registry::search::llm_modes::search_with_llm;
/// use rlm_registry::search::{FunctionSearch, SearchMode, SearchOptions};
///
/// /// A model that is down.
/// struct Down;
/// impl Llm for Down {
///     fn complete(&self, _request: Request) -> Result<Completion, LlmError> {
///         Err(LlmError::Config("no server".into()))
///     }
/// }
///
/// let registry = Registry::baked();
/// let options = SearchOptions::default();
/// let found = search_with_llm(registry, &Down, "count the words", &options, SearchMode::Accurate);
/// assert_eq!(found.results, registry.search("count the words", &options));
/// assert!(found.fallback.unwrap().starts_with("the LLM call failed"));
/// ```
pub fn search_with_llm<L: Llm + ?Sized>(
    registry: &(impl FunctionSearch + ?Sized),
    llm: &L,
    query: &str,
    options: &SearchOptions,
    mode: SearchMode,
) -> LlmSearch {
    if mode == SearchMode::Fast || options.max_results == 0 {
        return LlmSearch::plain(query, mode, registry.search(query, options));
    }
    let wide = SearchOptions {
        max_results: candidate_count(options.max_results),
        ..options.clone()
    };
    let mut candidates = registry.search(query, &wide);
    let mut found = LlmSearch::plain(query, mode, Vec::new());
    if mode == SearchMode::Accurate {
        match expand(llm, query) {
            Ok(phrases) => {
                candidates = fuse(registry, candidates, &phrases, &wide, options.max_results);
                found.expanded_terms = phrases;
            }
            Err(Failure::Unparsed(reason)) => found.expansion_fallback = Some(reason),
            Err(Failure::Call(reason)) => {
                found.expansion_fallback = Some(reason.clone());
                found.fallback = Some(reason);
            }
        }
    }
    if found.fallback.is_none()
        && candidates.len() >= 2
        && let Err(failure) = rerank(llm, query, &mut candidates)
    {
        found.fallback = Some(failure.reason());
    }
    candidates.truncate(options.max_results);
    found.results = candidates;
    found
}

/// Why an LLM step could not be used.
#[derive(Debug)]
enum Failure {
    /// The call itself failed: the server is down, answered 5xx, timed out…
    Call(String),
    /// The call worked but the answer held nothing usable.
    Unparsed(String),
}

impl Failure {
    fn reason(self) -> String {
        match self {
            Failure::Call(reason) | Failure::Unparsed(reason) => reason,
        }
    }
}

/// Sends `system` and `user` deterministically; the answer's text or why there is none.
fn ask<L: Llm + ?Sized>(
    llm: &L,
    system: &str,
    user: String,
    max_tokens: u32,
) -> Result<String, Failure> {
    let request = Request::new(vec![Message::system(system), Message::user(user)])
        .with_temperature(0.0)
        .with_max_tokens(max_tokens);
    llm.complete(request)
        .map(|completion| completion.answer().to_string())
        .map_err(|error| Failure::Call(one_line(&format!("the LLM call failed: {error}"), 400)))
}

const EXPAND_SYSTEM: &str = "You help search a library of Lua functions. Answer with a JSON array of strings and nothing else.";
const RERANK_SYSTEM: &str = "You rank the functions of a Lua library by how well they fit a task. Answer with a JSON array of function names, best first, and nothing else.";

/// Asks for extra search phrases for `query`.
fn expand<L: Llm + ?Sized>(llm: &L, query: &str) -> Result<Vec<String>, Failure> {
    let query_text = one_line(query, PROMPT_TEXT_CHARS);
    let prompt = format!(
        "Query: {query_text}\n\nGive up to {MAX_EXPANSIONS} short search phrases for finding the right function: synonyms, related words, likely snake_case function names. JSON array only."
    );
    let answer = ask(llm, EXPAND_SYSTEM, prompt, 200)?;
    let phrases = first_usable(&answer, |items| phrases_of(items, query));
    match phrases {
        Parsed::Usable(phrases) => Ok(phrases),
        Parsed::Unusable => Err(Failure::Unparsed(format!(
            "the model's expansion has no usable phrase ({})",
            snippet(&answer)
        ))),
        Parsed::NoArray => Err(Failure::Unparsed(format!(
            "the model's expansion is not a JSON array of strings ({})",
            snippet(&answer)
        ))),
    }
}

/// The distinct, non-empty phrases of `items` that differ from `query`, at most
/// [`MAX_EXPANSIONS`].
fn phrases_of(items: &[Value], query: &str) -> Vec<String> {
    let mut phrases: Vec<String> = Vec::new();
    let query = query.trim().to_lowercase();
    for item in items {
        let Value::String(text) = item else { continue };
        let phrase = one_line(text, PHRASE_CHARS);
        let key = phrase.to_lowercase();
        if phrase.is_empty() || key == query || phrases.iter().any(|p| p.to_lowercase() == key) {
            continue;
        }
        phrases.push(phrase);
        if phrases.len() == MAX_EXPANSIONS {
            break;
        }
    }
    phrases
}

/// An expansion-only find: (weighted confidence, phrase index, rank, result).
type Find = (f64, usize, usize, SearchResult);

/// The accurate-mode candidates: `original`'s first `keep` hits (what the fast search
/// returns), then the rest of `original` and the functions only the `phrases` found,
/// merged by confidence (an expansion's weighted by [`EXPANSION_WEIGHT`], the original
/// first on ties); at most `options.max_results`, confidence capped to be monotonic.
///
/// Keeping the fast head first means a failed rerank leaves exactly the fast results
/// when the query alone fills them, and a poor expansion cannot push them out; the
/// expansion's finds still reach the reranker through the rest of the pool.
fn fuse(
    registry: &(impl FunctionSearch + ?Sized),
    original: Vec<SearchResult>,
    phrases: &[String],
    options: &SearchOptions,
    keep: usize,
) -> Vec<SearchResult> {
    let mut finds: Vec<Find> = Vec::new();
    let mut by_id: HashMap<String, usize> = HashMap::new();
    for (phrase_index, phrase) in phrases.iter().enumerate() {
        for (rank, result) in registry.search(phrase, options).into_iter().enumerate() {
            if original.iter().any(|r| r.id == result.id) {
                continue;
            }
            let confidence = EXPANSION_WEIGHT * result.confidence;
            match by_id.get(&result.id) {
                // An earlier phrase wins ties: the model listed it first.
                Some(&at) if finds[at].0 >= confidence => {}
                Some(&at) => finds[at] = (confidence, phrase_index, rank, result),
                None => {
                    by_id.insert(result.id.clone(), finds.len());
                    finds.push((confidence, phrase_index, rank, result));
                }
            }
        }
    }
    let mut original = original.into_iter();
    let mut fused: Vec<SearchResult> = original.by_ref().take(keep).collect();
    // (confidence, from an expansion, order within its list, result)
    let mut rest: Vec<(f64, bool, usize, SearchResult)> = original
        .enumerate()
        .map(|(i, r)| (r.confidence, false, i, r))
        .collect();
    finds.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    for (i, (confidence, phrase_index, _, mut result)) in finds.into_iter().enumerate() {
        let phrase = &phrases[phrase_index];
        result.confidence = confidence;
        result.match_reason = format!("via expansion `{phrase}`: {}", result.match_reason);
        result.signals.push(Signal {
            signal_type: "query_expansion",
            field: "query",
            terms: vec![phrase.clone()],
            weight: EXPANSION_WEIGHT,
        });
        rest.push((confidence, true, i, result));
    }
    rest.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    fused.extend(rest.into_iter().map(|(_, _, _, result)| result));
    fused.truncate(options.max_results);
    cap_confidence(&mut fused);
    fused
}

/// Makes confidence non-increasing down `results` (each capped by the one above) and
/// keeps it in 0..1: the order is the ranking's verdict, and a confidence must not
/// contradict it.
fn cap_confidence(results: &mut [SearchResult]) {
    let mut ceiling = 1.0f64;
    for result in results {
        let confidence = if result.confidence.is_finite() {
            result.confidence.clamp(0.0, 1.0)
        } else {
            0.0
        };
        ceiling = ceiling.min(confidence);
        result.confidence = ceiling;
    }
}

/// Asks the model to order `candidates` and applies its order, or leaves them as they
/// are and says why.
fn rerank<L: Llm + ?Sized>(
    llm: &L,
    query: &str,
    candidates: &mut Vec<SearchResult>,
) -> Result<(), Failure> {
    let mut listing = String::new();
    for (i, c) in candidates.iter().enumerate() {
        listing.push_str(&format!(
            "{}. {}: {}\n",
            i + 1,
            c.signature,
            one_line(&c.summary, PROMPT_TEXT_CHARS)
        ));
    }
    let prompt = format!(
        "Task: {}\n\nFunctions:\n{listing}\nReturn the names of the functions that fit the task as a JSON array, best first. Leave out those that do not fit.",
        one_line(query, PROMPT_TEXT_CHARS)
    );
    // About a dozen tokens per name, and room for a stray sentence.
    let max_tokens = u32::try_from(64 + 16 * candidates.len()).unwrap_or(u32::MAX);
    let answer = ask(llm, RERANK_SYSTEM, prompt, max_tokens)?;
    match first_usable(&answer, |items| picks_of(items, candidates)) {
        Parsed::Usable(picks) => {
            apply_ranking(candidates, &picks);
            Ok(())
        }
        Parsed::Unusable => Err(Failure::Unparsed(format!(
            "the model's ranking names none of the candidates ({})",
            snippet(&answer)
        ))),
        Parsed::NoArray => Err(Failure::Unparsed(format!(
            "the model's ranking is not a JSON array of names ({})",
            snippet(&answer)
        ))),
    }
}

/// The candidates `items` name, as indices, each once, in the model's order.
fn picks_of(items: &[Value], candidates: &[SearchResult]) -> Vec<usize> {
    let mut picks = Vec::new();
    for item in items {
        if let Some(i) = candidate_index(item, candidates)
            && !picks.contains(&i)
        {
            picks.push(i);
        }
    }
    picks
}

/// The candidate an answer item names: a name in any of the forms a model writes, a
/// 1-based candidate number, or an object with a `name`.
fn candidate_index(item: &Value, candidates: &[SearchResult]) -> Option<usize> {
    match item {
        Value::String(text) => {
            let name = text
                .trim()
                .trim_matches(|c: char| matches!(c, '`' | '"' | '\'' | '*'));
            let name = name.strip_prefix("lua:").unwrap_or(name);
            let name = name.split('(').next().unwrap_or(name).trim();
            candidates.iter().position(|c| c.name == name).or_else(|| {
                candidates
                    .iter()
                    .position(|c| c.name.eq_ignore_ascii_case(name))
            })
        }
        Value::Number(number) => {
            let n = usize::try_from(number.as_u64()?).ok()?;
            (1..=candidates.len()).contains(&n).then(|| n - 1)
        }
        Value::Object(fields) => ["name", "function", "id"]
            .iter()
            .find_map(|key| fields.get(*key))
            .and_then(|value| candidate_index(value, candidates)),
        _ => None,
    }
}

/// Puts the picked candidates first, in order, then the others in their BM25 order, and
/// sets the blended, monotonic confidence (see the module docs).
fn apply_ranking(candidates: &mut Vec<SearchResult>, picks: &[usize]) {
    let n = candidates.len();
    let mut slots: Vec<Option<SearchResult>> =
        std::mem::take(candidates).into_iter().map(Some).collect();
    let mut ordered: Vec<(Option<usize>, SearchResult)> = Vec::with_capacity(n);
    for (position, &i) in picks.iter().enumerate() {
        if let Some(result) = slots.get_mut(i).and_then(Option::take) {
            ordered.push((Some(position), result));
        }
    }
    ordered.extend(slots.into_iter().flatten().map(|result| (None, result)));
    for (pick, mut result) in ordered {
        let rank_score = pick.map_or(0.0, |position| 1.0 - position as f64 / n as f64);
        let bm25 = if result.confidence.is_finite() {
            result.confidence.clamp(0.0, 1.0)
        } else {
            0.0
        };
        result.confidence = RERANK_WEIGHT * rank_score + (1.0 - RERANK_WEIGHT) * bm25;
        result.match_reason = match pick {
            Some(position) => format!(
                "LLM rerank: #{} of {n}; {}",
                position + 1,
                result.match_reason
            ),
            None => format!(
                "LLM rerank: left out, kept in BM25 order; {}",
                result.match_reason
            ),
        };
        result.signals.push(Signal {
            signal_type: "llm_rerank",
            field: "rank",
            terms: Vec::new(),
            weight: rank_score,
        });
        candidates.push(result);
    }
    cap_confidence(candidates);
}

/// What [`first_usable`] found in an answer.
enum Parsed<T> {
    /// An array with something usable.
    Usable(T),
    /// Arrays, but nothing usable in them.
    Unusable,
    /// No JSON array at all.
    NoArray,
}

/// The first JSON array in `answer` that `usable` turns into a non-empty list; see the
/// module docs for the forms accepted.
fn first_usable<T>(answer: &str, usable: impl Fn(&[Value]) -> Vec<T>) -> Parsed<Vec<T>> {
    let answer = byte_prefix(answer, MAX_ANSWER_BYTES);
    let mut seen_array = false;
    // Python-style lists (single quotes) are tried only when the JSON reading fails.
    let requoted = answer.contains('\'').then(|| answer.replace('\'', "\""));
    for text in std::iter::once(answer).chain(requoted.as_deref()) {
        for items in arrays(text) {
            seen_array = true;
            let found = usable(&items);
            if !found.is_empty() {
                return Parsed::Usable(found);
            }
        }
    }
    if seen_array {
        Parsed::Unusable
    } else {
        Parsed::NoArray
    }
}

/// The JSON arrays of `text`: the whole text (or its object's array fields) first, then
/// an array starting at each `[`, prose after it ignored.
fn arrays(text: &str) -> Vec<Vec<Value>> {
    let mut found = Vec::new();
    match serde_json::from_str::<Value>(text.trim()) {
        Ok(Value::Array(items)) => found.push(items),
        Ok(Value::Object(fields)) => {
            found.extend(fields.into_iter().filter_map(|(_, v)| match v {
                Value::Array(items) => Some(items),
                _ => None,
            }))
        }
        _ => {}
    }
    for (start, _) in text.match_indices('[').take(MAX_ARRAY_STARTS) {
        let mut values = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
        if let Some(Ok(Value::Array(items))) = values.next() {
            found.push(items);
        }
    }
    found
}

/// `text` on one line (whitespace runs collapsed), at most `max` characters.
fn one_line(text: &str, max: usize) -> String {
    cut_chars(&text.split_whitespace().collect::<Vec<_>>().join(" "), max)
}

/// The start of a model's answer, quoted in a fallback reason.
fn snippet(answer: &str) -> String {
    let line = one_line(answer, SNIPPET_CHARS);
    if line.is_empty() {
        "the answer was empty".to_string()
    } else {
        format!("the answer began: {line}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(items: &str) -> Parsed<Vec<String>> {
        first_usable(items, |values| {
            values
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
    }

    fn usable(answer: &str) -> Vec<String> {
        match names(answer) {
            Parsed::Usable(found) => found,
            Parsed::Unusable => panic!("unusable: {answer}"),
            Parsed::NoArray => panic!("no array: {answer}"),
        }
    }

    #[test]
    fn arrays_are_found_bare_fenced_in_prose_in_objects_and_after_thinking() {
        assert_eq!(usable(r#"["a", "b"]"#), ["a", "b"]);
        assert_eq!(usable("```json\n[\"a\",\n \"b\"]\n```"), ["a", "b"]);
        assert_eq!(
            usable("Sure [see below]! Here: [\"a\"] Hope it helps ]"),
            ["a"]
        );
        assert_eq!(usable(r#"{"ranking": ["b", "a"]}"#), ["b", "a"]);
        let thinking = crate::llm::Completion::new("<think>maybe [\"x\"]</think>\n[\"a\"]");
        assert_eq!(usable(thinking.answer()), ["a"]);
        assert_eq!(usable("['a', 'b']"), ["a", "b"]);
        assert!(matches!(names("no idea"), Parsed::NoArray));
        assert!(matches!(names("[1, 2]"), Parsed::Unusable));
        assert!(matches!(names(""), Parsed::NoArray));
        assert!(matches!(names("[\"unterminated"), Parsed::NoArray));
    }

    #[test]
    fn one_line_collapses_and_cuts_on_characters() {
        assert_eq!(one_line(" a\n\n b\tc ", 10), "a b c");
        assert_eq!(one_line("ééééé", 3), "ééé…");
    }

    #[test]
    fn phrases_skip_the_query_duplicates_and_non_strings() {
        let items: Vec<Value> = serde_json::from_str(
            r#"["Count words", "tally", 3, "", "TALLY", "a", "b", "c", "d", "e"]"#,
        )
        .unwrap();
        assert_eq!(
            phrases_of(&items, "count words"),
            ["tally", "a", "b", "c", "d"]
        );
    }

    #[test]
    fn candidate_counts() {
        assert_eq!(candidate_count(0), MIN_CANDIDATES);
        assert_eq!(candidate_count(1), 20);
        assert_eq!(candidate_count(10), 40);
        assert_eq!(candidate_count(usize::MAX), usize::MAX);
    }
}
