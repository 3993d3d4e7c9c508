//! The crate's layers point one way (ARCHITECTURE.md): each folder of `src/` may name
//! only the folders below it. This test reads every source file and fails on a path
//! (`crate::x`, `use crate::{x, …}`, or a `super::` path climbing out of its top-level
//! module, such as `super::super::x` from `src/rlm/run.rs`) that reaches a higher layer,
//! or a leaf (`llm`, `tokens`, `allocator`, `text_format`) that names any other module. Doc comments and
//! ordinary comments are not code and are skipped, so doc links may point anywhere.

use std::collections::BTreeSet;
use std::ops::Range;
use std::path::Path;

/// The layers, lowest first. A module may name its own layer and those before it.
const LAYERS: &[&[&str]] = &[
    &["conventions"],
    &["spec"],
    &["registry", "baked"],
    &["search", "codegen"],
    &["providers"],
    &["corpus"],
    &["catalog"],
    &["engines"],
    &["hints"],
    &["environment"],
    &["testing", "tools"],
    &["rlm"],
    &["setup"],
    &["trace"],
    &["eval"],
    &["serve", "acp"],
    &["cli", "main"],
];

/// Modules every layer from `search` up may use (the search modes call an LLM), and
/// which use nothing themselves. The build-safe layers below (`conventions`, `spec`,
/// `registry`, also compiled into `build.rs`) may not. `text_format` is a leaf so that
/// every layer that shows text to a reader (search, rlm, trace, eval, tools) cuts,
/// escapes and numbers it one way, from one place, without naming another's module.
const LEAVES: &[&str] = &["llm", "tokens", "allocator", "text_format"];

/// Items the crate root re-exports, by the module that defines them.
const ROOT_REEXPORTS: &[(&str, &str)] = &[
    ("Code", "conventions"),
    ("Diagnostic", "conventions"),
    ("Function", "conventions"),
    ("Param", "conventions"),
    ("Return", "conventions"),
    ("Severity", "conventions"),
    ("Chunk", "registry"),
    ("LoadError", "registry"),
    ("Override", "registry"),
    ("Registry", "registry"),
];

fn rank(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

/// The top-level module a path under `src/` belongs to (`src/rlm/run.rs` → `rlm`).
fn owner(relative: &Path) -> String {
    let first = relative.components().next().expect("a path under src/");
    let first = first.as_os_str().to_string_lossy();
    first.trim_end_matches(".rs").to_string()
}

/// How many modules below the crate root a file's module is: `src/rlm.rs` and
/// `src/rlm/mod.rs` are `rlm` (1), `src/rlm/run.rs` is `rlm::run` (2).
fn depth(relative: &Path) -> usize {
    let parts = relative.components().count();
    if relative.file_name().is_some_and(|name| name == "mod.rs") {
        parts - 1
    } else {
        parts
    }
}

/// The source without comments or string literals, so that only code is searched.
fn code_of(source: &str) -> String {
    let bytes = source.as_bytes();
    let mut code = String::with_capacity(source.len());
    let mut i = 0;
    while i < bytes.len() {
        let rest = &source[i..];
        if rest.starts_with("//") {
            i += rest.find('\n').unwrap_or(rest.len());
        } else if rest.starts_with("/*") {
            i += rest.find("*/").map_or(rest.len(), |end| end + 2);
        } else if let Some(len) = raw_string_len(rest) {
            i += len;
        } else if rest.starts_with('"') {
            i += string_len(rest);
        } else if rest.starts_with("'\"'") {
            i += 3;
        } else {
            let c = rest.chars().next().expect("not at the end");
            code.push(c);
            i += c.len_utf8();
        }
    }
    code
}

/// The length of a raw string literal (`r"…"`, `r#"…"#`, `br"…"`) at the start of `text`.
fn raw_string_len(text: &str) -> Option<usize> {
    let after_prefix = text.strip_prefix("br").or_else(|| text.strip_prefix('r'))?;
    let hashes = after_prefix.bytes().take_while(|&b| b == b'#').count();
    if !after_prefix[hashes..].starts_with('"') {
        return None;
    }
    let closing = format!("\"{}", "#".repeat(hashes));
    let body_start = text.len() - after_prefix.len() + hashes + 1;
    let end = text[body_start..].find(&closing)?;
    Some(body_start + end + closing.len())
}

/// The length of an ordinary string literal at the start of `text`.
fn string_len(text: &str) -> usize {
    let mut escaped = false;
    for (i, c) in text.char_indices().skip(1) {
        match c {
            '\\' if !escaped => escaped = true,
            '"' if !escaped => return i + 1,
            _ => escaped = false,
        }
    }
    text.len()
}

/// Every crate module that `code` names, in a file whose module is `depth` below the
/// crate root: through `crate::` or `rlm_registry::`, or through a `super::` path that
/// climbs to the crate root (counting the inline `mod x { … }` blocks it is in).
fn named_modules(code: &str, depth: usize) -> BTreeSet<String> {
    let mut named = BTreeSet::new();
    for prefix in ["crate::", "rlm_registry::"] {
        for (at, _) in code.match_indices(prefix) {
            if starts_a_path(code, at) {
                named.extend(names_after(&code[at + prefix.len()..]));
            }
        }
    }
    let inline = inline_modules(code);
    for (at, _) in code.match_indices("super::") {
        if !starts_a_path(code, at) {
            continue;
        }
        let mut rest = &code[at..];
        let mut climbs = 0;
        while let Some(after) = rest.strip_prefix("super::") {
            climbs += 1;
            rest = after;
        }
        let enclosing = inline.iter().filter(|block| block.contains(&at)).count();
        // Fewer climbs stay inside the file's own top-level module.
        if climbs == depth + enclosing {
            named.extend(names_after(rest));
        }
    }
    named.remove("");
    named
}

/// Whether the path at `at` begins there, rather than continuing an identifier or path.
fn starts_a_path(code: &str, at: usize) -> bool {
    !code[..at]
        .chars()
        .next_back()
        .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':')
}

/// The modules a path names right after its root: `x::…` or `{x::…, y, …}`.
fn names_after(rest: &str) -> Vec<String> {
    match rest.strip_prefix('{') {
        Some(group) => {
            let end = matching_brace(group);
            top_level_items(&group[..end])
                .iter()
                .map(|item| resolve(item))
                .collect()
        }
        None => vec![resolve(&identifier(rest))],
    }
}

/// The byte ranges of the inline module blocks (`mod tests { … }`) in `code`.
fn inline_modules(code: &str) -> Vec<Range<usize>> {
    let mut blocks = Vec::new();
    for (at, _) in code.match_indices("mod ") {
        if !starts_a_path(code, at) {
            continue;
        }
        let after = &code[at + "mod ".len()..];
        let name = identifier(after.trim_start());
        let Some(body) = after.trim_start()[name.len()..]
            .trim_start()
            .strip_prefix('{')
        else {
            continue;
        };
        if name.is_empty() {
            continue;
        }
        let start = code.len() - body.len();
        blocks.push(start..start + matching_brace(body));
    }
    blocks
}

fn identifier(text: &str) -> String {
    text.chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

fn matching_brace(text: &str) -> usize {
    let mut depth = 0usize;
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => return i,
            '}' => depth -= 1,
            _ => {}
        }
    }
    text.len()
}

/// The first identifier of each comma-separated item at brace depth 0.
fn top_level_items(group: &str) -> Vec<String> {
    let mut items = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                items.push(identifier(group[start..i].trim_start()));
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(identifier(group[start..].trim_start()));
    items
}

fn resolve(item: &str) -> String {
    ROOT_REEXPORTS
        .iter()
        .find(|(name, _)| *name == item)
        .map_or(item, |(_, module)| module)
        .to_string()
}

/// What `module` may not name among `named`, with why.
fn violations(module: &str, named: &BTreeSet<String>) -> Vec<String> {
    let mut found = Vec::new();
    for other in named.iter().filter(|other| *other != module) {
        if LEAVES.contains(&module) {
            if rank(other).is_some() || LEAVES.contains(&other.as_str()) {
                found.push(format!("leaf `{module}` names `{other}`"));
            }
            continue;
        }
        let Some(own) = rank(module) else { continue };
        let search = rank("search").expect("search is a layer");
        if LEAVES.contains(&other.as_str()) {
            if own < search {
                found.push(format!("`{module}` (below search) names leaf `{other}`"));
            }
        } else if let Some(theirs) = rank(other)
            && theirs > own
        {
            found.push(format!("`{module}` names `{other}`, a higher layer"));
        }
    }
    found
}

#[test]
fn no_module_names_a_module_above_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut problems = Vec::new();
    for entry in walkdir::WalkDir::new(&src).sort_by_file_name() {
        let entry = entry.expect("src/ is readable");
        let path = entry.path();
        if path.extension().is_none_or(|ext| ext != "rs") {
            continue;
        }
        let relative = path.strip_prefix(&src).expect("under src/");
        let module = owner(relative);
        if module == "lib" {
            continue;
        }
        let source = std::fs::read_to_string(path).expect("source is UTF-8");
        let code = code_of(&source);
        let named = named_modules(&code, depth(relative));
        for problem in violations(&module, &named) {
            problems.push(format!("src/{}: {problem}", relative.display()));
        }
    }
    assert!(
        problems.is_empty(),
        "layers named out of order:\n{}",
        problems.join("\n")
    );
}

#[test]
fn every_top_level_module_has_a_place_in_the_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut unplaced = Vec::new();
    for entry in std::fs::read_dir(&src).expect("src/ is readable") {
        let name = entry.expect("an entry").file_name();
        let module = owner(Path::new(&name));
        if module != "lib" && rank(&module).is_none() && !LEAVES.contains(&module.as_str()) {
            unplaced.push(module);
        }
    }
    assert!(unplaced.is_empty(), "not in LAYERS or LEAVES: {unplaced:?}");
}

#[test]
fn the_checker_sees_a_higher_layer_named_in_code_but_not_in_comments() {
    let code = code_of(
        "//! See [`crate::serve`].\nuse crate::{registry::Registry, rlm::Rlm};\n\
         let s = \"crate::cli\"; // crate::eval\nfn f() -> crate::tools::Tool {}\n",
    );
    let named = named_modules(&code, 1);
    assert_eq!(
        named.into_iter().collect::<Vec<_>>(),
        ["registry", "rlm", "tools"]
    );
    let problems = violations("registry", &["rlm".to_string()].into());
    assert_eq!(problems, ["`registry` names `rlm`, a higher layer"]);
    assert!(violations("rlm", &["registry".to_string()].into()).is_empty());
    assert_eq!(
        violations("tokens", &["registry".to_string()].into()),
        ["leaf `tokens` names `registry`"]
    );
    assert_eq!(
        violations("spec", &["llm".to_string()].into()),
        ["`spec` (below search) names leaf `llm`"]
    );
}

/// The problems the checker finds in `code` as the file `relative` under `src/`.
fn problems_in(relative: &str, code: &str) -> Vec<String> {
    let relative = Path::new(relative);
    let named = named_modules(&code_of(code), depth(relative));
    violations(&owner(relative), &named)
}

#[test]
fn the_checker_follows_super_paths_out_of_a_top_level_module_and_no_further() {
    // Climbing to the crate root, then naming a higher layer (or, from a leaf, anything).
    for (file, code, problem) in [
        (
            "rlm/x/y.rs",
            "use super::super::super::serve::Server;",
            "`rlm` names `serve`, a higher layer",
        ),
        (
            "rlm/x.rs",
            "use super::super::serve;",
            "`rlm` names `serve`, a higher layer",
        ),
        (
            "rlm/mod.rs",
            "fn f() -> super::serve::Server {}",
            "`rlm` names `serve`, a higher layer",
        ),
        (
            "catalog/x.rs",
            "use super::super::{providers::Providers, engines::Guard};",
            "`catalog` names `engines`, a higher layer",
        ),
        (
            "rlm/mod.rs",
            "#[cfg(test)]\nmod tests {\n    use super::*;\n    use super::super::serve;\n}",
            "`rlm` names `serve`, a higher layer",
        ),
        (
            "allocator.rs",
            "use super::engines::Guard;",
            "leaf `allocator` names `engines`",
        ),
    ] {
        assert_eq!(problems_in(file, code), [problem], "{file}: {code}");
    }
    // Paths that stay inside their top-level module, or reach a lower layer. From
    // `src/rlm/x/y.rs` (module `rlm::x::y`), `super::super::serve` is `rlm::serve`.
    for (file, code) in [
        ("rlm/x.rs", "use super::foo::Bar;"),
        ("rlm/x/y.rs", "use super::super::serve;"),
        ("rlm/x/y.rs", "use super::super::{serve, eval};"),
        ("environment/x.rs", "use super::super::engines::Guard;"),
        (
            "engines/x.rs",
            "use super::super::{catalog::Catalog, llm::Llm};",
        ),
        (
            "rlm/x.rs",
            "mod tests {\n    fn f() { super::super::serve::run(); }\n}\nfn g() {}",
        ),
        ("rlm/x.rs", "pub(super) fn f() {}"),
    ] {
        assert_eq!(
            problems_in(file, code),
            Vec::<String>::new(),
            "{file}: {code}"
        );
    }
}
