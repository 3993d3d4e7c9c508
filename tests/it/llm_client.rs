//! The LLM client against a real (loopback) OpenAI-compatible server with scripted
//! behaviours: success, retries, timeouts, malformed responses, batches, usage.

use crate::support;

use std::collections::HashMap;
use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use rlm_registry::llm::{
    Completion, Llm, LlmClient, LlmConfig, LlmError, Message, Request, Usage, UsageSnapshot,
};
use serde_json::json;
use support::hang::finishes;
use support::openai_server::{Behavior, OpenAiServer};

/// A client for `server` with tiny backoffs, so that retries cost milliseconds.
fn config_for(server: &OpenAiServer) -> LlmConfig {
    LlmConfig::new(server.base_url(), "test-model-x")
        .with_timeout(Duration::from_secs(5))
        .with_max_retries(3)
        .with_backoff(Duration::from_millis(1), Duration::from_millis(10))
}

fn client_for(server: &OpenAiServer) -> LlmClient {
    LlmClient::new(config_for(server)).expect("valid config")
}

#[test]
fn success_returns_content_accumulates_usage_and_sends_model_and_messages() {
    let server = OpenAiServer::always(Behavior::reply_with_usage("hello there", 12, 7));
    let client = LlmClient::new(config_for(&server).with_api_key("sk-test-123")).unwrap();

    let messages = vec![Message::system("Be terse."), Message::user("Say hello.")];
    let completion = client.complete(messages).expect("success");
    assert_eq!(completion.content, "hello there");
    assert_eq!(
        (completion.prompt_tokens, completion.completion_tokens),
        (12, 7)
    );
    assert_eq!(completion.attempts, 1);
    assert_eq!(completion.model.as_deref(), Some("test-model"));
    assert_eq!(completion.finish_reason.as_deref(), Some("stop"));

    let second = client
        .complete(
            Request::from("Again.")
                .with_temperature(0.5)
                .with_max_tokens(32),
        )
        .unwrap();
    assert_eq!(second.content, "hello there");

    assert_eq!(
        client.usage().snapshot(),
        UsageSnapshot {
            calls: 2,
            failed_calls: 0,
            attempts: 2,
            prompt_tokens: 24,
            completion_tokens: 14,
            ..UsageSnapshot::default()
        }
    );

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let first = &requests[0];
    assert_eq!(first.method, "POST");
    assert_eq!(first.path, "/v1/chat/completions");
    assert_eq!(first.header("authorization"), Some("Bearer sk-test-123"));
    assert_eq!(first.header("content-type"), Some("application/json"));
    assert_eq!(
        first.json().expect("JSON body"),
        json!({
            "model": "test-model-x",
            "messages": [
                {"role": "system", "content": "Be terse."},
                {"role": "user", "content": "Say hello."},
            ],
        })
    );
    assert_eq!(
        requests[1].json().unwrap(),
        json!({
            "model": "test-model-x",
            "messages": [{"role": "user", "content": "Again."}],
            "temperature": 0.5,
            "max_tokens": 32,
        })
    );
}

#[test]
fn no_authorization_header_without_a_key() {
    let server = OpenAiServer::always(Behavior::reply("hi"));
    let client = client_for(&server);
    client.complete("Hi").unwrap();
    let request = &server.requests()[0];
    assert_eq!(request.header("authorization"), None);
}

#[test]
fn a_request_can_override_the_model() {
    let server = OpenAiServer::always(Behavior::reply("hi"));
    client_for(&server)
        .complete(Request::from("Hi").with_model("other-model"))
        .unwrap();
    assert_eq!(server.requests()[0].json().unwrap()["model"], "other-model");
}

#[test]
fn rate_limit_is_retried_and_retry_after_is_honoured_but_capped() {
    // Retry-After: an hour, capped at 150 ms: the wait is far longer than the 1 ms
    // backoff (honoured), and the call finishes at all (capped).
    let server = OpenAiServer::start(
        vec![
            Behavior::status_with_retry_after(429, "3600"),
            Behavior::reply("ok"),
        ],
        Behavior::status(500),
    );
    let config =
        config_for(&server).with_backoff(Duration::from_millis(1), Duration::from_millis(150));
    let client = LlmClient::new(config).unwrap();

    let completion = finishes("a call told to retry after an hour", {
        let client = client.clone();
        move || client.complete("Hi").expect("retried after 429")
    });
    assert_eq!(completion.content, "ok");
    assert_eq!(completion.attempts, 2);
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let gap = requests[1].received_at - requests[0].received_at;
    assert!(gap >= Duration::from_millis(150), "waited only {gap:?}");
    let usage = client.usage().snapshot();
    assert_eq!((usage.calls, usage.failed_calls, usage.attempts), (1, 0, 2));
}

#[test]
fn rate_limit_without_retry_after_uses_the_backoff() {
    let server = OpenAiServer::start(
        vec![
            Behavior::status(429),
            Behavior::status(503),
            Behavior::reply("ok"),
        ],
        Behavior::status(500),
    );
    // 100 ms, then 200 ms, each less up to a fifth of jitter.
    let config =
        config_for(&server).with_backoff(Duration::from_millis(100), Duration::from_secs(1));
    let client = LlmClient::new(config).unwrap();
    let completion = finishes("three attempts with backoff", move || {
        client.complete("Hi").expect("retried")
    });
    assert_eq!(completion.attempts, 3);
    let at: Vec<_> = server.requests().iter().map(|r| r.received_at).collect();
    let gaps = [at[1] - at[0], at[2] - at[1]];
    assert!(
        gaps[0] >= Duration::from_millis(80) && gaps[1] >= Duration::from_millis(160),
        "waited only {gaps:?}"
    );
}

#[test]
fn server_errors_are_retried_until_the_attempts_run_out() {
    let server = OpenAiServer::always(Behavior::status(500));
    let client = client_for(&server); // 3 retries

    let error = client.complete("Hi").unwrap_err();
    assert_eq!(server.request_count(), 4);
    assert_eq!(error.attempts(), 4);
    assert_eq!(error.status(), Some(500));
    assert!(
        matches!(error, LlmError::Status { retried: true, .. }),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(message.contains("HTTP 500"), "{message}");
    assert!(message.contains("4 attempts"), "{message}");
    assert!(message.contains("scripted status 500"), "{message}");

    let usage = client.usage().snapshot();
    assert_eq!((usage.calls, usage.failed_calls, usage.attempts), (1, 1, 4));
    assert_eq!(usage.total_tokens(), 0);
}

#[test]
fn zero_retries_means_one_attempt() {
    let server = OpenAiServer::always(Behavior::status(503));
    let client = LlmClient::new(config_for(&server).with_max_retries(0)).unwrap();
    let error = client.complete("Hi").unwrap_err();
    assert_eq!(server.request_count(), 1);
    assert_eq!(error.attempts(), 1);
    assert!(
        error.to_string().contains("gave up after 1 attempt"),
        "{error}"
    );
}

#[test]
fn client_errors_are_not_retried() {
    let server = OpenAiServer::start(vec![Behavior::status(400)], Behavior::reply("unreachable"));
    let client = client_for(&server);

    let error = client.complete("Hi").unwrap_err();
    assert_eq!(server.request_count(), 1);
    assert_eq!(error.attempts(), 1);
    assert!(
        matches!(
            error,
            LlmError::Status {
                status: 400,
                retried: false,
                ..
            }
        ),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(message.contains("HTTP 400"), "{message}");
    assert!(message.contains("not retried"), "{message}");
    assert!(message.contains("scripted status 400"), "{message}");
}

#[test]
fn unauthorized_says_to_check_the_key() {
    let server = OpenAiServer::always(Behavior::status(401));
    let error = client_for(&server).complete("Hi").unwrap_err();
    assert_eq!(server.request_count(), 1);
    assert!(error.to_string().contains("RLM_API_KEY"), "{error}");
}

#[test]
fn a_slow_server_times_out_with_a_clear_error() {
    let server = OpenAiServer::always(Behavior::reply("too late").after(Duration::from_secs(3)));
    let client = LlmClient::new(
        config_for(&server)
            .with_timeout(Duration::from_millis(200))
            .with_max_retries(1),
    )
    .unwrap();

    // Without the timeout, each attempt would get the server's answer after 3 s.
    let error = client.complete("Hi").unwrap_err();
    assert!(error.is_timeout(), "{error:?}");
    assert_eq!(error.attempts(), 2);
    let message = error.to_string();
    assert!(message.contains("timed out"), "{message}");
    assert!(message.contains("200ms"), "{message}");
    assert!(message.contains("2 attempts"), "{message}");
}

#[test]
fn a_delay_within_the_timeout_is_fine() {
    let server =
        OpenAiServer::always(Behavior::reply("slow but ok").after(Duration::from_millis(50)));
    let completion = client_for(&server).complete("Hi").unwrap();
    assert_eq!(completion.content, "slow but ok");
    assert!(completion.elapsed >= Duration::from_millis(50));
}

#[test]
fn garbage_is_a_malformed_response_with_a_snippet() {
    let server = OpenAiServer::always(Behavior::Garbage(
        "<html>502 upstream exploded</html>".into(),
    ));
    let client = client_for(&server);

    let error = client.complete("Hi").unwrap_err();
    assert_eq!(
        server.request_count(),
        1,
        "malformed responses are not retried"
    );
    let LlmError::MalformedResponse {
        reason, snippet, ..
    } = &error
    else {
        panic!("expected a malformed response, got {error:?}");
    };
    assert!(reason.contains("not JSON"), "{reason}");
    assert!(snippet.contains("upstream exploded"), "{snippet}");
    let message = error.to_string();
    assert!(message.contains("malformed response"), "{message}");
    assert!(
        message.contains("<html>502 upstream exploded</html>"),
        "{message}"
    );
    assert_eq!(client.usage().snapshot().failed_calls, 1);
}

#[test]
fn json_without_choices_is_a_malformed_response() {
    let server = OpenAiServer::always(Behavior::NoChoices);
    let error = client_for(&server).complete("Hi").unwrap_err();
    let message = error.to_string();
    assert!(
        matches!(error, LlmError::MalformedResponse { .. }),
        "{error:?}"
    );
    assert!(message.contains("no `choices`"), "{message}");
    assert!(
        message.contains("chat.completion"),
        "snippet missing: {message}"
    );
}

#[test]
fn a_long_garbage_body_is_cut_in_the_message() {
    let server = OpenAiServer::always(Behavior::Garbage("x".repeat(100_000)));
    let error = client_for(&server).complete("Hi").unwrap_err();
    let message = error.to_string();
    assert!(message.len() < 600, "{} bytes", message.len());
    assert!(message.ends_with('…'), "{message}");
}

#[test]
fn a_dropped_connection_is_retried_then_reported() {
    let server = OpenAiServer::always(Behavior::Drop);
    let client = LlmClient::new(config_for(&server).with_max_retries(2)).unwrap();

    let error = client.complete("Hi").unwrap_err();
    assert_eq!(server.request_count(), 3);
    assert_eq!(error.attempts(), 3);
    assert!(
        matches!(error, LlmError::Transport { retried: true, .. }),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(message.contains(&server.base_url()), "{message}");
    assert!(message.contains("3 attempts"), "{message}");
}

#[test]
fn a_dropped_connection_then_success_recovers() {
    let server = OpenAiServer::start(vec![Behavior::Drop], Behavior::reply("back"));
    let completion = client_for(&server).complete("Hi").unwrap();
    assert_eq!(completion.content, "back");
    assert_eq!(completion.attempts, 2);
}

#[test]
fn a_refused_connection_is_retried_then_reported() {
    let port = {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let config = LlmConfig::new(format!("http://127.0.0.1:{port}/v1"), "m")
        .with_timeout(Duration::from_secs(2))
        .with_max_retries(2)
        .with_backoff(Duration::from_millis(1), Duration::from_millis(5));
    let error = LlmClient::new(config).unwrap().complete("Hi").unwrap_err();
    assert!(matches!(error, LlmError::Transport { .. }), "{error:?}");
    assert_eq!(error.attempts(), 3);
    assert!(error.to_string().contains(&port.to_string()), "{error}");
}

#[test]
fn a_batch_runs_concurrently_in_order_and_sums_usage() {
    // Each answer takes a while, so requests sent at once are seen together.
    let server = OpenAiServer::always(Behavior::echo(Duration::from_millis(200)));
    let client = client_for(&server);
    let prompts: Vec<String> = (0..32).map(|i| format!("prompt {i}")).collect();

    let results = client.complete_batch(prompts);

    assert_eq!(results.len(), 32);
    for (i, result) in results.iter().enumerate() {
        let completion = result.as_ref().expect("echo succeeds");
        assert_eq!(completion.content, format!("echo: prompt {i}"));
    }
    assert!(
        server.max_in_flight() > 1,
        "the requests overlapped at the server"
    );
    assert_eq!(server.request_count(), 32);
    let usage = client.usage().snapshot();
    assert_eq!((usage.calls, usage.failed_calls), (32, 0));
    assert_eq!((usage.prompt_tokens, usage.completion_tokens), (320, 64));
}

#[test]
fn a_batch_respects_the_concurrency_bound() {
    let server = OpenAiServer::always(Behavior::echo(Duration::from_millis(20)));
    let client = LlmClient::new(config_for(&server).with_max_concurrency(4)).unwrap();
    let prompts: Vec<String> = (0..12).map(|i| format!("p{i}")).collect();
    let results = client.complete_batch(prompts);
    assert!(results.iter().all(Result::is_ok));
    let peak = server.max_in_flight();
    assert!((1..=4).contains(&peak), "{peak} requests in flight at once");
}

#[test]
fn an_empty_batch_sends_nothing() {
    let server = OpenAiServer::always(Behavior::reply("x"));
    let results = client_for(&server).complete_batch(Vec::<String>::new());
    assert!(results.is_empty());
    assert_eq!(server.request_count(), 0);
}

#[test]
fn clients_sharing_a_usage_sum_into_one_total() {
    let server = OpenAiServer::always(Behavior::reply_with_usage("x", 3, 1));
    let session = Arc::new(Usage::new());
    let root = client_for(&server).with_usage(Arc::clone(&session));
    let sub = LlmClient::new(config_for(&server).with_max_retries(0))
        .unwrap()
        .with_usage(Arc::clone(&session));

    root.complete("a").unwrap();
    sub.complete_batch(vec!["b", "c", "d"]);
    root.clone().complete("e").unwrap();

    let totals = session.snapshot();
    assert_eq!(totals.calls, 5);
    assert_eq!((totals.prompt_tokens, totals.completion_tokens), (15, 5));
}

#[test]
fn the_client_works_behind_the_llm_trait() {
    let server = OpenAiServer::always(Behavior::echo(Duration::ZERO));
    let llm: Arc<dyn Llm> = Arc::new(client_for(&server));
    assert_eq!(
        llm.complete(Request::from("one")).unwrap().content,
        "echo: one"
    );
    let batch = llm.complete_batch(vec![Request::from("a"), Request::from("b")]);
    let contents: Vec<_> = batch.into_iter().map(|r| r.unwrap().content).collect();
    assert_eq!(contents, ["echo: a", "echo: b"]);
}

/// A fake that fails on odd prompts: the default batch keeps order and isolates errors.
struct OddFails;

impl Llm for OddFails {
    fn complete(&self, request: Request) -> Result<Completion, LlmError> {
        let n: u32 = request.messages[0].text().parse().unwrap();
        std::thread::sleep(Duration::from_millis(u64::from(n % 3)));
        if n % 2 == 1 {
            Err(LlmError::Status {
                status: 500,
                body: String::new(),
                attempts: 1,
                retried: true,
            })
        } else {
            Ok(Completion::new(n.to_string()))
        }
    }
}

#[test]
fn a_fake_batch_keeps_order_and_isolates_errors() {
    let requests = (0..40).map(|n| Request::from(n.to_string())).collect();
    let results = OddFails.complete_batch(requests);
    for (n, result) in results.into_iter().enumerate() {
        match result {
            Ok(completion) => assert_eq!(completion.content, n.to_string()),
            Err(error) => {
                assert_eq!(n % 2, 1);
                assert_eq!(error.status(), Some(500));
            }
        }
    }
}

fn lookup(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |name| map.get(name).cloned()
}

#[test]
fn config_from_env_has_defaults() {
    let config = LlmConfig::from_lookup(lookup(&[])).unwrap();
    assert_eq!(config.base_url, "https://api.openai.com/v1");
    assert_eq!(config.model, "gpt-4o-mini");
    assert_eq!(config.api_key, None);
    assert_eq!(config.timeout, Duration::from_secs(120));
}

#[test]
fn config_from_env_prefers_rlm_variables() {
    let config = LlmConfig::from_lookup(lookup(&[
        ("RLM_BASE_URL", "http://localhost:8000/v1"),
        ("OPENAI_BASE_URL", "http://ignored/v1"),
        ("RLM_MODEL", "qwen"),
        ("RLM_API_KEY", "rlm-key"),
        ("OPENAI_API_KEY", "openai-key"),
        ("RLM_TIMEOUT_SECS", "7.5"),
    ]))
    .unwrap();
    assert_eq!(config.base_url, "http://localhost:8000/v1");
    assert_eq!(config.model, "qwen");
    assert_eq!(config.api_key.as_deref(), Some("rlm-key"));
    assert_eq!(config.timeout, Duration::from_millis(7_500));
}

#[test]
fn config_from_env_falls_back_to_openai_variables_and_ignores_empty_ones() {
    let config = LlmConfig::from_lookup(lookup(&[
        ("RLM_BASE_URL", ""),
        ("OPENAI_BASE_URL", "http://localhost:11434/v1"),
        ("RLM_API_KEY", "  "),
        ("OPENAI_API_KEY", "sk-openai"),
        ("RLM_MODEL", ""),
    ]))
    .unwrap();
    assert_eq!(config.base_url, "http://localhost:11434/v1");
    assert_eq!(config.api_key.as_deref(), Some("sk-openai"));
    assert_eq!(config.model, "gpt-4o-mini");
}

#[test]
fn config_from_env_rejects_a_bad_timeout() {
    for bad in ["soon", "0", "-5"] {
        let error = LlmConfig::from_lookup(lookup(&[("RLM_TIMEOUT_SECS", bad)])).unwrap_err();
        assert!(matches!(error, LlmError::Config(_)), "{error:?}");
        let message = error.to_string();
        assert!(message.contains("RLM_TIMEOUT_SECS"), "{message}");
        assert!(message.contains(bad), "{message}");
    }
}

#[test]
fn bad_configs_are_rejected_before_any_request() {
    let error = LlmClient::new(LlmConfig::new("localhost:8080/v1", "m")).unwrap_err();
    assert!(error.to_string().contains("base URL"), "{error}");
    let error = LlmClient::new(LlmConfig::new("http://localhost/v1", "")).unwrap_err();
    assert!(error.to_string().contains("model"), "{error}");
    let error = LlmClient::new(LlmConfig::new("http://localhost/v1", "m").with_api_key("a\nb"))
        .unwrap_err();
    assert!(error.to_string().contains("API key"), "{error}");
    assert!(!error.to_string().contains("a\nb"));
}
