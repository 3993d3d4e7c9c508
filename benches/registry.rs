//! Start-up cost of a registry: the baked `static` against loading the same directories
//! at run time.
//!
//! `cargo bench --bench registry` runs one criterion group, `startup`, with two
//! benchmarks side by side:
//!
//! - `baked`: `Registry::baked()` and its `system_prompt()`, the whole start-up cost of a
//!   baked registry (no file I/O, no parsing);
//! - `from_paths`: `Registry::from_paths` on the directories this crate bakes (read,
//!   parse, validate, extract, build the prompt).
//!
//! Criterion does not compare two benchmarks, so a short `std::time::Instant`
//! measurement in the same run follows and prints `ratio from_paths/baked: N x`.

use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use criterion::Criterion;
use rlm_registry::Registry;

/// The directories `build.rs` bakes, in its load order, each behind its cargo feature.
fn baked_dirs() -> Vec<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    [
        (cfg!(feature = "text"), "lua/text"),
        (cfg!(feature = "chunking"), "lua/chunking"),
        (cfg!(feature = "recursive"), "lua/recursive"),
    ]
    .into_iter()
    .filter(|(enabled, _)| *enabled)
    .map(|(_, dir)| root.join(dir))
    .collect()
}

/// The whole start-up cost of the baked registry: get it, get its prompt.
fn baked() -> usize {
    black_box(Registry::baked()).system_prompt().len()
}

/// The same content loaded from disk at run time.
fn from_paths(dirs: &[PathBuf]) -> usize {
    Registry::from_paths(black_box(dirs))
        .expect("the baked directories pass the conventions")
        .system_prompt()
        .len()
}

fn bench_startup(c: &mut Criterion, dirs: &[PathBuf]) {
    let mut group = c.benchmark_group("startup");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    group.bench_function("baked", |b| b.iter(baked));
    group.bench_function("from_paths", |b| b.iter(|| from_paths(dirs)));
    group.finish();
}

/// Mean nanoseconds per call of `f` over `iterations` calls. (`Duration` division
/// would truncate sub-nanosecond means to zero.)
fn mean_ns(iterations: u32, mut f: impl FnMut() -> usize) -> f64 {
    let start = Instant::now();
    for _ in 0..iterations {
        black_box(f());
    }
    start.elapsed().as_secs_f64() * 1e9 / f64::from(iterations)
}

/// Both sides timed in the same process, one after the other, for the ratio.
fn ratio(dirs: &[PathBuf]) {
    const BAKED_ITERATIONS: u32 = 1_000_000;
    const FROM_PATHS_ITERATIONS: u32 = 200;
    // Warm both up (page cache, thread creation, lazy statics).
    for _ in 0..10 {
        black_box(baked());
        black_box(from_paths(dirs));
    }
    let baked_ns = mean_ns(BAKED_ITERATIONS, baked);
    let from_paths_ns = mean_ns(FROM_PATHS_ITERATIONS, || from_paths(dirs));
    println!();
    println!("same-run measurement (std::time::Instant, per-iteration means):");
    println!("  baked:      {baked_ns:>14.3} ns  ({BAKED_ITERATIONS} iterations)");
    println!("  from_paths: {from_paths_ns:>14.3} ns  ({FROM_PATHS_ITERATIONS} iterations)");
    if baked_ns > 0.0 {
        println!("ratio from_paths/baked: {:.0} x", from_paths_ns / baked_ns);
    } else {
        println!("ratio from_paths/baked: > {from_paths_ns:.0} x (baked below timer resolution)");
    }
}

/// Whether this is a real benchmark run (`cargo bench`), not `cargo test --benches`
/// (which runs each benchmark once) or `--list`.
fn benchmarking() -> bool {
    let args: Vec<String> = std::env::args().collect();
    let has = |flag: &str| args.iter().any(|a| a == flag);
    has("--bench") && !has("--test") && !has("--list") && !has("--profile-time")
}

fn main() {
    let dirs = baked_dirs();
    let loaded = Registry::from_paths(&dirs).expect("the baked directories pass the conventions");
    // Same functions, same prompt (the prompt holds no paths): the two do the same work.
    if loaded.system_prompt() != Registry::baked().system_prompt() {
        eprintln!(
            "warning: from_paths ({} functions) and baked ({} functions) differ",
            loaded.len(),
            Registry::baked().len()
        );
    }

    let mut criterion = Criterion::default().configure_from_args();
    bench_startup(&mut criterion, &dirs);
    criterion.final_summary();

    if benchmarking() {
        ratio(&dirs);
    }
}
