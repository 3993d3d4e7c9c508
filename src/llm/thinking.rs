//! Thinking in a reply: where a reasoning model's inline `<think>…</think>` ends and its
//! answer begins. The one reading of it, for the loop's code parser, for what sub-calls
//! return, and for the search modes' answers.
//!
//! Reasoning models served without a reasoning parser (Qwen3, DeepSeek-R1 distills, QwQ
//! on vLLM, llama.cpp or Ollama) send their thinking inline, before the answer:
//! `<think>…</think>`, or only the closing tag when the chat template opened it.
//! `<thinking>` and `<reasoning>` are read the same way.

/// The closing tags that end thinking, in lowercase; a reply's tags match whatever their
/// case.
const CLOSING_TAGS: [&str; 3] = ["</think>", "</thinking>", "</reasoning>"];

/// A reply split into its inline thinking and its answer.
///
/// ```
/// use rlm_registry::llm::split_thinking;
///
/// let reply = split_thinking("<think>\nMaybe FINAL('draft')?\n</think>\n\nFINAL('real')");
/// assert_eq!(reply.thinking, Some("\nMaybe FINAL('draft')?\n"));
/// assert_eq!(reply.answer, "FINAL('real')");
///
/// // The chat template opened the tag: only the closing one is in the reply.
/// assert_eq!(split_thinking("hmm</think>42").answer, "42");
/// // Cut while thinking: no answer at all.
/// let cut = split_thinking("<think>Let me see");
/// assert!(cut.unfinished && cut.answer.is_empty());
/// // No tags: all answer.
/// assert_eq!(split_thinking("42"), rlm_registry::llm::Thinking { thinking: None, answer: "42", unfinished: false });
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Thinking<'a> {
    /// The thinking, without its tags; `None` when the reply has none.
    pub thinking: Option<&'a str>,
    /// What follows the thinking, without the whitespace right after the closing tag:
    /// the reply to read for code and answers, and what a sub-call returns.
    pub answer: &'a str,
    /// The thinking never closed (a reply cut while thinking): all of it is thinking and
    /// there is no answer.
    pub unfinished: bool,
}

/// Splits `reply` at the end of its thinking.
///
/// A reply that opens with `<think>` (or `<thinking>`, `<reasoning>`; after whitespace)
/// thinks up to the first closing tag of the same name, whatever code it drafts on the
/// way; with no closing tag it is all thinking ([`Thinking::unfinished`]). A reply
/// without the opening tag thinks up to the first closing tag outside a fenced code
/// block, if it has one: a tag in a code block is the code's, not the end of thinking.
pub fn split_thinking(reply: &str) -> Thinking<'_> {
    let no_thinking = Thinking {
        thinking: None,
        answer: reply,
        unfinished: false,
    };
    if let Some((tag, body_start)) = opening_tag(reply) {
        let body = &reply[body_start..];
        return match find_ignoring_case(body, tag) {
            Some(end) => Thinking {
                thinking: Some(&body[..end]),
                answer: reply[body_start + end + tag.len()..].trim_start(),
                unfinished: false,
            },
            None => Thinking {
                thinking: Some(body),
                answer: "",
                unfinished: true,
            },
        };
    }
    // Most replies have no tag at all: skip the line scan for them.
    if !reply.contains("</") {
        return no_thinking;
    }
    match closing_tag_outside_code(reply) {
        Some((start, end)) => Thinking {
            thinking: Some(&reply[..start]),
            answer: reply[end..].trim_start(),
            unfinished: false,
        },
        None => no_thinking,
    }
}

/// The closing tag that matches the opening tag `reply` starts with, and where the
/// thinking after that opening tag starts.
fn opening_tag(reply: &str) -> Option<(&'static str, usize)> {
    let trimmed = reply.trim_start();
    let offset = reply.len() - trimmed.len();
    CLOSING_TAGS.iter().find_map(|closing| {
        let opening = format!("<{}", &closing[2..]);
        let head = trimmed.get(..opening.len())?;
        head.eq_ignore_ascii_case(&opening)
            .then_some((*closing, offset + opening.len()))
    })
}

/// Where the first closing tag outside a fenced code block starts and ends.
fn closing_tag_outside_code(reply: &str) -> Option<(usize, usize)> {
    let mut fence: Option<(char, usize)> = None;
    let mut offset = 0;
    for line in reply.split_inclusive('\n') {
        let trimmed = line.trim();
        let marker = trimmed.chars().next().filter(|c| *c == '`' || *c == '~');
        let run = marker.map_or(0, |m| trimmed.chars().take_while(|c| *c == m).count());
        match (fence, marker) {
            (Some((open, length)), Some(m))
                if m == open && run >= length && trimmed.chars().all(|c| c == m) =>
            {
                fence = None;
            }
            (Some(_), _) => {}
            (None, Some(m)) if run >= 3 => fence = Some((m, run)),
            (None, _) => {
                let found = CLOSING_TAGS
                    .iter()
                    .filter_map(|tag| find_ignoring_case(line, tag).map(|at| (at, tag.len())))
                    .min();
                if let Some((at, length)) = found {
                    return Some((offset + at, offset + at + length));
                }
            }
        }
        offset += line.len();
    }
    None
}

/// Where `needle` (ASCII, lowercase) first occurs in `haystack`, whatever its case.
fn find_ignoring_case(haystack: &str, needle: &str) -> Option<usize> {
    let needle = needle.as_bytes();
    haystack
        .as_bytes()
        .windows(needle.len())
        .position(|window| window.eq_ignore_ascii_case(needle))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_draft_inside_thinking_is_thinking() {
        let reply = "<think>\nI could try\n```lua\nprint('DRAFT RAN')\nFINAL('draft answer')\n```\nbut better not.\n</think>\n```lua\nFINAL('real answer')\n```\n";
        let split = split_thinking(reply);
        assert!(split.thinking.unwrap().contains("DRAFT RAN"));
        assert_eq!(split.answer, "```lua\nFINAL('real answer')\n```\n");
        assert!(!split.unfinished);
    }

    #[test]
    fn only_the_closing_tag_ends_thinking_outside_code() {
        let split = split_thinking("I should count.\n</think>\n```lua\nprint(1)\n```");
        assert_eq!(split.thinking, Some("I should count.\n"));
        assert_eq!(split.answer, "```lua\nprint(1)\n```");
    }

    #[test]
    fn a_closing_tag_inside_code_is_the_codes() {
        let reply = "```lua\nprint('</think>')\n```\nDone.";
        assert_eq!(split_thinking(reply).thinking, None);
        assert_eq!(split_thinking(reply).answer, reply);
    }

    #[test]
    fn the_first_closing_tag_ends_thinking() {
        let split = split_thinking("<think>a</think>b</think>c");
        assert_eq!(split.thinking, Some("a"));
        assert_eq!(split.answer, "b</think>c");
    }

    #[test]
    fn other_tag_names_and_cases() {
        assert_eq!(split_thinking("<thinking>x</thinking> y").answer, "y");
        assert_eq!(split_thinking("<REASONING>x</Reasoning>\ny").answer, "y");
        assert_eq!(split_thinking("  <Think>x</THINK>y").thinking, Some("x"));
        // A different closing tag does not close an opened block.
        let split = split_thinking("<thinking>x</think>y");
        assert!(split.unfinished);
    }

    #[test]
    fn unfinished_thinking_has_no_answer() {
        let split = split_thinking("<think>\n```lua\nFINAL(1)\n```\nand then");
        assert!(split.unfinished);
        assert_eq!(split.answer, "");
        assert!(split.thinking.unwrap().contains("FINAL(1)"));
    }

    #[test]
    fn odd_input_does_not_panic() {
        for reply in [
            "",
            "<",
            "<think",
            "<think>",
            "</think>",
            "é</think>é",
            "<thinké>",
            "```\n</think>",
            "~~~~\n~~~\n</think>x",
            "\u{3000}<think>\u{3000}</think>\u{3000}",
        ] {
            let split = split_thinking(reply);
            assert!(split.answer.len() <= reply.len());
        }
    }
}
