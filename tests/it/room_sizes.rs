//! Room sizes (ARCHITECTURE.md): no file of `src/` over 800 non-blank lines, and
//! `src/environment/` at most a fifth of `src/`. A file past the limit holds more than
//! one idea, and an environment growing past its share is taking in what reads or feeds
//! the VM rather than the VM itself (the hints were such a part). Lines are counted
//! without blank ones, so the figures do not move with spacing.

use std::path::{Path, PathBuf};

/// The most non-blank lines a file of `src/` may have.
const MAX_FILE_LINES: usize = 800;

/// The largest share of `src/`'s non-blank lines `src/environment/` may hold, in percent.
const MAX_ENVIRONMENT_PERCENT: usize = 20;

fn non_blank_lines(text: &str) -> usize {
    text.lines().filter(|line| !line.trim().is_empty()).count()
}

/// Every `.rs` file under `src/`, as its path under `src/` and its non-blank lines.
fn sources() -> Vec<(PathBuf, usize)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    for entry in walkdir::WalkDir::new(&src).sort_by_file_name() {
        let entry = entry.expect("src/ is readable");
        let path = entry.path();
        if path.extension().is_none_or(|ext| ext != "rs") {
            continue;
        }
        let source = std::fs::read_to_string(path).expect("source is UTF-8");
        let relative = path.strip_prefix(&src).expect("under src/").to_path_buf();
        files.push((relative, non_blank_lines(&source)));
    }
    // An empty walk would pass every check below.
    assert!(files.len() > 50, "too few sources found under {src:?}");
    files
}

/// The files over [`MAX_FILE_LINES`], each named with its count.
fn oversized(files: &[(PathBuf, usize)]) -> Vec<String> {
    files
        .iter()
        .filter(|(_, lines)| *lines > MAX_FILE_LINES)
        .map(|(path, lines)| format!("src/{}: {lines} non-blank lines", path.display()))
        .collect()
}

/// Why the environment's share is too large, if it is.
fn environment_too_large(files: &[(PathBuf, usize)]) -> Option<String> {
    let total: usize = files.iter().map(|(_, lines)| lines).sum();
    let environment: usize = files
        .iter()
        .filter(|(path, _)| path.starts_with("environment"))
        .map(|(_, lines)| lines)
        .sum();
    // The folder may be renamed or emptied; then this test must be revisited, not pass.
    assert!(environment > 0, "no src/environment/ found");
    (environment * 100 > total * MAX_ENVIRONMENT_PERCENT).then(|| {
        format!(
            "src/environment/: {environment} of src/'s {total} non-blank lines ({:.1}%), \
             over {MAX_ENVIRONMENT_PERCENT}%",
            environment as f64 * 100.0 / total as f64
        )
    })
}

#[test]
fn no_file_of_src_is_over_800_non_blank_lines() {
    let over = oversized(&sources());
    assert!(
        over.is_empty(),
        "over {MAX_FILE_LINES} non-blank lines (split along a seam, one idea per file):\n{}",
        over.join("\n")
    );
}

#[test]
fn the_environment_is_at_most_a_fifth_of_src() {
    if let Some(problem) = environment_too_large(&sources()) {
        panic!("{problem}");
    }
}

#[test]
fn the_checks_name_the_file_and_its_count() {
    let files = vec![
        (PathBuf::from("environment/mod.rs"), 300),
        (PathBuf::from("rlm/run.rs"), 801),
        (PathBuf::from("rlm/prompt.rs"), 800),
        (PathBuf::from("lib.rs"), 899),
    ];
    assert_eq!(
        oversized(&files),
        [
            "src/rlm/run.rs: 801 non-blank lines",
            "src/lib.rs: 899 non-blank lines"
        ]
    );
    assert_eq!(environment_too_large(&files), None);
    let crowded = [
        (PathBuf::from("environment/mod.rs"), 201),
        (PathBuf::from("lib.rs"), 799),
    ];
    assert_eq!(
        environment_too_large(&crowded).as_deref(),
        Some("src/environment/: 201 of src/'s 1000 non-blank lines (20.1%), over 20%")
    );
    let exactly = [
        (PathBuf::from("environment/mod.rs"), 200),
        (PathBuf::from("lib.rs"), 800),
    ];
    assert_eq!(environment_too_large(&exactly), None);
    assert_eq!(non_blank_lines("a\n\n   \n\tb\n"), 2);
}
