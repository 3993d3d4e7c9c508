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

use std::collections::{HashMap, VecDeque};

use bpe_openai::{Tokenizer, o200k_base};

fn tokenizer() -> &'static Tokenizer {
    o200k_base()
}

/// Pieces up to this many bytes have their counts remembered within one call.
const CACHED_PIECE_BYTES: usize = 24;
/// At most this many pieces are remembered (a few MB), whatever the text.
const CACHED_PIECES: usize = 1 << 16;

/// A number of tokens as a person writes it: `8k` (8,000), `1.5m` (1,500,000), `32768`;
/// `None` when it is not a whole number of tokens. `rlm eval`'s sizes and every context
/// window read numbers this way.
///
/// ```
/// use rlm_registry::tokens;
///
/// assert_eq!(tokens::parse_count("8k"), Some(8_000));
/// assert_eq!(tokens::parse_count("1.5M"), Some(1_500_000));
/// assert_eq!(tokens::parse_count("0.5"), None);
/// ```
pub fn parse_count(text: &str) -> Option<u64> {
    let text = text.trim().to_ascii_lowercase();
    let (digits, scale) = match text.strip_suffix('k') {
        Some(digits) => (digits, 1_000.0),
        None => match text.strip_suffix('m') {
            Some(digits) => (digits, 1_000_000.0),
            None => (text.as_str(), 1.0),
        },
    };
    let value = digits.parse::<f64>().ok()? * scale;
    (value.is_finite() && value >= 0.0 && value.fract() == 0.0 && value <= u64::MAX as f64)
        .then_some(value as u64)
}

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

/// Tokens a chat format adds around each message (its role and delimiters), and once
/// for the reply's start: OpenAI's published estimate for its chat models.
pub const PER_MESSAGE_TOKENS: usize = 4;
/// See [`PER_MESSAGE_TOKENS`].
pub const PER_REPLY_TOKENS: usize = 3;

/// The `o200k_base` tokens of a chat request whose messages have these texts: each
/// counted, plus the chat format's overhead ([`PER_MESSAGE_TOKENS`] a message,
/// [`PER_REPLY_TOKENS`] once). Exact for OpenAI's o200k models; other models' tokenizers
/// count the same text differently (often 10-30% more for small vocabularies), so a
/// window check on this count keeps a margin.
///
/// ```
/// use rlm_registry::tokens;
/// assert_eq!(tokens::count_chat(["hello world"]), 2 + 4 + 3);
/// assert_eq!(tokens::count_chat(Vec::<&str>::new()), 3);
/// ```
pub fn count_chat<'a>(texts: impl IntoIterator<Item = &'a str>) -> usize {
    texts
        .into_iter()
        .map(|text| count(text) + PER_MESSAGE_TOKENS)
        .sum::<usize>()
        + PER_REPLY_TOKENS
}

/// The longest prefix of `text` with at most `max_tokens` tokens, cut at a token
/// boundary (and a character boundary). Only the prefix is encoded.
pub fn truncate(text: &str, max_tokens: usize) -> &str {
    if max_tokens == 0 {
        return "";
    }
    match token_ends(text).nth(max_tokens - 1) {
        Some(end) => &text[..end],
        None => text,
    }
}

/// Splits `text` into pieces of at most `max_tokens` tokens, consecutive pieces sharing
/// `overlap` tokens. `max_tokens` must be positive and `overlap` smaller than it (the
/// caller checks: see the built-in).
pub fn split(text: &str, max_tokens: usize, overlap: usize) -> Vec<&str> {
    let mut pieces = Vec::new();
    let kept: Result<(), std::convert::Infallible> =
        split_each(text, max_tokens, overlap, |piece| {
            pieces.push(piece);
            Ok(())
        });
    let Ok(()) = kept;
    pieces
}

/// [`split`], handing each piece to `each` as soon as its last token is read, and
/// stopping at its first error: nothing is held for the whole text but the pieces'
/// starts still open, so a caller that keeps the pieces elsewhere (in Lua, under its
/// memory limit) is stopped by that limit.
///
/// ```
/// let mut lengths = Vec::new();
/// let done: Result<(), String> = rlm_registry::tokens::split_each("one two three four", 2, 0, |piece| {
///     lengths.push(piece.len());
///     Ok(())
/// });
/// assert_eq!((done, lengths), (Ok(()), vec![7, 11]));
/// ```
pub fn split_each<'t, E>(
    text: &'t str,
    max_tokens: usize,
    overlap: usize,
    mut each: impl FnMut(&'t str) -> Result<(), E>,
) -> Result<(), E> {
    let max_tokens = max_tokens.max(1);
    let step = max_tokens.saturating_sub(overlap).max(1);
    // The pieces begun and not yet ended: their first token and where they start.
    let mut open: VecDeque<(usize, usize)> = VecDeque::new();
    let (mut previous_end, mut ended_last) = (0, false);
    for (token, end) in token_ends(text).enumerate() {
        if token % step == 0 {
            open.push_back((token, previous_end));
        }
        ended_last = false;
        while let Some(&(first, start)) = open.front()
            && token + 1 - first == max_tokens
        {
            open.pop_front();
            if end > start {
                each(&text[start..end])?;
            }
            ended_last = true;
        }
        previous_end = end;
    }
    // The last piece runs to the end, unless one already ended there.
    match open.front() {
        Some(&(_, start)) if !ended_last && previous_end > start => {
            each(&text[start..previous_end])
        }
        _ => Ok(()),
    }
}

/// Byte offset where each token ends, floored to a character boundary, token by token:
/// the text is encoded one pre-tokenized piece at a time, as the encoder does.
fn token_ends(text: &str) -> impl Iterator<Item = usize> + '_ {
    let tokenizer = tokenizer();
    let mut end = 0;
    tokenizer
        .split(text)
        .flat_map(|piece| tokenizer.bpe.encode_via_backtracking(piece.as_bytes()))
        .map(move |token| {
            end += tokenizer.bpe.token_len(token);
            floor_char_boundary(text, end.min(text.len()))
        })
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

    /// The pieces as windows over every token's end, all of them held at once.
    fn split_by_windows(text: &str, max_tokens: usize, overlap: usize) -> Vec<&str> {
        let ends: Vec<usize> = token_ends(text).collect();
        let step = max_tokens.saturating_sub(overlap).max(1);
        let (mut pieces, mut first) = (Vec::new(), 0);
        while first < ends.len() {
            let last = (first + max_tokens).min(ends.len());
            let start = if first == 0 { 0 } else { ends[first - 1] };
            if ends[last - 1] > start {
                pieces.push(&text[start..ends[last - 1]]);
            }
            if last == ends.len() {
                break;
            }
            first += step;
        }
        pieces
    }

    #[test]
    fn streamed_pieces_are_the_windows_over_all_tokens() {
        let text = "It's 2024-05-02: ERROR, handled in 12 ms\n\n Ünïcödé 日本語 🙂 ok".repeat(7);
        let tokens = token_ends(&text).count();
        for max_tokens in [1, 2, 3, 5, 8, 13, tokens - 1, tokens, tokens + 1] {
            for overlap in [0, 1, 2, max_tokens / 2, max_tokens - 1] {
                if overlap >= max_tokens {
                    continue;
                }
                assert_eq!(
                    split(&text, max_tokens, overlap),
                    split_by_windows(&text, max_tokens, overlap),
                    "max_tokens {max_tokens}, overlap {overlap}"
                );
            }
        }
        assert!(split("", 3, 1).is_empty());
    }

    #[test]
    fn split_each_stops_at_the_first_error() {
        let mut seen = 0;
        let stopped = split_each("a b c d e f", 1, 0, |_| {
            seen += 1;
            if seen == 2 { Err("full") } else { Ok(()) }
        });
        assert_eq!((stopped, seen), (Err("full"), 2));
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
