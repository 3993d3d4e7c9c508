//! What the model reads back after its code ran: outputs (truncated, with a note of what
//! was cut) and errors in words it can act on, with a "did you mean" for unknown names.

use crate::catalog::Catalog;
use crate::conventions::LUA_GLOBALS;
use crate::environment::ExecError;

use super::thousands;

/// Cuts `text` to at most `max` bytes (at a character boundary) and says how much was cut.
pub(crate) fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut out = text[..end].to_string();
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&format!(
        "[... {} more bytes cut; print less, or slices]",
        thousands((text.len() - end) as u64)
    ));
    out
}

/// The names a model may call: built-ins, registry functions, and the sandbox's Lua
/// standard globals.
pub(crate) struct Names(Vec<String>);

/// Standard globals the sandbox removes: never suggested.
const REMOVED: &[&str] = &[
    "io", "package", "require", "debug", "dofile", "loadfile", "_ENV",
];

impl Names {
    pub fn new(catalog: &Catalog) -> Names {
        let mut names: Vec<String> = catalog
            .functions()
            .iter()
            .map(|c| c.function.name().to_string())
            .collect();
        names.extend(
            LUA_GLOBALS
                .iter()
                .filter(|name| !REMOVED.contains(name))
                .map(|name| name.to_string()),
        );
        Names(names)
    }

    /// The known name most like `name`, if one is close enough.
    pub fn closest(&self, name: &str) -> Option<&str> {
        let lower = name.to_lowercase();
        self.0
            .iter()
            .filter(|candidate| candidate.as_str() != name)
            .map(|candidate| {
                let score = strsim::jaro_winkler(&lower, &candidate.to_lowercase());
                (score, candidate.as_str())
            })
            .filter(|(score, _)| *score >= 0.85)
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, candidate)| candidate)
    }
}

/// The global name in "attempt to call a nil value (global 'foo')".
pub(crate) fn unknown_function(message: &str) -> Option<&str> {
    let start = message.find("attempt to call a nil value (global '")? + 37;
    let rest = &message[start..];
    let end = rest.find("')")?;
    Some(&rest[..end])
}

/// The line of the block an error points at: messages start "input:LINE: ".
fn error_line(message: &str) -> Option<(usize, &str)> {
    let rest = message.strip_prefix("input:")?;
    let colon = rest.find(':')?;
    let line = rest[..colon].parse().ok()?;
    Some((line, rest[colon + 1..].trim_start()))
}

/// The message for a block that failed, with the output it printed before failing.
pub(crate) fn describe_error(
    block: usize,
    code: &str,
    error: &ExecError,
    names: &Names,
    max_bytes: usize,
) -> String {
    let mut text = match error {
        ExecError::Limit { kind, message, .. } => format!(
            "Block {block} hit the {kind} limit: {message}. The environment keeps its variables; \
             try a cheaper approach (smaller pieces, fewer calls, less output)."
        ),
        ExecError::Lua { message, .. } => {
            let message = truncate(message, max_bytes.max(200));
            match error_line(&message) {
                Some((line, rest)) => {
                    let mut text =
                        format!("Block {block} failed with a Lua error on line {line}: {rest}");
                    if let Some(source) = code.lines().nth(line.wrapping_sub(1)) {
                        let source = truncate(source.trim_end(), 200);
                        text.push_str(&format!("\n  {line} | {source}"));
                    }
                    text
                }
                None => format!("Block {block} failed with a Lua error: {message}"),
            }
        }
    };
    if let Some(name) = unknown_function(error.message()) {
        text.push_str(&format!("\n`{name}` is not a function here."));
        if let Some(suggestion) = names.closest(name) {
            text.push_str(&format!(
                " Did you mean `{suggestion}`? (help(\"{suggestion}\") shows how to call it.)"
            ));
        } else {
            text.push_str(" help() lists every function you can call.");
        }
    }
    let output = error.output();
    if !output.is_empty() {
        text.push_str(&format!(
            "\nOutput before the error:\n{}",
            truncate(output, max_bytes)
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Registry;
    use crate::environment::LimitKind;

    #[test]
    fn truncation_says_what_was_cut() {
        assert_eq!(truncate("short", 10), "short");
        let cut = truncate(&"x".repeat(12_355), 10);
        assert_eq!(
            cut,
            "xxxxxxxxxx\n[... 12,345 more bytes cut; print less, or slices]"
        );
        let cut = truncate("ééé", 3);
        assert!(cut.starts_with("é\n"), "{cut}");
    }

    #[test]
    fn unknown_functions_get_a_suggestion() {
        let names = Names::new(&Catalog::new(
            Registry::baked().clone(),
            crate::providers::Providers::builtin_shared(),
            crate::providers::AgentScope::TOP,
        ));
        let error = ExecError::Lua {
            message: "input:2: attempt to call a nil value (global 'word_cout')".into(),
            output: "before\n".into(),
        };
        let text = describe_error(1, "x = 1\nprint(word_cout(context))\n", &error, &names, 100);
        assert!(text.contains("line 2"), "{text}");
        assert!(text.contains("  2 | print(word_cout(context))"), "{text}");
        assert!(text.contains("Did you mean `word_count`?"), "{text}");
        assert!(text.contains("Output before the error:\nbefore"), "{text}");
        assert_eq!(names.closest("llm_qery"), Some("llm_query"));
        assert_eq!(names.closest("tostrin"), Some("tostring"));
        assert_eq!(names.closest("zzzzzz"), None);
    }

    #[test]
    fn limits_and_odd_messages() {
        let names = Names::new(&Catalog::new(
            Registry::baked().clone(),
            crate::providers::Providers::builtin_shared(),
            crate::providers::AgentScope::TOP,
        ));
        let error = ExecError::Limit {
            kind: LimitKind::Time,
            message: "time limit exceeded".into(),
            output: String::new(),
        };
        assert!(
            describe_error(3, "", &error, &names, 100).starts_with("Block 3 hit the time limit")
        );
        let error = ExecError::Lua {
            message: "input:999: boom".into(),
            output: String::new(),
        };
        assert_eq!(
            describe_error(1, "", &error, &names, 100),
            "Block 1 failed with a Lua error on line 999: boom"
        );
        assert_eq!(
            unknown_function("attempt to call a nil value (global '"),
            None
        );
    }
}
