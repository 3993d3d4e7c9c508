//! `rlm trace show` on traces of real loop runs against the scripted server: recovery
//! from an error, a child agent, `rlm_query_batched` children, the iteration cap, a trace
//! cut short; and `--turn`'s rebuilt messages against what the server received.

use crate::support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use rlm_registry::rlm::Context;
use rlm_registry::trace::{Outcome, Trace};
use serde_json::Value;
use support::openai_server::{Behavior, OpenAiServer};
use support::rlm_loop::*;

fn rlm_bin(args: &[&str]) -> (String, String, i32) {
    let out = support::cli::rlm(args);
    (
        support::cli::stdout(&out),
        support::cli::stderr(&out),
        out.status.code().unwrap_or(-1),
    )
}

fn show(path: &Path, extra: &[&str]) -> (String, String, i32) {
    let mut args = vec!["trace", "show", path.to_str().unwrap()];
    args.extend_from_slice(extra);
    rlm_bin(&args)
}

/// A run with a child agent (turn 1), an error the model recovers from (turn 2) and a
/// final answer (turn 3); its trace file and the server.
fn child_and_recovery(dir: &Path) -> (PathBuf, OpenAiServer) {
    let server = OpenAiServer::start(
        vec![
            lua("print(rlm_query('Sub-task'))"),
            lua("FINAL('from the child')"),
            Behavior::reply("```lua\nprint(nope())\n```"),
            lua("FINAL('done')"),
        ],
        Behavior::status(500),
    );
    let path = dir.join("run.jsonl");
    rlm(&server, 10)
        .trace_file(&path)
        .unwrap()
        .run("How many lines?", Some(Context::from("a\nb\n")))
        .unwrap();
    (path, server)
}

#[test]
fn show_draws_children_under_the_turn_that_started_them_and_the_recovered_error() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _server) = child_and_recovery(dir.path());
    let (out, err, code) = show(&path, &[]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("Question: How many lines?\n"), "{out}");
    assert!(out.contains("Outcome:  answered: done\n"), "{out}");
    assert!(
        out.contains("Turns:    3 of the root · 4 turns · 2 agents\n"),
        "{out}"
    );
    assert!(
        out.contains("Tokens:   60 in all · depth 0: 45 · depth 1: 15\n"),
        "{out}"
    );
    assert!(
        out.contains("Calls:    4 model calls · wall time "),
        "{out}"
    );
    // Every line says when it was written; the wall time is the last turn's end, which
    // no turn of the root can exceed.
    let trace = rlm_registry::trace::Trace::read(&path).unwrap();
    let lines = std::fs::read_to_string(&path).unwrap();
    for line in lines.lines() {
        let event: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(event["at_ms"].is_u64(), "{line}");
    }
    let root_turns: u64 = trace
        .root()
        .unwrap()
        .turns
        .iter()
        .map(|t| t.elapsed_ms)
        .sum();
    assert!(trace.summary().wall_ms >= root_turns.saturating_sub(5));
    let tree = &out[out.find("agent 0 ·").unwrap()..];
    let expected_order = [
        "agent 0 · 3 turns · answered: done",
        "  turn 1 · 1 block · 15 tokens",
        "    │ print(rlm_query('Sub-task'))",
        "    → from the child",
        "    agent 0.1 · Sub-task · 1 turn · answered: from the child",
        "      turn 1 · 1 block · 15 tokens",
        "        FINAL: from the child",
        "  turn 2 · 1 block · 15 tokens",
        "    │ print(nope())",
        "    ✗ input:1: attempt to call a nil value (global 'nope')",
        "  turn 3 · 1 block · 15 tokens",
        "    FINAL: done",
    ];
    let mut at = 0;
    for line in expected_order {
        let found = tree[at..]
            .find(line)
            .unwrap_or_else(|| panic!("`{line}` after byte {at} in\n{tree}"));
        at += found + line.len();
    }
    assert!(tree.contains("error in block 1"), "{tree}");
}

#[test]
fn the_turn_rebuild_equals_the_messages_the_loop_sent() {
    let dir = tempfile::tempdir().unwrap();
    let (path, server) = child_and_recovery(dir.path());
    let bodies = bodies(&server);
    // Request order: root 1, child 1, root 2, root 3.
    for (spec, request) in [("0:1", 0), ("0.1:1", 1), ("0:2", 2), ("0:3", 3)] {
        let (out, err, code) = show(&path, &["--turn", spec, "--json"]);
        assert_eq!(code, 0, "{err}");
        let turn: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            turn["messages"].as_array().unwrap(),
            messages(&bodies[request]),
            "turn {spec}"
        );
    }
    // The text view shows the same conversation, the reply and the full output.
    let (out, _, code) = show(&path, &["--turn", "0:3"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("── message 3 · assistant ──\n```lua\nprint(rlm_query('Sub-task'))\n```"),
        "{out}"
    );
    assert!(
        out.contains("── message 4 · user ──\nOutput of block 1:\nfrom the child"),
        "{out}"
    );
    assert!(out.contains("── final answer ──\ndone\n"), "{out}");
    let (out, _, _) = show(&path, &["--turn", "0:1"]);
    assert!(
        out.contains("── started agent 0.1 ──\nSub-task · 1 turn"),
        "{out}"
    );
}

#[test]
fn batched_children_interleaved_in_the_file_are_grouped_by_agent() {
    let server = OpenAiServer::start(
        vec![lua(
            "local a = rlm_query_batched({'task-1', 'task-2', 'task-3'})\nprint(table.concat(a, ','))",
        )],
        Behavior::ByPrompt(vec![
            ("found,".into(), lua("FINAL('all found')")),
            ("looking at".into(), lua("FINAL('found')")),
            (
                "task-".into(),
                lua("print('looking at ' .. 1)").after(Duration::from_millis(30)),
            ),
        ]),
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("batched.jsonl");
    let answer = rlm(&server, 10)
        .trace_file(&path)
        .unwrap()
        .run("Q", None)
        .unwrap();
    assert_eq!(answer.text, "all found");
    let trace = Trace::read(&path).unwrap();
    let root = trace.root().unwrap();
    let children: Vec<&str> = trace
        .children_of_turn(root, 1)
        .map(|c| c.id.as_str())
        .collect();
    assert_eq!(children.len(), 3);
    for child in trace.children_of_turn(root, 1) {
        let turns: Vec<u32> = child.turns.iter().map(|t| t.turn).collect();
        assert_eq!(turns, [1, 2], "agent {}", child.id);
        assert_eq!(child.outcome(), Outcome::Answered("found".into()));
        assert!(child.question.starts_with("task-"));
    }
    let (out, err, code) = show(&path, &[]);
    assert_eq!(code, 0, "{err}");
    let turn_2 = out.find("\n  turn 2 ·").unwrap();
    for id in ["0.1", "0.2", "0.3"] {
        let at = out
            .find(&format!("    agent {id} · task-"))
            .unwrap_or_else(|| panic!("{id} in\n{out}"));
        assert!(at < turn_2, "agent {id} is under turn 1:\n{out}");
    }
    // Every child turn's rebuilt conversation is one the server received.
    let bodies = bodies(&server);
    let sent: Vec<&Vec<Value>> = bodies.iter().map(messages).collect();
    for agent in &trace.agents {
        for turn in &agent.turns {
            let rebuilt = serde_json::to_value(agent.messages_at(turn.turn)).unwrap();
            assert!(
                sent.iter().any(|m| Value::Array(m.to_vec()) == rebuilt),
                "agent {} turn {}",
                agent.id,
                turn.turn
            );
        }
    }
    // --agent shows one child and --json the same tree as data.
    // (Children are numbered as they start, which races; their tasks are in any order.)
    let (out, _, code) = show(&path, &["--agent", "0.2"]);
    assert_eq!(code, 0);
    assert!(out.contains("agent 0.2 · task-"), "{out}");
    assert!(out.contains(" · 2 turns · answered: found"), "{out}");
    assert!(!out.contains("agent 0.1"), "{out}");
    let (out, _, _) = show(&path, &["--json"]);
    let json: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["summary"]["agents"], 4);
    assert_eq!(json["agents"][1]["spawned_in_turn"], 1);
    assert_eq!(json["agents"][1]["parent"], "0");
}

#[test]
fn a_run_that_hit_its_iteration_cap_shows_as_failed() {
    let server = OpenAiServer::start(vec![], lua("print('still looking')"));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cap.jsonl");
    let result = rlm(&server, 3).trace_file(&path).unwrap().run("Q", None);
    assert!(result.is_err());
    let (out, err, code) = show(&path, &[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("Outcome:  failed: iteration limit reached: no final answer after 3 turns"),
        "{out}"
    );
    assert!(
        out.contains("  turn 3 · 1 block · 15 tokens")
            && out.contains("    stopped: iteration limit reached"),
        "{out}"
    );
}

#[test]
fn a_truncated_last_line_is_reported_not_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _server) = child_and_recovery(dir.path());
    let text = std::fs::read_to_string(&path).unwrap();
    let last_start = text.trim_end().rfind('\n').unwrap() + 1;
    let cut = &text[..last_start + 40];
    let lines = cut.lines().count();
    std::fs::write(&path, cut).unwrap();
    let (out, err, code) = show(&path, &[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!(
            "warning: line {lines}: partial last line (the run is still going, or was cut short)"
        )),
        "{out}"
    );
    assert!(out.contains("Outcome:  unfinished"), "{out}");
    assert!(
        out.contains("  turn 2 · 1 block") && !out.contains("  turn 3 ·"),
        "{out}"
    );
    let trace = Trace::read(&path).unwrap();
    assert_eq!(trace.problems.len(), 1);
    assert!(trace.problems[0].partial);
}

#[test]
fn unknown_agents_turns_and_non_traces_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _server) = child_and_recovery(dir.path());
    let (_, err, code) = show(&path, &["--agent", "0.9"]);
    assert_eq!(
        (code, err.as_str()),
        (1, "error: no agent 0.9 in the trace\n")
    );
    let (_, err, code) = show(&path, &["--turn", "0:9"]);
    assert_eq!(
        (code, err.as_str()),
        (1, "error: no turn 9 of agent 0 in the trace\n")
    );
    let (_, err, code) = show(&path, &["--turn", "zero"]);
    assert_eq!(code, 2, "{err}");
    let not_a_trace = dir.path().join("notes.txt");
    std::fs::write(&not_a_trace, "hello\nworld\n").unwrap();
    let (_, err, code) = show(&not_a_trace, &[]);
    assert_eq!(code, 2);
    assert!(err.contains("not an rlm trace"), "{err}");
    let (_, err, code) = show(&dir.path().join("missing.jsonl"), &[]);
    assert_eq!(code, 2);
    assert!(err.contains("cannot read the trace"), "{err}");
}
