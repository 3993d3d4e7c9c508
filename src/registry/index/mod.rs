//! The search index: what a query needs, computed once per registry and laid out in
//! flat arrays so that `build.rs` can bake it as statics (see [`crate::codegen`]).
//!
//! Every BM25 contribution is precomputed: a posting holds, for one term and one
//! function, the term's whole weighted score in that function (one BM25 per field,
//! weighted 10/5/3/2 and summed, as SQLite FTS5's `bm25(t, 10, 5, 3, 2)`) and each
//! field's share of it. A query only looks words up and adds.
//!
//! Three hash tables map text to ids without allocating: `terms` (stem → term),
//! `words` (every word seen while indexing, and every stop word → its term, so that a
//! known word is not stemmed again at query time) and `names` (a function's name as
//! words joined by `_`, so `wordCount`, `word count` and `word_count` are all one key).

pub mod capabilities;
mod table;
pub mod tokenize;

use std::borrow::Cow;

use crate::conventions::{Function, Text};
pub use table::StrTable;
use tokenize::Tokenizer;

/// The indexed fields, in weight order.
pub const FIELDS: [&str; 4] = ["name", "description", "capabilities", "keywords"];
/// Field weights: name 10, description 5, capabilities 3, keywords 2.
pub const WEIGHTS: [f32; 4] = [10.0, 5.0, 3.0, 2.0];
const K1: f32 = 1.2;
const B: f32 = 0.75;

/// The value [`Index::word`] gives a stop word.
pub(crate) const STOP: u32 = u32::MAX;

type Slice<T> = Cow<'static, [T]>;

/// A registry's search index. Built with [`Index::build`], or baked by the code
/// generator and rebuilt with `__from_static`.
#[derive(Clone, Debug, PartialEq)]
pub struct Index {
    /// Stem → term id.
    pub(crate) terms: StrTable,
    /// Lower-cased word → term id, or [`STOP`].
    pub(crate) words: StrTable,
    /// Name words joined by `_` → function (the first of equal keys).
    pub(crate) names: StrTable,
    /// Per term.
    pub(crate) idf: Slice<f32>,
    /// The idf of a term found nowhere: what an unknown query word is worth.
    pub(crate) max_idf: f32,
    /// Term `t`'s postings are `starts[t]..starts[t + 1]` of the three arrays below,
    /// sorted by function.
    pub(crate) starts: Slice<u32>,
    pub(crate) docs: Slice<u32>,
    pub(crate) scores: Slice<f32>,
    pub(crate) field_scores: Slice<[f32; 4]>,
    /// Per function: capabilities separated by spaces, explicit first.
    pub(crate) capabilities: Slice<Text>,
    /// Per function: `name(a, b?)`.
    pub(crate) signatures: Slice<Text>,
    /// Per function: the first sentence of the description.
    pub(crate) summaries: Slice<Text>,
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
        if let Some(name) = r.name() {
            keywords.push_str(name);
            keywords.push(' ');
        }
        keywords.push_str(r.description());
        keywords.push(' ');
    }
    let file = function.file();
    let stem = file.rsplit(['/', '\\']).next().unwrap_or(file);
    keywords.push_str(stem.trim_end_matches(".lua"));
    [
        function.name().to_string(),
        prose(function.description()),
        capabilities.join(" "),
        keywords,
    ]
}

/// A description without its fenced code blocks: examples are code, whose identifiers
/// and literals would only add noise to the words a search matches.
///
/// ```
/// use rlm_registry::registry::index::prose;
/// let description = "Counts words.\n\n```lua\nword_count(\"a b\") --> 2\n```\nFast.";
/// assert_eq!(prose(description), "Counts words.\n\nFast.");
/// ```
pub fn prose(description: &str) -> String {
    let mut out = String::new();
    let mut in_code = false;
    for line in description.split_inclusive('\n') {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
        } else if !in_code {
            out.push_str(line);
        }
    }
    out.trim_end().to_string()
}

/// The capabilities of `function`: its `---@tag`s, then the automatic ones.
pub fn capabilities_of(function: &Function) -> Vec<String> {
    let mut all: Vec<String> = function.tags().iter().map(|t| t.to_string()).collect();
    for tag in capabilities::automatic(function.name(), &prose(function.description())) {
        if !all.iter().any(|t| t == tag) {
            all.push(tag.to_string());
        }
    }
    all
}

/// `word_count`, `wordCount` and `word count` all give `word_count`.
pub fn name_key(text: &str) -> String {
    let mut key = String::new();
    tokenize::for_each_word(text, |word| {
        if !key.is_empty() {
            key.push('_');
        }
        key.push_str(word);
    });
    key
}

/// Term frequencies while indexing: per term, (function, tf per field).
type Counts = Vec<Vec<(u32, [u16; 4])>>;

impl Index {
    /// Indexes `functions` (in registry order).
    pub fn build(functions: &[Function]) -> Index {
        let tokenizer = Tokenizer::new();
        let capabilities: Vec<Vec<String>> = functions.iter().map(capabilities_of).collect();
        let mut terms: Vec<(String, u32)> = Vec::new();
        let mut term_ids = std::collections::HashMap::new();
        let mut words = std::collections::HashMap::new();
        let mut counts: Counts = Vec::new();
        let mut lengths = vec![[0u32; 4]; functions.len()];
        for (doc, (function, caps)) in functions.iter().zip(&capabilities).enumerate() {
            for (field, text) in field_texts(function, caps).iter().enumerate() {
                tokenizer.for_each_term(text, |word, stem| {
                    lengths[doc][field] += 1;
                    let next = terms.len() as u32;
                    let id = *term_ids.entry(stem.clone()).or_insert_with(|| {
                        terms.push((stem, next));
                        counts.push(Vec::new());
                        next
                    });
                    words.entry(word.to_string()).or_insert(id);
                    count(&mut counts[id as usize], doc as u32, field);
                });
            }
        }
        for stop in tokenize::STOP_WORDS {
            words.insert(stop.to_string(), STOP);
        }
        let mut words: Vec<(String, u32)> = words.into_iter().collect();
        words.sort();
        let names = functions
            .iter()
            .enumerate()
            .map(|(i, f)| (name_key(f.name()), i as u32))
            .collect::<Vec<_>>();
        let mut index = Index::score(counts, &lengths);
        index.terms = StrTable::build(terms);
        index.words = StrTable::build(words);
        index.names = StrTable::build(names);
        index.capabilities = capabilities
            .iter()
            .map(|c| Cow::Owned(c.join(" ")))
            .collect();
        index.signatures = functions
            .iter()
            .map(|f| Cow::Owned(f.signature()))
            .collect();
        index.summaries = functions.iter().map(|f| Cow::Owned(f.summary())).collect();
        index
    }

    /// BM25 per posting from the term frequencies and field lengths.
    fn score(counts: Counts, lengths: &[[u32; 4]]) -> Index {
        let n = lengths.len().max(1) as f32;
        let mut average = [0f32; 4];
        for len in lengths {
            for (sum, &l) in average.iter_mut().zip(len) {
                *sum += l as f32 / n;
            }
        }
        let idf_of = |df: usize| (1.0 + (n - df as f32 + 0.5) / (df as f32 + 0.5)).ln();
        let mut index = Index::empty();
        let (mut idf, mut starts, mut docs, mut scores, mut field_scores) =
            (Vec::new(), vec![0u32], Vec::new(), Vec::new(), Vec::new());
        for list in counts {
            let term_idf = idf_of(list.len());
            idf.push(term_idf);
            for (doc, tf) in list {
                let shares: [f32; 4] = std::array::from_fn(|f| {
                    bm25(term_idf, tf[f], lengths[doc as usize][f], average[f]) * WEIGHTS[f]
                });
                docs.push(doc);
                scores.push(shares.iter().sum());
                field_scores.push(shares);
            }
            starts.push(docs.len() as u32);
        }
        index.idf = idf.into();
        index.max_idf = idf_of(0);
        index.starts = starts.into();
        index.docs = docs.into();
        index.scores = scores.into();
        index.field_scores = field_scores.into();
        index
    }

    /// An index of nothing.
    pub const fn empty() -> Index {
        Index::__from_static(
            StrTable::empty(),
            StrTable::empty(),
            StrTable::empty(),
            &[],
            0.0,
            &[0],
            &[],
            &[],
            &[],
            &[],
            &[],
            &[],
        )
    }

    /// Used by generated code; not part of the stable API.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    pub const fn __from_static(
        terms: StrTable,
        words: StrTable,
        names: StrTable,
        idf: &'static [f32],
        max_idf: f32,
        starts: &'static [u32],
        docs: &'static [u32],
        scores: &'static [f32],
        field_scores: &'static [[f32; 4]],
        capabilities: &'static [Text],
        signatures: &'static [Text],
        summaries: &'static [Text],
    ) -> Index {
        Index {
            terms,
            words,
            names,
            idf: Cow::Borrowed(idf),
            max_idf,
            starts: Cow::Borrowed(starts),
            docs: Cow::Borrowed(docs),
            scores: Cow::Borrowed(scores),
            field_scores: Cow::Borrowed(field_scores),
            capabilities: Cow::Borrowed(capabilities),
            signatures: Cow::Borrowed(signatures),
            summaries: Cow::Borrowed(summaries),
        }
    }

    /// Number of indexed functions.
    pub fn len(&self) -> usize {
        self.signatures.len()
    }

    /// Whether nothing is indexed.
    pub fn is_empty(&self) -> bool {
        self.signatures.is_empty()
    }

    /// The term a lower-cased query word stands for: `Some(Ok(term))` when indexed,
    /// `Some(Err(()))` when not (it still counts for the confidence scale), `None` for a
    /// stop word.
    pub(crate) fn word(&self, tokenizer: &Tokenizer, word: &str) -> Option<Result<u32, ()>> {
        match self.words.get(word) {
            Some(STOP) => None,
            Some(term) => Some(Ok(term)),
            None => Some(self.terms.get(&tokenizer.stem_cow(word)).ok_or(())),
        }
    }

    /// The postings of `term`: functions, whole scores and per-field scores.
    pub(crate) fn postings(&self, term: u32) -> (&[u32], &[f32], &[[f32; 4]]) {
        let t = term as usize;
        let (Some(&start), Some(&end)) = (self.starts.get(t), self.starts.get(t + 1)) else {
            return (&[], &[], &[]);
        };
        let range = start as usize..end as usize;
        (
            self.docs.get(range.clone()).unwrap_or_default(),
            self.scores.get(range.clone()).unwrap_or_default(),
            self.field_scores.get(range).unwrap_or_default(),
        )
    }

    /// Per-field scores of `term` in function `doc` (zeros when it does not occur).
    pub(crate) fn field_scores_of(&self, term: u32, doc: u32) -> [f32; 4] {
        let (docs, _, fields) = self.postings(term);
        docs.binary_search(&doc)
            .ok()
            .and_then(|at| fields.get(at).copied())
            .unwrap_or_default()
    }

    /// The capabilities of the `i`th function, explicit first.
    pub fn capabilities(&self, i: usize) -> impl Iterator<Item = &str> {
        self.capabilities
            .get(i)
            .map_or("", |c| c)
            .split(' ')
            .filter(|c| !c.is_empty())
    }

    /// Whether the `i`th function has `capability` (lower-cased).
    pub fn has_capability(&self, i: usize, capability: &str) -> bool {
        self.capabilities(i).any(|c| c == capability)
    }
}

fn count(list: &mut Vec<(u32, [u16; 4])>, doc: u32, field: usize) {
    if list.last().is_none_or(|(d, _)| *d != doc) {
        list.push((doc, [0; 4]));
    }
    if let Some((_, tf)) = list.last_mut() {
        tf[field] = tf[field].saturating_add(1);
    }
}

/// One field's BM25, unweighted.
fn bm25(idf: f32, tf: u16, len: u32, average: f32) -> f32 {
    if tf == 0 {
        return 0.0;
    }
    let tf = tf as f32;
    let norm = if average > 0.0 {
        len as f32 / average
    } else {
        1.0
    };
    idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * norm))
}
