//! The model calls a block's code makes, written down as they are made: [`Logged`] wraps
//! the model an agent's environment calls and keeps, per call, the request's messages and
//! what came back, so that the block's trace record lists them (the `sub_calls` of
//! [`trajectory`](super::trajectory)) and a replay can answer them again.

use std::sync::{Arc, Mutex};

use crate::llm::{BatchResults, Completion, Llm, LlmError, LlmLayer, Price, Request, call_cost};

use super::trajectory::SubCall;

/// The calls of one agent since they were last taken: its environment runs one block at a
/// time, so what is taken after a block is that block's.
#[derive(Default)]
pub(super) struct CallLog {
    calls: Mutex<Vec<SubCall>>,
}

impl CallLog {
    /// The calls logged since the last `take`, in the order they were made.
    pub fn take(&self) -> Vec<SubCall> {
        std::mem::take(&mut *self.lock())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<SubCall>> {
        self.calls
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// A model whose every call is logged in `log`; a batch is logged in its order.
pub(super) struct Logged {
    pub inner: Arc<dyn Llm>,
    pub log: Arc<CallLog>,
    /// The model's price, for the cost of a call whose server reports none.
    pub price: Option<Price>,
}

impl LlmLayer for Logged {
    type Inner = dyn Llm;

    fn inner(&self) -> &Self::Inner {
        &*self.inner
    }

    fn call(&self, request: Request) -> Result<Completion, LlmError> {
        let asked = asked(&request);
        let result = self.inner.complete(request);
        self.log.lock().push(self.entry(&asked, &result));
        result
    }

    fn batch(
        &self,
        requests: Vec<Request>,
        send: impl FnOnce(Vec<Request>) -> BatchResults,
    ) -> BatchResults {
        self.logged_in_order(requests, send)
    }
}

impl Logged {
    /// The record of a call, with what it cost this run where known.
    fn entry(&self, asked: &Request, result: &Result<Completion, LlmError>) -> SubCall {
        let mut call = SubCall::sent(asked, result);
        call.cost = result
            .as_ref()
            .ok()
            .and_then(|completion| call_cost(completion, self.price));
        call
    }

    /// Sends a batch through `send` and logs it in the batch's order, not the order its
    /// answers came in: a replay answers it in that order.
    fn logged_in_order(
        &self,
        requests: Vec<Request>,
        send: impl FnOnce(Vec<Request>) -> Vec<Result<Completion, LlmError>>,
    ) -> Vec<Result<Completion, LlmError>> {
        let asked: Vec<Request> = requests.iter().map(asked).collect();
        let results = send(requests);
        self.log.lock().extend(
            asked
                .iter()
                .zip(&results)
                .map(|(asked, result)| self.entry(asked, result)),
        );
        results
    }
}

/// What a trace keeps of a request before it is sent: its messages and its images
/// (shared, not copied).
fn asked(request: &Request) -> Request {
    Request::new(request.messages.clone()).with_images(request.images.clone())
}
