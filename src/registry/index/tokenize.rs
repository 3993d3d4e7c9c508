//! Text → search terms: identifier splitting (`word_count`, `wordCount` → word, count),
//! lower-casing, English stop words removed, Snowball English stemming.

use rust_stemmers::{Algorithm, Stemmer};

/// Words that carry no meaning for search, sorted (binary-searched).
pub const STOP_WORDS: &[&str] = &[
    "a", "about", "all", "an", "and", "any", "are", "as", "at", "be", "been", "but", "by", "can",
    "could", "do", "does", "e", "eg", "for", "from", "g", "get", "give", "gives", "has", "have",
    "how", "i", "if", "in", "into", "is", "it", "its", "just", "let", "me", "my", "need", "of",
    "on", "one", "or", "our", "please", "should", "so", "some", "than", "that", "the", "their",
    "them", "then", "there", "these", "this", "those", "to", "too", "use", "using", "via", "want",
    "was", "we", "what", "when", "where", "which", "while", "who", "will", "with", "would", "you",
    "your",
];

/// Whether `word` (lower-cased) is too common to search on.
pub fn is_stop_word(word: &str) -> bool {
    STOP_WORDS.binary_search(&word).is_ok()
}

/// `word` lower-cased: `word` itself when it has nothing to lower (the usual case, no
/// allocation), else written into `buffer`.
///
/// ```
/// use rlm_registry::search::tokenize::lowercase;
///
/// let mut buffer = String::new();
/// assert_eq!(lowercase("cache", &mut buffer), "cache");
/// assert_eq!(lowercase("SQLite", &mut buffer), "sqlite");
/// assert_eq!(lowercase("Éclair", &mut buffer), "éclair");
/// ```
pub fn lowercase<'w>(word: &'w str, buffer: &'w mut String) -> &'w str {
    if word
        .bytes()
        .all(|b| !b.is_ascii_uppercase() && b.is_ascii())
    {
        return word;
    }
    buffer.clear();
    buffer.extend(word.chars().flat_map(char::to_lowercase));
    buffer
}

/// Calls `emit` with every lower-cased word of `text`, identifiers split on `_`, on
/// camelCase (`wordCount`) and on acronym boundaries (`HTTPRequest` → http, request).
///
/// Runs on every query, so it allocates only for words that need lower-casing.
pub fn for_each_word(text: &str, mut emit: impl FnMut(&str)) {
    let mut lower = String::new();
    let mut emit_lower = |word: &str| emit(lowercase(word, &mut lower));
    for run in text.split(|c: char| !c.is_alphanumeric()) {
        let mut start = 0;
        let mut prev: Option<char> = None;
        let mut chars = run.char_indices().peekable();
        while let Some((at, cur)) = chars.next() {
            if let Some(prev) = prev {
                let next_lower = chars.peek().is_some_and(|(_, c)| c.is_lowercase());
                let boundary = cur.is_uppercase()
                    && (prev.is_lowercase()
                        || prev.is_ascii_digit()
                        || (prev.is_uppercase() && next_lower));
                if boundary {
                    emit_lower(&run[start..at]);
                    start = at;
                }
            }
            prev = Some(cur);
        }
        if start < run.len() {
            emit_lower(&run[start..]);
        }
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

    /// The stem of one lower-cased word, borrowed when stemming leaves it unchanged.
    pub fn stem_cow<'w>(&self, word: &'w str) -> std::borrow::Cow<'w, str> {
        self.stemmer.stem(word)
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
