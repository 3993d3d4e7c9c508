//! `rlm ask --resume` and [`Resume`]: a run interrupted (its server gone, the iteration
//! cap, SIGKILL or SIGINT mid-turn) goes on from its trace. The first run talks to one
//! scripted server and the resumed run to another that holds only the rest of the script,
//! so a request asked again would take a reply meant for another and show in the count.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rlm_registry::Registry;
use rlm_registry::rlm::trajectory::Record;
use rlm_registry::rlm::{Context, Resume, ResumeError, Rlm};
use rlm_registry::trace::Trace;

use crate::support::cli::{llm_args, rlm_command, stderr, stdout};
use crate::support::openai_server::{Behavior, OpenAiServer};
use crate::support::rlm_loop::{client, lua};

const CONTEXT: &str = "alpha\nbeta\ngamma\n";

/// Five turns: a variable set in turn 2 (from a sub-call) and one in turn 1 are read in
/// turn 5.
fn five_turns() -> Vec<Behavior> {
    vec![
        lua("a = line_count(context)\nprint(a)"),
        lua("b = llm_query('Name a colour')\nprint(b)"),
        Behavior::reply("blue"),
        lua("c = a + 1\nprint(c)"),
        lua("print(#b)"),
        lua("FINAL(b .. ' ' .. c)"),
    ]
}

fn rlm_of(server: &OpenAiServer, max_iterations: u32) -> Rlm {
    Rlm::new(
        Arc::new(client(server)),
        Registry::baked().clone(),
        max_iterations,
    )
}

/// Runs `script[..cut]` on a server that then closes every connection: the run fails
/// there, its trace in `dir`.
fn interrupted(dir: &Path, script: &[Behavior], cut: usize) -> PathBuf {
    let trace = dir.join("run.jsonl");
    let server = OpenAiServer::start(script[..cut].to_vec(), Behavior::Drop);
    let report = rlm_of(&server, 10).trace_file(&trace).unwrap().run_report(
        "What colour?",
        Some(Context::from(CONTEXT)),
        None,
    );
    assert!(report.result.is_err(), "the server went away");
    trace
}

/// Resumes `trace` against a server holding `rest` of the script: the answer, and the
/// requests the server got.
fn resumed(trace: &Path, rest: &[Behavior], max_iterations: u32) -> (String, usize) {
    let server = OpenAiServer::start(rest.to_vec(), Behavior::status(500));
    let report = Resume::from_file(trace)
        .unwrap()
        .run(
            rlm_of(&server, max_iterations),
            Some(Context::from(CONTEXT)),
            None,
        )
        .unwrap();
    (report.result.unwrap(), server.request_count())
}

#[test]
fn a_run_whose_server_went_away_after_turn_3_resumes_with_the_answer_and_no_request_repeated() {
    let dir = tempfile::tempdir().unwrap();
    let script = five_turns();
    // Turn 1, turn 2 and its sub-call, turn 3: then the server is gone.
    let trace = interrupted(dir.path(), &script, 4);
    let (answer, requests) = resumed(&trace, &script[4..], 10);
    assert_eq!(answer, "blue 4", "the answer of an uninterrupted run");
    assert_eq!(requests, 2, "turns 4 and 5 only");
    // Turn numbers go on, and the trace reads as one run.
    let run = Trace::read(&trace).unwrap();
    assert!(run.problems.is_empty(), "{:?}", run.problems);
    let root = run.root().unwrap();
    let turns: Vec<u32> = root.turns.iter().map(|t| t.turn).collect();
    assert_eq!(turns, [1, 2, 3, 4, 5]);
    assert_eq!(
        root.turns[3].error, None,
        "the failed turn 4 is the resumed one"
    );
}

#[test]
fn a_variable_set_in_turn_2_is_read_in_turn_5_after_the_resume() {
    let dir = tempfile::tempdir().unwrap();
    let script = five_turns();
    let trace = interrupted(dir.path(), &script, 5);
    let (answer, requests) = resumed(&trace, &script[5..], 10);
    assert_eq!(answer, "blue 4", "b from turn 2, c from turn 3");
    assert_eq!(requests, 1);
}

#[test]
fn the_resumed_part_of_the_trace_repeats_no_line_and_is_marked() {
    let dir = tempfile::tempdir().unwrap();
    let script = five_turns();
    let trace = interrupted(dir.path(), &script, 4);
    let before = std::fs::read_to_string(&trace).unwrap();
    resumed(&trace, &script[4..], 10);
    let after = std::fs::read_to_string(&trace).unwrap();
    assert!(after.starts_with(&before), "appended, not rewritten");
    let added: Vec<Record> = after[before.len()..]
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let Record::Resume(mark) = &added[0] else {
        panic!("the resumed part begins with its mark: {:?}", added[0]);
    };
    assert_eq!((mark.agents, mark.turns, mark.calls), (1, 3, 1));
    assert!(
        !added.iter().any(|r| matches!(r, Record::Start(_))),
        "the start line is on file"
    );
    let turns: Vec<u32> = added
        .iter()
        .filter_map(|r| match r {
            Record::Turn(turn) => Some(turn.turn),
            _ => None,
        })
        .collect();
    assert_eq!(turns, [4, 5], "turns 1 to 3 are on file");
    let first_at = added.iter().filter_map(Record::at_ms).min().unwrap();
    let last_before = before
        .lines()
        .filter_map(|l| serde_json::from_str::<Record>(l).ok()?.at_ms())
        .max()
        .unwrap();
    assert!(first_at >= last_before, "the run's clock goes on");
}

#[test]
fn a_run_stopped_at_the_iteration_cap_goes_on_with_a_larger_one() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("run.jsonl");
    let script = five_turns();
    let server = OpenAiServer::start(script[..4].to_vec(), Behavior::status(500));
    let report = rlm_of(&server, 3).trace_file(&trace).unwrap().run_report(
        "What colour?",
        Some(Context::from(CONTEXT)),
        None,
    );
    assert!(report.result.unwrap_err().to_string().contains("iteration"));
    assert_eq!(server.request_count(), 4);
    let (answer, requests) = resumed(&trace, &script[4..], 10);
    assert_eq!((answer.as_str(), requests), ("blue 4", 2));
    let root = Trace::read(&trace).unwrap();
    let turn_3 = root.root().unwrap().turn(3).unwrap();
    assert!(
        turn_3.error.is_none() && turn_3.feedback.is_some(),
        "turn 3 is written again: it no longer ends the run"
    );
}

#[test]
fn a_torn_last_line_is_ignored_and_cut_before_appending() {
    let dir = tempfile::tempdir().unwrap();
    let script = five_turns();
    let trace = interrupted(dir.path(), &script, 4);
    let mut text = std::fs::read_to_string(&trace).unwrap();
    text.push_str(r#"{"event":"turn","agent":"0","tu"#);
    std::fs::write(&trace, &text).unwrap();
    let (answer, requests) = resumed(&trace, &script[4..], 10);
    assert_eq!((answer.as_str(), requests), ("blue 4", 2));
    let after = std::fs::read_to_string(&trace).unwrap();
    assert!(!after.contains(r#""tu{"#), "the torn line is gone");
    assert!(Trace::read(&trace).unwrap().problems.is_empty());
}

#[test]
fn a_changed_context_is_refused_unless_forced() {
    let dir = tempfile::tempdir().unwrap();
    let script = five_turns();
    let trace = interrupted(dir.path(), &script, 4);
    let server = OpenAiServer::start(script[4..].to_vec(), Behavior::status(500));
    let other = Some(Context::from("one line\n"));
    let resume = Resume::from_file(&trace).unwrap();
    let error = resume
        .run(rlm_of(&server, 10), other.clone(), None)
        .unwrap_err();
    assert!(matches!(error, ResumeError::ContextMismatch { .. }));
    let message = error.to_string();
    assert!(
        message.contains("--context") && message.contains("--force"),
        "{message}"
    );
    assert_eq!(server.request_count(), 0);
    let forced = resume.force(true).run(rlm_of(&server, 10), other, None);
    assert!(forced.is_ok(), "forced, it runs");
    assert!(server.request_count() > 0);
}

#[test]
fn a_changed_registry_is_refused_naming_the_functions_that_differ() {
    let dir = tempfile::tempdir().unwrap();
    let script = five_turns();
    let trace = interrupted(dir.path(), &script, 4);
    let server = OpenAiServer::start(Vec::new(), Behavior::status(500));
    let source = "--- Adds.\n---@param a number A\n---@param b number B\n---@return number sum The sum\nfunction plus(a, b)\n  return a + b\nend\n";
    let mine = Registry::from_map([("plus", source)]).unwrap();
    let rlm = Rlm::new(Arc::new(client(&server)), mine, 10);
    let error = Resume::from_file(&trace)
        .unwrap()
        .run(rlm, Some(Context::from(CONTEXT)), None)
        .unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains("+plus") && message.contains("-char_count") && message.contains("more"),
        "{message}"
    );
    assert_eq!(server.request_count(), 0);
}

#[test]
fn a_file_that_is_not_a_trace_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.jsonl");
    std::fs::write(&path, "{\"type\":\"metadata\"}\n{\"x\":1}\n").unwrap();
    let error = Resume::from_file(&path).unwrap_err();
    assert!(matches!(error, ResumeError::NotATrace { line: 1, .. }));
    std::fs::write(&path, "").unwrap();
    assert!(matches!(Resume::from_file(&path), Err(ResumeError::NoRoot)));
}

// Through the `rlm` binary.

/// `rlm ask` against `server` with a trace in `dir`, the context in `dir/context.txt`.
fn ask(server: &OpenAiServer, dir: &Path, extra: &[&str]) -> Command {
    let context = dir.join("context.txt");
    if !context.exists() {
        std::fs::write(&context, CONTEXT).unwrap();
    }
    let mut command = rlm_command();
    command
        .args(["ask", "What colour?", "-q", "--trace"])
        .arg(dir.join("run.jsonl"))
        .arg("--context")
        .arg(&context)
        .args(llm_args(&server.base_url(), "scripted"))
        .args(extra);
    command
}

/// `rlm ask --resume dir/run.jsonl` against `server`, with `extra` flags.
fn resume_cli(server: &OpenAiServer, dir: &Path, extra: &[&str]) -> std::process::Output {
    rlm_command()
        .args(["ask", "-q", "--resume"])
        .arg(dir.join("run.jsonl"))
        .args(["--base-url", &server.base_url()])
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn rlm_ask_resume_goes_on_after_the_iteration_cap_with_max_iterations_10() {
    let dir = tempfile::tempdir().unwrap();
    let script = five_turns();
    let first = OpenAiServer::start(script[..4].to_vec(), Behavior::status(500));
    let out = ask(&first, dir.path(), &["--max-iterations", "3"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let rest = OpenAiServer::start(script[4..].to_vec(), Behavior::status(500));
    let out = resume_cli(&rest, dir.path(), &["--max-iterations", "10"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "blue 4\n");
    assert_eq!(rest.request_count(), 2, "no request repeated");
    let text = std::fs::read_to_string(dir.path().join("run.jsonl")).unwrap();
    let mark = text
        .lines()
        .find(|l| l.contains(r#""event":"resume""#))
        .unwrap();
    assert!(
        mark.contains(r#""overrides":["max_iterations","base_url"]"#),
        "{mark}"
    );
}

#[test]
fn rlm_ask_resume_of_a_finished_run_prints_its_answer_and_sends_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let script = five_turns();
    let first = OpenAiServer::start(script.clone(), Behavior::status(500));
    let out = ask(&first, dir.path(), &[]).output().unwrap();
    assert_eq!(stdout(&out), "blue 4\n", "{}", stderr(&out));
    let never = OpenAiServer::always(Behavior::status(500));
    let out = resume_cli(&never, dir.path(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "blue 4\n");
    assert_eq!(never.request_count(), 0);
}

#[test]
fn rlm_ask_resume_refuses_a_changed_context_and_takes_a_moved_one_with_context() {
    let dir = tempfile::tempdir().unwrap();
    let script = five_turns();
    let first = OpenAiServer::start(script[..4].to_vec(), Behavior::status(400));
    let out = ask(&first, dir.path(), &["--max-iterations", "10"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    // Changed in place: refused, naming the way out.
    let context = dir.path().join("context.txt");
    std::fs::write(&context, "changed\n").unwrap();
    let rest = OpenAiServer::start(script[4..].to_vec(), Behavior::status(500));
    let out = resume_cli(&rest, dir.path(), &[]);
    assert_eq!(out.status.code(), Some(2));
    let message = stderr(&out);
    assert!(
        message.contains("not the recorded one") && message.contains("--force"),
        "{message}"
    );
    assert_eq!(rest.request_count(), 0);
    // Moved: given where it is now.
    let moved = dir.path().join("moved.txt");
    std::fs::write(&moved, CONTEXT).unwrap();
    let out = resume_cli(&rest, dir.path(), &["--context", moved.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        (stdout(&out).as_str(), rest.request_count()),
        ("blue 4\n", 2)
    );
}

/// Spawns `command`, waits until the trace at `trace` holds a line matching `ready` and
/// `server` has had `requests`, then sends `signal` (`KILL` or `INT`) and waits for the
/// process to end.
fn interrupt_when(
    mut command: Command,
    trace: &Path,
    ready: impl Fn(&str) -> bool,
    (server, requests): (&OpenAiServer, usize),
    signal: &str,
) {
    let mut child: Child = command
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !(std::fs::read_to_string(trace).is_ok_and(|text| text.lines().any(&ready))
        && server.request_count() >= requests)
    {
        assert!(Instant::now() < deadline, "the run never got there");
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(status.success());
    let ended = child.wait().unwrap();
    assert!(!ended.success(), "the run was interrupted");
}

/// A turn whose code asks a fast call then a slow one: killed while the slow one is out.
fn slow_sub_call_script() -> Vec<Behavior> {
    vec![
        lua("a = line_count(context)"),
        lua("f = llm_query('fast one')\ns = llm_query('slow one')\nprint(f, s)"),
        Behavior::reply("quick"),
        Behavior::reply("late").after(Duration::from_secs(4)),
        lua("FINAL(f .. ' ' .. s .. ' ' .. a)"),
    ]
}

fn killed_during_the_slow_sub_call_then_resumed(signal: &str) {
    let dir = tempfile::tempdir().unwrap();
    let script = slow_sub_call_script();
    let first = OpenAiServer::start(script.clone(), Behavior::status(500));
    let trace = dir.path().join("run.jsonl");
    interrupt_when(
        ask(&first, dir.path(), &[]),
        &trace,
        |line| line.contains(r#""event":"call""#),
        (&first, 4),
        signal,
    );
    assert_eq!(first.request_count(), 4, "the slow call was out");
    // The resumed run asks the slow call again (it was never answered) and the last turn.
    let rest = vec![Behavior::reply("late"), script[4].clone()];
    let second = OpenAiServer::start(rest, Behavior::status(500));
    let out = resume_cli(&second, dir.path(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "quick late 3\n");
    assert_eq!(
        second.request_count(),
        2,
        "the fast call was not asked again"
    );
    let asked: Vec<String> = second
        .requests()
        .iter()
        .map(|r| r.json().unwrap().to_string())
        .collect();
    assert!(asked[0].contains("slow one") && !asked.iter().any(|a| a.contains("\"fast one\"")));
}

#[test]
fn sigkill_during_a_slow_sub_call_then_resume_asks_only_what_was_not_answered() {
    killed_during_the_slow_sub_call_then_resumed("KILL");
}

#[test]
fn sigint_during_a_slow_sub_call_then_resume_asks_only_what_was_not_answered() {
    killed_during_the_slow_sub_call_then_resumed("INT");
}

#[test]
fn a_child_agent_killed_mid_way_is_rebuilt_and_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let script = vec![
        lua("r = rlm_query('Sub-task')\nprint(r)"),
        lua("x = 5"),
        lua("y = llm_query('slow one')"),
        Behavior::reply("late").after(Duration::from_secs(4)),
        lua("FINAL(x .. y)"),
        lua("FINAL('child said ' .. r)"),
    ];
    let first = OpenAiServer::start(script.clone(), Behavior::status(500));
    let trace = dir.path().join("run.jsonl");
    interrupt_when(
        ask(&first, dir.path(), &[]),
        &trace,
        |line| line.contains(r#""event":"reply","agent":"0.1","turn":2"#),
        (&first, 4),
        "KILL",
    );
    let rest = vec![
        Behavior::reply("late"),
        script[4].clone(),
        script[5].clone(),
    ];
    let second = OpenAiServer::start(rest, Behavior::status(500));
    let out = resume_cli(&second, dir.path(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "child said 5late\n");
    assert_eq!(second.request_count(), 3);
    let run = Trace::read(&trace).unwrap();
    let child = run.agent("0.1").unwrap();
    let turns: Vec<u32> = child.turns.iter().map(|t| t.turn).collect();
    assert_eq!(turns, [1, 2, 3], "the child's turns, each once");
}

#[test]
fn rlm_eval_killed_mid_task_resumes_the_task_from_its_trace() {
    use rlm_registry::eval::{Scorer, Task};
    let dir = tempfile::tempdir().unwrap();
    let task = Task {
        id: "t1".into(),
        question: "What colour?".into(),
        context: Some(CONTEXT.into()),
        context_file: None,
        answer: "quick late 3".into(),
        scorer: Scorer::Exact,
        family: None,
        size: None,
        schema: None,
        corpus: false,
    };
    let tasks = dir.path().join("tasks.jsonl");
    rlm_registry::eval::write_tasks(std::fs::File::create(&tasks).unwrap(), &[task]).unwrap();
    let out = dir.path().join("out");
    let eval = |server: &OpenAiServer| {
        let mut command = rlm_command();
        command
            .args([
                "eval",
                "--methods",
                "rlm",
                "--tasks",
                tasks.to_str().unwrap(),
            ])
            .args(["--out", out.to_str().unwrap()])
            .args(llm_args(&server.base_url(), "scripted"));
        command
    };
    let script = slow_sub_call_script();
    let first = OpenAiServer::start(script.clone(), Behavior::status(500));
    interrupt_when(
        eval(&first),
        &out.join("traces/t1.rlm.jsonl"),
        |line| line.contains(r#""event":"call""#),
        (&first, 4),
        "KILL",
    );
    let rest = vec![Behavior::reply("late"), script[4].clone()];
    let second = OpenAiServer::start(rest, Behavior::status(500));
    let finished = eval(&second).output().unwrap();
    assert_eq!(finished.status.code(), Some(0), "{}", stderr(&finished));
    let results = std::fs::read_to_string(out.join("results.jsonl")).unwrap();
    let result: serde_json::Value = serde_json::from_str(results.trim()).unwrap();
    assert_eq!(result["answer"], "quick late 3", "{result}");
    assert_eq!(result["score"], 1.0);
    assert_eq!(second.request_count(), 2, "no request repeated");
}

#[test]
fn a_resumed_trace_replays_identical() {
    let dir = tempfile::tempdir().unwrap();
    let script = five_turns();
    let trace = interrupted(dir.path(), &script, 4);
    resumed(&trace, &script[4..], 10);
    let report = rlm_registry::rlm::Replay::from_file(&trace)
        .unwrap()
        .context(Context::from(CONTEXT))
        .run()
        .unwrap();
    assert!(report.is_identical(), "{:?}", report.divergence);
    assert_eq!((report.turns, report.sub_calls), (5, 1));
}

#[test]
fn what_the_run_spent_before_counts_against_its_budget_and_a_larger_one_goes_on() {
    use rlm_registry::rlm::Budgets;
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("run.jsonl");
    let script = five_turns();
    let calls = |n| Budgets::default().with_llm_calls(n);
    let first = OpenAiServer::start(script[..3].to_vec(), Behavior::status(500));
    let report = rlm_of(&first, 10)
        .budgets(calls(3))
        .trace_file(&trace)
        .unwrap()
        .run_report("What colour?", Some(Context::from(CONTEXT)), None);
    assert!(report.result.is_err(), "turn 3 is over the budget");
    assert_eq!(first.request_count(), 3);
    // The same budget: spent already, so nothing is sent.
    let same = OpenAiServer::start(script[3..].to_vec(), Behavior::status(500));
    let report = Resume::from_file(&trace)
        .unwrap()
        .run(
            rlm_of(&same, 10).budgets(calls(3)),
            Some(Context::from(CONTEXT)),
            None,
        )
        .unwrap();
    assert!(report.result.unwrap_err().to_string().contains("budget"));
    assert_eq!(same.request_count(), 0);
    // A larger one: the three calls on file count, three more are sent.
    let report = Resume::from_file(&trace)
        .unwrap()
        .run(
            rlm_of(&same, 10).budgets(calls(6)),
            Some(Context::from(CONTEXT)),
            None,
        )
        .unwrap();
    assert_eq!(report.result.unwrap(), "blue 4");
    assert_eq!(same.request_count(), 3);
    assert_eq!(report.usage.total().calls, 6, "the whole run's calls");
}

/// Answers a batch's prompts by their words, `slow one` after `slow`, and anything else
/// with the final turn.
fn batch_answers(slow: Duration) -> Behavior {
    Behavior::ByPrompt(vec![
        ("alpha".into(), Behavior::reply("A")),
        ("beta".into(), Behavior::reply("B")),
        ("slow one".into(), Behavior::reply("C").after(slow)),
        (String::new(), lua("FINAL(r[1] .. r[2] .. r[3])")),
    ])
}

#[test]
fn a_batch_killed_with_one_prompt_out_asks_only_that_one_again() {
    let dir = tempfile::tempdir().unwrap();
    let batch = lua("r = llm_query_batched({'alpha', 'beta', 'slow one'})\nprint(#r)");
    let first = OpenAiServer::start(vec![batch], batch_answers(Duration::from_secs(4)));
    let trace = dir.path().join("run.jsonl");
    interrupt_when(
        ask(&first, dir.path(), &[]),
        &trace,
        |line| line.contains(r#""content":"beta""#) && line.contains(r#""event":"call""#),
        (&first, 4),
        "KILL",
    );
    let text = std::fs::read_to_string(&trace).unwrap();
    assert!(
        text.contains(r#""content":"alpha""#),
        "each answer of the batch is written as it comes"
    );
    let second = OpenAiServer::always(batch_answers(Duration::ZERO));
    let out = resume_cli(&second, dir.path(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "ABC\n");
    let asked: Vec<String> = second
        .requests()
        .iter()
        .map(|r| r.json().unwrap()["messages"].to_string())
        .collect();
    assert_eq!(
        asked.len(),
        2,
        "the slow prompt and the last turn: {asked:?}"
    );
    assert!(
        !asked
            .iter()
            .any(|a| a.contains("\"alpha\"") || a.contains("\"beta\""))
    );
}
