//! Scorers: how an answer is compared with the expected one, each giving a score in
//! `[0, 1]`.
//!
//! - `exact`: equal after normalising (case, surrounding whitespace, quotes and final
//!   punctuation, runs of spaces).
//! - `contains`: the normalised expected answer appears in the normalised answer.
//! - `numeric`: OOLONG's count score, `0.75^|error|`, on the first number in the answer.
//! - `f1_set`: F1 over sets of items — comma- or line-separated, or parenthesised
//!   tuples such as `(12, 40)`, whose members are unordered.
//! - `judge`: a model call with a fixed rubric ([`JUDGE_RUBRIC`]) answering CORRECT or
//!   INCORRECT.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::llm::{Llm, LlmError, Message, Request};

/// How an answer is scored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scorer {
    /// Equal after normalisation.
    Exact,
    /// The expected answer appears in the answer.
    Contains,
    /// `0.75^|answer - expected|` (OOLONG's score for counts).
    Numeric,
    /// F1 over the sets of items.
    F1Set,
    /// A model decides, with [`JUDGE_RUBRIC`].
    Judge,
}

/// The system prompt of the `judge` scorer. Fixed, so scores from different runs
/// compare.
pub const JUDGE_RUBRIC: &str = "You grade answers to questions. You are given a question, the reference answer and a candidate answer. The candidate is correct when it gives the same facts as the reference: wording, order, formatting and extra explanation do not matter; a missing, wrong or hedged fact (several answers offered) makes it incorrect. Reply with exactly one word: CORRECT or INCORRECT.";

impl Scorer {
    /// Scores `answer` against `expected`. Only [`Scorer::Judge`] uses `judge` (and
    /// `question`); without a model it is an error, as is a failed model call.
    ///
    /// ```
    /// use rlm_registry::eval::Scorer;
    ///
    /// assert_eq!(Scorer::Exact.score("q", " Location. ", "location", None)?, 1.0);
    /// assert_eq!(Scorer::Numeric.score("q", "I count 12 records", "14", None)?, 0.5625);
    /// assert_eq!(Scorer::F1Set.score("q", "(1, 2), (3, 4)", "(2, 1)", None)?, 2.0 / 3.0);
    /// # Ok::<(), rlm_registry::eval::ScoreError>(())
    /// ```
    pub fn score(
        self,
        question: &str,
        answer: &str,
        expected: &str,
        judge: Option<&dyn Llm>,
    ) -> Result<f64, ScoreError> {
        Ok(match self {
            Scorer::Exact => f64::from(u8::from(normalize(answer) == normalize(expected))),
            Scorer::Contains => {
                f64::from(u8::from(normalize(answer).contains(&normalize(expected))))
            }
            Scorer::Numeric => numeric(answer, expected)?,
            Scorer::F1Set => f1_set(answer, expected),
            Scorer::Judge => {
                let llm = judge.ok_or(ScoreError::NoJudge)?;
                judged(llm, question, answer, expected)?
            }
        })
    }

    /// The name in task files.
    pub fn name(self) -> &'static str {
        match self {
            Scorer::Exact => "exact",
            Scorer::Contains => "contains",
            Scorer::Numeric => "numeric",
            Scorer::F1Set => "f1_set",
            Scorer::Judge => "judge",
        }
    }
}

/// Why an answer could not be scored.
#[derive(Debug)]
#[non_exhaustive]
pub enum ScoreError {
    /// A `numeric` task whose expected answer is not a number.
    NotANumber(String),
    /// A `judge` task with no model to ask.
    NoJudge,
    /// The judge could not be reached.
    Judge(LlmError),
}

impl std::fmt::Display for ScoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScoreError::NotANumber(text) => {
                write!(
                    f,
                    "the expected answer `{text}` of a numeric task is not a number"
                )
            }
            ScoreError::NoJudge => f.write_str("a judge task needs a model to judge with"),
            ScoreError::Judge(error) => write!(f, "the judge failed: {error}"),
        }
    }
}

impl std::error::Error for ScoreError {}

/// Lower case, outer whitespace, quotes, backticks and final `.`/`!` removed, inner
/// whitespace runs made one space.
pub fn normalize(text: &str) -> String {
    let trimmed = text
        .trim()
        .trim_matches(|c: char| c == '"' || c == '\'' || c == '`' || c.is_whitespace())
        .trim_end_matches(['.', '!'])
        .trim();
    trimmed
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// The first number in `text` (`-12`, `3.5`, `1,284`), if any.
pub fn first_number(text: &str) -> Option<f64> {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_digit() {
            let negative = i > 0 && bytes[i - 1] == b'-';
            let mut j = i;
            let mut digits = String::new();
            while j < bytes.len() {
                let b = bytes[j];
                let next_is_digit = bytes.get(j + 1).is_some_and(u8::is_ascii_digit);
                if b.is_ascii_digit() {
                    digits.push(b as char);
                } else if b == b',' && next_is_digit {
                } else if b == b'.' && next_is_digit && !digits.contains('.') {
                    digits.push('.');
                } else {
                    break;
                }
                j += 1;
            }
            let value: f64 = digits.parse().ok()?;
            return Some(if negative { -value } else { value });
        }
        i += 1;
    }
    None
}

fn numeric(answer: &str, expected: &str) -> Result<f64, ScoreError> {
    let want =
        first_number(expected).ok_or_else(|| ScoreError::NotANumber(expected.to_string()))?;
    Ok(match first_number(answer) {
        Some(got) => 0.75f64.powf((got - want).abs()),
        None => 0.0,
    })
}

/// The items of a set answer: parenthesised tuples (members sorted, so `(2, 1)` is
/// `(1, 2)`) when the text has any, else comma-, semicolon- or line-separated items.
pub fn set_items(text: &str) -> BTreeSet<String> {
    if text.contains('(') {
        return text
            .split('(')
            .skip(1)
            .filter_map(|rest| rest.split_once(')').map(|(inside, _)| inside))
            .map(|inside| {
                let mut members: Vec<String> = inside
                    .split(',')
                    .map(normalize)
                    .filter(|m| !m.is_empty())
                    .collect();
                members.sort();
                members.join(",")
            })
            .filter(|item| !item.is_empty())
            .collect();
    }
    text.split([',', ';', '\n'])
        .map(normalize)
        .filter(|item| !item.is_empty() && item != "none")
        .collect()
}

fn f1_set(answer: &str, expected: &str) -> f64 {
    let got = set_items(answer);
    let want = set_items(expected);
    if want.is_empty() && got.is_empty() {
        return 1.0;
    }
    let hits = got.intersection(&want).count() as f64;
    if hits == 0.0 {
        return 0.0;
    }
    let precision = hits / got.len() as f64;
    let recall = hits / want.len() as f64;
    2.0 * precision * recall / (precision + recall)
}

fn judged(llm: &dyn Llm, question: &str, answer: &str, expected: &str) -> Result<f64, ScoreError> {
    let prompt = format!(
        "Question:\n{question}\n\nReference answer:\n{expected}\n\nCandidate answer:\n{answer}\n\nIs the candidate answer CORRECT or INCORRECT?"
    );
    let request = Request::new(vec![Message::system(JUDGE_RUBRIC), Message::user(prompt)])
        .with_temperature(0.0);
    let reply = llm.complete(request).map_err(ScoreError::Judge)?;
    let verdict = reply.content.trim().to_ascii_uppercase();
    Ok(f64::from(u8::from(verdict.starts_with("CORRECT"))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::Completion;

    fn score(scorer: Scorer, answer: &str, expected: &str) -> f64 {
        scorer.score("q", answer, expected, None).unwrap()
    }

    #[test]
    fn exact_ignores_case_quotes_and_final_punctuation_only() {
        assert_eq!(score(Scorer::Exact, "\"Numeric.\"", "numeric"), 1.0);
        assert_eq!(score(Scorer::Exact, "more  common", "More common"), 1.0);
        assert_eq!(score(Scorer::Exact, "numeric value", "numeric"), 0.0);
        assert_eq!(score(Scorer::Exact, "4829103", "4829103"), 1.0);
        assert_eq!(score(Scorer::Exact, "4829104", "4829103"), 0.0);
    }

    #[test]
    fn contains_finds_the_expected_answer_inside_a_sentence() {
        assert_eq!(
            score(Scorer::Contains, "The number is 4829103.", "4829103"),
            1.0
        );
        assert_eq!(
            score(Scorer::Contains, "The number is 482910.", "4829103"),
            0.0
        );
    }

    #[test]
    fn numeric_is_oolongs_three_quarters_to_the_error() {
        // OOLONG: score = 0.75^|y - ŷ|.
        assert_eq!(score(Scorer::Numeric, "12", "12"), 1.0);
        assert_eq!(score(Scorer::Numeric, "13", "12"), 0.75);
        assert_eq!(
            score(Scorer::Numeric, "There are 10 records.", "12"),
            0.5625
        );
        assert!((score(Scorer::Numeric, "2", "12") - 0.75f64.powi(10)).abs() < 1e-12);
        assert_eq!(score(Scorer::Numeric, "1,284", "1284"), 1.0);
        assert_eq!(score(Scorer::Numeric, "none", "3"), 0.0);
        assert!(Scorer::Numeric.score("q", "3", "three", None).is_err());
    }

    #[test]
    fn f1_set_scores_pairs_as_unordered_tuples() {
        let expected = "(1, 2), (1, 3), (2, 3), (4, 5)";
        assert_eq!(
            score(Scorer::F1Set, "(3,2)\n(2, 1)\n(5, 4)\n(1, 3)", expected),
            1.0
        );
        // 2 right of 3 given, 2 of 4 expected: P = 2/3, R = 1/2, F1 = 4/7.
        let got = score(Scorer::F1Set, "(1, 2), (2, 3), (9, 9)", expected);
        assert!((got - 4.0 / 7.0).abs() < 1e-12, "{got}");
        assert_eq!(score(Scorer::F1Set, "", expected), 0.0);
        assert_eq!(score(Scorer::F1Set, "none", ""), 1.0);
        assert_eq!(score(Scorer::F1Set, "b, a", "a, b, c"), 0.8);
    }

    struct Says(&'static str);
    impl Llm for Says {
        fn complete(&self, request: Request) -> Result<Completion, LlmError> {
            assert_eq!(request.messages[0].text(), JUDGE_RUBRIC);
            Ok(Completion::new(self.0))
        }
    }

    #[test]
    fn judge_asks_the_model_with_the_fixed_rubric() {
        let yes = Scorer::Judge.score("q", "Paris", "paris, France", Some(&Says("CORRECT")));
        assert_eq!(yes.unwrap(), 1.0);
        let no = Scorer::Judge.score("q", "Lyon", "Paris", Some(&Says("INCORRECT.")));
        assert_eq!(no.unwrap(), 0.0);
        assert!(matches!(
            Scorer::Judge.score("q", "a", "b", None),
            Err(ScoreError::NoJudge)
        ));
    }
}
