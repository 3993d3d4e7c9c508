//! The library across a corpus, side by side in one run:
//!
//! - `grep(context, word, 0, true)` over 1,000 documents (100 MB in all, or
//!   `RLM_BENCH_CORPUS_MB`) against the Python a model writes over a list of strings,
//!   `[(n, i, l) for n, t in docs for i, l in enumerate(t.splitlines()) if p in l]`, run
//!   by `python3` on the same documents (read before its clock starts);
//! - `doc_search` over 10,000 documents (50 MB, or `RLM_BENCH_SEARCH_MB`): the first
//!   call, which builds the index (its throughput is the corpus's bytes over that
//!   call's time), then the median and worst of 100 queries on the kept index.
//!
//! Times are wall-clock, the best of `RLM_BENCH_REPS` runs (default 3).
//!
//! Run: `cargo bench --bench corpus_library` (`RLM_BENCH_CORPUS_MB=10` for a quick run).

mod common;

use std::io::Write as _;
use std::time::{Duration, Instant};

use rlm_registry::corpus::{Corpus, Document};
use rlm_registry::environment::Environment;
use rlm_registry::rlm::Context;

/// What `grep` looks for: in about one line in a thousand.
const NEEDLE: &str = "timeout";

/// `documents` documents of about `bytes` bytes in all: lines of words drawn from a
/// vocabulary with a long tail, as prose and logs have, [`NEEDLE`] in about one line in a
/// thousand.
fn generate(documents: usize, bytes: usize) -> Vec<(String, String)> {
    let mut next = common::generator();
    let vocabulary: Vec<String> = (0..20_000)
        .map(|i| {
            let syllables = ["ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "ze", "po"];
            let mut word = String::new();
            let mut n = i + 1;
            while n > 0 {
                word.push_str(syllables[n % syllables.len()]);
                n /= syllables.len();
            }
            word
        })
        .collect();
    let per_document = bytes / documents.max(1);
    (0..documents)
        .map(|d| {
            let mut text = String::with_capacity(per_document + 100);
            while text.len() < per_document {
                let words = 6 + next(10);
                for w in 0..words {
                    // Squared draws: a few words are common, most are rare.
                    let r = next(1_000) * next(1_000) / 1_000;
                    let word = if next(10_000) < 1 {
                        NEEDLE
                    } else {
                        vocabulary[(r * vocabulary.len() as u64 / 1_000) as usize].as_str()
                    };
                    if w > 0 {
                        text.push(' ');
                    }
                    text.push_str(word);
                }
                text.push('\n');
            }
            (format!("docs/{d:04}.txt"), text)
        })
        .collect()
}

/// A sandbox whose `context` is the documents, as `--context DIR` gives them.
fn sandbox_with(documents: &[(String, String)]) -> Environment {
    let env = common::sandbox("");
    let corpus = Corpus {
        documents: documents
            .iter()
            .map(|(name, text)| Document::text(name.as_str(), text.as_str()))
            .collect(),
        skipped: 0,
    };
    Context::Corpus(corpus).load_into(&env).expect("corpus");
    env
}

/// The best time of `reps` runs of `code`, and its output.
fn best(env: &Environment, code: &str, reps: usize) -> (Duration, String) {
    let mut best = Duration::MAX;
    let mut output = String::new();
    for _ in 0..reps {
        let start = Instant::now();
        output = env.execute(code).expect("runs").output;
        best = best.min(start.elapsed());
    }
    (best, output)
}

const PYTHON_GREP: &str = r#"
import sys, time
raw = open(sys.argv[1], encoding="utf-8").read().split("\x00")
docs = list(zip(raw[0::2], raw[1::2]))
p = sys.argv[2]
best = None
for _ in range(int(sys.argv[3])):
    start = time.perf_counter()
    hits = [(n, i, l) for n, t in docs for i, l in enumerate(t.splitlines()) if p in l]
    elapsed = time.perf_counter() - start
    best = elapsed if best is None else min(best, elapsed)
print(best, len(hits))
"#;

/// Python's time and hit count over the same documents, `None` without `python3`.
fn python_grep(documents: &[(String, String)], reps: usize) -> Option<(Duration, usize)> {
    let mut file = tempfile()?;
    for (name, text) in documents {
        write!(file.1, "{name}\x00{text}\x00").ok()?;
    }
    file.1.flush().ok()?;
    let out = common::python(
        PYTHON_GREP,
        &[
            file.0.as_os_str(),
            NEEDLE.as_ref(),
            reps.to_string().as_ref(),
        ],
    )?;
    let _ = std::fs::remove_file(&file.0);
    let mut words = out.split_whitespace();
    let seconds: f64 = words.next()?.parse().ok()?;
    let hits: usize = words.next()?.parse().ok()?;
    Some((Duration::from_secs_f64(seconds), hits))
}

fn tempfile() -> Option<(std::path::PathBuf, std::io::BufWriter<std::fs::File>)> {
    let path = std::env::temp_dir().join(format!("rlm-bench-corpus-{}.txt", std::process::id()));
    let file = std::fs::File::create(&path).ok()?;
    Some((path, std::io::BufWriter::new(file)))
}

fn mb_per_s(bytes: usize, time: Duration) -> f64 {
    bytes as f64 / 1e6 / time.as_secs_f64()
}

fn bench_grep(reps: usize, smoke: bool) {
    let mb = if smoke {
        1
    } else {
        common::setting("RLM_BENCH_CORPUS_MB", 100)
    };
    let documents = generate(1_000, mb << 20);
    let bytes: usize = documents.iter().map(|(_, t)| t.len()).sum();
    let env = sandbox_with(&documents);
    let code = format!("print(#grep(context, '{NEEDLE}', 0, true))");
    let (ours, hits) = best(&env, &code, reps);
    println!(
        "grep over 1,000 documents, {:.0} MB: ours {:.1} ms ({} hits)",
        bytes as f64 / 1e6,
        ours.as_secs_f64() * 1e3,
        hits.trim()
    );
    match python_grep(&documents, reps) {
        Some((python, python_hits)) => println!(
            "  Python list comprehension {:.1} ms ({python_hits} hits): ours {:.1}× faster",
            python.as_secs_f64() * 1e3,
            python.as_secs_f64() / ours.as_secs_f64()
        ),
        None => println!("  Python: not measured (no python3)"),
    }
}

fn bench_doc_search(reps: usize, smoke: bool) {
    let mb = if smoke {
        1
    } else {
        common::setting("RLM_BENCH_SEARCH_MB", 50)
    };
    let documents = generate(10_000, mb << 20);
    let bytes: usize = documents.iter().map(|(_, t)| t.len()).sum();
    let mut build = Duration::MAX;
    let mut env = None;
    for _ in 0..reps {
        // A fresh sandbox each time: the first call builds the index.
        let fresh = sandbox_with(&documents);
        let start = Instant::now();
        fresh.execute("doc_search('kaka')").expect("first call");
        build = build.min(start.elapsed());
        env = Some(fresh);
    }
    let Some(env) = env else { return };
    let mut times = Vec::new();
    let words = [
        "kalo",
        "timeout mine",
        "rusa tovi zepo",
        "lo ka",
        "mi ne ru sa",
    ];
    for i in 0..100 {
        let code = format!("doc_search('{}', 10)", words[i % words.len()]);
        let start = Instant::now();
        env.execute(&code).expect("query");
        times.push(start.elapsed());
    }
    times.sort();
    println!(
        "doc_search over 10,000 documents, {:.0} MB: first call (index built) {:.0} ms = {:.0} MB/s; query median {:.2} ms, worst {:.2} ms",
        bytes as f64 / 1e6,
        build.as_secs_f64() * 1e3,
        mb_per_s(bytes, build),
        times[times.len() / 2].as_secs_f64() * 1e3,
        times[times.len() - 1].as_secs_f64() * 1e3,
    );
}

fn main() {
    // `cargo test --benches` runs this without `--bench`: a small smoke run.
    let smoke = !std::env::args().any(|a| a == "--bench");
    let reps = if smoke {
        1
    } else {
        common::setting("RLM_BENCH_REPS", 3)
    };
    bench_grep(reps, smoke);
    bench_doc_search(reps, smoke);
}
