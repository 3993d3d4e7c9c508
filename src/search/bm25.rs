//! BM25 over documents: the index behind `doc_search`, which ranks the documents of a
//! corpus for a query.
//!
//! Documents are tokenized with the registry search's stop words and stems
//! ([`tokenize`](super::tokenize): English stop words dropped, Snowball English stems),
//! so `Counting` finds "counts" as `fn_search` does; words are runs of letters and
//! digits, lower-cased, and not split further at capitals as a function's name is (a
//! document's `SQLite` is the query's `sqlite`). Each distinct word is stemmed once per index (a corpus
//! repeats its words), and a document's terms become postings of `(document, term
//! frequency)`. A query adds `idf × tf·(k1 + 1) / (tf + k1·(1 − b + b·len/avg))` per
//! document (k1 = 1.2, b = 0.75, Lucene's idf) and keeps the best `k`, ties in document
//! order.
//!
//! ```
//! use rlm_registry::search::bm25::Bm25Index;
//!
//! let mut builder = Bm25Index::builder();
//! builder.add(b"The cache keeps answers between runs.");
//! builder.add(b"Budgets limit the tokens a run spends.");
//! builder.add(b"Caching answers: the cache file is SQLite.");
//! let index = builder.build();
//! let hits = index.search("cached answers", 2);
//! assert_eq!(hits.iter().map(|h| h.doc).collect::<Vec<_>>(), [2, 0]);
//! ```

use std::collections::HashMap;

use super::tokenize::{Tokenizer, is_stop_word, lowercase};

/// BM25's term-frequency saturation.
const K1: f32 = 1.2;
/// BM25's length normalisation.
const B: f32 = 0.75;
/// What a word or a term costs besides its bytes: its hash table entry and its box.
const WORD_COST: usize = 48;

/// One document a query matched: its 0-based position among the documents added, and
/// its score.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hit {
    /// The document's position, 0-based, in the order it was added.
    pub doc: usize,
    /// Its BM25 score (higher is better; always above 0).
    pub score: f32,
}

/// A BM25 index over documents, built once by a [`Bm25Builder`] and searched many
/// times.
#[derive(Debug, Default)]
pub struct Bm25Index {
    /// Stem → term id.
    terms: HashMap<Box<str>, u32>,
    /// Per term: `(document, frequency)`, in document order.
    postings: Vec<Vec<(u32, u32)>>,
    /// Per document: how many terms it holds.
    lengths: Vec<u32>,
    average_length: f32,
    /// Roughly the bytes it holds, counted as it grows.
    held: usize,
}

/// Adds documents, one at a time, to a future [`Bm25Index`].
pub struct Bm25Builder {
    index: Bm25Index,
    tokenizer: Tokenizer,
    /// Word as met (lower-cased) → its term, `None` for a stop word: a corpus repeats
    /// its words, and stemming is the costly step.
    words: HashMap<Box<str>, Option<u32>>,
    /// The current document's terms, reused between documents.
    scratch: Vec<u32>,
    total_length: u64,
}

impl Bm25Index {
    /// A builder with no documents.
    ///
    /// ```
    /// let index = rlm_registry::search::bm25::Bm25Index::builder().build();
    /// assert_eq!(index.len(), 0);
    /// assert!(index.search("anything", 10).is_empty());
    /// ```
    pub fn builder() -> Bm25Builder {
        Bm25Builder {
            index: Bm25Index::default(),
            tokenizer: Tokenizer::new(),
            words: HashMap::new(),
            scratch: Vec::new(),
            total_length: 0,
        }
    }

    /// How many documents it indexes.
    pub fn len(&self) -> usize {
        self.lengths.len()
    }

    /// Whether it indexes no document.
    pub fn is_empty(&self) -> bool {
        self.lengths.is_empty()
    }

    /// Roughly the bytes it holds, to count against a memory limit.
    pub fn heap_bytes(&self) -> usize {
        self.held
    }

    /// The best `k` documents for `query`, best first; equal scores in document order.
    /// Documents that share no term with the query are left out.
    ///
    /// ```
    /// let mut builder = rlm_registry::search::bm25::Bm25Index::builder();
    /// for text in ["same words", "other", "same words"] {
    ///     builder.add(text.as_bytes());
    /// }
    /// let hits = builder.build().search("word", 10);
    /// assert_eq!(hits.iter().map(|h| h.doc).collect::<Vec<_>>(), [0, 2]);
    /// assert_eq!(hits[0].score, hits[1].score);
    /// ```
    pub fn search(&self, query: &str, k: usize) -> Vec<Hit> {
        let n = self.len();
        if n == 0 || k == 0 {
            return Vec::new();
        }
        let mut scores = vec![0f32; n];
        for term in self.query_terms(query) {
            let Some(postings) = self.postings.get(term as usize) else {
                continue;
            };
            let idf = idf(n, postings.len());
            for &(doc, frequency) in postings {
                let length = self.lengths.get(doc as usize).copied().unwrap_or(0);
                if let Some(score) = scores.get_mut(doc as usize) {
                    *score += idf * self.saturation(frequency, length);
                }
            }
        }
        let mut hits: Vec<Hit> = scores
            .into_iter()
            .enumerate()
            .filter(|&(_, score)| score > 0.0)
            .map(|(doc, score)| Hit { doc, score })
            .collect();
        // A stable sort keeps document order among equal scores.
        hits.sort_by(|a, b| b.score.total_cmp(&a.score));
        hits.truncate(k);
        hits
    }

    /// The distinct terms of `query` the index knows, in order.
    fn query_terms(&self, query: &str) -> Vec<u32> {
        let tokenizer = Tokenizer::new();
        let mut terms = Vec::new();
        for_each_word(query, |word| {
            if is_stop_word(word) {
                return;
            }
            let stem = tokenizer.stem_cow(word);
            if let Some(&term) = self.terms.get(stem.as_ref())
                && !terms.contains(&term)
            {
                terms.push(term);
            }
        });
        terms
    }

    /// BM25's weight of a term met `frequency` times in a document of `length` terms.
    fn saturation(&self, frequency: u32, length: u32) -> f32 {
        let frequency = frequency as f32;
        let relative = if self.average_length > 0.0 {
            length as f32 / self.average_length
        } else {
            0.0
        };
        frequency * (K1 + 1.0) / (frequency + K1 * (1.0 - B + B * relative))
    }
}

/// Calls `emit` with every lower-cased run of letters and digits of `text`.
fn for_each_word(text: &str, mut emit: impl FnMut(&str)) {
    let mut buffer = String::new();
    for word in text.split(|c: char| !c.is_alphanumeric()) {
        if !word.is_empty() {
            emit(lowercase(word, &mut buffer));
        }
    }
}

/// Lucene's idf, never negative: `ln(1 + (n − df + 0.5) / (df + 0.5))`.
fn idf(n: usize, df: usize) -> f32 {
    let (n, df) = (n as f32, df as f32);
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

impl Bm25Builder {
    /// Adds the next document (any bytes: invalid UTF-8 reads as U+FFFD, which splits
    /// words as a space does).
    pub fn add(&mut self, text: &[u8]) {
        let doc = self.index.lengths.len() as u32;
        let text = String::from_utf8_lossy(text);
        self.scratch.clear();
        let Bm25Builder {
            index,
            tokenizer,
            words,
            scratch,
            ..
        } = self;
        for_each_word(&text, |word| {
            let term = match words.get(word) {
                Some(&term) => term,
                None => {
                    let term = (!is_stop_word(word)).then(|| index.term(tokenizer, word));
                    index.held += word.len() + WORD_COST;
                    words.insert(word.into(), term);
                    term
                }
            };
            if let Some(term) = term {
                scratch.push(term);
            }
        });
        self.scratch.sort_unstable();
        for run in self.scratch.chunk_by(|a, b| a == b) {
            if let Some(postings) = self.index.postings.get_mut(run[0] as usize) {
                postings.push((doc, run.len() as u32));
                self.index.held += 8;
            }
        }
        self.index.held += 4;
        let length = self.scratch.len() as u32;
        self.index.lengths.push(length);
        self.total_length += u64::from(length);
    }

    /// Roughly the bytes it holds so far, to count against a memory limit.
    pub fn heap_bytes(&self) -> usize {
        self.index.held + self.scratch.capacity() * 4
    }

    /// The index of the documents added.
    pub fn build(self) -> Bm25Index {
        let mut index = self.index;
        let n = index.lengths.len();
        index.average_length = if n == 0 {
            0.0
        } else {
            (self.total_length as f64 / n as f64) as f32
        };
        index
    }
}

impl Bm25Index {
    /// The id of `word`'s stem, a new one if the stem is new.
    fn term(&mut self, tokenizer: &Tokenizer, word: &str) -> u32 {
        let stem = tokenizer.stem_cow(word);
        if let Some(&term) = self.terms.get(stem.as_ref()) {
            return term;
        }
        let term = self.postings.len() as u32;
        self.held += stem.len() + WORD_COST;
        self.terms.insert(stem.into(), term);
        self.postings.push(Vec::new());
        term
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(documents: &[&str]) -> Bm25Index {
        let mut builder = Bm25Index::builder();
        for document in documents {
            builder.add(document.as_bytes());
        }
        builder.build()
    }

    fn ranked(index: &Bm25Index, query: &str, k: usize) -> Vec<usize> {
        index.search(query, k).iter().map(|h| h.doc).collect()
    }

    #[test]
    fn the_document_that_holds_the_rare_term_ranks_first() {
        let index = index(&[
            "the cache and the budget",
            "the budget and the window",
            "a zebra in the cache",
        ]);
        assert_eq!(ranked(&index, "zebra cache", 10), [2, 0]);
    }

    #[test]
    fn words_are_matched_by_their_stems_whatever_their_case() {
        let index = index(&["Counting words", "nothing here"]);
        assert_eq!(ranked(&index, "COUNTS", 10), [0]);
        assert_eq!(ranked(&index, "word_count", 10), [0]);
        let index = super::tests::index(&["uses SQLite", "uses sq lite"]);
        assert_eq!(ranked(&index, "sqlite", 10), [0]);
    }

    #[test]
    fn a_shorter_document_wins_at_equal_frequency() {
        let index = index(&["apple pie with cream and sugar and more", "apple pie"]);
        assert_eq!(ranked(&index, "apple", 10), [1, 0]);
    }

    #[test]
    fn equal_scores_keep_document_order_and_k_cuts() {
        let index = index(&["same text", "other", "same text", "same text"]);
        assert_eq!(ranked(&index, "same", 10), [0, 2, 3]);
        assert_eq!(ranked(&index, "same", 2), [0, 2]);
        assert!(ranked(&index, "same", 0).is_empty());
    }

    #[test]
    fn stop_words_unknown_words_and_empty_queries_match_nothing() {
        let index = index(&["the and of", "zebra"]);
        assert!(ranked(&index, "the of", 10).is_empty());
        assert!(ranked(&index, "unicorn", 10).is_empty());
        assert!(ranked(&index, "", 10).is_empty());
        assert_eq!(index.len(), 2);
    }

    #[test]
    fn a_repeated_query_word_counts_once() {
        let index = index(&["zebra", "zebra zebra zebra yak"]);
        let once = index.search("zebra", 10);
        let twice = index.search("zebra zebra", 10);
        assert_eq!(once, twice);
    }

    #[test]
    fn bytes_that_are_not_utf8_split_words() {
        let mut builder = Bm25Index::builder();
        builder.add(b"alpha\xffbeta");
        builder.add(b"");
        let index = builder.build();
        assert_eq!(ranked(&index, "beta", 10), [0]);
        assert!(index.heap_bytes() > 0);
    }
}
