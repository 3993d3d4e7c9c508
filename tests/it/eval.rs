//! `rlm eval` and the `eval` module against the scripted OpenAI-compatible server:
//! scores of right, wrong and silent models, the `direct` cut, resuming a killed run,
//! `--jobs`, and the HTML report in headless Chromium.

use crate::support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rlm_registry::eval::{EvalMethod, EvalOptions, Runner, Scorer, Task, TaskResult};
use serde_json::Value;
use support::openai_server::{Behavior, OpenAiServer};
use support::rlm_loop::{bodies, client, last_message, lua};

pub(crate) fn task(id: &str, question: &str, answer: &str) -> Task {
    Task {
        id: id.into(),
        question: question.into(),
        context: Some(format!(
            "Among other things, the answer to {id} is {answer}.\n"
        )),
        context_file: None,
        answer: answer.into(),
        scorer: Scorer::Exact,
        family: None,
        size: None,
        schema: None,
        corpus: false,
    }
}

pub(crate) fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// A server answering `answer`: as plain text to the `direct` prompt, with `FINAL` to
/// the loop.
fn answering(answer: &str) -> OpenAiServer {
    OpenAiServer::always(Behavior::ByPrompt(vec![
        ("\n\nQuestion: ".into(), Behavior::reply(answer)),
        (String::new(), lua(&format!("FINAL('{answer}')"))),
    ]))
}

fn run_lib(
    server: &OpenAiServer,
    tasks: &[Task],
    methods: &[EvalMethod],
    out: &Path,
) -> Vec<TaskResult> {
    let options = EvalOptions {
        methods: methods.to_vec(),
        max_iterations: 3,
        ..EvalOptions::default()
    };
    Runner::new(Arc::new(client(server)), options, out)
        .run(tasks, |_, _| {})
        .unwrap()
}

const ALL: [EvalMethod; 3] = [EvalMethod::Rlm, EvalMethod::Direct, EvalMethod::RlmBare];

#[test]
fn a_model_that_answers_correctly_scores_1_with_every_method() {
    let server = answering("4242");
    let dir = tempdir();
    let results = run_lib(
        &server,
        &[task("t1", "What is the answer?", "4242")],
        &ALL,
        dir.path(),
    );
    assert_eq!(results.len(), 3);
    for result in &results {
        assert_eq!(result.score, 1.0, "{result:?}");
        assert_eq!(result.error, None);
        assert_eq!(result.answer.as_deref(), Some("4242"));
    }
    assert_eq!(results[0].method, "rlm");
    assert_eq!(results[0].turns, 1);
    assert_eq!(results[0].tokens[0].prompt, 10);
    // The loop's methods leave a JSONL trace, named in the result.
    let trace = results[0].trace.as_deref().unwrap();
    let text = std::fs::read_to_string(dir.path().join(trace)).unwrap();
    assert!(
        text.lines()
            .all(|l| serde_json::from_str::<Value>(l).is_ok()),
        "{text}"
    );
    // The results file has them too, one line each.
    let file = std::fs::read_to_string(dir.path().join("results.jsonl")).unwrap();
    assert_eq!(file.lines().count(), 3);
}

#[test]
fn rlm_bare_runs_the_loop_without_registry_functions() {
    let server = answering("4242");
    let dir = tempdir();
    run_lib(
        &server,
        &[task("t1", "What is the answer?", "4242")],
        &[EvalMethod::Rlm, EvalMethod::RlmBare],
        dir.path(),
    );
    let systems: Vec<String> = bodies(&server)
        .iter()
        .map(|b| b["messages"][0]["content"].as_str().unwrap().to_string())
        .collect();
    assert!(
        systems[0].contains("word_count"),
        "the rlm method lists the registry"
    );
    assert!(!systems[1].contains("word_count"), "rlm-bare does not");
}

#[test]
fn a_model_that_answers_wrongly_scores_0() {
    let server = answering("1111");
    let dir = tempdir();
    let results = run_lib(
        &server,
        &[task("t1", "What is the answer?", "4242")],
        &ALL,
        dir.path(),
    );
    for result in &results {
        assert_eq!(result.score, 0.0, "{result:?}");
        assert_eq!(result.error, None);
        assert_eq!(result.answer.as_deref(), Some("1111"));
        assert_eq!(result.expected, "4242");
    }
}

#[test]
fn a_model_that_never_calls_final_scores_0_with_its_error_recorded() {
    let server = OpenAiServer::always(lua("print('still looking')"));
    let dir = tempdir();
    let results = run_lib(
        &server,
        &[task("t1", "What is the answer?", "4242")],
        &[EvalMethod::Rlm],
        dir.path(),
    );
    assert_eq!(results[0].score, 0.0);
    assert_eq!(results[0].answer, None);
    assert_eq!(results[0].turns, 3);
    let error = results[0].error.as_deref().unwrap();
    assert!(error.contains("iteration limit reached"), "{error}");
}

#[test]
fn direct_cuts_a_context_longer_than_the_window_with_a_note() {
    let server = answering("4242");
    let dir = tempdir();
    let mut long = task("t1", "What is the answer?", "4242");
    long.context = Some("lorem ipsum dolor sit amet ".repeat(1_000));
    let options = EvalOptions {
        methods: vec![EvalMethod::Direct],
        context_window: 2_024,
        ..EvalOptions::default()
    };
    Runner::new(Arc::new(client(&server)), options, dir.path())
        .run(&[long], |_, _| {})
        .unwrap();
    let prompt = last_message(&bodies(&server)[0]);
    // 2,024 tokens less 1,024 reserved and 5 for the question.
    assert!(
        prompt.contains("[The context was cut to its first 995 of 5002 tokens to fit the context window; the rest is not shown.]"),
        "{}",
        &prompt[prompt.len() - 300..]
    );
    assert!(rlm_registry::tokens::count(&prompt) < 1_100);
    assert!(prompt.ends_with("Question: What is the answer?"));
}

pub(crate) fn rlm() -> Command {
    let mut command = support::cli::rlm_command();
    command.env("RLM_TIMEOUT_SECS", "10");
    command
}

pub(crate) fn eval_args(server: &OpenAiServer, out: &Path) -> Vec<String> {
    vec![
        "eval".into(),
        "--base-url".into(),
        server.base_url(),
        "--model".into(),
        "test-model".into(),
        "--out".into(),
        out.display().to_string(),
        "--max-iterations".into(),
        "3".into(),
    ]
}

pub(crate) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

pub(crate) fn results_of(out: &Path) -> Vec<Value> {
    std::fs::read_to_string(out.join("results.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Tasks with distinct questions, some answered right by [`by_question`], some wrong.
pub(crate) fn write_task_file(dir: &Path, count: usize) -> PathBuf {
    let tasks: Vec<Task> = (0..count)
        .map(|i| {
            task(
                &format!("q{i}"),
                &format!("What is number {i}?"),
                &format!("{}", i * 11),
            )
        })
        .collect();
    let path = dir.join("tasks.jsonl");
    rlm_registry::eval::write_tasks(std::fs::File::create(&path).unwrap(), &tasks).unwrap();
    path
}

/// Answers task `q{i}` with `i * 11` when `i` is even, `0` otherwise, whatever the
/// order of the requests.
pub(crate) fn by_question(count: usize, delay: Duration) -> OpenAiServer {
    let mut rules = Vec::new();
    for i in 0..count {
        let answer = if i % 2 == 0 { i * 11 } else { 0 };
        let question = format!("What is number {i}?");
        rules.push((
            format!("{question}\n\n(The context"),
            lua(&format!("FINAL('{answer}')")).after(delay),
        ));
        rules.push((
            format!("Question: {question}"),
            Behavior::reply(&answer.to_string()).after(delay),
        ));
    }
    rules.push((String::new(), Behavior::status(500)));
    OpenAiServer::always(Behavior::ByPrompt(rules))
}

#[test]
fn the_cli_writes_results_summary_and_report() {
    let server = by_question(4, Duration::ZERO);
    let dir = tempdir();
    let tasks = write_task_file(dir.path(), 4);
    let out = dir.path().join("out");
    let output = rlm()
        .args(eval_args(&server, &out))
        .args([
            "--tasks",
            tasks.to_str().unwrap(),
            "--methods",
            "rlm,direct",
            "--price-in",
            "1",
            "--price-out",
            "2",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let summary = text(&output.stdout);
    assert!(
        summary.contains("| custom | - | direct | 4 | 0.500 ± 0.566 | 15 | 0.0001 |"),
        "{summary}"
    );
    assert_eq!(
        std::fs::read_to_string(out.join("summary.md")).unwrap(),
        summary
    );
    assert_eq!(results_of(&out).len(), 8);
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("<a href=\"traces/q0.rlm.jsonl\">trace</a>"));
    assert!(out.join("traces/q0.rlm.jsonl").is_file());
    // Each task's run links to its page, for the rlm and the direct method alike.
    assert!(html.contains("<a href=\"traces/q0.rlm.html\">page</a>"));
    for result in results_of(&out) {
        let trace = result["trace"].as_str().unwrap();
        let page = std::fs::read_to_string(out.join(trace.replace(".jsonl", ".html"))).unwrap();
        assert!(page.contains("<html"), "{trace}");
        assert!(result["error"].is_null(), "{result}");
    }
}

#[test]
fn jobs_4_gives_the_same_results_as_jobs_1() {
    let server = by_question(8, Duration::from_millis(20));
    let dir = tempdir();
    let tasks = write_task_file(dir.path(), 8);
    let mut runs = Vec::new();
    for jobs in ["1", "4"] {
        let out = dir.path().join(format!("out{jobs}"));
        let output = rlm()
            .args(eval_args(&server, &out))
            .args([
                "--tasks",
                tasks.to_str().unwrap(),
                "--methods",
                "rlm,direct",
                "--jobs",
                jobs,
            ])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
        let by_key: BTreeMap<String, Value> = results_of(&out)
            .into_iter()
            .map(|mut r| {
                r.as_object_mut().unwrap().remove("seconds");
                (format!("{} {}", r["id"], r["method"]), r)
            })
            .collect();
        assert_eq!(by_key.len(), 16);
        runs.push(by_key);
    }
    assert_eq!(runs[0], runs[1]);
    assert!(server.max_in_flight() > 1, "--jobs 4 ran tasks at once");
}

#[test]
fn an_interrupted_run_resumes_without_losing_or_repeating_a_result() {
    let count = 6;
    let server = by_question(count, Duration::from_millis(250));
    let dir = tempdir();
    let tasks = write_task_file(dir.path(), count);
    let out = dir.path().join("out");
    let args = |command: &mut Command| {
        command.args(eval_args(&server, &out)).args([
            "--tasks",
            tasks.to_str().unwrap(),
            "--methods",
            "direct,rlm",
        ]);
    };
    let mut first = rlm();
    args(&mut first);
    let mut child = first
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while results_of(&out).is_empty() {
        assert!(Instant::now() < deadline, "no result within a minute");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let before = results_of(&out);
    assert!(
        before.len() < 2 * count,
        "the run was killed before its end"
    );

    let mut second = rlm();
    args(&mut second);
    let output = second.output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let after = results_of(&out);
    assert_eq!(
        &after[..before.len()],
        &before[..],
        "earlier results are kept as they were"
    );
    let mut keys: Vec<String> = after
        .iter()
        .map(|r| format!("{} {}", r["id"], r["method"]))
        .collect();
    keys.sort();
    let total = keys.len();
    keys.dedup();
    assert_eq!(keys.len(), total, "no result is repeated");
    assert_eq!(total, 2 * count, "no result is lost");
    // Running it a third time runs nothing.
    let requests = server.request_count();
    let mut third = rlm();
    args(&mut third);
    assert_eq!(third.output().unwrap().status.code(), Some(0));
    assert_eq!(server.request_count(), requests);
}

#[test]
fn generate_writes_the_same_bytes_for_the_same_seed_and_eval_reads_them() {
    let dir = tempdir();
    let mut files = Vec::new();
    for name in ["a.jsonl", "b.jsonl"] {
        let path = dir.path().join(name);
        let output = rlm()
            .args([
                "eval",
                "generate",
                "--suite",
                "niah,logs",
                "--sizes",
                "2k",
                "--n",
                "2",
                "--seed",
                "7",
                "--out",
            ])
            .arg(&path)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
        files.push(std::fs::read(&path).unwrap());
    }
    assert_eq!(files[0], files[1]);
    let tasks = rlm_registry::eval::read_tasks(&files[0][..]).unwrap();
    assert_eq!(tasks.len(), 4);
    assert_eq!(tasks[0].id, "niah-2k-s7-000");
    assert_eq!(
        tasks[0],
        rlm_registry::eval::generate_task(
            rlm_registry::eval::Family::named("niah").unwrap(),
            rlm_registry::eval::Size::new(2_000),
            7,
            0
        )
    );
}

/// The families `--suite` offers in `help`: the names after "comma-separated:" on the
/// option's first help line, and those of its `[default: …]`.
fn suite_help_names(help: &str) -> (Vec<String>, Vec<String>) {
    let at = help.find("--suite <LIST>").expect("--suite in the help");
    let section = &help[at..];
    let listed = section
        .split_once("comma-separated:")
        .and_then(|(_, rest)| rest.lines().next())
        .expect("the families after `comma-separated:`");
    let default = section
        .split_once("[default: ")
        .and_then(|(_, rest)| rest.split_once(']'))
        .expect("a default suite")
        .0;
    let names = |text: &str, separator: char| -> Vec<String> {
        text.split(separator)
            .map(|name| name.trim().to_string())
            .collect()
    };
    (names(listed, ','), names(default, ','))
}

#[test]
fn the_suite_help_and_default_list_exactly_the_families_of_the_table() {
    let table: Vec<String> = rlm_registry::eval::FAMILIES
        .iter()
        .map(|family| family.name().to_string())
        .collect();
    for args in [&["eval", "--help"][..], &["eval", "generate", "--help"]] {
        let output = rlm().args(args).output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{args:?}");
        let help = text(&output.stdout);
        let (listed, default) = suite_help_names(&help);
        assert_eq!(listed, table, "{args:?}: {help}");
        assert_eq!(default, table, "{args:?}: {help}");
        for family in rlm_registry::eval::FAMILIES {
            assert!(
                help.contains(&format!("- {}: ", family.name())),
                "{args:?}: {family} is described"
            );
        }
    }
}

#[test]
fn bad_suites_sizes_and_methods_are_usage_errors() {
    for (args, message) in [
        (&["--suite", "oolong"][..], "unknown task family `oolong`"),
        (&["--sizes", "12q"], "invalid size `12q`"),
        (&["--methods", "rlm,magic"], "unknown method `magic`"),
        (
            &["--tasks", "no-such-file.jsonl"],
            "cannot read no-such-file.jsonl",
        ),
    ] {
        let output = rlm()
            .arg("eval")
            .args(args)
            .args(["--out", "/nonexistent/x"])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(
            text(&output.stderr).contains(message),
            "{}",
            text(&output.stderr)
        );
    }
}

#[test]
fn the_report_opens_in_headless_chromium_and_shows_the_plot() {
    let Some(chromium) = support::external::chromium() else {
        return;
    };
    let server = OpenAiServer::always(Behavior::ByPrompt(vec![
        ("\n\nQuestion: ".into(), Behavior::reply("0")),
        (String::new(), lua("FINAL('0')")),
    ]));
    let dir = tempdir();
    let out = dir.path().join("out");
    let output = rlm()
        .args(eval_args(&server, &out))
        .args([
            "--suite",
            "niah,aggregate",
            "--sizes",
            "1k,2k",
            "--n",
            "1",
            "--methods",
            "rlm,direct",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let report = out.join("report.html");
    let profile = dir.path().join("profile");
    let flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
    ];
    let dom = Command::new(chromium)
        .args(flags)
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", report.display()))
        .output()
        .unwrap();
    let dom = text(&dom.stdout);
    assert!(dom.contains("<svg id=\"score-plot\""), "{dom}");
    assert_eq!(dom.matches("class=\"method-line\"").count(), 2, "{dom}");
    assert!(dom.contains("data-method=\"rlm\"") && dom.contains("data-method=\"direct\""));
    let shot = dir.path().join("report.png");
    let status = Command::new(chromium)
        .args(flags)
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--screenshot={}", shot.display()))
        .arg("--window-size=1000,900")
        .arg(format!("file://{}", report.display()))
        .output()
        .unwrap();
    assert!(status.status.success(), "{}", text(&status.stderr));
    assert!(
        std::fs::metadata(&shot).unwrap().len() > 10_000,
        "a screenshot with content"
    );
    if let Ok(keep) = std::env::var("RLM_EVAL_SCREENSHOT") {
        std::fs::copy(&shot, keep).unwrap();
    }
}

/// End to end with a real model: `RLM_EVAL_BASE_URL=http://127.0.0.1:8089/v1 cargo test
/// --all-features --test it -- --ignored eval::`. A tiny model scores near 0; this checks
/// that a real server's replies go through every method without a crash.
#[test]
#[ignore = "needs a real OpenAI-compatible server in RLM_EVAL_BASE_URL"]
fn a_real_model_runs_every_method_end_to_end() {
    let base_url = std::env::var("RLM_EVAL_BASE_URL").expect("RLM_EVAL_BASE_URL");
    let dir = tempdir();
    let output = rlm()
        .args(["eval", "--base-url", &base_url, "--model", "local", "--out"])
        .arg(dir.path())
        .args([
            "--suite",
            "niah",
            "--sizes",
            "1k",
            "--n",
            "1",
            "--methods",
            "rlm,direct,rlm-bare",
            "--max-iterations",
            "2",
            "--context-window",
            "6000",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_eq!(results_of(dir.path()).len(), 3);
}

/// A task may carry a JSON Schema: the `rlm` method's answer must match it and is scored
/// as its JSON text; a schema that is not one is the task's error.
#[test]
fn a_task_with_a_schema_is_answered_with_its_json() {
    let mut typed = task(
        "typed",
        "How many, and which?",
        r#"{"count":2,"names":["a","b"]}"#,
    );
    typed.schema = Some(serde_json::json!({
        "type": "object",
        "properties": {"count": {"type": "integer"}, "names": {"type": "array"}},
        "required": ["count", "names"]
    }));
    let mut broken = task("broken", "Q", "x");
    broken.schema = Some(serde_json::json!({"type": 12}));
    let server = OpenAiServer::start(
        vec![
            lua("FINAL({count = '2', names = {'a', 'b'}})"),
            lua("FINAL({names = {'a', 'b'}, count = 2})"),
        ],
        Behavior::status(500),
    );
    let dir = tempdir();
    let results = run_lib(&server, &[typed, broken], &[EvalMethod::Rlm], dir.path());
    assert_eq!(
        results[0].answer.as_deref(),
        Some(r#"{"count":2,"names":["a","b"]}"#)
    );
    assert_eq!((results[0].score, results[0].turns), (1.0, 2));
    let error = results[1].error.as_deref().unwrap();
    assert!(
        error.starts_with("task `broken`: its schema is not a valid JSON Schema"),
        "{error}"
    );
    assert_eq!(server.request_count(), 2, "the broken task asked nothing");
}

/// Lua that answers a `corpus` task about `company` as a model would: the founder from
/// the company's profile, then the founder's birthplace from their biography.
fn solving_corpus_code(company: &str) -> String {
    format!(
        r#"local founder
for _, doc in ipairs(context) do
  founder = founder or doc.text:match("{company} was founded in %d+ by ([^.]+)%.")
end
for i, doc in ipairs(context) do
  local town = founder and doc.text:match(founder .. " was born in ([^.]+)%.")
  if town then FINAL(town) end
end"#
    )
}

#[test]
fn the_corpus_family_gives_rlm_a_corpus_and_direct_the_documents_under_their_names() {
    use rlm_registry::eval::{Family, Size, generate_task};
    let family = Family::named("corpus").unwrap();
    let tasks: Vec<Task> = (0..2)
        .map(|index| generate_task(family, Size::new(8_000), 1, index))
        .collect();
    let mut rules = Vec::new();
    for task in &tasks {
        let company = task.question.split("founder of ").nth(1).unwrap();
        let company = company.split(" born?").next().unwrap();
        // `direct` gets the documents one after the other, each under its docid.
        rules.push((
            "## doc-0000001\n".to_string(),
            Behavior::ByPrompt(vec![(company.to_string(), Behavior::reply(&task.answer))]),
        ));
        rules.push((company.to_string(), lua(&solving_corpus_code(company))));
    }
    rules.push((String::new(), Behavior::status(500)));
    let server = OpenAiServer::always(Behavior::ByPrompt(rules));
    let dir = tempdir();
    let out = dir.path().join("out");
    let output = rlm()
        .args(eval_args(&server, &out))
        .args([
            "--suite",
            "corpus",
            "--sizes",
            "8k",
            "--n",
            "2",
            "--methods",
            "rlm,direct",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let results = results_of(&out);
    assert_eq!(results.len(), 4);
    for result in &results {
        assert_eq!(result["score"], 1.0, "{result}");
    }
    // The model was told it has a corpus.
    assert!(
        bodies(&server)
            .iter()
            .any(|body| body.to_string().contains("`context` is a corpus")),
        "the rlm prompt describes the corpus"
    );
}
