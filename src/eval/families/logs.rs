//! `logs`: a generated service log with exact answers — errors of one service in a time
//! window, the endpoint with the highest p95 latency, the first timeout after a deploy.

use super::{Generated, TaskFamily};
use crate::eval::rng::Rng;
use crate::eval::score::Scorer;
use crate::eval::size::fit_lines;

const SERVICES: [(&str, &[&str]); 6] = [
    ("auth", &["/auth/login", "/auth/logout", "/auth/token"]),
    (
        "billing",
        &["/billing/invoice", "/billing/charge", "/billing/refund"],
    ),
    ("search", &["/search/query", "/search/suggest"]),
    (
        "catalog",
        &["/catalog/items", "/catalog/prices", "/catalog/stock"],
    ),
    ("gateway", &["/gateway/health", "/gateway/route"]),
    ("notify", &["/notify/email", "/notify/sms"]),
];

const MESSAGES: &[&str] = &[
    "request served",
    "cache hit",
    "cache miss",
    "handled",
    "ok",
    "forwarded upstream",
];

/// One log line and what the questions need of it.
struct Line {
    millis: u64,
    service: usize,
    endpoint: &'static str,
    status: u16,
    latency: u64,
    text: String,
}

/// `2026-03-14T10:00:17.123Z` for `millis` after 2026-03-14T00:00:00Z (one day at most
/// wraps into the next; logs here span hours).
fn timestamp(millis: u64) -> String {
    let seconds = millis / 1000;
    let (h, m, s) = (seconds / 3600, seconds / 60 % 60, seconds % 60);
    let day = 14 + h / 24;
    format!(
        "2026-03-{day:02}T{:02}:{m:02}:{s:02}.{:03}Z",
        h % 24,
        millis % 1000
    )
}

fn stream(rng: &mut Rng) -> impl FnMut() -> Line + '_ {
    // Each endpoint's typical latency; a few are slow.
    let base: Vec<Vec<f64>> = SERVICES
        .iter()
        .map(|(_, eps)| eps.iter().map(|_| 20.0 + 180.0 * rng.unit()).collect())
        .collect();
    let mut millis = 8 * 3_600_000u64;
    move || {
        millis += rng.range(5, 400) as u64;
        let service = rng.below(SERVICES.len());
        let endpoint_index = rng.below(SERVICES[service].1.len());
        let endpoint = SERVICES[service].1[endpoint_index];
        let mut latency = base[service][endpoint_index] * (0.5 + rng.unit());
        if rng.chance(0.05) {
            latency *= 3.0 + 3.0 * rng.unit();
        }
        let roll = rng.unit();
        let (level, status, message) = if roll < 0.008 {
            latency = 30_000.0;
            ("ERROR", 504, "upstream timeout")
        } else if roll < 0.035 {
            ("ERROR", rng.pick(&[500u16, 502, 503]), "request failed")
        } else if latency > 400.0 {
            ("WARN", 200, "slow response")
        } else {
            ("INFO", 200, rng.pick(MESSAGES))
        };
        let latency = latency as u64;
        let text = format!(
            "{} {level} service={} endpoint={endpoint} status={status} latency_ms={latency} msg=\"{message}\"\n",
            timestamp(millis),
            SERVICES[service].0,
        );
        Line {
            millis,
            service,
            endpoint,
            status,
            latency,
            text,
        }
    }
}

/// The `logs` family.
pub(super) struct Logs;

impl TaskFamily for Logs {
    fn name(&self) -> &'static str {
        "logs"
    }

    fn description(&self) -> &'static str {
        "a service log: errors of a service in a time window, the endpoint with the highest p95 latency, the first timeout after a deploy; counts 0.75^|error|, the rest exact"
    }

    fn generate(&self, rng: &mut Rng, target: usize) -> Generated {
        // Room for the deploy events inserted after fitting.
        let mut lines = {
            let mut next = stream(rng);
            fit_lines(target.saturating_sub(90), &mut next, |l| l.text.as_str())
        };
        let deploys = deploy_events(rng, &mut lines);
        let asked = match rng.below(3) {
            0 => p95_question(&lines),
            1 => first_timeout_question(rng, &lines, &deploys),
            _ => None,
        }
        .unwrap_or_else(|| errors_question(rng, &lines));
        Generated {
            question: format!(
                "The context is a service log, one event per line. {}",
                asked.0
            ),
            context: lines.iter().map(|l| l.text.as_str()).collect(),
            answer: asked.1,
            scorer: asked.2,
        }
    }
}

type Asked = (String, String, Scorer);

/// Inserts three deploy events (distinct services) at random depths; returns each one's
/// (service, line index).
fn deploy_events(rng: &mut Rng, lines: &mut Vec<Line>) -> Vec<(usize, usize)> {
    let mut services: Vec<usize> = (0..SERVICES.len()).collect();
    rng.shuffle(&mut services);
    let mut deploys = Vec::new();
    for &service in &services[..3] {
        let at = 1 + rng.below(lines.len().saturating_sub(1).max(1));
        let at = at.min(lines.len());
        let millis = lines[at - 1].millis;
        let text = format!(
            "{} INFO service=deployer event=deploy target={} version=v{}.{}.{}\n",
            timestamp(millis),
            SERVICES[service].0,
            rng.range(1, 9),
            rng.range(0, 20),
            rng.range(0, 40)
        );
        lines.insert(
            at,
            Line {
                millis,
                service,
                endpoint: "",
                status: 0,
                latency: 0,
                text,
            },
        );
        for (_, index) in deploys.iter_mut() {
            if *index >= at {
                *index += 1;
            }
        }
        deploys.push((service, at));
    }
    deploys
}

fn errors_question(rng: &mut Rng, lines: &[Line]) -> Asked {
    let service = rng.below(SERVICES.len());
    let a = rng.below(lines.len());
    let b = rng.below(lines.len());
    let (from, to) = (lines[a.min(b)].millis, lines[a.max(b)].millis);
    let count = lines
        .iter()
        .filter(|l| l.status >= 500 && l.service == service && (from..=to).contains(&l.millis))
        .count();
    (
        format!(
            "How many ERROR lines did service {} log from {} to {} (both inclusive)? Answer with the number only.",
            SERVICES[service].0,
            timestamp(from),
            timestamp(to)
        ),
        count.to_string(),
        Scorer::Numeric,
    )
}

/// The nearest-rank 95th percentile.
fn p95(mut values: Vec<u64>) -> u64 {
    values.sort_unstable();
    let rank = ((values.len() as f64) * 0.95).ceil() as usize;
    values[rank.clamp(1, values.len()) - 1]
}

/// `None` when two endpoints tie.
fn p95_question(lines: &[Line]) -> Option<Asked> {
    let mut best: Vec<(u64, &str)> = SERVICES
        .iter()
        .flat_map(|(_, eps)| eps.iter())
        .filter_map(|&endpoint| {
            let latencies: Vec<u64> = lines
                .iter()
                .filter(|l| l.endpoint == endpoint)
                .map(|l| l.latency)
                .collect();
            (!latencies.is_empty()).then(|| (p95(latencies), endpoint))
        })
        .collect();
    best.sort_unstable_by(|a, b| b.cmp(a));
    if best.len() < 2 || best[0].0 == best[1].0 {
        return None;
    }
    Some((
        "Which endpoint has the highest p95 latency (the nearest-rank 95th percentile of latency_ms over all its lines)? Answer with the endpoint path only.".to_string(),
        best[0].1.to_string(),
        Scorer::Exact,
    ))
}

/// `None` when no timeout follows the chosen deploy.
fn first_timeout_question(
    rng: &mut Rng,
    lines: &[Line],
    deploys: &[(usize, usize)],
) -> Option<Asked> {
    let (service, at) = rng.pick(deploys);
    let timeout = lines[at + 1..].iter().find(|l| l.status == 504)?;
    Some((
        format!(
            "What is the timestamp of the first timeout (status=504, any service) logged after the deploy of service {}? Answer with the timestamp only, as written in the log.",
            SERVICES[service].0
        ),
        timestamp(timeout.millis),
        Scorer::Exact,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_iso_8601_with_milliseconds() {
        assert_eq!(
            timestamp(8 * 3_600_000 + 17_123),
            "2026-03-14T08:00:17.123Z"
        );
        assert_eq!(timestamp(25 * 3_600_000), "2026-03-15T01:00:00.000Z");
    }

    #[test]
    fn p95_is_nearest_rank() {
        assert_eq!(p95((1..=20).collect()), 19);
        assert_eq!(p95((1..=100).collect()), 95);
        assert_eq!(p95(vec![7]), 7);
    }
}
