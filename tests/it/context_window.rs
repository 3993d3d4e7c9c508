//! The model's context window: with one given, an agent's first request (the root's or a
//! child's) that would not fit is not sent, and the error names the system prompt's
//! tokens, the window and the fix; without one, a server's refusal of a request too long
//! for its window, in the wording of OpenAI, vLLM, llama.cpp or SGLang, is reported the
//! same way rather than as a bare HTTP status.

use crate::support;

use std::sync::Arc;

use rlm_registry::Registry;
use rlm_registry::environment::Environment;
use rlm_registry::llm::{LlmError, Request};
use rlm_registry::rlm::{PromptMode, RlmError};
use rlm_registry::tokens;
use support::openai_server::{Behavior, OpenAiServer};
use support::rlm_loop::*;

/// A server's refusal: who, the status and body it answers, the tokens and window it says.
type Refusal = (&'static str, u16, &'static str, Option<u64>, Option<u64>);

/// The servers' refusals, as their own answers word them.
const REFUSALS: &[Refusal] = &[
    (
        "OpenAI",
        400,
        r#"{"error": {"message": "This model's maximum context length is 8192 tokens. However, your messages resulted in 9656 tokens. Please reduce the length of the messages.", "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}"#,
        Some(9656),
        Some(8192),
    ),
    (
        "vLLM",
        400,
        r#"{"object":"error","message":"This model's maximum context length is 8192 tokens. However, you requested 9656 tokens (8632 in the messages, 1024 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}"#,
        Some(8632),
        Some(8192),
    ),
    (
        "llama.cpp",
        400,
        r#"{"error":{"code":400,"message":"the request exceeds the available context size. try increasing the context size or enable context shift","type":"exceed_context_size_error","n_prompt_tokens":9656,"n_ctx":8192}}"#,
        Some(9656),
        Some(8192),
    ),
    (
        "llama.cpp (a 500, newer wording)",
        500,
        r#"{"error":{"code":500,"message":"request (9656 tokens) exceeds the available context size (8192 tokens), try increasing it","type":"exceed_context_size_error"}}"#,
        Some(9656),
        Some(8192),
    ),
    (
        "SGLang",
        400,
        r#"{"object":"error","message":"The input (9656 tokens) is longer than the model's context length (8192 tokens).","type":"BadRequestError","param":null,"code":400}"#,
        Some(9656),
        Some(8192),
    ),
];

#[test]
fn a_first_request_too_long_for_the_window_is_not_sent() {
    let server = OpenAiServer::always(lua("FINAL('never')"));
    let full = rlm(&server, 10).prompt_mode(PromptMode::Full);
    let system = tokens::count(&full.system_prompt(None));
    let error = full.context_window(4_096).run("Q", None).unwrap_err();
    assert_eq!(server.request_count(), 0, "nothing was sent");
    let RlmError::ContextWindow(exceeded) = &error else {
        panic!("{error:?}");
    };
    assert_eq!(exceeded.agent, "0");
    assert_eq!(exceeded.window, Some(4_096));
    assert!(exceeded.server.is_none());
    assert_eq!(exceeded.system_prompt_tokens as usize, system);
    assert!(exceeded.request_tokens > exceeded.system_prompt_tokens);
    let message = error.to_string();
    for expected in [
        "the first request of the root agent does not fit the model's context window (the window is 4,096 tokens), so it was not sent",
        &format!("Its system prompt alone is {} tokens", thousands(system)),
        "Fix: --prompt-mode compact",
    ] {
        assert!(message.contains(expected), "{expected}: {message}");
    }
    // Already compact: the fix is a smaller registry.
    let server = OpenAiServer::always(lua("FINAL('never')"));
    let message = rlm(&server, 10)
        .context_window(1_000)
        .run("Q", None)
        .unwrap_err()
        .to_string();
    assert_eq!(server.request_count(), 0);
    assert!(
        message.contains("Fix: a smaller registry (--no-baked"),
        "{message}"
    );
    assert!(!message.contains("--prompt-mode compact"), "{message}");

    // A window the request fits: it is sent, and the run answers.
    let server = OpenAiServer::always(lua("FINAL('fits')"));
    let answer = rlm(&server, 10)
        .context_window(8_192)
        .run("Q", None)
        .unwrap();
    assert_eq!((answer.text.as_str(), server.request_count()), ("fits", 1));
}

/// The trace has the refused turn, with its error, and no reply.
#[test]
fn the_refused_first_request_is_a_traced_turn() {
    let server = OpenAiServer::always(lua("FINAL('never')"));
    let trace = Shared::default();
    rlm(&server, 10)
        .context_window(1_000)
        .trace(trace.clone())
        .run("Q", None)
        .unwrap_err();
    let events = trace.events();
    assert_eq!(events[0]["event"], "start");
    assert_eq!(events[0]["limits"]["context_window"], 1_000);
    let turns = turns(&events);
    assert_eq!(turns.len(), 1);
    assert!(turns[0]["reply"].is_null());
    let error = turns[0]["error"].as_str().unwrap();
    assert!(error.contains("so it was not sent"), "{error}");
}

#[test]
fn a_childs_first_request_is_checked_too() {
    // The root fits; the sub-task it hands down is too long for the window.
    let long_task = "word ".repeat(6_000);
    let server = OpenAiServer::start(
        vec![
            lua("local ok, err = pcall(rlm_query, string.rep('word ', 6000))\nprint(ok, err)"),
            lua("FINAL('recovered')"),
        ],
        Behavior::status(500),
    );
    assert!(tokens::count(&long_task) > 5_000);
    let answer = rlm(&server, 10)
        .context_window(8_192)
        .run("Q", None)
        .unwrap();
    assert_eq!(answer.text, "recovered");
    // Two requests, both the root's: the child's was never sent.
    let bodies = bodies(&server);
    assert_eq!(bodies.len(), 2);
    let feedback = last_message(&bodies[1]);
    assert!(
        feedback.contains("rlm_query failed: child agent 0.1 failed: the first request of child agent 0.1 does not fit the model's context window (the window is 8,192 tokens), so it was not sent"),
        "{feedback}"
    );
}

#[test]
fn each_servers_context_length_refusal_is_recognised_and_not_retried() {
    for &(server_name, status, body, tokens, window) in REFUSALS {
        let server = OpenAiServer::always(Behavior::status_with_body(status, body));
        let error = client(&server).complete(Request::from("Q")).unwrap_err();
        assert_eq!(server.request_count(), 1, "{server_name}: not retried");
        let LlmError::ContextLength {
            prompt_tokens,
            window: said_window,
            attempts,
            ..
        } = &error
        else {
            panic!("{server_name}: {error:?}");
        };
        assert_eq!(
            (*prompt_tokens, *said_window, *attempts),
            (tokens, window, 1),
            "{server_name}"
        );
        assert!(
            error.to_string().starts_with(
                "LLM request refused by the server: it does not fit the model's context window"
            ),
            "{server_name}: {error}"
        );

        // The loop reports the first request's refusal with the prompt's size and the fix.
        let server = OpenAiServer::always(Behavior::status_with_body(status, body));
        let error = rlm(&server, 10).run("Q", None).unwrap_err();
        assert_eq!(server.request_count(), 1, "{server_name}");
        let RlmError::ContextWindow(exceeded) = &error else {
            panic!("{server_name}: {error:?}");
        };
        assert_eq!(exceeded.window, window, "{server_name}");
        assert!(exceeded.server.as_ref().unwrap().is_context_length());
        let message = error.to_string();
        assert!(
            message.contains("the first request of the root agent does not fit the model's context window (the window is 8,192 tokens): the server refused it"),
            "{server_name}: {message}"
        );
        assert!(message.contains("Its system prompt alone is"), "{message}");
        assert!(!message.contains("HTTP"), "not a bare status: {message}");
    }
}

/// A configured window the server contradicts: the server's is the one reported.
#[test]
fn the_servers_window_wins_over_a_configured_one_it_contradicts() {
    let (_, status, body, _, _) = REFUSALS[0];
    let server = OpenAiServer::always(Behavior::status_with_body(status, body));
    let error = rlm(&server, 10)
        .context_window(128_000)
        .run("Q", None)
        .unwrap_err();
    assert_eq!(server.request_count(), 1, "the check let it through");
    let message = error.to_string();
    assert!(
        message.contains(
            "(the window is 8,192 tokens): the server refused it (it counted 9,656 tokens)"
        ),
        "{message}"
    );
}

/// Other 400s stay what they were.
#[test]
fn other_bad_requests_are_still_statuses() {
    let server = OpenAiServer::always(Behavior::status_with_body(
        400,
        r#"{"error": {"message": "Invalid value for 'temperature'", "type": "invalid_request_error"}}"#,
    ));
    let error = rlm(&server, 10).run("Q", None).unwrap_err();
    assert!(
        matches!(error, RlmError::Llm(LlmError::Status { status: 400, .. })),
        "{error:?}"
    );
}

#[test]
fn llm_query_does_not_send_a_prompt_too_long_for_the_window() {
    let server = OpenAiServer::always(Behavior::reply("sub-answer"));
    let env = Environment::builder(Registry::baked().clone())
        .llm(Arc::new(client(&server)))
        .context_window(2_000)
        .build()
        .unwrap();
    assert_eq!(
        env.execute("print(llm_query('short'))").unwrap().output,
        "sub-answer\n"
    );
    let error = env
        .execute("llm_query(string.rep('word ', 3000))")
        .unwrap_err();
    let long = "word ".repeat(3000);
    let expected = format!(
        "llm_query: not sent: the prompt is {} tokens (o200k_base) and, with 1,024 kept for the answer, does not fit the model's context window of 2,000 tokens",
        thousands(tokens::count_chat([long.as_str()]))
    );
    assert!(error.message().contains(&expected), "{}", error.message());
    // In a batch, the long prompt's place says why; the others are answered.
    let out = env
        .execute("local a = llm_query_batched({'short', string.rep('word ', 3000)}) print(a[1]) print(a[2]:sub(1, 30))")
        .unwrap()
        .output;
    assert_eq!(out, "sub-answer\nerror: llm_query_batched: not \n");
    assert_eq!(server.request_count(), 2, "only the prompts that fit");
}

#[cfg(feature = "cli")]
mod cli {
    use super::*;
    use crate::support::cli::rlm_ask_in;

    #[test]
    fn ask_checks_the_window_from_the_flag_or_rlm_toml() {
        let dir = tempfile::tempdir().unwrap();
        let server = OpenAiServer::always(lua("FINAL('never')"));
        let out = rlm_ask_in(
            dir.path(),
            &server.base_url(),
            &["Q", "--context-window", "1k"],
        );
        assert_eq!(out.status.code(), Some(1));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("(the window is 1,000 tokens), so it was not sent"),
            "{stderr}"
        );
        assert_eq!(server.request_count(), 0);

        std::fs::write(
            dir.path().join("rlm.toml"),
            "[model]\ncontext_window = 1000\n",
        )
        .unwrap();
        let out = rlm_ask_in(dir.path(), &server.base_url(), &["Q", "-q"]);
        assert_eq!(out.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&out.stderr).contains("so it was not sent"));
        // The flag wins over the file.
        let server = OpenAiServer::always(lua("FINAL('fits')"));
        let out = rlm_ask_in(
            dir.path(),
            &server.base_url(),
            &["Q", "-q", "--context-window", "32k"],
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout), "fits\n");

        let out = rlm_ask_in(
            dir.path(),
            &server.base_url(),
            &["Q", "--context-window", "0"],
        );
        assert_eq!(out.status.code(), Some(2), "a usage error");
    }
}

/// `12,345`.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}
