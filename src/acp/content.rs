//! A prompt's content blocks as the loop takes them: the text blocks are the question;
//! embedded resources and `file://` resource links are documents added to the context.

use std::path::PathBuf;

use crate::corpus::{Document, Gathered, gather};

use super::schema::ContentBlock;
use super::wire::{INVALID_PARAMS, RpcError};

/// A prompt, read.
#[derive(Debug, Default)]
pub(crate) struct Prompt {
    /// The text blocks, joined by blank lines.
    pub question: String,
    /// The resources' texts and the linked files, each named by its URI (a linked
    /// folder's files by their paths under it).
    pub documents: Vec<Document>,
}

/// Reads `blocks`; a block the agent cannot take (an image, a binary resource, a link
/// that is not a readable `file://` URI) is an invalid-params error naming it.
pub(crate) fn read(blocks: Vec<ContentBlock>) -> Result<Prompt, RpcError> {
    let mut texts = Vec::new();
    let mut documents = Vec::new();
    for block in blocks {
        match block {
            ContentBlock::Text { text } => texts.push(text),
            ContentBlock::Resource { resource } => match resource.text {
                Some(text) => documents.push(Document::text(resource.uri, text)),
                None => {
                    return Err(invalid(format!(
                        "resource {}: only text resources can be read (this one is a blob)",
                        resource.uri
                    )));
                }
            },
            ContentBlock::ResourceLink { uri, .. } => documents.extend(linked(&uri)?),
            ContentBlock::Unsupported => {
                return Err(invalid(
                    "image and audio content is not supported (see promptCapabilities)",
                ));
            }
        }
    }
    let question = texts.join("\n\n");
    if question.trim().is_empty() {
        return Err(invalid("the prompt has no text block: nothing to answer"));
    }
    Ok(Prompt {
        question,
        documents,
    })
}

fn invalid(message: impl Into<String>) -> RpcError {
    RpcError::new(INVALID_PARAMS, message)
}

/// The documents of a `file://` link: the file, or a folder's files.
fn linked(uri: &str) -> Result<Vec<Document>, RpcError> {
    let path = file_path(uri).ok_or_else(|| {
        invalid(format!(
            "resource link {uri}: only file:// links can be read; embed the resource instead"
        ))
    })?;
    match gather(std::slice::from_ref(&path)) {
        Ok(Gathered::Text(text)) => Ok(vec![Document::text(uri, text)]),
        Ok(Gathered::Corpus(corpus)) => Ok(corpus.documents),
        Err(error) => Err(invalid(format!("resource link {uri}: {error}"))),
    }
}

/// The local path of a `file://` URI (`file:///a%20b`, `file://localhost/a`), its
/// percent-escapes decoded; `None` for another scheme, a remote host, or bad escapes.
fn file_path(uri: &str) -> Option<PathBuf> {
    let rest = uri.strip_prefix("file://")?;
    let path = rest.strip_prefix("localhost").unwrap_or(rest);
    if !path.starts_with('/') {
        return None;
    }
    let mut bytes = Vec::with_capacity(path.len());
    let mut raw = path.bytes();
    while let Some(byte) = raw.next() {
        if byte != b'%' {
            bytes.push(byte);
            continue;
        }
        let hex = [raw.next()?, raw.next()?];
        let hex = std::str::from_utf8(&hex).ok()?;
        bytes.push(u8::from_str_radix(hex, 16).ok()?);
    }
    String::from_utf8(bytes).ok().map(PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acp::schema::EmbeddedResource;

    #[test]
    fn text_blocks_are_the_question_and_resources_are_documents_named_by_uri() {
        let prompt = read(vec![
            ContentBlock::text("What does it say?"),
            ContentBlock::Resource {
                resource: EmbeddedResource {
                    uri: "mem://note".to_string(),
                    text: Some("hello".to_string()),
                    blob: None,
                },
            },
        ])
        .unwrap();
        assert_eq!(prompt.question, "What does it say?");
        assert_eq!(prompt.documents, [Document::text("mem://note", "hello")]);
    }

    #[test]
    fn a_file_link_is_read_from_disk_and_other_links_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a b.txt");
        std::fs::write(&file, "on disk").unwrap();
        let uri = format!("file://{}", file.display()).replace(' ', "%20");
        let link = |uri: &str| ContentBlock::ResourceLink {
            uri: uri.to_string(),
            name: "a".to_string(),
        };
        let prompt = read(vec![ContentBlock::text("Q"), link(&uri)]).unwrap();
        assert_eq!(prompt.documents[0].text, b"on disk");
        let refused = read(vec![ContentBlock::text("Q"), link("https://example.com/a")]);
        assert_eq!(refused.unwrap_err().code, INVALID_PARAMS);
    }

    #[test]
    fn a_prompt_without_text_or_with_an_image_is_invalid() {
        assert!(read(vec![]).is_err());
        let image = read(vec![ContentBlock::text("Q"), ContentBlock::Unsupported]);
        assert!(image.unwrap_err().message.contains("image"));
    }
}
