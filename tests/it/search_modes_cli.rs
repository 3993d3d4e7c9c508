//! `rlm search --mode balanced|accurate` against the scripted server: JSON and human
//! output, fallbacks as warnings, batch queries answered concurrently in query order, and
//! an unknown mode as a usage error.

use crate::support;

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use serde_json::Value;
use support::cli::{fed, llm_args, rlm_command};
use support::openai_server::{Behavior, OpenAiServer};
use support::search_modes::TEXT_FUNCTIONS;

/// A registry directory with the text functions, one file each.
fn registry_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, source) in TEXT_FUNCTIONS {
        std::fs::write(
            dir.path().join(format!("{name}.lua")),
            format!("{source}\n"),
        )
        .unwrap();
    }
    dir
}

fn rlm_search(server: &OpenAiServer, dir: &Path, args: &[&str], stdin: &str) -> Output {
    let mut search = rlm_command();
    search
        .arg("search")
        .args(args)
        .args(["--no-baked", "--path"])
        .arg(dir)
        .args(llm_args(&server.base_url(), "cli-model"));
    fed(search, stdin.as_bytes())
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn balanced_json_follows_the_model_and_names_the_mode() {
    let dir = registry_dir();
    let server = OpenAiServer::always(Behavior::reply("[\"token_count\", \"reverse_text\"]"));
    let out = rlm_search(
        &server,
        dir.path(),
        &["text", "--mode", "balanced", "--json", "--max-results", "3"],
        "",
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let value: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(value["mode"], "balanced");
    assert_eq!(value["query"], "text");
    assert!(value.get("fallback").is_none(), "{value}");
    let names: Vec<&str> = value["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names[..2], ["token_count", "reverse_text"]);
    assert_eq!(names.len(), 3);
    assert_eq!(server.requests()[0].json().unwrap()["model"], "cli-model");
}

#[test]
fn a_fallback_is_in_the_json_and_a_warning_in_human_output() {
    let dir = registry_dir();
    let server = OpenAiServer::always(Behavior::reply("I cannot rank these."));
    let out = rlm_search(
        &server,
        dir.path(),
        &["count", "--mode", "balanced", "--json"],
        "",
    );
    assert_eq!(out.status.code(), Some(0));
    let value: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        value["fallback"]
            .as_str()
            .unwrap()
            .contains("not a JSON array"),
        "{value}"
    );
    // Built-ins are searched too: the three registry functions and two of them.
    assert_eq!(value["results"].as_array().unwrap().len(), 5);

    let out = rlm_search(&server, dir.path(), &["count", "--mode", "balanced"], "");
    assert_eq!(out.status.code(), Some(0));
    let stderr = text(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("warning: balanced search fell back to the BM25 order: "),
        "{stderr}"
    );
    assert!(text(&out.stdout).contains("word_count(text)"));
}

#[test]
fn batch_mode_takes_the_mode_and_keeps_query_order_while_running_concurrently() {
    let dir = registry_dir();
    // Answers depend on the query, not on arrival order, and arrive late enough that
    // the batch's requests overlap.
    let by_query = Behavior::ByPrompt(vec![
        (
            "Task: count\n".to_string(),
            Behavior::reply("[\"line_count\"]").after(Duration::from_millis(150)),
        ),
        (
            "Task: text\n".to_string(),
            Behavior::reply("[\"reverse_text\"]").after(Duration::from_millis(150)),
        ),
        ("".to_string(), Behavior::reply("[]")),
    ]);
    let server = OpenAiServer::always(by_query);
    let queries = "count\ntext\n".repeat(4);
    let out = rlm_search(
        &server,
        dir.path(),
        &["--queries", "-", "--mode", "balanced"],
        &queries,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let lines: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 8);
    for (i, line) in lines.iter().enumerate() {
        let (query, top) = if i % 2 == 0 {
            ("count", "line_count")
        } else {
            ("text", "reverse_text")
        };
        assert_eq!(line["query"], query, "line {i}");
        assert_eq!(line["mode"], "balanced");
        assert!(line["fallback"].is_null(), "line {i}: {line}");
        assert_eq!(line["results"][0]["name"], top, "line {i}");
    }
    assert_eq!(server.request_count(), 8);
    assert!(
        server.max_in_flight() > 1,
        "the batch ran one query at a time"
    );
}

#[test]
fn an_unknown_mode_is_a_usage_error() {
    let dir = registry_dir();
    let server = OpenAiServer::always(Behavior::reply("[]"));
    let out = rlm_search(&server, dir.path(), &["text", "--mode", "smart"], "");
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(server.request_count(), 0);
}
