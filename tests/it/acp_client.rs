//! `rlm acp` driven by the official Python ACP client (`agent-client-protocol` 0.12.1,
//! the version verifiers' runner pins), with the scripted server as the model. Skipped
//! without `RLM_ACP_PYTHON` (a failure under `RLM_REQUIRE_TOOLS=1`).

use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::external::python_with_acp;
use crate::support::openai_server::{Behavior, OpenAiServer};
use crate::support::rlm_loop::lua;

#[test]
fn the_python_acp_client_sees_updates_answers_shared_state_cancel_and_every_stop_reason() {
    let Some(python) = python_with_acp() else {
        return;
    };
    let server = OpenAiServer::always(Behavior::ByPrompt(vec![
        (
            "What does the note say?".to_string(),
            lua(
                "for _, d in ipairs(context) do if d.name == 'mem://note' then note = d.text end end\nprint('found ' .. note)\nFINAL('noted ' .. note)",
            ),
        ),
        (
            "What was it again?".to_string(),
            lua("FINAL('still ' .. note)"),
        ),
        (
            "Take your time.".to_string(),
            lua("FINAL('too late')").after(Duration::from_secs(30)),
        ),
        (String::new(), lua("print('looking')")),
    ]));
    let cwd = tempfile::tempdir().unwrap();
    std::fs::write(cwd.path().join("a.md"), "alpha").unwrap();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/it/support/acp_python_client.py"
    );
    let output = Command::new(python)
        .args([script, env!("CARGO_BIN_EXE_rlm"), &server.base_url()])
        .arg(cwd.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let seen: Value = serde_json::from_slice(&output.stdout).unwrap();

    let init = &seen["initialize"];
    assert_eq!(init["protocolVersion"], 1);
    assert_eq!(
        init["agentCapabilities"]["promptCapabilities"]["embeddedContext"],
        true
    );
    assert_eq!(init["agentCapabilities"]["loadSession"], false);
    assert_eq!(init["agentInfo"]["name"], "rlm");
    assert_eq!(
        seen["stop_reasons"],
        json!([
            "end_turn",
            "end_turn",
            "cancelled",
            "max_turn_requests",
            "max_tokens"
        ])
    );
    assert_eq!(seen["unknown_session"], -32002);

    let updates = seen["updates"].as_array().unwrap();
    let texts: Vec<&str> = updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert_eq!(
        texts,
        ["noted secret-42", "still secret-42"],
        "the answers, in order"
    );
    let call = updates
        .iter()
        .find(|u| u["sessionUpdate"] == "tool_call")
        .expect("a tool call");
    assert_eq!(
        (&call["kind"], &call["status"]),
        (&json!("execute"), &json!("in_progress"))
    );
    let done = updates
        .iter()
        .find(|u| u["sessionUpdate"] == "tool_call_update" && u["toolCallId"] == call["toolCallId"])
        .expect("its update");
    assert_eq!(done["status"], "completed");
    assert_eq!(done["content"][0]["content"]["text"], "found secret-42\n");
}

#[test]
fn the_python_acp_client_loads_a_kept_session_with_its_history_documents_and_state() {
    let Some(python) = python_with_acp() else {
        return;
    };
    let server = OpenAiServer::always(Behavior::ByPrompt(vec![
        (
            "Remember the note.".to_string(),
            lua(
                "for _, d in ipairs(context) do if d.name == 'mem://note' then note = d.text end end\nFINAL('noted')",
            ),
        ),
        (
            "What was the note?".to_string(),
            lua(
                "local again\nfor _, d in ipairs(context) do if d.name == 'mem://note' then again = d.text end end\nFINAL(note .. '/' .. again)",
            ),
        ),
        (String::new(), Behavior::status(400)),
    ]));
    let cwd = tempfile::tempdir().unwrap();
    std::fs::write(cwd.path().join("a.md"), "alpha").unwrap();
    let state = tempfile::tempdir().unwrap();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/it/support/acp_python_load.py"
    );
    let output = Command::new(python)
        .args([script, env!("CARGO_BIN_EXE_rlm"), &server.base_url()])
        .args([cwd.path(), state.path()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let seen: Value = serde_json::from_slice(&output.stdout).unwrap();

    assert_eq!(seen["load_session"], true);
    assert_eq!(
        (&seen["first"], &seen["second"]),
        (&json!("end_turn"), &json!("end_turn"))
    );
    assert_eq!(server.request_count(), 2, "the load asked nothing");
    let history = seen["history"].as_array().unwrap();
    assert_eq!(history[0]["sessionUpdate"], "user_message_chunk");
    assert_eq!(history[0]["content"]["text"], "Remember the note.");
    assert_eq!(history[1]["sessionUpdate"], "user_message_chunk");
    assert_eq!(history[1]["content"]["resource"]["uri"], "mem://note");
    assert_eq!(
        &history[2..],
        seen["live"].as_array().unwrap().as_slice(),
        "the prompt's updates as they were streamed live"
    );
    let answer = seen["after"]
        .as_array()
        .unwrap()
        .iter()
        .rfind(|u| u["sessionUpdate"] == "agent_message_chunk")
        .expect("an answer");
    assert_eq!(
        answer["content"]["text"], "secret-7/secret-7",
        "the global and the document came back"
    );
}
