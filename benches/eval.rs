//! Generating one `rlm eval` task of 1M tokens (or `RLM_BENCH_EVAL_TOKENS`), per family,
//! with the exact `o200k_base` count of the context it fits, beside counting those
//! tokens once (the floor: fitting counts the text a few times).
//!
//! Run: `cargo bench --bench eval` (`RLM_BENCH_EVAL_TOKENS=100000` for a quick run).

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group};
use rlm_registry::eval::{FAMILIES, Size, generate_task};

fn tokens() -> u64 {
    // `cargo test --benches` runs this without `--bench`: a quick smoke run then.
    let smoke = !std::env::args().any(|arg| arg == "--bench");
    std::env::var("RLM_BENCH_EVAL_TOKENS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if smoke { 20_000 } else { 1_000_000 })
}

fn benches(c: &mut Criterion) {
    let size = Size::new(tokens());
    let mut group = c.benchmark_group(format!("eval_generate_{size}"));
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(5));
    for &family in FAMILIES {
        let task = generate_task(family, size, 1, 0);
        let context = task.context.unwrap_or_default();
        let count = rlm_registry::tokens::count(&context);
        println!(
            "{family}: {} bytes, {count} tokens ({:+.2}% of {size})",
            context.len(),
            (count as f64 / size.tokens() as f64 - 1.0) * 100.0
        );
        group.bench_function(family.name(), |b| {
            b.iter(|| generate_task(family, black_box(size), 1, 0))
        });
        group.bench_function(format!("{family} (token_count of the context)"), |b| {
            b.iter(|| rlm_registry::tokens::count(black_box(&context)))
        });
    }
    group.finish();
}

criterion_group!(group, benches);

fn main() {
    group();
    criterion::Criterion::default()
        .configure_from_args()
        .final_summary();
}
