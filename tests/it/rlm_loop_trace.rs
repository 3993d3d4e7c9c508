//! The JSONL trace and the live view end to end: one line per turn of every agent, a
//! trace that grows linearly, and the conversation rebuilt from it.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use rlm_registry::Registry;
use rlm_registry::environment::Limits;
use rlm_registry::llm::{LlmClient, LlmConfig};
use rlm_registry::rlm::trajectory::Record;
use rlm_registry::rlm::{Budgets, Context, PromptMode, Rlm, RlmError};
use rlm_registry::trace::{BlockStatus, Trace};
use serde_json::{Value, json};
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
    // only, and turn N does not carry turn 1's reply. (The progress lines, `reply` and
    // `call`, are the documented exception: the `turn` line repeats them.)
    let lines: Vec<&str> = text
        .lines()
        .filter(|line| !line.starts_with(r#"{"event":"reply""#))
        .collect();
    assert_eq!(
        text.lines().count(),
        lines.len() + 6,
        "a reply line per turn"
    );
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
    let kept: usize = lines.iter().map(|l| l.len() + 1).sum();
    assert!(kept < lines[0].len() + 6 * (longest + 1));
    assert!(
        text.len() < lines[0].len() + 12 * (longest + 1),
        "a reply line is shorter than its turn line"
    );

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

#[test]
fn the_start_record_says_what_the_run_was_and_never_the_key() {
    let server = OpenAiServer::start(
        vec![
            lua("print(rlm_query('Sub-task', 'the child context'))"),
            lua("FINAL('from the child')"),
            lua("FINAL('done')"),
        ],
        Behavior::status(500),
    );
    let config = LlmConfig::new(server.base_url(), "test-model")
        .with_api_key("sk-secret-0123456789")
        .with_max_retries(0);
    let limits = Limits {
        time: Duration::from_secs(20),
        memory_bytes: 64 * 1024 * 1024,
        output_bytes: 4096,
        llm_calls: 9,
        recursion_depth: 300,
    };
    let budgets = Budgets::default()
        .with_total_tokens(100_000)
        .with_llm_calls(50)
        .with_wall_time(Duration::from_secs(600));
    let trace = Shared::default();
    let context = "the root context, é and all\n".repeat(100);
    let before = unix_ms();
    Rlm::new(
        Arc::new(LlmClient::new(config).unwrap()),
        Registry::baked().clone(),
        7,
    )
    .max_depth(2)
    .max_consecutive_errors(4)
    .output_bytes(5000)
    .limits(limits)
    .budgets(budgets)
    .prompt_mode(PromptMode::Compact)
    .trace(trace.clone())
    .run("Q", Some(Context::from(context.as_str())))
    .unwrap();
    let after = unix_ms();
    let text = trace.text();
    assert!(!text.contains("sk-secret"), "the key is in the trace");
    let events = events_of(&text);
    let (root, child) = (&events[0], &events[1]);
    assert_eq!(
        (root["agent"].as_str(), child["agent"].as_str()),
        (Some("0"), Some("0.1"))
    );

    let expected_limits = json!({
        "max_iterations": 7, "max_depth": 2, "max_consecutive_errors": 4, "output_bytes": 5000,
        "compact_at": 0.85,
        "block": {"time_ms": 20_000, "memory_bytes": 64 * 1024 * 1024, "output_bytes": 4096,
                  "llm_calls": 9, "recursion_depth": 300},
        "budgets": {"total_tokens": 100_000, "llm_calls": 50, "wall_time_ms": 600_000},
    });
    for start in [root, child] {
        assert_eq!(start["model"], "test-model");
        assert_eq!(start["base_url"], server.base_url());
        assert_eq!(start["version"], env!("CARGO_PKG_VERSION"));
        assert_eq!(start["prompt_mode"], "compact");
        assert_eq!(start["limits"], expected_limits);
        assert_eq!(
            start["started_unix_ms"], root["started_unix_ms"],
            "one run, one start"
        );
        assert_eq!(start["batch"], Value::Null);
    }
    let started = root["started_unix_ms"].as_u64().unwrap();
    assert!(
        (before..=after).contains(&started),
        "{before} ≤ {started} ≤ {after}"
    );
    assert_eq!(
        root["context"],
        json!({"sha256": sha256_hex(context.as_bytes()), "bytes": context.len(), "chunks": null})
    );
    assert_eq!(
        child["context"]["sha256"],
        sha256_hex(b"the child context"),
        "a child's own context"
    );
    // A run without a context records none.
    let server = OpenAiServer::always(lua("FINAL('x')"));
    let trace = Shared::default();
    rlm(&server, 2).trace(trace.clone()).run("Q", None).unwrap();
    assert_eq!(trace.events()[0]["context"], Value::Null);
}

/// Milliseconds since the Unix epoch, now.
fn unix_ms() -> u64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    u64::try_from(now.unwrap().as_millis()).unwrap()
}

#[test]
fn what_the_writer_writes_the_reader_reads_back_equal() {
    let server = OpenAiServer::start(
        vec![
            lua("print(rlm_query('Sub-task'))"),
            lua("FINAL('from the child')"),
            Behavior::reply("```lua\nprint(nope())\n```\n```lua\nprint('skipped')\n```"),
            lua("FINAL('done')"),
        ],
        Behavior::status(500),
    );
    let trace = Shared::default();
    rlm(&server, 10)
        .trace(trace.clone())
        .run("Q", Some(Context::from("ctx")))
        .unwrap();
    let text = trace.text();
    let read = Trace::parse(&text).unwrap();
    assert!(read.problems.is_empty());
    let mut turns_seen = 0;
    for line in text.lines() {
        let record: Record = serde_json::from_str(line).unwrap();
        // One set of types: a record written again is the line, byte for byte.
        assert_eq!(serde_json::to_string(&record).unwrap(), line);
        match record {
            Record::Start(start) => {
                let agent = read.agent(&start.agent).unwrap();
                assert_eq!(agent.start(), start);
            }
            Record::Turn(turn) => {
                turns_seen += 1;
                let agent = read.agent(&turn.agent).unwrap();
                assert_eq!(agent.turn(turn.turn), Some(&turn));
            }
            Record::Reply(_) | Record::Call(_) => {}
            Record::Resume(_) | Record::Compaction(_) | Record::Unknown => {
                panic!("this run wrote no such event: {line}")
            }
        }
    }
    assert_eq!(turns_seen, 4);
    let error_turn = read.root().unwrap().turn(2).unwrap();
    let statuses: Vec<BlockStatus> = error_turn.outputs.iter().map(|b| b.status).collect();
    assert_eq!(statuses, [BlockStatus::Error, BlockStatus::NotRun]);
}
