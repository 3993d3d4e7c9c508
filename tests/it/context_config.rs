//! `[context] paths` in rlm.toml: the context of `exec`, `run`, `ask`, `serve` and
//! `replay` when no `--context` is given, its paths relative to the file's folder; the
//! flag wins; a path that cannot be read is a usage error naming the file and the path.

use std::path::Path;

use crate::support::cli::{llm_args, rlm_command, stderr, stdout};
use crate::support::openai_server::{Behavior, OpenAiServer};
use crate::support::rlm_loop::{bodies, lua};

/// A project folder `project/` holding `rlm.toml` (with `toml`), `docs/` of two files
/// and `notes.md`; the test runs from the folder above it.
fn project(toml: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("project");
    std::fs::create_dir_all(project.join("docs")).unwrap();
    std::fs::write(project.join("docs/a.md"), "alpha").unwrap();
    std::fs::write(project.join("docs/b.md"), "beta").unwrap();
    std::fs::write(project.join("notes.md"), "notes").unwrap();
    std::fs::write(project.join("rlm.toml"), toml).unwrap();
    dir
}

fn rlm_in(dir: &Path, args: &[&str]) -> std::process::Output {
    rlm_command()
        .current_dir(dir)
        .args(args)
        .output()
        .expect("rlm runs")
}

const LIST: &str = "if type(context) == 'string' then print(context) else for _, d in ipairs(context) do print(d.name, d.text) end end";

#[test]
fn the_files_paths_are_relative_to_its_folder() {
    let dir = project("[context]\npaths = [\"docs/\", \"notes.md\"]\n");
    let out = rlm_in(dir.path(), &["exec", LIST, "--config", "project/rlm.toml"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let notes = Path::new("project").join("notes.md");
    assert_eq!(
        stdout(&out),
        format!("a.md\talpha\nb.md\tbeta\n{}\tnotes\n", notes.display())
    );
}

#[test]
fn the_flag_wins_over_the_file() {
    let dir = project("[context]\npaths = [\"docs/\"]\n");
    let project = dir.path().join("project");
    let out = rlm_in(&project, &["exec", LIST, "--context", "notes.md"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "notes\n");
    // Found as `rlm.toml` in the current folder too, without --config.
    let out = rlm_in(&project, &["exec", "print(#context)"]);
    assert_eq!(stdout(&out), "2\n", "{}", stderr(&out));
}

#[test]
fn a_missing_path_in_the_file_is_a_usage_error_naming_the_file_and_the_path() {
    let dir = project("[context]\npaths = [\"docs/\", \"gone/\"]\n");
    for command in [&["exec", "print(1)"][..], &["serve"]] {
        let mut args = command.to_vec();
        args.extend(["--config", "project/rlm.toml"]);
        let out = rlm_in(dir.path(), &args);
        assert_eq!(out.status.code(), Some(2), "{command:?}");
        let message = stderr(&out);
        assert!(
            message.contains("rlm.toml")
                && message.contains("[context]")
                && message.contains("gone"),
            "{command:?}: {message}"
        );
        assert!(stdout(&out).is_empty());
    }
}

#[test]
fn standard_input_in_the_file_is_refused_where_it_is_taken() {
    let dir = project("[context]\npaths = [\"-\"]\n");
    let out = rlm_in(dir.path(), &["serve", "--config", "project/rlm.toml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("standard input"), "{}", stderr(&out));
}

#[test]
fn an_unknown_key_under_context_is_an_error_at_its_place() {
    let dir = project("[context]\npaths = []\nfolder = \"docs\"\n");
    let out = rlm_in(
        dir.path(),
        &["exec", "print(1)", "--config", "project/rlm.toml"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("folder"), "{}", stderr(&out));
}

#[test]
fn ask_studies_the_files_context_and_replay_gathers_it_again() {
    let dir = project("[context]\npaths = [\"docs/\"]\n");
    let project = dir.path().join("project");
    let server = OpenAiServer::start(
        vec![lua("FINAL(#context .. ' ' .. context[2].text)")],
        Behavior::status(500),
    );
    let trace = dir.path().join("run.jsonl");
    let mut ask = rlm_command();
    ask.current_dir(&project)
        .args(["ask", "Q", "-q", "--trace"])
        .arg(&trace)
        .args(llm_args(&server.base_url(), "test-model"));
    let out = ask.output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "2 beta\n");
    let system = bodies(&server)[0]["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(system.contains("a Lua list of 2 documents"), "{system}");
    let replay = || {
        rlm_command()
            .current_dir(&project)
            .arg("replay")
            .arg(&trace)
            .output()
            .unwrap()
    };
    let out = replay();
    assert!(stdout(&out).starts_with("identical ("), "{}", stderr(&out));
    std::fs::write(project.join("docs/b.md"), "beta, edited").unwrap();
    assert_eq!(
        replay().status.code(),
        Some(2),
        "a changed corpus is refused"
    );
}
