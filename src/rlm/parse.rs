//! Reading a model reply: its code blocks, and a `FINAL(...)` written as plain text.
//! A reasoning model's thinking is not read: only what follows it
//! ([`split_thinking`]).

use std::cell::RefCell;

use crate::llm::split_thinking;

use super::prompt;

/// What a reply holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Reply {
    /// The code to run, in order: every ```lua block, and every unlabeled block that
    /// compiles as Lua.
    pub blocks: Vec<String>,
    /// Fenced blocks that were not run, with why (for the model).
    pub ignored: Vec<String>,
    /// A `FINAL(...)` / `FINAL_VAR(...)` at the start of a line outside code.
    pub final_text: Option<PlainFinal>,
    /// The reply's thinking never closed: it is all thinking, with nothing to run.
    pub thinking_only: bool,
    /// The reply was cut at the token limit inside a code block, which was not run.
    pub cut_block: bool,
    /// What goes back into the conversation as the model's turn: the reply without its
    /// thinking (what reasoning models' chat templates expect, and fewer tokens).
    pub sent_back: String,
    /// The text outside the fenced blocks, after the thinking: the model's prose.
    pub prose: String,
}

/// A final answer written in plain text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum PlainFinal {
    /// `FINAL(text)`: the text, unquoted when it is one string literal.
    Value(String),
    /// `FINAL_VAR(name)`.
    Var(String),
}

/// What the loop reads in `reply`: its fenced blocks and the text outside them, after
/// its thinking. A reply `cut` at the token limit does not run the block it was cut in.
pub(crate) fn parse(reply: &str, cut: bool) -> Reply {
    let split = split_thinking(reply);
    let sent_back = match split.answer {
        // The thinking itself never goes back, and some servers refuse an empty turn.
        "" if split.unfinished => prompt::THINKING_ONLY_SENT_BACK.to_string(),
        answer => answer.to_string(),
    };
    let mut result = Reply {
        thinking_only: split.unfinished,
        sent_back,
        ..Reply::default()
    };
    let mut outside = String::new();
    let mut lines = split.answer.lines();
    while let Some(line) = lines.next() {
        let Some(fence) = Fence::open(line) else {
            outside.push_str(line);
            outside.push('\n');
            continue;
        };
        let mut body = String::new();
        let mut closed = false;
        for line in lines.by_ref() {
            if fence.closes(line) {
                closed = true;
                break;
            }
            body.push_str(fence.dedent(line));
            body.push('\n');
        }
        // An unclosed fence runs to the end of the reply: a block whose closing fence was
        // forgotten runs, one cut off half-written does not.
        if !closed && cut {
            result.cut_block = true;
            continue;
        }
        match fence.label.as_str() {
            "lua" => result.blocks.push(body),
            "" => match lua_syntax_error(&body) {
                None if !body.trim().is_empty() => result.blocks.push(body),
                None => {}
                Some(error) => result.ignored.push(prompt::unlabeled_not_lua(&error)),
            },
            other => result.ignored.push(prompt::other_language(other)),
        }
    }
    result.final_text = plain_final(&outside);
    result.prose = outside;
    result
}

/// An opening code fence: ``` or ~~~ (three or more), indented by any amount.
struct Fence {
    marker: char,
    length: usize,
    indent: usize,
    /// The first word of the info string, lowercased (`lua`, `python`, or empty).
    label: String,
}

impl Fence {
    fn open(line: &str) -> Option<Fence> {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let marker = trimmed.chars().next().filter(|c| *c == '`' || *c == '~')?;
        let length = trimmed.chars().take_while(|c| *c == marker).count();
        if length < 3 {
            return None;
        }
        let info = trimmed[length..].trim();
        // A backtick fence's info string may not contain backticks (that is inline code).
        if marker == '`' && info.contains('`') {
            return None;
        }
        let label = info
            .split(|c: char| c.is_whitespace() || c == '{' || c == ',')
            .next()
            .unwrap_or("")
            .to_lowercase();
        Some(Fence {
            marker,
            length,
            indent,
            label,
        })
    }

    fn closes(&self, line: &str) -> bool {
        let trimmed = line.trim();
        trimmed.len() >= self.length && trimmed.chars().all(|c| c == self.marker)
    }

    /// The line without the fence's indentation (as far as it is whitespace).
    fn dedent<'a>(&self, line: &'a str) -> &'a str {
        let strip = line
            .char_indices()
            .take(self.indent)
            .take_while(|(_, c)| *c == ' ' || *c == '\t')
            .count();
        &line[strip..]
    }
}

/// Whether `code` compiles as Lua 5.4, checked with a throwaway state that runs nothing.
fn lua_syntax_error(code: &str) -> Option<String> {
    thread_local! {
        static CHECKER: RefCell<Option<mlua::Lua>> = const { RefCell::new(None) };
    }
    CHECKER.with(|checker| {
        let mut checker = checker.borrow_mut();
        let lua = checker.get_or_insert_with(mlua::Lua::new);
        match lua
            .load(code)
            .set_name("=block")
            .set_mode(mlua::chunk::ChunkMode::Text)
            .into_function()
        {
            Ok(_) => None,
            Err(mlua::Error::SyntaxError { message, .. }) => Some(message),
            Err(other) => Some(other.to_string()),
        }
    })
}

/// The first line of `text` that starts (after whitespace and markdown emphasis) with
/// `FINAL(` or `FINAL_VAR(`, with its argument.
fn plain_final(text: &str) -> Option<PlainFinal> {
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let start = line
            .char_indices()
            .find(|(_, c)| !(c.is_whitespace() || matches!(c, '*' | '_' | '`' | '>' | '-')))
            .map(|(i, _)| i);
        if let Some(start) = start {
            let rest = &text[offset + start..];
            if let Some(arg) = rest.strip_prefix("FINAL_VAR(") {
                let name = unquote(&argument(arg));
                let name = name.trim();
                if !name.is_empty() {
                    return Some(PlainFinal::Var(name.to_string()));
                }
            } else if let Some(arg) = rest.strip_prefix("FINAL(") {
                let value = unquote(&argument(arg));
                if !value.trim().is_empty() {
                    return Some(PlainFinal::Value(value));
                }
            }
        }
        offset += line.len();
    }
    None
}

/// The text up to the parenthesis that closes the call (quotes respected); without one,
/// up to the last `)` of the text, or else the rest of the line.
fn argument(text: &str) -> String {
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == q || c == '\n' {
                quote = None;
            }
            continue;
        }
        match c {
            '"' | '\'' => quote = Some(c),
            '(' => depth += 1,
            ')' if depth == 0 => return text[..i].to_string(),
            ')' => depth -= 1,
            _ => {}
        }
    }
    match text.rfind(')') {
        Some(end) => text[..end].to_string(),
        None => text.lines().next().unwrap_or("").to_string(),
    }
}

/// The value of a single Lua string literal (`"…"`, `'…'`, `[[…]]`), or the text trimmed.
fn unquote(text: &str) -> String {
    let text = text.trim();
    if let Some(inner) = text
        .strip_prefix("[[")
        .and_then(|rest| rest.strip_suffix("]]"))
    {
        return inner.to_string();
    }
    for q in ['"', '\''] {
        if text.len() >= 2 && text.starts_with(q) && text.ends_with(q) {
            let inner = &text[1..text.len() - 1];
            let mut out = String::with_capacity(inner.len());
            let mut chars = inner.chars();
            while let Some(c) = chars.next() {
                if c != '\\' {
                    out.push(c);
                    continue;
                }
                match chars.next() {
                    Some('n') => out.push('\n'),
                    Some('t') => out.push('\t'),
                    Some(other) => out.push(other),
                    None => out.push('\\'),
                }
            }
            return out;
        }
    }
    text.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lua_blocks_run_in_order_and_others_are_ignored() {
        let reply = "Let me look.\n```lua\nx = 1\n```\nand\n```Lua\nprint(x)\n```\n```python\nprint(1)\n```\n";
        let parsed = parse(reply, false);
        assert_eq!(parsed.blocks, ["x = 1\n", "print(x)\n"]);
        assert_eq!(parsed.ignored.len(), 1);
        assert!(parsed.ignored[0].contains("```python"));
        assert_eq!(parsed.final_text, None);
    }

    #[test]
    fn unlabeled_fences_run_when_they_are_lua() {
        let parsed = parse(
            "```\nprint(#context)\n```\n```\n42 is the answer\n```\n",
            false,
        );
        assert_eq!(parsed.blocks, ["print(#context)\n"]);
        assert!(parsed.ignored[0].contains("not valid Lua"), "{parsed:?}");
    }

    #[test]
    fn indented_tilde_and_unclosed_fences() {
        let parsed = parse(
            "1. step\n   ```lua\n   print(1)\n   ```\n~~~lua\nprint(2)\n~~~\n```lua\nprint(3)",
            false,
        );
        assert_eq!(parsed.blocks, ["print(1)\n", "print(2)\n", "print(3)\n"]);
        assert!(!parsed.cut_block);
    }

    #[test]
    fn a_block_cut_at_the_token_limit_does_not_run() {
        let parsed = parse(
            "```lua\nprint(1)\n```\n```lua\nfor i = 1, 10 do\n  pri",
            true,
        );
        assert_eq!(parsed.blocks, ["print(1)\n"]);
        assert!(parsed.cut_block);
        // Cut after a closed block: nothing was half-written.
        let parsed = parse("```lua\nprint(1)\n```\nAnd now I will", true);
        assert_eq!(parsed.blocks, ["print(1)\n"]);
        assert!(!parsed.cut_block);
    }

    #[test]
    fn thinking_is_not_read_for_code_or_answers() {
        let reply = "<think>\nI could try\n```lua\nprint('DRAFT RAN')\nFINAL('draft answer')\n```\nor FINAL(draft)\n</think>\n```lua\nFINAL('real answer')\n```\n";
        let parsed = parse(reply, false);
        assert_eq!(parsed.blocks, ["FINAL('real answer')\n"]);
        assert_eq!(parsed.final_text, None);
        let parsed = parse("FINAL(draft)\n</think>\nFINAL(real)", false);
        assert_eq!(parsed.final_text, Some(PlainFinal::Value("real".into())));
        let parsed = parse("<think>\n```lua\nprint(1)\n```\nFINAL(1)", true);
        assert!(parsed.thinking_only && parsed.blocks.is_empty() && parsed.final_text.is_none());
    }

    #[test]
    fn plain_text_final_outside_code() {
        let parsed = parse("The answer is clear.\nFINAL(42)\n", false);
        assert_eq!(parsed.final_text, Some(PlainFinal::Value("42".into())));
        let parsed = parse("**FINAL(\"Paris (France)\")**", false);
        assert_eq!(
            parsed.final_text,
            Some(PlainFinal::Value("Paris (France)".into()))
        );
        let parsed = parse("FINAL(The capital is Paris (the city)\nof light)", false);
        assert_eq!(
            parsed.final_text,
            Some(PlainFinal::Value(
                "The capital is Paris (the city)\nof light".into()
            ))
        );
        let parsed = parse("FINAL_VAR(\"answer\")", false);
        assert_eq!(parsed.final_text, Some(PlainFinal::Var("answer".into())));
        // Inside code, or mid-sentence, it is not a plain-text answer.
        assert_eq!(parse("```lua\nFINAL(1)\n```", false).final_text, None);
        assert_eq!(parse("I will call FINAL(x) later", false).final_text, None);
        // No closing parenthesis: the rest of the line.
        assert_eq!(
            parse("FINAL(unclosed\nmore", false).final_text,
            Some(PlainFinal::Value("unclosed".into()))
        );
    }

    #[test]
    fn random_replies_do_not_panic() {
        let pieces = [
            "```",
            "```lua",
            "~~~",
            "FINAL(",
            "FINAL_VAR(",
            ")",
            "(",
            "\"",
            "'",
            "\\",
            "[[",
            "]]",
            "\n",
            " ",
            "\u{e9}",
            "x",
            "\u{3000}",
            "**",
            "`",
        ];
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..5_000 {
            let len = next() % 40;
            let reply: String = (0..len)
                .map(|_| pieces[(next() % pieces.len() as u64) as usize])
                .collect();
            let _ = parse(&reply, false);
        }
    }

    #[test]
    fn odd_input_does_not_panic() {
        for reply in [
            "",
            "```",
            "````lua",
            "FINAL(",
            "FINAL_VAR()",
            "FINAL(\"\\",
            "é```lua\n",
            "  \u{3000}```lua\nprint(1)\n",
            "FINAL('é')",
        ] {
            let _ = parse(reply, false);
        }
    }
}
