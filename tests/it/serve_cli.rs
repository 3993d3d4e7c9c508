//! `rlm serve` as a process: usage errors and shutdown on a signal.

use crate::support;

use std::time::Duration;

use serde_json::{Value, json};
use support::serve::*;

#[test]
fn serve_rejects_zero_caps_and_bad_addresses_as_usage_errors() {
    for args in [
        &["serve", "--max-sessions", "0"][..],
        &["serve", "--max-concurrent", "0"],
        &["serve", "--time-limit", "0"],
        &["serve", "--http", "not-an-address"],
    ] {
        let output = support::cli::rlm(args);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(output.stdout.is_empty(), "{args:?}: nothing on stdout");
        assert!(!output.stderr.is_empty(), "{args:?}: a message on stderr");
    }
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_the_running_call_then_exits_zero() {
    use tokio::io::{AsyncBufReadExt, BufReader};
    bounded(async {
        let mut child = support::cli::rlm_process()
            .args(["serve", "--http", "127.0.0.1:0", "--time-limit", "5"])
            .stderr(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let address = loop {
            let line = lines.next_line().await.unwrap().expect("the server says where it listens");
            if let Some(rest) = line.split("http://").nth(1) {
                break rest.split("/mcp").next().unwrap().to_string();
            }
        };
        let base = format!("http://{address}");
        let (_, created) = request("POST", format!("{base}/v1/sessions"), None, None).await;
        let exec = format!("{base}/v1/sessions/{}/exec", created["id"].as_str().unwrap());
        // Busy for a while: the signal arrives while it runs.
        let slow = tokio::spawn(request(
            "POST",
            exec,
            Some(r#"{"code": "local t = os.clock() while os.clock() - t < 0.5 do end print('finished')"}"#),
            None,
        ));
        tokio::time::sleep(Duration::from_millis(150)).await;
        let pid = child.id().unwrap().to_string();
        let killed = std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(killed.success());
        assert_eq!(slow.await.unwrap(), (200, json!({"output": "finished\n"})));
        let status = child.wait().await.unwrap();
        assert_eq!(status.code(), Some(0));
    })
    .await;
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_ends_a_stdio_server_with_exit_zero() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    bounded(async {
        let mut child = support::cli::rlm_process()
            .arg("serve")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        // A ping answered means the server is up (and its signal handlers installed).
        let mut stdin = child.stdin.take().unwrap();
        let initialize = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
        stdin.write_all(format!("{initialize}\n").as_bytes()).await.unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let answer: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
        assert_eq!(answer["result"]["serverInfo"]["name"], "rlm");
        let pid = child.id().unwrap().to_string();
        assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
        assert_eq!(child.wait().await.unwrap().code(), Some(0));
        drop(stdin);
    })
    .await;
}

#[test]
fn serve_rejects_a_malformed_allowed_origin_from_the_flag_or_rlm_toml() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("rlm.toml");
    std::fs::write(&config, "[serve]\nallow_origins = [\"localhost:5173\"]\n").unwrap();
    let config = config.to_str().unwrap();
    for args in [
        &["serve", "--allow-origin", "localhost:5173"][..],
        &["serve", "--allow-origin", "http://x.com/path"],
        &["serve", "--config", config],
    ] {
        let output = support::cli::rlm(args);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("is not an origin"), "{args:?}: {stderr}");
    }
}

#[test]
fn an_unknown_key_under_serve_in_rlm_toml_is_an_error_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("rlm.toml");
    std::fs::write(
        &config,
        "[serve]\nallow_origin = [\"http://localhost:5173\"]\n",
    )
    .unwrap();
    let output = support::cli::rlm(&["serve", "--config", config.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("allow_origin") && stderr.contains(":2:"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_origin_allowed_in_rlm_toml_is_let_in() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("rlm.toml");
    std::fs::write(
        &config,
        "[serve]\nallow_origins = [\"http://localhost:*\"]\n",
    )
    .unwrap();
    bounded(async {
        let mut command = support::cli::rlm_process();
        command.args([
            "serve",
            "--http",
            "127.0.0.1:0",
            "--config",
            config.to_str().unwrap(),
        ]);
        let mut served = ServedProcess::spawn(command).await;
        let address = served.address.clone();
        let url = format!("http://{address}/healthz");
        let allowed = send(
            "GET",
            url.clone(),
            &[("Origin", "http://localhost:3000")],
            None,
        )
        .await;
        assert_eq!(allowed.status, 200);
        let foreign = send("GET", url, &[("Origin", "http://evil.example.com")], None).await;
        assert_eq!(foreign.status, 403);
        served.child.kill().await.unwrap();
    })
    .await;
}
