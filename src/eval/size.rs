//! Context sizes in tokens (`8k`, `128k`, `1m`), and fitting generated text to one.
//!
//! A generator produces its context as a stream of lines from its seed; [`fit_lines`]
//! takes the shortest prefix of that stream whose exact `o200k_base` count is within
//! [`SIZE_TOLERANCE`] of the size asked. The tokenizer runs on the whole text a few
//! times, never per line, so a million tokens take well under a second.

use std::fmt;

use crate::tokens;

/// How far a generated context may be from the size asked, as a fraction (the issue
/// asks for 2%; fitting aims at half of it to leave room for the needles and events
/// inserted afterwards).
pub const SIZE_TOLERANCE: f64 = 0.02;

/// The largest size accepted (a little over 100M tokens): beyond it a context would not
/// fit in memory comfortably.
pub const MAX_SIZE: u64 = 100_000_000;

/// A context size in tokens, written `8k`, `128k`, `1m` or a plain number.
///
/// ```
/// use rlm_registry::eval::Size;
///
/// let size: Size = "128k".parse()?;
/// assert_eq!(size.tokens(), 128_000);
/// assert_eq!(size.to_string(), "128k");
/// assert_eq!("1m".parse::<Size>()?.tokens(), 1_000_000);
/// assert!("12q".parse::<Size>().is_err());
/// # Ok::<(), rlm_registry::eval::SizeError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Size(u64);

impl Size {
    /// A size of `tokens` tokens.
    pub fn new(tokens: u64) -> Size {
        Size(tokens)
    }

    /// The number of tokens.
    pub fn tokens(self) -> u64 {
        self.0
    }
}

/// A size that could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SizeError {
    /// What was given.
    pub input: String,
}

impl fmt::Display for SizeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid size `{}`: expected a number of tokens such as 8000, 8k, 128k or 1m (at least 1k, at most 100m)",
            self.input
        )
    }
}

impl std::error::Error for SizeError {}

impl std::str::FromStr for Size {
    type Err = SizeError;

    fn from_str(input: &str) -> Result<Size, SizeError> {
        let error = || SizeError {
            input: input.to_string(),
        };
        let tokens = tokens::parse_count(input).ok_or_else(error)?;
        if !(1_000..=MAX_SIZE).contains(&tokens) {
            return Err(error());
        }
        Ok(Size(tokens))
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0;
        if n >= 1_000_000 && n.is_multiple_of(1_000_000) {
            write!(f, "{}m", n / 1_000_000)
        } else if n >= 1_000 && n.is_multiple_of(1_000) {
            write!(f, "{}k", n / 1_000)
        } else {
            write!(f, "{n}")
        }
    }
}

/// Parses a comma-separated list of sizes (`8k,128k,1m`).
pub fn parse_sizes(list: &str) -> Result<Vec<Size>, SizeError> {
    list.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(str::parse)
        .collect()
}

/// Takes lines from `next` (each ending in `\n`; at least one) until their concatenation has
/// `target` tokens, within half of [`SIZE_TOLERANCE`] when the lines are small enough
/// to allow it. The lines are a prefix of the stream: asking again with the same
/// stream and target gives the same lines.
pub fn fit_lines<T>(
    target: usize,
    mut next: impl FnMut() -> T,
    text: impl Fn(&T) -> &str,
) -> Vec<T> {
    let mut items: Vec<T> = Vec::new();
    // Lines taken back, reused first when growing again, so the result is a prefix.
    let mut spare: Vec<T> = Vec::new();
    let mut bytes = 0usize;
    // English prose and logs run at 4-5 bytes per o200k token; corrected after each count.
    let mut bytes_per_token = 4.0f64;
    let slack = (target as f64 * SIZE_TOLERANCE / 2.0) as usize;
    for _ in 0..8 {
        let want = (target as f64 * bytes_per_token) as usize;
        // At least one line, whatever the target: callers index into the result.
        while bytes < want || items.is_empty() {
            let item = spare.pop().unwrap_or_else(&mut next);
            bytes += text(&item).len();
            items.push(item);
        }
        while bytes > want && items.len() > 1 {
            if let Some(item) = items.pop() {
                bytes -= text(&item).len();
                spare.push(item);
            }
        }
        let joined: String = items.iter().map(&text).collect();
        let count = tokens::count(&joined).max(1);
        if count.abs_diff(target) <= slack {
            break;
        }
        bytes_per_token = bytes as f64 / count as f64;
        if count < target && bytes == 0 {
            break;
        }
    }
    items
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_suffixes_and_reject_nonsense() {
        assert_eq!(
            parse_sizes("8k, 64k,1m").unwrap(),
            [Size(8_000), Size(64_000), Size(1_000_000)]
        );
        assert_eq!("1.5k".parse::<Size>().unwrap(), Size(1_500));
        assert_eq!("2000".parse::<Size>().unwrap().to_string(), "2k");
        for bad in ["", "k", "-8k", "0", "12q", "999", "1.0001k", "200m"] {
            assert!(bad.parse::<Size>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_zero_target_still_gets_one_line() {
        assert_eq!(fit_lines(0, || "x\n".to_string(), |s| s.as_str()).len(), 1);
    }

    #[test]
    fn fitted_lines_hit_the_target_within_the_tolerance() {
        let mut i = 0u64;
        let lines = fit_lines(
            5_000,
            || {
                i += 1;
                format!("line {i} says hello to the {} world\n", i * 7919 % 1000)
            },
            |s| s.as_str(),
        );
        let text: String = lines.concat();
        let count = tokens::count(&text);
        assert!(count.abs_diff(5_000) <= 50, "{count}");
    }
}
