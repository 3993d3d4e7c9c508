//! `rlm serve --state-dir DIR`: a JSON-API session's REPL survives a restart of the
//! server process; a deleted session leaves no file; a foreign or corrupt file is a
//! warning, not a crash.

use crate::support;

use std::path::Path;

use serde_json::{Value, json};
use support::serve::*;

/// `rlm serve` over HTTP with its sessions journaled in `dir`.
async fn serve_with_state(dir: &Path) -> ServedProcess {
    let mut command = support::cli::rlm_process();
    command.args(["serve", "--http", "127.0.0.1:0", "--state-dir"]);
    command.arg(dir);
    ServedProcess::spawn(command).await
}

async fn post(served: &ServedProcess, path: &str, body: Option<&str>) -> (u16, Value) {
    request(
        "POST",
        format!("http://{}{path}", served.address),
        body,
        None,
    )
    .await
}

/// The journal files in `dir`.
fn journals(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".jsonl"))
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_comes_back_with_its_globals_after_the_server_restarts() {
    let dir = tempfile::tempdir().unwrap();
    bounded(async {
        let mut first = serve_with_state(dir.path()).await;
        let (status, created) = post(&first, "/v1/sessions", None).await;
        assert_eq!(status, 201);
        let id = created["id"].as_str().unwrap().to_string();
        let exec = format!("/v1/sessions/{id}/exec");
        let code = r#"{"code": "counts = {a = 1, b = 2} t0 = os.time() r = math.random(1000000)"}"#;
        assert_eq!(post(&first, &exec, Some(code)).await.0, 200);
        let (_, before) = post(&first, &exec, Some(r#"{"code": "print(t0, r)"}"#)).await;
        assert_eq!(journals(dir.path()), [format!("{id}.jsonl")]);
        first.child.kill().await.unwrap();
        first.child.wait().await.unwrap();

        let second = serve_with_state(dir.path()).await;
        let (status, read) = post(
            &second,
            &exec,
            Some(r#"{"code": "print(counts.a + counts.b)"}"#),
        )
        .await;
        assert_eq!((status, read), (200, json!({"output": "3\n"})));
        let (_, after) = post(&second, &exec, Some(r#"{"code": "print(t0, r)"}"#)).await;
        assert_eq!(
            after, before,
            "the clock and random values are the recorded ones"
        );

        let url = format!("http://{}/v1/sessions/{id}", second.address);
        let (status, _) = request("DELETE", url, None, None).await;
        assert_eq!(status, 204);
        assert!(
            journals(dir.path()).is_empty(),
            "a deleted session leaves nothing"
        );
        let (status, _) = post(&second, &exec, Some(r#"{"code": "print(1)"}"#)).await;
        assert_eq!(status, 404);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_or_foreign_file_is_a_warning_not_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let id = "0123456789abcdef0123456789abcdef";
    std::fs::write(dir.path().join(format!("{id}.jsonl")), "not a journal\n").unwrap();
    std::fs::write(dir.path().join("notes.txt"), "mine").unwrap();
    bounded(async {
        let served = serve_with_state(dir.path()).await;
        let exec = format!("/v1/sessions/{id}/exec");
        let (status, _) = post(&served, &exec, Some(r#"{"code": "print(1)"}"#)).await;
        assert_eq!(
            status, 404,
            "a journal that cannot be read back is no session"
        );
        let (status, _) = post(&served, "/v1/sessions", None).await;
        assert_eq!(status, 201, "the server goes on");
        assert!(
            dir.path().join("notes.txt").exists(),
            "a foreign file is left alone"
        );
    })
    .await;
}

/// `run_lua` in the MCP session `session` of `served`: the JSON-RPC result.
async fn run_lua_in(served: &ServedProcess, session: &str, arguments: Value) -> Value {
    let url = format!("http://{}/mcp", served.address);
    let reply = call_in(url, session, 2, "run_lua", arguments).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    reply.json()["result"].clone()
}

/// The text a `run_lua` result holds.
fn result_text(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The REPL a `run_lua` result names.
fn result_session(result: &Value) -> String {
    result["_meta"]["rlm/session"]
        .as_str()
        .unwrap_or_else(|| panic!("no rlm/session in {result}"))
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_clients_repl_comes_back_by_its_session_after_the_server_stops_and_restarts() {
    let dir = tempfile::tempdir().unwrap();
    bounded(async {
        let first = serve_with_state(dir.path()).await;
        let mcp = open_session(format!("http://{}/mcp", first.address)).await;
        let code =
            json!({"code": "counts = {a = 1, b = 2} t0 = os.time() r = math.random(1000000)"});
        let set = run_lua_in(&first, &mcp, code).await;
        let repl = result_session(&set);
        let before = run_lua_in(&first, &mcp, json!({"code": "print(t0, r)"})).await;
        assert_eq!(journals(dir.path()), [format!("{repl}.jsonl")]);
        // Stopped as a service manager stops it: the journal stays for the client.
        let stopped = std::process::Command::new("kill")
            .args(["-TERM", &first.pid.to_string()])
            .status()
            .unwrap();
        assert!(stopped.success());
        let mut first = first;
        first.child.wait().await.unwrap();
        assert_eq!(journals(dir.path()), [format!("{repl}.jsonl")]);

        let second = serve_with_state(dir.path()).await;
        let url = format!("http://{}/mcp", second.address);
        let mcp = open_session(url.clone()).await;
        let read = json!({"code": "print(counts.a + counts.b)", "session": repl});
        let read = run_lua_in(&second, &mcp, read).await;
        assert_eq!(result_text(&read), "3\n", "{read}");
        assert_eq!(result_session(&read), repl);
        let after = run_lua_in(&second, &mcp, json!({"code": "print(t0, r)"})).await;
        assert_eq!(
            result_text(&after),
            result_text(&before),
            "the same REPL without `session` again, its clock and random values the recorded ones"
        );

        let other = open_session(url.clone()).await;
        let taken = run_lua_in(
            &second,
            &other,
            json!({"code": "print(1)", "session": repl}),
        )
        .await;
        assert_eq!(taken["isError"], true);
        assert!(
            result_text(&taken).contains("in use by another session"),
            "{taken}"
        );
        let unknown = json!({"code": "print(1)", "session": "0123456789abcdef0123456789abcdef"});
        let unknown = run_lua_in(&second, &other, unknown).await;
        assert!(result_text(&unknown).contains("no REPL"), "{unknown}");

        let mut headers = MCP_POST.to_vec();
        headers.push(("Mcp-Session-Id", &mcp));
        let deleted = send("DELETE", url, &headers, None).await;
        assert!(deleted.status < 300, "{deleted:?}");
        wait_until(|| !journals(dir.path()).contains(&format!("{repl}.jsonl"))).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_repl_no_client_comes_back_to_expires_with_the_idle_timeout() {
    let dir = tempfile::tempdir().unwrap();
    bounded(async {
        let serve = || {
            let mut command = support::cli::rlm_process();
            command.args(["serve", "--http", "127.0.0.1:0", "--idle-timeout", "1"]);
            command.arg("--state-dir").arg(dir.path());
            ServedProcess::spawn(command)
        };
        let mut first = serve().await;
        let mcp = open_session(format!("http://{}/mcp", first.address)).await;
        let repl = result_session(&run_lua_in(&first, &mcp, json!({"code": "x = 1"})).await);
        first.child.kill().await.unwrap();
        first.child.wait().await.unwrap();
        assert_eq!(journals(dir.path()), [format!("{repl}.jsonl")]);

        let _second = serve().await;
        wait_until(|| journals(dir.path()).is_empty()).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_state_dir_run_lua_names_no_repl_and_refuses_one() {
    bounded(async {
        let server = TestServer::start(options()).await;
        let client = server.mcp().await;
        let result = run_lua(&client, "x = 1").await;
        assert!(!is_error(&result) && result.meta.is_none(), "{result:?}");
        let id = "0123456789abcdef0123456789abcdef";
        let result = call(
            &client,
            "run_lua",
            json!({"code": "print(x)", "session": id}),
        )
        .await;
        assert!(is_error(&result));
        assert!(
            text(&result).contains("keeps no REPL across a restart"),
            "{}",
            text(&result)
        );
        let result = call(
            &client,
            "run_lua",
            json!({"code": "print(x)", "session": 7}),
        )
        .await;
        assert!(
            text(&result).contains("$.session: expected a string"),
            "{}",
            text(&result)
        );
        client.cancel().await.unwrap();
    })
    .await;
}
