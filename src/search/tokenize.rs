//! Text → search terms: identifier splitting (`word_count`, `wordCount` → word, count),
//! lower-casing, English stop words removed, Snowball English stemming.

use rust_stemmers::{Algorithm, Stemmer};

/// Words that carry no meaning for search, sorted (binary-searched).
const STOP_WORDS: &[&str] = &[
    "a", "about", "all", "an", "and", "any", "are", "as", "at", "be", "been", "but", "by", "can",
    "could", "do", "does", "e", "eg", "for", "from", "g", "get", "give", "gives", "has", "have",
    "how", "i", "if", "in", "into", "is", "it", "its", "just", "let", "me", "my", "need", "of",
    "on", "one", "or", "our", "please", "should", "so", "some", "than", "that", "the", "their",
    "them", "then", "there", "these", "this", "those", "to", "too", "use", "using", "via", "want",
    "was", "we", "what", "when", "where", "which", "while", "who", "will", "with", "would", "you",
    "your",
];

fn is_stop_word(word: &str) -> bool {
    STOP_WORDS.binary_search(&word).is_ok()
}

/// Calls `emit` with every lower-cased word of `text`, identifiers split on `_`, on
/// camelCase (`wordCount`) and on acronym boundaries (`HTTPRequest` → http, request).
pub fn for_each_word(text: &str, mut emit: impl FnMut(&str)) {
    let mut lower = String::new();
    for run in text.split(|c: char| !c.is_alphanumeric()) {
        if run.is_empty() {
            continue;
        }
        let chars: Vec<(usize, char)> = run.char_indices().collect();
        let mut start = 0;
        for i in 1..chars.len() {
            let (prev, cur) = (chars[i - 1].1, chars[i].1);
            let next_lower = chars.get(i + 1).is_some_and(|(_, c)| c.is_lowercase());
            let boundary = cur.is_uppercase()
                && (prev.is_lowercase()
                    || prev.is_ascii_digit()
                    || (prev.is_uppercase() && next_lower));
            if boundary {
                lower.clear();
                lower.extend(run[start..chars[i].0].chars().flat_map(char::to_lowercase));
                emit(&lower);
                start = chars[i].0;
            }
        }
        lower.clear();
        lower.extend(run[start..].chars().flat_map(char::to_lowercase));
        emit(&lower);
    }
}

/// The tokenizer shared by indexing and querying.
pub struct Tokenizer {
    stemmer: Stemmer,
}

impl Default for Tokenizer {
    fn default() -> Self {
        Tokenizer::new()
    }
}

impl Tokenizer {
    /// An English tokenizer.
    pub fn new() -> Self {
        Tokenizer {
            stemmer: Stemmer::create(Algorithm::English),
        }
    }

    /// The stem of one lower-cased word.
    pub fn stem(&self, word: &str) -> String {
        self.stemmer.stem(word).into_owned()
    }

    /// Calls `emit(word, stem)` for every non-stop word of `text`.
    pub fn for_each_term(&self, text: &str, mut emit: impl FnMut(&str, String)) {
        for_each_word(text, |word| {
            if !is_stop_word(word) {
                emit(word, self.stem(word));
            }
        });
    }

    /// The stems of `text`, in order, stop words removed.
    pub fn terms(&self, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        self.for_each_term(text, |_, stem| out.push(stem));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_words_are_sorted() {
        assert!(STOP_WORDS.windows(2).all(|w| w[0] < w[1]));
    }

    fn words(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        for_each_word(text, |w| out.push(w.to_string()));
        out
    }

    #[test]
    fn identifiers_are_split() {
        assert_eq!(words("word_count"), ["word", "count"]);
        assert_eq!(words("wordCount"), ["word", "count"]);
        assert_eq!(words("HTTPRequest x2Go"), ["http", "request", "x2", "go"]);
        assert_eq!(
            words("chunk_by_lines(text, n)"),
            ["chunk", "by", "lines", "text", "n"]
        );
    }

    #[test]
    fn terms_are_stemmed_without_stop_words() {
        let t = Tokenizer::new();
        assert_eq!(
            t.terms("Counts the words of a text"),
            ["count", "word", "text"]
        );
        assert_eq!(t.terms("splitting lines"), ["split", "line"]);
    }
}
