//! The corpus in the system prompt: a few lines whatever its size (≤ 250 tokens at
//! 10,000 documents), so that a corpus of any size leaves the window to the work.

use crate::corpus::{Corpus, Document, DocumentKind};
use crate::text_format::{cut_chars, thousands};
use crate::tokens;

use super::prompt::EXACT_TOKENS_UP_TO;

/// Document names listed in a corpus's description, at most.
const LISTED_NAMES: usize = 3;
/// A listed name's characters, at most.
const NAME_CHARS: usize = 40;

/// A corpus in a few lines whatever its size: the documents by kind, their sizes, a few
/// names, the fields of a document (those some have, such as `mime`, only then), how to
/// go through them and how to rank them.
pub(super) fn describe_corpus(corpus: &Corpus) -> String {
    let documents = &corpus.documents;
    let total = corpus.total_bytes();
    let sizes = documents.iter().map(Document::bytes);
    let tokens = if total <= EXACT_TOKENS_UP_TO {
        let count: usize = documents
            .iter()
            .map(|d| tokens::count(&String::from_utf8_lossy(&d.text)))
            .sum();
        format!("{} tokens (o200k_base)", thousands(count as u64))
    } else {
        format!("about {} tokens", thousands((total / 4) as u64))
    };
    let mut names: Vec<String> = documents
        .iter()
        .take(LISTED_NAMES)
        .map(|d| format!("`{}`", cut_chars(&d.name, NAME_CHARS)))
        .collect();
    if documents.len() > LISTED_NAMES {
        names.push("…".to_string());
    }
    format!(
        "`context` is a corpus: a Lua list of {} documents{}, {} bytes, {tokens} in all; a document has {} to {} bytes. Each is a table `{{{}}}`; names: {}. Loop with `for i, doc in ipairs(context) do … doc.text … end`; `grep`, counts and chunking take the whole corpus. `doc_search(query [, k])` ranks documents by BM25: `{{doc, name, score}}` entries.{}",
        thousands(documents.len() as u64),
        corpus_notes(corpus),
        thousands(total as u64),
        thousands(sizes.clone().min().unwrap_or(0) as u64),
        thousands(sizes.max().unwrap_or(0) as u64),
        document_fields(documents),
        names.join(", "),
        if documents.iter().any(|d| d.image.is_some()) {
            " Images: `llm_query(prompt, {images = {doc}})`."
        } else {
            ""
        },
    )
}

/// What a corpus's count leaves out, in parentheses: its documents by kind when they are
/// not all text, those with an `error`, the binary files left out.
fn corpus_notes(corpus: &Corpus) -> String {
    let count = |kind: DocumentKind| corpus.documents.iter().filter(|d| d.kind == kind).count();
    let mut notes = Vec::new();
    if count(DocumentKind::Text) < corpus.documents.len() {
        let kinds = [
            DocumentKind::Text,
            DocumentKind::Html,
            DocumentKind::Pdf,
            DocumentKind::Image,
        ];
        let by_kind: Vec<String> = kinds
            .into_iter()
            .map(|kind| (kind, count(kind)))
            .filter(|&(_, n)| n > 0)
            .map(|(kind, n)| format!("{} {}", thousands(n as u64), kind.as_str()))
            .collect();
        notes.push(by_kind.join(", "));
    }
    let failed = corpus
        .documents
        .iter()
        .filter(|d| d.error.is_some())
        .count();
    if failed > 0 {
        notes.push(format!(
            "{} with an `error`, no text",
            thousands(failed as u64)
        ));
    }
    if corpus.skipped > 0 {
        let n = corpus.skipped;
        notes.push(format!(
            "{} binary file{} left out",
            thousands(n as u64),
            if n == 1 { "" } else { "s" }
        ));
    }
    if notes.is_empty() {
        String::new()
    } else {
        format!(" ({})", notes.join("; "))
    }
}

/// A document's fields as `name, text, kind, bytes[, mime][, error][, meta]`, the
/// optional ones listed only when some document has them.
fn document_fields(documents: &[Document]) -> String {
    let mut fields = "name, text, kind, bytes".to_string();
    let optional = [
        ("mime", documents.iter().any(|d| d.image.is_some())),
        ("error", documents.iter().any(|d| d.error.is_some())),
        ("meta", documents.iter().any(|d| d.meta.is_some())),
    ];
    for (field, present) in optional {
        if present {
            fields.push_str(&format!("[, {field}]"));
        }
    }
    fields
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rlm::Context;

    fn describe_context(context: &Context) -> String {
        match context {
            Context::Corpus(corpus) => describe_corpus(corpus),
            _ => unreachable!("a corpus"),
        }
    }

    #[test]
    fn a_corpus_is_described_under_250_tokens_whatever_its_size() {
        use crate::corpus::{Corpus, Document, Image};
        // Mostly text; every tenth a PDF (one in a thousand failed), every 25th an image.
        let document = |i: usize| {
            let plain = Document::text(
                format!("reports/2026/quarter-{i}/a-rather-long-file-name-{i}.md"),
                format!("line {i}\n").repeat(i % 7 + 1),
            );
            match i {
                _ if i % 25 == 3 => Document {
                    kind: DocumentKind::Image,
                    text: Vec::new(),
                    image: Some(Image {
                        mime: "image/png".into(),
                        data: std::sync::Arc::from(vec![0u8; 100 + i]),
                    }),
                    ..plain
                },
                _ if i % 1000 == 19 => Document {
                    kind: DocumentKind::Pdf,
                    text: Vec::new(),
                    error: Some("invalid file trailer".into()),
                    ..plain
                },
                _ if i % 10 == 9 => Document {
                    kind: DocumentKind::Pdf,
                    ..plain
                },
                _ => plain,
            }
        };
        let corpus = |count: usize| {
            Context::Corpus(Corpus {
                documents: (0..count).map(document).collect(),
                skipped: 2,
            })
        };
        let small = describe_context(&corpus(2));
        assert!(
            small.starts_with(
                "`context` is a corpus: a Lua list of 2 documents (2 binary files left out)"
            ),
            "{small}"
        );
        assert!(
            small.contains("`reports/2026/quarter-0/a-rather-long-fil…`")
                && small.contains("`{name, text, kind, bytes}`"),
            "{small}"
        );
        let large = describe_context(&corpus(10_000));
        assert!(
            large.contains(
                "10,000 documents (8,600 text, 1,000 pdf, 400 image; 10 with an `error`, no text; 2 binary files left out)"
            ) && large.contains("`{name, text, kind, bytes[, mime][, error]}`")
                && large.contains(", …. Loop with")
                && large.ends_with(
                    "`doc_search(query [, k])` ranks documents by BM25: `{doc, name, score}` entries. Images: `llm_query(prompt, {images = {doc}})`."
                ),
            "{large}"
        );
        assert!(
            tokens::count(&large) <= 250,
            "{} tokens: {large}",
            tokens::count(&large)
        );
    }
}
