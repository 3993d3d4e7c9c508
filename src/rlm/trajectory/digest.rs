//! [`ContextDigest`]: what identifies a context in a trace without holding it.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::super::context::Context;

/// What identifies an agent's context without holding it: a replay checks it is given
/// the same one.
///
/// ```
/// use rlm_registry::rlm::Context;
/// use rlm_registry::rlm::trajectory::ContextDigest;
///
/// let digest = ContextDigest::of(&Context::from("abc"));
/// assert_eq!(digest.sha256, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
/// assert_eq!((digest.bytes, digest.chunks), (3, None));
/// let chunks = ContextDigest::of(&Context::from(vec!["a", "bc"]));
/// assert_eq!(chunks.sha256, digest.sha256, "the chunks' bytes in order");
/// assert_eq!(chunks.chunks, Some(vec![1, 2]));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextDigest {
    /// SHA-256 of the context's bytes, in lowercase hex; for a list of chunks, of their
    /// bytes one after the other, in order (`chunks` tells where each ends).
    pub sha256: String,
    /// Bytes in all.
    pub bytes: u64,
    /// The size of each chunk in bytes, for a list of chunks; `None` for one text.
    pub chunks: Option<Vec<u64>>,
}

impl ContextDigest {
    /// The digest of `context`.
    pub fn of(context: &Context) -> ContextDigest {
        let mut hasher = Sha256::new();
        let chunks = match context {
            Context::Text(text) => {
                hasher.update(text);
                None
            }
            Context::Chunks(chunks) => {
                chunks.iter().for_each(|chunk| hasher.update(chunk));
                Some(chunks.iter().map(|chunk| chunk.len() as u64).collect())
            }
            Context::Corpus(corpus) => {
                // Names, kinds, texts and images' bytes, each with its length first, so
                // that moving bytes from one to the next changes the hash.
                for document in &corpus.documents {
                    let image = document.image.as_ref().map_or(&[][..], |i| &i.data[..]);
                    let parts = [
                        document.name.as_bytes(),
                        document.kind.as_str().as_bytes(),
                        &document.text,
                        image,
                    ];
                    for part in parts {
                        hasher.update((part.len() as u64).to_le_bytes());
                        hasher.update(part);
                    }
                }
                Some(
                    corpus
                        .documents
                        .iter()
                        .map(|d| d.text.len() as u64)
                        .collect(),
                )
            }
        };
        ContextDigest {
            sha256: hasher
                .finalize()
                .iter()
                .map(|byte| format!("{byte:02x}"))
                .collect(),
            bytes: context.total_bytes() as u64,
            chunks,
        }
    }
}
