//! Exact token counts with OpenAI's `o200k_base` encoding, the one the `token_*`
//! built-ins use.
//!
//! Backed by `bpe-openai` (GitHub's linear-time byte-pair encoder, vocabulary built in):
//! the same counts as tiktoken, faster (see BENCHMARKS.md). Cuts fall on token
//! boundaries, moved back to the previous character boundary when a token ends inside a
//! multi-byte character, so every piece is valid UTF-8.
//!
//! ```
//! use rlm_registry::tokens;
//!
//! assert_eq!(tokens::count("hello world"), 2);
//! assert_eq!(tokens::truncate("hello world", 1), "hello");
//! assert_eq!(tokens::split("one two three four", 2, 0), ["one two", " three four"]);
//! ```

use std::collections::HashMap;

use bpe_openai::{Tokenizer, o200k_base};

fn tokenizer() -> &'static Tokenizer {
    o200k_base()
}

/// Pieces up to this many bytes have their counts remembered within one call.
const CACHED_PIECE_BYTES: usize = 24;
/// At most this many pieces are remembered (a few MB), whatever the text.
const CACHED_PIECES: usize = 1 << 16;

/// Number of `o200k_base` tokens in `text`.
///
/// The text is pre-tokenized into pieces (words, numbers, punctuation runs, spaces) that
/// are encoded independently, and a large text repeats the same short pieces again and
/// again (Zipf's law; log lines repeat almost everything), so each short piece's count is
/// computed once per call. The sum is exactly the encoder's count.
pub fn count(text: &str) -> usize {
    let tokenizer = tokenizer();
    let text = tokenizer.normalize(text);
    let mut known: HashMap<&str, usize> = HashMap::new();
    let mut total = 0;
    for piece in tokenizer.split(text.as_str()) {
        let count = || tokenizer.bpe.count(piece.as_bytes());
        total += if piece.len() > CACHED_PIECE_BYTES {
            count()
        } else if let Some(&n) = known.get(piece) {
            n
        } else {
            let n = count();
            if known.len() < CACHED_PIECES {
                known.insert(piece, n);
            }
            n
        };
    }
    total
}

/// The longest prefix of `text` with at most `max_tokens` tokens, cut at a token
/// boundary (and a character boundary).
pub fn truncate(text: &str, max_tokens: usize) -> &str {
    let ends = token_ends(text);
    match ends.get(max_tokens.wrapping_sub(1)) {
        _ if max_tokens == 0 => "",
        Some(&end) => &text[..end],
        None => text,
    }
}

/// Splits `text` into pieces of at most `max_tokens` tokens, consecutive pieces sharing
/// `overlap` tokens. `max_tokens` must be positive and `overlap` smaller than it (the
/// caller checks: see the built-in).
pub fn split(text: &str, max_tokens: usize, overlap: usize) -> Vec<&str> {
    let ends = token_ends(text);
    let step = max_tokens.saturating_sub(overlap).max(1);
    let mut pieces = Vec::new();
    let mut first = 0;
    while first < ends.len() {
        let last = (first + max_tokens).min(ends.len());
        let start = if first == 0 { 0 } else { ends[first - 1] };
        let end = ends[last - 1];
        if end > start {
            pieces.push(&text[start..end]);
        }
        if last == ends.len() {
            break;
        }
        first += step;
    }
    pieces
}

/// Byte offset where each token ends, floored to a character boundary.
fn token_ends(text: &str) -> Vec<usize> {
    let bpe = &tokenizer().bpe;
    let mut end = 0;
    tokenizer()
        .encode(text)
        .into_iter()
        .map(|token| {
            end += bpe.token_len(token);
            floor_char_boundary(text, end.min(text.len()))
        })
        .collect()
}

fn floor_char_boundary(text: &str, mut offset: usize) -> usize {
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    offset
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembered_piece_counts_give_the_encoders_count() {
        let text = "It's 2024-05-02: ERROR,service-3 handled in 12 ms  \n\n Ünïcödé 日本語 🙂 \
                    a_very_long_identifier_that_is_longer_than_the_cache_bound /// ..."
            .repeat(500);
        assert_eq!(count(&text), tokenizer().encode(text.as_str()).len());
        assert_eq!(count(&text), tokenizer().count(text.as_str()));
        assert_eq!(count(""), 0);
    }

    #[test]
    fn pieces_cover_the_text_without_overlap() {
        let text = "The quick brown fox jumps over the lazy dog. ".repeat(20);
        let pieces = split(&text, 7, 0);
        assert_eq!(pieces.concat(), text);
        assert!(pieces.iter().all(|p| count(p) <= 7));
    }

    #[test]
    fn overlap_repeats_tokens() {
        let pieces = split("a b c d e f g h", 4, 2);
        assert!(pieces.len() >= 3, "{pieces:?}");
        assert!(pieces[1].starts_with(" c"), "{pieces:?}");
    }

    #[test]
    fn cuts_never_split_a_character() {
        let text = "日本語のテキスト🙂🙂🙂".repeat(10);
        for n in 1..12 {
            let cut = truncate(&text, n);
            assert!(text.starts_with(cut));
            for piece in split(&text, n, 0) {
                assert!(!piece.is_empty());
            }
        }
    }

    #[test]
    fn truncate_edges() {
        assert_eq!(truncate("hello world", 0), "");
        assert_eq!(truncate("hello world", 100), "hello world");
        assert_eq!(truncate("", 3), "");
    }
}
