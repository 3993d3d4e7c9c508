//! Images sent with a request ([`ImagePart`]): OpenAI-compatible `image_url` content
//! parts holding `data:` URLs, for vision models behind any OpenAI-compatible server.
//!
//! A [`Request`](super::Request)'s images go with its first user message (the prompt of
//! a sub-call, the task of a child agent): that message's `content` becomes an array, a
//! `text` part then one `image_url` part per image. A request without images is sent as
//! it always was, a plain string. The bytes are shared ([`Arc`]) and encoded in base64
//! only while the body is written; what is kept elsewhere (a trace, the call cache's key)
//! is an [`ImageRecord`]: the name, MIME type, size and SHA-256, never the bytes.

use std::fmt;
use std::sync::{Arc, OnceLock};

use base64::display::Base64Display;
use base64::engine::general_purpose::STANDARD;
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Deserialize, Serialize, Serializer};
use sha2::{Digest, Sha256};

use super::{Message, Role};

/// The most images one request may carry.
pub const MAX_IMAGES_PER_CALL: usize = 16;

/// The largest image sent, in bytes (20 MiB, OpenAI's own limit per image).
pub const MAX_IMAGE_BYTES: usize = 20 * 1024 * 1024;

/// The tokens a window check and a token budget count for one image: what a 1024×1024
/// image costs at OpenAI's high detail (765), rounded up, since the true count depends on
/// the model and the image's size and no server says it before the call.
pub const IMAGE_TOKEN_ESTIMATE: u64 = 1_000;

/// The MIME types an image may have: those OpenAI-compatible vision models read.
pub const IMAGE_MIME_TYPES: &[&str] = &["image/png", "image/jpeg", "image/gif", "image/webp"];

/// The name an image given by the code (`{mime = …, data = …}`) has in a trace.
pub const INLINE_IMAGE_NAME: &str = "(inline)";

/// One image for a vision model: its name (a corpus document's, or none for an image the
/// code made), MIME type and bytes, shared rather than copied.
///
/// ```
/// use rlm_registry::llm::ImagePart;
///
/// let image = ImagePart::new(Some("dot.png".into()), "image/png", vec![1u8, 2, 3])?;
/// assert_eq!(image.data_url().to_string(), "data:image/png;base64,AQID");
/// let record = image.record();
/// assert_eq!((record.name.as_str(), record.bytes), ("dot.png", 3));
/// assert_eq!(record.sha256.len(), 64);
/// assert!(ImagePart::new(None, "image/tiff", vec![1u8]).is_err());
/// assert!(ImagePart::new(None, "image/png", Vec::<u8>::new()).is_err());
/// # Ok::<(), String>(())
/// ```
#[derive(Clone)]
pub struct ImagePart {
    name: Option<String>,
    mime: String,
    data: Arc<[u8]>,
    /// SHA-256 of `data`, computed once when first asked for and shared by the clones: a
    /// corpus of many images hashes only those it sends.
    digest: Arc<OnceLock<[u8; 32]>>,
}

impl ImagePart {
    /// An image, refused when its MIME type is not one of [`IMAGE_MIME_TYPES`], it is
    /// empty or it is larger than [`MAX_IMAGE_BYTES`]; the error says which.
    pub fn new(
        name: Option<String>,
        mime: &str,
        data: impl Into<Arc<[u8]>>,
    ) -> Result<ImagePart, String> {
        let data = data.into();
        if !IMAGE_MIME_TYPES.contains(&mime) {
            return Err(format!(
                "the MIME type {mime:?} is not one a vision model reads (the types are: {})",
                IMAGE_MIME_TYPES.join(", ")
            ));
        }
        if data.is_empty() {
            return Err("the image has no bytes".to_string());
        }
        if data.len() > MAX_IMAGE_BYTES {
            return Err(format!(
                "the image is {} bytes, more than the {} an image may have",
                data.len(),
                MAX_IMAGE_BYTES
            ));
        }
        Ok(ImagePart {
            name,
            mime: mime.to_string(),
            data,
            digest: Arc::default(),
        })
    }

    /// Its name: a corpus document's, `None` for an image the code gave.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// Its MIME type.
    pub fn mime(&self) -> &str {
        &self.mime
    }

    /// Its bytes.
    pub fn data(&self) -> &[u8] {
        &self.data
    }

    /// SHA-256 of its bytes.
    pub fn sha256(&self) -> [u8; 32] {
        *self
            .digest
            .get_or_init(|| Sha256::digest(&self.data).into())
    }

    /// The `data:` URL sent for it, written as it is displayed (no copy of the base64
    /// is kept).
    pub fn data_url(&self) -> impl fmt::Display + '_ {
        DataUrl(self)
    }

    /// What a trace keeps of it: name, MIME type, size and hash.
    pub fn record(&self) -> ImageRecord {
        ImageRecord {
            name: self.name().unwrap_or(INLINE_IMAGE_NAME).to_string(),
            mime: self.mime.clone(),
            bytes: self.data.len() as u64,
            sha256: self.sha256().iter().map(|b| format!("{b:02x}")).collect(),
        }
    }
}

impl fmt::Debug for ImagePart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ImagePart")
            .field("name", &self.name)
            .field("mime", &self.mime)
            .field("bytes", &self.data.len())
            .finish_non_exhaustive()
    }
}

impl PartialEq for ImagePart {
    fn eq(&self, other: &ImagePart) -> bool {
        self.name == other.name && self.mime == other.mime && self.data == other.data
    }
}

impl Eq for ImagePart {}

/// An image as a trace records it: never its bytes.
///
/// ```
/// use rlm_registry::llm::{ImagePart, ImageRecord};
///
/// let record = ImagePart::new(None, "image/gif", vec![0u8; 4])?.record();
/// assert_eq!(record.name, "(inline)");
/// let json = serde_json::to_value(&record).unwrap();
/// assert_eq!(json["bytes"], 4);
/// assert_eq!(serde_json::from_value::<ImageRecord>(json).unwrap(), record);
/// # Ok::<(), String>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ImageRecord {
    /// The corpus document's name, or `"(inline)"` for an image the code gave.
    pub name: String,
    /// Its MIME type.
    pub mime: String,
    /// Its size in bytes.
    pub bytes: u64,
    /// SHA-256 of its bytes, in lowercase hex.
    pub sha256: String,
}

struct DataUrl<'a>(&'a ImagePart);

impl fmt::Display for DataUrl<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let image = self.0;
        write!(
            f,
            "data:{};base64,{}",
            image.mime,
            Base64Display::new(&image.data, &STANDARD)
        )
    }
}

/// A request's messages as the wire carries them: the first user message with the
/// images as content parts, the others as they are.
pub(super) struct WireMessages<'a> {
    pub messages: &'a [Message],
    pub images: &'a [ImagePart],
}

impl Serialize for WireMessages<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let with_images = match self.images {
            [] => None,
            _ => self.messages.iter().position(|m| m.role == Role::User),
        };
        let mut seq = serializer.serialize_seq(Some(self.messages.len()))?;
        for (i, message) in self.messages.iter().enumerate() {
            if Some(i) == with_images {
                seq.serialize_element(&WithParts {
                    text: message.text(),
                    images: self.images,
                })?;
            } else {
                seq.serialize_element(message)?;
            }
        }
        seq.end()
    }
}

/// A user message whose content is parts: its text, then each image.
struct WithParts<'a> {
    text: &'a str,
    images: &'a [ImagePart],
}

impl Serialize for WithParts<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry("role", &Role::User)?;
        map.serialize_entry("content", &Parts(self))?;
        map.end()
    }
}

struct Parts<'a>(&'a WithParts<'a>);

impl Serialize for Parts<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(1 + self.0.images.len()))?;
        seq.serialize_element(&serde_json::json!({"type": "text", "text": self.0.text}))?;
        for image in self.0.images {
            seq.serialize_element(&ImageUrlPart(image))?;
        }
        seq.end()
    }
}

/// `{"type": "image_url", "image_url": {"url": "data:…"}}`, the URL written straight
/// into the body.
struct ImageUrlPart<'a>(&'a ImagePart);

impl Serialize for ImageUrlPart<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry("type", "image_url")?;
        map.serialize_entry("image_url", &Url(self.0))?;
        map.end()
    }
}

struct Url<'a>(&'a ImagePart);

impl Serialize for Url<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(1))?;
        map.serialize_entry("url", &Collected(self.0))?;
        map.end()
    }
}

struct Collected<'a>(&'a ImagePart);

impl Serialize for Collected<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&self.0.data_url())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_user_message_carries_the_images_as_parts() {
        let image = ImagePart::new(Some("a.png".into()), "image/png", vec![255u8, 0]).unwrap();
        let messages = [
            Message::system("s"),
            Message::user("look"),
            Message::user("again"),
        ];
        let wire = WireMessages {
            messages: &messages,
            images: std::slice::from_ref(&image),
        };
        let json = serde_json::to_value(&wire).unwrap();
        assert_eq!(
            json[0],
            serde_json::json!({"role": "system", "content": "s"})
        );
        assert_eq!(
            json[1],
            serde_json::json!({"role": "user", "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,/wA="}}
            ]})
        );
        assert_eq!(
            json[2],
            serde_json::json!({"role": "user", "content": "again"})
        );
    }

    #[test]
    fn without_images_the_messages_are_as_they_were() {
        let messages = [Message::user("plain")];
        let wire = WireMessages {
            messages: &messages,
            images: &[],
        };
        assert_eq!(
            serde_json::to_string(&wire).unwrap(),
            serde_json::to_string(&messages).unwrap()
        );
    }

    #[test]
    fn an_image_too_large_is_refused_with_the_cap() {
        let error = ImagePart::new(None, "image/png", vec![0u8; MAX_IMAGE_BYTES + 1]).unwrap_err();
        assert!(error.contains(&MAX_IMAGE_BYTES.to_string()), "{error}");
    }
}
