//! Python that runs in Lua and fails there: found from Lua's runtime error and the
//! failing line together (`xs[0] + 1` fails with "attempt to perform arithmetic on a nil
//! value (field '?')"), so valid code that does not fail is never flagged.

use super::Found;
use super::fix::Evidence;
use super::kinds::{Kinds, ValueKind};
use super::syntax::FORMAT;

/// A runtime failure of Python written as Lua, and the Lua way.
struct Case {
    /// Whether Lua's error (`detail`, without its position) on `code` is this habit's,
    /// its names holding `kinds`.
    found: fn(detail: &str, code: &str, kinds: &Kinds) -> bool,
    /// The Lua way, when the line's fix is not quoted.
    hint: &'static str,
    /// What is said before the quoted fix of the line.
    lead: &'static str,
    /// What the error shows about the line, for its fix.
    evidence: Evidence,
}

const NO_EVIDENCE: Evidence = Evidence {
    tables_iterate: false,
    zero_based: false,
    dot_calls: false,
};

const CASES: &[Case] = &[
    // s[0], s[-1] of a string: indexing text reads nil, from 0 or from 1.
    Case {
        found: |detail, code, kinds| {
            detail.contains("a nil value (field '")
                && (indexes_text(code, "[0]", kinds) || indexes_text(code, "[-1]", kinds))
        },
        hint: "Lua reads a string's characters with `s:sub(i, i)`, from 1: the first is `s:sub(1, 1)`, the last `s:sub(-1, -1)`.",
        lead: "Lua reads a string's characters with `s:sub(i, i)`, from 1",
        evidence: Evidence {
            zero_based: true,
            ..NO_EVIDENCE
        },
    },
    // xs[0], xs[-1]
    Case {
        found: |detail, code, _| {
            detail.contains("a nil value (field '")
                && (indexes(code, "[0]") || indexes(code, "[-1]"))
        },
        hint: "Lua sequences start at 1: the first element is `t[1]`, the last `t[#t]` (a string's characters: `s:sub(i, i)`).",
        lead: "Lua sequences start at 1: the first element is `t[1]`, the last `t[#t]`",
        evidence: Evidence {
            zero_based: true,
            ..NO_EVIDENCE
        },
    },
    // "total: " + n
    Case {
        found: |detail, code, _| {
            code.contains('+')
                && (detail.starts_with("attempt to perform arithmetic on a string value")
                    || detail.starts_with("attempt to add a 'string'")
                    || detail.ends_with("with a 'string'"))
        },
        hint: "Lua joins strings with `..`: `\"total: \" .. n`.",
        lead: "Lua joins strings with `..`",
        evidence: NO_EVIDENCE,
    },
    // "%d items" % n
    Case {
        found: |detail, _, _| detail.starts_with("attempt to mod a 'string'"),
        hint: FORMAT,
        lead: "Lua formats with `string.format`",
        evidence: NO_EVIDENCE,
    },
    // "ab" * 3
    Case {
        found: |detail, code, _| {
            detail.starts_with("attempt to mul a 'string'") && code.contains('*')
        },
        hint: "Lua repeats a string with `s:rep(n)`.",
        lead: "Lua repeats a string with `s:rep(n)`",
        evidence: NO_EVIDENCE,
    },
    // for x in xs do
    Case {
        found: |detail, _, _| {
            detail.contains("(for iterator 'for iterator')") && detail.contains("table value")
        },
        hint: "Lua walks a list with `for _, x in ipairs(xs) do … end`.",
        lead: "Lua walks a list with `ipairs(xs)`",
        evidence: Evidence {
            tables_iterate: true,
            ..NO_EVIDENCE
        },
    },
];

/// What to say about the first case Lua's error `detail` on the line `code` shows, its
/// names holding `kinds`, and what the error shows about the line.
pub(crate) fn find(detail: &str, code: &str, kinds: &Kinds) -> Option<(Found, Evidence)> {
    CASES
        .iter()
        .find(|case| (case.found)(detail, code, kinds))
        .map(|case| {
            let found = Found {
                lead: Some(case.lead.to_string()),
                rule: case.hint.to_string(),
            };
            (found, case.evidence)
        })
}

/// Whether `code` indexes a value with `key` (`xs[0]`, `f()[0]`), not a table
/// constructor's key (`{[0] = x}`).
fn indexes(code: &str, key: &str) -> bool {
    code.match_indices(key).any(|(at, _)| {
        code[..at]
            .trim_end()
            .ends_with(|c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | ')' | ']'))
    })
}

/// Whether `code` indexes a name holding text with `key` (`s[0]`).
fn indexes_text(code: &str, key: &str, kinds: &Kinds) -> bool {
    code.match_indices(key).any(|(at, _)| {
        let before = &code[..at];
        let len = before
            .bytes()
            .rev()
            .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
            .count();
        let name = &before[before.len() - len..];
        let field = before[..before.len() - len].ends_with(['.', ':']);
        len > 0 && !field && kinds.get(name) == Some(ValueKind::Text)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_constructor_key_is_not_an_index() {
        assert!(indexes("print(xs[0] + 1)", "[0]"));
        assert!(indexes("f()[-1]", "[-1]"));
        assert!(!indexes("t = {[0] = 1, [-1] = 2}", "[0]"));
    }

    #[test]
    fn an_index_of_text_is_told_from_an_index_of_a_list() {
        let kinds = Kinds::from_pairs([("s", ValueKind::Text), ("xs", ValueKind::Table)]);
        let failed = "attempt to concatenate a nil value (field '?')";
        let (found, _) = find(failed, "print(s[0] .. \"\")", &kinds).unwrap();
        assert!(found.rule.contains("s:sub(1, 1)"), "{}", found.rule);
        let (found, _) = find(failed, "print(xs[0] .. \"\")", &kinds).unwrap();
        assert!(found.rule.contains("`t[1]`"), "{}", found.rule);
        assert!(
            !indexes_text("print(t.s[0])", "[0]", &kinds),
            "a field named `s`"
        );
    }
}
