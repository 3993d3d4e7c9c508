//! Model layers: an [`Llm`] in front of another (metering, logging, caching), written as
//! an [`LlmLayer`] and made an [`Llm`] by the one impl here, which forwards every method
//! of [`Llm`] the layer does not change. The smart pointers (`&T`, `Box<T>`, `Arc<T>`,
//! anything that dereferences to an [`Llm`]) are layers that change nothing.
//!
//! A layer states what it does to one call and to a batch ([`LlmLayer::call`],
//! [`LlmLayer::batch`]); both are required, so a layer cannot forget one. The rest of
//! [`Llm`] (the concurrency, the model's name, and whichever method comes next) goes to
//! the inner model here, once for every layer: the test at the end of this file fails
//! when [`Llm`] gains a method this impl does not forward.

use std::ops::Deref;

use super::{Completion, Llm, LlmError, ModelInfo, Request};

/// The answers of a batch, in the order of its requests.
pub type BatchResults = Vec<Result<Completion, LlmError>>;

/// An [`Llm`] in front of another: every type that implements this is an [`Llm`], with
/// [`Llm::max_concurrency`] and [`Llm::model_info`] (and any later method of [`Llm`])
/// those of [`LlmLayer::inner`]. A batch reaches the inner model through the `send` the
/// layer is given, which keeps the batch's kind: [`Llm::complete_batch`] at the inner
/// model's own concurrency, [`Llm::complete_batch_at`] at the caller's.
///
/// ```
/// use std::sync::Mutex;
/// use rlm_registry::llm::{
///     BatchResults, Completion, Llm, LlmClient, LlmConfig, LlmError, LlmLayer, Request,
/// };
///
/// /// Counts what goes through it.
/// struct Counted<L> {
///     inner: L,
///     requests: Mutex<usize>,
/// }
///
/// impl<L: Llm> LlmLayer for Counted<L> {
///     type Inner = L;
///
///     fn inner(&self) -> &L {
///         &self.inner
///     }
///
///     fn call(&self, request: Request) -> Result<Completion, LlmError> {
///         *self.requests.lock().unwrap() += 1;
///         self.inner.complete(request)
///     }
///
///     fn batch(
///         &self,
///         requests: Vec<Request>,
///         send: impl FnOnce(Vec<Request>) -> BatchResults,
///     ) -> BatchResults {
///         *self.requests.lock().unwrap() += requests.len();
///         send(requests)
///     }
/// }
///
/// let client = LlmClient::new(LlmConfig::new("http://127.0.0.1:8080/v1", "m").with_max_concurrency(4))?;
/// let counted = Counted { inner: client, requests: Mutex::new(0) };
/// // Forwarded without a line of the layer's own: a batch still goes out four at a time.
/// assert_eq!(counted.max_concurrency(), 4);
/// assert_eq!(counted.model_info().unwrap().model, "m");
/// # Ok::<(), LlmError>(())
/// ```
pub trait LlmLayer: Send + Sync {
    /// The model behind the layer.
    type Inner: Llm + ?Sized;

    /// The model behind the layer, which answers what the layer does not change.
    fn inner(&self) -> &Self::Inner;

    /// One request ([`Llm::complete`]): the layer's work around
    /// `self.inner().complete(request)`.
    fn call(&self, request: Request) -> Result<Completion, LlmError>;

    /// A batch ([`Llm::complete_batch`] and [`Llm::complete_batch_at`]): the layer's work
    /// around `send`, which sends the requests it is given to the inner model, in one
    /// batch, and returns their answers in order. A layer that does nothing to a batch as
    /// a whole returns `send(requests)`; one that answers some requests itself sends the
    /// others and puts every answer back in its request's place.
    fn batch(
        &self,
        requests: Vec<Request>,
        send: impl FnOnce(Vec<Request>) -> BatchResults,
    ) -> BatchResults;

    /// [`Llm::cached_answer`]: the inner model's, unless the layer holds answers itself
    /// (a cache). A look only: the answer still comes through [`LlmLayer::call`], so a
    /// layer that logs calls sees it then.
    fn answer_from_cache(&self, request: &Request) -> Option<Completion> {
        self.inner().cached_answer(request)
    }
}

/// Every layer is an [`Llm`]: the calls go through its hooks, the rest to its inner model.
impl<L: LlmLayer> Llm for L {
    fn complete(&self, request: Request) -> Result<Completion, LlmError> {
        self.call(request)
    }

    fn complete_batch(&self, requests: Vec<Request>) -> BatchResults {
        self.batch(requests, |requests| self.inner().complete_batch(requests))
    }

    fn max_concurrency(&self) -> usize {
        self.inner().max_concurrency()
    }

    fn complete_batch_at(&self, requests: Vec<Request>, max_concurrency: usize) -> BatchResults {
        self.batch(requests, |requests| {
            self.inner().complete_batch_at(requests, max_concurrency)
        })
    }

    fn model_info(&self) -> Option<ModelInfo> {
        self.inner().model_info()
    }

    fn cached_answer(&self, request: &Request) -> Option<Completion> {
        self.answer_from_cache(request)
    }
}

/// A pointer to a model (`&T`, `Box<T>`, `Arc<T>`, `Arc<dyn Llm>`) is that model: a
/// layer that changes nothing.
///
/// ```
/// use std::sync::Arc;
/// use rlm_registry::llm::{Completion, Llm, LlmError, Request};
///
/// struct Echo;
/// impl Llm for Echo {
///     fn complete(&self, request: Request) -> Result<Completion, LlmError> {
///         Ok(Completion::new(request.messages[0].text()))
///     }
///     fn max_concurrency(&self) -> usize {
///         3
///     }
/// }
///
/// let shared: Arc<dyn Llm> = Arc::new(Echo);
/// let boxed: Box<dyn Llm> = Box::new(Arc::clone(&shared));
/// assert_eq!((&boxed).max_concurrency(), 3);
/// assert_eq!(boxed.complete("hi".into())?.content, "hi");
/// # Ok::<(), LlmError>(())
/// ```
impl<P> LlmLayer for P
where
    P: Deref + Send + Sync,
    P::Target: Llm,
{
    type Inner = P::Target;

    fn inner(&self) -> &P::Target {
        self
    }

    fn call(&self, request: Request) -> Result<Completion, LlmError> {
        self.inner().complete(request)
    }

    fn batch(
        &self,
        requests: Vec<Request>,
        send: impl FnOnce(Vec<Request>) -> BatchResults,
    ) -> BatchResults {
        send(requests)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    use super::*;

    /// The names of the `fn`s between `start` and the end of its block.
    fn methods_of(source: &str, start: &str) -> Vec<String> {
        // Comments hold examples whose braces and `fn`s are not the block's.
        let source: String = source
            .lines()
            .filter(|line| !line.trim_start().starts_with("//"))
            .flat_map(|line| [line, "\n"])
            .collect();
        let at = source
            .find(start)
            .unwrap_or_else(|| panic!("`{start}` in the source"));
        let mut depth = 0usize;
        let mut end = source.len();
        for (i, c) in source[at..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = at + i;
                        break;
                    }
                }
                _ => {}
            }
        }
        let mut names: Vec<String> = source[at..end]
            .lines()
            .filter_map(|line| line.trim().strip_prefix("fn "))
            .filter_map(|rest| rest.split(['(', '<']).next())
            .map(str::to_string)
            .collect();
        names.sort();
        names
    }

    #[test]
    fn the_layer_impl_forwards_every_method_of_llm() {
        let trait_methods = methods_of(include_str!("mod.rs"), "pub trait Llm: Send + Sync {");
        assert!(trait_methods.len() >= 5, "{trait_methods:?}");
        let forwarded = methods_of(include_str!("layer.rs"), "impl<L: LlmLayer> Llm for L {");
        assert_eq!(
            forwarded, trait_methods,
            "a method of `Llm` that the layer impl does not forward would be the default's \
             in every layer, the inner model's setting lost"
        );
    }

    /// Every method of [`Llm`] answered distinctly, and what reached it.
    struct Inner {
        batches: Mutex<Vec<(usize, Option<usize>)>>,
    }

    impl Llm for Inner {
        fn complete(&self, request: Request) -> Result<Completion, LlmError> {
            Ok(Completion::new(format!(
                "one {}",
                request.messages[0].text()
            )))
        }

        fn complete_batch(&self, requests: Vec<Request>) -> BatchResults {
            self.batches.lock().unwrap().push((requests.len(), None));
            requests.into_iter().map(|r| self.complete(r)).collect()
        }

        fn max_concurrency(&self) -> usize {
            4
        }

        fn complete_batch_at(&self, requests: Vec<Request>, at: usize) -> BatchResults {
            self.batches
                .lock()
                .unwrap()
                .push((requests.len(), Some(at)));
            requests.into_iter().map(|r| self.complete(r)).collect()
        }

        fn model_info(&self) -> Option<ModelInfo> {
            Some(ModelInfo::new("inner", "http://inner"))
        }
    }

    /// Answers requests that say "skip" itself, the rest through the inner model.
    struct Skipping<L> {
        inner: L,
        calls: AtomicUsize,
    }

    impl<L: Llm> LlmLayer for Skipping<L> {
        type Inner = L;

        fn inner(&self) -> &L {
            &self.inner
        }

        fn call(&self, request: Request) -> Result<Completion, LlmError> {
            self.calls.fetch_add(1, Ordering::Relaxed);
            self.inner.complete(request)
        }

        fn batch(
            &self,
            requests: Vec<Request>,
            send: impl FnOnce(Vec<Request>) -> BatchResults,
        ) -> BatchResults {
            let sent: Vec<Request> = requests
                .iter()
                .filter(|r| r.messages[0].text() != "skip")
                .cloned()
                .collect();
            let mut answers = send(sent).into_iter();
            requests
                .iter()
                .map(|r| match r.messages[0].text() {
                    "skip" => Ok(Completion::new("skipped")),
                    _ => answers.next().unwrap(),
                })
                .collect()
        }
    }

    #[test]
    fn a_layer_keeps_the_inner_models_settings_and_each_batchs_kind() {
        let inner = Arc::new(Inner {
            batches: Mutex::default(),
        });
        // Layers on layers, through every kind of pointer.
        let layered: Box<dyn Llm> = Box::new(Skipping {
            inner: Skipping {
                inner: Arc::clone(&inner) as Arc<dyn Llm>,
                calls: AtomicUsize::new(0),
            },
            calls: AtomicUsize::new(0),
        });
        let llm = &&layered;
        assert_eq!(llm.max_concurrency(), 4);
        assert_eq!(llm.model_info().unwrap().model, "inner");
        assert_eq!(llm.complete("q".into()).unwrap().content, "one q");
        let texts = |answers: BatchResults| -> Vec<String> {
            answers.into_iter().map(|a| a.unwrap().content).collect()
        };
        let requests = || vec![Request::from("a"), "skip".into(), "b".into()];
        assert_eq!(
            texts(llm.complete_batch(requests())),
            ["one a", "skipped", "one b"]
        );
        assert_eq!(
            texts(llm.complete_batch_at(requests(), 2)),
            ["one a", "skipped", "one b"]
        );
        assert_eq!(*inner.batches.lock().unwrap(), [(2, None), (2, Some(2))]);
    }
}
