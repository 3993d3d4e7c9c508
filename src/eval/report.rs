//! `report.html`: one self-contained page (no scripts, no network) with a plot of score
//! against context size per method (inline SVG), the summary table and a row per task
//! linking its trace.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use super::results::TaskResult;
use super::summary::{Prices, mean_interval, rows, size_label};
use crate::text_format::{cut_chars, escape_html};

const COLORS: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b",
];
/// The characters of an answer, expected answer or error a task's row shows.
const CELL_CHARS: usize = 200;
const WIDTH: f64 = 640.0;
const HEIGHT: f64 = 360.0;
const MARGIN: f64 = 50.0;

/// The plot: mean score (all families) per size, one line per method, sizes on a log
/// scale.
pub fn score_plot(results: &[TaskResult]) -> String {
    let mut by_method: BTreeMap<&str, BTreeMap<u64, Vec<f64>>> = BTreeMap::new();
    for r in results {
        if let Some(size) = r.size {
            by_method
                .entry(&r.method)
                .or_default()
                .entry(size)
                .or_default()
                .push(r.score);
        }
    }
    let sizes: BTreeSet<u64> = by_method.values().flat_map(|m| m.keys().copied()).collect();
    let mut svg = format!(
        "<svg id=\"score-plot\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{HEIGHT}\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" role=\"img\" aria-label=\"Score against context size per method\">\n"
    );
    let (left, right, top, bottom) = (MARGIN + 10.0, WIDTH - 130.0, 20.0, HEIGHT - MARGIN);
    let (Some(&min), Some(&max)) = (sizes.first(), sizes.last()) else {
        svg.push_str("<text x=\"20\" y=\"40\">No generated tasks with a size: nothing to plot.</text>\n</svg>\n");
        return svg;
    };
    let x = |size: u64| {
        if min == max {
            (left + right) / 2.0
        } else {
            let t =
                ((size as f64).ln() - (min as f64).ln()) / ((max as f64).ln() - (min as f64).ln());
            left + t * (right - left)
        }
    };
    let y = |score: f64| bottom - score.clamp(0.0, 1.0) * (bottom - top);
    let _ = writeln!(
        svg,
        "<line x1=\"{left}\" y1=\"{bottom}\" x2=\"{right}\" y2=\"{bottom}\" stroke=\"#333\"/><line x1=\"{left}\" y1=\"{top}\" x2=\"{left}\" y2=\"{bottom}\" stroke=\"#333\"/>"
    );
    for tick in [0.0, 0.25, 0.5, 0.75, 1.0] {
        let ty = y(tick);
        let _ = writeln!(
            svg,
            "<line x1=\"{left}\" y1=\"{ty}\" x2=\"{right}\" y2=\"{ty}\" stroke=\"#ddd\"/><text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"end\">{tick}</text>",
            left - 6.0,
            ty + 4.0
        );
    }
    for &size in &sizes {
        let _ = writeln!(
            svg,
            "<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\">{}</text>",
            x(size),
            bottom + 16.0,
            size_label(Some(size))
        );
    }
    let _ = writeln!(
        svg,
        "<text x=\"{}\" y=\"{}\" font-size=\"12\" text-anchor=\"middle\">context size (tokens, log scale)</text><text x=\"14\" y=\"{}\" font-size=\"12\" transform=\"rotate(-90 14 {})\" text-anchor=\"middle\">mean score</text>",
        (left + right) / 2.0,
        bottom + 36.0,
        (top + bottom) / 2.0,
        (top + bottom) / 2.0
    );
    for (i, (method, points)) in by_method.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let coords: Vec<(f64, f64)> = points
            .iter()
            .map(|(&size, scores)| (x(size), y(mean_interval(scores).0)))
            .collect();
        let path: Vec<String> = coords
            .iter()
            .map(|(px, py)| format!("{px:.1},{py:.1}"))
            .collect();
        let _ = writeln!(
            svg,
            "<polyline class=\"method-line\" data-method=\"{}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" points=\"{}\"/>",
            escape_html(method),
            path.join(" ")
        );
        for (px, py) in coords {
            let _ = writeln!(
                svg,
                "<circle cx=\"{px:.1}\" cy=\"{py:.1}\" r=\"4\" fill=\"{color}\"/>"
            );
        }
        let ly = top + 10.0 + 18.0 * i as f64;
        let _ = writeln!(
            svg,
            "<line x1=\"{}\" y1=\"{ly}\" x2=\"{}\" y2=\"{ly}\" stroke=\"{color}\" stroke-width=\"3\"/><text x=\"{}\" y=\"{}\" font-size=\"12\">{}</text>",
            right + 15.0,
            right + 35.0,
            right + 40.0,
            ly + 4.0,
            escape_html(method)
        );
    }
    svg.push_str("</svg>\n");
    svg
}

/// The whole page.
pub fn report_html(results: &[TaskResult], prices: Prices) -> String {
    let mut html = String::from(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>rlm eval report</title>\n<style>body{font-family:system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px;text-align:left}td.num{text-align:right}tr.fail td{background:#fff3f3}code{font-size:12px}</style></head><body>\n<h1>rlm eval report</h1>\n",
    );
    let _ = writeln!(
        html,
        "<p>{} results.</p>\n<h2>Score against context size</h2>",
        results.len()
    );
    html.push_str(&score_plot(results));
    html.push_str("<h2>Summary</h2>\n<table><tr><th>family</th><th>size</th><th>method</th><th>n</th><th>score (95% interval)</th><th>tokens / task</th><th>cost</th><th>time / task (s)</th><th>errors</th></tr>\n");
    for row in rows(results, prices) {
        let _ = writeln!(
            html,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{:.3} ± {:.3}</td><td class=\"num\">{:.0}</td><td class=\"num\">{:.4}</td><td class=\"num\">{:.1}</td><td class=\"num\">{}</td></tr>",
            escape_html(&row.family),
            size_label(row.size),
            escape_html(&row.method),
            row.n,
            row.mean,
            row.half_width,
            row.tokens,
            row.cost,
            row.seconds,
            row.errors
        );
    }
    html.push_str("</table>\n<h2>Tasks</h2>\n<table id=\"tasks\"><tr><th>task</th><th>method</th><th>score</th><th>answer</th><th>expected</th><th>turns</th><th>tokens</th><th>time (s)</th><th>error</th><th>trace</th></tr>\n");
    for r in results {
        let trace = r.trace.as_deref().map_or_else(String::new, |t| {
            let page = t.strip_suffix(".jsonl").map(|stem| format!("{stem}.html"));
            match page {
                Some(page) => format!(
                    "<a href=\"{}\">page</a> <a href=\"{}\">trace</a>",
                    escape_html(&page),
                    escape_html(t)
                ),
                None => format!("<a href=\"{}\">trace</a>", escape_html(t)),
            }
        });
        let _ = writeln!(
            html,
            "<tr{}><td>{}</td><td>{}</td><td class=\"num\">{:.3}</td><td><code>{}</code></td><td><code>{}</code></td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{:.1}</td><td>{}</td><td>{trace}</td></tr>",
            if r.error.is_some() {
                " class=\"fail\""
            } else {
                ""
            },
            escape_html(&r.id),
            escape_html(&r.method),
            r.score,
            escape_html(&cut_chars(r.answer.as_deref().unwrap_or(""), CELL_CHARS)),
            escape_html(&cut_chars(&r.expected, CELL_CHARS)),
            r.turns,
            r.prompt_tokens() + r.completion_tokens(),
            r.seconds,
            escape_html(&cut_chars(r.error.as_deref().unwrap_or(""), CELL_CHARS)),
        );
    }
    html.push_str("</table>\n</body></html>\n");
    html
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(method: &str, size: u64, score: f64) -> TaskResult {
        TaskResult {
            id: format!("t<{size}>"),
            family: "niah".into(),
            size: Some(size),
            method: method.into(),
            score,
            answer: Some("<b>".into()),
            expected: "1".into(),
            turns: 1,
            tokens: Vec::new(),
            model_calls: 1,
            cached_calls: 0,
            cached_tokens: 0,
            waited_calls: 0,
            cost: None,
            seconds: 1.0,
            error: None,
            trace: Some("traces/t.rlm.jsonl".into()),
        }
    }

    #[test]
    fn the_report_plots_one_line_per_method_and_escapes_answers() {
        let results = [
            result("rlm", 8_000, 1.0),
            result("rlm", 64_000, 0.5),
            result("direct", 8_000, 0.0),
        ];
        let html = report_html(&results, Prices::default());
        assert_eq!(html.matches("class=\"method-line\"").count(), 2);
        assert!(html.contains("<a href=\"traces/t.rlm.jsonl\">trace</a>"));
        assert!(html.contains("<a href=\"traces/t.rlm.html\">page</a>"));
        assert!(html.contains("&lt;b&gt;") && !html.contains("<b>"));
        assert!(
            !html.contains("http://")
                || html.matches("http://").count()
                    == html.matches("xmlns=\"http://www.w3.org/2000/svg\"").count()
        );
    }
}
