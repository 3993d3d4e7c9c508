//! The inverted index and BM25 scoring (one BM25 per field, weighted and summed, as
//! SQLite FTS5's `bm25(t, 10, 5, 3, 2)` does).

use std::collections::HashMap;

use super::tokenize::Tokenizer;

/// The indexed fields, in weight order.
pub const FIELDS: [&str; 4] = ["name", "description", "capabilities", "keywords"];
/// Field weights: name 10, description 5, capabilities 3, keywords 2.
pub const WEIGHTS: [f32; 4] = [10.0, 5.0, 3.0, 2.0];
const K1: f32 = 1.2;
const B: f32 = 0.75;

/// One document's term frequencies for one term, and its precomputed score.
#[derive(Clone, Debug)]
pub(crate) struct Posting {
    pub doc: u32,
    pub tf: [u16; 4],
    /// `idf × Σ weight × saturated tf`: the term's whole contribution to this document.
    pub score: f32,
}

/// The inverted index over the four fields of every document.
#[derive(Clone, Debug, Default)]
pub(crate) struct Inverted {
    pub terms: HashMap<String, u32>,
    pub postings: Vec<Vec<Posting>>,
    pub idf: Vec<f32>,
    /// The idf a term found in no document would have.
    pub max_idf: f32,
    pub lengths: Vec<[u32; 4]>,
    pub average: [f32; 4],
}

impl Inverted {
    /// Indexes `docs`, each four field texts.
    pub fn build(tokenizer: &Tokenizer, docs: &[[String; 4]]) -> Inverted {
        let mut terms: HashMap<String, u32> = HashMap::new();
        let mut postings: Vec<Vec<Posting>> = Vec::new();
        let mut lengths = vec![[0u32; 4]; docs.len()];
        for (doc, fields) in docs.iter().enumerate() {
            for (field, text) in fields.iter().enumerate() {
                tokenizer.for_each_term(text, |_, stem| {
                    lengths[doc][field] += 1;
                    let next = u32::try_from(postings.len()).unwrap_or(u32::MAX);
                    let id = *terms.entry(stem).or_insert(next);
                    if id == next {
                        postings.push(Vec::new());
                    }
                    let list = &mut postings[id as usize];
                    let doc = doc as u32;
                    if list.last().is_none_or(|p| p.doc != doc) {
                        list.push(Posting {
                            doc,
                            tf: [0; 4],
                            score: 0.0,
                        });
                    }
                    if let Some(p) = list.last_mut() {
                        p.tf[field] = p.tf[field].saturating_add(1);
                    }
                });
            }
        }
        let n = docs.len().max(1) as f32;
        let mut average = [0f32; 4];
        for len in &lengths {
            for f in 0..4 {
                average[f] += len[f] as f32 / n;
            }
        }
        let idf_of = |df: usize| (1.0 + (n - df as f32 + 0.5) / (df as f32 + 0.5)).ln();
        let mut idf = Vec::with_capacity(postings.len());
        for list in &mut postings {
            let term_idf = idf_of(list.len());
            idf.push(term_idf);
            for p in list.iter_mut() {
                p.score = (0..4)
                    .map(|f| {
                        field_score(term_idf, p.tf[f], lengths[p.doc as usize][f], average[f], f)
                    })
                    .sum();
            }
        }
        Inverted {
            terms,
            postings,
            idf,
            max_idf: idf_of(0),
            lengths,
            average,
        }
    }

    /// One field's share of a posting's score.
    pub fn field_share(&self, term: u32, posting: &Posting, field: usize) -> f32 {
        field_score(
            self.idf[term as usize],
            posting.tf[field],
            self.lengths[posting.doc as usize][field],
            self.average[field],
            field,
        )
    }
}

fn field_score(idf: f32, tf: u16, len: u32, average: f32, field: usize) -> f32 {
    if tf == 0 {
        return 0.0;
    }
    let tf = tf as f32;
    let norm = if average > 0.0 {
        len as f32 / average
    } else {
        1.0
    };
    WEIGHTS[field] * idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * norm))
}
