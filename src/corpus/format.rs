//! What a file is, decided in one place: by its extension first, then by its first bytes
//! (a PDF's `%PDF-`, an image's signature, an HTML doctype, a NUL byte for other binary
//! files) — and the document each format becomes.

use std::path::Path;
use std::sync::Arc;

use super::{Document, DocumentKind, Image, html, pdf};

/// A file's format, as [`detect`] tells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Format {
    /// Plain text or code, kept as it is.
    Text,
    /// An HTML page, reduced to its text.
    Html,
    /// A PDF, its text extracted.
    Pdf,
    /// An image of this MIME type, kept as bytes.
    Image(&'static str),
    /// Any other binary file: left out and counted.
    Binary,
}

/// The image formats vision models take: extension, MIME type, and the signature their
/// bytes start with (WebP's is checked apart, as its tag is not at the start).
const IMAGES: [(&[&str], &str, &[u8]); 3] = [
    (&["png"], "image/png", b"\x89PNG\r\n\x1a\n"),
    (&["jpg", "jpeg"], "image/jpeg", b"\xff\xd8\xff"),
    (&["gif"], "image/gif", b"GIF8"),
];
const WEBP: &str = "image/webp";

/// The format of `bytes`, the file at `path`: by its extension when it names one we
/// read, else by its content.
pub(super) fn detect(path: &Path, bytes: &[u8]) -> Format {
    let extension = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    match extension.as_str() {
        "html" | "htm" | "xhtml" => return Format::Html,
        "pdf" => return Format::Pdf,
        "webp" => return Format::Image(WEBP),
        _ => {}
    }
    if let Some((_, mime, _)) = IMAGES
        .iter()
        .find(|(extensions, _, _)| extensions.contains(&extension.as_str()))
    {
        return Format::Image(mime);
    }
    sniff(bytes)
}

/// The format `bytes` show at their start.
fn sniff(bytes: &[u8]) -> Format {
    if bytes.starts_with(b"%PDF-") {
        return Format::Pdf;
    }
    if let Some((_, mime, _)) = IMAGES.iter().find(|(_, _, magic)| bytes.starts_with(magic)) {
        return Format::Image(mime);
    }
    if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        return Format::Image(WEBP);
    }
    if starts_like_html(bytes) {
        return Format::Html;
    }
    // As ripgrep decides: a NUL byte in the first 8 KiB.
    if bytes[..bytes.len().min(8 * 1024)].contains(&0) {
        return Format::Binary;
    }
    Format::Text
}

/// Whether `bytes` open, after a byte-order mark and whitespace, with `<!doctype html`
/// or `<html` (either case).
fn starts_like_html(bytes: &[u8]) -> bool {
    let bytes = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
    let start = bytes
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(bytes.len());
    let head = &bytes[start..bytes.len().min(start + 14)];
    let opens = |prefix: &[u8]| {
        head.len() >= prefix.len() && head[..prefix.len()].eq_ignore_ascii_case(prefix)
    };
    opens(b"<!doctype html") || opens(b"<html")
}

/// The document a file of `format` (other than [`Format::Binary`]) named `name` becomes:
/// its text as is, an HTML page's or a PDF's text (a PDF that cannot be read keeps an
/// `error` and no text), or an image's bytes.
pub(super) fn document(name: String, bytes: Vec<u8>, format: Format) -> Document {
    let (kind, text, error, image) = match format {
        Format::Text | Format::Binary => (DocumentKind::Text, bytes, None, None),
        Format::Html => (
            DocumentKind::Html,
            html::text(&bytes).into_bytes(),
            None,
            None,
        ),
        Format::Pdf => match pdf::text(&bytes) {
            Ok(text) => (DocumentKind::Pdf, text.into_bytes(), None, None),
            Err(reason) => (DocumentKind::Pdf, Vec::new(), Some(reason), None),
        },
        Format::Image(mime) => {
            let image = Image {
                mime: mime.to_string(),
                data: Arc::from(bytes),
            };
            (DocumentKind::Image, Vec::new(), None, Some(image))
        }
    };
    Document {
        kind,
        error,
        image,
        ..Document::text(name, text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(name: &str, bytes: &[u8]) -> Format {
        detect(Path::new(name), bytes)
    }

    #[test]
    fn the_extension_decides_first() {
        assert_eq!(of("a.HTML", b"plain"), Format::Html);
        assert_eq!(of("a.xhtml", b""), Format::Html);
        assert_eq!(of("a.pdf", b"not really"), Format::Pdf);
        assert_eq!(of("a.JPG", b""), Format::Image("image/jpeg"));
        assert_eq!(of("a.webp", b""), Format::Image("image/webp"));
        assert_eq!(of("a.rs", b"fn main() {}"), Format::Text);
    }

    #[test]
    fn content_decides_without_a_known_extension() {
        assert_eq!(of("paper", b"%PDF-1.7\n"), Format::Pdf);
        assert_eq!(
            of("shot", b"\x89PNG\r\n\x1a\n\0\0"),
            Format::Image("image/png")
        );
        assert_eq!(of("a.dat", b"GIF89a\0"), Format::Image("image/gif"));
        assert_eq!(
            of("pic", b"RIFF\x10\0\0\0WEBPVP8 "),
            Format::Image("image/webp")
        );
        assert_eq!(of("page", b"\xef\xbb\xbf\n  <!DOCTYPE HTML>"), Format::Html);
        assert_eq!(of("page.txt", b"<html><body>x"), Format::Html);
        assert_eq!(of("notes.md", b"# <html> in a heading"), Format::Text);
        assert_eq!(of("a.bin", b"\x7fELF\0\x01"), Format::Binary);
        assert_eq!(of("empty", b""), Format::Text);
    }

    #[test]
    fn an_image_keeps_its_bytes_and_no_text() {
        let document = document(
            "p.png".into(),
            b"\x89PNG".to_vec(),
            Format::Image("image/png"),
        );
        assert_eq!(document.kind, DocumentKind::Image);
        assert!(document.text.is_empty() && document.error.is_none());
        let image = document.image.expect("an image");
        assert_eq!(
            (image.mime.as_str(), &*image.data),
            ("image/png", &b"\x89PNG"[..])
        );
    }

    #[test]
    fn a_pdf_that_cannot_be_read_keeps_an_error_and_no_text() {
        let document = document("bad.pdf".into(), b"%PDF-1.7\ngarbage".to_vec(), Format::Pdf);
        assert_eq!(document.kind, DocumentKind::Pdf);
        assert!(document.text.is_empty());
        assert!(
            document
                .error
                .is_some_and(|e| !e.is_empty() && !e.contains('\n'))
        );
    }
}
