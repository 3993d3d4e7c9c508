//! Hints for code that failed: Python written as Lua, answered with the Lua way in one
//! line, and a "did you mean" for an unknown function. The environment adds the hint to
//! the error of every failed execution
//! ([`ExecError::Lua`](crate::environment::ExecError::Lua)), so the loop,
//! `rlm exec`/`rlm run`, MCP `run_lua` and the JSON API all show it. This module reads an
//! error and its code and knows nothing of the VM: it sits below the environment, which
//! calls it.
//!
//! A hint needs a failure: the error's message and the code that raised it. Three kinds
//! of cases, each a table in its own module:
//! - `syntax`: Python syntax on the line the error points at (`!=`, `elif`, `x += 1`, a
//!   `# comment`, …), looked for in the line's code with strings and comments removed.
//!   Each is something valid Lua never holds.
//! - `runtime`: Python that runs and then fails (`xs[0] + 1`, `"n: " + n`), found from
//!   the runtime error and the failing line together.
//! - `calls`: Python's functions and methods (`len(x)`, `s.split(",")`, `t.append(x)`),
//!   found from the error Lua raised on calling them ("attempt to call a nil value
//!   (global 'len')"), naming a library function when the environment has it.
//!
//! Where the rewrite of the line is mechanical, the hint quotes the line in Lua (`fix`),
//! after what the case says before a fix; where it is not, it states the case's rule.
//! All of them look for a habit in code only, never in text: `scan` gives each line's
//! code with strings emptied and comments dropped. Where Python's Lua differs for text
//! and for a table (`x in s`, `s[0]`), `kinds` says what a name holds, from the
//! session's globals ([`Names::set_kind`]) and the source's own assignments.
//!
//! ```
//! use rlm_registry::hints::{Names, hint};
//!
//! let names = Names::new(["word_count", "line_count", "print"]);
//! let source = "if n != 0 then print(n) end";
//! let message = "input:1: 'then' expected near '!'";
//! assert_eq!(
//!     hint(source, message, &names).unwrap(),
//!     "Lua writes not-equal as `~=`: `if n ~= 0 then print(n) end`."
//! );
//!
//! let message = "input:1: attempt to call a nil value (global 'countlines')";
//! assert!(hint("print(countlines(context))", message, &names).unwrap().contains("Did you mean `line_count`?"));
//! ```

mod calls;
mod fix;
mod kinds;
mod runtime;
mod scan;
mod syntax;

use std::collections::{HashMap, HashSet};

use crate::catalog::Catalog;
use crate::conventions::{LUA_GLOBALS, REMOVED_GLOBALS};
use crate::spec::closest_name;
use crate::text_format::{char_prefix, cut_chars};

use fix::Evidence;
use kinds::Kinds;
pub use kinds::ValueKind;

/// The names code may call in an environment: what "did you mean" chooses from, and
/// which library functions a hint may name; and what the session's globals hold, where a
/// hint's Lua depends on it.
#[derive(Clone, Debug, Default)]
pub struct Names {
    names: Vec<String>,
    kinds: HashMap<String, ValueKind>,
}

/// Not a global at all, though Lua lists it with them: never suggested.
const NOT_CALLABLE: &str = "_ENV";

impl Names {
    /// These names.
    ///
    /// ```
    /// use rlm_registry::hints::Names;
    /// let names = Names::new(["word_count"]);
    /// assert!(names.contains("word_count"));
    /// assert_eq!(names.closest("wordcount"), Some("word_count"));
    /// ```
    pub fn new<S: Into<String>>(names: impl IntoIterator<Item = S>) -> Names {
        Names {
            names: names.into_iter().map(Into::into).collect(),
            kinds: HashMap::new(),
        }
    }

    /// What `catalog` offers (built-ins, providers' and registry functions) and the
    /// standard globals the sandbox keeps.
    ///
    /// ```
    /// use rlm_registry::{Registry, catalog::Catalog, hints::Names};
    ///
    /// let catalog = Catalog::of_registry(Registry::baked().clone());
    /// let names = Names::of(&catalog);
    /// assert!(names.contains("llm_query") && names.contains("line_count") && names.contains("tostring"));
    /// assert!(!names.contains("require"), "removed by the sandbox");
    /// ```
    pub fn of(catalog: &Catalog) -> Names {
        let mut names: Vec<String> = catalog
            .functions()
            .iter()
            .map(|f| f.name().to_string())
            .collect();
        names.extend(
            LUA_GLOBALS
                .iter()
                .filter(|name| !REMOVED_GLOBALS.contains(name) && **name != NOT_CALLABLE)
                .map(|name| name.to_string()),
        );
        Names::new(names)
    }

    /// Adds `names` (the session's own global functions, say).
    pub fn extend(&mut self, names: impl IntoIterator<Item = String>) {
        self.names.extend(names);
    }

    /// Records that the session's global `name` holds `kind`, for the Python whose Lua
    /// depends on it: `"a" in s` searches `s` when it is text.
    ///
    /// ```
    /// use rlm_registry::hints::{Names, ValueKind, hint};
    ///
    /// let failed = "input:1: 'then' expected near 'in'";
    /// let mut names = Names::default();
    /// names.set_kind("s", ValueKind::Text);
    /// assert_eq!(
    ///     hint("if \"a\" in s then end", failed, &names).as_deref(),
    ///     Some("Lua finds text in a string with `s:find(x, 1, true)`: `if s:find(\"a\", 1, true) then end`."),
    /// );
    /// ```
    pub fn set_kind(&mut self, name: impl Into<String>, kind: ValueKind) {
        self.kinds.insert(name.into(), kind);
    }

    /// What the session's globals hold, as far as known.
    pub(crate) fn kinds(&self) -> &HashMap<String, ValueKind> {
        &self.kinds
    }

    /// Whether `name` is one of them.
    pub fn contains(&self, name: &str) -> bool {
        self.names.iter().any(|known| known == name)
    }

    /// Whether `name` is a table of functions here (`json` when `json.decode` is one of
    /// the names): `name.f(…)` calls a function, not a method.
    pub(crate) fn is_table(&self, name: &str) -> bool {
        self.names.iter().any(|known| {
            known
                .strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('.'))
        })
    }

    /// The name most like `name`, if one is close enough ([`closest_name`]).
    pub fn closest(&self, name: &str) -> Option<&str> {
        closest_name(name, self.names.iter().map(String::as_str))
    }
}

/// What a case says about a line: before the line's quoted fix, and without one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Found {
    /// Said before the quoted fix (`Lua has no \`-=\``); `None` where the case's Lua
    /// is no rewrite of the line (`import json`).
    pub lead: Option<String>,
    /// The Lua way in a sentence, said when no fix is quoted.
    pub rule: String,
}

/// A case found on a line of the source.
struct Finding {
    /// The line (1-based).
    line: usize,
    found: Found,
    evidence: Evidence,
}

/// A quoted fix longer than this is cut (with `…`).
const MAX_QUOTE: usize = 100;

/// The hint for the failure `message` raised by `source`, in one line, if there is one.
/// Only an error in the code itself (`input:LINE: …`) gets one. Where the rewrite of the
/// failing line is mechanical the hint quotes it, as rustc's `help: try` does; where it
/// is not, it states the rule.
///
/// ```
/// use rlm_registry::hints::{Names, hint};
///
/// let names = Names::new(["split"]);
/// let failed = "input:1: attempt to call a nil value (method 'split')";
/// assert_eq!(
///     hint("for _, w in ipairs(s:split(',')) do end", failed, &names).as_deref(),
///     Some("Lua strings have no `split` method: `for _, w in ipairs(split(s, ',')) do end`."),
/// );
/// // Without the library's `split`, no rewrite is mechanical: the rule.
/// assert!(hint("print(s:split(','))", failed, &Names::default()).unwrap().contains("gmatch"));
/// // The same code failing for another reason gets no hint.
/// assert_eq!(hint("print(s:split(','))", "input:1: boom", &names), None);
/// ```
pub fn hint(source: &str, message: &str, names: &Names) -> Option<String> {
    let (line, detail) = position(message)?;
    let lines = scan::lines(source, line);
    let bound = scan::bound_names(&lines);
    let kinds = Kinds::of(&lines, names);
    let code_of = |at: usize| {
        lines
            .get(at.wrapping_sub(1))
            .map_or("", |l| l.code.as_str())
    };
    let code = code_of(line);
    let on = |at: usize, found: Found| Finding {
        line: at,
        found,
        evidence: Evidence::default(),
    };
    let nearest_above = |find: fn(&str, &HashSet<String>, &Kinds) -> Option<Found>| {
        (1..=lines.len().min(line))
            .rev()
            .find_map(|at| find(code_of(at), &bound, &kinds).map(|found| on(at, found)))
    };
    // A syntax error may be reported lines after the Python that caused it (`for x in
    // xs:` parses on as a method call): the nearest Python line above it is the cause.
    // A nil value may come from `None` written lines above.
    // A line ending in Python's block colon makes Lua read the next line as a method's
    // name (`for x in xs:` then `if …`): the error falls on that next line, however
    // Python it is itself.
    let opened_above = line > 1 && {
        let above = code_of(line - 1).trim_end();
        above.ends_with(':') && !above.ends_with("::")
    };
    let from_source = if is_syntax_error(detail) {
        let above = opened_above
            .then(|| {
                syntax::find(code_of(line - 1), &bound, &kinds).map(|found| on(line - 1, found))
            })
            .flatten();
        above.or_else(|| nearest_above(syntax::find))
    } else if detail.contains("a nil value") {
        syntax::find(code, &bound, &kinds)
            .map(|found| on(line, found))
            .or_else(|| nearest_above(syntax::find_nil))
    } else {
        syntax::find(code, &bound, &kinds).map(|found| on(line, found))
    };
    let from_error = from_error(detail, code, names, &kinds).map(|(found, evidence)| Finding {
        line,
        found,
        evidence,
    });
    let findings: Vec<Finding> = from_source.into_iter().chain(from_error).collect();
    let context = Context {
        lines: &lines,
        error_line: line,
        names,
        bound: &bound,
        kinds: &kinds,
    };
    context.say(&findings)
}

/// What a hint is said from: the source's lines and what they define.
struct Context<'a> {
    lines: &'a [scan::Line<'a>],
    error_line: usize,
    names: &'a Names,
    bound: &'a HashSet<String>,
    kinds: &'a Kinds,
}

impl Context<'_> {
    /// The hint for `findings`: for each line, its quoted fix after what the cases say
    /// before one, or the cases' rules when the line has no fix.
    fn say(&self, findings: &[Finding]) -> Option<String> {
        let mut sentences: Vec<String> = Vec::new();
        let mut add = |sentence: String| {
            if !sentences.contains(&sentence) {
                sentences.push(sentence);
            }
        };
        let mut lines: Vec<usize> = findings.iter().map(|f| f.line).collect();
        lines.dedup();
        for line in lines {
            let here: Vec<&Finding> = findings.iter().filter(|f| f.line == line).collect();
            let leads: Vec<&str> = here
                .iter()
                .filter_map(|f| f.found.lead.as_deref())
                .collect();
            let quote = if leads.is_empty() {
                None
            } else {
                self.quoted_fix(line, &here)
            };
            match quote {
                Some(quote) => {
                    let place = if line == self.error_line {
                        String::new()
                    } else {
                        format!("; line {line} in Lua")
                    };
                    let mut unique = leads.clone();
                    unique.dedup();
                    add(format!("{}{place}: `{quote}`.", unique.join("; ")));
                    for finding in here.iter().filter(|f| f.found.lead.is_none()) {
                        add(finding.found.rule.clone());
                    }
                }
                None => here.iter().for_each(|f| add(f.found.rule.clone())),
            }
        }
        (!sentences.is_empty()).then(|| sentences.join(" "))
    }

    /// The fix of `line` as the hint quotes it: cut when long, unless the cut would hide
    /// every change; none when a backtick in it would break the quote.
    fn quoted_fix(&self, line: usize, findings: &[&Finding]) -> Option<String> {
        let text = self.lines.get(line.wrapping_sub(1))?.text?;
        let evidence = findings
            .iter()
            .fold(Evidence::default(), |all, f| all.and(f.evidence));
        let cx = fix::Cx {
            names: self.names,
            bound: self.bound,
            kinds: self.kinds,
            evidence,
        };
        let fixed = fix::line(text, &cx)?;
        if fixed.contains('`') {
            return None;
        }
        let kept = char_prefix(&fixed, MAX_QUOTE);
        if kept.len() == fixed.len() {
            return Some(fixed);
        }
        (!text.trim().starts_with(kept)).then(|| cut_chars(&fixed, MAX_QUOTE))
    }
}

/// The line and the text of an error in the code: `input:LINE: text`.
fn position(message: &str) -> Option<(usize, &str)> {
    let rest = message.strip_prefix("input:")?;
    let (line, detail) = rest.split_once(": ")?;
    Some((line.parse().ok()?, detail))
}

/// Whether `detail` is what Lua's parser says: `… near 'token'` or `… near <eof>`.
fn is_syntax_error(detail: &str) -> bool {
    detail.contains(" near '") || detail.ends_with(" near <eof>")
}

/// What the error itself calls for, given the failing line's `code`, and what it shows
/// about the line.
fn from_error(detail: &str, code: &str, names: &Names, kinds: &Kinds) -> Option<(Found, Evidence)> {
    let plain = |found: Found| Some((found, Evidence::default()));
    let rule = |rule: String| Found { lead: None, rule };
    if let Some(name) = quoted(detail, "attempt to call a nil value (global '") {
        return match calls::function(name, names) {
            Some(found) => plain(found),
            None => plain(rule(did_you_mean(name, names))),
        };
    }
    if let Some(name) = quoted(detail, "attempt to call a nil value (method '")
        .or_else(|| quoted(detail, "attempt to call a nil value (field '"))
    {
        return calls::method(name, names).and_then(plain);
    }
    if let Some(name) = quoted(detail, "attempt to index a nil value (global '") {
        let hint = calls::module(name).or_else(|| {
            let suggestion = names.closest(name)?;
            Some(format!(
                "`{name}` is not defined here. Did you mean `{suggestion}`?"
            ))
        })?;
        return plain(rule(hint));
    }
    if detail.starts_with("bad argument #")
        && let Some(name) = quoted(detail, " to '")
        && detail.ends_with("got no value)")
        && called_with_a_dot(code, name)
    {
        let found = Found {
            lead: Some("Lua calls a string's methods with a colon".to_string()),
            rule: format!("Call a string's methods with a colon: `s:{name}(…)`."),
        };
        let evidence = Evidence {
            dot_calls: true,
            ..Evidence::default()
        };
        return Some((found, evidence));
    }
    runtime::find(detail, code, kinds)
}

/// Whether `code` calls `x.name(…)` on a value `x`, not on the `string` library.
fn called_with_a_dot(code: &str, name: &str) -> bool {
    let call = format!(".{name}(");
    code.match_indices(&call).any(|(at, _)| {
        let before = code[..at].trim_end();
        let owner_len = before
            .bytes()
            .rev()
            .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
            .count();
        &before[before.len() - owner_len..] != "string"
    })
}

/// The "did you mean" for an unknown function `name`.
fn did_you_mean(name: &str, names: &Names) -> String {
    match names.closest(name) {
        Some(suggestion) => format!(
            "`{name}` is not a function here. Did you mean `{suggestion}`? (help(\"{suggestion}\") shows how to call it.)"
        ),
        None => {
            format!("`{name}` is not a function here. help() lists every function you can call.")
        }
    }
}

/// The text between `prefix` and the next `'` in `detail`.
fn quoted<'a>(detail: &'a str, prefix: &str) -> Option<&'a str> {
    let start = detail.find(prefix)? + prefix.len();
    let rest = &detail[start..];
    Some(&rest[..rest.find('\'')?])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_source_and_messages_never_panic() {
        let names = Names::new(["word_count"]);
        let sources = [
            "s = \"é\\é\" .. 'ü",
            "x = [==[ never closed",
            "--[[ never closed\né != ü",
            "é.ü(ö) # ü ü",
            "",
            "\n\n\n",
        ];
        let messages = [
            "input:0: x",
            "input:1: attempt to call a nil value (global '",
            "input:99999999999999999999: x",
            "input:2: bad argument #1 to 'é' (string expected, got no value)",
            "input:1: attempt to call a nil value (field 'é')",
            "input:3: unexpected symbol near 'é'",
            "input:1: attempt to index a nil value (field '?')",
        ];
        for source in sources {
            for message in messages {
                let _ = hint(source, message, &names);
            }
        }
    }

    #[test]
    fn a_block_colon_above_the_error_is_its_cause() {
        let source = "for line in lines:\n    if x in line:\n        n += 1";
        let message = "input:2: <name> expected near 'if'";
        let hint = hint(source, message, &Names::default()).unwrap();
        assert!(
            hint.ends_with("; line 1 in Lua: `for _, line in ipairs(lines) do`."),
            "{hint}"
        );
    }

    #[test]
    fn an_error_outside_the_code_gets_no_hint() {
        let names = Names::new(["line_count"]);
        let message = "lua/text.lua:3: attempt to call a nil value (global 'len')";
        assert_eq!(hint("len(x)", message, &names), None);
    }

    #[test]
    fn json_loads_names_json_decode_once_there_is_one() {
        let message = "input:1: attempt to call a nil value (field 'loads')";
        let without = hint("json.loads(s)", message, &Names::default()).unwrap();
        assert!(without.contains("patterns"), "{without}");
        let with = hint("json.loads(s)", message, &Names::new(["json.decode"])).unwrap();
        assert_eq!(
            with,
            "Lua reads JSON with `json.decode(text)`: `json.decode(s)`."
        );
    }

    #[test]
    fn a_library_function_is_named_only_when_present() {
        let message = "input:1: attempt to call a nil value (field 'split')";
        let without = hint("x.split(',')", message, &Names::default()).unwrap();
        assert!(without.contains("gmatch"), "{without}");
        let with = hint("x.split(',')", message, &Names::new(["split"])).unwrap();
        assert_eq!(with, "Lua strings have no `split` method: `split(x, ',')`.");
    }
}
