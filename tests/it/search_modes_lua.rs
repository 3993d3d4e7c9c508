//! `fn_search` in Lua with the LLM search modes: it follows the model, reports the mode,
//! the expanded terms and any fallback, charges the session's token budget and counts
//! against the LLM call limit; without a model only the fast mode works.

use crate::support;

use std::sync::Arc;

use rlm_registry::environment::{Environment, ExecError, LimitKind, Limits};
use support::openai_server::{Behavior, OpenAiServer};
use support::search_modes::{client, text_registry};

fn env(server: &OpenAiServer, limits: Limits) -> Environment {
    Environment::builder(text_registry())
        .limits(limits)
        .llm(Arc::new(client(server)))
        .token_budget(1_000)
        .build()
        .unwrap()
}

fn run(env: &Environment, code: &str) -> String {
    env.execute(code)
        .unwrap_or_else(|e| panic!("`{code}`: {e}"))
        .output
}

#[test]
fn fn_search_balanced_follows_the_model_and_charges_the_session() {
    let server = OpenAiServer::always(Behavior::reply_with_usage(
        "[\"reverse_text\", \"token_count\"]",
        40,
        10,
    ));
    let env = env(&server, Limits::default());
    let out = run(
        &env,
        r#"local r, info = fn_search("text", {mode = "balanced", max_results = 3})
print(#r, r[1].name, r[2].name, r[1].confidence >= r[2].confidence, r[2].confidence >= r[3].confidence)
print(info.mode, info.fallback, #info.expanded_terms, token_budget())"#,
    );
    assert_eq!(
        out,
        "3\treverse_text\ttoken_count\ttrue\ttrue\nbalanced\tnil\t0\t950\n"
    );
    assert_eq!(server.request_count(), 1);
}

#[test]
fn fn_search_accurate_expands_and_reports_the_terms() {
    let server = OpenAiServer::start(
        vec![
            Behavior::reply("[\"word count\"]"),
            Behavior::reply("[\"word_count\"]"),
        ],
        Behavior::status(500),
    );
    let env = env(&server, Limits::default());
    let out = run(
        &env,
        r#"local r, info = fn_search("measure essay length", {mode = "accurate"})
print(r[1].name, info.mode, info.expanded_terms[1], info.fallback)"#,
    );
    assert_eq!(out, "word_count\taccurate\tword count\tnil\n");
}

#[test]
fn fn_search_falls_back_with_the_reason_when_the_model_fails() {
    let server = OpenAiServer::always(Behavior::status(500));
    let env = env(&server, Limits::default());
    let out = run(
        &env,
        r#"local r, info = fn_search("count", {mode = "balanced"})
local fast = fn_search("count")
print(#r == #fast, r[1].name == fast[1].name, info.fallback:match("^the LLM call failed") ~= nil)"#,
    );
    assert_eq!(out, "true\ttrue\ttrue\n");
}

#[test]
fn fn_search_llm_modes_count_against_the_llm_call_limit() {
    let server = OpenAiServer::always(Behavior::reply("[\"reverse_text\"]"));
    let env = env(
        &server,
        Limits {
            llm_calls: 1,
            ..Limits::default()
        },
    );
    // Balanced: one call, within the limit.
    assert_eq!(
        run(
            &env,
            "print(fn_search('text', {mode = 'balanced'})[1].name)"
        ),
        "reverse_text\n"
    );
    // Accurate needs two: the limit, which pcall cannot swallow; no request sent.
    let before = server.request_count();
    let error = env
        .execute("print(pcall(fn_search, 'text', {mode = 'accurate'}))")
        .unwrap_err();
    assert!(
        matches!(
            error,
            ExecError::Limit {
                kind: LimitKind::LlmCalls,
                ..
            }
        ),
        "{error:?}"
    );
    assert_eq!(server.request_count(), before);
    // Fast mode needs no call, and the environment keeps working.
    assert_eq!(
        run(&env, "print(#fn_search('text', {mode = 'fast'}))"),
        "5\n"
    );
}

#[test]
fn fn_search_without_an_llm_or_with_an_unknown_mode_is_a_clear_error() {
    let env = Environment::new(text_registry(), Limits::default()).unwrap();
    let error = env
        .execute("fn_search('text', {mode = 'balanced'})")
        .unwrap_err();
    assert!(
        error.message().contains("needs an LLM"),
        "{}",
        error.message()
    );
    let error = env
        .execute("fn_search('text', {mode = 'smart'})")
        .unwrap_err();
    assert!(
        error.message().contains("unknown search mode `smart`"),
        "{}",
        error.message()
    );
    // Fast search works without a model, and says so.
    assert_eq!(
        run(
            &env,
            "local r, info = fn_search('count') print(#r, info.mode, info.fallback)"
        ),
        // The three registry functions and two built-ins (token_count, …).
        "5\tfast\tnil\n"
    );
}
