//! The `files` provider: confinement to the root (every escape asserts that nothing
//! outside was read or written), read-only mode, limits, atomic all-or-nothing edits,
//! listing, and the functions as the model calls them from Lua.

use std::path::Path;
use std::sync::Arc;

use rlm_registry::Registry;
use rlm_registry::environment::Environment;
use rlm_registry::providers::{Edit, Files, FilesConfig, FilesProvider, Providers};

const SECRET: &str = "TOP-SECRET-OUTSIDE";

/// `outside/secret.txt` and `outside/dir/inner.txt` beside `root/` with `root/a.txt`.
struct Layout {
    _dir: tempfile::TempDir,
    root: std::path::PathBuf,
    outside: std::path::PathBuf,
}

fn layout() -> Layout {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::create_dir_all(outside.join("dir")).unwrap();
    std::fs::write(root.join("a.txt"), "alpha\nbeta\n").unwrap();
    std::fs::write(root.join("sub/b.txt"), "bee").unwrap();
    std::fs::write(outside.join("secret.txt"), SECRET).unwrap();
    std::fs::write(outside.join("dir/inner.txt"), SECRET).unwrap();
    Layout {
        _dir: dir,
        root,
        outside,
    }
}

fn files(layout: &Layout, writable: bool) -> Files {
    Files::open(FilesConfig {
        writable,
        ..FilesConfig::new(&layout.root)
    })
    .unwrap()
}

/// Everything under `dir` as (path, content), to prove it unchanged.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut all: Vec<_> = walk(dir);
    all.sort();
    all
}

fn walk(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        if meta.is_dir() {
            out.extend(walk(&path));
        } else if meta.is_file() {
            out.push((path.display().to_string(), std::fs::read(&path).unwrap()));
        }
    }
    out
}

#[cfg(unix)]
fn symlink(target: &Path, link: &Path) {
    std::os::unix::fs::symlink(target, link).unwrap();
}

fn refused<T: std::fmt::Debug>(result: Result<T, String>) -> String {
    let message = result.expect_err("must be refused");
    assert!(!message.contains(SECRET), "{message}");
    message
}

#[test]
fn reads_and_lists_inside_the_root() {
    let layout = layout();
    let files = files(&layout, false);
    assert_eq!(files.read("a.txt").unwrap(), "alpha\nbeta\n");
    assert_eq!(files.read("./sub/b.txt").unwrap(), "bee");
    let listed: Vec<(String, &str)> = files
        .list(None)
        .unwrap()
        .into_iter()
        .map(|e| (e.path, e.kind))
        .collect();
    assert_eq!(
        listed,
        [
            ("a.txt".to_string(), "file"),
            ("sub".to_string(), "dir"),
            ("sub/b.txt".to_string(), "file")
        ]
    );
    assert_eq!(files.list(Some("sub")).unwrap()[0].path, "sub/b.txt");
}

#[test]
fn dot_dot_and_absolute_paths_are_refused() {
    let layout = layout();
    let files = files(&layout, true);
    let before = snapshot(&layout.outside);
    let absolute = layout.outside.join("secret.txt").display().to_string();
    for path in [
        "../outside/secret.txt",
        "sub/../../outside/secret.txt",
        "..",
        absolute.as_str(),
        "/etc/passwd",
    ] {
        let message = refused(files.read(path));
        assert!(message.contains("not allowed"), "{path}: {message}");
        refused(files.write(path, "pwned"));
        refused(files.list(Some(path)));
    }
    let relative_to_outside = "../outside/new.txt";
    refused(files.write(relative_to_outside, "pwned"));
    assert_eq!(snapshot(&layout.outside), before, "nothing outside changed");
    assert!(!layout.outside.join("new.txt").exists());
}

#[cfg(unix)]
#[test]
fn a_symlink_to_a_file_outside_is_neither_read_nor_written_through() {
    let layout = layout();
    symlink(
        &layout.outside.join("secret.txt"),
        &layout.root.join("link.txt"),
    );
    let files = files(&layout, true);
    let before = snapshot(&layout.outside);
    refused(files.read("link.txt"));
    // Writing replaces the link itself (rename), never the file it points to.
    let _ = files.write("link.txt", "pwned");
    refused(files.edit(
        "link.txt",
        &[Edit {
            old: "TOP".into(),
            new: "pwned".into(),
        }],
    ));
    assert_eq!(snapshot(&layout.outside), before, "nothing outside changed");
    let listed = files.list(None).unwrap();
    assert!(
        listed
            .iter()
            .all(|e| e.size != Some(SECRET.len() as u64) || e.path != "link.txt")
    );
}

#[cfg(unix)]
#[test]
fn a_symlink_to_a_directory_outside_is_not_entered() {
    let layout = layout();
    symlink(&layout.outside.join("dir"), &layout.root.join("escape"));
    let files = files(&layout, true);
    let before = snapshot(&layout.outside);
    refused(files.read("escape/inner.txt"));
    refused(files.write("escape/planted.txt", "pwned"));
    refused(files.list(Some("escape")));
    let listed = files.list(None).unwrap();
    assert!(
        listed
            .iter()
            .any(|e| e.path == "escape" && e.kind == "link")
    );
    assert!(
        !listed.iter().any(|e| e.path.starts_with("escape/")),
        "{listed:?}"
    );
    assert_eq!(snapshot(&layout.outside), before, "nothing outside changed");
    assert!(!layout.outside.join("dir/planted.txt").exists());
}

#[test]
fn writes_are_refused_when_read_only() {
    let layout = layout();
    let files = files(&layout, false);
    let before = snapshot(&layout.root);
    let message = refused(files.write("a.txt", "changed"));
    assert!(message.contains("read-only"), "{message}");
    refused(files.write("new.txt", "x"));
    refused(files.edit(
        "a.txt",
        &[Edit {
            old: "alpha".into(),
            new: "x".into(),
        }],
    ));
    assert_eq!(snapshot(&layout.root), before);
}

#[test]
fn a_failed_edit_leaves_the_file_byte_identical_and_names_the_edit() {
    let layout = layout();
    let files = files(&layout, true);
    let before = std::fs::read(layout.root.join("a.txt")).unwrap();
    let edits = [
        Edit {
            old: "alpha".into(),
            new: "ALPHA".into(),
        },
        Edit {
            old: "gamma".into(),
            new: "GAMMA".into(),
        },
    ];
    let message = refused(files.edit("a.txt", &edits));
    assert!(message.contains("edit 2 of 2"), "{message}");
    assert!(message.contains("nothing was changed"), "{message}");
    assert_eq!(std::fs::read(layout.root.join("a.txt")).unwrap(), before);
    std::fs::write(layout.root.join("twice.txt"), "x x").unwrap();
    let message = refused(files.edit(
        "twice.txt",
        &[Edit {
            old: "x".into(),
            new: "y".into(),
        }],
    ));
    assert!(message.contains("occurs 2 times"), "{message}");
    assert_eq!(
        std::fs::read_to_string(layout.root.join("twice.txt")).unwrap(),
        "x x"
    );
    // A good edit applies in order, each against the text the previous one left.
    let edits = [
        Edit {
            old: "alpha".into(),
            new: "one".into(),
        },
        Edit {
            old: "one\nbeta".into(),
            new: "two".into(),
        },
    ];
    assert_eq!(files.edit("a.txt", &edits).unwrap(), 2);
    assert_eq!(files.read("a.txt").unwrap(), "two\n");
    // No temporary file is left behind.
    assert_eq!(files.list(None).unwrap().len(), 4);
}

#[test]
fn sizes_are_limited() {
    let layout = layout();
    let files = Files::open(FilesConfig {
        writable: true,
        max_file_bytes: 8,
        ..FilesConfig::new(&layout.root)
    })
    .unwrap();
    assert!(refused(files.read("a.txt")).contains("limit"));
    assert!(refused(files.write("big.txt", "123456789")).contains("limit"));
    assert!(!layout.root.join("big.txt").exists());
    assert_eq!(files.write("ok.txt", "12345678").unwrap(), 8);
    std::fs::write(layout.root.join("bin.dat"), [0xff, 0xfe]).unwrap();
    assert!(refused(files.read("bin.dat")).contains("not UTF-8"));
}

#[test]
fn the_model_uses_the_files_from_lua() {
    let layout = layout();
    let mut providers = Providers::builtin();
    providers
        .register(
            FilesProvider::new(FilesConfig {
                writable: true,
                ..FilesConfig::new(&layout.root)
            })
            .unwrap(),
        )
        .unwrap();
    let env = Environment::builder(Registry::baked().clone())
        .providers(Arc::new(providers))
        .build()
        .unwrap();
    let run = env
        .execute(
            r##"
            write_file("out/report.md", "# Report\nTODO\n")
            print(edit_file("out/report.md", {{old = "TODO", new = "done"}}))
            print(read_file("out/report.md"))
            for _, e in ipairs(list_files("out")) do print(e.path, e.type, e.size) end
            print(pcall(read_file, "../outside/secret.txt"))
            "##,
        )
        .unwrap();
    assert!(
        run.output
            .starts_with("1\n# Report\ndone\n\nout/report.md\tfile\t14\nfalse\t"),
        "{}",
        run.output
    );
    assert!(run.output.contains("`..` is not allowed"), "{}", run.output);
    assert!(!run.output.contains(SECRET));
}
