//! What `rlm serve` offers MCP hosts besides tools: each function's documentation and
//! source as a resource, the registry's system prompt as a resource, the `rlm` prompt,
//! and `run_lua`'s output as log messages while it runs; through rmcp's client and
//! through the official Python SDK's.
#![allow(deprecated)] // rmcp marks MCP logging deprecated (SEP-2577); it is still served

use crate::support;

use rlm_registry::serve::{FUNCTION_URI, RLM_PROMPT, SYSTEM_PROMPT_URI};
use rmcp::model::{GetPromptRequestParams, ReadResourceRequestParams, ResourceContents};
use serde_json::{Value, json};
use support::serve::*;

fn contents_text(contents: &[ResourceContents]) -> String {
    match &contents[0] {
        ResourceContents::TextResourceContents { text, .. } => text.clone(),
        other => panic!("text contents, not {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_and_prompts_are_declared_and_served_to_rmcps_client() {
    bounded(async {
        let server = TestServer::start(options()).await;
        let client = server.mcp().await;
        let capabilities = &client.peer_info().unwrap().capabilities;
        assert!(capabilities.resources.is_some() && capabilities.prompts.is_some());
        assert!(capabilities.logging.is_some());

        let resources = client.list_all_resources().await.unwrap();
        let uris: Vec<&str> = resources.iter().map(|r| r.uri.as_str()).collect();
        assert!(uris.contains(&SYSTEM_PROMPT_URI), "{uris:?}");
        assert!(uris.contains(&"rlm://functions/word_count"), "{uris:?}");
        assert!(
            uris.contains(&"rlm://functions/llm_query"),
            "built-ins too: {uris:?}"
        );

        let read = |uri: &str| client.read_resource(ReadResourceRequestParams::new(uri));
        let word_count = contents_text(&read("rlm://functions/word_count").await.unwrap().contents);
        assert!(word_count.contains("---"), "the doc comment: {word_count}");
        assert!(
            word_count.contains("function word_count"),
            "the source: {word_count}"
        );
        let builtin = contents_text(&read("rlm://functions/llm_query").await.unwrap().contents);
        assert!(builtin.contains("implemented by the host"), "{builtin}");
        let system = contents_text(&read(SYSTEM_PROMPT_URI).await.unwrap().contents);
        assert!(system.contains("word_count"), "{system}");
        let unknown = read(&format!("{FUNCTION_URI}word_cuont"))
            .await
            .unwrap_err();
        assert!(
            unknown.to_string().contains("word_count"),
            "did you mean: {unknown}"
        );
        assert!(read("file:///etc/passwd").await.is_err());

        let prompts = client.list_all_prompts().await.unwrap();
        assert_eq!(prompts.len(), 1);
        assert_eq!(prompts[0].name, RLM_PROMPT);
        let argument = &prompts[0].arguments.as_ref().unwrap()[0];
        assert_eq!(
            (argument.name.as_str(), argument.required),
            ("question", Some(true))
        );
        let text = rlm_prompt(&client, "How many words are in the context?").await;
        assert!(
            text.contains("How many words are in the context?"),
            "{text}"
        );
        assert!(
            text.contains("run_lua") && text.contains("word_count"),
            "{text}"
        );
        let missing = client
            .get_prompt(GetPromptRequestParams::new(RLM_PROMPT))
            .await;
        assert!(missing.unwrap_err().to_string().contains("question"));
        client.cancel().await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_client_reads_resources_gets_the_prompt_receives_logs_and_calls_tools() {
    let Some(python) = support::external::python_with_mcp() else {
        return;
    };
    bounded(async {
        let server = TestServer::start(options()).await;
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/it/support/mcp_python_client.py"
        );
        let output = tokio::process::Command::new(python)
            .args([script, &server.url("/mcp")])
            .output()
            .await
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{stderr}");
        let seen: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(
            seen["capabilities"],
            json!({"resources": true, "prompts": true, "logging": true})
        );
        let resources = seen["resources"].as_array().unwrap();
        assert!(resources.contains(&json!("rlm://functions/word_count")));
        assert!(resources.contains(&json!(SYSTEM_PROMPT_URI)));
        assert!(
            seen["word_count"]
                .as_str()
                .unwrap()
                .contains("function word_count")
        );
        assert!(seen["system"].as_str().unwrap().contains("word_count"));
        assert_eq!(
            seen["prompts"],
            json!([{"name": "rlm", "arguments": [["question", true]]}])
        );
        assert!(seen["prompt"].as_str().unwrap().contains("How many words?"));
        assert_eq!(seen["run_lua"], json!("3\n"));
        assert_eq!(seen["logged"], json!([["info", "run_lua", "3\n"]]));
    })
    .await;
}

/// A client that keeps the log messages it receives, and whether each came before the
/// call's result.
#[derive(Clone, Default)]
struct LogCollector(std::sync::Arc<std::sync::Mutex<Vec<(String, String)>>>);

impl LogCollector {
    /// The messages received so far, once `done` holds of them (or after 5 s): the
    /// server sends them before the result, but the client may hand them to this
    /// handler after it has returned the result.
    async fn take(&self, done: impl Fn(&[(String, String)]) -> bool) -> Vec<(String, String)> {
        for _ in 0..500 {
            if done(&self.0.lock().unwrap()) {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        self.0.lock().unwrap().drain(..).collect()
    }
}

impl rmcp::ClientHandler for LogCollector {
    async fn on_logging_message(
        &self,
        params: rmcp::model::LoggingMessageNotificationParam,
        _context: rmcp::service::NotificationContext<rmcp::RoleClient>,
    ) {
        let level = serde_json::to_value(params.level).unwrap();
        let text = params.data.as_str().unwrap_or_default().to_string();
        self.0
            .lock()
            .unwrap()
            .push((level.as_str().unwrap().to_string(), text));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_lua_output_arrives_as_log_messages_at_the_level_the_client_set() {
    use rmcp::ServiceExt;
    use rmcp::model::{LoggingLevel, SetLevelRequestParams};
    bounded(async {
        let server = TestServer::start(options()).await;
        let logs = LogCollector::default();
        let transport =
            rmcp::transport::StreamableHttpClientTransport::from_uri(server.url("/mcp"));
        let client = logs.clone().serve(transport).await.unwrap();
        let run = |code: &'static str| {
            let params = rmcp::model::CallToolRequestParams::new("run_lua")
                .with_arguments(json!({"code": code}).as_object().cloned().unwrap());
            client.call_tool(params)
        };
        // Nothing before the client asks for a level.
        run("print('unasked')").await.unwrap();
        assert!(logs.0.lock().unwrap().is_empty());

        client
            .set_level(SetLevelRequestParams::new(LoggingLevel::Info))
            .await
            .unwrap();
        let result = run("print('first') print('second', 2)").await.unwrap();
        assert_eq!(text(&result), "first\nsecond\t2\n");
        // The server sends its messages in order, but rmcp's client hands each
        // notification to the handler in a task of its own, so they may be seen in
        // another order: compare the pieces, sorted.
        let info_pieces = |seen: &[(String, String)]| -> Vec<String> {
            let mut pieces: Vec<String> = seen
                .iter()
                .filter(|(l, _)| l == "info")
                .flat_map(|(_, t)| t.split_inclusive('\n').map(str::to_string))
                .collect();
            pieces.sort();
            pieces
        };
        let seen = logs
            .take(|seen| info_pieces(seen) == ["first\n", "second\t2\n"])
            .await;
        assert_eq!(
            info_pieces(&seen),
            ["first\n", "second\t2\n"],
            "all the output: {seen:?}"
        );

        let failed = run("print('before') error('boom')").await.unwrap();
        assert!(is_error(&failed));
        let seen = logs.take(|seen| seen.len() >= 2).await;
        assert!(
            seen.contains(&("info".to_string(), "before\n".to_string())),
            "{seen:?}"
        );
        assert!(
            seen.iter()
                .any(|(level, text)| level == "warning" && text.contains("boom")),
            "{seen:?}"
        );

        client
            .set_level(SetLevelRequestParams::new(LoggingLevel::Warning))
            .await
            .unwrap();
        run("print('quiet')").await.unwrap();
        assert!(logs.0.lock().unwrap().is_empty(), "info is below warning");
        client.cancel().await.unwrap();
    })
    .await;
}
