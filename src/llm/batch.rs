//! Running many requests at once: scoped threads pulling from a shared queue.

use std::sync::{Mutex, PoisonError};
use std::thread;

use super::{Completion, Llm, LlmError, Request};

/// Sends every request through `llm`, at most `max_concurrency` at once (at least 1),
/// and returns the results in the order of `requests`. Uses scoped threads: nothing
/// outlives the call. The calling thread works too, so the batch completes even if no
/// thread can be spawned. A panic inside `llm` is propagated.
///
/// [`Llm::complete_batch`] and [`LlmClient::complete_batch`](super::LlmClient::complete_batch)
/// use it; so can any other [`Llm`].
///
/// ```
/// use rlm_registry::llm::{run_batch, Completion, Llm, LlmError, Request};
///
/// struct Shout;
/// impl Llm for Shout {
///     fn complete(&self, request: Request) -> Result<Completion, LlmError> {
///         Ok(Completion::new(request.messages[0].text().to_uppercase()))
///     }
/// }
///
/// let requests = vec![Request::from("a"), Request::from("b"), Request::from("c")];
/// let answers: Vec<String> = run_batch(&Shout, requests, 2)
///     .into_iter()
///     .map(|result| result.unwrap().content)
///     .collect();
/// assert_eq!(answers, ["A", "B", "C"]);
/// ```
pub fn run_batch<L: Llm + ?Sized>(
    llm: &L,
    requests: Vec<Request>,
    max_concurrency: usize,
) -> Vec<Result<Completion, LlmError>> {
    map_concurrently(requests, max_concurrency, |request| llm.complete(request))
}

/// Applies `f` to every item, at most `max_concurrency` at once (at least 1), and
/// returns the results in the order of `items`: the shape of every batch of model calls
/// (`run_batch`, `rlm search --queries` in an LLM mode). Scoped threads pull items from
/// a shared queue; the calling thread works too, so the batch completes even if no
/// thread can be spawned. A panic inside `f` is propagated.
///
/// ```
/// use rlm_registry::llm::map_concurrently;
///
/// let lengths = map_concurrently(vec!["a", "bb", "ccc"], 2, |s| s.len());
/// assert_eq!(lengths, [1, 2, 3]);
/// ```
pub fn map_concurrently<T: Send, R: Send>(
    items: Vec<T>,
    max_concurrency: usize,
    f: impl Fn(T) -> R + Sync,
) -> Vec<R> {
    let workers = max_concurrency.clamp(1, items.len().max(1));
    if workers <= 1 {
        return items.into_iter().map(f).collect();
    }
    let queue = Mutex::new(items.into_iter().enumerate());
    let work = || {
        let mut done = Vec::new();
        loop {
            // A worker that panicked holds no lock while running `f`, so the queue is
            // never left half-updated: a poisoned lock is safe to use.
            let next = queue.lock().unwrap_or_else(PoisonError::into_inner).next();
            let Some((index, item)) = next else {
                return done;
            };
            done.push((index, f(item)));
        }
    };
    let mut finished = thread::scope(|scope| {
        let helpers: Vec<_> = (1..workers)
            .map_while(|_| {
                thread::Builder::new()
                    .name("rlm-batch".to_string())
                    .spawn_scoped(scope, work)
                    .ok()
            })
            .collect();
        let mut finished = work();
        for helper in helpers {
            match helper.join() {
                Ok(done) => finished.extend(done),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        finished
    });
    // Every index was taken exactly once, so sorting restores the input order.
    finished.sort_unstable_by_key(|(index, _)| *index);
    finished.into_iter().map(|(_, result)| result).collect()
}
