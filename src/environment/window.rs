//! A model's context window, and whether a request fits it: the one check the loop
//! makes before an agent's first request and the built-ins make before every sub-call.

use crate::llm::{Message, Request};
use crate::tokens;

/// A model's context window, in tokens.
///
/// ```
/// use rlm_registry::environment::ContextWindow;
/// use rlm_registry::llm::Request;
///
/// let window = ContextWindow(2_000);
/// assert!(window.check(&Request::from("a short question"), None).is_ok());
/// let long = Request::from("word ".repeat(1_500).as_str());
/// let overflow = window.check(&long, None).unwrap_err();
/// // 1,024 tokens are kept for the reply when nothing sets a reply limit.
/// assert_eq!(overflow.reply_reserve, 1_024);
/// assert!(overflow.request_tokens + overflow.reply_reserve > 2_000);
/// // The client's reply limit (`--max-reply-tokens 256`), for a request without its own.
/// assert!(window.check(&long, Some(256)).is_ok());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContextWindow(pub u64);

/// A request that does not fit a [`ContextWindow`]: its tokens, the room kept for the
/// reply, and the window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Overflow {
    /// The request's messages, counted with `o200k_base` as a chat.
    pub request_tokens: u64,
    /// The most the reply may take ([`Request::reply_reserve`]).
    pub reply_reserve: u64,
    /// The window.
    pub window: u64,
}

impl ContextWindow {
    /// `Ok` when `request` and the room kept for its reply fit the window: the
    /// request's `max_tokens`, else `reply_limit` (the client's
    /// [`max_reply_tokens`](crate::llm::LlmConfig::max_reply_tokens), which it sends with
    /// such a request), else [`DEFAULT_REPLY_RESERVE`](crate::llm::DEFAULT_REPLY_RESERVE).
    pub fn check(self, request: &Request, reply_limit: Option<u32>) -> Result<(), Overflow> {
        let request_tokens = request_tokens(request);
        let reply_reserve = reply_reserve(request, reply_limit);
        if request_tokens.saturating_add(reply_reserve) <= self.0 {
            return Ok(());
        }
        Err(Overflow {
            request_tokens,
            reply_reserve,
            window: self.0,
        })
    }
}

/// The tokens kept for `request`'s reply when the client adds `reply_limit` to requests
/// without their own.
pub fn reply_reserve(request: &Request, reply_limit: Option<u32>) -> u64 {
    match request.max_tokens {
        Some(_) => request.reply_reserve(),
        None => reply_limit.map_or_else(|| request.reply_reserve(), u64::from),
    }
}

/// The tokens of `request`'s messages, counted as a chat, and of its images
/// ([`Request::image_tokens`], an estimate).
pub fn request_tokens(request: &Request) -> u64 {
    let text = tokens::count_chat(request.messages.iter().map(Message::text)) as u64;
    text.saturating_add(request.image_tokens())
}
