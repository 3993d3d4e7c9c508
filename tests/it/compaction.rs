//! A history that fits the window: against a scripted server that enforces an 8,192-token
//! window as llama.cpp does, every request is checked, a conversation nearing the window
//! is summarised and restarted (every message kept in the Lua table `history`), and
//! without a known window older outputs are sent as markers. Compactions are trace
//! records, replayed, shown and counted.

use crate::support;

use rlm_registry::rlm::trajectory::Record;
use rlm_registry::rlm::{CompactAt, Replay, RlmError, TraceFormat};
use rlm_registry::trace::{ExportOptions, Trace, export_rlm, html, show};
use serde_json::Value;
use support::openai_server::{Behavior, OpenAiServer};
use support::rlm_loop::*;

/// The window the scripted server enforces.
pub(crate) const WINDOW: u64 = 8_192;

/// What the request for a summary says, to script its answer.
const ASKS_FOR_SUMMARY: &str = "Write no code: summarise your work";

const SUMMARY: &str =
    "Summary: `n` counts my turns; each turn printed its words; nothing else to keep.";

/// One turn of the scripted model: counts its turns in `n`, prints about 8 KB (some
/// 3,000 tokens: a conversation of two such turns passes 85% of the window), and at
/// turn `last` answers with what `history` holds: how many earlier turns' outputs it
/// has, how many messages, the first and last roles.
pub(crate) fn turn_code(last: u32) -> String {
    format!(
        r#"n = (n or 0) + 1
local words = {{"river", "stone", "quiet", "market", "copper", "lantern", "orchard", "harbor"}}
local out = {{}}
for i = 1, 550 do out[i] = "w" .. n .. "x" .. i .. " " .. words[i % 8 + 1] end
print(table.concat(out, " "))
if n == {last} then
  local seen = 0
  for k = 1, n - 1 do
    for _, m in ipairs(history) do
      if m.role == "user" and m.content:find("w" .. k .. "x1 ", 1, true) then seen = seen + 1 break end
    end
  end
  FINAL(string.format("%d outputs, %d messages, %s first, %s last", seen, #history, history[1].role, history[#history].role))
end"#
    )
}

/// The scripted model: a summary when asked for one, else the next turn.
pub(crate) fn model(last: u32) -> Behavior {
    Behavior::ByPrompt(vec![
        (ASKS_FOR_SUMMARY.to_string(), Behavior::reply(SUMMARY)),
        (String::new(), lua(&turn_code(last))),
    ])
}

/// A server of `WINDOW` tokens playing [`model`].
fn window_server(last: u32) -> OpenAiServer {
    OpenAiServer::always(model(last).within_window(WINDOW))
}

/// A 12-turn run under an 8k window, traced: the answer with the usage summary, the
/// trace, and the live view.
fn twelve_turns(
    server: &OpenAiServer,
    compact: bool,
) -> (Result<String, RlmError>, String, String) {
    let (trace, live) = (Shared::default(), Shared::default());
    let mut rlm = rlm(server, 12)
        .context_window(WINDOW)
        .trace(trace.clone())
        .live_view(live.clone());
    if !compact {
        rlm = rlm.compact_at(None);
    }
    let report = rlm.run_report("Print your words each turn.", None, None);
    let usage = report.usage.to_string();
    let result = report.result.map(|answer| format!("{answer}\n{usage}"));
    (result, trace.text(), live.text())
}

fn records(trace: &str) -> Vec<Record> {
    trace
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn asks_for_summary(body: &Value) -> bool {
    last_message(body).contains(ASKS_FOR_SUMMARY)
}

#[test]
fn a_twelve_turn_run_printing_8_kb_a_turn_finishes_within_an_8k_window() {
    let server = window_server(12);
    let (result, trace, _) = twelve_turns(&server, true);
    let answer = result.unwrap();
    // 2 start messages, 11 turns' reply and feedback, 5 compactions' summary and note.
    assert!(
        answer.starts_with("11 outputs, 34 messages, system first, user last\n"),
        "{answer}"
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 12 + 5, "12 turns and 5 summaries");
    for request in &requests {
        assert!(request.prompt_tokens() <= WINDOW, "no request was refused");
    }
    let compactions: Vec<_> = records(&trace)
        .into_iter()
        .filter_map(|record| match record {
            Record::Compaction(compaction) => Some(compaction),
            _ => None,
        })
        .collect();
    let after: Vec<u32> = compactions.iter().map(|c| c.turn).collect();
    assert_eq!(after, vec![2, 4, 6, 8, 10]);
    for compaction in &compactions {
        assert_eq!(compaction.reply.as_deref(), Some(SUMMARY));
        assert!(compaction.tokens_before > WINDOW * 85 / 100);
        assert!(compaction.tokens_after < compaction.tokens_before / 2);
        assert_eq!(
            compaction.messages_summarized, 4,
            "the oldest turn left out to fit"
        );
    }
}

#[test]
fn every_request_is_checked_and_without_compaction_turn_3_does_not_fit() {
    let server = window_server(12);
    let (result, trace, _) = twelve_turns(&server, false);
    let error = result.unwrap_err();
    let RlmError::ContextWindow(exceeded) = &error else {
        panic!("{error:?}");
    };
    assert_eq!((exceeded.turn, exceeded.compact_at), (3, None));
    assert!(exceeded.server.is_none(), "checked before it was sent");
    let message = error.to_string();
    for expected in [
        "the request of turn 3 of the root agent does not fit the model's context window (the window is 8,192 tokens), so it was not sent",
        "compaction is off: leave it on (--compact-at 0.85",
        "--context-window",
    ] {
        assert!(message.contains(expected), "{message}");
    }
    assert_eq!(server.request_count(), 2, "turn 3 was not sent");
    assert!(!trace.contains("\"compaction\""));
}

#[test]
fn without_a_window_a_refusal_stating_one_is_learnt_and_one_stating_none_asks_for_it() {
    let server = window_server(12);
    let answer = rlm(&server, 12)
        .run("Print your words each turn.", None)
        .unwrap();
    assert!(answer.text.starts_with("11 outputs, "), "{}", answer.text);

    // OpenAI's wording without the window: nothing to compact against.
    let silent = OpenAiServer::start(
        vec![lua(&turn_code(12)), lua(&turn_code(12))],
        Behavior::status_with_body(
            400,
            r#"{"error": {"message": "Input is too long.", "code": "context_length_exceeded"}}"#,
        ),
    );
    let error = rlm(&silent, 12)
        .run("Print your words each turn.", None)
        .unwrap_err();
    let RlmError::ContextWindow(exceeded) = &error else {
        panic!("{error:?}");
    };
    assert_eq!((exceeded.turn, exceeded.window), (3, None));
    assert!(exceeded.server.is_some(), "sent, and refused");
    let message = error.to_string();
    assert!(
        message.contains("the request of turn 3 of the root agent does not fit the model's context window: the server refused it"),
        "{message}"
    );
    assert!(
        message.contains("give the model's window with --context-window"),
        "{message}"
    );
}

#[test]
fn the_model_gets_the_summary_request_then_the_restarted_conversation() {
    let server = window_server(4);
    let (result, _, _) = twelve_turns(&server, true);
    result.unwrap();
    let bodies = bodies(&server);
    let at = bodies.iter().position(asks_for_summary).unwrap();
    assert_eq!(at, 2, "before turn 3");
    let summary_request = messages(&bodies[at]);
    assert_eq!(
        summary_request.len(),
        4,
        "system, question, the latest turn"
    );
    assert_eq!(summary_request[0]["role"], "system");
    let last = summary_request[3]["content"].as_str().unwrap();
    assert!(last.starts_with("Output of block 1:\nw2x1 stone"), "{last}");
    assert!(last.ends_with("Your REPL's globals stay as they are."));

    let restarted = messages(&bodies[at + 1]);
    assert_eq!(restarted.len(), 4);
    assert_eq!(
        restarted[..2],
        messages(&bodies[0])[..2],
        "system and question"
    );
    assert_eq!(restarted[2]["role"], "assistant");
    assert_eq!(restarted[2]["content"], SUMMARY);
    let note = restarted[3]["content"].as_str().unwrap();
    for expected in ["compacted (1 time)", "globals are intact", "`history`"] {
        assert!(note.contains(expected), "{note}");
    }
}

#[test]
fn without_a_known_window_older_outputs_are_markers_and_history_is_whole() {
    // Each turn prints some 12,000 tokens: two fit the budget of 24,000.
    let code = r#"n = (n or 0) + 1
print(string.rep("w" .. n .. "x1 river stone ", 1500))
if n == 4 then FINAL(#history[4].content .. " " .. #history[6].content) end"#;
    let server = OpenAiServer::always(lua(code));
    let trace = Shared::default();
    let answer = rlm(&server, 10)
        .output_bytes(100_000)
        .trace(trace.clone())
        .run("Print.", None)
        .unwrap();
    let whole = "Output of block 1:\n".len() + "w1x1 river stone ".len() * 1500 + 1;
    assert_eq!(answer.text, format!("{whole} {whole}"), "whole in history");
    let bodies = bodies(&server);
    let sent = messages(&bodies[3]);
    let first = sent[3]["content"].as_str().unwrap();
    assert!(
        first.starts_with("[The output of turn 1 (") && first.contains("history[4].content"),
        "{first}"
    );
    assert!(
        sent[5]["content"]
            .as_str()
            .unwrap()
            .starts_with("Output of block 1:\nw2x1")
    );
    let turns: Vec<Vec<u32>> = records(&trace.text())
        .into_iter()
        .filter_map(|record| match record {
            Record::Turn(turn) => Some(turn.elided),
            _ => None,
        })
        .collect();
    assert_eq!(turns, vec![vec![], vec![], vec![], vec![1]]);
    let trace = Trace::parse(&trace.text()).unwrap();
    let rebuilt = trace.root().unwrap().messages_at(4);
    assert_eq!(rebuilt[3].text(), first, "the trace rebuilds what was sent");

    let off = OpenAiServer::always(lua(code));
    rlm(&off, 4)
        .output_bytes(100_000)
        .compact_at(None)
        .run("Print.", None)
        .unwrap_err();
    let sent = messages(&bodies_of(&off)[3]).clone();
    assert!(
        sent[3]["content"]
            .as_str()
            .unwrap()
            .starts_with("Output of block 1")
    );
}

#[test]
fn a_replay_of_a_compacted_run_is_identical_and_sends_nothing() {
    let server = window_server(6);
    let (result, trace, _) = twelve_turns(&server, true);
    result.unwrap();
    let sent = server.request_count();
    let report = Replay::from_jsonl(&trace).unwrap().run().unwrap();
    assert!(report.is_identical(), "{:?}", report.divergence);
    assert_eq!(server.request_count(), sent);

    // A replay that does not compact where the run did diverges.
    let edited = trace.replace("\"compact_at\":0.85", "\"compact_at\":0.3");
    let report = Replay::from_jsonl(&edited).unwrap().run().unwrap();
    assert!(!report.is_identical());
}

#[test]
fn a_refusal_stating_a_smaller_window_is_compacted_for_the_turn_asked_again_and_replayed() {
    let server = window_server(12);
    let trace = Shared::default();
    // The window given is too large: the server's refusal states the real one.
    let report = rlm(&server, 12)
        .context_window(100_000)
        .trace(trace.clone())
        .run_report("Print your words each turn.", None, None);
    let answer = report.result.unwrap();
    assert!(answer.starts_with("11 outputs, "), "{answer}");
    let refused: Vec<u64> = server
        .requests()
        .iter()
        .map(|request| request.prompt_tokens())
        .filter(|tokens| *tokens > WINDOW)
        .collect();
    assert_eq!(
        refused.len(),
        1,
        "refused once, then the window was the server's"
    );
    let trace = trace.text();
    let compactions: Vec<_> = records(&trace)
        .into_iter()
        .filter_map(|record| match record {
            Record::Compaction(compaction) => Some(compaction),
            _ => None,
        })
        .collect();
    assert!(compactions.len() > 1, "{compactions:?}");
    assert_eq!(compactions[0].refused, Some(WINDOW), "made for the refusal");
    assert!(compactions[1..].iter().all(|c| c.refused.is_none()));
    let turns: Vec<(u32, bool)> = records(&trace)
        .into_iter()
        .filter_map(|record| match record {
            Record::Turn(turn) => Some((turn.turn, turn.error.is_some())),
            _ => None,
        })
        .collect();
    assert_eq!(
        turns.len(),
        12,
        "the refused turn written once, as asked again"
    );
    assert!(turns.iter().all(|(_, failed)| !failed), "{turns:?}");

    let sent = server.request_count();
    let replayed = Replay::from_jsonl(&trace).unwrap().run().unwrap();
    assert!(replayed.is_identical(), "{:?}", replayed.divergence);
    assert_eq!(
        server.request_count(),
        sent,
        "the refusal is played back too"
    );
}

#[test]
fn a_run_cut_short_past_a_refusal_resumes_with_the_servers_window_and_no_request_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.jsonl");
    let server = window_server(12);
    let cut = rlm(&server, 6)
        .context_window(100_000)
        .trace_file(&path)
        .unwrap()
        .run("Print your words each turn.", None)
        .unwrap_err();
    assert!(matches!(cut, RlmError::IterationLimit { .. }), "{cut:?}");
    assert!(
        std::fs::read_to_string(&path)
            .unwrap()
            .contains(r#""refused":8192"#)
    );

    let again = window_server(12);
    let report = rlm_registry::rlm::Resume::from_file(&path)
        .unwrap()
        .run(rlm(&again, 12).context_window(100_000), None, None)
        .unwrap();
    let answer = report.result.unwrap();
    assert!(answer.starts_with("11 outputs, "), "{answer}");
    for request in again.requests() {
        assert!(request.prompt_tokens() <= WINDOW, "no request was refused");
    }
}

#[test]
fn a_refusal_with_compaction_off_ends_the_run_as_before() {
    let server = window_server(12);
    let error = rlm(&server, 12)
        .context_window(100_000)
        .compact_at(None)
        .run("Print your words each turn.", None)
        .unwrap_err();
    let RlmError::ContextWindow(exceeded) = &error else {
        panic!("{error:?}");
    };
    assert_eq!(exceeded.turn, 3);
    assert!(exceeded.server.is_some(), "the server refused it");
}

#[test]
fn the_reference_format_shows_the_restarted_conversation() {
    let server = window_server(4);
    let trace = Shared::default();
    rlm(&server, 12)
        .context_window(WINDOW)
        .trace_format(TraceFormat::Rlm)
        .trace(trace.clone())
        .run("Print your words each turn.", None)
        .unwrap();
    let lines: Vec<Value> = trace
        .text()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let prompts: Vec<usize> = lines
        .iter()
        .filter(|line| line["type"] == "iteration")
        .map(|line| line["prompt"].as_array().unwrap().len())
        .collect();
    assert_eq!(prompts, vec![2, 4, 4, 6], "restarted before turn 3");
    let third = &lines
        .iter()
        .filter(|l| l["type"] == "iteration")
        .nth(2)
        .unwrap()["prompt"];
    assert_eq!(third[2]["content"], SUMMARY);

    // `rlm trace export` of the events trace says the same.
    let server = window_server(4);
    let (_, events, _) = twelve_turns(&server, true);
    let exported = export_rlm(&Trace::parse(&events).unwrap(), &ExportOptions::default());
    let prompts: Vec<usize> = exported
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|line| line["type"] == "iteration")
        .map(|line| line["prompt"].as_array().unwrap().len())
        .collect();
    assert_eq!(prompts, vec![2, 4, 4, 6]);
}

#[test]
fn a_child_agent_compacts_alike() {
    let server = OpenAiServer::always(
        Behavior::ByPrompt(vec![
            (ASKS_FOR_SUMMARY.to_string(), Behavior::reply(SUMMARY)),
            (
                "ROOT".to_string(),
                lua("FINAL(rlm_query('Print your words each turn.'))"),
            ),
            (String::new(), lua(&turn_code(4))),
        ])
        .within_window(WINDOW),
    );
    let trace = Shared::default();
    let answer = rlm(&server, 6)
        .context_window(WINDOW)
        .trace(trace.clone())
        .run("ROOT question", None)
        .unwrap();
    assert_eq!(
        answer.text,
        "3 outputs, 10 messages, system first, user last"
    );
    assert_eq!(answer.usage.compactions, 1);
    let agents: Vec<(String, u32)> = records(&trace.text())
        .into_iter()
        .filter_map(|record| match record {
            Record::Compaction(c) => Some((c.agent, c.turn)),
            _ => None,
        })
        .collect();
    assert_eq!(agents, vec![("0.1".to_string(), 2)]);
}

#[test]
fn the_usage_summary_the_live_view_and_the_trace_view_show_compactions() {
    let server = window_server(4);
    let (result, trace, live) = twelve_turns(&server, true);
    assert!(live.contains("compacted after turn 2 · "), "{live}");
    let shown = result.unwrap();
    let summary_tokens = 10 + 5;
    assert!(
        shown.contains(&format!("compactions: 1 ({summary_tokens} tokens)")),
        "{shown}"
    );
    let parsed = Trace::parse(&trace).unwrap();
    let page = html(&parsed, "run.jsonl");
    assert!(
        page.contains(&format!("\"compacted\":[[2,\"{SUMMARY}\",")),
        "the page restarts the conversation after turn 2"
    );
    let view = show(&parsed);
    assert!(view.contains("Compactions: 1 (15 tokens)"), "{view}");
    assert!(view.contains("compacted after turn 2 · "), "{view}");
    assert!(view.contains(&format!("≡ {SUMMARY}")), "{view}");
}

#[test]
fn a_failed_summary_ends_the_run_with_the_servers_error_on_the_record() {
    let server = OpenAiServer::always(
        Behavior::ByPrompt(vec![
            (ASKS_FOR_SUMMARY.to_string(), Behavior::status(400)),
            (String::new(), lua(&turn_code(12))),
        ])
        .within_window(WINDOW),
    );
    let (result, trace, _) = twelve_turns(&server, true);
    let error = result.unwrap_err();
    assert!(matches!(error, RlmError::Llm(_)), "{error:?}");
    let failed = records(&trace).into_iter().find_map(|record| match record {
        Record::Compaction(c) => Some(c),
        _ => None,
    });
    let failed = failed.unwrap();
    assert_eq!((failed.turn, failed.reply.as_deref()), (2, None));
    assert!(failed.error.unwrap().contains("scripted status 400"));
}

#[test]
fn the_summary_calls_cost_is_on_its_record() {
    let summary = Behavior::Completion {
        message: serde_json::json!({"role": "assistant", "content": SUMMARY}),
        finish_reason: "stop".to_string(),
        usage: serde_json::json!({"prompt_tokens": 6000, "completion_tokens": 40, "cost": 0.25}),
    };
    let server = OpenAiServer::always(
        Behavior::ByPrompt(vec![
            (ASKS_FOR_SUMMARY.to_string(), summary),
            (String::new(), lua(&turn_code(3))),
        ])
        .within_window(WINDOW),
    );
    let (result, trace, _) = twelve_turns(&server, true);
    result.unwrap();
    let costs: Vec<String> = records(&trace)
        .into_iter()
        .filter_map(|record| match record {
            Record::Compaction(c) => Some(serde_json::to_value(c.cost).unwrap().to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(costs, vec!["0.25"]);
}

#[test]
fn compact_at_takes_a_share_of_the_window_or_off() {
    assert_eq!(CompactAt::parse(" OFF "), Ok(None));
    assert_eq!(
        CompactAt::parse("1").map(|at| at.map(CompactAt::fraction)),
        Ok(Some(1.0))
    );
    for bad in ["-1", "1.01", "", "85%", "NaN"] {
        assert!(CompactAt::parse(bad).is_err(), "{bad}");
    }
}

#[cfg(feature = "cli")]
mod cli {
    use super::*;
    use crate::support::cli::{llm_args, rlm_ask_in, rlm_command};
    use std::process::Output;

    /// `rlm ask` of the 12-turn run under an 8k window, with `args`.
    fn rlm_ask(dir: &std::path::Path, server: &OpenAiServer, args: &[&str]) -> Output {
        let question = [
            "Print your words each turn.",
            "-q",
            "--max-iterations",
            "12",
        ];
        let window = ["--context-window", "8192"];
        let all: Vec<&str> = question
            .iter()
            .chain(&window)
            .chain(args)
            .copied()
            .collect();
        rlm_ask_in(dir, &server.base_url(), &all)
    }

    #[test]
    fn ask_compacts_unless_compact_at_is_off_from_the_flag_the_variable_or_rlm_toml() {
        let dir = tempfile::tempdir().unwrap();
        let server = window_server(4);
        let out = rlm_ask(dir.path(), &server, &[]);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "3 outputs, 10 messages, system first, user last\n"
        );

        let out = rlm_ask(dir.path(), &server, &["--compact-at", "off"]);
        assert_eq!(out.status.code(), Some(1));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("the request of turn 3 of the root agent"),
            "{stderr}"
        );
        assert!(stderr.contains("--compact-at"), "{stderr}");

        std::fs::write(
            dir.path().join("rlm.toml"),
            "[model]\ncompact_at = \"off\"\n",
        )
        .unwrap();
        let out = rlm_ask(dir.path(), &server, &[]);
        assert_eq!(out.status.code(), Some(1), "the file turns it off");
        let out = rlm_ask(dir.path(), &server, &["--compact-at", "0.85"]);
        assert_eq!(out.status.code(), Some(0), "the flag wins over the file");

        let mut variable = rlm_command();
        variable
            .current_dir(dir.path())
            .env("RLM_COMPACT_AT", "2")
            .args(["ask", "Q", "-q"])
            .args(llm_args(&server.base_url(), "test-model"));
        let out = variable.output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(2),
            "a bad variable is a usage error"
        );
        assert!(String::from_utf8_lossy(&out.stderr).contains("RLM_COMPACT_AT=2"));

        std::fs::write(dir.path().join("rlm.toml"), "[model]\ncompact_at = 7\n").unwrap();
        let out = rlm_ask(dir.path(), &server, &[]);
        assert_eq!(out.status.code(), Some(2), "a bad share in the file");
        assert!(String::from_utf8_lossy(&out.stderr).contains("[model] compact_at"));
    }
}
