//! Explaining a ranked function: which fields matched which query words, and a
//! one-line reason, as [`SearchResult`] carries them.

use serde::Serialize;

use super::SearchHit;
use super::ranking::{QueryTerm, Ranking};
use crate::registry::index::{FIELDS, Index};

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

/// The explained result for `hit`, the `doc`th function, one of `ranking`'s.
pub(super) fn result(
    index: &Index,
    doc: u32,
    hit: SearchHit<'_>,
    ranking: &Ranking,
) -> SearchResult {
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
