//! `rlm eval --shard K/N` and `rlm eval merge` against the scripted server: the split
//! covers every task once whatever the order of the tasks, the merged shards are one
//! run's output, and every merge that would give something else is refused.

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use rlm_registry::eval::{Shard, Task};
use serde_json::Value;

use super::eval::{by_question, eval_args, results_of, rlm, task, tempdir, text, write_task_file};
use crate::support::openai_server::OpenAiServer;

fn tasks(count: usize) -> Vec<Task> {
    (0..count)
        .map(|i| task(&format!("t{i:02}"), "q", "a"))
        .collect()
}

fn ids(tasks: &[Task]) -> BTreeSet<String> {
    tasks.iter().map(|t| t.id.clone()).collect()
}

#[test]
fn shards_1_to_n_cover_every_task_exactly_once_and_differ_by_one_task_at_most() {
    let all = tasks(10);
    for count in [1, 2, 3, 4, 7, 10, 13, 25] {
        let mut seen: Vec<String> = Vec::new();
        let mut sizes = Vec::new();
        for index in 1..=count {
            let shard = Shard::new(index, count).unwrap();
            let mine = shard.select(&all);
            sizes.push(mine.len());
            seen.extend(mine.into_iter().map(|t| t.id));
        }
        let distinct: HashSet<&String> = seen.iter().collect();
        assert_eq!(seen.len(), all.len(), "{count} shards: each task once");
        assert_eq!(distinct.len(), all.len(), "{count} shards: every task");
        let (min, max) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
        assert!(max - min <= 1, "{count} shards: {sizes:?}");
        if count as usize > all.len() {
            assert_eq!(*min, 0, "more shards than tasks leaves some empty");
        }
    }
}

#[test]
fn the_split_is_the_same_whatever_the_order_the_tasks_are_listed_in() {
    let listed = tasks(23);
    let mut reversed = listed.clone();
    reversed.reverse();
    let mut shuffled = listed.clone();
    // A fixed permutation: stride 7 through 23 tasks visits each once.
    for (i, slot) in shuffled.iter_mut().enumerate() {
        *slot = listed[i * 7 % listed.len()].clone();
    }
    for count in [2, 4, 5] {
        for index in 1..=count {
            let shard = Shard::new(index, count).unwrap();
            let expected = ids(&shard.select(&listed));
            assert_eq!(ids(&shard.select(&reversed)), expected, "{shard}");
            assert_eq!(ids(&shard.select(&shuffled)), expected, "{shard}");
        }
    }
}

/// Every shard of `count` into `dir/NAME-K`, all at once as a job runner starts them.
fn run_shards(
    server: &OpenAiServer,
    tasks: &Path,
    dir: &Path,
    name: &str,
    shards: &[(u32, u32)],
    extra: &[&str],
) -> Vec<PathBuf> {
    let children: Vec<(PathBuf, std::process::Child)> = shards
        .iter()
        .map(|&(index, count)| {
            let out = dir.join(format!("{name}-{index}"));
            let mut command = rlm();
            command
                .args(eval_args(server, &out))
                .args(["--tasks", tasks.to_str().unwrap()])
                .args(["--shard", &format!("{index}/{count}")])
                .args(extra);
            if !extra.contains(&"--methods") {
                command.args(["--methods", "rlm,direct"]);
            }
            let child = command
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            (out, child)
        })
        .collect();
    children
        .into_iter()
        .map(|(out, child)| {
            let output = child.wait_with_output().unwrap();
            assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
            out
        })
        .collect()
}

fn all_of(count: u32) -> Vec<(u32, u32)> {
    (1..=count).map(|k| (k, count)).collect()
}

fn merge(dirs: &[PathBuf], out: &Path) -> Output {
    rlm()
        .args(["eval", "merge"])
        .args(dirs)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap()
}

fn refused(output: &Output, message: &str) {
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(message), "wanted `{message}` in: {stderr}");
}

/// The results minus their time, in the file's order.
fn timeless(out: &Path) -> Vec<Value> {
    results_of(out)
        .into_iter()
        .map(|mut r| {
            r.as_object_mut().unwrap().remove("seconds");
            r
        })
        .collect()
}

/// The summary's table, each row up to its score (time and the rest aside).
fn scores(summary: &str) -> Vec<String> {
    summary
        .lines()
        .filter(|line| line.starts_with("| ") && !line.starts_with("| family"))
        .map(|line| line.split('|').take(6).collect::<Vec<_>>().join("|"))
        .collect()
}

#[test]
fn four_shards_merged_equal_one_run_over_all_tasks() {
    let count = 10;
    let server = by_question(count, Duration::ZERO);
    let dir = tempdir();
    let tasks = write_task_file(dir.path(), count);
    let single = dir.path().join("single");
    let output = rlm()
        .args(eval_args(&server, &single))
        .args([
            "--tasks",
            tasks.to_str().unwrap(),
            "--methods",
            "rlm,direct",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let requests = server.request_count();

    let shards = run_shards(&server, &tasks, dir.path(), "shard", &all_of(4), &[]);
    assert_eq!(
        server.request_count(),
        2 * requests,
        "the shards sent the single run's requests once between them"
    );
    let sizes: Vec<usize> = shards.iter().map(|s| results_of(s).len()).collect();
    assert_eq!(sizes, [6, 6, 4, 4], "10 tasks x 2 methods split 3, 3, 2, 2");
    let first = std::fs::read_to_string(shards[0].join("summary.md")).unwrap();
    assert!(first.contains("Shard 1/4: 3 of the 10 tasks."), "{first}");

    let merged = dir.path().join("merged");
    let output = merge(&shards, &merged);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_eq!(timeless(&merged), timeless(&single));
    let summary = std::fs::read_to_string(merged.join("summary.md")).unwrap();
    let single_summary = std::fs::read_to_string(single.join("summary.md")).unwrap();
    assert_eq!(scores(&summary), scores(&single_summary));
    assert_eq!(scores(&summary).len(), 2, "{summary}");
    assert_eq!(text(&output.stdout), summary);
    assert_eq!(
        std::fs::read_to_string(merged.join("eval.json")).unwrap(),
        std::fs::read_to_string(single.join("eval.json")).unwrap(),
        "the merge is described as the single run is"
    );
    let html = std::fs::read_to_string(merged.join("report.html")).unwrap();
    for result in results_of(&merged) {
        let trace = result["trace"].as_str().unwrap();
        assert!(merged.join(trace).is_file(), "{trace} is copied");
        assert!(html.contains(&format!("<a href=\"{trace}\">trace</a>")));
        let page = trace.replace(".jsonl", ".html");
        assert!(merged.join(&page).is_file(), "{page} is copied");
    }
}

/// Ten tasks and shard 1/4 of them, run into `dir/shard-1`.
fn first_shard(server: &OpenAiServer, dir: &Path) -> (PathBuf, PathBuf) {
    let tasks = write_task_file(dir, 10);
    let shard = run_shards(server, &tasks, dir, "shard", &[(1, 4)], &[]);
    (tasks, shard[0].clone())
}

#[test]
fn merge_refuses_shards_of_different_evals() {
    let server = by_question(11, Duration::ZERO);
    let dir = tempdir();
    let (tasks, first) = first_shard(&server, dir.path());
    for (name, shard, extra, message) in [
        (
            "depth",
            (2, 4),
            &["--max-depth", "2"][..],
            "their settings differ (max_depth 1 and 2)",
        ),
        (
            "methods",
            (2, 4),
            &["--methods", "rlm"],
            "their methods differ (rlm,direct and rlm)",
        ),
        ("split", (2, 3), &[], "split 4 ways and 3 ways"),
    ] {
        let other = run_shards(&server, &tasks, dir.path(), name, &[shard], extra);
        refused(
            &merge(&[first.clone(), other[0].clone()], &dir.path().join("out")),
            message,
        );
    }
    let other_tasks = dir.path().join("other");
    std::fs::create_dir(&other_tasks).unwrap();
    let eleven = write_task_file(&other_tasks, 11);
    let other = run_shards(&server, &eleven, dir.path(), "tasks", &[(2, 4)], &[]);
    refused(
        &merge(&[first, other[0].clone()], &dir.path().join("out")),
        "their tasks differ (10 and 11 tasks)",
    );
    assert!(!dir.path().join("out").exists(), "nothing is written");
}

#[test]
fn merge_refuses_a_shard_given_twice_and_a_missing_shard() {
    let server = by_question(10, Duration::ZERO);
    let dir = tempdir();
    let tasks = write_task_file(dir.path(), 10);
    let shards = run_shards(&server, &tasks, dir.path(), "shard", &all_of(4), &[]);
    let again = run_shards(&server, &tasks, dir.path(), "again", &[(2, 4)], &[]);
    let out = dir.path().join("out");
    let mut twice = shards.clone();
    twice.push(again[0].clone());
    refused(&merge(&twice, &out), "shard 2/4 is given twice");
    refused(&merge(&shards[..3], &out), "shard 4/4 is missing");
    refused(&merge(&shards[1..3], &out), "shards 1/4, 4/4 are missing");
    assert!(!out.exists(), "nothing is written");
}

#[test]
fn merge_refuses_a_directory_that_is_not_an_eval_output() {
    let server = by_question(10, Duration::ZERO);
    let dir = tempdir();
    let (_, first) = first_shard(&server, dir.path());
    let out = dir.path().join("out");
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    refused(
        &merge(&[first.clone(), empty.clone()], &out),
        "empty is not an rlm eval output: it has no eval.json",
    );
    std::fs::write(empty.join("eval.json"), "{\"shard\": \"1/4\"}").unwrap();
    refused(
        &merge(&[first.clone(), empty], &out),
        "its eval.json is not an eval's",
    );
    refused(
        &merge(&[first, dir.path().join("nowhere")], &out),
        "nowhere is not an rlm eval output",
    );
}

#[test]
fn merge_refuses_an_out_that_is_one_of_the_inputs() {
    let server = by_question(10, Duration::ZERO);
    let dir = tempdir();
    let (_, first) = first_shard(&server, dir.path());
    let before = std::fs::read(first.join("results.jsonl")).unwrap();
    for out in [
        first.clone(),
        first.join("."),
        dir.path().join("x/../shard-1"),
    ] {
        refused(
            &merge(std::slice::from_ref(&first), &out),
            "is one of the directories merged",
        );
    }
    assert_eq!(std::fs::read(first.join("results.jsonl")).unwrap(), before);
}

#[test]
fn merge_refuses_a_shard_that_has_not_finished() {
    let server = by_question(10, Duration::ZERO);
    let dir = tempdir();
    let tasks = write_task_file(dir.path(), 10);
    let shards = run_shards(&server, &tasks, dir.path(), "shard", &all_of(2), &[]);
    let path = shards[1].join("results.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let kept: Vec<&str> = text.lines().skip(1).collect();
    std::fs::write(&path, kept.join("\n") + "\n").unwrap();
    refused(&merge(&shards, &dir.path().join("out")), "shard 2/2 in");
    refused(
        &merge(&shards, &dir.path().join("out")),
        "has not finished: 9 of its 10 results",
    );
}

#[test]
fn bad_shard_values_are_usage_errors() {
    for (value, message) in [
        ("0/4", "from 1 to 4"),
        ("5/4", "from 1 to 4"),
        ("x/y", "write K/N"),
        ("4", "write K/N"),
        ("1/0", "at least 1"),
    ] {
        let output = rlm()
            .args(["eval", "--shard", value, "--out", "/nonexistent/x"])
            .output()
            .unwrap();
        refused(&output, message);
        assert!(text(&output.stderr).contains("--shard"), "{value}");
    }
}

#[test]
fn more_shards_than_tasks_leave_some_empty_and_the_merge_still_has_every_task() {
    let server = by_question(3, Duration::ZERO);
    let dir = tempdir();
    let tasks = write_task_file(dir.path(), 3);
    let shards = run_shards(&server, &tasks, dir.path(), "shard", &all_of(5), &[]);
    let sizes: Vec<usize> = shards.iter().map(|s| results_of(s).len()).collect();
    assert_eq!(sizes, [2, 2, 2, 0, 0]);
    let merged = dir.path().join("merged");
    let output = merge(&shards, &merged);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let keys: Vec<String> = results_of(&merged)
        .iter()
        .map(|r| format!("{} {}", r["id"], r["method"]))
        .collect();
    assert_eq!(
        keys,
        [
            "\"q0\" \"rlm\"",
            "\"q0\" \"direct\"",
            "\"q1\" \"rlm\"",
            "\"q1\" \"direct\"",
            "\"q2\" \"rlm\"",
            "\"q2\" \"direct\""
        ]
    );
}
