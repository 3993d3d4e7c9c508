//! `rlm replay` and [`Replay`]: a run recorded against the scripted server is run again
//! with no server; identical when nothing changed, the first divergence shown when a
//! registry function behaves otherwise, the context checked, bad traces refused.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;

use rlm_registry::Registry;
use rlm_registry::rlm::trajectory::Record;
use rlm_registry::rlm::{Context, Divergence, Replay, ReplayError, Rlm};
use serde_json::Value;

use crate::support::cli::{llm_args, rlm_command, stderr, stdout};
use crate::support::openai_server::{Behavior, OpenAiServer};
use crate::support::rlm_loop::{Shared, client, lua, rlm};

/// A run with a root, a child and `llm_query` calls in both, in the order the server
/// gets the requests.
fn script() -> Vec<Behavior> {
    vec![
        lua("n = line_count(context)\nprint(n)\nprint(llm_query('Name a colour'))"),
        Behavior::reply("blue"),
        lua("print(rlm_query('Count to ' .. n))"),
        lua("print(llm_query('Say hi'))"),
        Behavior::reply("hi"),
        lua("FINAL('1 2 3')"),
        lua("FINAL(n .. ' lines')"),
    ]
}

/// A directory holding `line_count` as it was, overridden to count 99 lines.
const WRONG_LINE_COUNT: &str = r#"--- Counts how many lines a text has, wrongly.
---
--- ```lua
--- line_count("a\nb\n") --> 99
--- ```
---@param text string The text
---@return integer count Always 99
function line_count(text)
  return 99
end
"#;

/// The recorded run: its directory (trace, context), and the server, still listening.
struct Recorded {
    dir: tempfile::TempDir,
    server: OpenAiServer,
}

impl Recorded {
    fn new() -> Recorded {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("context.txt"), "a\nb\nc\n").unwrap();
        let server = OpenAiServer::start(script(), Behavior::status(500));
        let out = rlm_command()
            .args(["ask", "How many lines?", "-q", "--trace"])
            .arg(dir.path().join("run.jsonl"))
            .arg("--context")
            .arg(dir.path().join("context.txt"))
            .args(llm_args(&server.base_url(), "test-model"))
            .output()
            .expect("rlm runs");
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(stdout(&out), "3 lines\n");
        assert_eq!(server.request_count(), 7);
        Recorded { dir, server }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn trace(&self) -> PathBuf {
        self.path("run.jsonl")
    }

    /// `rlm replay` of the trace with `args`; the server's address is in the environment,
    /// so a replay that called a model would reach it.
    fn replay(&self, args: &[&str]) -> Output {
        let out = rlm_command()
            .arg("replay")
            .arg(self.trace())
            .args(args)
            .env("RLM_BASE_URL", self.server.base_url())
            .output()
            .expect("rlm runs");
        assert_eq!(self.server.request_count(), 7, "a replay sends nothing");
        out
    }

    fn context_arg(&self) -> String {
        self.path("context.txt").display().to_string()
    }
}

fn events(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[test]
fn the_trace_holds_every_sub_call_prompt_and_answer_in_order() {
    let run = Recorded::new();
    let events = events(&run.trace());
    let calls = |agent: &str, turn: u64| -> Vec<(String, String)> {
        let line = events
            .iter()
            .find(|e| e["event"] == "turn" && e["agent"] == agent && e["turn"] == turn)
            .unwrap();
        line["outputs"][0]["sub_calls"]
            .as_array()
            .map(|calls| {
                calls
                    .iter()
                    .map(|c| {
                        let prompt = c["messages"][0]["content"].as_str().unwrap();
                        (
                            prompt.to_string(),
                            c["answer"].as_str().unwrap().to_string(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(
        calls("0", 1),
        [("Name a colour".to_string(), "blue".to_string())]
    );
    assert_eq!(calls("0.1", 1), [("Say hi".to_string(), "hi".to_string())]);
    assert!(
        calls("0", 2).is_empty(),
        "the child's calls are the child's"
    );
    assert!(calls("0.1", 2).is_empty());
}

#[test]
fn an_untouched_run_replays_identical_without_the_server() {
    let run = Recorded::new();
    let out = run.replay(&["--context", &run.context_arg()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert_eq!(
        stdout(&out),
        "identical (2 agents, 5 turns, 5 blocks, 2 sub-calls)\n"
    );
}

#[test]
fn a_registry_function_changed_by_a_path_dir_is_the_divergence_shown() {
    let run = Recorded::new();
    let registry = run.path("registry");
    std::fs::create_dir(&registry).unwrap();
    std::fs::write(registry.join("line_count.lua"), WRONG_LINE_COUNT).unwrap();
    let out = run.replay(&[
        "--context",
        &run.context_arg(),
        "--path",
        registry.to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let shown = stdout(&out);
    assert!(
        shown.starts_with("diverged at agent 0, turn 1, block 1: the block's output differs\n"),
        "{shown}"
    );
    let lines: Vec<&str> = shown.lines().skip(1).collect();
    assert_eq!(lines[0], "recorded   replayed");
    assert_eq!(lines[1], "3        | 99", "{shown}");
    assert_eq!(lines[2], "blue       blue", "{shown}");
}

#[test]
fn a_context_other_than_the_recorded_one_is_refused_unless_forced() {
    let run = Recorded::new();
    let other = run.path("other.txt");
    std::fs::write(&other, "a\n").unwrap();
    let other = other.to_str().unwrap();

    let out = run.replay(&["--context", other]);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("error: the context is not the recorded one (recorded sha256 "),
        "{}",
        stderr(&out)
    );
    assert!(stderr(&out).contains("--force"));
    let out = run.replay(&[]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "no context given: {}",
        stdout(&out)
    );
    assert!(stderr(&out).contains(", given none)"), "{}", stderr(&out));

    let out = run.replay(&["--context", other, "--force"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stdout(&out).starts_with("diverged at agent 0, turn 1, block 1"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn a_truncated_or_foreign_file_is_a_clear_error() {
    let run = Recorded::new();
    let text = std::fs::read_to_string(run.trace()).unwrap();
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "cut.jsonl",
            text[..text.len() - 20].to_string(),
            "is cut short",
        ),
        (
            "unfinished.jsonl",
            text.lines().take(3).map(|l| format!("{l}\n")).collect(),
            "the trace ends before the run did",
        ),
        (
            "other.jsonl",
            "{\"type\": \"metadata\"}\n".to_string(),
            "line 1 is not a trace record",
        ),
        (
            "Cargo.toml",
            "[package]\nname = \"x\"\n".to_string(),
            "line 1 is not a trace record",
        ),
        (
            "empty.jsonl",
            String::new(),
            "no start line of the root agent",
        ),
    ];
    for (name, content, expected) in cases {
        let path = run.path(name);
        std::fs::write(&path, content).unwrap();
        let out = rlm_command()
            .args(["replay", path.to_str().unwrap()])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{name}: {}", stdout(&out));
        assert!(
            stderr(&out).starts_with("error: "),
            "{name}: {}",
            stderr(&out)
        );
        assert!(stderr(&out).contains(expected), "{name}: {}", stderr(&out));
    }
    let out = rlm_command()
        .args(["replay", run.path("missing.jsonl").to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("cannot read"), "{}", stderr(&out));
}

/// A run through the library: one block counting with `count`, then asking about it.
fn recorded_with(code: &str, replies: Vec<Behavior>) -> (String, OpenAiServer) {
    let mut script = vec![lua(code)];
    script.extend(replies);
    script.push(lua("FINAL('done')"));
    let server = OpenAiServer::start(script, Behavior::status(500));
    let trace = Shared::default();
    Rlm::new(Arc::new(client(&server)), count_registry(1), 5)
        .trace(trace.clone())
        .run("Q", None)
        .unwrap();
    (trace.text(), server)
}

fn count_registry(n: u32) -> Registry {
    let source =
        format!("--- Counts.\n---@return integer count The count\nfunction count() return {n} end");
    Registry::from_map([("count", source.as_str())]).unwrap()
}

#[test]
fn a_sub_call_with_another_prompt_or_one_more_is_a_divergence_not_a_crash() {
    let (trace, server) = recorded_with(
        "for i = 1, count() do print(llm_query('Question ' .. i * count())) end",
        vec![Behavior::reply("answer")],
    );
    let requests = server.request_count();
    let identical = Replay::from_jsonl(&trace)
        .unwrap()
        .registry(count_registry(1));
    assert!(identical.run().unwrap().is_identical());

    let report = Replay::from_jsonl(&trace)
        .unwrap()
        .registry(count_registry(2))
        .run()
        .unwrap();
    let divergence = report.divergence.unwrap();
    assert_eq!((divergence.turn, divergence.block), (Some(1), Some(1)));
    assert_eq!(divergence.what, "sub-call 1 was sent another prompt");
    assert_eq!(
        (divergence.recorded.as_str(), divergence.replayed.as_str()),
        ("Question 1", "Question 2")
    );
    let shown = divergence.to_string();
    assert!(shown.contains("Question 1 | Question 2"), "{shown}");
    assert_eq!(server.request_count(), requests, "the replays sent nothing");
}

#[test]
fn more_sub_calls_than_recorded_are_a_divergence() {
    let (trace, _server) = recorded_with(
        "for i = 1, count() do print(llm_query('Question')) end",
        vec![Behavior::reply("answer")],
    );
    let report = Replay::from_jsonl(&trace)
        .unwrap()
        .registry(count_registry(3))
        .run()
        .unwrap();
    let divergence = report.divergence.unwrap();
    assert_eq!(
        divergence.what,
        "the replayed block made a sub-call the record does not have (call 2)"
    );
    assert_eq!(divergence.replayed, "Question");
}

#[test]
fn a_batch_is_recorded_and_replayed_in_its_order() {
    let (trace, _server) = recorded_with(
        "print(table.concat(llm_query_batched({'first', 'second', 'third'}), ','))",
        vec![Behavior::echo(std::time::Duration::ZERO); 3],
    );
    let turn = trace
        .lines()
        .map(|line| serde_json::from_str::<Record>(line).unwrap())
        .find_map(|record| match record {
            Record::Turn(turn) if turn.turn == 1 => Some(turn),
            _ => None,
        })
        .unwrap();
    let prompts: Vec<String> = turn.outputs[0]
        .sub_calls
        .iter()
        .map(|c| c.prompt())
        .collect();
    assert_eq!(prompts, ["first", "second", "third"]);
    assert_eq!(
        turn.outputs[0].output,
        "echo: first,echo: second,echo: third\n"
    );
    let replay = Replay::from_jsonl(&trace)
        .unwrap()
        .registry(count_registry(1));
    assert!(replay.run().unwrap().is_identical());
}

#[test]
fn sub_calls_of_parallel_map_are_recorded_in_round_order_and_replay_identical() {
    // Answers that come back out of order: the first prompt's is the slowest.
    let delays = [30, 10, 0, 30, 10, 0].map(std::time::Duration::from_millis);
    let (trace, _server) = recorded_with(
        "local r = parallel_map({'a', 'b', 'c'}, function(x) return llm_query(llm_query(x)) end, {concurrency = 3})
print(table.concat(r, ','))",
        delays.into_iter().map(Behavior::echo).collect(),
    );
    let turn = trace
        .lines()
        .map(|line| serde_json::from_str::<Record>(line).unwrap())
        .find_map(|record| match record {
            Record::Turn(turn) if turn.turn == 1 => Some(turn),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        turn.outputs[0].output,
        "echo: echo: a,echo: echo: b,echo: echo: c\n"
    );
    let prompts: Vec<String> = turn.outputs[0]
        .sub_calls
        .iter()
        .map(|c| c.prompt())
        .collect();
    assert_eq!(
        prompts,
        ["a", "b", "c", "echo: a", "echo: b", "echo: c"],
        "two rounds, each in the order of the list"
    );
    let replay = Replay::from_jsonl(&trace)
        .unwrap()
        .registry(count_registry(1));
    assert!(replay.run().unwrap().is_identical());
}

#[test]
fn a_context_is_checked_by_the_library_too() {
    let server = OpenAiServer::start(vec![lua("FINAL(#context)")], Behavior::status(500));
    let trace = Shared::default();
    rlm(&server, 5)
        .trace(trace.clone())
        .run("Q", Some(Context::from("abc")))
        .unwrap();
    let replay = Replay::from_jsonl(&trace.text()).unwrap();
    assert!(matches!(
        replay.clone().context(Context::from("abd")).run(),
        Err(ReplayError::ContextMismatch { .. })
    ));
    assert!(
        replay
            .context(Context::from("abc"))
            .run()
            .unwrap()
            .is_identical()
    );
}

#[test]
fn batched_children_replay_from_their_own_records_and_a_changed_question_is_shown() {
    let server = OpenAiServer::always(Behavior::ByPrompt(vec![
        ("Task 1".to_string(), lua("FINAL('one')")),
        ("Task B".to_string(), lua("FINAL('bee')")),
        ("one,bee".to_string(), lua("FINAL('done')")),
        (
            String::new(),
            lua("print(table.concat(rlm_query_batched({'Task ' .. count(), 'Task B'}), ','))"),
        ),
    ]));
    let trace = Shared::default();
    let answer = Rlm::new(Arc::new(client(&server)), count_registry(1), 5)
        .trace(trace.clone())
        .run("Q", None)
        .unwrap();
    assert_eq!(answer.text, "done");
    let requests = server.request_count();

    let report = Replay::from_jsonl(&trace.text())
        .unwrap()
        .registry(count_registry(1))
        .run()
        .unwrap();
    assert!(report.is_identical(), "{report}");
    assert_eq!((report.agents, report.turns), (3, 4));

    let report = Replay::from_jsonl(&trace.text())
        .unwrap()
        .registry(count_registry(2))
        .run()
        .unwrap();
    let divergence = report.divergence.unwrap();
    assert_eq!((divergence.agent.as_str(), divergence.turn), ("0.1", None));
    assert_eq!(divergence.what, "the agent was asked another question");
    assert_eq!(
        (divergence.recorded.as_str(), divergence.replayed.as_str()),
        ("Task 1", "Task 2")
    );
    assert_eq!(server.request_count(), requests, "the replays sent nothing");
}

#[test]
fn a_registry_that_does_not_load_is_an_error_not_a_divergence() {
    let run = Recorded::new();
    let bad = run.path("bad.lua");
    std::fs::write(&bad, "function broken(\n").unwrap();
    let out = run.replay(&[
        "--context",
        &run.context_arg(),
        "--path",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(stdout(&out).is_empty());
    assert!(!stderr(&out).is_empty());
}

// Every divergence the comparison can report, each made by a real recorded run that is
// then replayed with another registry or a trace edited as a later version or another
// setup would see it. Each test names the agent, turn and block the divergence is
// reported at and its words, so a branch of the comparison that went missing or
// reported another place fails here.

/// A run through the library with `registry`, `max_iterations` and `script` (the
/// replies in the order the server gets the requests): its trace.
fn record(registry: Registry, max_iterations: u32, script: Vec<Behavior>) -> String {
    let server = OpenAiServer::start(script, Behavior::status(500));
    let trace = Shared::default();
    // The run may end with an error (an iteration cap, say); its trace is what matters.
    let _ = Rlm::new(Arc::new(client(&server)), registry, max_iterations)
        .trace(trace.clone())
        .run("Q", None);
    trace.text()
}

/// `registry`'s `count` raising `message`.
fn failing_count(message: &str) -> Registry {
    let source = format!(
        "--- Counts.\n---@return integer count The count\nfunction count() error('{message}') end"
    );
    Registry::from_map([("count", source.as_str())]).unwrap()
}

/// The first divergence of `trace` replayed with `registry`; the test fails if none.
fn diverged(trace: &str, registry: Registry) -> Divergence {
    let report = Replay::from_jsonl(trace)
        .unwrap()
        .registry(registry)
        .run()
        .unwrap();
    match report.divergence {
        Some(divergence) => divergence,
        None => panic!("the replay was identical: {report}"),
    }
}

/// `trace` with `edit` applied to each line, as JSON.
fn edited(trace: &str, mut edit: impl FnMut(&mut Value)) -> String {
    trace
        .lines()
        .map(|line| {
            let mut record: Value = serde_json::from_str(line).unwrap();
            edit(&mut record);
            format!("{record}\n")
        })
        .collect()
}

/// Where a divergence is and what it says.
fn place(divergence: &Divergence) -> (&str, Option<u32>, Option<usize>, &str) {
    (
        divergence.agent.as_str(),
        divergence.turn,
        divergence.block,
        divergence.what.as_str(),
    )
}

#[test]
fn a_block_that_made_fewer_sub_calls_than_recorded_is_a_divergence() {
    let trace = record(
        count_registry(2),
        5,
        vec![
            lua("for i = 1, count() do print(llm_query('Question')) end"),
            Behavior::reply("first"),
            Behavior::reply("second"),
            lua("FINAL('done')"),
        ],
    );
    assert!(
        Replay::from_jsonl(&trace)
            .unwrap()
            .registry(count_registry(2))
            .run()
            .unwrap()
            .is_identical()
    );
    let divergence = diverged(&trace, count_registry(1));
    assert_eq!(
        place(&divergence),
        (
            "0",
            Some(1),
            Some(1),
            "the replayed block did not make sub-call 2"
        )
    );
    assert_eq!(
        (divergence.recorded.as_str(), divergence.replayed.as_str()),
        ("Question", "")
    );
}

#[test]
fn a_block_that_ended_otherwise_is_a_divergence_before_its_output() {
    let trace = record(
        count_registry(1),
        5,
        vec![lua("print(count())"), lua("FINAL('done')")],
    );
    let divergence = diverged(&trace, failing_count("count is broken"));
    assert_eq!(
        place(&divergence),
        (
            "0",
            Some(1),
            Some(1),
            "the block ended otherwise: ok in the record, error in the replay"
        )
    );
    assert_eq!(divergence.recorded, "1\n");
    // A failed block is shown as its output, then its status and error.
    assert!(
        divergence.replayed.starts_with("[error] ")
            && divergence.replayed.contains("count is broken"),
        "{}",
        divergence.replayed
    );
}

#[test]
fn a_block_that_failed_with_another_error_is_a_divergence_of_its_output() {
    let trace = record(
        failing_count("broken 1"),
        5,
        vec![lua("print('before')\ncount()"), lua("FINAL('done')")],
    );
    let divergence = diverged(&trace, failing_count("broken 2"));
    // The status and the printed output are the same: only the error differs.
    assert_eq!(
        place(&divergence),
        ("0", Some(1), Some(1), "the block's output differs")
    );
    assert!(
        divergence.recorded.starts_with("before\n[error] ")
            && divergence.recorded.contains("broken 1"),
        "{}",
        divergence.recorded
    );
    assert!(
        divergence.replayed.starts_with("before\n[error] ")
            && divergence.replayed.contains("broken 2"),
        "{}",
        divergence.replayed
    );
}

#[test]
fn another_final_answer_is_a_divergence_of_the_turn_not_of_a_block() {
    let trace = record(count_registry(1), 5, vec![lua("FINAL('n = ' .. count())")]);
    let divergence = diverged(&trace, count_registry(2));
    assert_eq!(
        place(&divergence),
        ("0", Some(1), None, "the final answer differs")
    );
    assert_eq!(
        (divergence.recorded.as_str(), divergence.replayed.as_str()),
        ("FINAL: n = 1", "FINAL: n = 2")
    );
}

/// A root that starts a child only when `count()` is 1, and whose output does not
/// depend on it: the child's failure (a replayed child off the record) is caught.
fn maybe_a_child() -> Vec<Behavior> {
    vec![
        lua("if count() == 1 then pcall(rlm_query, 'Sub-task') end\nprint('after')"),
        lua("FINAL('from the child')"),
        lua("FINAL('done')"),
    ]
}

#[test]
fn a_recorded_agent_the_replay_did_not_start_is_a_divergence() {
    let trace = record(count_registry(1), 5, maybe_a_child());
    assert!(
        trace.contains(r#""agent":"0.1""#),
        "the record has the child: {trace}"
    );
    let divergence = diverged(&trace, count_registry(2));
    assert_eq!(
        place(&divergence),
        (
            "0.1",
            None,
            None,
            "the replayed run did not start this agent"
        )
    );
    assert_eq!(
        (divergence.recorded.as_str(), divergence.replayed.as_str()),
        ("Sub-task", "")
    );
}

#[test]
fn an_agent_the_record_does_not_have_is_a_divergence() {
    // Without the child: the script's second reply is the root's second turn.
    let mut script = maybe_a_child();
    script.remove(1);
    let trace = record(count_registry(2), 5, script);
    assert!(!trace.contains(r#""agent":"0.1""#), "{trace}");
    let divergence = diverged(&trace, count_registry(1));
    assert_eq!(
        place(&divergence),
        (
            "0.1",
            None,
            None,
            "the replayed run started an agent the record does not have"
        )
    );
    assert_eq!(
        (divergence.recorded.as_str(), divergence.replayed.as_str()),
        ("", "Sub-task")
    );
}

/// A root that never answers: three turns printing `count()`, then the iteration cap.
fn three_turns_without_an_answer() -> String {
    let trace = record(count_registry(1), 3, vec![lua("print(count())"); 3]);
    let last = trace.lines().last().unwrap();
    assert!(
        last.contains("iteration limit reached"),
        "the run ends at its cap: {last}"
    );
    trace
}

/// `trace` with the iteration cap its `start` lines record set to `max_iterations`.
fn with_max_iterations(trace: &str, max_iterations: u32) -> String {
    edited(trace, |record| {
        if record["event"] == "start" {
            record["limits"]["max_iterations"] = max_iterations.into();
        }
    })
}

#[test]
fn an_agent_that_ended_before_a_recorded_turn_is_a_divergence() {
    let trace = three_turns_without_an_answer();
    // Replayed with a lower cap, the agent stops after turn 2, which otherwise matches.
    let divergence = diverged(&with_max_iterations(&trace, 2), count_registry(1));
    assert_eq!(
        place(&divergence),
        (
            "0",
            Some(3),
            None,
            "the replayed agent ended before this turn"
        )
    );
    assert_eq!(divergence.recorded, "```lua\nprint(count())\n```");
    assert_eq!(
        divergence.replayed,
        "error: iteration limit reached: no final answer after 2 turns"
    );
}

#[test]
fn an_agent_that_went_on_past_its_recorded_end_is_a_divergence() {
    let trace = three_turns_without_an_answer();
    // Replayed with a higher cap, the agent asks for a fourth reply the record lacks.
    let divergence = diverged(&with_max_iterations(&trace, 4), count_registry(1));
    assert_eq!(
        place(&divergence),
        (
            "0",
            Some(4),
            None,
            "the replayed agent went on past the recorded run"
        )
    );
    assert_eq!(divergence.recorded, "");
    assert!(
        divergence.replayed.starts_with("error: ")
            && divergence.replayed.contains("is not on the record"),
        "{}",
        divergence.replayed
    );
}

#[test]
fn a_recorded_block_the_replayed_turn_did_not_run_is_a_divergence() {
    let trace = record(
        count_registry(1),
        5,
        vec![lua("print(count())"), lua("print('two')\nFINAL('done')")],
    );
    // Replayed under a budget of one model call, the second turn's call is refused, so
    // that turn runs no block.
    let tight = edited(&trace, |record| {
        if record["event"] == "start" {
            record["limits"]["budgets"]["llm_calls"] = 1.into();
        }
    });
    let divergence = diverged(&tight, count_registry(1));
    assert_eq!(
        place(&divergence),
        (
            "0",
            Some(2),
            Some(1),
            "the replayed turn did not run this block"
        )
    );
    assert_eq!(
        (divergence.recorded.as_str(), divergence.replayed.as_str()),
        ("two\n", "")
    );
}

#[test]
fn a_block_the_recorded_turn_did_not_run_is_a_divergence() {
    let trace = record(
        count_registry(1),
        5,
        vec![
            Behavior::reply("```lua\nprint(count())\n```\n\n```lua\nprint('second')\n```"),
            lua("FINAL('done')"),
        ],
    );
    // The record as a version that saw only the first of the reply's blocks wrote it.
    let first_only = edited(&trace, |record| {
        if record["event"] == "turn" && record["turn"] == 1 {
            record["outputs"].as_array_mut().unwrap().truncate(1);
            record["code_blocks"].as_array_mut().unwrap().truncate(1);
        }
    });
    let divergence = diverged(&first_only, count_registry(1));
    assert_eq!(
        place(&divergence),
        (
            "0",
            Some(1),
            Some(2),
            "the replayed turn ran a block the recorded one did not"
        )
    );
    assert_eq!(
        (divergence.recorded.as_str(), divergence.replayed.as_str()),
        ("", "second\n")
    );
}
