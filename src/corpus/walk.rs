//! The files one `--context` path names: itself, a folder's files as ripgrep walks
//! them, or a glob's matches.

use std::path::{Component, Path, PathBuf};

use globset::{GlobBuilder, GlobMatcher};
use ignore::WalkBuilder;

use super::CorpusError;

/// A file to read, with its document name.
#[derive(Debug)]
pub(super) struct Found {
    pub path: PathBuf,
    pub name: String,
}

/// The files `path` names: a file itself (named as given), a folder's files (named
/// relative to it), or a glob's matches (named relative to the glob's literal folder).
pub(super) fn files(path: &Path) -> Result<Vec<Found>, CorpusError> {
    if path.is_file() {
        return Ok(vec![Found {
            path: path.to_path_buf(),
            name: path.display().to_string(),
        }]);
    }
    if path.is_dir() {
        return Ok(walk(path, None));
    }
    let text = path.to_string_lossy();
    if !text.contains(['*', '?', '[', '{']) {
        let reason = match std::fs::metadata(path) {
            Err(error) => error.to_string(),
            Ok(_) => "not a file or a folder".to_string(),
        };
        return Err(CorpusError::new(path.display(), reason));
    }
    let matcher = GlobBuilder::new(&text)
        .literal_separator(true)
        .build()
        .map_err(|error| CorpusError::new(&text, format!("not a valid glob: {error}")))?
        .compile_matcher();
    let base = literal_base(path);
    let found = walk(&base, Some(&matcher));
    if found.is_empty() {
        return Err(CorpusError::new(&text, "the glob matches no file"));
    }
    Ok(found)
}

/// The files under `root`, sorted by name, hidden files and ignored ones left out
/// (`.gitignore` honoured in any folder, not only in a git repository), links not
/// followed; those `matcher` accepts when there is one.
fn walk(root: &Path, matcher: Option<&GlobMatcher>) -> Vec<Found> {
    let walker = WalkBuilder::new(root)
        .hidden(true)
        .git_ignore(true)
        .ignore(true)
        .require_git(false)
        .git_global(false)
        .follow_links(false)
        .sort_by_file_name(|a, b| a.cmp(b))
        .build();
    walker
        // An entry that cannot be read (a folder without permission) is left out.
        .filter_map(Result::ok)
        .filter(|entry| entry.file_type().is_some_and(|kind| kind.is_file()))
        .filter(|entry| matcher.is_none_or(|m| m.is_match(entry.path())))
        .map(|entry| {
            let relative = entry.path().strip_prefix(root).unwrap_or(entry.path());
            Found {
                name: relative.display().to_string(),
                path: entry.into_path(),
            }
        })
        .collect()
}

/// The folders of `glob` before its first component with a wildcard (`.` if none).
fn literal_base(glob: &Path) -> PathBuf {
    let mut base = PathBuf::new();
    for component in glob.components() {
        let literal = match component {
            Component::Normal(part) => !part.to_string_lossy().contains(['*', '?', '[', '{']),
            _ => true,
        };
        if !literal {
            break;
        }
        base.push(component);
    }
    if base.as_os_str().is_empty() {
        base.push(".");
    }
    base
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(found: Vec<Found>) -> Vec<String> {
        found.into_iter().map(|f| f.name).collect()
    }

    #[test]
    fn a_folder_is_walked_sorted_without_hidden_or_ignored_files() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("sub/deeper")).unwrap();
        std::fs::create_dir_all(root.join(".hidden")).unwrap();
        for file in [
            "b.md",
            "a.md",
            "sub/c.txt",
            "sub/deeper/d.txt",
            ".hidden/e.txt",
            ".dot",
            "skip.log",
        ] {
            std::fs::write(root.join(file), "x").unwrap();
        }
        std::fs::write(root.join(".gitignore"), "*.log\n").unwrap();
        assert_eq!(
            names(files(root).unwrap()),
            ["a.md", "b.md", "sub/c.txt", "sub/deeper/d.txt"]
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_symlink_loop_does_not_hang_the_walk() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("a")).unwrap();
        std::fs::write(dir.path().join("a/f.txt"), "x").unwrap();
        std::os::unix::fs::symlink(dir.path(), dir.path().join("a/loop")).unwrap();
        assert_eq!(names(files(dir.path()).unwrap()), ["a/f.txt"]);
    }

    #[test]
    fn a_glob_matches_below_its_literal_folder() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("logs/old")).unwrap();
        for file in ["logs/a.log", "logs/b.txt", "logs/old/c.log"] {
            std::fs::write(dir.path().join(file), "x").unwrap();
        }
        let glob = dir.path().join("logs/*.log");
        assert_eq!(names(files(&glob).unwrap()), ["a.log"]);
        let glob = dir.path().join("logs/**/*.log");
        assert_eq!(names(files(&glob).unwrap()), ["a.log", "old/c.log"]);
        let none = files(&dir.path().join("logs/*.pdf")).unwrap_err();
        assert_eq!(none.reason, "the glob matches no file");
    }

    #[test]
    fn a_missing_path_says_why() {
        let error = files(Path::new("no/such/file.txt")).unwrap_err();
        assert!(error.reason.contains("No such file"), "{}", error.reason);
    }
}
