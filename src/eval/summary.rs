//! `summary.md`: per method × family × size, the mean score with its 95% interval,
//! tokens, cost and time.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::results::TaskResult;

/// Prices per million tokens, for the cost column.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Prices {
    /// Per million prompt tokens.
    pub input: f64,
    /// Per million completion tokens.
    pub output: f64,
}

impl Prices {
    /// The cost of one result: what its run counted (the server's `usage.cost`, else
    /// the model's price), else its tokens at these prices.
    pub fn cost(&self, result: &TaskResult) -> f64 {
        result.cost.unwrap_or_else(|| {
            (result.prompt_tokens() as f64 * self.input
                + result.completion_tokens() as f64 * self.output)
                / 1e6
        })
    }
}

/// One row of the summary: the results of one method on one family at one size.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// The method.
    pub method: String,
    /// The family.
    pub family: String,
    /// The size asked (`None` for a user's tasks).
    pub size: Option<u64>,
    /// Results in the row.
    pub n: usize,
    /// Mean score.
    pub mean: f64,
    /// Half-width of the 95% interval of the mean (normal approximation, 1.96 standard
    /// errors; 0 for a single result).
    pub half_width: f64,
    /// Mean tokens per task.
    pub tokens: f64,
    /// Total cost.
    pub cost: f64,
    /// Mean wall time per task, in seconds.
    pub seconds: f64,
    /// Results with an error.
    pub errors: usize,
}

/// The rows, ordered by family, size, then method.
pub fn rows(results: &[TaskResult], prices: Prices) -> Vec<Row> {
    let mut groups: BTreeMap<(String, Option<u64>, String), Vec<&TaskResult>> = BTreeMap::new();
    for result in results {
        groups
            .entry((result.family.clone(), result.size, result.method.clone()))
            .or_default()
            .push(result);
    }
    groups
        .into_iter()
        .map(|((family, size, method), group)| {
            let n = group.len();
            let scores: Vec<f64> = group.iter().map(|r| r.score).collect();
            let (mean, half_width) = mean_interval(&scores);
            Row {
                method,
                family,
                size,
                n,
                mean,
                half_width,
                tokens: group
                    .iter()
                    .map(|r| (r.prompt_tokens() + r.completion_tokens()) as f64)
                    .sum::<f64>()
                    / n as f64,
                cost: group.iter().map(|r| prices.cost(r)).sum(),
                seconds: group.iter().map(|r| r.seconds).sum::<f64>() / n as f64,
                errors: group.iter().filter(|r| r.error.is_some()).count(),
            }
        })
        .collect()
}

/// The mean and the half-width of its 95% interval (1.96 × the standard error with
/// the sample standard deviation).
///
/// ```
/// use rlm_registry::eval::mean_interval;
///
/// let (mean, half) = mean_interval(&[1.0, 0.0, 1.0, 0.0]);
/// assert_eq!(mean, 0.5);
/// assert!((half - 1.96 * (1.0f64 / 3.0).sqrt() / 2.0).abs() < 1e-12);
/// ```
pub fn mean_interval(values: &[f64]) -> (f64, f64) {
    let n = values.len();
    if n == 0 {
        return (0.0, 0.0);
    }
    let mean = values.iter().sum::<f64>() / n as f64;
    if n == 1 {
        return (mean, 0.0);
    }
    let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    (mean, 1.96 * (variance / n as f64).sqrt())
}

/// A size as written on the command line (`8k`), `-` for none.
pub fn size_label(size: Option<u64>) -> String {
    size.map_or_else(
        || "-".to_string(),
        |s| super::size::Size::new(s).to_string(),
    )
}

/// The Markdown summary.
pub fn summary_markdown(results: &[TaskResult], prices: Prices) -> String {
    let mut out = String::from("# Evaluation summary\n\n");
    let _ = writeln!(
        out,
        "{} results. Score: mean over tasks, ± the half-width of its 95% interval. Tokens and time: mean per task. Cost: total, at {} in / {} out per million tokens.\n",
        results.len(),
        prices.input,
        prices.output
    );
    out.push_str("| family | size | method | n | score | tokens | cost | time (s) | errors |\n");
    out.push_str("|---|---|---|---:|---|---:|---:|---:|---:|\n");
    for row in rows(results, prices) {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {:.3} ± {:.3} | {:.0} | {:.4} | {:.1} | {} |",
            row.family,
            size_label(row.size),
            row.method,
            row.n,
            row.mean,
            row.half_width,
            row.tokens,
            row.cost,
            row.seconds,
            row.errors
        );
    }
    let cached_calls: u64 = results.iter().map(|r| r.cached_calls).sum();
    if cached_calls > 0 {
        let saved: u64 = results.iter().map(|r| r.cached_tokens).sum();
        let waited: u64 = results.iter().map(|r| r.waited_calls).sum();
        // Answers another worker was sending when this one asked: hits it waited for.
        let waits = match waited {
            0 => String::new(),
            1 => " (1 of them waited for another worker's identical call)".to_string(),
            n => format!(" ({n} of them waited for another worker's identical call)"),
        };
        let _ = writeln!(
            out,
            "\nCall cache: {cached_calls} calls answered from the cache{waits}, {saved} tokens saved (not sent, and not in the tokens and cost above)."
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::results::DepthTokens;

    fn result(method: &str, score: f64, error: bool) -> TaskResult {
        TaskResult {
            id: format!("{method}{score}"),
            family: "niah".into(),
            size: Some(8_000),
            method: method.into(),
            score,
            answer: None,
            expected: "1".into(),
            turns: 1,
            tokens: vec![DepthTokens {
                prompt: 1_000_000,
                completion: 100_000,
            }],
            model_calls: 1,
            cached_calls: 0,
            cached_tokens: 0,
            waited_calls: 0,
            cost: None,
            seconds: 2.0,
            error: error.then(|| "boom".into()),
            trace: None,
        }
    }

    #[test]
    fn the_summary_has_a_row_per_method_family_and_size_with_costs() {
        let results = [
            result("rlm", 1.0, false),
            result("rlm", 0.0, true),
            result("direct", 1.0, false),
        ];
        let text = summary_markdown(
            &results,
            Prices {
                input: 0.15,
                output: 0.6,
            },
        );
        assert!(
            text.contains(
                "| niah | 8k | direct | 1 | 1.000 ± 0.000 | 1100000 | 0.2100 | 2.0 | 0 |"
            ),
            "{text}"
        );
        assert!(
            text.contains("| niah | 8k | rlm | 2 | 0.500 ± 0.980 | 1100000 | 0.4200 | 2.0 | 1 |"),
            "{text}"
        );
    }

    #[test]
    fn the_summary_counts_cache_hits_and_single_flight_waits() {
        let mut hit = result("rlm", 1.0, false);
        hit.cached_calls = 3;
        hit.cached_tokens = 300;
        let mut waited = result("rlm", 1.0, false);
        waited.cached_calls = 2;
        waited.cached_tokens = 200;
        waited.waited_calls = 2;
        let prices = Prices {
            input: 0.0,
            output: 0.0,
        };
        let text = summary_markdown(&[hit.clone(), waited], prices);
        assert!(
            text.contains("Call cache: 5 calls answered from the cache (2 of them waited for another worker's identical call), 500 tokens saved"),
            "{text}"
        );
        let text = summary_markdown(&[hit], prices);
        assert!(
            text.contains("Call cache: 3 calls answered from the cache, 300 tokens saved"),
            "no waits, no word of them: {text}"
        );
    }
}
