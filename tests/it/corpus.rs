//! `--context` gathering a corpus end to end: folders walked as ripgrep walks them,
//! repeated paths, globs, standard input, JSONL records, the prompt's description, and
//! replay refusing a corpus that changed.

use std::path::Path;

use crate::support::cli::{llm_args, rlm_command, stderr, stdout};
use crate::support::openai_server::{Behavior, OpenAiServer};
use crate::support::rlm_loop::{bodies, lua};

/// `rlm exec CODE --context …` in `dir`.
fn exec_in(dir: &Path, code: &str, contexts: &[&str]) -> std::process::Output {
    let mut command = rlm_command();
    command.current_dir(dir).args(["exec", code]);
    for context in contexts {
        command.args(["--context", context]);
    }
    command.output().expect("rlm runs")
}

const LIST: &str = "for i, d in ipairs(context) do print(i, d.name, d.kind, d.bytes) end";

fn tree(root: &Path, files: &[(&str, &[u8])]) {
    for (path, text) in files {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

#[test]
fn a_folder_is_a_list_of_documents_without_ignored_hidden_or_binary_files() {
    let dir = tempfile::tempdir().unwrap();
    tree(
        dir.path(),
        &[
            ("docs/b.md", b"bee\n"),
            ("docs/a.md", b"ay\n"),
            ("docs/deep/er/c.txt", b"sea\n"),
            ("docs/.hidden.md", b"no"),
            ("docs/.git-like/x.md", b"no"),
            ("docs/build.log", b"no"),
            ("docs/.gitignore", b"*.log\n"),
            ("docs/program.bin", b"\x7fELF\x02\x01\0\0"),
        ],
    );
    #[cfg(unix)]
    std::os::unix::fs::symlink(dir.path().join("docs"), dir.path().join("docs/deep/loop")).unwrap();
    let out = exec_in(dir.path(), LIST, &["docs"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "1\ta.md\ttext\t3\n2\tb.md\ttext\t4\n3\tdeep/er/c.txt\ttext\t4\n"
    );
}

#[test]
fn ten_thousand_small_files_are_gathered() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    for i in 0..10_000 {
        let sub = docs.join(format!("{:02}", i % 100));
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(sub.join(format!("{i}.txt")), format!("doc {i}\n")).unwrap();
    }
    let out = exec_in(
        dir.path(),
        "local n = 0 for _, d in ipairs(context) do n = n + d.bytes end print(#context, n)",
        &["docs"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let bytes: usize = (0..10_000).map(|i| format!("doc {i}\n").len()).sum();
    assert_eq!(stdout(&out), format!("10000\t{bytes}\n"));
}

#[test]
fn paths_repeat_globs_match_and_standard_input_joins() {
    let dir = tempfile::tempdir().unwrap();
    tree(
        dir.path(),
        &[
            ("logs/a.log", b"A\n"),
            ("logs/b.txt", b"B\n"),
            ("notes.md", b"N\n"),
        ],
    );
    let out = exec_in(dir.path(), LIST, &["logs/*.log", "notes.md"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "1\ta.log\ttext\t2\n2\tnotes.md\ttext\t2\n");

    let mut child = rlm_command()
        .current_dir(dir.path())
        .args(["exec", LIST, "--context", "notes.md", "--context", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(b"piped\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(stdout(&out), "1\tnotes.md\ttext\t2\n2\t-\ttext\t6\n");
}

#[test]
fn a_path_that_cannot_be_read_or_a_taken_stdin_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = exec_in(dir.path(), "print(1)", &["missing", "also-missing"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("cannot read missing"),
        "{}",
        stderr(&out)
    );
    let out = exec_in(dir.path(), "print(1)", &["*.nothing"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("the glob matches no file"),
        "{}",
        stderr(&out)
    );
    let out = rlm_command()
        .current_dir(dir.path())
        .args(["run", "-", "--context", "-"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("already holds the code"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_jsonl_of_records_is_a_corpus_and_other_jsonl_stays_text() {
    let dir = tempfile::tempdir().unwrap();
    tree(
        dir.path(),
        &[
            (
                "corpus.jsonl",
                b"{\"docid\": \"d1\", \"text\": \"first\", \"url\": \"u1\"}\n{\"id\": \"d2\", \"contents\": \"second\"}\n",
            ),
            ("events.jsonl", b"{\"level\": \"ERROR\"}\n{\"level\": \"INFO\"}\n"),
        ],
    );
    let out = exec_in(
        dir.path(),
        "for _, d in ipairs(context) do print(d.name, d.text, d.meta and d.meta.url) end",
        &["corpus.jsonl"],
    );
    assert_eq!(
        stdout(&out),
        "d1\tfirst\tu1\nd2\tsecond\tnil\n",
        "{}",
        stderr(&out)
    );
    let out = exec_in(
        dir.path(),
        "local n = 0 for _ in json.lines(context) do n = n + 1 end print(type(context), n)",
        &["events.jsonl"],
    );
    assert_eq!(stdout(&out), "string\t2\n", "{}", stderr(&out));
}

#[test]
fn ask_describes_the_corpus_and_replay_refuses_a_changed_one() {
    let dir = tempfile::tempdir().unwrap();
    tree(
        dir.path(),
        &[("docs/a.md", b"alpha\n"), ("docs/b.md", b"beta\n")],
    );
    let server = OpenAiServer::start(
        vec![
            lua("print(#context, context[2].name)"),
            lua("FINAL('done')"),
        ],
        Behavior::status(500),
    );
    let trace = dir.path().join("run.jsonl");
    let out = rlm_command()
        .current_dir(dir.path())
        .args(["ask", "Q", "-q", "--context", "docs", "--trace"])
        .arg(&trace)
        .args(llm_args(&server.base_url(), "test-model"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let bodies = bodies(&server);
    let system = bodies[0]["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.contains("`context` is a corpus: a Lua list of 2 documents, 11 bytes"),
        "{system}"
    );
    let feedback = bodies[1]["messages"].as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap();
    assert!(feedback.contains("2\tb.md"), "{feedback}");

    let replay = |dir: &Path| {
        rlm_command()
            .current_dir(dir)
            .arg("replay")
            .arg(&trace)
            .args(["--context", "docs"])
            .output()
            .unwrap()
    };
    let out = replay(dir.path());
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    std::fs::write(dir.path().join("docs/b.md"), "beta, edited\n").unwrap();
    let out = replay(dir.path());
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(stderr(&out).contains("context"), "{}", stderr(&out));
}
