//! `rlm ask` end to end: the CLI runs the loop against the scripted server.

use crate::support;

use support::openai_server::{Behavior, OpenAiServer};
use support::rlm_loop::*;

#[cfg(feature = "cli")]
mod cli {
    use std::process::Output;

    use super::*;
    use crate::support::cli::{llm_args, rlm_command};

    fn rlm_ask(server: &OpenAiServer, args: &[&str]) -> Output {
        rlm_command()
            .arg("ask")
            .args(args)
            .args(llm_args(&server.base_url(), "test-model"))
            .output()
            .expect("rlm runs")
    }

    fn text(bytes: &[u8]) -> String {
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[test]
    fn ask_prints_the_answer_and_exits_0() {
        let server = OpenAiServer::start(
            vec![
                lua("n = line_count(context)\nprint('lines:', n)"),
                lua("FINAL(n .. ' lines')"),
            ],
            Behavior::status(500),
        );
        let out = rlm_ask(
            &server,
            &["How many lines?", "--context", "examples/server.log"],
        );
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        let lines = std::fs::read_to_string("examples/server.log")
            .unwrap()
            .lines()
            .count();
        assert_eq!(text(&out.stdout), format!("{lines} lines\n"));
        assert!(stderr.contains("turn 1/10 · 1 block"), "{stderr}");
        assert!(
            stderr.contains("  │ n = line_count(context)  (+1 line)"),
            "{stderr}"
        );
        assert!(stderr.contains("answered after 2 turns"), "{stderr}");
        assert!(stderr.contains("total    2 calls"), "{stderr}");
        eprintln!("--- live view sample ---\n{stderr}");

        // -q: only the answer.
        let server = OpenAiServer::always(lua("FINAL('quiet')"));
        let out = rlm_ask(&server, &["Q", "-q"]);
        assert_eq!(out.status.code(), Some(0));
        assert_eq!(text(&out.stdout), "quiet\n");
        assert_eq!(text(&out.stderr), "");
    }

    #[test]
    fn ask_exits_1_on_the_iteration_limit_budgets_and_llm_failures() {
        let server = OpenAiServer::always(lua("print('looking')"));
        let out = rlm_ask(&server, &["Q", "--max-iterations", "2"]);
        assert_eq!(out.status.code(), Some(1));
        assert_eq!(text(&out.stdout), "");
        let stderr = text(&out.stderr);
        assert!(
            stderr.ends_with("error: iteration limit reached: no final answer after 2 turns\n"),
            "{stderr}"
        );
        assert_eq!(server.request_count(), 2);

        // The warnings from turn 5 on go to stderr too, and not with -q.
        let out = rlm_ask(&server, &["Q", "--max-iterations", "5"]);
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains("WARN") && stderr.contains("RLM turn 5 of 5"),
            "{stderr}"
        );
        let out = rlm_ask(&server, &["Q", "--max-iterations", "5", "-q"]);
        assert_eq!(
            text(&out.stderr),
            "error: iteration limit reached: no final answer after 5 turns\n"
        );

        let out = rlm_ask(&server, &["Q", "--max-llm-calls", "1", "-q"]);
        assert_eq!(out.status.code(), Some(1));
        assert_eq!(
            text(&out.stderr),
            "error: the run's model-call budget is spent: all 1 calls made (it is set by --max-llm-calls, `max_llm_calls` in [budgets] of rlm.toml or Python)\n"
        );

        let server = OpenAiServer::always(Behavior::status(401));
        let out = rlm_ask(&server, &["Q", "-q"]);
        assert_eq!(out.status.code(), Some(1));
        let stderr = text(&out.stderr);
        assert!(
            stderr.starts_with("error: LLM request failed: the server answered HTTP 401"),
            "{stderr}"
        );

        let out = rlm_ask(&server, &["Q", "--max-iterations", "0"]);
        assert_eq!(out.status.code(), Some(2), "a usage error");
    }

    #[test]
    fn ask_takes_a_prompt_mode() {
        let system_of = |args: &[&str]| {
            let server = OpenAiServer::always(lua("FINAL('ok')"));
            let out = rlm_ask(&server, args);
            assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
            system_prompt_of(&bodies(&server), 0)
        };
        let fixtures = ["--no-baked", "--path", "tests/fixtures/good"];
        // Compact is the default.
        for args in [&["Q", "-q"][..], &["Q", "-q", "--prompt-mode", "compact"]] {
            let compact = system_of(&[args, &fixtures].concat());
            assert!(
                compact.contains("\nreverse_text(s)  -- Reverses a string.\n"),
                "{compact}"
            );
            assert!(
                compact.contains("`fn_search(\"what you need\")`"),
                "{compact}"
            );
            assert!(!compact.contains("@param"), "{compact}");
        }
        let full = system_of(&[&["Q", "-q", "--prompt-mode", "full"][..], &fixtures].concat());
        assert!(
            full.contains("---@param width? integer The width"),
            "{full}"
        );
        assert!(!full.contains("`fn_search(\"what you need\")`"), "{full}");
        // Seven functions are far below the automatic threshold.
        let auto = system_of(&[&["Q", "-q", "--prompt-mode", "auto"][..], &fixtures].concat());
        assert!(
            auto.contains("---@param width? integer The width"),
            "{auto}"
        );

        let server = OpenAiServer::always(lua("FINAL('ok')"));
        let out = rlm_ask(&server, &["Q", "--prompt-mode", "short"]);
        assert_eq!(out.status.code(), Some(2), "a usage error");
        assert!(
            text(&out.stderr).contains("full, compact, auto"),
            "{}",
            text(&out.stderr)
        );
        assert_eq!(server.request_count(), 0);
    }

    #[test]
    fn ask_writes_the_trace_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.jsonl");
        let server = OpenAiServer::start(
            vec![lua("x = 41"), lua("FINAL(x + 1)")],
            Behavior::status(500),
        );
        let out = rlm_ask(&server, &["Q", "-q", "--trace", path.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        assert_eq!(text(&out.stdout), "42\n");
        let events = events_of(&std::fs::read_to_string(&path).unwrap());
        assert_eq!(events.len(), 3);
        assert_eq!(events[0]["event"], "start");
        assert_eq!(events[1]["code_blocks"][0], "x = 41\n");
        assert_eq!(events[2]["final"], "42");
    }
}
