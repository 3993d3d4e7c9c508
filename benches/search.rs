//! Registry search vs SQLite FTS5 in one run: the same 1,020 generated functions, the
//! same four columns and weights (`bm25(fts, 10, 5, 3, 2)`), the same labelled
//! paraphrased queries. Prints P50 / P99 per query and recall@5 side by side, for both
//! of our entry points: `search_hits` (the ranking, as FTS5 returns it) and `search`
//! (each result explained with signals and a match reason).
//!
//! `cargo bench --bench search`

#[path = "../tests/it/support/corpus.rs"]
mod corpus;

use std::time::{Duration, Instant};

use rlm_registry::Registry;
use rlm_registry::search::{FunctionSearch, SearchOptions, field_texts, search_hits};
use rusqlite::Connection;

const ROUNDS: usize = 20;

fn percentile(times: &mut [Duration], p: f64) -> Duration {
    times.sort();
    times[((times.len() - 1) as f64 * p).round() as usize]
}

fn fts_query(query: &str) -> String {
    query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| format!("\"{w}\""))
        .collect::<Vec<_>>()
        .join(" OR ")
}

fn main() {
    let generated = corpus::corpus();
    let registry =
        Registry::from_map(generated.iter().map(|g| (g.name.clone(), g.source.clone()))).unwrap();
    let labelled = corpus::labelled(&generated);
    let options = SearchOptions::default();

    let db = Connection::open_in_memory().unwrap();
    db.execute_batch(
        "CREATE VIRTUAL TABLE fts USING fts5(name, description, capabilities, keywords, tokenize='porter unicode61');",
    )
    .unwrap();
    {
        let mut insert = db
            .prepare("INSERT INTO fts(name, description, capabilities, keywords) VALUES (?1, ?2, ?3, ?4)")
            .unwrap();
        for f in registry.functions() {
            let [name, description, caps, keywords] = field_texts(f, &registry.capabilities_of(f));
            insert.execute([name, description, caps, keywords]).unwrap();
        }
    }
    let mut select = db
        .prepare("SELECT name FROM fts WHERE fts MATCH ?1 ORDER BY bm25(fts, 10.0, 5.0, 3.0, 2.0) LIMIT 5")
        .unwrap();
    let fts = |q: &str, select: &mut rusqlite::Statement<'_>| -> Vec<String> {
        select
            .query_map([fts_query(q)], |row| row.get::<_, String>(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };

    let (mut ours_hits, mut fts_hits) = (0, 0);
    for (query, expected) in &labelled {
        let ours: Vec<String> = registry
            .search(query, &options)
            .into_iter()
            .map(|r| r.name)
            .collect();
        ours_hits += usize::from(ours.contains(expected));
        fts_hits += usize::from(fts(query, &mut select).contains(expected));
    }

    let (mut hits_times, mut ours_times, mut fts_times) = (Vec::new(), Vec::new(), Vec::new());
    // Each round runs every query on one engine, then on the next: all in this process,
    // none always measured right after another has flushed its caches.
    // `cargo test --benches` runs this without `--bench`: one round, as a smoke run.
    let rounds = if std::env::args().any(|arg| arg == "--bench") {
        ROUNDS
    } else {
        1
    };
    for _ in 0..rounds {
        for (query, _) in &labelled {
            let start = Instant::now();
            std::hint::black_box(search_hits(
                &registry,
                std::hint::black_box(query),
                &options,
            ));
            hits_times.push(start.elapsed());
        }
        for (query, _) in &labelled {
            let start = Instant::now();
            std::hint::black_box(registry.search(std::hint::black_box(query), &options));
            ours_times.push(start.elapsed());
        }
        for (query, _) in &labelled {
            let start = Instant::now();
            std::hint::black_box(fts(query, &mut select));
            fts_times.push(start.elapsed());
        }
    }
    let n = labelled.len();
    let fts_p50 = percentile(&mut fts_times, 0.5);
    println!(
        "corpus: {} functions, {} labelled paraphrased queries, {} timed searches per engine",
        registry.len(),
        n,
        ours_times.len()
    );
    println!("engine                     P50        P99   speed-up  recall@5");
    let row = |engine: &str, times: &mut Vec<Duration>, hits: usize| {
        let p50 = percentile(times, 0.5);
        println!(
            "{engine:<24} {:>8.2?}  {:>8.2?}  {:>7.0}x  {}/{} ({:.1}%)",
            p50,
            percentile(times, 0.99),
            fts_p50.as_secs_f64() / p50.as_secs_f64(),
            hits,
            n,
            100.0 * hits as f64 / n as f64
        );
    };
    row("rlm-registry search_hits", &mut hits_times, ours_hits);
    row("rlm-registry search", &mut ours_times, ours_hits);
    row("sqlite fts5", &mut fts_times, fts_hits);
    println!(
        "targets: P50 <= 10 us, >= 100x FTS5, recall@5 >= FTS5 (here {})",
        if ours_hits >= fts_hits {
            "met"
        } else {
            "NOT met"
        }
    );
}
