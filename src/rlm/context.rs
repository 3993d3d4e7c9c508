//! [`Context`]: the text under study, as the `context` global holds it.

use serde_json::{Map, Value};

use crate::corpus::{Corpus, Document, Gathered};
use crate::environment::{Environment, ExecError};

/// What the agent studies: one text, or a list of texts (chunks: documents, files,
/// pages). In Lua, `context` is a string or an array of strings. Any bytes are allowed
/// (Lua strings need not be UTF-8).
///
/// ```
/// use rlm_registry::rlm::Context;
///
/// let one = Context::from("a long report…");
/// let many = Context::from(vec!["first document", "second document"]);
/// assert_eq!(one.total_bytes(), "a long report…".len());
/// assert_eq!(many.chunk_sizes(), vec![14, 15]);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Context {
    /// A single string.
    Text(Vec<u8>),
    /// An array of strings.
    Chunks(Vec<Vec<u8>>),
    /// Documents (`--context DIR`, several paths, a JSONL corpus): in Lua a list of
    /// tables `{name, text, kind, bytes[, mime][, error][, meta]}`.
    Corpus(Corpus),
}

impl Context {
    /// This context with `documents` added: a corpus gets them at its end; a text or
    /// chunks become a corpus whose first documents they are (named `context`, or
    /// `chunk N`); no context at all becomes a corpus of them.
    ///
    /// ```
    /// use rlm_registry::corpus::Document;
    /// use rlm_registry::rlm::Context;
    ///
    /// let added = Context::with_documents(Some(Context::from("notes")), vec![Document::text("a.md", "A")]);
    /// let Context::Corpus(corpus) = added else { panic!("a corpus") };
    /// let names: Vec<&str> = corpus.documents.iter().map(|d| d.name.as_str()).collect();
    /// assert_eq!(names, ["context", "a.md"]);
    /// ```
    pub fn with_documents(context: Option<Context>, documents: Vec<Document>) -> Context {
        let mut corpus = match context {
            None => Corpus::default(),
            Some(Context::Corpus(corpus)) => corpus,
            Some(Context::Text(text)) => Corpus {
                documents: vec![Document::text("context", text)],
                skipped: 0,
            },
            Some(Context::Chunks(chunks)) => Corpus {
                documents: chunks
                    .into_iter()
                    .enumerate()
                    .map(|(i, chunk)| Document::text(format!("chunk {}", i + 1), chunk))
                    .collect(),
                skipped: 0,
            },
        };
        corpus.documents.extend(documents);
        Context::Corpus(corpus)
    }

    /// Bytes in total.
    pub fn total_bytes(&self) -> usize {
        self.chunk_sizes().iter().sum()
    }

    /// The size in bytes of each chunk (one for a text, one per document of a corpus).
    pub fn chunk_sizes(&self) -> Vec<usize> {
        match self {
            Context::Text(text) => vec![text.len()],
            Context::Chunks(chunks) => chunks.iter().map(Vec::len).collect(),
            Context::Corpus(corpus) => corpus.documents.iter().map(|d| d.text.len()).collect(),
        }
    }

    /// Sets the global `context` of `env`: a string, an array of strings, or a list of
    /// document tables.
    ///
    /// ```
    /// use rlm_registry::{Registry, environment::{Environment, Limits}, rlm::Context};
    ///
    /// let env = Environment::new(Registry::baked().clone(), Limits::default())?;
    /// Context::from(vec!["a", "bc"]).load_into(&env)?;
    /// assert_eq!(env.execute("print(#context, context[2])")?.output, "2\tbc\n");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn load_into(&self, env: &Environment) -> Result<(), ExecError> {
        match self {
            Context::Text(text) => env.set_context(text),
            Context::Chunks(chunks) => env.set_context_list(chunks),
            Context::Corpus(corpus) => {
                env.add_corpus_images(corpus);
                env.set_context_documents(
                    corpus
                        .documents
                        .iter()
                        .map(|document| (document_fields(document), &document.text[..])),
                )
            }
        }
    }

    /// [`Context::load_into`], giving the context up: each document's text is freed as
    /// soon as Lua holds its copy, so that a corpus is not held twice (what `rlm exec`
    /// does, with no later use for it).
    ///
    /// ```
    /// use rlm_registry::{Registry, corpus::{Corpus, Document}, environment::{Environment, Limits}, rlm::Context};
    ///
    /// let env = Environment::new(Registry::baked().clone(), Limits::default())?;
    /// let corpus = Corpus { documents: vec![Document::text("a.md", "# A")], skipped: 0 };
    /// Context::Corpus(corpus).move_into(&env)?;
    /// assert_eq!(env.execute("print(context[1].name, context[1].text)")?.output, "a.md\t# A\n");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn move_into(self, env: &Environment) -> Result<(), ExecError> {
        let Context::Corpus(corpus) = self else {
            return self.load_into(env);
        };
        env.add_corpus_images(&corpus);
        env.set_context_documents(corpus.documents.into_iter().map(|document| {
            let fields = document_fields(&document);
            (fields, document.text)
        }))
    }
}

/// A document's fields but its text: `{name, kind, bytes[, mime][, error][, meta]}`
/// (`bytes` is an image's size; its bytes stay out of Lua).
fn document_fields(document: &Document) -> Map<String, Value> {
    let mut fields = Map::new();
    fields.insert("name".into(), document.name.clone().into());
    fields.insert("kind".into(), document.kind.as_str().into());
    fields.insert("bytes".into(), document.bytes().into());
    if let Some(image) = &document.image {
        fields.insert("mime".into(), image.mime.clone().into());
    }
    if let Some(error) = &document.error {
        fields.insert("error".into(), error.clone().into());
    }
    if let Some(meta) = &document.meta {
        fields.insert("meta".into(), Value::Object(meta.clone()));
    }
    fields
}

impl From<Gathered> for Context {
    fn from(gathered: Gathered) -> Context {
        match gathered {
            Gathered::Text(text) => Context::Text(text),
            Gathered::Corpus(corpus) => Context::Corpus(corpus),
        }
    }
}

impl From<Vec<u8>> for Context {
    fn from(text: Vec<u8>) -> Context {
        Context::Text(text)
    }
}

impl From<&[u8]> for Context {
    fn from(text: &[u8]) -> Context {
        Context::Text(text.to_vec())
    }
}

impl From<String> for Context {
    fn from(text: String) -> Context {
        Context::Text(text.into_bytes())
    }
}

impl From<&str> for Context {
    fn from(text: &str) -> Context {
        Context::Text(text.as_bytes().to_vec())
    }
}

impl From<Vec<String>> for Context {
    fn from(chunks: Vec<String>) -> Context {
        Context::Chunks(chunks.into_iter().map(String::into_bytes).collect())
    }
}

impl From<Vec<&str>> for Context {
    fn from(chunks: Vec<&str>) -> Context {
        Context::Chunks(chunks.into_iter().map(|c| c.as_bytes().to_vec()).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Registry;
    use crate::environment::Limits;

    #[test]
    fn chunks_become_a_lua_array() {
        let env = Environment::new(Registry::baked().clone(), Limits::default()).unwrap();
        Context::from(vec!["ab", "", "cdé"])
            .load_into(&env)
            .unwrap();
        let out = env
            .execute("print(#context, context[1], context[2] == '', context[3])")
            .unwrap();
        assert_eq!(out.output, "3\tab\ttrue\tcdé\n");
    }

    #[test]
    fn a_corpus_is_a_list_of_documents() {
        let document = |name: &str, text: &[u8]| Document::text(name, text);
        let mut with_meta = document("r1", b"\xffbytes");
        with_meta.meta = serde_json::from_str(r#"{"url": "u"}"#).ok();
        let corpus = Corpus {
            documents: vec![
                document("a.md", b"one\ntwo"),
                document("b/c.txt", b""),
                with_meta,
            ],
            skipped: 0,
        };
        let env = Environment::new(Registry::baked().clone(), Limits::default()).unwrap();
        Context::Corpus(corpus).load_into(&env).unwrap();
        let out = env
            .execute(
                "for i, d in ipairs(context) do print(i, d.name, d.kind, d.bytes, #d.text, d.meta and d.meta.url) end
                 print(#context, context[1].text, _rlm_documents)",
            )
            .unwrap();
        assert_eq!(
            out.output,
            "1\ta.md\ttext\t7\t7\tnil\n2\tb/c.txt\ttext\t0\t0\tnil\n3\tr1\ttext\t6\t6\tu\n3\tone\ntwo\tnil\n"
        );
        assert_eq!(
            env.execute("print(context[3].text:byte(1))")
                .unwrap()
                .output,
            "255\n"
        );
    }

    #[test]
    fn images_and_failed_documents_load_without_text_and_keep_the_rest_in_place() {
        use crate::corpus::{DocumentKind, Image};
        let image = Document {
            kind: DocumentKind::Image,
            image: Some(Image {
                mime: "image/png".into(),
                data: std::sync::Arc::from(&b"\x89PNG123456"[..]),
            }),
            ..Document::text("shot.png", "")
        };
        let failed = Document {
            kind: DocumentKind::Pdf,
            error: Some("invalid file trailer".into()),
            ..Document::text("bad.pdf", "")
        };
        let corpus = Corpus {
            documents: vec![image, failed, Document::text("after.md", "still here")],
            skipped: 0,
        };
        let env = Environment::new(Registry::baked().clone(), Limits::default()).unwrap();
        Context::Corpus(corpus).load_into(&env).unwrap();
        let out = env
            .execute(
                "for _, d in ipairs(context) do print(d.name, d.kind, d.bytes, #d.text, d.mime, d.error) end
                 print(context[3].text)",
            )
            .unwrap();
        assert_eq!(
            out.output,
            "shot.png\timage\t10\t0\timage/png\tnil\n\
             bad.pdf\tpdf\t0\t0\tnil\tinvalid file trailer\n\
             after.md\ttext\t10\t10\tnil\tnil\n\
             still here\n"
        );
    }
}
