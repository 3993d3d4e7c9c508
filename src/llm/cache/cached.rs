//! [`Cached`]: the model layer in front of a [`CacheStore`].

use std::sync::Arc;

use super::{CacheKey, CacheStore};
use crate::llm::{BatchResults, Completion, Llm, LlmError, LlmLayer, ModelInfo, Request};

/// An [`Llm`] that answers from a [`CacheStore`] when it can and asks `inner` otherwise,
/// storing each new answer. The key names the server, the model and the reply limit and
/// reasoning effort `inner` reports ([`Llm::model_info`]; empty for a fake that reports
/// none). A request marked
/// [`Request::fresh`] always goes to `inner`; a batch sends only its misses, in one batch
/// of the same kind (at `inner`'s concurrency, or at the caller's), and its answers come
/// back in the order of the requests. As every [`LlmLayer`], it has `inner`'s
/// [`Llm::max_concurrency`] and [`Llm::model_info`].
pub struct Cached<L> {
    inner: L,
    cache: Arc<dyn CacheStore>,
    /// What the key names besides the request: the server, the model and the settings
    /// the client adds to every request.
    sent_to: ModelInfo,
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
        }
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

impl<L: Llm> LlmLayer for Cached<L> {
    type Inner = L;

    fn inner(&self) -> &L {
        &self.inner
    }

    fn call(&self, request: Request) -> Result<Completion, LlmError> {
        let key = self.key(&request);
        if let Some(hit) = self.lookup(&request, &key) {
            return Ok(hit);
        }
        let result = self.inner.complete(request);
        self.remember(&key, &result);
        result
    }

    fn batch(
        &self,
        requests: Vec<Request>,
        send: impl FnOnce(Vec<Request>) -> BatchResults,
    ) -> BatchResults {
        let mut answers: Vec<Option<Result<Completion, LlmError>>> = Vec::new();
        let mut missed = Vec::new();
        for request in requests {
            let key = self.key(&request);
            let hit = self.lookup(&request, &key);
            if hit.is_none() {
                missed.push((answers.len(), key, request));
            }
            answers.push(hit.map(Ok));
        }
        let (slots, sent): (Vec<_>, Vec<_>) = missed
            .into_iter()
            .map(|(slot, key, request)| ((slot, key), request))
            .unzip();
        // A batch of hits sends nothing: not even an empty batch, which a model may count.
        let mut results = if sent.is_empty() {
            Vec::new().into_iter()
        } else {
            send(sent).into_iter()
        };
        for (slot, key) in slots {
            let result = results.next().unwrap_or_else(|| {
                Err(LlmError::Config(
                    "the model returned fewer answers than prompts".to_string(),
                ))
            });
            self.remember(&key, &result);
            answers[slot] = Some(result);
        }
        answers.into_iter().flatten().collect()
    }

    fn answer_from_cache(&self, request: &Request) -> Option<Completion> {
        self.lookup(request, &self.key(request))
    }
}
