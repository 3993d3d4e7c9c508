//! Property tests of the trace readers (`Trace::parse` and what renders a trace, and
//! `Replay::from_jsonl`), run by `cargo test` on stable with a fixed number of cases, so
//! they take seconds: the stable counterpart of fuzzing them (fuzz/README.md).
//!
//! - Arbitrary bytes, arbitrary lines, and arbitrary edits of real traces (the recorded
//!   runs of `tests/fixtures/runs/`: lines dropped, repeated, swapped, cut or spliced,
//!   any field given any value) never make a reader or a renderer panic.
//! - A trace cut anywhere inside a line (a run still being written, or a crash) reads as
//!   the lines before it, with the torn line reported as partial; replay refuses it as
//!   cut short.

use std::path::Path;

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, TestRunner};
use rlm_registry::rlm::{Replay, ReplayError};
use rlm_registry::trace::{self, ExportOptions, Trace, TraceError};
use serde_json::{Value as Json, json};

/// Cases per property: enough to meet every kind of edit many times, few enough for a
/// debug build to run them in a couple of seconds.
const CASES: u32 = 256;

fn runner() -> TestRunner {
    TestRunner::new(Config {
        // PROPTEST_CASES runs more, as a longer fuzzing session would.
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|cases| cases.parse().ok())
            .unwrap_or(CASES),
        // A failure is shown with its shrunk input; no file is written into the tree.
        failure_persistence: None,
        ..Config::default()
    })
}

/// The recorded runs' traces: real traces of every kind of run the loop makes.
fn real_traces() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/runs");
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    paths.sort();
    let traces: Vec<String> = paths
        .iter()
        .map(|path| std::fs::read_to_string(path).unwrap())
        .collect();
    assert!(traces.len() >= 5, "the recorded runs are there");
    traces
}

/// Everything that reads a trace, on `text`: whatever it is, nothing may panic.
fn read_every_way(text: &str) {
    if let Ok(trace) = Trace::parse(text) {
        let _ = trace.summary();
        let _ = trace::show(&trace);
        let _ = trace::show_json(&trace);
        let _ = trace::html(&trace, "run");
        let _ = trace::export_rlm(&trace, &ExportOptions::default());
        for agent in &trace.agents {
            let _ = agent.outcome();
            let _ = agent.elapsed_ms();
            let _ = trace::show_agent(&trace, &agent.id);
            let _ = trace::agent_json(&trace, &agent.id);
            let _ = trace.children_of_turn(agent, 1).count();
            for turn in &agent.turns {
                let _ = agent.messages_at(turn.turn);
                let _ = trace::show_turn(&trace, &agent.id, turn.turn);
                let _ = trace::turn_json(&trace, &agent.id, turn.turn);
            }
        }
    }
    let _ = Replay::from_jsonl(text);
}

#[test]
fn arbitrary_bytes_never_make_a_reader_panic() {
    runner()
        .run(&prop::collection::vec(any::<u8>(), 0..600), |bytes| {
            read_every_way(&String::from_utf8_lossy(&bytes));
            Ok(())
        })
        .unwrap();
}

/// Values a field may be given: the edges of every number type a record holds, text
/// shaped like an agent's id, and arbitrary JSON.
fn field_value() -> impl Strategy<Value = Json> {
    let edges = [
        json!(null),
        json!(0),
        json!(1),
        json!(-1),
        json!(u32::MAX),
        json!(u64::MAX),
        json!(i64::MIN),
        json!(usize::MAX),
        json!(1e308),
        json!(-0.5),
        json!(""),
        json!("0"),
        json!("0.1"),
        json!("0.1.1"),
        json!("."),
        json!("0..1"),
        json!("0.99999999999999999999"),
        json!("not run"),
        json!([]),
        json!({}),
        json!([{}]),
        json!(true),
    ];
    let arbitrary = prop_oneof![
        any::<i64>().prop_map(Json::from),
        any::<u64>().prop_map(Json::from),
        prop::collection::vec(any::<char>(), 0..8)
            .prop_map(|chars| Json::String(chars.into_iter().collect())),
    ];
    prop_oneof![3 => prop::sample::select(edges.to_vec()), 1 => arbitrary]
}

/// One edit of a trace's text.
#[derive(Clone, Debug)]
enum Edit {
    Drop(Index),
    Repeat(Index),
    Swap(Index, Index),
    /// The line cut at this byte (on a character boundary).
    Cut(Index, Index),
    /// These bytes put in as a line of their own.
    Splice(Index, Vec<u8>),
    /// A field (anywhere in the line, nested ones included) given a value.
    Set(Index, Index, Json),
    /// A field (anywhere in the line) taken out.
    Remove(Index, Index),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        1 => any::<Index>().prop_map(Edit::Drop),
        1 => any::<Index>().prop_map(Edit::Repeat),
        1 => (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Edit::Swap(a, b)),
        1 => (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Edit::Cut(a, b)),
        1 => (any::<Index>(), prop::collection::vec(any::<u8>(), 0..40))
            .prop_map(|(a, bytes)| Edit::Splice(a, bytes)),
        4 => (any::<Index>(), any::<Index>(), field_value())
            .prop_map(|(a, b, value)| Edit::Set(a, b, value)),
        2 => (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Edit::Remove(a, b)),
    ]
}

/// The JSON Pointer of every value in `value`, the whole one included.
fn pointers(value: &Json, at: String, out: &mut Vec<String>) {
    match value {
        Json::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                pointers(item, format!("{at}/{i}"), out);
            }
        }
        Json::Object(fields) => {
            for (key, item) in fields {
                let key = key.replace('~', "~0").replace('/', "~1");
                pointers(item, format!("{at}/{key}"), out);
            }
        }
        _ => {}
    }
    out.push(at);
}

/// `line` with the value at one of its places set to `new` (`None`: taken out of its
/// object or array); a line that is not JSON is left alone.
fn set_field(line: &str, place: Index, new: Option<Json>) -> String {
    let Ok(mut value) = serde_json::from_str::<Json>(line) else {
        return line.to_string();
    };
    let mut places = Vec::new();
    pointers(&value, String::new(), &mut places);
    let pointer = place.get(&places).clone();
    match (new, pointer.rsplit_once('/')) {
        (Some(new), _) => match value.pointer_mut(&pointer) {
            Some(slot) => *slot = new,
            None => return line.to_string(),
        },
        (None, Some((parent, last))) => match value.pointer_mut(parent) {
            Some(Json::Object(fields)) => {
                fields.remove(&last.replace("~1", "/").replace("~0", "~"));
            }
            Some(Json::Array(items)) => {
                if let Ok(i) = last.parse::<usize>() {
                    items.remove(i);
                }
            }
            _ => {}
        },
        (None, None) => return String::new(),
    }
    value.to_string()
}

fn apply(text: &str, edits: &[Edit]) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    for edit in edits {
        if lines.is_empty() {
            break;
        }
        match edit {
            Edit::Drop(a) => {
                lines.remove(a.index(lines.len()));
            }
            Edit::Repeat(a) => {
                let line = a.get(&lines).clone();
                lines.insert(a.index(lines.len()), line);
            }
            Edit::Swap(a, b) => {
                let (a, b) = (a.index(lines.len()), b.index(lines.len()));
                lines.swap(a, b);
            }
            Edit::Cut(a, b) => {
                let i = a.index(lines.len());
                let line = &mut lines[i];
                let mut at = b.index(line.len() + 1);
                while !line.is_char_boundary(at) {
                    at -= 1;
                }
                line.truncate(at);
            }
            Edit::Splice(a, bytes) => {
                let at = a.index(lines.len() + 1);
                lines.insert(at, String::from_utf8_lossy(bytes).replace('\n', " "));
            }
            Edit::Set(a, place, value) => {
                let i = a.index(lines.len());
                lines[i] = set_field(&lines[i], *place, Some(value.clone()));
            }
            Edit::Remove(a, place) => {
                let i = a.index(lines.len());
                lines[i] = set_field(&lines[i], *place, None);
            }
        }
    }
    let mut text = lines.join("\n");
    text.push('\n');
    text
}

#[test]
fn edited_real_traces_never_make_a_reader_panic() {
    let traces = real_traces();
    let cases = (any::<Index>(), prop::collection::vec(edit(), 1..6));
    runner()
        .run(&cases, |(which, edits)| {
            read_every_way(&apply(which.get(&traces).as_str(), &edits));
            Ok(())
        })
        .unwrap();
}

/// `text` cut at the character boundary at or before `at`.
fn cut_at(text: &str, mut at: usize) -> &str {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    &text[..at]
}

#[test]
fn a_trace_torn_inside_a_line_reads_as_the_lines_before_it() {
    let traces = real_traces();
    let cases = (any::<Index>(), any::<Index>(), any::<Index>());
    runner()
        .run(&cases, |(which, line, at)| {
            let text = which.get(&traces).as_str();
            let lines: Vec<&str> = text.lines().collect();
            let torn = line.index(lines.len());
            let whole: String = lines[..torn].iter().map(|l| format!("{l}\n")).collect();
            // Cut after the line's first byte and before its closing brace: a record
            // that is not whole, as a writer stopped mid-line leaves it.
            let partial = cut_at(lines[torn], 1 + at.index(lines[torn].len() - 1));
            let cut = format!("{whole}{partial}");

            let read = match Trace::parse(&cut) {
                Ok(read) => read,
                // Torn in its first line, a trace has no event yet: not a trace, said
                // with the partial line as the reason.
                Err(TraceError::NotATrace(problem)) => {
                    prop_assert_eq!((torn, problem.line, problem.partial), (0, 1, true));
                    return Ok(());
                }
                Err(error) => return Err(TestCaseError::fail(error.to_string())),
            };
            let expected = Trace::parse(&whole).unwrap();
            prop_assert_eq!(
                serde_json::to_value(&read.agents).unwrap(),
                serde_json::to_value(&expected.agents).unwrap()
            );
            let problems: Vec<(usize, bool)> =
                read.problems.iter().map(|p| (p.line, p.partial)).collect();
            prop_assert_eq!(problems, vec![(torn + 1, true)]);

            match Replay::from_jsonl(&cut) {
                Err(ReplayError::Line {
                    line, cut_short, ..
                }) => prop_assert_eq!((line, cut_short), (torn + 1, true)),
                other => prop_assert!(false, "{:?}", other.map(|_| "a replay")),
            }
            Ok(())
        })
        .unwrap();
}

/// What the edits above found: a trace whose numbers are the largest their types hold
/// (the depth limit, a turn's number, depth, time and tokens) made the readers overflow.
/// Each is read as it is now, saturating, and the summary's list of tokens per depth is
/// no longer than the agents' ids say.
#[test]
fn a_trace_of_the_largest_numbers_reads_renders_and_exports() {
    let traces = real_traces();
    let max = |text: &str| {
        let mut out = String::new();
        for line in text.lines() {
            let mut record: Json = serde_json::from_str(line).unwrap();
            if record["event"] == "start" {
                record["limits"]["max_depth"] = json!(usize::MAX);
            } else {
                record["turn"] = json!(u32::MAX);
                for field in ["depth", "elapsed_ms", "prompt_tokens", "completion_tokens"] {
                    record[field] = json!(u64::MAX);
                }
            }
            out.push_str(&format!("{record}\n"));
        }
        out
    };
    for text in &traces {
        let text = max(text);
        read_every_way(&text);
        let trace = Trace::parse(&text).unwrap();
        let deepest = trace.agents.iter().map(|a| a.id.matches('.').count()).max();
        assert_eq!(trace.summary().tokens_by_depth.len(), deepest.unwrap() + 1);
    }
}
