//! Small text helpers of the renderers: numbers, durations, first lines.

pub(crate) use crate::text_format::{cut_chars as cut, first_line, thousands};

use super::model::Block;

/// `850` → `"850 ms"`, `2300` → `"2.3 s"`, `65000` → `"1 min 5 s"`.
pub(crate) fn duration(ms: u64) -> String {
    match ms {
        0..1_000 => format!("{ms} ms"),
        1_000..60_000 => format!("{:.1} s", ms as f64 / 1000.0),
        _ => format!("{} min {} s", ms / 60_000, (ms % 60_000) / 1000),
    }
}

/// At most `count` lines of `text`, each at most `width` characters (`…` when cut), and
/// how many lines were left out.
pub(crate) fn first_lines(text: &str, count: usize, width: usize) -> (Vec<String>, usize) {
    let all: Vec<&str> = text.trim_end_matches('\n').lines().collect();
    let shown = all
        .iter()
        .take(count)
        .map(|line| cut(line, width))
        .collect();
    (shown, all.len().saturating_sub(count))
}

/// The images a block's sub-calls sent, a line each: name, type, size and the start of
/// the hash (a trace has no bytes to show).
pub(crate) fn images_sent_lines(block: &Block) -> Vec<String> {
    block
        .sub_calls
        .iter()
        .enumerate()
        .flat_map(|(i, call)| {
            call.images.iter().map(move |image| {
                format!(
                    "image sent with sub-call {}: {} ({}, {} bytes, sha256 {})",
                    i + 1,
                    image.name,
                    image.mime,
                    thousands(image.bytes),
                    cut(&image.sha256, 12),
                )
            })
        })
        .collect()
}

/// `1 block`, `2 blocks`.
pub(crate) fn plural(n: usize, word: &str) -> String {
    format!("{n} {word}{}", if n == 1 { "" } else { "s" })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_naturally() {
        assert_eq!(duration(850), "850 ms");
        assert_eq!(duration(2_300), "2.3 s");
        assert_eq!(duration(65_000), "1 min 5 s");
    }

    #[test]
    fn first_lines_say_how_many_were_left_out() {
        let (lines, more) = first_lines("a\nbbbb\nc\n", 2, 3);
        assert_eq!(lines, ["a", "bbb…"]);
        assert_eq!(more, 1);
        assert_eq!(thousands(1_234_567), "1,234,567");
    }
}
