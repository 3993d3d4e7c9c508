//! Corpora: what `--context` gathers when it is more than one plain file — a folder
//! walked as ripgrep walks it, a glob, several paths, standard input, a JSONL file of
//! records — as a list of [`Document`]s, each with its name, text, kind and size.
//!
//! [`gather`] decides: one plain text or code file (or standard input alone) stays one
//! text, as it always was; anything else — a PDF, an HTML page or an image alone too — is
//! a [`Corpus`]. Folders honour `.gitignore` and `.ignore` and skip hidden files (the
//! `ignore` crate, ripgrep's walker); symbolic links are not followed, so a link loop
//! cannot hang a walk.
//!
//! Each file's format is decided by its extension, else its first bytes: HTML pages
//! become their readable text (kind `html`), PDFs their extracted text (kind `pdf`; one
//! that cannot be read is kept with an `error` and no text, see [`Corpus::warnings`]),
//! PNG, JPEG, GIF and WebP images stay bytes with their MIME type (kind `image`, no
//! text). Any other binary file (a NUL byte in its first 8 KiB) is skipped and counted.
//! A `.jsonl` file whose every line is an object with a
//! text field (`text`, `contents` or `content`) is a corpus of records
//! (BrowseComp-Plus's shape): one document per line, named by `docid`, `id`, `title` or
//! `name`, its other fields as `meta`; other JSONL stays text.
//!
//! ```no_run
//! use rlm_registry::corpus::{Gathered, gather};
//!
//! match gather(&["docs/".into(), "notes.md".into()])? {
//!     Gathered::Text(bytes) => println!("one text of {} bytes", bytes.len()),
//!     Gathered::Corpus(corpus) => {
//!         for document in &corpus.documents {
//!             println!("{} ({} bytes)", document.name, document.text.len());
//!         }
//!     }
//! }
//! # Ok::<(), rlm_registry::corpus::CorpusError>(())
//! ```

mod format;
mod html;
mod jsonl;
mod pdf;
mod walk;

use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use format::Format;

/// The name of standard input among the paths.
pub const STDIN: &str = "-";

/// What a document is, as the model reads it in its `kind` field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DocumentKind {
    /// Plain text or code, as it is.
    Text,
    /// An HTML page, reduced to its text.
    Html,
    /// A PDF, its text extracted.
    Pdf,
    /// An image: no text; its bytes stay outside Lua and go to a vision model by
    /// reference.
    Image,
}

impl DocumentKind {
    /// The name in Lua: `"text"`, `"html"`, `"pdf"` or `"image"`.
    pub fn as_str(self) -> &'static str {
        match self {
            DocumentKind::Text => "text",
            DocumentKind::Html => "html",
            DocumentKind::Pdf => "pdf",
            DocumentKind::Image => "image",
        }
    }
}

/// An image's bytes and MIME type, shared rather than copied: they never enter Lua.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Image {
    /// `image/png`, `image/jpeg`, `image/gif` or `image/webp`.
    pub mime: String,
    /// The file's bytes.
    pub data: std::sync::Arc<[u8]>,
}

/// One document of a [`Corpus`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Document {
    /// The path relative to what was given (`a/b.md` for `docs/a/b.md` given `docs/`),
    /// the path as given for a file named on its own, or a record's id.
    pub name: String,
    /// Its text, as bytes (any bytes: Lua strings need not be UTF-8).
    pub text: Vec<u8>,
    /// What it is.
    pub kind: DocumentKind,
    /// A record's other fields (JSONL), if any.
    pub meta: Option<Map<String, Value>>,
    /// Why the file could not be read as its kind (a corrupt PDF): the document is kept,
    /// without text, so the run goes on and the model sees what failed.
    pub error: Option<String>,
    /// An image's bytes, for a document of kind [`DocumentKind::Image`].
    pub image: Option<Image>,
}

impl Document {
    /// A plain text document named `name`.
    ///
    /// ```
    /// use rlm_registry::corpus::{Document, DocumentKind};
    ///
    /// let document = Document::text("notes.md", "# Notes");
    /// assert_eq!(document.kind, DocumentKind::Text);
    /// assert!(document.error.is_none() && document.image.is_none());
    /// ```
    pub fn text(name: impl Into<String>, text: impl Into<Vec<u8>>) -> Document {
        Document {
            name: name.into(),
            text: text.into(),
            kind: DocumentKind::Text,
            meta: None,
            error: None,
            image: None,
        }
    }

    /// Its size as the model reads it in `bytes`: an image's bytes, else its text's.
    ///
    /// ```
    /// use rlm_registry::corpus::Document;
    ///
    /// assert_eq!(Document::text("a.md", "four").bytes(), 4);
    /// ```
    pub fn bytes(&self) -> usize {
        self.image
            .as_ref()
            .map_or(self.text.len(), |image| image.data.len())
    }
}

/// Documents gathered from one or more paths, in a stable order: the paths in the order
/// given, each folder's files sorted by name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Corpus {
    /// The documents.
    pub documents: Vec<Document>,
    /// Binary files left out.
    pub skipped: usize,
}

impl Corpus {
    /// Bytes of text in all the documents.
    pub fn total_bytes(&self) -> usize {
        self.documents.iter().map(|d| d.text.len()).sum()
    }

    /// One line for each document kept with an `error` (a PDF whose text cannot be
    /// extracted), for the user: the library prints nothing, the command line prints
    /// these on stderr.
    ///
    /// ```
    /// use rlm_registry::corpus::{Corpus, Document};
    ///
    /// let mut broken = Document::text("report.pdf", "");
    /// broken.error = Some("invalid file trailer".into());
    /// let corpus = Corpus { documents: vec![Document::text("a.md", "x"), broken], skipped: 0 };
    /// assert_eq!(
    ///     corpus.warnings(),
    ///     ["report.pdf: cannot read its text (invalid file trailer); it is kept with an `error` field"]
    /// );
    /// ```
    pub fn warnings(&self) -> Vec<String> {
        self.documents
            .iter()
            .filter_map(|document| {
                let error = document.error.as_ref()?;
                Some(format!(
                    "{}: cannot read its text ({error}); it is kept with an `error` field",
                    document.name
                ))
            })
            .collect()
    }
}

impl Corpus {
    /// The corpus of JSONL records `bytes` (one document a line, as a `.jsonl` file's),
    /// or `None` when a line is not an object with a text field. `name` names a record
    /// without a name (`name:LINE`).
    ///
    /// ```
    /// use rlm_registry::corpus::Corpus;
    ///
    /// let corpus = Corpus::from_jsonl("t", br#"{"docid": "d1", "text": "hello"}"#).unwrap();
    /// assert_eq!(corpus.documents[0].name, "d1");
    /// assert!(Corpus::from_jsonl("t", b"plain text").is_none());
    /// ```
    pub fn from_jsonl(name: &str, bytes: &[u8]) -> Option<Corpus> {
        jsonl::records(name, bytes).map(|documents| Corpus {
            documents,
            skipped: 0,
        })
    }
}

/// What `--context` gathered: one text, or a corpus.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Gathered {
    /// One plain file, or standard input alone: the text, as before corpora.
    Text(Vec<u8>),
    /// Anything else.
    Corpus(Corpus),
}

/// Why the paths could not be gathered: an explicitly named path that cannot be read, a
/// glob that matches nothing, standard input named twice.
#[derive(Debug)]
pub struct CorpusError {
    /// What was given (a path, a glob, `-`).
    pub path: String,
    /// Why, in words a user can act on.
    pub reason: String,
}

impl fmt::Display for CorpusError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot read {}: {}", self.path, self.reason)
    }
}

impl std::error::Error for CorpusError {}

impl CorpusError {
    fn new(path: impl fmt::Display, reason: impl fmt::Display) -> CorpusError {
        CorpusError {
            path: path.to_string(),
            reason: reason.to_string(),
        }
    }
}

/// The one plain file that `paths` name, with its size, when [`gather`] would make them
/// that file's text (one path, a regular file, text or binary by its name and first
/// bytes, not a `.jsonl` file): the file can then be read straight where it is needed
/// ([`Environment::set_context_with`](crate::environment::Environment::set_context_with))
/// rather than gathered into memory first.
///
/// ```
/// use rlm_registry::corpus::lone_text_file;
///
/// let dir = tempfile::tempdir()?;
/// let log = dir.path().join("app.log");
/// std::fs::write(&log, "a\nb\n")?;
/// assert_eq!(lone_text_file(&[log.clone()]), Some((log.clone(), 4)));
/// assert_eq!(lone_text_file(&[dir.path().into()]), None); // a folder is a corpus
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn lone_text_file(paths: &[PathBuf]) -> Option<(PathBuf, u64)> {
    let [only] = paths else { return None };
    let metadata = std::fs::metadata(only).ok()?;
    let jsonl = only
        .extension()
        .is_some_and(|extension| extension.eq_ignore_ascii_case("jsonl"));
    if only.as_os_str() == STDIN || !metadata.is_file() || jsonl {
        return None;
    }
    let mut head = Vec::with_capacity(8 * 1024);
    std::fs::File::open(only)
        .ok()?
        .take(8 * 1024)
        .read_to_end(&mut head)
        .ok()?;
    matches!(format::detect(only, &head), Format::Text | Format::Binary)
        .then(|| (only.clone(), metadata.len()))
}

/// Gathers `paths` (files, folders, quoted globs, `-` for standard input): one plain
/// file stays its text, anything else is a corpus (see the [module docs](self)).
pub fn gather(paths: &[PathBuf]) -> Result<Gathered, CorpusError> {
    gather_with(paths, || {
        let mut bytes = Vec::new();
        std::io::stdin().read_to_end(&mut bytes).map(|_| bytes)
    })
}

/// [`gather`] with standard input read by `stdin` (a test gives its own).
pub fn gather_with(
    paths: &[PathBuf],
    stdin: impl FnOnce() -> std::io::Result<Vec<u8>>,
) -> Result<Gathered, CorpusError> {
    let mut stdin = Some(stdin);
    let mut read_stdin = || match stdin.take() {
        Some(read) => read().map_err(|error| CorpusError::new(STDIN, error)),
        None => Err(CorpusError::new(STDIN, "standard input is given twice")),
    };
    if let [only] = paths {
        if only.as_os_str() == STDIN {
            return read_stdin().map(Gathered::Text);
        }
        if only.is_file() {
            let bytes = read_file(only)?;
            let name = only.display().to_string();
            if let Some(documents) = jsonl::corpus_of(only, &name, &bytes) {
                return Ok(Gathered::Corpus(Corpus {
                    documents,
                    skipped: 0,
                }));
            }
            return Ok(match format::detect(only, &bytes) {
                Format::Text | Format::Binary => Gathered::Text(bytes),
                format => Gathered::Corpus(Corpus {
                    documents: vec![format::document(name, bytes, format)],
                    skipped: 0,
                }),
            });
        }
    }
    let mut corpus = Corpus::default();
    for path in paths {
        if path.as_os_str() == STDIN {
            let text = read_stdin()?;
            corpus.documents.push(Document::text(STDIN, text));
            continue;
        }
        for file in walk::files(path)? {
            add_file(&mut corpus, &file.path, file.name)?;
        }
    }
    Ok(Gathered::Corpus(corpus))
}

/// Adds the file at `path`, named `name`: its records for a JSONL corpus, else the
/// document its format makes, unless it is binary.
fn add_file(corpus: &mut Corpus, path: &Path, name: String) -> Result<(), CorpusError> {
    let bytes = read_file(path)?;
    add_bytes(corpus, path, name, bytes);
    Ok(())
}

/// [`add_file`] with the file's `bytes` read.
fn add_bytes(corpus: &mut Corpus, path: &Path, name: String, bytes: Vec<u8>) {
    if let Some(documents) = jsonl::corpus_of(path, &name, &bytes) {
        corpus.documents.extend(documents);
        return;
    }
    match format::detect(path, &bytes) {
        Format::Binary => corpus.skipped += 1,
        known => corpus.documents.push(format::document(name, bytes, known)),
    }
}

fn read_file(path: &Path) -> Result<Vec<u8>, CorpusError> {
    std::fs::read(path).map_err(|error| CorpusError::new(path.display(), error))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_stdin() -> std::io::Result<Vec<u8>> {
        Err(std::io::Error::other("no stdin in this test"))
    }

    #[test]
    fn one_plain_file_stays_its_text_and_stdin_alone_too() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("log.txt");
        std::fs::write(&file, "a\nb\n").unwrap();
        assert_eq!(
            gather_with(&[file], no_stdin).unwrap(),
            Gathered::Text(b"a\nb\n".to_vec())
        );
        let from_stdin = gather_with(&[STDIN.into()], || Ok(b"piped".to_vec())).unwrap();
        assert_eq!(from_stdin, Gathered::Text(b"piped".to_vec()));
    }

    #[test]
    fn stdin_given_twice_is_refused() {
        let error = gather_with(&[STDIN.into(), STDIN.into()], || Ok(Vec::new())).unwrap_err();
        assert!(
            error.to_string().contains("standard input is given twice"),
            "{error}"
        );
    }

    #[test]
    fn a_missing_path_is_an_error_naming_it() {
        let error = gather_with(&["no/such/dir".into(), "x".into()], no_stdin).unwrap_err();
        assert_eq!(error.path, "no/such/dir");
    }

    #[test]
    fn binary_files_are_skipped_and_counted() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "text").unwrap();
        std::fs::write(dir.path().join("b.bin"), b"\x7fELF\0\0\x01").unwrap();
        let Gathered::Corpus(corpus) = gather_with(&[dir.path().into()], no_stdin).unwrap() else {
            panic!("a folder is a corpus");
        };
        assert_eq!(corpus.documents.len(), 1);
        assert_eq!(corpus.skipped, 1);
    }

    #[test]
    fn a_page_a_pdf_or_an_image_alone_is_a_corpus_of_one_and_a_binary_alone_stays_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let files: [(&str, &[u8], DocumentKind); 3] = [
            ("page.html", b"<p>hello</p>", DocumentKind::Html),
            ("paper.pdf", b"%PDF-1.7 broken", DocumentKind::Pdf),
            ("shot.gif", b"GIF89a", DocumentKind::Image),
        ];
        for (name, bytes, kind) in files {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).unwrap();
            let Gathered::Corpus(corpus) =
                gather_with(std::slice::from_ref(&path), no_stdin).unwrap()
            else {
                panic!("{name} alone is a corpus");
            };
            assert_eq!(corpus.documents.len(), 1);
            assert_eq!(corpus.documents[0].kind, kind);
            assert_eq!(corpus.documents[0].name, path.display().to_string());
        }
        let binary = dir.path().join("blob.bin");
        std::fs::write(&binary, b"\0\x01").unwrap();
        assert_eq!(
            gather_with(&[binary], no_stdin).unwrap(),
            Gathered::Text(b"\0\x01".to_vec())
        );
    }

    #[test]
    fn only_documents_with_an_error_are_warned_of() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("bad.pdf"), b"%PDF-1.4 truncated").unwrap();
        std::fs::write(dir.path().join("page.htm"), b"<p>fine</p>").unwrap();
        let Gathered::Corpus(corpus) = gather_with(&[dir.path().into()], no_stdin).unwrap() else {
            panic!("a folder is a corpus");
        };
        let warnings = corpus.warnings();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].starts_with("bad.pdf: cannot read its text ("),
            "{warnings:?}"
        );
        assert_eq!(corpus.documents[1].text, b"fine\n");
    }
}
