//! Single-flight: of several workers (threads, processes, machines) sharing a store and
//! about to send the same request, one sends it and the others wait for its answer.
//!
//! A worker that misses claims the key ([`CacheStore::claim`]). Holding it, it sends,
//! stores the answer and gives the hold back ([`Hold`] releases on drop, so a failed
//! call or an early return releases too). Finding it taken, it claims again after a
//! short wait, 5 ms growing to 50 ms, until the key is free: the holder released it
//! (its answer is then looked up, and the request is sent only if it is not there, the
//! holder's call having failed) or its lease ran out (the holder died, or is slower
//! than the lease: this worker then sends its own). Polling the claim rather than the
//! answer keeps the store's hit and miss counts true: a wait counts one miss and one hit.
//! A store that takes no holds (one that stopped working) makes every worker send.
//!
//! A worker that takes the hold looks the answer up once more
//! ([`CacheStore::lookup_again`], which counts no second miss): a sender may have stored
//! it and released between this worker's first lookup and its claim.

use std::thread;
use std::time::{Duration, Instant};

use super::{CacheKey, CacheStore, Claim, Lease};
use crate::llm::Completion;

/// How long a hold lasts when the cache's setting gives none: as long as one attempt of
/// a request may take by default (the client's timeout, `RLM_TIMEOUT_SECS`), so a live
/// call is rarely sent twice, while a worker that died holding a key delays the others
/// by at most this.
pub const DEFAULT_CACHE_LEASE: Duration = Duration::from_secs(120);

/// The first wait between two claims of a taken key, and the longest.
const FIRST_POLL: Duration = Duration::from_millis(5);
const LAST_POLL: Duration = Duration::from_millis(50);

/// A worker's hold on a key, given back when dropped.
pub(super) struct Hold<'a> {
    store: &'a dyn CacheStore,
    lease: Lease,
}

impl Drop for Hold<'_> {
    fn drop(&mut self) {
        // A release that fails leaves the hold to run out with its lease.
        let _ = self.store.release(&self.lease);
    }
}

/// What a worker does with a request the store did not answer.
pub(super) enum Claimed<'a> {
    /// Send it, holding the key (or without a hold, when the store takes none).
    Send(Option<Hold<'a>>),
    /// Another worker's answer came before the claim: a hit.
    Hit(Completion),
    /// Another worker holds it: wait for its answer.
    Wait(Waiting),
}

/// A request whose key another worker holds.
pub(super) struct Waiting {
    key: CacheKey,
    since: Instant,
}

/// How a wait ended.
pub(super) enum Settled<'a> {
    /// The other worker's answer, marked with the wait.
    Answered(Completion),
    /// No answer came: send the request, holding the key (or without a hold).
    Send(Option<Hold<'a>>),
}

/// Claims `key` for `lease`.
pub(super) fn claim<'a>(store: &'a dyn CacheStore, key: &CacheKey, lease: Duration) -> Claimed<'a> {
    // A store that stopped working refuses claims anyway, and may take time to say why.
    if !store.is_active() {
        return Claimed::Send(None);
    }
    match store.claim(key, lease) {
        Ok(Claim::Held(lease)) => {
            let hold = Hold { store, lease };
            match store.lookup_again(key) {
                Some(answer) => Claimed::Hit(answer),
                None => Claimed::Send(Some(hold)),
            }
        }
        Ok(Claim::Taken { .. }) => Claimed::Wait(Waiting {
            key: *key,
            since: Instant::now(),
        }),
        Err(_) => Claimed::Send(None),
    }
}

impl Waiting {
    /// Claims the key again: `None` while it is still taken, else the answer that came
    /// or the hold to send with.
    pub(super) fn poll<'a>(
        &self,
        store: &'a dyn CacheStore,
        lease: Duration,
    ) -> Option<Settled<'a>> {
        match claim(store, &self.key, lease) {
            Claimed::Wait(_) => None,
            Claimed::Send(hold) => Some(Settled::Send(hold)),
            Claimed::Hit(mut answer) => {
                let waited = self.since.elapsed();
                answer.waited = Some(waited);
                answer.elapsed = waited;
                Some(Settled::Answered(answer))
            }
        }
    }

    /// Polls until the key is free.
    pub(super) fn wait<'a>(&self, store: &'a dyn CacheStore, lease: Duration) -> Settled<'a> {
        let mut backoff = Backoff::default();
        loop {
            backoff.sleep();
            if let Some(settled) = self.poll(store, lease) {
                return settled;
            }
        }
    }
}

/// The wait between two polls: [`FIRST_POLL`], growing by half each time to [`LAST_POLL`].
pub(super) struct Backoff {
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Backoff {
        Backoff { next: FIRST_POLL }
    }
}

impl Backoff {
    /// Sleeps the next wait.
    pub(super) fn sleep(&mut self) {
        thread::sleep(self.next());
    }

    fn next(&mut self) -> Duration {
        let next = self.next;
        self.next = (next * 3 / 2).min(LAST_POLL);
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::CallCache;

    fn key(text: &str) -> CacheKey {
        CacheKey::of("e", "m", &text.into())
    }

    #[test]
    fn a_hold_is_given_back_when_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let store = CallCache::open(dir.path().join("c.sqlite"));
        let lease = Duration::from_secs(60);
        let Claimed::Send(Some(hold)) = claim(&store, &key("q"), lease) else {
            panic!("the first claim holds");
        };
        assert!(matches!(claim(&store, &key("q"), lease), Claimed::Wait(_)));
        drop(hold);
        assert!(matches!(
            claim(&store, &key("q"), lease),
            Claimed::Send(Some(_))
        ));
    }

    #[test]
    fn a_waiter_gets_the_holders_answer_marked_as_waited() {
        let dir = tempfile::tempdir().unwrap();
        let store = CallCache::open(dir.path().join("c.sqlite"));
        let lease = Duration::from_secs(60);
        let Claimed::Send(Some(hold)) = claim(&store, &key("q"), lease) else {
            panic!("held");
        };
        let Claimed::Wait(waiting) = claim(&store, &key("q"), lease) else {
            panic!("taken");
        };
        assert!(waiting.poll(&store, lease).is_none(), "still held");
        thread::scope(|scope| {
            scope.spawn(|| {
                thread::sleep(Duration::from_millis(30));
                store.store(&key("q"), &Completion::new("4").with_tokens(3, 1));
                drop(hold);
            });
            let Settled::Answered(answer) = waiting.wait(&store, lease) else {
                panic!("the holder's answer");
            };
            assert_eq!(answer.content, "4");
            assert!(answer.cached);
            assert!(
                answer
                    .waited
                    .is_some_and(|w| w >= Duration::from_millis(30))
            );
        });
        let stats = store.stats().unwrap();
        assert_eq!(
            (stats.hits, stats.misses),
            (1, 0),
            "the wait looked up once"
        );
    }

    #[test]
    fn a_waiter_sends_its_own_when_the_holder_fails_or_its_lease_runs_out() {
        let dir = tempfile::tempdir().unwrap();
        let store = CallCache::open(dir.path().join("c.sqlite"));
        let long = Duration::from_secs(60);
        // Released without an answer: the call failed.
        let Claimed::Send(Some(hold)) = claim(&store, &key("failed"), long) else {
            panic!("held");
        };
        let Claimed::Wait(waiting) = claim(&store, &key("failed"), long) else {
            panic!("taken");
        };
        drop(hold);
        assert!(matches!(waiting.wait(&store, long), Settled::Send(Some(_))));
        // Never released: the holder died, and its short lease runs out.
        let Claimed::Send(Some(hold)) = claim(&store, &key("died"), Duration::from_millis(40))
        else {
            panic!("held");
        };
        std::mem::forget(hold);
        let Claimed::Wait(waiting) = claim(&store, &key("died"), long) else {
            panic!("taken");
        };
        let started = Instant::now();
        assert!(matches!(waiting.wait(&store, long), Settled::Send(Some(_))));
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn an_answer_stored_before_the_claim_is_a_hit_and_a_second_miss_is_not_counted() {
        let dir = tempfile::tempdir().unwrap();
        let store = CallCache::open(dir.path().join("c.sqlite"));
        let lease = Duration::from_secs(60);
        // The caller missed "q", then another worker stored it and released.
        store.store(&key("q"), &Completion::new("4"));
        let Claimed::Hit(answer) = claim(&store, &key("q"), lease) else {
            panic!("a hit, not a send");
        };
        assert!(answer.cached && answer.waited.is_none());
        assert!(
            matches!(claim(&store, &key("q"), lease), Claimed::Hit(_)),
            "the hit's hold was given back"
        );
        assert!(matches!(
            claim(&store, &key("new"), lease),
            Claimed::Send(Some(_))
        ));
        let stats = store.stats().unwrap();
        assert_eq!((stats.hits, stats.misses), (2, 0));
    }

    #[test]
    fn a_store_that_stopped_working_lets_every_worker_send() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.sqlite");
        std::fs::write(&path, b"not a database, just some text that is long enough").unwrap();
        let store = CallCache::open(&path);
        let lease = Duration::from_secs(60);
        for _ in 0..2 {
            assert!(matches!(
                claim(&store, &key("q"), lease),
                Claimed::Send(None)
            ));
        }
    }

    #[test]
    fn the_backoff_grows_to_its_longest_wait() {
        let mut backoff = Backoff::default();
        let waits: Vec<Duration> = (0..10).map(|_| backoff.next()).collect();
        assert_eq!(waits[0], FIRST_POLL);
        assert!(waits.windows(2).all(|w| w[0] < w[1] || w[1] == LAST_POLL));
        assert_eq!(waits[9], LAST_POLL);
    }
}
