//! `rlm serve` facing the network and the browser next door: the token, the loopback
//! Host check, the body limit, the Origin allow-list and JSON-only bodies.

use crate::support;

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
    let output = support::cli::rlm(&["serve", "--http", "0.0.0.0:0"]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("needs --token or RLM_SERVE_TOKEN"),
        "{stderr}"
    );
    assert!(output.stdout.is_empty());
}

// ---- the browser next door: Origin and content types -------------------------------

const FOREIGN: &str = "http://evil.example.com";
const ALLOWED: &str = "http://localhost:5173";

/// A server with a writable `files` provider (so a call that ran leaves a file) and a
/// per-session store.
async fn server_with_side_effects(root: &std::path::Path, allowed: &[&str]) -> TestServer {
    use rlm_registry::providers::{FilesConfig, FilesProvider, Providers};
    let mut providers = Providers::builtin();
    let mut files = FilesConfig::new(root);
    files.writable = true;
    providers
        .register(FilesProvider::new(files).unwrap())
        .unwrap();
    let options = ServeOptions {
        session_store: Some(1 << 20),
        allowed_origins: rlm_registry::serve::AllowedOrigins::parse(allowed).unwrap(),
        ..options()
    };
    let server = rlm_registry::serve::Server::with_providers(
        registry(),
        std::sync::Arc::new(providers),
        options,
    );
    TestServer::serving("127.0.0.1:0", server).await
}

fn write_args(path: &str) -> String {
    json!({"path": path, "content": "ran"}).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_origin_is_refused_on_every_route_before_anything_runs() {
    bounded(async {
        let root = tempfile::tempdir().unwrap();
        let server = server_with_side_effects(root.path(), &[ALLOWED]).await;
        let session = open_session(server.url("/mcp")).await;
        let (_, created) = request("POST", server.url("/v1/sessions"), None, None).await;
        let api = created["id"].as_str().unwrap().to_string();
        let before = server.server.live_sessions();
        let write = write_args("foreign.txt");
        let exec = json!({"code": "write_file('foreign.txt', 'ran')"}).to_string();
        let mcp_write = tool_call(
            2,
            "write_file",
            json!({"path": "foreign.txt", "content": "ran"}),
        );
        let routes: Vec<(&str, String, Option<&str>)> = vec![
            ("GET", "/healthz".into(), None),
            ("GET", "/v1/functions".into(), None),
            ("GET", "/v1/functions/word_count".into(), None),
            ("POST", "/v1/functions/write_file".into(), Some(&write)),
            ("GET", "/v1/search?q=count".into(), None),
            ("GET", "/v1/providers".into(), None),
            ("GET", "/v1/providers/files".into(), None),
            ("POST", "/v1/sessions".into(), Some("")),
            ("POST", format!("/v1/sessions/{api}/exec"), Some(&exec)),
            ("DELETE", format!("/v1/sessions/{api}"), None),
            ("POST", "/mcp".into(), Some(INITIALIZE)),
            ("POST", "/mcp".into(), Some(&mcp_write)),
            ("GET", "/mcp".into(), None),
            ("DELETE", "/mcp".into(), None),
        ];
        for (method, path, body) in &routes {
            let mut headers = MCP_POST.to_vec();
            headers.push(("Origin", FOREIGN));
            headers.push(("Mcp-Session-Id", &session));
            let reply = send(method, server.url(path), &headers, *body).await;
            assert_eq!(reply.status, 403, "{method} {path}: {}", reply.body);
            let message = reply.json()["error"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            assert!(
                message.contains("--allow-origin"),
                "{method} {path}: {message}"
            );
            assert_eq!(reply.header("access-control-allow-origin"), None);
        }
        assert!(!root.path().join("foreign.txt").exists(), "nothing ran");
        assert_eq!(
            server.server.live_sessions(),
            before,
            "no session made or ended"
        );
        // Both sessions are still there for their own clients.
        let listed = call_in(
            server.url("/mcp"),
            &session,
            3,
            "word_count",
            json!({"text": "a b"}),
        )
        .await;
        assert_eq!(
            listed.json()["result"]["structuredContent"],
            json!({"result": 2})
        );
        let exec = request(
            "POST",
            server.url(&format!("/v1/sessions/{api}/exec")),
            Some(r#"{"code": "print(1)"}"#),
            None,
        )
        .await;
        assert_eq!(exec, (200, json!({"output": "1\n"})));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allowed_origin_is_let_in_with_cors_headers_and_its_preflight_answered() {
    bounded(async {
        let root = tempfile::tempdir().unwrap();
        let server = server_with_side_effects(root.path(), &[ALLOWED]).await;
        let origin = [("Origin", ALLOWED)];
        let reply = initialize(server.url("/mcp"), &origin).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        assert_eq!(reply.header("access-control-allow-origin"), Some(ALLOWED));
        assert!(
            reply
                .header("access-control-expose-headers")
                .unwrap()
                .contains("Mcp-Session-Id")
        );
        let mut headers = vec![("Content-Type", "application/json"), ("Origin", ALLOWED)];
        let reply = send(
            "POST",
            server.url("/v1/functions/write_file"),
            &headers,
            Some(&write_args("allowed.txt")),
        )
        .await;
        assert_eq!((reply.status, reply.json()), (200, json!({"result": 3})));
        assert!(root.path().join("allowed.txt").exists());

        headers = vec![
            ("Origin", ALLOWED),
            ("Access-Control-Request-Method", "POST"),
            (
                "Access-Control-Request-Headers",
                "content-type, mcp-session-id",
            ),
        ];
        let preflight = send("OPTIONS", server.url("/mcp"), &headers, None).await;
        assert_eq!(preflight.status, 204);
        assert_eq!(
            preflight.header("access-control-allow-origin"),
            Some(ALLOWED)
        );
        assert!(
            preflight
                .header("access-control-allow-methods")
                .unwrap()
                .contains("POST")
        );
        assert!(
            preflight
                .header("access-control-allow-headers")
                .unwrap()
                .contains("Mcp-Session-Id")
        );

        headers[0] = ("Origin", FOREIGN);
        let refused = send("OPTIONS", server.url("/v1/sessions"), &headers, None).await;
        assert_eq!(refused.status, 403);
        assert_eq!(refused.header("access-control-allow-origin"), None);
        // Without an Origin (MCP hosts, scripts) nothing changes, and no CORS either.
        let plain = send("OPTIONS", server.url("/v1/sessions"), &headers[1..], None).await;
        assert_ne!(plain.status, 204);
        let reply = initialize(server.url("/mcp"), &[]).await;
        assert_eq!(reply.status, 200);
        assert_eq!(reply.header("access-control-allow-origin"), None);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_and_form_bodies_are_refused_with_415_on_every_post_route_and_nothing_runs() {
    bounded(async {
        let root = tempfile::tempdir().unwrap();
        let server = server_with_side_effects(root.path(), &[]).await;
        let session = open_session(server.url("/mcp")).await;
        let (_, created) = request("POST", server.url("/v1/sessions"), None, None).await;
        let api = created["id"].as_str().unwrap().to_string();
        let sessions = server.server.live_sessions();
        let write = write_args("simple.txt");
        let exec =
            json!({"code": "store_set('k', 'ran') write_file('simple.txt', 'ran')"}).to_string();
        let mcp_write = tool_call(
            2,
            "write_file",
            json!({"path": "simple.txt", "content": "ran"}),
        );
        let posts: Vec<(String, &str)> = vec![
            ("/v1/functions/write_file".into(), &write),
            ("/v1/sessions".into(), "{}"),
            (format!("/v1/sessions/{api}/exec"), &exec),
            ("/v1/providers/files/anything".into(), "{}"),
            ("/mcp".into(), INITIALIZE),
            ("/mcp".into(), &mcp_write),
        ];
        for content_type in [
            Some("text/plain"),
            Some("application/x-www-form-urlencoded"),
            Some("multipart/form-data; boundary=x"),
            None,
        ] {
            for (path, body) in &posts {
                let mut headers = vec![
                    ("Mcp-Session-Id", session.as_str()),
                    ("Accept", "application/json, text/event-stream"),
                ];
                if let Some(content_type) = content_type {
                    headers.push(("Content-Type", content_type));
                }
                let reply = send("POST", server.url(path), &headers, Some(body)).await;
                assert_eq!(reply.status, 415, "{content_type:?} {path}: {}", reply.body);
                let message = reply.json()["error"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                assert!(message.contains("application/json"), "{message}");
            }
        }
        assert!(!root.path().join("simple.txt").exists(), "no function ran");
        assert_eq!(server.server.live_sessions(), sessions, "no session made");
        let stored = request(
            "POST",
            server.url(&format!("/v1/sessions/{api}/exec")),
            Some(r#"{"code": "print(store_get('k'))"}"#),
            None,
        )
        .await;
        assert_eq!(
            stored,
            (200, json!({"output": "nil\n"})),
            "the exec never ran"
        );
    })
    .await;
}

// ---- the server's own origin --------------------------------------------------------

/// `initialize` then `notifications/initialized` on `/mcp`, and a function that writes
/// `file` on `/v1`, each with `origin` and `host`: the three statuses.
async fn call_from(server: &TestServer, origin: &str, host: &str, file: &str) -> [u16; 3] {
    let headers = [("Origin", origin), ("Host", host)];
    let opened = initialize(server.url("/mcp"), &headers).await;
    let initialized = match opened.header("mcp-session-id") {
        Some(session) => {
            let mut with_session = MCP_POST.to_vec();
            with_session.extend_from_slice(&headers);
            with_session.push(("Mcp-Session-Id", session));
            let note = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
            send("POST", server.url("/mcp"), &with_session, Some(note))
                .await
                .status
        }
        None => 0,
    };
    let mut json = vec![("Content-Type", "application/json")];
    json.extend_from_slice(&headers);
    let wrote = send(
        "POST",
        server.url("/v1/functions/write_file"),
        &json,
        Some(&write_args(file)),
    )
    .await;
    [opened.status, initialized, wrote.status]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_on_the_servers_own_loopback_origin_is_served_on_mcp_and_the_json_api() {
    bounded(async {
        let root = tempfile::tempdir().unwrap();
        let server = server_with_side_effects(root.path(), &[]).await;
        let port = server.address.port();
        for (n, name) in ["127.0.0.1", "localhost"].into_iter().enumerate() {
            let origin = format!("http://{name}:{port}");
            let host = format!("{name}:{port}");
            let file = format!("own{n}.txt");
            let statuses = call_from(&server, &origin, &host, &file).await;
            assert_eq!(statuses, [200, 202, 200], "Origin {origin}, Host {host}");
            assert!(root.path().join(&file).exists(), "{origin}: the call ran");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn near_misses_of_the_own_origin_are_refused_on_mcp_and_the_json_api() {
    bounded(async {
        let root = tempfile::tempdir().unwrap();
        let server = server_with_side_effects(root.path(), &[]).await;
        let port = server.address.port();
        let other = port.wrapping_add(1).max(1);
        let own_host = format!("127.0.0.1:{port}");
        let cases = [
            (format!("http://127.0.0.1:{other}"), own_host.clone()),
            (
                format!("http://localhost:{other}"),
                format!("localhost:{port}"),
            ),
            // A Host naming another port does not make that port the server's own.
            (
                format!("http://127.0.0.1:{other}"),
                format!("127.0.0.1:{other}"),
            ),
            ("http://127.0.0.1".to_string(), own_host.clone()),
            (format!("https://127.0.0.1:{port}"), own_host.clone()),
            (
                format!("http://localhost.evil.com:{port}"),
                own_host.clone(),
            ),
            (format!("http://127.0.0.1.evil:{port}"), own_host.clone()),
            (format!("http://evil.example.com:{port}"), own_host.clone()),
            (
                format!("http://evil.example.com:{port}"),
                format!("evil.example.com:{port}"),
            ),
            // DNS rebinding: a loopback Origin does not vouch for a foreign Host.
            (
                format!("http://127.0.0.1:{port}"),
                format!("evil.example.com:{port}"),
            ),
            ("null".to_string(), own_host.clone()),
        ];
        for (origin, host) in &cases {
            let statuses = call_from(&server, origin, host, "near.txt").await;
            assert_eq!(statuses, [403, 0, 403], "Origin {origin}, Host {host}");
        }
        assert!(!root.path().join("near.txt").exists(), "nothing ran");
        assert_eq!(server.server.live_sessions(), 0, "no session made");
    })
    .await;
}
