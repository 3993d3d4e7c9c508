//! `rlm ask` with `--max-cost` and `rlm.toml`'s `[prices]`, its refusals of bad input, and
//! its answer to Ctrl-C: exit 130 within a second or two, the usage, a whole trace.

use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use rlm_registry::rlm::trajectory::Record;
use serde_json::json;

use crate::support;
use crate::support::cli::{llm_args, rlm_ask_in, rlm_command, stderr, stdout};
use support::openai_server::{Behavior, OpenAiServer};
use support::rlm_loop::*;

fn ask_in(dir: &std::path::Path, server: &OpenAiServer, args: &[&str]) -> Output {
    rlm_ask_in(dir, &server.base_url(), args)
}

/// A folder holding an `rlm.toml` of `toml`.
fn with_config(toml: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("rlm.toml"), toml).unwrap();
    dir
}

#[test]
fn a_price_table_in_rlm_toml_counts_the_cost_in_the_usage_summary_and_the_trace() {
    let dir = with_config("[prices.\"test-model\"]\ninput = 1000.0\noutput = 0.0\n");
    let server = OpenAiServer::start(vec![lua("print(1)")], lua("FINAL('done')"));
    let out = ask_in(dir.path(), &server, &["Q", "--trace", "t.jsonl"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // 10 prompt tokens a call at $1,000/M: $0.01 each.
    assert!(
        stderr(&out).contains("= 30 tokens, $0.0200"),
        "{}",
        stderr(&out)
    );
    // The live view gives the run's cost so far on each turn's line.
    assert!(
        stderr(&out).contains("· 15 tokens · $0.0100\n"),
        "{}",
        stderr(&out)
    );
    let trace = std::fs::read_to_string(dir.path().join("t.jsonl")).unwrap();
    let last: serde_json::Value = serde_json::from_str(trace.lines().last().unwrap()).unwrap();
    assert_eq!(
        (last["cost"].as_f64(), last["run_cost"].as_f64()),
        (Some(0.01), Some(0.02))
    );
}

#[test]
fn max_cost_refuses_a_call_that_does_not_fit_naming_the_flag() {
    let dir = with_config(
        "[budgets]\nmax_cost = 0.001\n[prices.\"test-model\"]\ninput = 1.0\noutput = 1.0\n",
    );
    let server = OpenAiServer::always(lua("FINAL('never')"));
    let out = ask_in(dir.path(), &server, &["Q"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("not sent: the run's cost budget has $0.0010 of its $0.0010 left")
            && err.contains("--max-cost"),
        "{err}"
    );
    assert_eq!(server.request_count(), 0);
    // The flag wins over the file.
    let out = ask_in(dir.path(), &server, &["Q", "--max-cost", "5"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "never\n");
}

#[test]
fn a_negative_or_nan_max_cost_is_a_usage_error() {
    let server = OpenAiServer::always(lua("FINAL('never')"));
    let dir = tempfile::tempdir().unwrap();
    for bad in ["-1", "NaN", "inf"] {
        let out = ask_in(dir.path(), &server, &["Q", "--max-cost", bad]);
        assert_eq!(out.status.code(), Some(2), "{bad}: {}", stderr(&out));
        assert!(stderr(&out).contains("--max-cost"), "{}", stderr(&out));
    }
    let out = rlm_command()
        .current_dir(dir.path())
        .env("RLM_MAX_COST", "lots")
        .arg("ask")
        .arg("Q")
        .args(llm_args(&server.base_url(), "test-model"))
        .output()
        .unwrap();
    assert!(
        stderr(&out).contains("RLM_MAX_COST=lots"),
        "{}",
        stderr(&out)
    );
    assert_eq!(server.request_count(), 0);
}

#[test]
fn a_malformed_price_table_names_the_file_and_the_key() {
    let server = OpenAiServer::always(lua("FINAL('never')"));
    for (toml, key) in [
        (
            "[prices.\"m\"]\ninput = -1.0\noutput = 1.0\n",
            "[prices.\"m\"] `input`",
        ),
        ("[prices.\"m\"]\ninput = 1.0\n", "output"),
        ("[prices.\"m\"]\ninput = \"cheap\"\noutput = 1.0\n", "input"),
        ("[budgets]\nmax_cost = -0.5\n", "[budgets] max_cost"),
    ] {
        let dir = with_config(toml);
        let out = ask_in(dir.path(), &server, &["Q"]);
        let err = stderr(&out);
        assert_ne!(out.status.code(), Some(0), "{toml}");
        assert!(
            err.contains("rlm.toml") && err.contains(key),
            "{toml}: {err}"
        );
    }
    assert_eq!(server.request_count(), 0);
}

#[test]
fn a_server_cost_that_is_not_a_number_is_ignored() {
    let server = OpenAiServer::always(Behavior::Completion {
        message: json!({"role": "assistant", "content": "```lua\nFINAL('done')\n```"}),
        finish_reason: "stop".to_string(),
        usage: json!({"prompt_tokens": 10, "completion_tokens": 5, "cost": {"total": 1}}),
    });
    let dir = tempfile::tempdir().unwrap();
    let out = ask_in(dir.path(), &server, &["Q"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!stderr(&out).contains('$'), "{}", stderr(&out));
}

#[test]
fn ctrl_c_stops_rlm_ask_within_a_second_with_exit_130_and_a_whole_trace() {
    stopped_by("-INT");
}

#[test]
fn sigterm_stops_rlm_ask_as_ctrl_c_does() {
    stopped_by("-TERM");
}

/// Runs `rlm ask` into an endless block, sends it `signal`, and checks it stopped within
/// a second or two with exit 130, the usage, the resume hint and a whole trace.
fn stopped_by(signal: &str) {
    let server = OpenAiServer::start(
        vec![lua("x = 1\nprint('turn 1')"), lua("while true do end")],
        lua("FINAL('never')"),
    );
    let dir = tempfile::tempdir().unwrap();
    // Sent once the second turn's endless block runs.
    let (out, dir) = asked_then_signalled(dir, &server, &["Q", "--trace", "t.jsonl"], 2, &[signal]);
    let err = stderr(&out);
    assert!(err.contains("error: interrupted"), "{err}");
    assert!(err.contains("rlm ask --resume t.jsonl"), "{err}");
    assert!(err.contains("total    2 calls"), "the usage summary: {err}");
    let trace = std::fs::read_to_string(dir.path().join("t.jsonl")).unwrap();
    let records: Vec<Record> = trace
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let turns = records
        .iter()
        .filter(|r| matches!(r, Record::Turn(_)))
        .count();
    assert_eq!(turns, 1, "{trace}");
}

#[test]
fn rlm_eval_prices_its_cost_column_from_the_price_table_and_the_flags_override_it() {
    use rlm_registry::eval::{Scorer, Task};
    let dir = with_config("[prices.\"test-model\"]\ninput = 1000.0\noutput = 0.0\n");
    let task = Task {
        id: "q0".into(),
        question: "What is it?".into(),
        context: Some("It is 42.\n".into()),
        context_file: None,
        answer: "42".into(),
        scorer: Scorer::Exact,
        family: None,
        size: None,
        schema: None,
        corpus: false,
    };
    let tasks = dir.path().join("tasks.jsonl");
    rlm_registry::eval::write_tasks(std::fs::File::create(&tasks).unwrap(), &[task]).unwrap();
    let server = OpenAiServer::always(Behavior::reply("42"));
    let eval = |extra: &[&str]| {
        rlm_command()
            .current_dir(dir.path())
            .args([
                "eval",
                "--tasks",
                "tasks.jsonl",
                "--methods",
                "direct",
                "--no-cache",
            ])
            .args(["--out", "out"])
            .args(extra)
            .args(llm_args(&server.base_url(), "test-model"))
            .output()
            .unwrap()
    };
    let out = eval(&[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let summary = stdout(&out);
    // One call of 10 prompt tokens at $1,000/M.
    assert!(
        summary.contains("at 1000 in / 0 out per million tokens"),
        "{summary}"
    );
    assert!(summary.contains("| 0.0100 |"), "{summary}");
    let out = eval(&["--price-in", "0", "--price-out", "2000"]);
    assert!(
        stdout(&out).contains("at 0 in / 2000 out"),
        "{}",
        stdout(&out)
    );
    let out = eval(&["--price-in", "-1"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));

    // A server that reports the cost: its figure, whatever the prices.
    let costing = OpenAiServer::always(Behavior::Completion {
        message: json!({"role": "assistant", "content": "42"}),
        finish_reason: "stop".to_string(),
        usage: json!({"prompt_tokens": 10, "completion_tokens": 5, "cost": 0.25}),
    });
    let out = rlm_command()
        .current_dir(dir.path())
        .args([
            "eval",
            "--tasks",
            "tasks.jsonl",
            "--methods",
            "direct,rlm",
            "--no-cache",
        ])
        .args(["--out", "reported", "--max-iterations", "2"])
        .args(llm_args(&costing.base_url(), "test-model"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let summary = stdout(&out);
    assert!(
        summary.contains("| direct | 1 | 1.000 ± 0.000 | 15 | 0.2500 |"),
        "{summary}"
    );
    let results = std::fs::read_to_string(dir.path().join("reported/results.jsonl")).unwrap();
    assert!(results.contains("\"cost\":0.25"), "{results}");
}

#[test]
fn a_second_ctrl_c_ends_rlm_ask_at_once_while_a_batch_is_in_flight() {
    let server = OpenAiServer::start(
        vec![lua("print(#llm_query_batched({'a', 'b'}))")],
        Behavior::reply("slow").after(Duration::from_secs(10)),
    );
    // Sent once the batch's two calls are in flight.
    let dir = tempfile::tempdir().unwrap();
    asked_then_signalled(dir, &server, &["Q"], 3, &["-INT", "-INT"]);
}

/// Runs `rlm ask ARGS` in `dir` until `server` has had `requests`, then sends it each of
/// `signals` 300 ms apart; checks that it ended within a second or two of the last with
/// exit 130, and gives what it wrote, and the folder.
fn asked_then_signalled(
    dir: tempfile::TempDir,
    server: &OpenAiServer,
    args: &[&str],
    requests: usize,
    signals: &[&str],
) -> (Output, tempfile::TempDir) {
    let child = rlm_command()
        .current_dir(dir.path())
        .arg("ask")
        .args(args)
        .args(llm_args(&server.base_url(), "test-model"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let waiting = Instant::now();
    while server.request_count() < requests && waiting.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut sent = Instant::now();
    for signal in signals {
        std::thread::sleep(Duration::from_millis(300));
        sent = Instant::now();
        let kill = std::process::Command::new("kill")
            .args([*signal, &child.id().to_string()])
            .status()
            .unwrap();
        assert!(kill.success());
    }
    let out = child.wait_with_output().unwrap();
    let took = sent.elapsed();
    assert!(took < Duration::from_secs(2), "{took:?}");
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    (out, dir)
}
