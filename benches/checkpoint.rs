//! Checkpoints of an environment that loaded a 10 MB context and ran 50 blocks: the
//! checkpoint's size and the time to take it; `restore` into a fresh environment with
//! the context loaded, beside the time the 50 blocks take to run in the first place
//! (restoring runs them again, so their own time is its floor); and `fork`.
//!
//! Run: `cargo bench --bench checkpoint` (`RLM_BENCH_CONTEXT_MB` for another size).

mod common;

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion, criterion_group};
use rlm_registry::Registry;
use rlm_registry::environment::Environment;

/// The blocks: each reads the clock, draws a number, and works on a slice of the context
/// (what a model's turn does), leaving a few globals behind.
fn blocks() -> Vec<String> {
    (0..50)
        .map(|i| {
            format!(
                "local from = {i} * 1000 + 1\n\
                 part{i} = context:sub(from, from + 999)\n\
                 seen{i} = {{at = os.time(), pick = math.random(100), words = word_count(part{i})}}\n\
                 print(#part{i}, seen{i}.words)"
            )
        })
        .collect()
}

/// A fresh environment with the context loaded.
fn loaded(context: &str) -> Environment {
    let env = Environment::builder(Registry::baked().clone())
        .build()
        .unwrap();
    env.set_context(context).unwrap();
    env
}

/// An environment that loaded `context` and ran the blocks.
fn worked(context: &str) -> Environment {
    let env = loaded(context);
    for block in blocks() {
        env.execute(&block).unwrap();
    }
    env
}

fn context() -> String {
    let bytes = common::setting("RLM_BENCH_CONTEXT_MB", 10) * 1024 * 1024;
    let line = "2024-05-01T00:00:00Z,INFO,service-3,request handled in 12 ms user=alice\n";
    line.repeat(bytes / line.len() + 1)
}

fn best(reps: usize, mut run: impl FnMut() -> Duration) -> Duration {
    (0..reps).map(|_| run()).min().unwrap_or_default()
}

fn checkpoints(c: &mut Criterion) {
    let context = context();
    let env = worked(&context);
    let mut group = c.benchmark_group("checkpoint");
    group.sample_size(20);
    group.bench_function("checkpoint (10 MB context, 50 blocks)", |b| {
        b.iter(|| black_box(env.checkpoint().unwrap().to_bytes()))
    });
    let checkpoint = env.checkpoint().unwrap();
    group.bench_function("restore into a fresh environment", |b| {
        b.iter_batched(
            || loaded(&context),
            |fresh| black_box(fresh.restore(&checkpoint).unwrap()),
            BatchSize::PerIteration,
        )
    });
    group.bench_function("run the 50 blocks (what restore runs again)", |b| {
        b.iter_batched(
            || loaded(&context),
            |fresh| {
                for block in blocks() {
                    fresh.execute(&block).unwrap();
                }
            },
            BatchSize::PerIteration,
        )
    });
    group.bench_function("fork (context copied, then restore)", |b| {
        b.iter(|| black_box(env.fork().unwrap()))
    });
    group.finish();
    // Not in `cargo test --benches`, which runs each benchmark once as a smoke test.
    if std::env::args().any(|a| a == "--bench") {
        side_by_side(&context, &env);
    }
}

/// The figures in one run, alternating the sides: best of 10 each.
fn side_by_side(context: &str, env: &Environment) {
    let checkpoint = env.checkpoint().unwrap();
    let bytes = checkpoint.to_bytes();
    let took = best(10, || {
        let started = Instant::now();
        black_box(env.checkpoint().unwrap().to_bytes());
        started.elapsed()
    });
    let (mut restore, mut blocks_run, mut fork) = (Duration::MAX, Duration::MAX, Duration::MAX);
    for _ in 0..10 {
        let fresh = loaded(context);
        let started = Instant::now();
        fresh.restore(&checkpoint).unwrap();
        restore = restore.min(started.elapsed());
        let fresh = loaded(context);
        let started = Instant::now();
        for block in blocks() {
            fresh.execute(&block).unwrap();
        }
        blocks_run = blocks_run.min(started.elapsed());
        let started = Instant::now();
        black_box(env.fork().unwrap());
        fork = fork.min(started.elapsed());
    }
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "checkpoint: {} bytes ({} steps) in {:.2} ms, context {} MB",
        bytes.len(),
        checkpoint.steps(),
        ms(took),
        context.len() / (1024 * 1024)
    );
    println!(
        "restore {:.2} ms, the blocks' own run {:.2} ms, overhead {:.2} ms (target <= 20 ms)",
        ms(restore),
        ms(blocks_run),
        ms(restore) - ms(blocks_run)
    );
    println!(
        "fork {:.2} ms (copies the context, then restores; target <= 20 ms + the blocks' run)",
        ms(fork)
    );
}

criterion_group!(benches, checkpoints);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
}
