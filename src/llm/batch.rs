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
///         Ok(Completion::new(request.messages[0].content.to_uppercase()))
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
    let count = requests.len();
    let workers = max_concurrency.clamp(1, count.max(1));
    if workers <= 1 {
        return requests
            .into_iter()
            .map(|request| llm.complete(request))
            .collect();
    }
    let queue = Mutex::new(requests.into_iter().enumerate());
    let work = || {
        let mut done = Vec::new();
        loop {
            // A worker that panicked holds no lock while calling `llm`, so the queue
            // is never left half-updated: a poisoned lock is safe to use.
            let next = queue.lock().unwrap_or_else(PoisonError::into_inner).next();
            let Some((index, request)) = next else {
                return done;
            };
            done.push((index, llm.complete(request)));
        }
    };
    let mut slots: Vec<Option<Result<Completion, LlmError>>> = Vec::with_capacity(count);
    slots.resize_with(count, || None);
    thread::scope(|scope| {
        let helpers: Vec<_> = (1..workers)
            .map_while(|_| {
                thread::Builder::new()
                    .name("rlm-llm-batch".to_string())
                    .spawn_scoped(scope, work)
                    .ok()
            })
            .collect();
        let mut finished = vec![work()];
        for helper in helpers {
            match helper.join() {
                Ok(done) => finished.push(done),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        for (index, result) in finished.into_iter().flatten() {
            slots[index] = Some(result);
        }
    });
    slots
        .into_iter()
        .map(|slot| slot.expect("every request of the batch was taken by a worker"))
        .collect()
}
