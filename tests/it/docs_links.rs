//! The README and the pages of `docs/` hold together: every relative link reaches a file
//! that exists, and the heading or anchor it names; what they link to is in the package
//! (`include` in Cargo.toml); the README stays short; their Rust blocks are doctests; and
//! neither they nor the code's comments cite anything a reader of the crate does not have.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and every Markdown page of `docs/`, as paths relative to the crate.
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![PathBuf::from("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/ exists")
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .map(|path| path.strip_prefix(root()).unwrap().to_path_buf())
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

/// The lines of `text` outside fenced code blocks, with their 1-based numbers.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fence: Option<&str> = None;
    let mut lines = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let marker = ["```", "~~~"].into_iter().find(|m| trimmed.starts_with(m));
        match (fence, marker) {
            (None, Some(m)) => fence = Some(m),
            (Some(open), Some(m)) if open == m && trimmed.trim_end() == m => fence = None,
            (None, None) => lines.push((index + 1, line)),
            _ => {}
        }
    }
    lines
}

/// `line` without its code spans (`` `a](b)` `` is not a link).
fn without_code_spans(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(start) = rest.find('`') {
        out.push_str(&rest[..start]);
        let ticks = rest[start..].chars().take_while(|&c| c == '`').count();
        let after = &rest[start + ticks..];
        let closing = "`".repeat(ticks);
        match after.find(&closing) {
            Some(end) => rest = &after[end + ticks..],
            None => {
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The anchor GitHub gives a heading: lower case, punctuation other than `-` and `_`
/// dropped, spaces as hyphens.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c.to_lowercase().next().unwrap_or(c)),
            _ => None,
        })
        .collect()
}

/// The anchors of a Markdown file: its headings' (a repeated heading gets `-1`, `-2`, …
/// as on GitHub) and explicit `<a id="…">` ones.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut anchors = BTreeSet::new();
    for (_, line) in prose_lines(text) {
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if (1..=6).contains(&hashes) && line[hashes..].starts_with(' ') {
            let base = slug(&line[hashes..]);
            let mut anchor = base.clone();
            let mut n = 0;
            while !anchors.insert(anchor.clone()) {
                n += 1;
                anchor = format!("{base}-{n}");
            }
        }
        let mut rest = line;
        while let Some(start) = rest.find("<a id=\"") {
            let after = &rest[start + 7..];
            let end = after.find('"').unwrap_or(after.len());
            anchors.insert(after[..end].to_string());
            rest = &after[end..];
        }
    }
    anchors
}

/// The targets of the inline links and images of `text`, with their line numbers.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (number, line) in prose_lines(text) {
        let line = without_code_spans(line);
        let mut rest = line.as_str();
        while let Some(start) = rest.find("](") {
            let after = &rest[start + 2..];
            let end = after.find(')').unwrap_or(after.len());
            found.push((number, after[..end].to_string()));
            rest = &after[end..];
        }
    }
    found
}

/// A link to another site, which this test cannot and need not follow.
fn is_external(target: &str) -> bool {
    target.starts_with("http://") || target.starts_with("https://") || target.starts_with("mailto:")
}

/// Every relative link of the pages, as (page, line, file relative to the crate, anchor).
fn relative_links() -> Vec<(PathBuf, usize, PathBuf, Option<String>)> {
    let mut all = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(root().join(&page)).unwrap();
        for (line, target) in links(&text) {
            if is_external(&target) {
                continue;
            }
            let (file, anchor) = match target.split_once('#') {
                Some((file, anchor)) => (file, Some(anchor.to_string())),
                None => (target.as_str(), None),
            };
            let file = if file.is_empty() {
                page.clone()
            } else {
                normalize(&page.parent().unwrap().join(file))
            };
            all.push((page.clone(), line, file, anchor));
        }
    }
    all
}

/// `path` with its `.` and `..` components resolved, without touching the disk.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[test]
fn every_relative_link_reaches_a_file_and_its_anchor() {
    let links = relative_links();
    assert!(links.len() >= 30, "only {} links found", links.len());
    let mut broken = Vec::new();
    for (page, line, file, anchor) in links {
        let at = format!("{}:{line}", page.display());
        let path = root().join(&file);
        if !path.exists() {
            broken.push(format!("{at}: {} does not exist", file.display()));
            continue;
        }
        let Some(anchor) = anchor else { continue };
        if file.extension().is_none_or(|ext| ext != "md") {
            broken.push(format!(
                "{at}: #{anchor} on {}, not a Markdown file",
                file.display()
            ));
            continue;
        }
        let anchors = anchors(&std::fs::read_to_string(&path).unwrap());
        if !anchors.contains(&anchor) {
            broken.push(format!(
                "{at}: {} has no heading or anchor #{anchor}",
                file.display()
            ));
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_checker_finds_headings_links_and_their_anchors() {
    let text = "# Title\n\n## `rlm trace show`\n\n```sh\n# not a heading [x](nowhere.md)\n```\n\
                ## JSON and CSV: `json`, `csv`\n## Title\n<a id=\"serving-browsers\"></a>**B.**\n\
                See [a](other.md#part), `[not](a-link.md)` and ![pic](docs/trace.png).\n";
    let anchors = anchors(text);
    for expected in [
        "title",
        "rlm-trace-show",
        "json-and-csv-json-csv",
        "title-1",
        "serving-browsers",
    ] {
        assert!(anchors.contains(expected), "{expected} in {anchors:?}");
    }
    assert!(!anchors.contains("not-a-heading-xnowheremd"));
    let targets: Vec<String> = links(text).into_iter().map(|(_, t)| t).collect();
    assert_eq!(targets, ["other.md#part", "docs/trace.png"]);
}

/// The patterns of `include` in Cargo.toml.
fn package_includes() -> Vec<String> {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let start = manifest
        .find("\ninclude = [")
        .expect("Cargo.toml has an include list");
    let list = &manifest[start + "\ninclude = [".len()..];
    let list = &list[..list.find(']').expect("the include list ends")];
    list.split(',')
        .map(|item| item.trim().trim_matches('"').to_string())
        .filter(|item| !item.is_empty())
        .collect()
}

/// Whether an `include` pattern takes `file`: `dir/**` takes what is under `dir/`, any
/// other pattern the file of that name.
fn included(pattern: &str, file: &str) -> bool {
    match pattern.strip_suffix("/**") {
        Some(dir) => file.starts_with(&format!("{dir}/")),
        None => pattern == file,
    }
}

#[test]
fn the_package_ships_every_page_and_every_file_they_link() {
    let includes = package_includes();
    let mut files: BTreeSet<String> = pages().iter().map(|p| p.display().to_string()).collect();
    files.extend(
        relative_links()
            .into_iter()
            .map(|(_, _, file, _)| file.display().to_string()),
    );
    let missing: Vec<&String> = files
        .iter()
        .filter(|file| !includes.iter().any(|pattern| included(pattern, file)))
        .collect();
    assert!(
        missing.is_empty(),
        "not in Cargo.toml's include {includes:?}: {missing:?}"
    );
}

#[test]
fn the_readme_is_short_and_the_pages_cite_nothing_a_reader_lacks() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines <= 400,
        "README.md has {lines} lines; the reference belongs in docs/"
    );
    for page in pages() {
        let text = std::fs::read_to_string(root().join(&page)).unwrap();
        assert_eq!(internal_citations(&page, &text), Vec::<String>::new());
    }
}

/// What names a document the crate's readers do not have: the project's own specification
/// and its seed tasks.
const INTERNAL_CITATIONS: [&str; 3] = ["SPEC §", "SPEC section", "seed 00"];

/// The lines of `text` (the file `path`) that cite an internal document, as `path:line`.
fn internal_citations(path: &Path, text: &str) -> Vec<String> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| INTERNAL_CITATIONS.iter().any(|c| line.contains(c)))
        .map(|(number, line)| format!("{}:{}: {}", path.display(), number + 1, line.trim()))
        .collect()
}

#[test]
fn no_comment_of_the_code_cites_a_document_readers_lack() {
    let mut files: Vec<PathBuf> = ["build.rs", "ARCHITECTURE.md", "BENCHMARKS.md"]
        .map(PathBuf::from)
        .to_vec();
    for dir in ["src", "tests", "benches", "lua", "examples", "fuzz"] {
        let entries = walkdir::WalkDir::new(root().join(dir))
            .into_iter()
            .filter_entry(|entry| {
                !["target", "corpus", "artifacts"].contains(&&*entry.file_name().to_string_lossy())
            });
        for entry in entries.filter_map(Result::ok) {
            if entry.file_type().is_file() {
                files.push(entry.path().strip_prefix(root()).unwrap().to_path_buf());
            }
        }
    }
    assert!(files.len() > 100, "only {} files found", files.len());
    // This file names the citations it looks for.
    let this_file = Path::new(file!());
    let cited: Vec<String> = files
        .iter()
        .filter(|file| !this_file.ends_with(file))
        .filter_map(|file| {
            let text = std::fs::read_to_string(root().join(file)).ok()?;
            Some(internal_citations(file, &text))
        })
        .flatten()
        .collect();
    assert!(
        cited.is_empty(),
        "say what is meant instead:\n{}",
        cited.join("\n")
    );
}

#[test]
fn every_page_is_a_doctest_module_of_the_crate() {
    let lib = std::fs::read_to_string(root().join("src/lib.rs")).unwrap();
    let missing: Vec<String> = pages()
        .iter()
        .map(|page| page.display().to_string())
        .filter(|page| !lib.contains(&format!("#[doc = include_str!(\"../{page}\")]")))
        .collect();
    assert!(
        missing.is_empty(),
        "src/lib.rs's `doc_pages` does not compile the Rust blocks of {missing:?}"
    );
}
