//! The tool dispatch loop: `ToolDispatcher` sends the tools to the model, runs
//! the calls it asks for and sends back results or errors until a text answer, within an
//! iteration cap, against the scripted OpenAI-compatible server.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use rlm_registry::Registry;
use rlm_registry::environment::Limits;
use rlm_registry::llm::{LlmClient, LlmConfig, Message, Role};
use rlm_registry::tools::{DispatchError, ToolDispatcher};
use serde_json::{Value, json};
use support::openai_server::{Behavior, OpenAiServer};

fn client_for(server: &OpenAiServer) -> LlmClient {
    LlmClient::new(
        LlmConfig::new(server.base_url(), "tool-model")
            .with_timeout(Duration::from_secs(5))
            .with_max_retries(0),
    )
    .unwrap()
}

/// The tool messages of a recorded request body, as (tool_call_id, content).
fn tool_results(body: &Value) -> Vec<(String, String)> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["tool_call_id"].as_str().unwrap().to_string(),
                m["content"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn dispatch_runs_tools_and_returns_the_text_answer() {
    let server = OpenAiServer::start(
        vec![
            Behavior::tool_calls(&[
                ("c1", "word_count", r#"{"text": "a b c"}"#),
                ("c2", "shout", r#"{"text": "hi"}"#),
            ]),
            Behavior::reply("3 words"),
        ],
        Behavior::status(500),
    );
    let mut dispatcher = ToolDispatcher::with_default_iterations();
    assert_eq!(dispatcher.max_iterations(), 10);
    let skipped = dispatcher.register_registry(Registry::baked().clone(), Limits::default());
    // Only functions taking a Lua function (`map`, `sort_by`'s key, …) are not tools.
    assert!(
        skipped
            .iter()
            .all(|s| s.reason.contains("a `function` cannot be passed as JSON")),
        "{skipped:?}"
    );
    dispatcher.register_handler(
        "shout",
        "Upper-cases text.",
        json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
        |args| Ok(json!(args["text"].as_str().unwrap_or("").to_uppercase())),
    );
    let conversation = dispatcher
        .dispatch(
            vec![Message::system("Use tools."), Message::user("Count.")],
            &client_for(&server),
        )
        .unwrap();
    let last = conversation.last().unwrap();
    assert_eq!(last.role, Role::Assistant);
    assert_eq!(last.content.as_deref(), Some("3 words"));
    assert_eq!(conversation.len(), 6); // system, user, tool calls, 2 results, answer

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let first = requests[0].json().unwrap();
    assert_eq!(first["model"], "tool-model");
    let names: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"word_count") && names.contains(&"shout"));
    let second = requests[1].json().unwrap();
    let assistant = &second["messages"][2];
    assert_eq!(assistant["role"], "assistant");
    assert_eq!(assistant["content"], Value::Null);
    assert_eq!(assistant["tool_calls"][0]["function"]["name"], "word_count");
    assert_eq!(
        tool_results(&second),
        [
            ("c1".to_string(), "3".to_string()),
            ("c2".to_string(), "\"HI\"".to_string())
        ]
    );
}

#[test]
fn dispatch_sends_errors_back_to_the_model() {
    let server = OpenAiServer::start(
        vec![
            Behavior::tool_calls(&[
                ("u", "no_such_tool", "{}"),
                ("h", "fails", "{}"),
                ("s", "word_count", r#"{"text": 5}"#),
                ("l", "chunk_by_lines", r#"{"text": "a", "n": 0}"#),
                ("j", "word_count", "{not json"),
            ]),
            Behavior::reply("sorry"),
        ],
        Behavior::status(500),
    );
    let mut dispatcher = ToolDispatcher::new(3);
    dispatcher.register_registry(Registry::baked().clone(), Limits::default());
    dispatcher.register_handler("fails", "Always fails.", json!({"type": "object"}), |_| {
        Err("disk on fire".to_string())
    });
    let conversation = dispatcher
        .dispatch(vec![Message::user("go")], &client_for(&server))
        .unwrap();
    assert_eq!(
        conversation.last().unwrap().content.as_deref(),
        Some("sorry")
    );
    let results = tool_results(&server.requests()[1].json().unwrap());
    let text = |id: &str| results.iter().find(|(i, _)| i == id).unwrap().1.clone();
    assert!(text("u").starts_with("error: unknown tool `no_such_tool`; available tools: "));
    assert!(text("u").contains("word_count"));
    assert_eq!(text("h"), "error: disk on fire");
    assert_eq!(
        text("s"),
        "error: invalid arguments for `word_count`: $.text: expected a string, or an object or an array, got 5"
    );
    assert!(
        text("l").starts_with("error: `chunk_by_lines` failed:"),
        "{}",
        text("l")
    );
    assert!(text("l").contains("n must be at least 1"));
    assert!(text("j").starts_with("error: the arguments of `word_count` are not valid JSON"));
}

#[test]
fn dispatch_stops_at_the_cap() {
    let server = OpenAiServer::always(Behavior::tool_calls(&[(
        "again",
        "word_count",
        r#"{"text": "x y"}"#,
    )]));
    let mut dispatcher = ToolDispatcher::new(3);
    dispatcher.register_registry(Arc::new(Registry::baked().clone()), Limits::default());
    let error = dispatcher
        .dispatch(vec![Message::user("loop")], &client_for(&server))
        .unwrap_err();
    match &error {
        DispatchError::IterationLimit {
            max_iterations,
            messages,
        } => {
            assert_eq!(*max_iterations, 3);
            // user + 3 × (tool calls + result)
            assert_eq!(messages.len(), 7);
            assert!(
                messages
                    .iter()
                    .filter(|m| m.role == Role::Tool)
                    .all(|m| m.content.as_deref() == Some("2"))
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        error.to_string(),
        "the model was still calling tools after 3 iterations"
    );
    assert_eq!(server.request_count(), 3);

    // A zero cap still lets the model answer once.
    let server = OpenAiServer::always(Behavior::reply("fine"));
    let conversation = ToolDispatcher::new(0)
        .dispatch(vec![Message::user("hi")], &client_for(&server))
        .unwrap();
    assert_eq!(
        conversation.last().unwrap().content.as_deref(),
        Some("fine")
    );
}

#[test]
fn dispatch_reports_model_failures() {
    let server = OpenAiServer::always(Behavior::status(400));
    let error = ToolDispatcher::new(5)
        .dispatch(vec![Message::user("hi")], &client_for(&server))
        .unwrap_err();
    assert!(matches!(error, DispatchError::Llm(_)), "{error:?}");
    // No tools registered: the request carries no `tools` field.
    assert!(server.requests()[0].json().unwrap().get("tools").is_none());
}

#[test]
fn dispatch_calls_host_functions_of_a_catalog() {
    use rlm_registry::catalog::Catalog;
    use rlm_registry::providers::{AgentScope, HostFunction, Providers};
    let server = OpenAiServer::start(
        vec![
            Behavior::tool_calls(&[
                ("h", "price_of", r#"{"item": "apple"}"#),
                ("r", "word_count", r#"{"text": "a b"}"#),
                ("b", "token_count", r#"{"text": "a b"}"#),
            ]),
            Behavior::reply("done"),
        ],
        Behavior::status(500),
    );
    let mut providers = Providers::builtin();
    providers
        .register_function(
            "shop",
            HostFunction::typed(
                "price_of",
                "--- The price of an item, in cents.\n---@param item string\n---@return integer",
                |_, (item,): (String,)| Ok::<_, String>(item.len() as i64 * 10),
            ),
        )
        .unwrap();
    let catalog = Catalog::new(
        Registry::baked().clone(),
        Arc::new(providers),
        AgentScope::TOP,
    );
    let mut dispatcher = ToolDispatcher::with_default_iterations();
    dispatcher.register_catalog(catalog, Limits::default());
    let names: Vec<String> = dispatcher
        .definitions()
        .iter()
        .map(|d| d["function"]["name"].as_str().unwrap().to_string())
        .collect();
    assert!(names.contains(&"price_of".to_string()));
    assert!(
        !names.contains(&"token_count".to_string()),
        "built-ins are not tools here"
    );
    dispatcher
        .dispatch(vec![Message::user("price?")], &client_for(&server))
        .unwrap();
    let results = tool_results(&server.requests()[1].json().unwrap());
    let text = |id: &str| results.iter().find(|(i, _)| i == id).unwrap().1.clone();
    assert_eq!(text("h"), "50");
    assert_eq!(text("r"), "2");
    assert!(text("b").starts_with("error: unknown tool `token_count`"));
}
