//! A cache hit, per call, on each store side by side at 100,000 answers (or
//! `RLM_BENCH_CACHE_ENTRIES`): SQLite in a file, and Redis on loopback (a `redis-server`
//! this bench starts on a free port, with nothing kept on disk). Without `redis-server`
//! the Redis half is skipped with a message.
//!
//! Run: `cargo bench --bench cache_hit`.

mod common;

use std::hint::black_box;
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use criterion::{BenchmarkGroup, Criterion, criterion_group, measurement::WallTime};
use rlm_registry::llm::{CacheKey, CacheStore, CallCache, Completion, RedisCache, Request};

/// Answers in each store: 100,000, or 1,000 in the smoke run of `cargo test --benches`
/// (which runs this without `--bench`).
fn entries() -> usize {
    let smoke = !std::env::args().any(|arg| arg == "--bench");
    common::setting(
        "RLM_BENCH_CACHE_ENTRIES",
        if smoke { 1_000 } else { 100_000 },
    )
}

/// The key of answer `i`: requests differ, so keys spread as real ones do.
fn key(i: usize) -> CacheKey {
    CacheKey::of(
        "http://127.0.0.1:8080/v1",
        "model",
        &Request::from(format!("Question {i}: how many lines mention an error?")),
    )
}

/// An answer of about 1 KB, as a turn of code is.
fn answer(i: usize) -> Completion {
    Completion::new(format!("```lua\nprint({i})\n```\n{}", "x".repeat(1000))).with_tokens(3000, 120)
}

/// A `redis-server` of this bench's own, killed on drop.
struct RedisServer(Child, u16);

impl RedisServer {
    /// `None`, said on stderr, when there is no `redis-server` or it does not listen
    /// within 10 s.
    fn start() -> Option<RedisServer> {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .ok()?
            .port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let Ok(child) = child else {
            eprintln!("skipped: Redis (no redis-server; apt-get install -y redis-server)");
            return None;
        };
        let server = RedisServer(child, port);
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > deadline {
                eprintln!("skipped: Redis (redis-server did not listen within 10 s)");
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(server)
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Fills `store` with `count` answers and times hits on it, in a spread order.
fn hits(group: &mut BenchmarkGroup<'_, WallTime>, name: &str, store: &dyn CacheStore) {
    let count = entries();
    let started = Instant::now();
    for i in 0..count {
        store.store(&key(i), &answer(i));
    }
    println!(
        "{name}: filled {count} answers in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let keys: Vec<CacheKey> = (0..1000).map(|i| key(i * (count / 1000))).collect();
    assert!(store.lookup(&keys[0]).is_some(), "{name}: a hit");
    let mut next = 0usize;
    group.bench_function(name, |b| {
        b.iter(|| {
            next = (next + 7) % keys.len();
            black_box(store.lookup(&keys[next]))
        })
    });
}

fn cache_hit(c: &mut Criterion) {
    let count = entries();
    let mut group = c.benchmark_group(format!("cache_hit_{count}_entries"));
    group
        .sample_size(30)
        .measurement_time(Duration::from_secs(5));

    let dir = tempfile::tempdir().unwrap();
    let sqlite = CallCache::open(dir.path().join("cache.sqlite"));
    hits(&mut group, "sqlite (a file)", &sqlite);

    if let Some(server) = RedisServer::start() {
        let url = format!("redis://127.0.0.1:{}/0", server.1);
        let redis = RedisCache::open(&url, rlm_registry::llm::DEFAULT_CACHE_MAX_MB << 20)
            .expect("a Redis URL");
        if redis.is_active() {
            hits(&mut group, "redis (loopback)", &redis);
        }
    }
    group.finish();
}

criterion_group!(group, cache_hit);

fn main() {
    group();
    criterion::Criterion::default()
        .configure_from_args()
        .final_summary();
}
