//! Ranking a query: the query's words looked up in the index, their precomputed BM25
//! contributions summed per function in reused accumulators, the best few kept.

use std::cell::RefCell;
use std::collections::HashSet;

use super::SearchOptions;
use crate::Function;
use crate::registry::index::{Index, WEIGHTS, name_key, tokenize};
use crate::registry::source_matches;
use tokenize::Tokenizer;

/// One distinct word of a query.
pub(super) struct QueryTerm {
    /// As typed, lower-cased.
    pub(super) word: String,
    /// The indexed term, if the word occurs anywhere.
    pub(super) term: Option<u32>,
}

/// The distinct non-stop words of `query`, in order.
fn query_terms(index: &Index, query: &str) -> Vec<QueryTerm> {
    let tokenizer = Tokenizer::new();
    let mut terms: Vec<QueryTerm> = Vec::new();
    // A set, not a scan of the terms so far: a query of a hundred thousand distinct
    // words (code may pass any text) would otherwise take quadratic time.
    let mut seen: HashSet<Result<u32, String>> = HashSet::new();
    tokenize::for_each_word(query, |word| {
        let Some(found) = index.word(&tokenizer, word) else {
            return;
        };
        let term = found.ok();
        let key = term.ok_or_else(|| word.to_string());
        if seen.insert(key) {
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
pub(super) type Ranked = (f32, u32);

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

/// A query, ranked: what both [`search_hits`](super::search_hits) and [`Registry::search`](super::FunctionSearch::search) are
/// made from.
pub(super) struct Ranking {
    pub(super) terms: Vec<QueryTerm>,
    /// Best first.
    pub(super) top: Vec<Ranked>,
    /// The function named exactly by the query, and the bonus that put it first.
    pub(super) exact: Option<(u32, f32)>,
    /// Confidence is `score / (score + scale)`.
    pub(super) scale: f32,
}

/// Ranks `functions` (those `index` was built from) for `query`.
pub(super) fn ranking(
    index: &Index,
    functions: &[Function],
    query: &str,
    options: &SearchOptions,
) -> Ranking {
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
