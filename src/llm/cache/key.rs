//! The key of a request in the cache: SHA-256 of the request as sent.

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::llm::{Message, ModelInfo, ReasoningEffort, Request};

/// The key of one request: SHA-256 of the request as sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CacheKey([u8; 32]);

/// What the key hashes: every field the server sees.
#[derive(Serialize)]
struct KeyedRequest<'a> {
    endpoint: &'a str,
    model: &'a str,
    messages: &'a [Message],
    temperature: Option<f32>,
    max_tokens: Option<u32>,
    tools: &'a [serde_json::Value],
    // Left out when unset, so that the keys of requests without it are what they were
    // before it existed.
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_effort: Option<ReasoningEffort>,
    // The images' types and hashes, not their bytes (nor their names, which are not
    // sent); left out when there are none, as above.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    images: Vec<(&'a str, [u8; 32])>,
}

impl CacheKey {
    /// The key of `request` sent to `endpoint` for `model` (the request's own model
    /// wins). Tools are part of the key for conversations that send them; plain
    /// completions send none.
    ///
    /// ```
    /// use rlm_registry::llm::{CacheKey, ImagePart, Request};
    ///
    /// let key = |r: Request| CacheKey::of("http://h/v1", "m", &r);
    /// assert_eq!(key("hi".into()), key("hi".into()));
    /// assert_ne!(key("hi".into()), key(Request::from("hi").with_temperature(0.5)));
    /// assert_ne!(key("hi".into()), key(Request::from("hi").with_model("other")));
    /// assert_eq!(key("hi".into()), key(Request::from("hi").fresh_sample()), "not sent");
    /// let image = |byte: u8| ImagePart::new(None, "image/png", vec![byte]).unwrap();
    /// let seeing = |byte| key(Request::from("hi").with_images(vec![image(byte)]));
    /// assert_ne!(seeing(1), seeing(2));
    /// assert_ne!(seeing(1), key("hi".into()));
    /// ```
    pub fn of(endpoint: &str, model: &str, request: &Request) -> CacheKey {
        CacheKey::sent(&ModelInfo::new(model, endpoint), request)
    }

    /// The key of `request` as a client described by `info` sends it: with the client's
    /// reply limit when the request sets none, and its reasoning effort, since both
    /// change the answer.
    ///
    /// ```
    /// use rlm_registry::llm::{CacheKey, ModelInfo, ReasoningEffort, Request};
    ///
    /// let plain = ModelInfo::new("m", "http://h/v1");
    /// let limited = ModelInfo { max_reply_tokens: Some(64), ..plain.clone() };
    /// let hi = Request::from("hi");
    /// assert_eq!(CacheKey::sent(&plain, &hi), CacheKey::of("http://h/v1", "m", &hi));
    /// assert_eq!(CacheKey::sent(&limited, &hi), CacheKey::sent(&plain, &hi.clone().with_max_tokens(64)));
    /// let thinking = ModelInfo { reasoning_effort: Some(ReasoningEffort::High), ..plain.clone() };
    /// assert_ne!(CacheKey::sent(&thinking, &hi), CacheKey::sent(&plain, &hi));
    /// ```
    pub fn sent(info: &ModelInfo, request: &Request) -> CacheKey {
        let keyed = KeyedRequest {
            endpoint: &info.base_url,
            model: request.model.as_deref().unwrap_or(&info.model),
            messages: &request.messages,
            temperature: request.temperature,
            max_tokens: request.max_tokens.or(info.max_reply_tokens),
            tools: &[],
            reasoning_effort: info.reasoning_effort,
            images: request
                .images
                .iter()
                .map(|image| (image.mime(), image.sha256()))
                .collect(),
        };
        // Serializing plain data cannot fail; an empty body would still be a stable key.
        let body = serde_json::to_vec(&keyed).unwrap_or_default();
        CacheKey(Sha256::digest(&body).into())
    }

    /// The key's 32 bytes, as a store keeps them.
    ///
    /// ```
    /// use rlm_registry::llm::CacheKey;
    ///
    /// let key = CacheKey::of("http://h/v1", "m", &"hi".into());
    /// assert_eq!(key.as_bytes().len(), 32);
    /// assert_ne!(key.as_bytes(), CacheKey::of("http://h/v1", "m", &"ho".into()).as_bytes());
    /// ```
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}
