//! The environment's speed targets, each side by side in one run:
//! - a new environment with 1,000 registry functions against one with none;
//! - the first call of a lazily loaded function;
//! - `llm_query_batched` of 32 prompts against one `llm_query`, on a loopback server
//!   answering in 50 ms.

#[path = "../tests/it/support/openai_server.rs"]
#[allow(dead_code)]
mod openai_server;

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion, criterion_group};
use openai_server::{Behavior, OpenAiServer};
use rlm_registry::Registry;
use rlm_registry::environment::{Environment, Limits};
use rlm_registry::llm::{LlmClient, LlmConfig};

/// 1,000 documented functions, one per map entry (one chunk each).
fn registry_of(n: usize) -> Arc<Registry> {
    let map: Vec<(String, String)> = (0..n)
        .map(|i| {
            let name = format!("f_{i}");
            let source = format!(
                "--- Function {i}: adds {i}.\n---@param x number The input\n---@return number sum x + {i}\nfunction {name}(x)\n  return x + {i}\nend\n"
            );
            (name, source)
        })
        .collect();
    Arc::new(Registry::from_map(map).expect("valid functions"))
}

fn creation(c: &mut Criterion) {
    let empty = Arc::new(Registry::empty());
    let thousand = registry_of(1_000);
    let mut group = c.benchmark_group("environment_new");
    group.bench_function("0 functions", |b| {
        b.iter(|| Environment::new(Arc::clone(&empty), Limits::default()).unwrap())
    });
    group.bench_function("1000 functions", |b| {
        b.iter(|| Environment::new(Arc::clone(&thousand), Limits::default()).unwrap())
    });
    group.finish();

    let mut group = c.benchmark_group("first_call");
    group.bench_function("lazy load + call of f_500", |b| {
        b.iter_batched(
            || Environment::new(Arc::clone(&thousand), Limits::default()).unwrap(),
            |env| black_box(env.execute("f_500(1)").unwrap()),
            BatchSize::SmallInput,
        )
    });
    group.bench_function("call of f_500, already loaded", |b| {
        let env = Environment::new(Arc::clone(&thousand), Limits::default()).unwrap();
        env.execute("f_500(1)").unwrap();
        b.iter(|| black_box(env.execute("f_500(1)").unwrap()))
    });
    group.finish();
}

/// Batched against single calls: wall time in one process, alternating.
fn batched_ratio() {
    let server = OpenAiServer::always(Behavior::echo(Duration::from_millis(50)));
    let config = LlmConfig::new(server.base_url(), "bench").with_timeout(Duration::from_secs(10));
    let env = Environment::builder(Registry::baked().clone())
        .llm(Arc::new(LlmClient::new(config).unwrap()))
        .build()
        .unwrap();
    env.execute("prompts = {} for i = 1, 32 do prompts[i] = 'p' .. i end")
        .unwrap();
    let (mut one, mut batch) = (Duration::ZERO, Duration::ZERO);
    let rounds = 5;
    for _ in 0..rounds {
        let started = Instant::now();
        env.execute("llm_query('p')").unwrap();
        one += started.elapsed();
        let started = Instant::now();
        env.execute("llm_query_batched(prompts)").unwrap();
        batch += started.elapsed();
    }
    println!(
        "llm_query: {:.1} ms, llm_query_batched(32): {:.1} ms, ratio {:.2}x (target <= 2x)",
        one.as_secs_f64() * 1000.0 / rounds as f64,
        batch.as_secs_f64() * 1000.0 / rounds as f64,
        batch.as_secs_f64() / one.as_secs_f64()
    );
}

/// Creation ratio measured in one process, alternating the two.
fn creation_ratio() {
    let empty = Arc::new(Registry::empty());
    let thousand = registry_of(1_000);
    let (mut none, mut many) = (Duration::ZERO, Duration::ZERO);
    for _ in 0..2_000 {
        let started = Instant::now();
        black_box(Environment::new(Arc::clone(&empty), Limits::default()).unwrap());
        none += started.elapsed();
        let started = Instant::now();
        black_box(Environment::new(Arc::clone(&thousand), Limits::default()).unwrap());
        many += started.elapsed();
    }
    println!(
        "new environment: 0 functions {:.1} us, 1000 functions {:.1} us, ratio {:.3}x (target <= 1.5x)",
        none.as_secs_f64() * 1e6 / 2000.0,
        many.as_secs_f64() * 1e6 / 2000.0,
        many.as_secs_f64() / none.as_secs_f64()
    );
}

/// The first `execute` on many fresh environments, created beforehand: calling a registry
/// function (lazy load + call) against running code that calls nothing.
fn first_call_same_run() {
    let thousand = registry_of(1_000);
    let n = 3_000;
    let fresh = || -> Vec<Environment> {
        (0..n)
            .map(|_| Environment::new(Arc::clone(&thousand), Limits::default()).unwrap())
            .collect()
    };
    let time_first = |envs: &[Environment], code: &str| {
        let started = Instant::now();
        for env in envs {
            black_box(env.execute(code).unwrap());
        }
        started.elapsed().as_secs_f64() * 1e6 / n as f64
    };
    let lazy = time_first(&fresh(), "f_500(1)");
    let plain = time_first(&fresh(), "local x = 1");
    println!(
        "first execute on a fresh environment: calling f_500 {lazy:.1} us, calling nothing {plain:.1} us (target: first call <= 20 us)"
    );
}

criterion_group!(group, creation);

fn main() {
    group();
    if std::env::args().any(|a| a == "--bench") {
        creation_ratio();
        first_call_same_run();
        batched_ratio();
    }
    Criterion::default().configure_from_args().final_summary();
}
