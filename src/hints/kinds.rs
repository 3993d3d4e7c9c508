//! What a name holds, text or a table, as far as the failing source and the session
//! show: some Python has a different Lua for each, which the line alone cannot tell
//! (`"a" in s` searches text with `s:find`, but tests a table's key; `s[0]` of text is
//! `s:sub(1, 1)`, of a list `s[1]`). The session's globals are known when the error is
//! read (the environment gives their kinds in [`Names`]); the source's own assignments
//! up to the failing line come after them, as a local shadows a global. A name whose
//! value the code does not show (a parameter, a call's result) is unknown, and a hint
//! that depends on it says both ways or the rule.

use std::collections::HashMap;

use super::Names;
use super::fix::tokens::{Kind, LUA_KEYWORDS, Tree, trees};
use super::scan;

/// What a value is, where a hint's Lua depends on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueKind {
    /// A string.
    Text,
    /// A table: a list, a dictionary or a set.
    Table,
}

/// The kinds known for names at the failing line.
#[derive(Clone, Debug, Default)]
pub(crate) struct Kinds(HashMap<String, ValueKind>);

/// Functions of Lua's libraries whose result is text.
const TEXT_FUNCTIONS: &[&str] = &[
    "string.format",
    "string.rep",
    "string.sub",
    "string.lower",
    "string.upper",
    "string.reverse",
    "string.char",
    "table.concat",
];

/// String methods whose result is text (`gsub`'s first result is).
const TEXT_METHODS: &[&str] = &["format", "rep", "sub", "lower", "upper", "reverse", "gsub"];

/// Keywords that start or end a statement: an assignment's value stops before them.
const STATEMENT_KEYWORDS: &[&str] = &[
    "break", "do", "else", "elseif", "end", "for", "goto", "if", "local", "repeat", "return",
    "then", "until", "while",
];

impl Kinds {
    /// The kinds the session's globals have (`names`), then what the code of `lines`
    /// assigns, line by line.
    pub(crate) fn of(lines: &[scan::Line], names: &Names) -> Kinds {
        let mut kinds = Kinds(names.kinds().clone());
        for line in lines {
            match trees(&line.code) {
                Some(items) => kinds.read(&items),
                // A table constructor spread over lines: `local seen = {`.
                None => {
                    if let Some(name) = opens_a_table(&line.code) {
                        kinds.set(name, Some(ValueKind::Table));
                    }
                }
            }
        }
        kinds
    }

    /// What is known of `name`.
    pub(crate) fn get(&self, name: &str) -> Option<ValueKind> {
        self.0.get(name).copied()
    }

    #[cfg(test)]
    pub(crate) fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, ValueKind)>) -> Kinds {
        Kinds(
            pairs
                .into_iter()
                .map(|(name, kind)| (name.to_string(), kind))
                .collect(),
        )
    }

    /// `name` holds `kind` from now on; `None`: something the code does not show.
    fn set(&mut self, name: &str, kind: Option<ValueKind>) {
        match kind {
            Some(kind) => {
                self.0.insert(name.to_string(), kind);
            }
            None => {
                self.0.remove(name);
            }
        }
    }

    /// The assignments, loops and functions of one line's code, in order.
    fn read(&mut self, items: &[Tree]) {
        let mut i = 0;
        while i < items.len() {
            let item = &items[i];
            if item.is_word("for") {
                i = self.read_loop(items, i + 1);
            } else if item.is_word("function") {
                // Parameters hold what the caller passes.
                let params = items[i + 1..].iter().find_map(|t| t.group("("));
                for name in params
                    .iter()
                    .flat_map(|g| g.items.iter().filter_map(Tree::name))
                {
                    self.set(name, None);
                }
                i += 1;
            } else if item.is_symbol("=") {
                let targets = targets_before(items, i);
                let end = value_end(items, i + 1);
                let kind = match targets.as_slice() {
                    [_] => self.kind_of(first_value(&items[i + 1..end])),
                    _ => None,
                };
                for target in targets {
                    self.set(target, kind);
                }
                i = end.max(i + 1);
            } else if item.is_word("local") {
                // `local x` alone: nil until assigned.
                let mut j = i + 1;
                while let Some(name) = items.get(j).and_then(Tree::name) {
                    if items.get(j + 1).is_some_and(|t| t.is_symbol("=")) {
                        break;
                    }
                    self.set(name, None);
                    j += if items.get(j + 1).is_some_and(|t| t.is_symbol(",")) {
                        2
                    } else {
                        1
                    };
                }
                i += 1;
            } else {
                i += 1;
            }
        }
    }

    /// A generic `for`'s names, from `start` (after `for`): text when the loop walks
    /// `gmatch`'s matches, unknown otherwise. Returns where the loop's head ends.
    fn read_loop(&mut self, items: &[Tree], start: usize) -> usize {
        let head_end = (start..items.len())
            .find(|&i| items[i].is_word("in") || items[i].is_symbol("=") || items[i].is_word("do"));
        let Some(at_in) = head_end.filter(|&i| items[i].is_word("in")) else {
            return start; // A numeric `for`: its `=` is read as an assignment.
        };
        let names: Vec<&str> = items[start..at_in].iter().filter_map(Tree::name).collect();
        let end = (at_in..items.len())
            .find(|&i| items[i].is_word("do"))
            .unwrap_or(items.len());
        let walks_text = items[at_in..end].iter().any(|t| t.is_word("gmatch"));
        let kind = walks_text.then_some(ValueKind::Text);
        for name in names {
            self.set(name, kind);
        }
        end
    }

    /// What the value `items` (an assignment's first) is.
    fn kind_of(&self, items: &[Tree]) -> Option<ValueKind> {
        let word = |item: &Tree| item.token().map(|t| t.text.to_string()).unwrap_or_default();
        if items.iter().any(|t| t.is_symbol("..")) {
            return Some(ValueKind::Text);
        }
        match items {
            [single] if single.is_kind(Kind::Str) => Some(ValueKind::Text),
            [single] if single.group("{").is_some() => Some(ValueKind::Table),
            [name] => self.get(name.name()?),
            [function, Tree::Group(_)] if function.is_word("tostring") => Some(ValueKind::Text),
            [library, dot, function, Tree::Group(_)] if dot.is_symbol(".") => {
                let called = format!("{}.{}", word(library), word(function));
                TEXT_FUNCTIONS
                    .contains(&called.as_str())
                    .then_some(ValueKind::Text)
            }
            [.., colon, method, arguments] if colon.is_symbol(":") => {
                let called = arguments.group("(").is_some() || arguments.is_kind(Kind::Str);
                (called && TEXT_METHODS.contains(&word(method).as_str())).then_some(ValueKind::Text)
            }
            _ => None,
        }
    }
}

/// The names assigned by the `=` at `at`: `x =`, `local x, y =`; none for a field or an
/// index (`t.x =`, `t[i] =`).
fn targets_before<'t>(items: &'t [Tree], at: usize) -> Vec<&'t str> {
    let mut names = Vec::new();
    let mut i = at;
    while let Some(name) = i.checked_sub(1).and_then(|j| items[j].name()) {
        names.push(name);
        i -= 1;
        if i > 0 && items[i - 1].is_symbol(",") {
            i -= 1;
        } else {
            break;
        }
    }
    let field = i
        .checked_sub(1)
        .is_some_and(|j| items[j].is_symbol(".") || items[j].is_symbol(":"));
    if field || (i > 0 && items[i - 1].is_symbol(",")) {
        return Vec::new();
    }
    names
}

/// Where the value list starting at `start` ends: at a statement's keyword, or where a
/// value follows a value with no operator between (the next statement).
fn value_end(items: &[Tree], start: usize) -> usize {
    let mut after_value = false;
    let mut i = start;
    while let Some(item) = items.get(i) {
        let word = item.token().filter(|t| t.kind == Kind::Name);
        if word.is_some_and(|t| STATEMENT_KEYWORDS.contains(&t.text.as_ref())) {
            return i;
        }
        if item.is_symbol(".") || item.is_symbol(":") {
            // A field's or a method's name, not a value of its own.
            after_value = true;
            i += 2;
            continue;
        }
        let value = item.name().is_some()
            || item.is_kind(Kind::Number)
            || word.is_some_and(|t| matches!(t.text.as_ref(), "true" | "false" | "nil"));
        if after_value && value {
            return i;
        }
        // After a value, a string or a bracket is its call or index.
        after_value = value || matches!(item, Tree::Group(_)) || item.is_kind(Kind::Str);
        i += 1;
    }
    items.len()
}

/// The first value of a value list.
fn first_value<'t, 'a>(items: &'t [Tree<'a>]) -> &'t [Tree<'a>] {
    let end = items
        .iter()
        .position(|t| t.is_symbol(","))
        .unwrap_or(items.len());
    &items[..end]
}

/// The name a line assigns a table constructor left open to: `local seen = {`.
fn opens_a_table(code: &str) -> Option<&str> {
    let code = code.trim();
    let code = code.strip_prefix("local ").unwrap_or(code).trim_start();
    let (name, value) = code.split_once('=')?;
    let name = name.trim();
    let named = crate::conventions::is_lua_name(name) && !LUA_KEYWORDS.contains(&name);
    (named && value.trim_start().starts_with('{') && !value.contains('}')).then_some(name)
}

/// Whether `name` is one a list, a dictionary or a set is given: a plural (`lines`,
/// `xs`), or a table's usual name (`t`, `seen`, `word_list`).
pub(crate) fn looks_like_a_table(name: &str) -> bool {
    const TABLE_NAMES: &[&str] = &[
        "t", "tbl", "tab", "list", "lst", "arr", "array", "set", "seen", "dict", "map", "d",
    ];
    let last = name.rsplit('_').next().unwrap_or(name);
    let plural = last.len() >= 2
        && last.ends_with('s')
        && !["ss", "us", "is"].iter().any(|end| last.ends_with(end))
        && last != "contents";
    TABLE_NAMES.contains(&last) || plural
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds_of(source: &str, names: &Names) -> Kinds {
        Kinds::of(&scan::lines(source, usize::MAX), names)
    }

    #[test]
    fn assignments_tell_text_and_tables() {
        let kinds = kinds_of(
            "local s = \"abc\" if x then end\nt = {}\nlocal seen = {\n}\n\
             u = a .. b\nv = tostring(1)\nw = s:lower()\nc = table.concat(t, \",\")\n\
             copy = s\nn = 1",
            &Names::default(),
        );
        for name in ["s", "u", "v", "w", "c", "copy"] {
            assert_eq!(kinds.get(name), Some(ValueKind::Text), "{name}");
        }
        assert_eq!(kinds.get("t"), Some(ValueKind::Table));
        assert_eq!(kinds.get("seen"), Some(ValueKind::Table));
        assert_eq!(kinds.get("n"), None);
        assert_eq!(kinds.get("x"), None);
    }

    #[test]
    fn the_source_shadows_the_session_and_forgets_what_it_reassigns() {
        let mut names = Names::default();
        names.set_kind("context", ValueKind::Text);
        names.set_kind("s", ValueKind::Text);
        names.set_kind("r", ValueKind::Text);
        let kinds = kinds_of("local s = {}\nr = f(r)\nfunction g(context) end", &names);
        assert_eq!(kinds.get("s"), Some(ValueKind::Table));
        assert_eq!(kinds.get("r"), None);
        assert_eq!(
            kinds.get("context"),
            None,
            "a parameter holds what is passed"
        );
        let kinds = kinds_of("print(context)", &names);
        assert_eq!(kinds.get("context"), Some(ValueKind::Text));
    }

    #[test]
    fn fields_indexes_and_lists_of_targets_are_not_the_name() {
        let kinds = kinds_of(
            "t.s = \"a\"\nt[1] = \"b\"\na, b = \"x\", {}",
            &Names::default(),
        );
        for name in ["s", "t", "a", "b"] {
            assert_eq!(kinds.get(name), None, "{name}");
        }
    }

    #[test]
    fn a_gmatch_loop_walks_text() {
        let kinds = kinds_of(
            "for line in context:gmatch(\"[^\\n]+\") do end\nfor _, x in ipairs(t) do end",
            &Names::default(),
        );
        assert_eq!(kinds.get("line"), Some(ValueKind::Text));
        assert_eq!(kinds.get("x"), None);
    }

    #[test]
    fn odd_code_never_panics() {
        for source in [
            "=",
            "local",
            "local =",
            "x = ",
            "for in do",
            "for x in",
            "function(",
            "a, = 1",
            ", x = 1",
            "t.x, y = 1",
            "x = .",
            "x = :",
            "s = \"é\" .. é",
            "local t = {",
            "= {",
            "for = 1",
            "x = a:",
            "x = string.",
        ] {
            let _ = kinds_of(source, &Names::default());
        }
    }

    #[test]
    fn plural_and_usual_table_names_look_like_tables() {
        for name in ["xs", "lines", "t", "word_list", "seen", "items"] {
            assert!(looks_like_a_table(name), "{name}");
        }
        for name in ["s", "text", "line", "status", "contents", "class", "this"] {
            assert!(!looks_like_a_table(name), "{name}");
        }
    }
}
