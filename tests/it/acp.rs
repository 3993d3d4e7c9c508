//! `rlm acp` end to end: raw JSON-RPC over the process's stdio, the model the scripted
//! OpenAI-compatible server.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::acp::Agent;
use crate::support::openai_server::{Behavior, OpenAiServer};
use crate::support::rlm_loop::{bodies, lua, messages};

/// The crate's directory: a cwd whose corpus nobody reads in these tests but must load.
fn small_cwd() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.md"), "alpha").unwrap();
    std::fs::write(dir.path().join("b.md"), "beta").unwrap();
    dir
}

fn stop_reason(response: &Value) -> &str {
    response["result"]["stopReason"]
        .as_str()
        .unwrap_or_else(|| panic!("a stop reason: {response}"))
}

/// Waits until the server has had `n` requests.
fn wait_for_requests(server: &OpenAiServer, n: usize) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while server.request_count() < n {
        assert!(std::time::Instant::now() < deadline, "no model request");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_prompt_streams_prose_thinking_and_code_as_tool_calls_then_answers_with_end_turn() {
    let server = OpenAiServer::start(
        vec![
            Behavior::reply(
                "<think>count them</think>Looking first.\n```lua\nprint('seen ' .. #context)\n```",
            ),
            lua("FINAL('two documents')"),
        ],
        Behavior::status(400),
    );
    let cwd = small_cwd();
    let mut agent = Agent::start(cwd.path(), &server.base_url(), &[]);
    let init = agent.call("initialize", json!({"protocolVersion": 1}));
    assert_eq!(
        init["result"]["agentCapabilities"],
        json!({"loadSession": false,
               "promptCapabilities": {"image": false, "audio": false, "embeddedContext": true},
               "mcpCapabilities": {"http": false, "sse": false}})
    );
    assert_eq!(init["result"]["agentInfo"]["name"], "rlm");
    assert_eq!(init["result"]["authMethods"], json!([]));
    let new = agent.call("session/new", json!({"cwd": cwd.path(), "mcpServers": []}));
    let session = new["result"]["sessionId"].as_str().unwrap().to_string();
    let id = agent.prompt(&session, "How many documents?");
    let response = agent.response(id);
    assert_eq!(stop_reason(&response), "end_turn");

    let kinds: Vec<&str> = agent
        .updates
        .iter()
        .map(|u| u["sessionUpdate"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "agent_thought_chunk",
            "agent_message_chunk",
            "tool_call",
            "tool_call_update",
            "tool_call",
            "tool_call_update",
            "agent_message_chunk"
        ]
    );
    let u = &agent.updates;
    assert_eq!(
        u[0]["content"],
        json!({"type": "text", "text": "count them"})
    );
    assert_eq!(u[1]["content"]["text"], "Looking first.\n\n");
    assert_eq!(u[2]["title"], "Lua: print('seen ' .. #context)");
    assert_eq!(
        (u[2]["kind"].as_str(), u[2]["status"].as_str()),
        (Some("execute"), Some("in_progress"))
    );
    assert_eq!(u[3]["toolCallId"], u[2]["toolCallId"]);
    assert_eq!(u[3]["status"], "completed");
    assert_eq!(
        u[3]["content"],
        json!([{"type": "content", "content": {"type": "text", "text": "seen 2\n"}}]),
        "the cwd is the context, a corpus of its two files"
    );
    assert_eq!(
        u[6]["content"]["text"], "two documents",
        "the answer is the last message"
    );
}

#[test]
fn a_second_prompt_goes_on_with_the_repl_state_and_the_conversation() {
    let server = OpenAiServer::start(
        vec![
            lua("kept = 41\nFINAL('noted')"),
            lua("FINAL('kept ' .. (kept + 1))"),
        ],
        Behavior::status(400),
    );
    let cwd = small_cwd();
    let mut agent = Agent::start(cwd.path(), &server.base_url(), &[]);
    let session = agent.session(cwd.path());
    let first = agent.prompt(&session, "Remember 41.");
    assert_eq!(stop_reason(&agent.response(first)), "end_turn");
    let second = agent.prompt(&session, "What comes after it?");
    assert_eq!(stop_reason(&agent.response(second)), "end_turn");
    let answers = agent.updates_of("agent_message_chunk");
    assert_eq!(answers.last().unwrap()["content"]["text"], "kept 42");
    let sent = messages(&bodies(&server)[1]).clone();
    assert!(
        sent[1]["content"]
            .as_str()
            .unwrap()
            .starts_with("Remember 41.")
    );
    assert!(
        sent[3]["content"]
            .as_str()
            .unwrap()
            .starts_with("What comes after it?")
    );
}

#[test]
fn context_wins_over_cwd_and_a_resource_block_becomes_a_document() {
    let server = OpenAiServer::always(lua(
        "for _, d in ipairs(context) do if d.name == 'mem://note' then FINAL(context[1].name .. '|' .. d.text) end end",
    ));
    let cwd = small_cwd();
    let given = cwd.path().join("given.txt");
    std::fs::write(&given, "the given context").unwrap();
    let mut agent = Agent::start(
        cwd.path(),
        &server.base_url(),
        &["--context", given.to_str().unwrap()],
    );
    let session = agent.session(Path::new("/"));
    let id = agent.prompt_blocks(
        &session,
        json!([{"type": "text", "text": "What does the note say?"},
               {"type": "resource", "resource": {"uri": "mem://note", "text": "secret-42"}}]),
    );
    assert_eq!(stop_reason(&agent.response(id)), "end_turn");
    let answer = agent.updates_of("agent_message_chunk").last().unwrap()["content"]["text"].clone();
    assert_eq!(
        answer, "context|secret-42",
        "the --context text came first, the resource after"
    );
}

#[test]
fn cancel_stops_a_running_prompt_a_second_prompt_meanwhile_is_refused_and_the_next_runs() {
    let server = OpenAiServer::start(
        vec![lua("FINAL('too late')").after(Duration::from_secs(30))],
        lua("FINAL('after the cancel')"),
    );
    let cwd = small_cwd();
    let mut agent = Agent::start(cwd.path(), &server.base_url(), &[]);
    let session = agent.session(cwd.path());
    let slow = agent.prompt(&session, "Take your time.");
    wait_for_requests(&server, 1);
    let meanwhile = agent.prompt(&session, "And this?");
    let refused = agent.response(meanwhile);
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("already answering")
    );
    let started = std::time::Instant::now();
    agent.notify("session/cancel", json!({"sessionId": session}));
    assert_eq!(stop_reason(&agent.response(slow)), "cancelled");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let next = agent.prompt(&session, "Now?");
    assert_eq!(stop_reason(&agent.response(next)), "end_turn");
}

#[test]
fn the_iteration_cap_is_max_turn_requests_and_a_spent_budget_max_tokens() {
    let server = OpenAiServer::always(lua("print('still looking')"));
    let cwd = small_cwd();
    let mut capped = Agent::start(cwd.path(), &server.base_url(), &["--max-iterations", "2"]);
    let session = capped.session(cwd.path());
    let id = capped.prompt(&session, "Q");
    assert_eq!(stop_reason(&capped.response(id)), "max_turn_requests");
    let note = capped.updates_of("agent_message_chunk").last().unwrap()["content"]["text"].clone();
    assert!(
        note.as_str()
            .unwrap()
            .starts_with("No answer: iteration limit"),
        "{note}"
    );
    // Limits are per prompt: the next prompt has two turns again.
    let again = capped.prompt(&session, "Q again");
    assert_eq!(stop_reason(&capped.response(again)), "max_turn_requests");
    assert_eq!(server.request_count(), 4);

    let mut budgeted = Agent::start(cwd.path(), &server.base_url(), &["--max-llm-calls", "1"]);
    let session = budgeted.session(cwd.path());
    let id = budgeted.prompt(&session, "Q");
    assert_eq!(stop_reason(&budgeted.response(id)), "max_tokens");
}

#[test]
fn bad_messages_get_json_rpc_errors_and_the_agent_goes_on() {
    let server = OpenAiServer::always(lua("FINAL('ok')"));
    let cwd = small_cwd();
    let mut agent = Agent::start(cwd.path(), &server.base_url(), &[]);
    agent.send_line("{this is not json");
    let parse = agent.response(Value::Null);
    assert_eq!(parse["error"]["code"], -32700, "{parse}");
    let unknown = agent.call("session/fork", json!({}));
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");
    let bad = agent.call("session/prompt", json!({"sessionId": 7}));
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    let nobody = agent.call("session/prompt", json!({"sessionId": "nope", "prompt": []}));
    assert_eq!(nobody["error"]["code"], -32002, "{nobody}");
    let missing = agent.call(
        "session/new",
        json!({"cwd": "/no/such/folder", "mcpServers": []}),
    );
    assert_eq!(missing["error"]["code"], -32602, "{missing}");
    let session = agent.session(cwd.path());
    let image = agent.prompt_blocks(
        &session,
        json!([{"type": "image", "data": "", "mimeType": "image/png"}]),
    );
    assert_eq!(agent.response(image)["error"]["code"], -32602);
    let fine = agent.prompt(&session, "Still there?");
    assert_eq!(stop_reason(&agent.response(fine)), "end_turn");
}

#[test]
fn stdin_closed_mid_run_cancels_it_and_the_process_exits_0_promptly() {
    let server = OpenAiServer::always(lua("FINAL('never')").after(Duration::from_secs(30)));
    let cwd = small_cwd();
    let mut agent = Agent::start(cwd.path(), &server.base_url(), &[]);
    let session = agent.session(cwd.path());
    agent.prompt(&session, "Q");
    wait_for_requests(&server, 1);
    let (code, took) = agent.close();
    assert_eq!(code, Some(0));
    assert!(took < Duration::from_secs(3), "exited after {took:?}");
}

#[test]
fn a_failing_model_server_is_a_json_rpc_error_naming_the_cause() {
    let server = OpenAiServer::always(Behavior::status(400));
    let cwd = small_cwd();
    let mut agent = Agent::start(cwd.path(), &server.base_url(), &[]);
    let session = agent.session(cwd.path());
    let id = agent.prompt(&session, "Q");
    let response = agent.response(id);
    assert_eq!(response["error"]["code"], -32603, "{response}");
    let message = response["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("the model server failed: "),
        "{message}"
    );
    assert!(message.contains("400"), "{message}");
}

/// The `sessionUpdate` kinds of `updates`, in order.
fn kinds(updates: &[Value]) -> Vec<&str> {
    updates
        .iter()
        .map(|u| u["sessionUpdate"].as_str().unwrap())
        .collect()
}

#[test]
fn a_kept_session_loads_in_a_new_agent_with_its_history_and_state_and_no_model_request() {
    let server = OpenAiServer::start(
        vec![
            lua("x = 41\nFINAL('set')"),
            lua("print(x + 1)"),
            lua("FINAL('printed')"),
            lua("print(x)"),
            lua("FINAL('seen')"),
        ],
        Behavior::status(400),
    );
    let cwd = small_cwd();
    let state = tempfile::tempdir().unwrap();
    let keep = ["--state-dir", state.path().to_str().unwrap()];
    let mut first = Agent::start(cwd.path(), &server.base_url(), &keep);
    let session = first.session(cwd.path());
    let one = first.prompt(&session, "Set x to 41.");
    assert_eq!(stop_reason(&first.response(one)), "end_turn");
    let two = first.prompt(&session, "Print x + 1.");
    assert_eq!(stop_reason(&first.response(two)), "end_turn");
    let live = first.updates.clone();
    assert_eq!(first.close().0, Some(0));
    assert_eq!(server.request_count(), 3);

    let mut second = Agent::start(cwd.path(), &server.base_url(), &keep);
    let init = second.call("initialize", json!({"protocolVersion": 1}));
    assert_eq!(init["result"]["agentCapabilities"]["loadSession"], true);
    let load = second.call(
        "session/load",
        json!({"sessionId": session, "cwd": cwd.path(), "mcpServers": []}),
    );
    assert_eq!(load["result"], json!({}), "{load}");
    assert_eq!(
        server.request_count(),
        3,
        "the load asked the model nothing"
    );
    let history = second.updates.clone();
    assert_eq!(
        kinds(&history),
        [
            "user_message_chunk",
            "tool_call",
            "tool_call_update",
            "agent_message_chunk",
            "user_message_chunk",
            "tool_call",
            "tool_call_update",
            "tool_call",
            "tool_call_update",
            "agent_message_chunk",
        ],
        "the history came before the response"
    );
    assert_eq!(
        (&history[0]["content"], &history[4]["content"]),
        (
            &json!({"type": "text", "text": "Set x to 41."}),
            &json!({"type": "text", "text": "Print x + 1."})
        )
    );
    let replayed: Vec<Value> = history
        .iter()
        .filter(|u| u["sessionUpdate"] != "user_message_chunk")
        .cloned()
        .collect();
    assert_eq!(
        replayed, live,
        "the updates as they were streamed live, ids and all"
    );

    let three = second.prompt(&session, "Print x.");
    assert_eq!(stop_reason(&second.response(three)), "end_turn");
    let printed = second
        .updates_of("tool_call_update")
        .into_iter()
        .find(|u| u["toolCallId"] == "3.1.1")
        .expect("the third prompt's first block, numbered after the loaded two");
    assert_eq!(
        printed["content"][0]["content"]["text"], "41\n",
        "the REPL state came back"
    );
    let sent = messages(&bodies(&server)[3]).clone();
    let said: Vec<&str> = sent.iter().filter_map(|m| m["content"].as_str()).collect();
    assert!(said[1].starts_with("Set x to 41."), "{said:?}");
    assert!(
        said.iter().any(|m| m.starts_with("Print x + 1.")),
        "{said:?}"
    );
    assert!(said.last().unwrap().starts_with("Print x."), "{said:?}");
}

#[test]
fn load_without_a_state_dir_is_method_not_found_an_unknown_session_not_found_an_open_one_refused() {
    let server = OpenAiServer::always(lua("FINAL('ok')"));
    let cwd = small_cwd();
    let mut plain = Agent::start(cwd.path(), &server.base_url(), &[]);
    let refused = plain.call(
        "session/load",
        json!({"sessionId": "rlm-1", "cwd": cwd.path(), "mcpServers": []}),
    );
    assert_eq!(refused["error"]["code"], -32601, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--state-dir")
    );
    let state = tempfile::tempdir().unwrap();
    let keep = ["--state-dir", state.path().to_str().unwrap()];
    let mut kept = Agent::start(cwd.path(), &server.base_url(), &keep);
    for id in ["rlm-7", "../rlm-1"] {
        let unknown = kept.call(
            "session/load",
            json!({"sessionId": id, "cwd": cwd.path(), "mcpServers": []}),
        );
        assert_eq!(unknown["error"]["code"], -32002, "{unknown}");
    }
    let bad = kept.call("session/load", json!({"cwd": cwd.path()}));
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    let open = kept.session(cwd.path());
    let again = kept.call(
        "session/load",
        json!({"sessionId": open, "cwd": cwd.path(), "mcpServers": []}),
    );
    assert_eq!(again["error"]["code"], -32600, "{again}");
    assert!(kept.updates.is_empty(), "no history streamed for it");
    assert_eq!(server.request_count(), 0);
}

#[test]
fn a_session_whose_agent_was_killed_mid_prompt_loads_with_the_whole_turns_of_that_prompt() {
    let server = OpenAiServer::start(
        vec![
            lua("x = 41\nFINAL('set')"),
            lua("y = x + 1\nprint(y)"),
            lua("FINAL('never sent')").after(Duration::from_secs(30)),
            lua("FINAL('y is ' .. y)"),
        ],
        Behavior::status(400),
    );
    let cwd = small_cwd();
    let state = tempfile::tempdir().unwrap();
    let keep = ["--state-dir", state.path().to_str().unwrap()];
    let mut first = Agent::start(cwd.path(), &server.base_url(), &keep);
    let session = first.session(cwd.path());
    let one = first.prompt(&session, "Set x.");
    assert_eq!(stop_reason(&first.response(one)), "end_turn");
    first.prompt(&session, "Set y.");
    wait_for_requests(&server, 3);
    drop(first); // SIGKILL, in the middle of the prompt's second turn

    let mut second = Agent::start(cwd.path(), &server.base_url(), &keep);
    let load = second.call(
        "session/load",
        json!({"sessionId": session, "cwd": cwd.path(), "mcpServers": []}),
    );
    assert_eq!(load["result"], json!({}), "{load}");
    assert_eq!(
        server.request_count(),
        3,
        "the cut turn was not asked again"
    );
    let cut: Vec<&str> = kinds(&second.updates).into_iter().skip(4).collect();
    assert_eq!(
        cut,
        ["user_message_chunk", "tool_call", "tool_call_update"],
        "the cut prompt's whole turn, and no answer"
    );
    let three = second.prompt(&session, "What is y?");
    assert_eq!(stop_reason(&second.response(three)), "end_turn");
    let answer =
        second.updates_of("agent_message_chunk").last().unwrap()["content"]["text"].clone();
    assert_eq!(answer, "y is 42", "the cut prompt's whole turn set y");
}

#[test]
fn a_kept_session_whose_context_changed_is_refused_with_a_clear_error() {
    let server = OpenAiServer::always(lua("FINAL('ok')"));
    let cwd = small_cwd();
    let state = tempfile::tempdir().unwrap();
    let keep = ["--state-dir", state.path().to_str().unwrap()];
    let mut first = Agent::start(cwd.path(), &server.base_url(), &keep);
    let session = first.session(cwd.path());
    let one = first.prompt(&session, "Q");
    assert_eq!(stop_reason(&first.response(one)), "end_turn");
    first.close();
    std::fs::write(cwd.path().join("a.md"), "changed").unwrap();

    let mut second = Agent::start(cwd.path(), &server.base_url(), &keep);
    let load = second.call(
        "session/load",
        json!({"sessionId": session, "cwd": cwd.path(), "mcpServers": []}),
    );
    assert_eq!(load["error"]["code"], -32602, "{load}");
    let message = load["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("the context is not the recorded one"),
        "{message}"
    );
}
