//! Small text helpers of the renderers: numbers, durations, first lines.

pub(crate) use crate::text_format::{cut_chars as cut, first_line, thousands};

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
