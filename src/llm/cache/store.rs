//! What a cache store is: [`CacheStore`], the trait every store implements (SQLite's
//! [`CallCache`](super::CallCache) today), with what it reports ([`CacheStats`],
//! [`CacheError`]), the hold one worker takes on a key it is asking the model
//! ([`Claim`], [`Lease`]), and the answer as every store keeps it.

use std::fmt;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::CacheKey;
use crate::llm::Completion;

/// Where answers are kept: looked up before a request is sent, stored after it is
/// answered ([`Cached`](super::Cached)), looked at and emptied by `rlm cache`. Thread-safe
/// and shared in an `Arc<dyn CacheStore>`; [`open_cache`](super::open_cache) chooses one
/// from what `--cache` names.
///
/// A store never fails a run: [`CacheStore::lookup`] and [`CacheStore::store`] return no
/// error, and a store that stops working warns once and from then on answers nothing and
/// keeps nothing. The methods that only look or tidy up ([`CacheStore::stats`],
/// [`CacheStore::clear`], [`CacheStore::evict`], [`CacheStore::claim`]) say what went wrong.
///
/// A new store (Redis, for a fleet of workers) is a file in `src/llm/cache/` implementing
/// this trait, keys as [`CacheKey::as_bytes`] and answers as [`encode_answer`] writes
/// them, and a row in the table [`open_cache`](super::open_cache) reads.
///
/// ```
/// use rlm_registry::llm::{CacheKey, CacheStore, CallCache, Completion, Claim};
/// use std::time::Duration;
///
/// let dir = tempfile::tempdir()?;
/// let store: Box<dyn CacheStore> = Box::new(CallCache::open(dir.path().join("c.sqlite")));
/// let key = CacheKey::of("http://h/v1", "m", &"2 + 2?".into());
/// assert!(store.lookup(&key).is_none());
/// store.store(&key, &Completion::new("4").with_tokens(10, 1));
/// assert_eq!(store.lookup(&key).unwrap().content, "4");
/// assert_eq!(store.stats()?.entries, 1);
/// let Claim::Held(lease) = store.claim(&key, Duration::from_secs(30))? else { panic!() };
/// assert!(store.release(&lease)?);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait CacheStore: Send + Sync + fmt::Debug {
    /// Where the answers are, for messages: a file's path, a server's URL.
    fn location(&self) -> String;

    /// Whether the store is in use: false once it failed and the run went on uncached.
    fn is_active(&self) -> bool;

    /// The answer stored for `key`, marked [`Completion::cached`]; counts a hit or a miss,
    /// and makes the answer the most recently used. An answer that does not read back is a
    /// miss.
    fn lookup(&self, key: &CacheKey) -> Option<Completion>;

    /// Keeps `completion` as the answer to `key` (replacing any), then evicts the least
    /// recently used answers past [`CacheStore::max_bytes`].
    fn store(&self, key: &CacheKey, completion: &Completion);

    /// What the store holds, and the hits and misses of every process that used it.
    fn stats(&self) -> Result<CacheStats, CacheError>;

    /// Removes every answer and resets the counters; returns how many answers there were.
    fn clear(&self) -> Result<u64, CacheError>;

    /// The size cap, in bytes of answers and keys ([`CacheStats::bytes`]).
    fn max_bytes(&self) -> u64;

    /// Removes the least recently used answers until the rest fit in `max_bytes`; returns
    /// how many went. [`CacheStore::store`] does it with [`CacheStore::max_bytes`].
    fn evict(&self, max_bytes: u64) -> Result<u64, CacheError>;

    /// Takes the hold on `key` for `lease`, so that of several workers about to send the
    /// same request, one sends it and the others wait for its answer: [`Claim::Held`] when
    /// no one held it (or the last holder's lease ran out), else [`Claim::Taken`] with how
    /// long the holder keeps it. A holder that dies leaves nothing behind once its lease
    /// runs out. An error (the store is not in use) means: send without the hold.
    fn claim(&self, key: &CacheKey, lease: Duration) -> Result<Claim, CacheError>;

    /// Gives a hold back, once its answer is stored or the request failed; true when it
    /// was still this lease's (false: it ran out, and another worker may hold it now,
    /// which this leaves alone).
    fn release(&self, lease: &Lease) -> Result<bool, CacheError>;

    /// [`CacheStore::lookup`] once more, by a worker that just missed `key` and then took
    /// its hold: an answer stored in between is a hit, and finding nothing again counts no
    /// second miss (it is the same miss). By default a plain lookup, which counts it.
    fn lookup_again(&self, key: &CacheKey) -> Option<Completion> {
        self.lookup(key)
    }
}

/// The outcome of [`CacheStore::claim`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claim {
    /// The caller holds the key: it sends the request, stores the answer and releases.
    Held(Lease),
    /// Another worker holds the key for about `expires_in` more: look its answer up again
    /// after a while, and claim again if it is still missing once the lease has run out.
    Taken {
        /// How long the holder's lease has left.
        expires_in: Duration,
    },
}

/// One worker's hold on a key, from [`CacheStore::claim`] to [`CacheStore::release`] or
/// `expires_at`, whichever comes first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    /// The key held.
    pub key: CacheKey,
    /// Tells this hold from any later one on the same key: only it releases the hold.
    pub token: u64,
    /// When the hold lapses if it is not released.
    pub expires_at: SystemTime,
}

/// Why a store could not be read or changed ([`CacheStore::stats`], [`CacheStore::clear`],
/// [`open_cache`](super::open_cache)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheError {
    /// The store: a file's path, a URL, or what `--cache` named.
    pub location: String,
    /// What went wrong, in the store's words or ours.
    pub message: String,
}

impl fmt::Display for CacheError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the call cache {}: {}", self.location, self.message)
    }
}

impl std::error::Error for CacheError {}

/// What a store holds ([`CacheStore::stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Answers stored.
    pub entries: u64,
    /// Bytes of the stored answers and their keys: what the size cap counts.
    pub bytes: u64,
    /// The store's size on disk (a file's, its write-ahead log included); 0 for a server.
    pub file_bytes: u64,
    /// Lookups answered from the store, by every process that used it.
    pub hits: u64,
    /// Lookups that found nothing.
    pub misses: u64,
    /// When the oldest answer was stored, in milliseconds since the Unix epoch.
    pub oldest_ms: Option<u64>,
    /// When the newest answer was stored, in milliseconds since the Unix epoch.
    pub newest_ms: Option<u64>,
}

/// An answer as every store keeps it.
#[derive(Serialize, Deserialize)]
struct Stored {
    content: String,
    prompt_tokens: u64,
    completion_tokens: u64,
    model: Option<String>,
    finish_reason: Option<String>,
    // Answers stored before reasoning was kept read back without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reasoning: Option<String>,
    #[serde(default, skip_serializing_if = "is_zero")]
    reasoning_tokens: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// `completion` as a store keeps it (JSON): the content, the reasoning, the usage, the
/// model and the finish reason; not the attempts nor the time it took, which were this call's.
///
/// ```
/// use std::time::Duration;
/// use rlm_registry::llm::{Completion, decode_answer, encode_answer};
///
/// let kept = encode_answer(&Completion::new("4").with_tokens(10, 1));
/// let back = decode_answer(&kept, Duration::from_micros(20)).unwrap();
/// assert!(back.cached && back.content == "4" && back.total_tokens() == 11);
/// assert!(decode_answer("not json", Duration::ZERO).is_none());
/// ```
pub fn encode_answer(completion: &Completion) -> String {
    let stored = Stored {
        content: completion.content.clone(),
        prompt_tokens: completion.prompt_tokens,
        completion_tokens: completion.completion_tokens,
        model: completion.model.clone(),
        finish_reason: completion.finish_reason.clone(),
        reasoning: completion.reasoning.clone(),
        reasoning_tokens: completion.reasoning_tokens,
    };
    // Strings and numbers serialize without fail.
    serde_json::to_string(&stored).unwrap_or_default()
}

/// An answer [`encode_answer`] wrote, marked [`Completion::cached`], `elapsed` its time;
/// `None` when it does not read back (a store then counts a miss).
pub fn decode_answer(kept: &str, elapsed: Duration) -> Option<Completion> {
    let stored: Stored = serde_json::from_str(kept).ok()?;
    Some(Completion {
        content: stored.content,
        prompt_tokens: stored.prompt_tokens,
        completion_tokens: stored.completion_tokens,
        model: stored.model,
        finish_reason: stored.finish_reason,
        reasoning: stored.reasoning,
        reasoning_tokens: stored.reasoning_tokens,
        attempts: 0,
        elapsed,
        cached: true,
        waited: None,
        cost: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reasoning_models_answer_keeps_its_reasoning_in_the_store() {
        let mut completion = Completion::new("<think>a</think>4").with_tokens(10, 8);
        completion.reasoning = Some("apart".to_string());
        completion.reasoning_tokens = 6;
        let back = decode_answer(&encode_answer(&completion), Duration::ZERO).unwrap();
        assert_eq!(back.reasoning.as_deref(), Some("apart"));
        assert_eq!(back.reasoning_tokens, 6);
        assert_eq!(back.answer(), "4");
    }

    #[test]
    fn an_answer_stored_before_reasoning_was_kept_still_reads_back() {
        let old = r#"{"content":"4","prompt_tokens":10,"completion_tokens":1,"model":null,"finish_reason":"stop"}"#;
        let back = decode_answer(old, Duration::ZERO).unwrap();
        assert_eq!(
            (
                back.content.as_str(),
                back.reasoning.as_deref(),
                back.reasoning_tokens
            ),
            ("4", None, 0)
        );
        // And a plain answer is written as it was then.
        assert_eq!(encode_answer(&back), old);
    }
}
