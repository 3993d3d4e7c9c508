//! An HTML page reduced to the text a reader sees, one block per line so that `grep`
//! finds lines: html5gum's WHATWG tokenizer decodes entities and knows where scripts and
//! styles end; this walk drops what is not content (scripts, styles, `<noscript>`,
//! `<template>`, comments), breaks lines at block elements, separates table cells with
//! tabs, collapses other whitespace and keeps `<pre>` as written.

use std::convert::Infallible;

use html5gum::emitters::callback::{CallbackEmitter, CallbackEvent};
use html5gum::{Span, Tokenizer};

/// Elements whose content is not text for a reader.
const DROPPED: &[&[u8]] = &[
    b"script",
    b"style",
    b"noscript",
    b"template",
    b"iframe",
    b"noembed",
    b"noframes",
    b"object",
    b"svg",
];

/// Elements that start and end a line.
const BLOCKS: &[&[u8]] = &[
    b"address",
    b"article",
    b"aside",
    b"blockquote",
    b"body",
    b"br",
    b"caption",
    b"dd",
    b"details",
    b"dialog",
    b"div",
    b"dl",
    b"dt",
    b"fieldset",
    b"figcaption",
    b"figure",
    b"footer",
    b"form",
    b"h1",
    b"h2",
    b"h3",
    b"h4",
    b"h5",
    b"h6",
    b"header",
    b"hr",
    b"li",
    b"main",
    b"nav",
    b"ol",
    b"option",
    b"p",
    b"pre",
    b"section",
    b"summary",
    b"table",
    b"title",
    b"tr",
    b"ul",
    b"head",
];

/// The readable text of the HTML page `bytes` (read as UTF-8, bad bytes replaced).
///
/// Each block (paragraph, heading, list item, table row, …) is a line.
pub(super) fn text(bytes: &[u8]) -> String {
    let source = String::from_utf8_lossy(bytes);
    let mut walk = Walk::default();
    let mut emitter = CallbackEmitter::new(|event: CallbackEvent<'_>, _: Span<()>| {
        walk.visit(event);
        None::<Infallible>
    });
    // Scripts and styles hold raw text: told apart only by switching state at their tags.
    emitter.naively_switch_states(true);
    // Reading from a string cannot fail.
    let _ = Tokenizer::new_with_emitter(source.as_ref(), emitter).finish();
    walk.finish()
}

/// The text so far and where the walk is.
#[derive(Default)]
struct Walk {
    out: String,
    /// Open elements whose content is dropped.
    dropped: usize,
    /// Open `<pre>` elements, whose whitespace is kept.
    pre: usize,
    /// Just inside a `<pre>`, where a first newline is not content (HTML's rule).
    pre_start: bool,
    /// Whitespace seen since the last word, written as one space before the next.
    space: bool,
}

impl Walk {
    fn visit(&mut self, event: CallbackEvent<'_>) {
        match event {
            CallbackEvent::OpenStartTag { name } => self.open(name),
            CallbackEvent::EndTag { name } => self.close(name),
            CallbackEvent::String { value } if self.dropped == 0 => self.words(value),
            _ => {}
        }
    }

    fn open(&mut self, name: &[u8]) {
        if DROPPED.contains(&name) {
            self.dropped += 1;
        } else if BLOCKS.contains(&name) {
            self.line_break();
            if name == b"pre" {
                self.pre += 1;
                self.pre_start = true;
            }
        } else if matches!(name, b"td" | b"th") && !self.at_line_start() {
            self.out.push('\t');
            self.space = false;
        }
    }

    fn close(&mut self, name: &[u8]) {
        if DROPPED.contains(&name) {
            self.dropped = self.dropped.saturating_sub(1);
        } else if BLOCKS.contains(&name) {
            if name == b"pre" {
                self.pre = self.pre.saturating_sub(1);
            }
            self.line_break();
        }
    }

    fn words(&mut self, value: &[u8]) {
        let text = String::from_utf8_lossy(value);
        if self.pre > 0 {
            let first = std::mem::take(&mut self.pre_start);
            let text = if first {
                text.strip_prefix('\n').unwrap_or(&text)
            } else {
                &text
            };
            self.out.push_str(text);
            return;
        }
        for c in text.chars() {
            if c.is_whitespace() {
                self.space = true;
                continue;
            }
            if self.space && !self.at_line_start() && !self.out.ends_with('\t') {
                self.out.push(' ');
            }
            self.space = false;
            self.out.push(c);
        }
    }

    fn at_line_start(&self) -> bool {
        self.out.is_empty() || self.out.ends_with('\n')
    }

    /// Ends the current line, if it has anything, without trailing whitespace.
    fn line_break(&mut self) {
        let kept = self.out.trim_end_matches([' ', '\t']).len();
        self.out.truncate(kept);
        if !self.at_line_start() {
            self.out.push('\n');
        }
        self.space = false;
    }

    fn finish(mut self) -> String {
        self.line_break();
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_lines_and_entities_are_decoded() {
        let page = b"<!DOCTYPE html><html><head><title>A &amp; B</title></head>\n\
            <body><h1>Head&shy;line</h1><p>One   <b>bold</b>\n word &lt;x&gt;&nbsp;&#233;</p>\
            <ul><li>first</li><li>second</li></ul>some<br>more</body></html>";
        assert_eq!(
            text(page),
            "A & B\nHead\u{ad}line\nOne bold word <x> é\nfirst\nsecond\nsome\nmore\n"
        );
    }

    #[test]
    fn scripts_styles_and_other_non_content_are_dropped() {
        let page = b"<html><head><style>p { color: red } </p></style>\
            <script>if (a < b) { document.write('<p>no</p>') }</script></head>\
            <body><!-- hidden --><noscript>enable js</noscript>\
            <template><p>later</p></template><p>kept</p><svg><text>chart</text></svg></body>";
        assert_eq!(text(page), "kept\n");
    }

    #[test]
    fn table_cells_are_tab_separated_and_pre_is_kept() {
        let page = b"<table><tr><th>a</th><th>b</th></tr><tr><td>1</td><td> 2 </td></tr></table>\
            <pre>\nx  = 1\n  y</pre>";
        assert_eq!(text(page), "a\tb\n1\t2\nx  = 1\n  y\n");
    }

    #[test]
    fn bad_html_and_bad_bytes_still_give_text() {
        assert_eq!(text(b"<p>open <b>never closed <i"), "open never closed\n");
        assert_eq!(text(b"<p>caf\xe9</p>"), "caf\u{fffd}\n");
        assert_eq!(text(b""), "");
    }
}
