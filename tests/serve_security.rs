//! `rlm serve` facing the network and the browser next door: the token, the loopback
//! Host check, the body limit, the Origin allow-list and JSON-only bodies.

mod support;

use rlm_registry::serve::{ServeOptions, Server};
use serde_json::json;
use support::serve::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_api_refuses_oversized_bodies_and_foreign_hosts() {
    bounded(async {
        let server = TestServer::start(ServeOptions {
            body_limit_bytes: 1024,
            ..options()
        })
        .await;
        let big = format!(r#"{{"text": "{}"}}"#, "a ".repeat(2048));
        let (status, too_big) = request(
            "POST",
            server.url("/v1/functions/word_count"),
            Some(&big),
            None,
        )
        .await;
        assert_eq!(status, 413);
        assert!(too_big["error"].is_string(), "{too_big}");
        let (status, ok) = request(
            "POST",
            server.url("/v1/functions/word_count"),
            Some(r#"{"text": "a"}"#),
            None,
        )
        .await;
        assert_eq!((status, ok), (200, json!({"result": 1})));

        // A page on another origin reaching a loopback server through DNS rebinding.
        let url = server.url("/healthz");
        let status = tokio::task::spawn_blocking(move || {
            let agent: ureq::Agent = ureq::Agent::config_builder()
                .http_status_as_error(false)
                .build()
                .into();
            agent
                .get(&url)
                .header("Host", "attacker.example")
                .call()
                .unwrap()
                .status()
                .as_u16()
        })
        .await
        .unwrap();
        assert_eq!(status, 403);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_loopback_bind_requires_the_token_on_every_route() {
    bounded(async {
        let token = "test-token-0123456789";
        let server = TestServer::start_on(
            "0.0.0.0:0",
            ServeOptions {
                token: Some(token.to_string()),
                ..options()
            },
        )
        .await;
        for (method, path, body) in [
            ("GET", "/healthz", None),
            ("GET", "/v1/functions", None),
            ("GET", "/v1/functions/word_count", None),
            ("POST", "/v1/functions/word_count", Some(r#"{"text": "a"}"#)),
            ("GET", "/v1/search?q=count", None),
            ("POST", "/v1/sessions", None),
            (
                "POST",
                "/v1/sessions/x/exec",
                Some(r#"{"code": "print(1)"}"#),
            ),
            ("DELETE", "/v1/sessions/x", None),
            ("GET", "/v1/providers", None),
            ("PUT", "/v1/providers/core/anything", Some("{}")),
            (
                "POST",
                "/mcp",
                Some(r#"{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}"#),
            ),
        ] {
            let (status, refused) = request(method, server.url(path), body, None).await;
            assert_eq!(status, 401, "{method} {path} without a token");
            assert!(refused["error"].as_str().unwrap().contains("bearer token"));
            let (status, _) = request(method, server.url(path), body, Some("wrong-token")).await;
            assert_eq!(status, 401, "{method} {path} with a wrong token");
        }
        let (status, answered) = request(
            "POST",
            server.url("/v1/functions/word_count"),
            Some(r#"{"text": "a b"}"#),
            Some(token),
        )
        .await;
        assert_eq!((status, answered), (200, json!({"result": 2})));

        assert!(
            server.mcp_with_token(None).await.is_err(),
            "MCP without the token is refused"
        );
        let client = server.mcp_with_token(Some(token)).await.unwrap();
        let result = call(&client, "word_count", json!({"text": "a b c"})).await;
        assert_eq!(result.structured_content, Some(json!({"result": 3})));
        client.cancel().await.unwrap();

        let listener = tokio::net::TcpListener::bind("0.0.0.0:0").await.unwrap();
        let refused = Server::new(registry(), options())
            .serve_http(listener, std::future::ready(()))
            .await
            .unwrap_err();
        assert_eq!(refused.kind(), std::io::ErrorKind::PermissionDenied);
        assert!(refused.to_string().contains("RLM_SERVE_TOKEN"), "{refused}");
    })
    .await;
}

#[test]
fn serve_refuses_a_public_address_without_a_token() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_rlm"))
        .args(["serve", "--http", "0.0.0.0:0"])
        .env_remove("RLM_SERVE_TOKEN")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("needs --token or RLM_SERVE_TOKEN"),
        "{stderr}"
    );
    assert!(output.stdout.is_empty());
}
