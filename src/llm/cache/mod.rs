//! The call cache: answers kept in a store, so a request sent again (a re-run, an eval
//! resumed in a new directory, the same sub-question asked twice) costs nothing.
//!
//! - [`CacheKey`] (`key.rs`): the SHA-256 of the request as sent (endpoint, model,
//!   messages, sampling parameters, tools).
//! - [`CacheStore`] (`store.rs`): what a store does — look up, store, evict past a size
//!   cap, report and clear, and hold a key one worker is asking the model for
//!   ([`CacheStore::claim`], [`CacheStore::release`]). A store never fails a run: one
//!   that stops working warns once and the run goes on uncached, and never gets a wrong
//!   answer because of it.
//! - [`CallCache`] (`sqlite.rs`): the store in a SQLite file that several processes share.
//! - [`RedisCache`] (`redis.rs`): the store on a Redis server a fleet of workers shares.
//! - [`open_cache`] and [`inspect_cache`] (`choose.rs`): the store `--cache` names, a path
//!   or a URL.
//! - [`Cached`] (`cached.rs`): the [`LlmLayer`](super::LlmLayer) that asks the store
//!   first and the model on a miss, storing what the model answers; a batch sends only
//!   its misses.
//! - Single-flight (`flight.rs`): a miss is claimed before it is sent, so that of the
//!   workers sharing a store one sends it and the others wait for its answer, for a lease
//!   ([`DEFAULT_CACHE_LEASE`]) after which a waiter sends its own.
//!
//! Each store is one file here implementing [`CacheStore`] and one row in `choose.rs`'s
//! table of stores, which gives it its URL scheme.
//!
//! ```
//! use std::sync::Arc;
//! use rlm_registry::llm::{CacheStore, Cached, Completion, Llm, LlmError, Request, open_cache};
//!
//! struct Counting(std::sync::atomic::AtomicUsize);
//! impl Llm for Counting {
//!     fn complete(&self, _: Request) -> Result<Completion, LlmError> {
//!         self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
//!         Ok(Completion::new("4").with_tokens(10, 1))
//!     }
//! }
//!
//! let dir = tempfile::tempdir()?;
//! let cache = open_cache(dir.path().join("cache.sqlite").to_str().unwrap(), 1 << 30)?;
//! let model = Arc::new(Counting(Default::default()));
//! let llm = Cached::new(Arc::clone(&model), Arc::clone(&cache));
//! assert!(!llm.complete("2 + 2?".into())?.cached);
//! let again = llm.complete("2 + 2?".into())?;
//! assert!(again.cached && again.content == "4");
//! assert!(!llm.complete(Request::from("2 + 2?").fresh_sample())?.cached);
//! assert_eq!(model.0.load(std::sync::atomic::Ordering::Relaxed), 2);
//! assert_eq!(cache.stats()?.entries, 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod cached;
mod choose;
mod flight;
mod key;
mod redis;
mod sqlite;
mod store;

pub use cached::Cached;
pub use choose::{inspect_cache, open_cache};
pub use flight::DEFAULT_CACHE_LEASE;
pub use key::CacheKey;
pub use redis::{CONNECT_TIMEOUT, RESPONSE_TIMEOUT, RedisCache};
pub use sqlite::{CACHE_SCHEMA_VERSION, CallCache};
pub use store::{CacheError, CacheStats, CacheStore, Claim, Lease, decode_answer, encode_answer};

/// The size cap of a cache when none is given, in MiB.
pub const DEFAULT_CACHE_MAX_MB: u64 = 1024;
