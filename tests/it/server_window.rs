//! The window the server reports: with no `--context-window`, `RLM_CONTEXT_WINDOW` or
//! `[model] context_window`, `rlm ask` asks the server once (vLLM's `max_model_len` in
//! `/v1/models`, llama.cpp's `/props`) and runs as if the window had been given; a
//! window given any other way wins and the server is not asked; a server that does not
//! say leaves the window unknown and the run goes on. The trace records the window, so
//! `rlm replay` does not ask.

use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::compaction::{WINDOW, model};
use crate::support::cli::{llm_args, rlm_command, stderr, stdout};
use crate::support::openai_server::{Behavior, OpenAiServer};
use crate::support::rlm_loop::lua;

/// What the 4-turn run of `compaction` answers when it compacts within an 8k window.
const COMPACTED: &str = "3 outputs, 10 messages, system first, user last\n";

/// A server enforcing `WINDOW` as llama.cpp does, playing the 4-turn run.
fn enforcing_server() -> OpenAiServer {
    OpenAiServer::always(model(4).within_window(WINDOW))
}

/// vLLM's `/v1/models`, the model `test-model` served with `--max-model-len tokens`.
fn vllm_models(tokens: u64) -> Behavior {
    Behavior::Json(json!({"object": "list", "data": [
        {"id": "other-model", "object": "model", "owned_by": "vllm", "max_model_len": 1},
        {"id": "test-model", "object": "model", "owned_by": "vllm", "root": "/models/q",
         "parent": null, "max_model_len": tokens},
    ]}))
}

/// `rlm ask` of the 4-turn run in `dir` with an API key, traced to `dir/run.jsonl`,
/// with `args`.
fn ask(dir: &Path, server: &OpenAiServer, args: &[&str]) -> Output {
    rlm_command()
        .current_dir(dir)
        .env("RLM_API_KEY", "test-key")
        .args([
            "ask",
            "Print your words each turn.",
            "-q",
            "--max-iterations",
            "12",
        ])
        .arg("--trace")
        .arg(dir.join("run.jsonl"))
        .args(args)
        .args(llm_args(&server.base_url(), "test-model"))
        .output()
        .unwrap()
}

/// The window the trace in `dir` records on its root's start line.
fn recorded_window(dir: &Path) -> Option<u64> {
    let trace = std::fs::read_to_string(dir.join("run.jsonl")).unwrap();
    let start: Value = serde_json::from_str(trace.lines().next().unwrap()).unwrap();
    assert_eq!(start["event"], "start");
    start["limits"]["context_window"].as_u64()
}

fn paths(server: &OpenAiServer) -> Vec<String> {
    server.get_requests().into_iter().map(|r| r.path).collect()
}

#[test]
fn a_run_without_a_window_takes_the_one_a_vllm_server_reports_and_replay_asks_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let server = enforcing_server();
    server.answer_get("/v1/models", vllm_models(WINDOW));
    let out = ask(dir.path(), &server, &[]);
    assert_eq!(stdout(&out), COMPACTED, "{}", stderr(&out));
    assert_eq!(paths(&server), ["/v1/models"], "asked once");
    let models = &server.get_requests()[0];
    assert_eq!(models.header("authorization"), Some("Bearer test-key"));
    for request in server.requests() {
        assert!(request.prompt_tokens() <= WINDOW, "no request was refused");
    }
    assert_eq!(recorded_window(dir.path()), Some(WINDOW));

    let posts = server.request_count();
    let replay = rlm_command()
        .current_dir(dir.path())
        .arg("replay")
        .arg(dir.path().join("run.jsonl"))
        .output()
        .unwrap();
    assert!(
        stdout(&replay).starts_with("identical ("),
        "{}",
        stderr(&replay)
    );
    assert_eq!(server.get_requests().len(), 1, "replay asks nothing");
    assert_eq!(server.request_count(), posts);
}

#[test]
fn a_llama_cpp_server_is_asked_its_props_whose_slot_context_wins_over_the_trained_one() {
    let dir = tempfile::tempdir().unwrap();
    let server = enforcing_server();
    server.answer_get(
        "/v1/models",
        Behavior::Json(json!({"object": "list", "data": [{
            "id": "qwen2.5-7b-instruct-q4_k_m.gguf", "object": "model", "created": 0,
            "owned_by": "llamacpp",
            "meta": {"vocab_type": 2, "n_vocab": 152064, "n_ctx_train": 131072, "n_embd": 3584},
        }]})),
    );
    server.answer_get(
        "/props",
        Behavior::Json(json!({
            "default_generation_settings": {"n_ctx": WINDOW, "params": {"n_predict": -1}},
            "total_slots": 4, "model_path": "/models/qwen.gguf", "build_info": "b6000",
        })),
    );
    let out = ask(dir.path(), &server, &[]);
    assert_eq!(stdout(&out), COMPACTED, "{}", stderr(&out));
    assert_eq!(paths(&server), ["/v1/models", "/props"]);
    assert_eq!(recorded_window(dir.path()), Some(WINDOW));
}

#[test]
fn a_window_given_by_flag_variable_or_file_wins_and_the_server_is_not_asked() {
    let dir = tempfile::tempdir().unwrap();
    let server = enforcing_server();
    // The server under-reports: taken, it would refuse the first request.
    server.answer_get("/v1/models", vllm_models(1_000));
    let out = ask(dir.path(), &server, &["--context-window", "8192"]);
    assert_eq!(stdout(&out), COMPACTED, "{}", stderr(&out));
    assert_eq!(recorded_window(dir.path()), Some(WINDOW));

    let mut variable = rlm_command();
    variable
        .current_dir(dir.path())
        .env("RLM_CONTEXT_WINDOW", "8192")
        .args(["ask", "Print your words each turn.", "-q"])
        .args(llm_args(&server.base_url(), "test-model"));
    assert_eq!(stdout(&variable.output().unwrap()), COMPACTED);

    std::fs::write(
        dir.path().join("rlm.toml"),
        "[model]\ncontext_window = 8192\n",
    )
    .unwrap();
    let out = ask(dir.path(), &server, &[]);
    assert_eq!(stdout(&out), COMPACTED, "{}", stderr(&out));
    assert!(server.get_requests().is_empty(), "{:?}", paths(&server));

    std::fs::remove_file(dir.path().join("rlm.toml")).unwrap();
    let out = ask(dir.path(), &server, &[]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "the server's word, when nothing else"
    );
    assert!(stderr(&out).contains("1,000 tokens"), "{}", stderr(&out));
}

#[test]
fn a_server_that_does_not_say_leaves_the_window_unknown_and_the_run_goes_on() {
    let slow = SLOW_ANSWER + Duration::from_secs(1);
    let answers: [(&str, Option<Behavior>); 5] = [
        ("404", None),
        (
            "garbage",
            Some(Behavior::Garbage("<html>models</html>".into())),
        ),
        (
            "no window",
            Some(Behavior::Json(json!({"data": [{"id": "test-model"}]}))),
        ),
        ("a 500", Some(Behavior::status(500))),
        ("slow", Some(vllm_models(WINDOW).after(slow))),
    ];
    for (what, answer) in answers {
        let dir = tempfile::tempdir().unwrap();
        let server = OpenAiServer::always(lua("FINAL('done')"));
        if let Some(answer) = answer {
            server.answer_get("/v1/models", answer);
        }
        let started = Instant::now();
        let out = ask(dir.path(), &server, &[]);
        assert_eq!(stdout(&out), "done\n", "{what}: {}", stderr(&out));
        assert!(started.elapsed() < slow, "{what}: not waited for");
        assert_eq!(
            paths(&server),
            ["/v1/models"],
            "{what}: asked once, not retried"
        );
        assert_eq!(recorded_window(dir.path()), None, "{what}");
        assert_eq!(server.request_count(), 1, "{what}");
    }
}

/// Longer than the client waits for the window.
const SLOW_ANSWER: Duration = rlm_registry::llm::SERVER_WINDOW_TIMEOUT;
