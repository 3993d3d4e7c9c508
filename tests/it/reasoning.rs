//! Reasoning models at the root and in sub-calls, against the scripted server: thinking
//! (inline `<think>…</think>`, only its closing tag, or a `reasoning_content` field) never
//! runs and never goes back to the model; sub-calls return the answer alone; a reply cut
//! at the token limit does not run its open block; the reply limit and the reasoning
//! effort reach the request body.

use crate::support;

use rlm_registry::rlm::{Context, Replay};
use serde_json::{Value, json};
use support::openai_server::{Behavior, OpenAiServer};
use support::rlm_loop::*;

/// The issue's example: a draft inside the thinking, the real code after it.
const QWEN_DRAFT: &str = "<think>\nI could try\n```lua\nprint('DRAFT RAN')\nFINAL('draft answer')\n```\nbut better not.\n</think>\n```lua\nFINAL('real answer')\n```\n";

/// Every block output of the trace's turns, joined.
fn outputs(events: &[Value]) -> String {
    turns(events)
        .iter()
        .flat_map(|t| t["outputs"].as_array().cloned().unwrap_or_default())
        .map(|o| o["output"].as_str().unwrap_or_default().to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn a_draft_inside_thinking_never_runs_and_the_real_answer_wins() {
    let server = OpenAiServer::always(Behavior::reply(QWEN_DRAFT));
    let trace = Shared::default();
    let live = Shared::default();
    let answer = rlm(&server, 5)
        .trace(trace.clone())
        .live_view(live.clone())
        .run("Q", None)
        .unwrap();
    assert_eq!(answer.text, "real answer");
    let events = trace.events();
    assert!(!outputs(&events).contains("DRAFT RAN"));
    assert!(!live.text().contains("DRAFT RAN"), "{}", live.text());
    let turn = turns(&events)[0];
    assert_eq!(turn["code_blocks"], json!(["FINAL('real answer')\n"]));
    // The raw reply is kept, thinking included.
    assert_eq!(turn["reply"], QWEN_DRAFT);
}

#[test]
fn only_the_closing_tag_ends_thinking_too() {
    let reply = "The template opened the tag.\n```lua\nprint('DRAFT RAN')\n```\n</think>\n\n```lua\nprint('REAL RAN')\n```\n";
    let server = OpenAiServer::start(
        vec![Behavior::reply(reply), lua("FINAL('done')")],
        Behavior::status(500),
    );
    let trace = Shared::default();
    rlm(&server, 5).trace(trace.clone()).run("Q", None).unwrap();
    let outputs = outputs(&trace.events());
    assert!(outputs.contains("REAL RAN"), "{outputs}");
    assert!(!outputs.contains("DRAFT RAN"), "{outputs}");
}

#[test]
fn a_reasoning_field_holding_code_is_not_run_and_is_kept_in_the_trace() {
    let reasoning = "```lua\nprint('FROM REASONING')\nFINAL('wrong')\n```";
    let server = OpenAiServer::always(Behavior::reasoning_reply(
        "```lua\nFINAL('right')\n```",
        reasoning,
        25,
    ));
    let trace = Shared::default();
    let answer = rlm(&server, 5).trace(trace.clone()).run("Q", None).unwrap();
    assert_eq!(answer.text, "right");
    let events = trace.events();
    let turn = turns(&events)[0];
    assert_eq!(turn["reasoning"], reasoning);
    assert_eq!(turn["reasoning_tokens"], 25);
    assert!(!outputs(&events).contains("FROM REASONING"));
    // Counted once: the reasoning tokens are part of the 40 completion tokens.
    assert_eq!(answer.usage.total().completion_tokens, 40);
    assert_eq!(answer.usage.total().reasoning_tokens, 25);
    assert!(
        answer.usage.to_string().contains("(25 of them reasoning)"),
        "{}",
        answer.usage
    );
}

#[test]
fn thinking_is_left_out_of_the_history_sent_back() {
    let first = "<think>\nLet me count the lines first.\n</think>\n\n```lua\nprint(line_count(context))\n```";
    let server = OpenAiServer::start(
        vec![Behavior::reply(first), lua("FINAL('3')")],
        Behavior::status(500),
    );
    let trace = Shared::default();
    rlm(&server, 5)
        .trace(trace.clone())
        .run("Q", Some(Context::from("a\nb\nc\n")))
        .unwrap();
    let bodies = bodies(&server);
    let sent = messages(&bodies[1]);
    let assistant = &sent[sent.len() - 2];
    assert_eq!(assistant["role"], "assistant");
    assert_eq!(
        assistant["content"],
        "```lua\nprint(line_count(context))\n```"
    );
    // The trace keeps the raw reply and says what went back, so the conversation is
    // rebuilt from it as it was sent.
    let events = trace.events();
    let turn = turns(&events)[0];
    assert_eq!(turn["reply"], first);
    assert_eq!(turn["sent_back"], assistant["content"]);
    assert_eq!(&conversation(&events, "0", 2), sent);
}

#[test]
fn a_run_with_thinking_replays_identical() {
    let server = OpenAiServer::start(
        vec![
            Behavior::reply(
                "<think>hmm</think>\n```lua\nprint(llm_query('Capital of France?'))\n```",
            ),
            Behavior::reply("<think>\nEasy.\n</think>\n\nParis"),
            Behavior::reasoning_reply("```lua\nFINAL('ok')\n```", "Done.", 3),
        ],
        Behavior::status(500),
    );
    let trace = Shared::default();
    rlm(&server, 5).trace(trace.clone()).run("Q", None).unwrap();
    let report = Replay::from_jsonl(&trace.text()).unwrap().run().unwrap();
    assert!(report.is_identical(), "{report:?}");
}

#[test]
fn llm_query_on_a_thinking_sub_model_returns_the_answer_alone() {
    // The batch's two requests go out at once: answered by prompt, not by order.
    let server = OpenAiServer::start(
        vec![
            lua("x = llm_query('Capital of France?')\nprint('[' .. x .. ']')"),
            Behavior::reply("<think>\nThe capital... FINAL('Lyon')?\n</think>\n\nParis"),
            lua(
                "ys = llm_query_batched({'first prompt', 'second prompt'})\nprint('[' .. ys[1] .. '][' .. ys[2] .. ']')",
            ),
        ],
        Behavior::ByPrompt(vec![
            ("first prompt".into(), Behavior::reply("<think>x</think>A")),
            (
                "second prompt".into(),
                Behavior::reasoning_reply("B", "thought apart", 5),
            ),
            ("".into(), lua("FINAL(x)")),
        ]),
    );
    let trace = Shared::default();
    let answer = rlm(&server, 5).trace(trace.clone()).run("Q", None).unwrap();
    assert_eq!(answer.text, "Paris");
    let events = trace.events();
    let outputs = outputs(&events);
    assert!(outputs.contains("[Paris]"), "{outputs}");
    assert!(outputs.contains("[A][B]"), "{outputs}");
    // The trace keeps the thinking with the sub-call.
    let turns = turns(&events);
    let call = &turns[0]["outputs"][0]["sub_calls"][0];
    assert!(
        call["answer"].as_str().unwrap().contains("<think>"),
        "{call}"
    );
    let second = &turns[1]["outputs"][0]["sub_calls"][1];
    assert_eq!(second["reasoning"], "thought apart");
}

#[test]
fn parallel_map_calls_get_the_answer_without_thinking() {
    let server = OpenAiServer::start(
        vec![
            lua(
                "r = parallel_map({'x', 'y'}, function(s) return llm_query('say ' .. s) end)\nprint(table.concat(r, ','))",
            ),
            Behavior::ByPrompt(vec![
                ("say x".into(), Behavior::reply("<think>x?</think>X")),
                ("say y".into(), Behavior::reply("thinking</think>\nY")),
            ]),
        ],
        Behavior::ByPrompt(vec![
            ("say x".into(), Behavior::reply("<think>x?</think>X")),
            ("say y".into(), Behavior::reply("thinking</think>\nY")),
            ("".into(), lua("FINAL('end')")),
        ]),
    );
    let trace = Shared::default();
    rlm(&server, 5).trace(trace.clone()).run("Q", None).unwrap();
    let outputs = outputs(&trace.events());
    assert!(outputs.contains("X,Y"), "{outputs}");
}

#[test]
fn a_sub_call_cut_while_thinking_is_an_error_not_an_empty_answer() {
    let server = OpenAiServer::start(
        vec![
            lua("local ok, err = pcall(llm_query, 'long question')\nprint(ok, err)"),
            Behavior::cut_reply("<think>\nFirst, consider every"),
            lua("FINAL('done')"),
        ],
        Behavior::status(500),
    );
    let trace = Shared::default();
    rlm(&server, 5).trace(trace.clone()).run("Q", None).unwrap();
    let outputs = outputs(&trace.events());
    assert!(
        outputs.contains("false") && outputs.contains("cut at the token limit while thinking"),
        "{outputs}"
    );
}

#[test]
fn a_reply_cut_inside_a_block_does_not_run_it_and_the_feedback_says_so() {
    let server = OpenAiServer::start(
        vec![
            Behavior::cut_reply(
                "```lua\nprint('FIRST')\n```\n```lua\nprint('HALF')\nfor i = 1, 10 do\n  x = ",
            ),
            lua("FINAL('done')"),
        ],
        Behavior::status(500),
    );
    let trace = Shared::default();
    let answer = rlm(&server, 5).trace(trace.clone()).run("Q", None).unwrap();
    assert_eq!(answer.text, "done");
    let events = trace.events();
    let outputs = outputs(&events);
    assert!(outputs.contains("FIRST"), "{outputs}");
    assert!(!outputs.contains("HALF"), "{outputs}");
    let feedback = last_message(&bodies(&server)[1]);
    assert!(
        feedback.contains(
            "cut off at the token limit inside a ```lua block, so that block did not run"
        ),
        "{feedback}"
    );
}

#[test]
fn a_reply_cut_while_thinking_runs_nothing_and_is_told_so() {
    let server = OpenAiServer::start(
        vec![
            Behavior::cut_reply("<think>\nI will write\n```lua\nprint('DRAFT RAN')\n```\nthen"),
            lua("FINAL('done')"),
        ],
        Behavior::status(500),
    );
    let trace = Shared::default();
    let answer = rlm(&server, 5).trace(trace.clone()).run("Q", None).unwrap();
    assert_eq!(answer.text, "done");
    assert!(!outputs(&trace.events()).contains("DRAFT RAN"));
    let bodies = bodies(&server);
    let feedback = last_message(&bodies[1]);
    assert!(
        feedback.contains("Your reply was all thinking: it was cut at the token limit"),
        "{feedback}"
    );
    // The thinking does not go back either.
    let sent = messages(&bodies[1]);
    assert_eq!(sent[sent.len() - 2]["content"], "(thinking only)");
}

#[test]
fn two_replies_of_only_thinking_end_the_run_as_replies_without_code() {
    let server = OpenAiServer::always(Behavior::reply("<think>\nStill pondering"));
    let error = rlm(&server, 5).run("Q", None).unwrap_err();
    assert!(
        error.to_string().contains("without code or a final answer"),
        "{error}"
    );
    assert_eq!(server.request_count(), 2);
}

#[cfg(feature = "cli")]
mod cli {
    use super::*;
    use crate::support::cli::{llm_args, rlm_command, stderr, stdout};

    #[test]
    fn the_reply_limit_and_the_reasoning_effort_are_in_the_request_body() {
        let server = OpenAiServer::always(lua("print(llm_query('hi'))\nFINAL('ok')"));
        let out = rlm_command()
            .args([
                "ask",
                "Q",
                "--max-reply-tokens",
                "2k",
                "--reasoning-effort",
                "low",
            ])
            .args(llm_args(&server.base_url(), "test-model"))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let bodies = bodies(&server);
        assert_eq!(bodies.len(), 2, "the root turn and its sub-call");
        for body in &bodies {
            assert_eq!(body["max_tokens"], 2000, "{body}");
            assert_eq!(body["reasoning_effort"], "low", "{body}");
        }

        // Unset: neither is sent.
        let server = OpenAiServer::always(lua("FINAL('ok')"));
        let out = rlm_command()
            .args(["ask", "Q"])
            .args(llm_args(&server.base_url(), "test-model"))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let body = &bodies_of(&server)[0];
        assert!(body.get("max_tokens").is_none() && body.get("reasoning_effort").is_none());
    }

    #[test]
    fn rlm_toml_and_the_variables_set_them_and_bad_values_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("rlm.toml");
        std::fs::write(
            &config,
            "[model]\nmax_reply_tokens = 512\nreasoning_effort = \"high\"\n",
        )
        .unwrap();
        let server = OpenAiServer::always(lua("FINAL('ok')"));
        let out = rlm_command()
            .args(["ask", "Q", "--config"])
            .arg(&config)
            .args(llm_args(&server.base_url(), "test-model"))
            .env("RLM_REASONING_EFFORT", "medium")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let body = &bodies(&server)[0];
        assert_eq!(body["max_tokens"], 512);
        assert_eq!(
            body["reasoning_effort"], "medium",
            "the variable over the file"
        );

        let out = rlm_command()
            .args(["ask", "Q", "--reasoning-effort", "extreme"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        assert!(stderr(&out).contains("low"), "{}", stderr(&out));
        std::fs::write(&config, "[model]\nreasoning_effort = \"extreme\"\n").unwrap();
        let out = rlm_command()
            .args(["ask", "Q", "--config"])
            .arg(&config)
            .output()
            .unwrap();
        assert_ne!(out.status.code(), Some(0));
        assert!(
            stderr(&out).contains("rlm.toml:2:") && stderr(&out).contains("reasoning effort"),
            "{}",
            stderr(&out)
        );
    }

    #[test]
    fn the_window_check_keeps_the_reply_limit_for_the_reply() {
        let server = OpenAiServer::always(lua("FINAL('ok')"));
        let ask = |reply: &str| {
            rlm_command()
                .args([
                    "ask",
                    "Q",
                    "--context-window",
                    "8k",
                    "--max-reply-tokens",
                    reply,
                ])
                .args(llm_args(&server.base_url(), "test-model"))
                .output()
                .unwrap()
        };
        let out = ask("7k");
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        assert!(
            stderr(&out).contains("and 7,000 are kept for the reply"),
            "{}",
            stderr(&out)
        );
        assert_eq!(server.request_count(), 0);
        let out = ask("1k");
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(bodies(&server)[0]["max_tokens"], 1000);
    }

    #[test]
    fn a_server_that_refuses_max_tokens_gets_max_completion_tokens() {
        let refusal = json!({"error": {
            "message": "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
            "type": "invalid_request_error", "param": "max_tokens", "code": "unsupported_parameter"
        }})
        .to_string();
        let server = OpenAiServer::start(
            vec![
                Behavior::status_with_body(400, &refusal),
                lua("print(llm_query('hi'))"),
                Behavior::reply("hello"),
                lua("FINAL('ok')"),
            ],
            Behavior::status(500),
        );
        let out = rlm_command()
            .args(["ask", "Q", "--max-reply-tokens", "300"])
            .args(llm_args(&server.base_url(), "test-model"))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(stdout(&out), "ok\n");
        let bodies = bodies(&server);
        assert_eq!(bodies[0]["max_tokens"], 300);
        for body in &bodies[1..] {
            assert_eq!(body["max_completion_tokens"], 300, "{body}");
            assert!(body.get("max_tokens").is_none(), "{body}");
        }
        // The refused attempt is not a failed call.
        assert!(!stderr(&out).contains("failed"), "{}", stderr(&out));
    }

    #[test]
    fn reasoning_tokens_are_in_the_usage_summary_and_thinking_in_trace_show() {
        let dir = tempfile::tempdir().unwrap();
        let trace = dir.path().join("run.jsonl");
        let server = OpenAiServer::always(Behavior::reasoning_reply(
            "<think>inline doubt</think>\n```lua\nFINAL('ok')\n```",
            "apart thought",
            30,
        ));
        let out = rlm_command()
            .args(["ask", "Q", "--trace"])
            .arg(&trace)
            .args(llm_args(&server.base_url(), "test-model"))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert!(
            stderr(&out).contains("140 tokens (30 of them reasoning)"),
            "{}",
            stderr(&out)
        );
        let show = rlm_command()
            .args(["trace", "show"])
            .arg(&trace)
            .args(["--turn", "0:1"])
            .output()
            .unwrap();
        let text = stdout(&show);
        assert!(text.contains("thinking (never run) · 30 tokens"), "{text}");
        assert!(
            text.contains("apart thought") && text.contains("inline doubt"),
            "{text}"
        );
        assert!(text.contains("reply sent back to the model"), "{text}");
        let html = dir.path().join("run.html");
        let out = rlm_command()
            .args(["trace", "html"])
            .arg(&trace)
            .arg("-o")
            .arg(&html)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let page = std::fs::read_to_string(&html).unwrap();
        assert!(page.contains("apart thought"));
    }
}
