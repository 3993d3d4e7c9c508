//! `rlm serve --context`: every new session starts with the context gathered once at
//! start (a corpus for a folder), a client may still set its own, and `--context -` is
//! refused over stdio, where standard input carries the MCP messages.

use crate::support;

use serde_json::json;
use support::serve::*;

/// A folder of two documents, kept for the test.
fn folder() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.md"), "alpha\n").unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    std::fs::write(dir.path().join("sub/b.txt"), "beta\n").unwrap();
    dir
}

const LIST: &str = "for i, d in ipairs(context) do print(i, d.name, d.kind, d.text) end";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_json_api_session_starts_with_the_corpus_and_may_set_its_own() {
    let dir = folder();
    bounded(async {
        let mut command = support::cli::rlm_process();
        command.args(["serve", "--http", "127.0.0.1:0", "--context"]);
        command.arg(dir.path());
        let served = ServedProcess::spawn(command).await;
        let base = format!("http://{}", served.address);
        let list = serde_json::to_string(&json!({"code": LIST})).unwrap();
        for _ in 0..2 {
            let (status, created) =
                request("POST", format!("{base}/v1/sessions"), None, None).await;
            assert_eq!(status, 201, "{created}");
            let exec = format!(
                "{base}/v1/sessions/{}/exec",
                created["id"].as_str().unwrap()
            );
            let (status, out) = request("POST", exec.clone(), Some(&list), None).await;
            assert_eq!(status, 200, "{out}");
            assert_eq!(
                out["output"],
                "1\ta.md\ttext\talpha\n\n2\tsub/b.txt\ttext\tbeta\n\n"
            );
            // Its own context replaces the server's, in this session only.
            let own = r#"{"code": "print(context)", "context": "mine"}"#;
            let (_, out) = request("POST", exec, Some(own), None).await;
            assert_eq!(out["output"], "mine\n");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_sessions_run_lua_sees_the_context() {
    let dir = folder();
    bounded(async {
        let path = dir.path().join("a.md");
        let client = stdio_client(&["--context", path.to_str().unwrap()]).await;
        let result = run_lua(&client, "print(type(context), context)").await;
        assert_eq!(text_of(&result), "string\talpha\n\n");
        client.cancel().await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rlm_prompt_describes_the_served_corpus_and_run_lua_reads_it() {
    let dir = folder();
    bounded(async {
        let client = stdio_client(&["--context", dir.path().to_str().unwrap()]).await;
        let text = rlm_prompt(&client, "What do the notes say?").await;
        assert!(
            text.contains("`context` is a corpus: a Lua list of 2 documents")
                && text.contains("`a.md`, `sub/b.txt`"),
            "{text}"
        );
        let result = run_lua(&client, "print(#context, context[2].name)").await;
        assert_eq!(text_of(&result), "2\tsub/b.txt\n");
        client.cancel().await.unwrap();
    })
    .await;
}

/// A call's text, which must not be an error.
fn text_of(result: &rmcp::model::CallToolResult) -> String {
    assert!(!is_error(result), "{}", text(result));
    text(result)
}

#[test]
fn context_from_stdin_is_refused_over_stdio_but_a_missing_path_names_itself() {
    let refused = support::cli::rlm(&["serve", "--context", "-"]);
    assert_eq!(refused.status.code(), Some(2));
    let message = support::cli::stderr(&refused);
    assert!(
        message.contains("standard input") && message.contains("MCP messages"),
        "{message}"
    );
    let missing = support::cli::rlm(&["serve", "--context", "no/such/folder"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        support::cli::stderr(&missing).contains("no/such/folder"),
        "{}",
        support::cli::stderr(&missing)
    );
}
