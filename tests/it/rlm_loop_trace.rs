//! The JSONL trace and the live view end to end: one line per turn of every agent, a
//! trace that grows linearly, and the conversation rebuilt from it.

use crate::support;

use rlm_registry::rlm::{Context, RlmError};
use serde_json::Value;
use support::openai_server::{Behavior, OpenAiServer};
use support::rlm_loop::*;

#[test]
fn the_trace_has_one_json_line_per_turn_of_every_agent() {
    let server = OpenAiServer::start(
        vec![
            lua("print(rlm_query('Sub-task'))"),
            lua("FINAL('from the child')"),
            Behavior::reply("```lua\nprint(nope())\n```"),
            lua("FINAL('done')"),
        ],
        Behavior::status(500),
    );
    let trace = Shared::default();
    let live = Shared::default();
    rlm(&server, 10)
        .trace(trace.clone())
        .live_view(live.clone())
        .run("Q", Some(Context::from("ctx")))
        .unwrap();
    let events = trace.events();
    // Order of writing: each agent's start, then its turns; root turn 1 ends after its
    // child's turn.
    let ids: Vec<(&str, &str, u64, u64)> = events
        .iter()
        .map(|l| {
            (
                l["event"].as_str().unwrap(),
                l["agent"].as_str().unwrap(),
                l["depth"].as_u64().unwrap(),
                l["turn"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(
        ids,
        [
            ("start", "0", 0, 0),
            ("start", "0.1", 1, 0),
            ("turn", "0.1", 1, 1),
            ("turn", "0", 0, 1),
            ("turn", "0", 0, 2),
            ("turn", "0", 0, 3),
        ]
    );
    let (root_start, child_start) = (&events[0], &events[1]);
    assert_eq!(root_start["question"], "Q");
    assert_eq!(root_start["messages"].as_array().unwrap().len(), 2);
    assert_eq!(root_start["messages"][0]["role"], "system");
    assert_eq!(root_start["messages"][1]["role"], "user");
    assert_eq!(child_start["question"], "Sub-task");
    assert!(
        child_start["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("sub-agent at depth 1")
    );
    let lines = turns(&events);
    let child = lines[0];
    assert_eq!(child["final"], "from the child");
    assert_eq!(child["messages_sent"], 2);
    let first = lines[1];
    assert_eq!(first["messages_sent"], 2);
    assert!(first.get("messages").is_none(), "turns carry no messages");
    assert_eq!(first["reply"], "```lua\nprint(rlm_query('Sub-task'))\n```");
    assert_eq!(first["code_blocks"][0], "print(rlm_query('Sub-task'))\n");
    assert_eq!(first["outputs"][0]["status"], "ok");
    assert_eq!(first["outputs"][0]["output"], "from the child\n");
    assert_eq!(first["feedback"], "Output of block 1:\nfrom the child\n");
    assert_eq!(first["final"], Value::Null);
    assert_eq!(first["prompt_tokens"], 10);
    assert_eq!(first["completion_tokens"], 5);
    assert_eq!(first["run_tokens"], 30);
    assert!(first["elapsed_ms"].as_u64().is_some() && first["llm_ms"].as_u64().is_some());
    let error = lines[2];
    assert_eq!(error["outputs"][0]["status"], "error");
    assert!(
        error["outputs"][0]["error"]
            .as_str()
            .unwrap()
            .contains("nope")
    );
    assert_eq!(error["messages_sent"], 4);
    assert_eq!(lines[3]["final"], "done");
    assert_eq!(lines[3]["feedback"], Value::Null);
    // Children's conversations are rebuilt like the root's, from their own lines.
    let bodies = bodies(&server);
    assert_eq!(&conversation(&events, "0.1", 1), messages(&bodies[1]));
    assert_eq!(&conversation(&events, "0", 3), messages(&bodies[3]));

    let live = live.text();
    assert!(
        live.contains("turn 1/10 · 1 block · 15 chars out · 30 tokens"),
        "{live}"
    );
    assert!(
        live.contains("    [agent 0.1] turn 1/10 · 1 block · 0 chars out · FINAL · 30 tokens"),
        "{live}"
    );
    assert!(live.contains("  │ print(rlm_query('Sub-task'))"), "{live}");
    assert!(live.contains("error in block 1"), "{live}");
    assert!(
        live.contains("  ✗ input:1: attempt to call a nil value (global 'nope')"),
        "{live}"
    );
}

#[test]
fn the_trace_grows_linearly_and_the_conversation_can_be_rebuilt_from_it() {
    let replies: Vec<String> = (1..=5)
        .map(|n| format!("print('marker {n} of the run', #context)"))
        .collect();
    let mut script: Vec<Behavior> = replies.iter().map(|code| lua(code)).collect();
    script.push(lua("FINAL('the end')"));
    let server = OpenAiServer::start(script, Behavior::status(500));
    let trace = Shared::default();
    let answer = rlm(&server, 10)
        .trace(trace.clone())
        .run("Q", Some(Context::from("ctx")))
        .unwrap();
    assert_eq!(answer.turns, 6);
    let text = trace.text();
    let events = events_of(&text);

    // One line per event: the start, then each turn once.
    let kinds: Vec<(&str, u64)> = events
        .iter()
        .map(|e| {
            (
                e["event"].as_str().unwrap(),
                e["turn"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("start", 0),
            ("turn", 1),
            ("turn", 2),
            ("turn", 3),
            ("turn", 4),
            ("turn", 5),
            ("turn", 6)
        ]
    );

    // No line repeats what an earlier line said: the system prompt is on the start line
    // only, and turn N does not carry turn 1's reply.
    let lines: Vec<&str> = text.lines().collect();
    let system = events[0]["messages"][0]["content"].as_str().unwrap();
    let system_marker =
        serde_json::to_string(&system.chars().take(200).collect::<String>()).unwrap();
    let system_marker = system_marker.trim_matches('"');
    assert!(lines[0].contains(system_marker));
    for (n, line) in lines.iter().enumerate().skip(1) {
        assert!(
            !line.contains(system_marker),
            "line {n} repeats the system prompt"
        );
        if n > 1 {
            assert!(
                !line.contains("marker 1 of the run"),
                "line {n} repeats turn 1's reply: {line}"
            );
        }
    }
    // So every turn line is about as long as the first: the trace grows linearly.
    let turn_lengths: Vec<usize> = lines[1..6].iter().map(|l| l.len()).collect();
    let (shortest, longest) = (
        *turn_lengths.iter().min().unwrap(),
        *turn_lengths.iter().max().unwrap(),
    );
    assert!(
        longest < shortest + 100,
        "turn lines grow with the run: {turn_lengths:?}"
    );
    assert!(text.len() < lines[0].len() + 6 * (longest + 1));

    // The conversation of every turn, rebuilt from the trace alone, is what the model got.
    let bodies = bodies(&server);
    assert_eq!(bodies.len(), 6);
    for (i, body) in bodies.iter().enumerate() {
        let turn = i as u64 + 1;
        let rebuilt = conversation(&events, "0", turn);
        assert_eq!(&rebuilt, messages(body), "turn {turn}");
        assert_eq!(
            events[i + 1]["messages_sent"].as_u64().unwrap() as usize,
            rebuilt.len()
        );
    }
}

#[test]
fn the_trace_records_why_a_run_failed() {
    let server = OpenAiServer::start(vec![lua("x = 1")], Behavior::status(400));
    let trace = Shared::default();
    let result = rlm(&server, 10).trace(trace.clone()).run("Q", None);
    assert!(matches!(result, Err(RlmError::Llm(_))));
    let text = trace.text();
    let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(last["turn"], 2);
    assert_eq!(last["reply"], Value::Null);
    assert!(
        last["error"].as_str().unwrap().contains("HTTP 400"),
        "{last}"
    );
}
