//! The model calls a block's code makes, written down as they are made: [`Logged`] wraps
//! the model an agent's environment calls and keeps, per call, the request's messages and
//! what came back, so that the block's trace record lists them (the `sub_calls` of
//! [`trajectory`](super::trajectory)) and a replay can answer them again.

use std::sync::{Arc, Mutex};

use crate::llm::{
    BatchResults, Completion, Llm, LlmError, LlmLayer, ModelInfo, Price, Request, call_cost,
    run_batch,
};

use super::recorder::Recorder;
use super::trajectory::{CallRecord, Record, SubCall};

/// The calls of one agent since they were last taken: its environment runs one block at a
/// time, so what is taken after a block is that block's.
#[derive(Default)]
pub(super) struct CallLog {
    calls: Mutex<Vec<SubCall>>,
    /// The turn and block running now, for the `call` lines.
    at: Mutex<(u32, usize)>,
}

impl CallLog {
    /// The calls from now on are block `block` of turn `turn`'s.
    pub fn at(&self, turn: u32, block: usize) {
        *self.at.lock().unwrap_or_else(|p| p.into_inner()) = (turn, block);
    }

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

/// A model whose every answer is written to the trace as it arrives, a `call` line, so
/// that a run killed mid-block keeps it. A batch is sent one request at a time, at most
/// the batch's concurrency at once, so that each answer is written when it comes, not
/// when the slowest of the batch does.
pub(super) struct Progress {
    pub inner: Arc<dyn Llm>,
    pub log: Arc<CallLog>,
    pub recorder: Arc<Recorder>,
    pub agent: String,
}

impl Llm for Progress {
    fn complete(&self, request: Request) -> Result<Completion, LlmError> {
        let asked = asked(&request);
        let result = self.inner.complete(request);
        let (turn, block) = *self.log.at.lock().unwrap_or_else(|p| p.into_inner());
        // A trace that cannot be written fails the turn when its `turn` line is written;
        // the call is not failed for it.
        let _ = self.recorder.record(Record::Call(CallRecord {
            agent: self.agent.clone(),
            turn,
            block,
            call: SubCall::sent(&asked, &result),
            at_ms: None,
        }));
        result
    }

    fn complete_batch(&self, requests: Vec<Request>) -> BatchResults {
        run_batch(self, requests, self.inner.max_concurrency())
    }

    fn complete_batch_at(&self, requests: Vec<Request>, max_concurrency: usize) -> BatchResults {
        run_batch(self, requests, max_concurrency)
    }

    fn max_concurrency(&self) -> usize {
        self.inner.max_concurrency()
    }

    fn model_info(&self) -> Option<ModelInfo> {
        self.inner.model_info()
    }
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
