//! [`Cached`]: the model layer in front of a [`CacheStore`], sending each request once
//! across the workers that share the store (`flight.rs`).

use std::sync::Arc;
use std::time::Duration;

use super::flight::{Backoff, Claimed, DEFAULT_CACHE_LEASE, Hold, Settled, Waiting, claim};
use super::{CacheKey, CacheStore};
use crate::llm::{BatchResults, Completion, Llm, LlmError, LlmLayer, ModelInfo, Request};

/// A request of a batch and where its answer goes.
struct Slot<T> {
    slot: usize,
    key: CacheKey,
    request: Request,
    then: T,
}

/// A batch's answers, filled in as they come.
type Answers = Vec<Option<Result<Completion, LlmError>>>;

/// An [`Llm`] that answers from a [`CacheStore`] when it can and asks `inner` otherwise,
/// storing each new answer. The key names the server, the model and the reply limit and
/// reasoning effort `inner` reports ([`Llm::model_info`]; empty for a fake that reports
/// none). A request marked
/// [`Request::fresh`] always goes to `inner`; a batch sends only its misses, in one batch
/// of the same kind (at `inner`'s concurrency, or at the caller's), and its answers come
/// back in the order of the requests. As every [`LlmLayer`], it has `inner`'s
/// [`Llm::max_concurrency`] and [`Llm::model_info`].
///
/// Single-flight: a request the store misses is sent by one worker of those sharing the
/// store (threads, processes, machines) while the others wait for its answer, which
/// reaches them marked [`Completion::waited`]. The sender holds the request for a lease
/// ([`Cached::with_lease`], default [`DEFAULT_CACHE_LEASE`]): a waiter whose sender died
/// or is slower than that sends its own. A batch sends the requests it holds as one
/// batch and then waits for the others, so it keeps its parallelism.
pub struct Cached<L> {
    inner: L,
    cache: Arc<dyn CacheStore>,
    /// What the key names besides the request: the server, the model and the settings
    /// the client adds to every request.
    sent_to: ModelInfo,
    /// How long a hold on a request being sent lasts.
    lease: Duration,
}

impl<L: Llm> Cached<L> {
    /// `inner` behind `cache`.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use rlm_registry::llm::{CacheStore, CallCache, Cached, Llm, LlmClient, LlmConfig};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let config = LlmConfig::new("http://127.0.0.1:8080/v1", "m").with_max_concurrency(4);
    /// let cache = Arc::new(CallCache::open(dir.path().join("cache.sqlite")));
    /// let cached = Cached::new(LlmClient::new(config)?, cache);
    /// assert!(cached.cache().is_active());
    /// assert_eq!(cached.max_concurrency(), 4, "the client's, behind the cache");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(inner: L, cache: Arc<dyn CacheStore>) -> Cached<L> {
        let info = inner.model_info().unwrap_or_default();
        Cached {
            inner,
            cache,
            sent_to: info,
            lease: DEFAULT_CACHE_LEASE,
        }
    }

    /// Holds each request it sends for `lease` (default [`DEFAULT_CACHE_LEASE`]): other
    /// workers sharing the store wait for its answer that long at most, then send their
    /// own. A batch holds its requests for as many leases as it takes rounds to send them
    /// at `inner`'s concurrency.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use rlm_registry::llm::{CallCache, Cached, Completion, Llm, LlmError, Request};
    ///
    /// struct Four;
    /// impl Llm for Four {
    ///     fn complete(&self, _: Request) -> Result<Completion, LlmError> {
    ///         Ok(Completion::new("4"))
    ///     }
    /// }
    ///
    /// let dir = tempfile::tempdir()?;
    /// let cache = Arc::new(CallCache::open(dir.path().join("cache.sqlite")));
    /// let cached = Cached::new(Four, cache).with_lease(Duration::from_secs(10));
    /// assert_eq!(cached.lease(), Duration::from_secs(10));
    /// assert!(cached.complete("2 + 2?".into())?.waited.is_none(), "no one else asked");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_lease(mut self, lease: Duration) -> Cached<L> {
        self.lease = lease;
        self
    }

    /// How long a hold on a request being sent lasts.
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// The store it reads and writes.
    pub fn cache(&self) -> &Arc<dyn CacheStore> {
        &self.cache
    }

    fn key(&self, request: &Request) -> CacheKey {
        CacheKey::sent(&self.sent_to, request)
    }

    /// The stored answer, unless the request asks for a fresh one.
    fn lookup(&self, request: &Request, key: &CacheKey) -> Option<Completion> {
        (!request.fresh).then(|| self.cache.lookup(key)).flatten()
    }

    fn remember(&self, key: &CacheKey, result: &Result<Completion, LlmError>) {
        if let Ok(completion) = result {
            self.cache.store(key, completion);
        }
    }
}

impl<L: Llm> Cached<L> {
    /// The store's answer to a request it missed once its sender (another worker)
    /// answered, or the hold to send it with.
    fn hold_or_wait(&self, key: &CacheKey) -> Settled<'_> {
        match claim(self.cache.as_ref(), key, self.lease) {
            Claimed::Send(hold) => Settled::Send(hold),
            Claimed::Hit(answer) => Settled::Answered(answer),
            Claimed::Wait(waiting) => waiting.wait(self.cache.as_ref(), self.lease),
        }
    }

    /// Sends `sent` in one batch through `send`, keeps each answer and gives its hold
    /// back; a batch of none sends nothing (not even an empty batch, which a model may
    /// count).
    fn send_held(
        &self,
        sent: Vec<Slot<Option<Hold<'_>>>>,
        send: impl FnOnce(Vec<Request>) -> BatchResults,
        answers: &mut Answers,
    ) {
        if sent.is_empty() {
            return;
        }
        let (slots, requests): (Vec<_>, Vec<_>) = sent
            .into_iter()
            .map(|s| ((s.slot, s.key, s.then), s.request))
            .unzip();
        let mut results = send(requests).into_iter();
        for (slot, key, hold) in slots {
            let result = results.next().unwrap_or_else(|| {
                Err(LlmError::Config(
                    "the model returned fewer answers than prompts".to_string(),
                ))
            });
            self.remember(&key, &result);
            drop(hold);
            answers[slot] = Some(result);
        }
    }
}

impl<L: Llm> LlmLayer for Cached<L> {
    type Inner = L;

    fn inner(&self) -> &L {
        &self.inner
    }

    fn call(&self, request: Request) -> Result<Completion, LlmError> {
        let key = self.key(&request);
        let hold = if request.fresh {
            None
        } else {
            if let Some(hit) = self.cache.lookup(&key) {
                return Ok(hit);
            }
            match self.hold_or_wait(&key) {
                Settled::Answered(answer) => return Ok(answer),
                Settled::Send(hold) => hold,
            }
        };
        let result = self.inner.complete(request);
        self.remember(&key, &result);
        drop(hold);
        result
    }

    fn batch(
        &self,
        requests: Vec<Request>,
        send: impl FnOnce(Vec<Request>) -> BatchResults,
    ) -> BatchResults {
        let store = self.cache.as_ref();
        // The held requests go out `max_concurrency` at a time: the last round starts
        // after the others, and its hold must last until it is answered.
        let rounds = requests.len().div_ceil(self.inner.max_concurrency().max(1));
        let lease = self
            .lease
            .saturating_mul(u32::try_from(rounds).unwrap_or(u32::MAX).max(1));
        let mut answers: Answers = (0..requests.len()).map(|_| None).collect();
        let mut sent = Vec::new();
        let mut waiting: Vec<Slot<Waiting>> = Vec::new();
        for (slot, request) in requests.into_iter().enumerate() {
            let key = self.key(&request);
            let claimed = if request.fresh {
                Claimed::Send(None)
            } else if let Some(hit) = store.lookup(&key) {
                answers[slot] = Some(Ok(hit));
                continue;
            } else {
                claim(store, &key, lease)
            };
            match claimed {
                Claimed::Send(hold) => sent.push(Slot {
                    slot,
                    key,
                    request,
                    then: hold,
                }),
                Claimed::Wait(then) => waiting.push(Slot {
                    slot,
                    key,
                    request,
                    then,
                }),
                Claimed::Hit(answer) => answers[slot] = Some(Ok(answer)),
            }
        }
        self.send_held(sent, send, &mut answers);
        // By now the other workers' answers have mostly come: poll before sleeping.
        let mut backoff = Backoff::default();
        while !waiting.is_empty() {
            let mut held = Vec::new();
            for Slot {
                slot,
                key,
                request,
                then,
            } in std::mem::take(&mut waiting)
            {
                match then.poll(store, lease) {
                    None => waiting.push(Slot {
                        slot,
                        key,
                        request,
                        then,
                    }),
                    Some(Settled::Answered(answer)) => answers[slot] = Some(Ok(answer)),
                    Some(Settled::Send(hold)) => held.push(Slot {
                        slot,
                        key,
                        request,
                        then: hold,
                    }),
                }
            }
            // Rare (a sender failed or died): `send` is spent, the inner model's own
            // batch sends these.
            self.send_held(
                held,
                |requests| self.inner.complete_batch(requests),
                &mut answers,
            );
            if !waiting.is_empty() {
                backoff.sleep();
            }
        }
        answers
            .into_iter()
            .map(|answer| {
                answer.unwrap_or_else(|| {
                    Err(LlmError::Config(
                        "a request of the batch got no answer".to_string(),
                    ))
                })
            })
            .collect()
    }

    fn answer_from_cache(&self, request: &Request) -> Option<Completion> {
        self.lookup(request, &self.key(request))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::thread;
    use std::time::Instant;

    use super::*;
    use crate::llm::{CallCache, Claim};

    /// Answers each prompt with itself in capitals, and notes each batch it gets.
    #[derive(Default)]
    struct Upper {
        batches: Mutex<Vec<Vec<String>>>,
    }

    impl Llm for Upper {
        fn complete(&self, request: Request) -> Result<Completion, LlmError> {
            Ok(Completion::new(request.messages[0].text().to_uppercase()))
        }

        fn complete_batch(&self, requests: Vec<Request>) -> BatchResults {
            let prompts = requests.iter().map(|r| r.messages[0].text().to_string());
            self.batches.lock().unwrap().push(prompts.collect());
            requests.into_iter().map(|r| self.complete(r)).collect()
        }
    }

    #[test]
    fn a_batch_sends_what_it_holds_at_once_then_waits_for_another_workers_answer() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.sqlite");
        let model = Arc::new(Upper::default());
        let cached = Cached::new(Arc::clone(&model), Arc::new(CallCache::open(&path)));
        // Another worker, on the same file, is sending "b".
        let other = CallCache::open(&path);
        let b = CacheKey::sent(&ModelInfo::default(), &"b".into());
        let Ok(Claim::Held(lease)) = other.claim(&b, Duration::from_secs(60)) else {
            panic!("the other worker holds b");
        };
        let started = Instant::now();
        let answers = thread::scope(|scope| {
            scope.spawn(|| {
                thread::sleep(Duration::from_millis(100));
                other.store(&b, &Completion::new("b, from the other worker"));
                other.release(&lease).unwrap();
            });
            let requests = ["a", "b", "c", "a"].map(Request::from).to_vec();
            cached.complete_batch(requests)
        });
        assert!(started.elapsed() >= Duration::from_millis(100));
        let answers: Vec<(String, Option<Duration>)> = answers
            .into_iter()
            .map(|a| a.map(|a| (a.content, a.waited)).unwrap())
            .collect();
        assert_eq!(
            answers
                .iter()
                .map(|(text, _)| text.as_str())
                .collect::<Vec<_>>(),
            ["A", "b, from the other worker", "C", "A"]
        );
        assert_eq!(
            *model.batches.lock().unwrap(),
            [vec!["a".to_string(), "c".to_string()]],
            "one batch of what it held; the second `a` waited for the first"
        );
        let waited: Vec<bool> = answers.iter().map(|(_, w)| w.is_some()).collect();
        assert_eq!(waited, [false, true, false, true]);
    }
}
