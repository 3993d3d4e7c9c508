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

use bpe_openai::{Tokenizer, o200k_base};

fn tokenizer() -> &'static Tokenizer {
    o200k_base()
}

/// Below this many bytes per thread, a text is counted on one thread: starting a thread
/// costs more than it saves.
const BYTES_PER_THREAD: usize = 1 << 20;

/// Number of `o200k_base` tokens in `text`. A large text is counted on several threads,
/// in pieces cut where a token always ends (see [`piece_ends`]), so the count is exactly
/// the one-thread count.
pub fn count(text: &str) -> usize {
    let threads = std::thread::available_parallelism()
        .map_or(1, std::num::NonZero::get)
        .min(text.len() / BYTES_PER_THREAD);
    count_on(text, threads)
}

/// [`count`] on at most `threads` threads.
fn count_on(text: &str, threads: usize) -> usize {
    let ends = piece_ends(text, threads);
    if ends.len() < 2 {
        return tokenizer().count(text);
    }
    let starts = std::iter::once(0).chain(ends.iter().copied());
    let pieces: Vec<&str> = starts
        .zip(ends.iter())
        .map(|(start, &end)| &text[start..end])
        .collect();
    let Some((first, rest)) = pieces.split_first() else {
        return 0;
    };
    std::thread::scope(|scope| {
        let others: Vec<_> = rest
            .iter()
            .map(|&piece| {
                let spawned = std::thread::Builder::new()
                    .spawn_scoped(scope, move || tokenizer().count(piece));
                (piece, spawned)
            })
            .collect();
        let mut total = tokenizer().count(first);
        for (piece, spawned) in others {
            // A thread that could not start or did not finish: count its piece here.
            total += match spawned.map(|handle| handle.join()) {
                Ok(Ok(n)) => n,
                _ => tokenizer().count(piece),
            };
        }
        total
    })
}

/// Where to cut `text` into about `pieces` parts of similar size, the last end being
/// `text.len()`. A cut falls just after a `"\n"` followed by an ASCII letter or digit:
/// there `o200k_base`'s pre-tokenizer always ends one piece and starts the next (no
/// pattern carries a newline into a letter or digit, none starts with a newline and
/// continues into one), so the pieces' counts add up to the text's.
fn piece_ends(text: &str, pieces: usize) -> Vec<usize> {
    let bytes = text.as_bytes();
    let mut ends = Vec::new();
    let mut from = 0;
    for part in 1..pieces {
        let target = (text.len() / pieces * part).max(from);
        let cut = memchr::memchr_iter(b'\n', &bytes[target..])
            .map(|i| target + i + 1)
            .take_while(|&at| at < text.len() && at - target < BYTES_PER_THREAD)
            .find(|&at| bytes[at].is_ascii_alphanumeric());
        if let Some(cut) = cut {
            ends.push(cut);
            from = cut;
        }
    }
    ends.push(text.len());
    ends
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

    /// Text with every kind of pre-token around newlines: words, contractions, numbers,
    /// punctuation runs with `/`, spaces before newlines, blank lines, `\r\n`, non-ASCII.
    fn mixed_text(lines: usize) -> String {
        let parts = [
            "2024-05-02 ERROR,service-3 handled in 12 ms",
            "It's what they'd said",
            "  indented\tline  ",
            "path=/a/b/c.\n//x",
            "",
            "...///",
            "Ünïcödé 日本語 🙂 text",
            "x\r",
            "42 apples",
            "   ",
            "don't STOP",
        ];
        let mut text = String::new();
        for i in 0..lines {
            text.push_str(parts[i * 7 % parts.len()]);
            text.push('\n');
        }
        text
    }

    #[test]
    fn counting_in_pieces_gives_the_one_thread_count() {
        let text = mixed_text(5_000);
        let whole = tokenizer().count(&text);
        for threads in 2..9 {
            let ends = piece_ends(&text, threads);
            assert!(ends.len() > 1, "{threads}: the text was cut");
            assert_eq!(count_on(&text, threads), whole, "{threads} threads");
        }
    }

    #[test]
    fn cuts_fall_after_a_newline_before_a_letter_or_digit() {
        let text = mixed_text(2_000);
        let ends = piece_ends(&text, 4);
        assert_eq!(ends.last(), Some(&text.len()));
        for &end in &ends[..ends.len() - 1] {
            assert_eq!(text.as_bytes()[end - 1], b'\n');
            assert!(text.as_bytes()[end].is_ascii_alphanumeric());
        }
        // No place to cut: one piece.
        assert_eq!(piece_ends(&" \n".repeat(1000), 4), [2000]);
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
