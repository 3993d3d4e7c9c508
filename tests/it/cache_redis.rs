//! The Redis call cache (`--cache redis://…`) against a real `redis-server` the test
//! starts on a free port, and the scripted server that counts the requests it gets: a
//! second process's identical run sends nothing; Redis killed mid-run, too slow, refusing
//! the password or unreachable costs one warning and never the run nor its answer; garbage
//! under a key is a miss; `rlm cache stats | clear` read and empty only the prefix's keys;
//! the password is never shown; a claim holds a key until released or lapsed.

use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use redis::Commands;
use rlm_registry::llm::{
    CacheKey, CacheStore, Claim, Completion, RESPONSE_TIMEOUT, RedisCache, open_cache,
};

use crate::support::cli::{llm_args, rlm_command, stderr, stdout};
use crate::support::openai_server::{Behavior, OpenAiServer};
use crate::support::redis::RedisServer;
use crate::support::rlm_loop::lua;

const WARNING: &str = "warning: the call cache";
const PASSWORD: &str = "pw-7f3a9c-never-shown";
const DEFAULT_MAX: u64 = rlm_registry::llm::DEFAULT_CACHE_MAX_MB << 20;

/// A run of three calls: the root's first turn, its `llm_query` (answered after `delay`),
/// its second turn; answered by what they ask, as often as asked.
fn three_call_server(delay: Duration) -> OpenAiServer {
    OpenAiServer::always(Behavior::ByPrompt(vec![
        (
            "Name a colour.".to_string(),
            Behavior::reply_with_usage("teal", 7, 1).after(delay),
        ),
        ("teal".to_string(), lua("FINAL('the colour is ' .. x)")),
        (
            String::new(),
            lua("x = llm_query('Name a colour.')\nprint(x)"),
        ),
    ]))
}

fn ask(server: &OpenAiServer, cache: &str, args: &[&str]) -> Output {
    rlm_command()
        .arg("ask")
        .arg("Q")
        .args(args)
        .args(["--cache", cache])
        .args(llm_args(&server.base_url(), "test-model"))
        .output()
        .expect("rlm runs")
}

fn cache_command(args: &[&str]) -> Output {
    rlm_command()
        .arg("cache")
        .args(args)
        .output()
        .expect("rlm runs")
}

fn warnings(output: &Output) -> usize {
    stderr(output).matches(WARNING).count()
}

fn answer_keys(redis: &RedisServer, prefix: &str) -> Vec<String> {
    let mut keys: Vec<String> = redis.client().keys(format!("{prefix}v1:k:*")).unwrap();
    keys.sort();
    keys
}

fn key(text: &str) -> CacheKey {
    CacheKey::of("http://h/v1", "m", &text.into())
}

#[test]
fn a_second_processs_identical_run_sends_nothing_and_gives_the_same_answer() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let server = three_call_server(Duration::ZERO);
    let first = ask(&server, &redis.url(), &[]);
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    assert_eq!(stdout(&first), "the colour is teal\n");
    assert_eq!(server.request_count(), 3);
    assert_eq!(warnings(&first), 0, "{}", stderr(&first));
    assert_eq!(answer_keys(&redis, "rlm:").len(), 3, "under rlm:v1:");

    let second = ask(&server, &redis.url(), &[]);
    assert_eq!(second.status.code(), Some(0), "{}", stderr(&second));
    assert_eq!(server.request_count(), 3, "nothing sent the second time");
    assert_eq!(stdout(&second), stdout(&first));

    // Named by RLM_CACHE instead of --cache: the same store.
    let by_variable = rlm_command()
        .args(["ask", "Q"])
        .args(llm_args(&server.base_url(), "test-model"))
        .env("RLM_CACHE", redis.url())
        .output()
        .unwrap();
    assert_eq!(stdout(&by_variable), stdout(&first));
    assert_eq!(
        server.request_count(),
        3,
        "nothing sent with RLM_CACHE either"
    );

    // Another prefix is another cache on the same server.
    let elsewhere = format!("{}?prefix=team-b:", redis.url());
    let third = ask(&server, &elsewhere, &[]);
    assert_eq!(stdout(&third), stdout(&first));
    assert_eq!(server.request_count(), 6, "team-b: had nothing yet");
    assert_eq!(answer_keys(&redis, "team-b:").len(), 3);
}

#[test]
fn cache_stats_and_clear_count_and_remove_only_the_prefixs_answers() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let server = three_call_server(Duration::ZERO);
    assert_eq!(ask(&server, &redis.url(), &[]).status.code(), Some(0));
    assert_eq!(ask(&server, &redis.url(), &[]).status.code(), Some(0));
    let _: () = redis.client().set("someone-else:key", "kept").unwrap();

    let stats = cache_command(&["stats", &redis.url()]);
    assert_eq!(stats.status.code(), Some(0), "{}", stderr(&stats));
    let text = stdout(&stats);
    assert!(text.contains("entries  3 ("), "{text}");
    // The first run missed three times, the second hit three times.
    assert!(text.contains("hits     3 (50% of lookups)"), "{text}");
    assert!(text.contains("misses   3"), "{text}");

    let cleared = cache_command(&["clear", &redis.url()]);
    assert_eq!(cleared.status.code(), Some(0), "{}", stderr(&cleared));
    assert!(stdout(&cleared).starts_with("removed 3 answers from redis://127.0.0.1:"));
    assert!(answer_keys(&redis, "rlm:").is_empty());
    let kept: String = redis.client().get("someone-else:key").unwrap();
    assert_eq!(kept, "kept", "a key outside the prefix is left alone");
    let after = stdout(&cache_command(&["stats", &redis.url()]));
    assert!(
        after.contains("entries  0 (") && after.contains("hits     0\n"),
        "{after}"
    );
}

#[test]
fn redis_killed_mid_run_warns_once_and_the_run_completes_with_the_right_answer() {
    let Some(mut redis) = RedisServer::start() else {
        return;
    };
    // The sub-call is answered slowly: Redis dies while it is in flight.
    let server = three_call_server(Duration::from_millis(800));
    let run = rlm_command()
        .args(["ask", "Q", "--cache", &redis.url()])
        .args(llm_args(&server.base_url(), "test-model"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("rlm runs");
    let deadline = Instant::now() + Duration::from_secs(30);
    while server.request_count() < 2 {
        assert!(Instant::now() < deadline, "the sub-call is sent");
        std::thread::sleep(Duration::from_millis(10));
    }
    redis.kill();
    let output = run.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout(&output), "the colour is teal\n");
    assert_eq!(warnings(&output), 1, "{}", stderr(&output));
    assert!(stderr(&output).contains("going on uncached"));
    assert_eq!(server.request_count(), 3);
}

#[test]
fn a_redis_too_slow_to_answer_stops_the_store_within_its_timeout() {
    let Some(mut redis) = RedisServer::start() else {
        return;
    };
    let cache = RedisCache::open(&redis.url(), DEFAULT_MAX).unwrap();
    cache.store(&key("q"), &Completion::new("a"));
    assert!(cache.lookup(&key("q")).is_some());
    redis.pause();
    let started = Instant::now();
    assert!(
        cache.lookup(&key("q")).is_none(),
        "no answer in time: a miss"
    );
    let waited = started.elapsed();
    assert!(
        waited >= RESPONSE_TIMEOUT && waited < RESPONSE_TIMEOUT * 3,
        "{waited:?}"
    );
    assert!(!cache.is_active(), "the store stops: no more waiting");
    let started = Instant::now();
    assert!(cache.lookup(&key("q")).is_none());
    assert!(started.elapsed() < Duration::from_millis(100));
    redis.resume();
}

#[test]
fn garbage_under_a_key_is_a_miss_and_never_a_wrong_answer() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let server = three_call_server(Duration::ZERO);
    assert_eq!(ask(&server, &redis.url(), &[]).status.code(), Some(0));
    let keys = answer_keys(&redis, "rlm:");
    assert_eq!(keys.len(), 3);
    let mut client = redis.client();
    // Not JSON, not UTF-8, and a key of another type.
    let _: () = client.set(&keys[0], "{\"content\": 4").unwrap();
    let _: () = client.set(&keys[1], vec![0xffu8, 0xfe, 0x00]).unwrap();
    let _: () = client.del(&keys[2]).unwrap();
    let _: () = client.rpush(&keys[2], "a list").unwrap();

    let again = ask(&server, &redis.url(), &[]);
    assert_eq!(again.status.code(), Some(0), "{}", stderr(&again));
    assert_eq!(stdout(&again), "the colour is teal\n");
    assert_eq!(server.request_count(), 6, "every garbled answer asked anew");
    assert_eq!(
        warnings(&again),
        0,
        "a miss, not a failure: {}",
        stderr(&again)
    );

    // The answers asked anew replaced the garbage.
    let third = ask(&server, &redis.url(), &[]);
    assert_eq!(stdout(&third), "the colour is teal\n");
    assert_eq!(server.request_count(), 6);
}

#[test]
fn a_wrong_password_at_start_warns_once_and_the_run_goes_on_uncached() {
    let Some(redis) = RedisServer::with_password(PASSWORD) else {
        return;
    };
    let server = three_call_server(Duration::ZERO);
    let wrong = format!("redis://:{PASSWORD}-wrong@127.0.0.1:{}/0", redis.port());
    let run = ask(&server, &wrong, &[]);
    assert_eq!(run.status.code(), Some(0), "{}", stderr(&run));
    assert_eq!(stdout(&run), "the colour is teal\n");
    assert_eq!(warnings(&run), 1, "{}", stderr(&run));
    let said = stderr(&run);
    assert!(said.contains(":***@127.0.0.1"), "{said}");
    assert!(!said.contains(PASSWORD), "{said}");
    assert!(answer_keys(&redis, "rlm:").is_empty());

    // Looking at the cache with it is a clear error.
    let stats = cache_command(&["stats", &wrong]);
    assert_eq!(stats.status.code(), Some(2));
    let said = stderr(&stats);
    assert!(
        said.starts_with("error: the call cache redis://:***@"),
        "{said}"
    );
    assert!(
        !said.contains(PASSWORD) && stdout(&stats).is_empty(),
        "{said}"
    );
}

#[test]
fn an_unreachable_host_at_start_warns_once_and_the_run_goes_on_uncached() {
    let server = three_call_server(Duration::ZERO);
    // A port just freed: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("redis://127.0.0.1:{port}/0");
    let started = Instant::now();
    let run = ask(&server, &url, &[]);
    assert_eq!(run.status.code(), Some(0), "{}", stderr(&run));
    assert_eq!(stdout(&run), "the colour is teal\n");
    assert_eq!(warnings(&run), 1, "{}", stderr(&run));
    assert!(stderr(&run).contains("cannot connect"), "{}", stderr(&run));
    assert!(started.elapsed() < Duration::from_secs(20));

    let clear = cache_command(&["clear", &url]);
    assert_eq!(clear.status.code(), Some(2));
    assert!(
        stderr(&clear).starts_with(&format!("error: the call cache {url}: cannot connect")),
        "{}",
        stderr(&clear)
    );
}

#[test]
fn the_password_never_appears_in_output_trace_warning_location_debug_or_error() {
    let Some(mut redis) = RedisServer::with_password(PASSWORD) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.jsonl");
    let server = three_call_server(Duration::ZERO);
    let url = format!("{}?prefix=pw-test:", redis.url());
    // A size cap, which does not apply to Redis: a warning naming the store.
    let run = ask(
        &server,
        &url,
        &["--trace", trace.to_str().unwrap(), "--cache-max-mb", "64"],
    );
    assert_eq!(run.status.code(), Some(0), "{}", stderr(&run));
    assert_eq!(warnings(&run), 1, "{}", stderr(&run));
    assert!(stderr(&run).contains("does not apply to Redis"));
    let stats = cache_command(&["stats", &url]);
    assert_eq!(stats.status.code(), Some(0), "{}", stderr(&stats));
    assert!(
        stdout(&stats).contains("entries  3 ("),
        "{}",
        stdout(&stats)
    );

    let cache = RedisCache::open(&url, DEFAULT_MAX).unwrap();
    let shown = [
        stdout(&run),
        stderr(&run),
        std::fs::read_to_string(&trace).unwrap(),
        stdout(&stats),
        stderr(&stats),
        cache.location(),
        format!("{cache:?}"),
        format!("{:?}", open_cache(&url, DEFAULT_MAX).unwrap()),
    ];
    redis.kill();
    // Errors once the server is gone, from the store and from `rlm cache`.
    let gone = [
        cache.stats().unwrap_err().to_string(),
        RedisCache::inspect(&url).unwrap_err().to_string(),
        stderr(&cache_command(&["stats", &url])),
        stderr(&cache_command(&["clear", &url])),
        format!("{:?}", cache.claim(&key("q"), Duration::from_secs(1))),
    ];
    for text in shown.iter().chain(&gone) {
        assert!(!text.contains(PASSWORD), "the password shows in: {text}");
    }
    assert!(cache.location().contains(":***@127.0.0.1"));
    assert!(gone[2].contains(":***@127.0.0.1"), "{}", gone[2]);
}

#[test]
fn a_redis_claim_holds_a_key_against_other_workers_until_released() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    // Two workers: two stores on one server.
    let one = RedisCache::open(&redis.url(), DEFAULT_MAX).unwrap();
    let other = RedisCache::open(&redis.url(), DEFAULT_MAX).unwrap();
    let lease = Duration::from_secs(60);
    let Claim::Held(held) = one.claim(&key("q"), lease).unwrap() else {
        panic!("the first claim holds the key");
    };
    assert_eq!(held.key, key("q"));
    let Claim::Taken { expires_in } = other.claim(&key("q"), lease).unwrap() else {
        panic!("a second claim finds it taken");
    };
    assert!(expires_in <= lease && expires_in > Duration::from_secs(50));
    assert!(matches!(
        other.claim(&key("another"), lease),
        Ok(Claim::Held(_))
    ));
    assert!(one.release(&held).unwrap());
    assert!(!one.release(&held).unwrap(), "released once");
    let Claim::Held(again) = other.claim(&key("q"), lease).unwrap() else {
        panic!("released, the key can be held again");
    };
    assert_ne!(again.token, held.token);
    assert!(
        !one.release(&held).unwrap(),
        "an old lease leaves the new hold alone"
    );
    assert!(other.release(&again).unwrap());
}

#[test]
fn a_lapsed_redis_lease_is_taken_over_and_its_release_leaves_the_new_holder_alone() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let cache = RedisCache::open(&redis.url(), DEFAULT_MAX).unwrap();
    let Claim::Held(lapsed) = cache.claim(&key("q"), Duration::from_millis(50)).unwrap() else {
        panic!("held");
    };
    std::thread::sleep(Duration::from_millis(120));
    // Its holder died: a new worker takes the key over.
    let Claim::Held(taken_over) = cache.claim(&key("q"), Duration::from_secs(60)).unwrap() else {
        panic!("a lapsed lease does not hold the key");
    };
    assert!(!cache.release(&lapsed).unwrap());
    assert!(matches!(
        cache.claim(&key("q"), Duration::from_secs(60)),
        Ok(Claim::Taken { .. })
    ));
    assert!(cache.release(&taken_over).unwrap());
}

#[test]
fn a_rediss_url_to_a_server_without_tls_warns_and_is_not_used_without_hanging() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let url = format!("rediss://127.0.0.1:{}/0", redis.port());
    let started = Instant::now();
    let cache = RedisCache::open(&url, DEFAULT_MAX).unwrap();
    assert!(!cache.is_active(), "no TLS handshake: not in use");
    assert!(cache.lookup(&key("q")).is_none());
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert!(cache.location().starts_with("rediss://127.0.0.1:"));
}
