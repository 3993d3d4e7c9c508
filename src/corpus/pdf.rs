//! A PDF's text, by `pdf-extract` (on `lopdf`). A malformed file can make that reader
//! panic: the panic is caught and becomes the document's `error`, and its message is
//! kept off stderr so the user sees one warning per file, not a backtrace.

use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Once;

/// The text of the PDF `bytes`, or why it has none, in one line.
pub(super) fn text(bytes: &[u8]) -> Result<String, String> {
    let extracted = quietly(|| pdf_extract::extract_text_from_mem(bytes))
        .map_err(|panic| format!("the PDF reader failed: {panic}"))?
        .map_err(|error| one_line(&error.to_string()))?;
    let text = tidy(&extracted);
    if text.is_empty() {
        return Err("no text layer: scanned pages need OCR".into());
    }
    Ok(text)
}

/// The extracted text without trailing spaces and with at most one blank line in a row:
/// the reader spaces out pages and paragraphs generously.
fn tidy(extracted: &str) -> String {
    let mut text = String::with_capacity(extracted.len());
    let mut blank = 0;
    for line in extracted.trim().lines().map(str::trim_end) {
        blank = if line.is_empty() { blank + 1 } else { 0 };
        if blank <= 1 {
            text.push_str(line);
            text.push('\n');
        }
    }
    text
}

fn one_line(reason: &str) -> String {
    let reason = reason.split_whitespace().collect::<Vec<_>>().join(" ");
    if reason.is_empty() {
        "it cannot be read as a PDF".into()
    } else {
        reason
    }
}

thread_local! {
    /// Whether a panic on this thread is expected and caught, so not to be printed.
    static QUIET: Cell<bool> = const { Cell::new(false) };
}

/// `run`, its panic caught and returned as its message, which the panic hook does not
/// print (other threads' panics print as before).
fn quietly<T>(run: impl FnOnce() -> T) -> Result<T, String> {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET.with(Cell::get) {
                previous(info);
            }
        }));
    });
    QUIET.with(|quiet| quiet.set(true));
    // The reader's state is dropped with the panic: nothing half-updated is used again.
    let result = catch_unwind(AssertUnwindSafe(run));
    QUIET.with(|quiet| quiet.set(false));
    result.map_err(|payload| {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".into());
        one_line(&message)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_corrupt_pdf_is_an_error_in_one_line() {
        for bytes in [
            &b"%PDF-1.7\n1 0 obj << /Type /Catalog"[..],
            b"",
            b"\xff\xfe",
        ] {
            let reason = text(bytes).unwrap_err();
            assert!(!reason.is_empty() && !reason.contains('\n'), "{reason:?}");
        }
    }

    #[test]
    fn a_panic_is_caught_and_named() {
        let result: Result<(), String> = quietly(|| panic!("bad\nxref"));
        assert_eq!(result.unwrap_err(), "bad xref");
        assert_eq!(quietly(|| 7), Ok(7));
    }

    #[test]
    fn extracted_text_is_tidied() {
        assert_eq!(tidy("\n\n a  \n\n\n\nb\t\n"), "a\n\nb\n");
    }
}
