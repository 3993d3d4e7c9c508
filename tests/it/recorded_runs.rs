//! Recorded runs as a regression suite: the traces in `tests/fixtures/runs/` were written
//! by `rlm ask` against the scripted server, one per kind of run (a plain run, sub-calls,
//! a child agent, a `parallel_map` round, an error the model recovered from), and each
//! must replay identical with this commit's registry and sandbox. A change of behaviour
//! (a function's output, an error's words, the loop's handling of a block) shows as a
//! failing replay here, with the place and the two sides.
//!
//! When the change is intended, the traces are written again from the scenarios below:
//! `RLM_BLESS=1 cargo test --all-features --test it -- recorded_runs::` (docs/traces.md
//! says so). What replay does not read is made the same on every recording (times, the
//! scripted server's port), so a new recording differs from the old only where the run
//! did.

use std::path::{Path, PathBuf};

use rlm_registry::rlm::trajectory::Record;

use crate::support::cli::{llm_args, rlm_command, stderr, stdout};
use crate::support::openai_server::{Behavior, OpenAiServer};
use crate::support::rlm_loop::lua;

/// Where the recorded runs are, from the crate's directory.
const RUNS: &str = "tests/fixtures/runs";

/// One recorded run: its name (the trace is `NAME.jsonl`, its context, if any,
/// `NAME.context.txt`), the question, the context, the script of the server in the order
/// it gets the requests, and the answer `rlm ask` prints.
struct Scenario {
    name: &'static str,
    question: &'static str,
    context: Option<&'static str>,
    script: Vec<Behavior>,
    answer: &'static str,
}

fn scenarios() -> Vec<Scenario> {
    let echo = || Behavior::echo(std::time::Duration::ZERO);
    vec![
        Scenario {
            name: "final",
            question: "How many lines?",
            context: Some("alpha\nbeta\ngamma\n"),
            script: vec![
                lua("n = line_count(context)\nprint(n)"),
                lua("FINAL(n .. ' lines')"),
            ],
            answer: "3 lines",
        },
        Scenario {
            name: "llm_query",
            question: "Name a colour and a fruit.",
            context: None,
            script: vec![
                lua(
                    "colour = llm_query('Name a colour')\nfruit = llm_query('Name a fruit')\nprint(colour, fruit)",
                ),
                Behavior::reply("blue"),
                Behavior::reply("plum"),
                lua("FINAL(colour .. ' ' .. fruit)"),
            ],
            answer: "blue plum",
        },
        Scenario {
            name: "rlm_query",
            question: "Count to three, through a sub-agent.",
            context: None,
            script: vec![
                lua("print(rlm_query('Count to 3'))"),
                lua("print(llm_query('Say hi'))"),
                Behavior::reply("hi"),
                lua("FINAL('1 2 3')"),
                lua("FINAL('the child counted')"),
            ],
            answer: "the child counted",
        },
        Scenario {
            name: "parallel_map",
            question: "Ask about each letter.",
            context: None,
            // The three calls of the round arrive in any order: echoed answers depend on
            // the prompt only, so the recording does not depend on that order.
            script: vec![
                lua(
                    "local r = parallel_map({'a', 'b', 'c'}, function(x) return llm_query('Letter ' .. x) end)\nprint(table.concat(r, ','))",
                ),
                echo(),
                echo(),
                echo(),
                lua("FINAL('three letters')"),
            ],
            answer: "three letters",
        },
        Scenario {
            name: "error_recovered",
            question: "How many words?",
            context: Some("one two three four\n"),
            script: vec![
                lua("print(word_counter(context))"),
                lua("words = word_count(context)\nprint(words)"),
                lua("FINAL(words .. ' words')"),
            ],
            answer: "4 words",
        },
    ]
}

fn runs_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(RUNS)
}

/// `rlm replay TRACE`, with its context when the run had one.
fn replay(trace: &Path) -> std::process::Output {
    let mut command = rlm_command();
    command.arg("replay").arg(trace);
    let context = trace.with_extension("context.txt");
    if context.exists() {
        command.arg("--context").arg(context);
    }
    command.output().expect("rlm runs")
}

/// The trace with what replay does not read made the same on every recording: the
/// times, and the scripted server's port in the base URL.
fn normalised(trace: &str) -> String {
    let mut text = String::new();
    for line in trace.lines() {
        let mut record: Record = serde_json::from_str(line).expect("a record");
        match &mut record {
            Record::Start(start) => {
                start.at_ms = Some(0);
                start.setup.started_unix_ms = Some(0);
                start.setup.base_url = Some("http://127.0.0.1:0/v1".to_string());
                // Where the context was on the recording machine.
                start.setup.context_paths = None;
            }
            Record::Turn(turn) => {
                turn.at_ms = Some(0);
                turn.elapsed_ms = 0;
                turn.llm_ms = 0;
                turn.outputs
                    .iter_mut()
                    .for_each(|block| block.elapsed_ms = 0);
            }
            Record::Compaction(compaction) => {
                compaction.at_ms = Some(0);
                compaction.llm_ms = 0;
            }
            _ => {}
        }
        text.push_str(&serde_json::to_string(&record).expect("serialises"));
        text.push('\n');
    }
    text
}

/// `rlm ask` of `scenario` against the scripted server, in `dir`: the normalised trace.
fn record(scenario: &Scenario, dir: &Path) -> String {
    let server = OpenAiServer::start(scenario.script.clone(), Behavior::status(500));
    let trace = dir.join(format!("{}.jsonl", scenario.name));
    let mut command = rlm_command();
    command
        .args(["ask", scenario.question, "-q", "--trace"])
        .arg(&trace)
        .args(llm_args(&server.base_url(), "test-model"));
    if let Some(context) = scenario.context {
        let path = dir.join(format!("{}.context.txt", scenario.name));
        std::fs::write(&path, context).unwrap();
        command.arg("--context").arg(path);
    }
    let out = command.output().expect("rlm runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}: {}",
        scenario.name,
        stderr(&out)
    );
    assert_eq!(
        stdout(&out),
        format!("{}\n", scenario.answer),
        "{}",
        scenario.name
    );
    assert_eq!(
        server.request_count(),
        scenario.script.len(),
        "{}: every scripted reply was asked for, and no more",
        scenario.name
    );
    normalised(&std::fs::read_to_string(&trace).unwrap())
}

/// `scenario` recorded into `dir`: the trace's path, once it replays identical there
/// (a deterministic run, worth keeping).
fn recorded_and_replayed(scenario: &Scenario, dir: &Path) -> PathBuf {
    let text = record(scenario, dir);
    assert!(
        !text.contains(&*dir.to_string_lossy()),
        "{}: the trace names no path of the machine",
        scenario.name
    );
    let trace = dir.join(format!("{}.jsonl", scenario.name));
    std::fs::write(&trace, &text).unwrap();
    let out = replay(&trace);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}: {}{}",
        scenario.name,
        stdout(&out),
        stderr(&out)
    );
    trace
}

/// Each scenario, recorded now, gives a run that replays identical.
#[test]
fn each_scenario_records_a_run_that_replays_identical() {
    let dir = tempfile::tempdir().unwrap();
    for scenario in scenarios() {
        recorded_and_replayed(&scenario, dir.path());
    }
}

/// Every checked-in run replays identical with this commit's code. With `RLM_BLESS=1`
/// the scenarios' runs are recorded again first, replacing the checked-in ones.
#[test]
fn every_recorded_run_replays_identical() {
    if std::env::var_os("RLM_BLESS").is_some_and(|v| v == "1") {
        let dir = tempfile::tempdir().unwrap();
        for scenario in scenarios() {
            let trace = recorded_and_replayed(&scenario, dir.path());
            std::fs::copy(&trace, runs_dir().join(format!("{}.jsonl", scenario.name))).unwrap();
            let context = runs_dir().join(format!("{}.context.txt", scenario.name));
            match scenario.context {
                Some(content) => std::fs::write(&context, content).unwrap(),
                None => {
                    let _ = std::fs::remove_file(&context);
                }
            }
        }
    }
    let mut traces: Vec<PathBuf> = std::fs::read_dir(runs_dir())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    traces.sort();
    let names: Vec<String> = traces
        .iter()
        .map(|path| path.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    // The folder holds at least the scenarios' runs: an emptied folder does not pass.
    for scenario in scenarios() {
        assert!(
            names.iter().any(|name| name == scenario.name),
            "{RUNS}/{}.jsonl is missing (RLM_BLESS=1 writes it)",
            scenario.name
        );
    }
    for trace in &traces {
        let out = replay(trace);
        assert_eq!(
            (out.status.code(), stdout(&out).starts_with("identical (")),
            (Some(0), true),
            "{} no longer replays identical; if the change is intended, write the runs \
             again with RLM_BLESS=1 cargo test --all-features --test it -- recorded_runs::\n{}{}",
            trace.display(),
            stdout(&out),
            stderr(&out)
        );
    }
}

/// The suite catches a change: a recorded run whose block printed otherwise than this
/// commit's code prints is a failing replay, naming the block.
#[test]
fn a_run_recorded_with_another_behaviour_fails_its_replay() {
    let dir = tempfile::tempdir().unwrap();
    let recorded = std::fs::read_to_string(runs_dir().join("final.jsonl")).unwrap();
    // As if `line_count` had counted 4 when the run was recorded.
    let other = recorded.replace(r#""output":"3\n""#, r#""output":"4\n""#);
    assert_ne!(other, recorded, "the run printed its count");
    let trace = dir.path().join("final.jsonl");
    std::fs::write(&trace, other).unwrap();
    std::fs::copy(
        runs_dir().join("final.context.txt"),
        dir.path().join("final.context.txt"),
    )
    .unwrap();
    let out = replay(&trace);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stdout(&out)
            .starts_with("diverged at agent 0, turn 1, block 1: the block's output differs\n"),
        "{}",
        stdout(&out)
    );
}
