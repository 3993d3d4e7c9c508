//! How the crate shows text to a reader: a text cut to a length, the first line of a
//! text, text escaped for HTML, and numbers with thousands separators.
//!
//! A leaf: it names no other module of the crate, so every layer from `search` up (the
//! prompt, the live view, the trace's renderers, the eval report, the tool calls' error
//! messages, the search modes) shows text the same way.
//!
//! The ellipsis convention: a text cut short to be read ends with `…` (U+2026) after
//! the characters kept; a text that fits comes back as it is. Cuts fall on character
//! boundaries, never inside a multi-byte character. Where a caller says how much was cut
//! (the prompt's byte counts), it takes a prefix ([`byte_prefix`], [`char_prefix`]) and
//! writes its own note instead.

/// The longest prefix of `text` of at most `max` characters.
pub(crate) fn char_prefix(text: &str, max: usize) -> &str {
    match text.char_indices().nth(max) {
        Some((end, _)) => &text[..end],
        None => text,
    }
}

/// The longest prefix of `text` of at most `max` bytes that ends on a character
/// boundary.
pub(crate) fn byte_prefix(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// `text` cut to at most `max` characters, with `…` after them when cut.
pub(crate) fn cut_chars(text: &str, max: usize) -> String {
    let kept = char_prefix(text, max);
    if kept.len() == text.len() {
        text.to_string()
    } else {
        format!("{kept}…")
    }
}

/// The first line of `text` that is not blank, trimmed; empty when there is none.
pub(crate) fn first_line(text: &str) -> &str {
    text.lines()
        .find(|line| !line.trim().is_empty())
        .unwrap_or("")
        .trim()
}

/// `text` as HTML text or as a quoted attribute's value.
pub(crate) fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `1234567` → `"1,234,567"`.
pub(crate) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_chars_keeps_max_characters_and_marks_the_cut_with_one_ellipsis() {
        assert_eq!(cut_chars("abcdef", 3), "abc…");
        assert_eq!(cut_chars("abc", 3), "abc", "a text that fits is not marked");
        assert_eq!(cut_chars("", 0), "");
        assert_eq!(cut_chars("a", 0), "…");
    }

    #[test]
    fn cuts_count_characters_not_bytes_in_multi_byte_text() {
        assert_eq!(cut_chars("ééééé", 3), "ééé…");
        assert_eq!(cut_chars("日本語のテキスト", 2), "日本…");
        assert_eq!(cut_chars("🦀🦀", 2), "🦀🦀");
        assert_eq!(char_prefix("aé🦀b", 3), "aé🦀");
        assert_eq!(char_prefix("aé", 10), "aé");
    }

    #[test]
    fn byte_prefixes_end_on_a_character_boundary() {
        assert_eq!(byte_prefix("éé", 3), "é", "byte 3 is inside the second é");
        assert_eq!(byte_prefix("éé", 4), "éé");
        assert_eq!(byte_prefix("🦀", 3), "");
        assert_eq!(byte_prefix("abc", 0), "");
        assert_eq!(byte_prefix("abc", 99), "abc");
        let text = "aé🦀日b";
        for max in 0..=text.len() {
            let prefix = byte_prefix(text, max);
            assert!(prefix.len() <= max && text.starts_with(prefix));
            assert!(prefix.len() + 4 > max, "{max}: the longest such prefix");
        }
    }

    #[test]
    fn the_first_line_skips_blank_lines_and_trims() {
        assert_eq!(first_line("\n  \n  hello world  \nmore"), "hello world");
        assert_eq!(first_line("one"), "one");
        assert_eq!(first_line(" \n\t\n"), "");
        assert_eq!(first_line(""), "");
    }

    #[test]
    fn html_escaping_covers_text_and_quoted_attributes() {
        assert_eq!(
            escape_html("<a href=\"x\">'&'</a> é"),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt; é"
        );
        assert_eq!(escape_html("plain"), "plain");
    }

    #[test]
    fn thousands_are_separated_by_commas() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(12_345_678), "12,345,678");
        assert_eq!(thousands(u64::MAX), "18,446,744,073,709,551,615");
    }
}
