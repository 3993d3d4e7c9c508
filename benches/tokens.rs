//! `token_count` against tiktoken-rs on the same 10 MB of text, side by side in one run,
//! after checking that both give the same count.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group};

/// About 10 MB of varied text: prose, code, numbers, non-ASCII, whitespace runs; 256 KB
/// in the smoke run of `cargo test --benches` (which runs this without `--bench`).
fn corpus() -> String {
    let smoke = !std::env::args().any(|arg| arg == "--bench");
    let size = if smoke { 256 << 10 } else { 10 << 20 };
    let pieces = [
        "The committee reviewed 1,284 reports in 2025; most flagged latency regressions. ",
        "fn parse(input: &str) -> Result<Vec<u32>, Error> { input.split(',').map(str::parse).collect() }\n",
        "Les données réelles contiennent des accents, des guillemets « » et des tirets — parfois. ",
        "東京の天気は晴れ、気温は二十三度でした。 ",
        "ERROR 2026-11-21T10:00:17Z gateway upstream timeout after 1403ms\n",
        "    indented   text\twith\ttabs   and    runs of spaces\n\n",
        "Emoji 🙂🚀✨ and symbols ∑∫√ appear too. ",
    ];
    let mut text = String::with_capacity(size + 200);
    let mut i = 0usize;
    while text.len() < size {
        text.push_str(pieces[i % pieces.len()]);
        text.push_str(&(i * 7919 % 100_003).to_string());
        text.push(' ');
        i += 1;
    }
    text
}

fn benches(c: &mut Criterion) {
    let text = corpus();
    let reference = tiktoken_rs::o200k_base().expect("o200k_base");
    let ours = rlm_registry::tokens::count(&text);
    let theirs = reference.encode_ordinary(&text).len();
    assert_eq!(ours, theirs, "token counts must be identical");
    println!("corpus: {} bytes, {ours} tokens (both)", text.len());

    let mut group = c.benchmark_group("token_count_10MB");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(20));
    group.bench_function("rlm_registry (bpe-openai)", |b| {
        b.iter(|| rlm_registry::tokens::count(black_box(&text)))
    });
    group.bench_function("tiktoken-rs", |b| {
        b.iter(|| reference.encode_ordinary(black_box(&text)).len())
    });
    group.finish();
}

/// The ratio in one process, alternating the two so machine noise hits both alike.
fn same_run_ratio() {
    let text = corpus();
    let reference = tiktoken_rs::o200k_base().expect("o200k_base");
    let (mut ours, mut theirs) = (Duration::ZERO, Duration::ZERO);
    for _ in 0..3 {
        let started = Instant::now();
        black_box(rlm_registry::tokens::count(black_box(&text)));
        ours += started.elapsed();
        let started = Instant::now();
        black_box(reference.encode_ordinary(black_box(&text)).len());
        theirs += started.elapsed();
    }
    println!(
        "same-run: ours {:.0} ms, tiktoken-rs {:.0} ms per 10 MB; tiktoken-rs/ours = {:.2}x",
        ours.as_secs_f64() * 1000.0 / 3.0,
        theirs.as_secs_f64() * 1000.0 / 3.0,
        theirs.as_secs_f64() / ours.as_secs_f64()
    );
}

criterion_group!(group, benches);

fn main() {
    group();
    if std::env::args().any(|a| a == "--bench") {
        same_run_ratio();
    }
    Criterion::default().configure_from_args().final_summary();
}
