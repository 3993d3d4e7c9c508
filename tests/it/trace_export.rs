//! The reference RLM's log format (alexzhang13/rlm's `RLMLogger` JSONL): `rlm trace export
//! --format rlm`, `Rlm::trace_format` and `rlm ask --trace-format rlm`, each line checked
//! field by field against the reference's types (`rlm/core/types.py`). The checker is
//! itself checked against `tests/fixtures/trace/reference.jsonl`, written by the
//! reference's own logger and types (`make_reference.py` next to it).

use crate::support;

use std::path::Path;
use std::time::Duration;

use rlm_registry::rlm::{Context, RlmError, TraceFormat};
use rlm_registry::trace::{ExportOptions, Trace, export_rlm};
use serde_json::Value;
use support::openai_server::{Behavior, OpenAiServer};
use support::rlm_loop::*;

// ---- The reference's types, as a checker -------------------------------------------

type Checked = Result<(), String>;

/// `value` is an object with exactly the `required` keys, plus any of `optional`.
fn keys(value: &Value, at: &str, required: &[&str], optional: &[&str]) -> Checked {
    let object = value.as_object().ok_or(format!("{at}: not an object"))?;
    for key in required {
        if !object.contains_key(*key) {
            return Err(format!("{at}: missing `{key}`"));
        }
    }
    for key in object.keys() {
        if !required.contains(&key.as_str()) && !optional.contains(&key.as_str()) {
            return Err(format!("{at}: unexpected `{key}`"));
        }
    }
    Ok(())
}

fn is(ok: bool, at: &str, what: &str) -> Checked {
    if ok {
        Ok(())
    } else {
        Err(format!("{at}: not {what}"))
    }
}

fn string(v: &Value, at: &str) -> Checked {
    is(v.is_string(), at, "a string")
}

fn int(v: &Value, at: &str) -> Checked {
    is(v.is_u64(), at, "an int")
}

fn number(v: &Value, at: &str) -> Checked {
    is(v.is_number(), at, "a number")
}

fn optional_string(v: &Value, at: &str) -> Checked {
    is(v.is_string() || v.is_null(), at, "a string or None")
}

/// `str | dict[str, Any]` (`RLMIteration.prompt`), as a message list in practice.
fn prompt(v: &Value, at: &str) -> Checked {
    if v.is_string() {
        return Ok(());
    }
    let messages = v.as_array().ok_or(format!("{at}: not a prompt"))?;
    for (i, m) in messages.iter().enumerate() {
        let at = format!("{at}[{i}]");
        keys(m, &at, &["role", "content"], &[])?;
        string(&m["role"], &at)?;
        string(&m["content"], &at)?;
    }
    Ok(())
}

/// `RLMLogger.log_metadata`: `type`, `timestamp`, then `RLMMetadata.to_dict()`.
fn check_metadata(v: &Value) -> Checked {
    let at = "metadata";
    keys(
        v,
        at,
        &[
            "type",
            "timestamp",
            "root_model",
            "max_depth",
            "max_iterations",
            "backend",
            "backend_kwargs",
            "environment_type",
            "environment_kwargs",
            "other_backends",
        ],
        &[],
    )?;
    is(v["type"] == "metadata", at, "type metadata")?;
    check_run_metadata(v, at)?;
    string(&v["timestamp"], at)
}

fn check_run_metadata(v: &Value, at: &str) -> Checked {
    string(&v["root_model"], at)?;
    int(&v["max_depth"], at)?;
    int(&v["max_iterations"], at)?;
    string(&v["backend"], at)?;
    is(v["backend_kwargs"].is_object(), at, "backend_kwargs: dict")?;
    string(&v["environment_type"], at)?;
    is(
        v["environment_kwargs"].is_object(),
        at,
        "environment_kwargs: dict",
    )?;
    is(
        v["other_backends"].is_null() || v["other_backends"].is_array(),
        at,
        "other_backends: list | None",
    )
}

/// `RLMLogger.log`: `type`, `iteration`, `timestamp`, then `RLMIteration.to_dict()`.
fn check_iteration(v: &Value, at: &str) -> Checked {
    keys(
        v,
        at,
        &[
            "type",
            "iteration",
            "timestamp",
            "prompt",
            "response",
            "code_blocks",
            "final_answer",
            "iteration_time",
        ],
        &[],
    )?;
    is(v["type"] == "iteration", at, "type iteration")?;
    int(&v["iteration"], at)?;
    string(&v["timestamp"], at)?;
    prompt(&v["prompt"], &format!("{at}.prompt"))?;
    string(&v["response"], at)?;
    optional_string(&v["final_answer"], at)?;
    is(
        v["iteration_time"].is_number() || v["iteration_time"].is_null(),
        at,
        "iteration_time: float | None",
    )?;
    let blocks = v["code_blocks"]
        .as_array()
        .ok_or(format!("{at}: code_blocks"))?;
    for (i, block) in blocks.iter().enumerate() {
        let at = format!("{at}.code_blocks[{i}]");
        keys(block, &at, &["code", "result"], &[])?;
        string(&block["code"], &at)?;
        check_result(&block["result"], &format!("{at}.result"))?;
    }
    Ok(())
}

/// `REPLResult.to_dict()`.
fn check_result(v: &Value, at: &str) -> Checked {
    keys(
        v,
        at,
        &[
            "stdout",
            "stderr",
            "locals",
            "execution_time",
            "rlm_calls",
            "final_answer",
        ],
        &[],
    )?;
    string(&v["stdout"], at)?;
    string(&v["stderr"], at)?;
    is(v["locals"].is_object(), at, "locals: dict")?;
    number(&v["execution_time"], at)?;
    optional_string(&v["final_answer"], at)?;
    let calls = v["rlm_calls"]
        .as_array()
        .ok_or(format!("{at}: rlm_calls"))?;
    for (i, call) in calls.iter().enumerate() {
        check_completion(call, &format!("{at}.rlm_calls[{i}]"))?;
    }
    Ok(())
}

/// `RLMChatCompletion.to_dict()`; its `metadata` is a trajectory (`get_trajectory()`).
fn check_completion(v: &Value, at: &str) -> Checked {
    keys(
        v,
        at,
        &[
            "root_model",
            "prompt",
            "response",
            "usage_summary",
            "execution_time",
        ],
        &["metadata", "error"],
    )?;
    string(&v["root_model"], at)?;
    prompt(&v["prompt"], &format!("{at}.prompt"))?;
    string(&v["response"], at)?;
    number(&v["execution_time"], at)?;
    if let Some(error) = v.get("error") {
        string(error, at)?;
    }
    let usage = &v["usage_summary"];
    keys(usage, at, &["model_usage_summaries"], &["total_cost"])?;
    let models = usage["model_usage_summaries"]
        .as_object()
        .ok_or(format!("{at}: model_usage_summaries"))?;
    for (model, summary) in models {
        let at = format!("{at}.usage_summary.{model}");
        keys(
            summary,
            &at,
            &["total_calls", "total_input_tokens", "total_output_tokens"],
            &["total_cost"],
        )?;
        int(&summary["total_calls"], &at)?;
        int(&summary["total_input_tokens"], &at)?;
        int(&summary["total_output_tokens"], &at)?;
    }
    if let Some(trajectory) = v.get("metadata") {
        let at = format!("{at}.metadata");
        keys(trajectory, &at, &["run_metadata", "iterations"], &[])?;
        check_run_metadata(&trajectory["run_metadata"], &at)?;
        let iterations = trajectory["iterations"]
            .as_array()
            .ok_or(format!("{at}: iterations"))?;
        for (i, iteration) in iterations.iter().enumerate() {
            check_iteration(iteration, &format!("{at}.iterations[{i}]"))?;
        }
    }
    Ok(())
}

/// A whole log: a metadata line, then iterations numbered from 1.
fn check_log(text: &str) -> Checked {
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    let (first, rest) = lines.split_first().ok_or("an empty log")?;
    check_metadata(first)?;
    for (i, line) in rest.iter().enumerate() {
        check_iteration(line, &format!("line {}", i + 2))?;
        is(line["iteration"] == i + 1, "iteration", "numbered from 1")?;
    }
    Ok(())
}

fn fixture(name: &str) -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/trace")
            .join(name),
    )
    .unwrap()
}

#[test]
fn the_checker_accepts_the_reference_loggers_own_output_and_rejects_a_broken_copy() {
    let reference = fixture("reference.jsonl");
    check_log(&reference).unwrap();
    // The same log with one field missing, one mistyped, one extra: each is caught.
    let broken = [
        (
            "\"iteration_time\": 0.03",
            "\"iteration_tim\": 0.03",
            "missing `iteration_time`",
        ),
        (
            "\"stdout\": \"from the child\\n\"",
            "\"stdout\": 3",
            "not a string",
        ),
        (
            "\"total_calls\": 1",
            "\"total_calls\": 1, \"calls\": 1",
            "unexpected `calls`",
        ),
    ];
    for (from, to, error) in broken {
        assert!(reference.contains(from), "{from}");
        let text = reference.replacen(from, to, 1);
        let found = check_log(&text).unwrap_err();
        assert!(found.contains(error), "{found}");
    }
}

/// A run with a child, an error and a final answer, traced in both formats.
fn both_formats(dir: &Path) -> (String, String, OpenAiServer) {
    let script = || {
        vec![
            lua("print(rlm_query('Sub-task'))"),
            lua("FINAL('from the child')"),
            Behavior::reply("```lua\nprint(nope())\n```"),
            lua("FINAL('done')"),
        ]
    };
    let events = dir.join("events.jsonl");
    let server = OpenAiServer::start(script(), Behavior::status(500));
    rlm(&server, 10)
        .trace_file(&events)
        .unwrap()
        .run("Q", Some(Context::from("ctx")))
        .unwrap();
    let reference = dir.join("rlm.jsonl");
    let streamed = OpenAiServer::start(script(), Behavior::status(500));
    rlm(&streamed, 10)
        .trace_file(&reference)
        .unwrap()
        .trace_format(TraceFormat::Rlm)
        .run("Q", Some(Context::from("ctx")))
        .unwrap();
    (
        std::fs::read_to_string(events).unwrap(),
        std::fs::read_to_string(reference).unwrap(),
        server,
    )
}

/// `value` without its timestamps and times, which differ from run to run.
fn timeless(mut value: Value) -> Value {
    match &mut value {
        Value::Object(map) => {
            for key in ["timestamp", "iteration_time", "execution_time"] {
                map.remove(key);
            }
            for v in map.values_mut() {
                *v = timeless(v.take());
            }
        }
        Value::Array(items) => {
            for v in items.iter_mut() {
                *v = timeless(v.take());
            }
        }
        _ => {}
    }
    value
}

/// `events` with every `start` line saying the run began at 2024-03-01T12:04:05Z and
/// every line written `at_ms` 250 after it, so the export's timestamps are known.
fn pinned_clock(events: &str) -> String {
    events
        .lines()
        .map(|line| {
            let mut record: Value = serde_json::from_str(line).unwrap();
            if record["event"] == "start" {
                record["started_unix_ms"] = 1_709_294_645_000u64.into();
            }
            record["at_ms"] = 250.into();
            record.to_string() + "\n"
        })
        .collect()
}

/// The export's lines, parsed.
fn exported(events: &str) -> Vec<Value> {
    let text = export_rlm(&Trace::parse(events).unwrap(), &ExportOptions::default());
    check_log(&text).unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn the_export_has_every_field_of_the_reference_types_and_nests_the_child() {
    let dir = tempfile::tempdir().unwrap();
    let (events, _, server) = both_formats(dir.path());
    let lines = exported(&pinned_clock(&events));
    assert_eq!(lines.len(), 4, "metadata and the root's three turns");
    let meta = &lines[0];
    assert_eq!(meta["timestamp"], "2024-03-01T12:04:05.250000");
    assert_eq!(lines[3]["timestamp"], "2024-03-01T12:04:05.250000");
    assert_eq!(meta["root_model"], "test-model");
    assert_eq!(
        meta["max_depth"], 2,
        "the reference counts the root as depth 1"
    );
    assert_eq!(meta["max_iterations"], 10);
    // Each iteration's prompt is what the loop sent.
    let bodies = bodies(&server);
    for (line, request) in [(1, 0), (2, 2), (3, 3)] {
        assert_eq!(&lines[line]["prompt"], &bodies[request]["messages"]);
    }
    let first = &lines[1];
    assert_eq!(
        first["response"],
        "```lua\nprint(rlm_query('Sub-task'))\n```"
    );
    let result = &first["code_blocks"][0]["result"];
    assert_eq!(result["stdout"], "from the child\n");
    assert_eq!(result["stderr"], "");
    let child = &result["rlm_calls"][0];
    assert_eq!(child["prompt"], "Sub-task");
    assert_eq!(child["response"], "from the child");
    assert_eq!(
        child["usage_summary"]["model_usage_summaries"]["test-model"]["total_calls"],
        1
    );
    let child_iterations = child["metadata"]["iterations"].as_array().unwrap();
    assert_eq!(child_iterations.len(), 1);
    assert_eq!(child_iterations[0]["final_answer"], "from the child");
    assert_eq!(child_iterations[0]["prompt"], bodies[1]["messages"]);
    let error = &lines[2]["code_blocks"][0]["result"];
    assert!(
        error["stderr"].as_str().unwrap().contains("nope"),
        "{error}"
    );
    assert_eq!(lines[2]["final_answer"], Value::Null);
    assert_eq!(lines[3]["final_answer"], "done");
    assert_eq!(lines[3]["code_blocks"][0]["result"]["final_answer"], "done");
}

#[test]
fn the_streaming_writer_and_the_export_of_a_finished_trace_agree() {
    let dir = tempfile::tempdir().unwrap();
    let (events, streamed, _) = both_formats(dir.path());
    check_log(&streamed).unwrap();
    let exported = export_rlm(&Trace::parse(&events).unwrap(), &ExportOptions::default());
    let parse = |text: &str| -> Vec<Value> {
        text.lines()
            .map(|l| timeless(serde_json::from_str(l).unwrap()))
            .collect()
    };
    assert_eq!(parse(&streamed), parse(&exported));
}

/// `rlm trace export --format rlm FILE` with `args`: its metadata line, after checking the
/// whole log.
fn export_command(path: &Path, args: &[&str]) -> Value {
    let mut all = vec!["trace", "export", "--format", "rlm"];
    all.extend(args);
    all.push(path.to_str().unwrap());
    let out = support::cli::rlm(&all);
    assert!(out.status.success(), "{}", support::cli::stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    check_log(&text).unwrap();
    serde_json::from_str(text.lines().next().unwrap()).unwrap()
}

#[test]
fn the_export_command_writes_the_trace_s_own_metadata_and_assumes_only_for_an_older_trace() {
    let dir = tempfile::tempdir().unwrap();
    let (events, _, _) = both_formats(dir.path());
    let path = dir.path().join("events.jsonl");
    std::fs::write(&path, &events).unwrap();
    let assume = ["--model", "m", "--max-depth", "4", "--max-iterations", "7"];
    let first = export_command(&path, &assume);
    assert_eq!(first["type"], "metadata");
    assert_eq!(first["root_model"], "test-model", "the trace's own model");
    assert_eq!(
        (
            first["max_depth"].as_u64(),
            first["max_iterations"].as_u64()
        ),
        (Some(2), Some(10))
    );

    // A trace written before the start lines recorded the run still reads and exports,
    // with what the command is told, or what the trace shows.
    let older: String = events
        .lines()
        .map(|line| {
            let mut record: Value = serde_json::from_str(line).unwrap();
            for field in [
                "version",
                "model",
                "base_url",
                "started_unix_ms",
                "prompt_mode",
                "limits",
                "context",
                "batch",
            ] {
                record.as_object_mut().unwrap().remove(field);
            }
            record.to_string() + "\n"
        })
        .collect();
    let older_path = dir.path().join("older.jsonl");
    std::fs::write(&older_path, older).unwrap();
    let first = export_command(&older_path, &assume);
    assert_eq!(first["root_model"], "m");
    assert_eq!(
        (
            first["max_depth"].as_u64(),
            first["max_iterations"].as_u64()
        ),
        (Some(5), Some(7))
    );
    let first = export_command(&older_path, &[]);
    assert_eq!(first["root_model"], "unknown");
    assert_eq!(
        (
            first["max_depth"].as_u64(),
            first["max_iterations"].as_u64()
        ),
        (Some(2), Some(3)),
        "the deepest agent and the most turns, for want of better"
    );
}

#[test]
fn a_run_that_stopped_early_exports_its_real_limits_model_and_start_time() {
    let server = OpenAiServer::always(lua("print('still looking')"));
    let trace = Shared::default();
    let before = unix_ms();
    let result = rlm(&server, 3)
        .max_depth(2)
        .trace(trace.clone())
        .run("Q", Some(Context::from("ctx")));
    assert!(matches!(
        result,
        Err(RlmError::IterationLimit { max_iterations: 3 })
    ));
    let events = trace.text();
    let started = events_of(&events)[0]["started_unix_ms"].as_u64().unwrap();
    assert!((before..=unix_ms()).contains(&started), "{started}");

    let lines = exported(&events);
    assert_eq!(lines.len(), 4, "metadata and three iterations");
    let meta = &lines[0];
    assert_eq!(meta["root_model"], "test-model");
    assert_eq!(meta["backend_kwargs"]["model_name"], "test-model");
    assert_eq!(meta["max_iterations"], 3);
    assert_eq!(
        meta["max_depth"], 3,
        "depth limit 2; the reference counts the root as 1"
    );
    // The same run with its clock pinned: the timestamps are its start plus `at_ms`.
    let pinned = exported(&pinned_clock(&events));
    assert_eq!(pinned[0]["timestamp"], "2024-03-01T12:04:05.250000");
    assert_eq!(pinned[3]["timestamp"], "2024-03-01T12:04:05.250000");
}

/// Milliseconds since the Unix epoch, now.
fn unix_ms() -> u64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    u64::try_from(now.unwrap().as_millis()).unwrap()
}

/// A root that starts three children in one `rlm_query_batched` call; the first takes
/// longest and the last answers at once, so they end in the reverse of the batch's order.
fn batch_finishing_in_reverse() -> OpenAiServer {
    let slow =
        |answer: &str, ms: u64| lua(&format!("FINAL('{answer}')")).after(Duration::from_millis(ms));
    OpenAiServer::start(
        Vec::new(),
        Behavior::ByPrompt(vec![
            (
                "Run the batch".into(),
                lua(
                    "local a = rlm_query_batched({'task-1', 'task-2', 'task-3'})\nprint(table.concat(a, ','))",
                ),
            ),
            ("one,two,three".into(), lua("FINAL('all done')")),
            ("task-1".into(), slow("one", 800)),
            ("task-2".into(), slow("two", 400)),
            ("task-3".into(), slow("three", 0)),
        ]),
    )
}

#[test]
fn batched_children_that_end_out_of_order_are_exported_in_the_batch_s_order() {
    let server = batch_finishing_in_reverse();
    let trace = Shared::default();
    let answer = rlm(&server, 5)
        .trace(trace.clone())
        .run("Run the batch", None)
        .unwrap();
    assert_eq!(answer.text, "all done");
    let events = trace.text();
    let parsed = Trace::parse(&events).unwrap();
    let root = parsed.root().unwrap();
    let ids: Vec<&str> = parsed
        .children_of_turn(root, 1)
        .map(|c| c.id.as_str())
        .collect();
    assert_eq!(ids, ["0.1", "0.2", "0.3"]);
    let mut ended = Vec::new();
    for (index, id) in ids.iter().enumerate() {
        let child = parsed.agent(id).unwrap();
        assert_eq!(
            child.question,
            format!("task-{}", index + 1),
            "ids follow the batch"
        );
        let batch = child.setup.batch.unwrap();
        assert_eq!((batch.index, batch.size), (index, 3));
        ended.push(child.turns[0].at_ms.unwrap());
    }
    assert!(
        ended[2] < ended[1] && ended[1] < ended[0],
        "they ended in reverse: {ended:?}"
    );
    // Their lines are in the order they were written: the last of the batch ends first.
    let written: Vec<String> = events_of(&events)
        .iter()
        .filter(|e| e["event"] == "turn" && e["depth"] == 1)
        .map(|e| e["agent"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(written, ["0.3", "0.2", "0.1"]);

    let in_batch_order = |lines: &[Value]| -> Vec<String> {
        let calls = lines[1]["code_blocks"][0]["result"]["rlm_calls"]
            .as_array()
            .unwrap();
        calls
            .iter()
            .map(|c| {
                format!(
                    "{}={}",
                    c["prompt"].as_str().unwrap(),
                    c["response"].as_str().unwrap()
                )
            })
            .collect()
    };
    let expected = ["task-1=one", "task-2=two", "task-3=three"];
    assert_eq!(in_batch_order(&exported(&events)), expected);

    // The streaming writer gives the same order.
    let server = batch_finishing_in_reverse();
    let streamed = Shared::default();
    rlm(&server, 5)
        .trace(streamed.clone())
        .trace_format(TraceFormat::Rlm)
        .run("Run the batch", None)
        .unwrap();
    let text = streamed.text();
    check_log(&text).unwrap();
    assert_eq!(in_batch_order(&events_of(&text)), expected);
}

#[cfg(feature = "cli")]
mod ask {
    use super::*;

    fn rlm_ask(server: &OpenAiServer, dir: &Path, args: &[&str]) -> std::process::Output {
        support::cli::rlm_command()
            .arg("ask")
            .args(args)
            .args(support::cli::llm_args(&server.base_url(), "test-model"))
            .arg("-q")
            .current_dir(dir)
            .output()
            .expect("rlm runs")
    }

    #[test]
    fn ask_writes_the_reference_format_and_the_page_on_success_and_on_failure() {
        let dir = tempfile::tempdir().unwrap();
        let server = OpenAiServer::start(
            vec![lua("print('looking')"), lua("FINAL('42')")],
            Behavior::status(500),
        );
        let out = rlm_ask(
            &server,
            dir.path(),
            &["Q", "--trace", "run.jsonl", "--trace-format", "rlm"],
        );
        assert_eq!(out.status.code(), Some(0));
        let text = std::fs::read_to_string(dir.path().join("run.jsonl")).unwrap();
        check_log(&text).unwrap();
        assert!(text.contains("\"final_answer\":\"42\""));

        // --trace-html with the events trace: both files.
        let server = OpenAiServer::start(vec![lua("FINAL('42')")], Behavior::status(500));
        let out = rlm_ask(
            &server,
            dir.path(),
            &["Q", "--trace", "events.jsonl", "--trace-html", "run.html"],
        );
        assert_eq!(out.status.code(), Some(0));
        let events = Trace::read(dir.path().join("events.jsonl")).unwrap();
        assert_eq!(events.agents.len(), 1);
        let page = std::fs::read_to_string(dir.path().join("run.html")).unwrap();
        assert!(page.contains("\"final\":\"42\""));

        // A failed run (the iteration cap) still gets its page, and with --trace-format
        // rlm its reference log too.
        let server = OpenAiServer::always(lua("print('still looking')"));
        let out = rlm_ask(
            &server,
            dir.path(),
            &[
                "Q",
                "--max-iterations",
                "2",
                "--trace",
                "failed.jsonl",
                "--trace-format",
                "rlm",
                "--trace-html",
                "failed.html",
            ],
        );
        assert_eq!(out.status.code(), Some(1));
        let page = std::fs::read_to_string(dir.path().join("failed.html")).unwrap();
        assert!(page.contains("iteration limit reached"));
        let text = std::fs::read_to_string(dir.path().join("failed.jsonl")).unwrap();
        check_log(&text).unwrap();
        assert_eq!(text.lines().count(), 3, "metadata and two iterations");
    }

    #[test]
    fn a_trace_format_without_a_trace_is_a_usage_error() {
        let server = OpenAiServer::always(lua("FINAL('42')"));
        let dir = tempfile::tempdir().unwrap();
        let out = rlm_ask(&server, dir.path(), &["Q", "--trace-format", "rlm"]);
        assert_eq!(out.status.code(), Some(2));
    }
}
