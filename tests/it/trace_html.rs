//! `rlm trace html`: the page of a real loop run, opened in headless Chromium (Debian's
//! `chromium`; without it the Chromium tests say they skipped, or fail under
//! `RLM_REQUIRE_TOOLS=1`, as in CI): no script error, the agent tree and every turn in
//! the DOM, model-written markup kept as text.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;

use rlm_registry::rlm::Context;
use rlm_registry::trace::{Trace, html};
use support::openai_server::{Behavior, OpenAiServer};
use support::rlm_loop::*;

/// What the model prints to try to break out of the page.
const XSS: &str = "</script><img src=x onerror=\"document.title='pwned'\"><script>document.title='pwned'</script>";

/// A run with a child, an error, a hostile output and a long output; its trace file.
fn run(dir: &Path) -> PathBuf {
    let server = OpenAiServer::start(
        vec![
            lua("print(rlm_query('Sub-task'))"),
            lua("FINAL('from the child')"),
            Behavior::reply("```lua\nprint(nope())\n```"),
            lua(&format!(
                "print([[{XSS}]])\nfor i = 1, 60 do print('line ' .. i) end -- long"
            )),
            lua("FINAL('done')"),
        ],
        Behavior::status(500),
    );
    let path = dir.join("run.jsonl");
    rlm(&server, 10)
        .trace_file(&path)
        .unwrap()
        .run("How many lines?", Some(Context::from("a\nb\n")))
        .unwrap();
    path
}

/// Runs headless Chromium on `url` with `extra` arguments; its stdout, after checking
/// that the page wrote nothing to the console (errors, CSP violations, warnings).
fn headless(browser: &str, profile: &Path, url: &str, extra: &[&str]) -> String {
    let out = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--virtual-time-budget=5000",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(url)
        .output()
        .expect("chromium runs");
    let log = String::from_utf8_lossy(&out.stderr);
    let console: Vec<&str> = log.lines().filter(|l| l.contains(":CONSOLE:")).collect();
    assert!(console.is_empty(), "console messages: {console:#?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_page_is_self_contained_and_keeps_model_markup_as_text() {
    let dir = tempfile::tempdir().unwrap();
    let trace = Trace::read(run(dir.path())).unwrap();
    let page = html(&trace, "run.jsonl");
    // No external asset: nothing is fetched.
    for needle in ["src=\"http", "href=\"http", "@import", "url(", "<link"] {
        assert!(!page.contains(needle), "{needle}");
    }
    // Only the page's own two scripts; the hostile output is escaped JSON.
    assert_eq!(page.matches("<script").count(), 2);
    assert_eq!(page.matches("</script>").count(), 2);
    assert!(!page.contains("<img"));
    assert!(page.contains("\\u003c/script\\u003e\\u003cimg src=x onerror="));
    assert!(page.len() < 300_000, "{} bytes", page.len());
}

#[test]
fn the_command_writes_the_page_next_to_the_trace() {
    let dir = tempfile::tempdir().unwrap();
    let path = run(dir.path());
    let out = support::cli::rlm(&["trace", "html", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", support::cli::stderr(&out));
    let page = std::fs::read_to_string(dir.path().join("run.html")).unwrap();
    assert!(page.contains("<title>run.jsonl · rlm trace</title>"));
    let chosen = dir.path().join("chosen.html");
    let out = support::cli::rlm(&[
        "trace",
        "html",
        path.to_str().unwrap(),
        "-o",
        chosen.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    assert!(chosen.exists());
}

#[test]
fn chromium_renders_every_turn_and_the_agent_tree_without_script_errors() {
    let Some(browser) = support::external::chromium() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let trace = Trace::read(run(dir.path())).unwrap();
    let page_path = dir.path().join("run.html");
    std::fs::write(&page_path, html(&trace, "run.jsonl")).unwrap();
    let url = format!("file://{}#all", page_path.display());
    let profile = dir.path().join("profile");
    let dom = headless(browser, &profile, &url, &["--dump-dom"]);

    assert!(
        dom.contains("data-loaded=\"1\""),
        "the script ran to its end"
    );
    assert!(dom.contains("<div id=\"errors\"></div>"), "no script error");
    assert!(
        dom.contains("<title>run.jsonl · rlm trace</title>"),
        "model markup never runs"
    );
    assert!(!dom.contains("<img"), "model markup never becomes elements");
    assert!(
        dom.contains("&lt;/script&gt;&lt;img src=x onerror="),
        "it stays text"
    );
    // The agent tree, and every turn of every agent.
    for agent in &trace.agents {
        assert!(
            dom.contains(&format!("<a data-agent=\"{}\"", agent.id)),
            "agent {} in the tree",
            agent.id
        );
        for turn in &agent.turns {
            assert!(
                dom.contains(&format!("data-turn=\"{}:{}\"", agent.id, turn.turn)),
                "turn {}:{}",
                agent.id,
                turn.turn
            );
        }
    }
    // The child sits inside the root's first turn; its code is highlighted; the long
    // output is folded, whole.
    let first_turn = dom.find("data-turn=\"0:1\"").unwrap();
    let child = dom.find("id=\"agent-0.1\"").unwrap();
    let second_turn = dom.find("data-turn=\"0:2\"").unwrap();
    assert!(first_turn < child && child < second_turn);
    assert!(dom.contains("<span class=\"fn\">rlm_query</span>"));
    assert!(dom.contains("line 60"));
    assert!(dom.contains("show all 62 lines"));

    // Search finds turns whether or not they are rendered.
    let url = format!("file://{}#search=nope", page_path.display());
    let dom = headless(browser, &profile, &url, &["--dump-dom"]);
    assert!(
        dom.contains("<span class=\"where\">0:2</span>"),
        "search hit"
    );
    assert!(dom.contains("<div id=\"errors\"></div>"));

    let shot = dir.path().join("page.png");
    headless(
        browser,
        &profile,
        &format!("file://{}", page_path.display()),
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1280,900",
        ],
    );
    let png = std::fs::read(&shot).expect("a screenshot");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    if let Ok(keep) = std::env::var("RLM_TRACE_SCREENSHOT") {
        std::fs::copy(&shot, keep).unwrap();
    }
}

/// A synthetic trace of one agent with `turns` turns.
fn long_trace(turns: u32) -> String {
    let mut text = String::from(
        r#"{"event":"start","agent":"0","depth":0,"question":"Q","messages":[{"role":"system","content":"S"},{"role":"user","content":"Q"}]}"#,
    );
    text.push('\n');
    for n in 1..=turns {
        let line = serde_json::json!({
            "event": "turn", "agent": "0", "depth": 0, "turn": n, "messages_sent": 2 * n,
            "reply": format!("```lua\nprint(line_count(context) + {n})\n```"),
            "code_blocks": [format!("print(line_count(context) + {n})\n")],
            "outputs": [{"block": 1, "status": "ok", "output": format!("{}\n", n + 2), "error": null, "elapsed_ms": 1}],
            "feedback": format!("Output of block 1:\n{}\n", n + 2),
            "final": null, "error": null, "elapsed_ms": 20 + u64::from(n % 7), "llm_ms": 15,
            "prompt_tokens": 100 + u64::from(n), "completion_tokens": 20, "run_tokens": 120 * u64::from(n),
        });
        text.push_str(&line.to_string());
        text.push('\n');
    }
    text
}

#[test]
fn a_ten_thousand_turn_page_loads_with_the_first_rows_rendered() {
    let trace = Trace::parse(&long_trace(10_000)).unwrap();
    let page = html(&trace, "long.jsonl");
    assert!(page.len() < 6_000_000, "{} bytes", page.len());
    let Some(browser) = support::external::chromium() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let page_path = dir.path().join("long.html");
    std::fs::write(&page_path, page).unwrap();
    let url = format!("file://{}#turn=0:9999", page_path.display());
    let dom = headless(browser, &dir.path().join("profile"), &url, &["--dump-dom"]);
    assert!(dom.contains("data-loaded=\"1\""));
    assert!(dom.contains("<div id=\"errors\"></div>"));
    assert!(dom.contains("data-turn=\"0:1\""));
    // Rows are rendered up to the turn asked for, not all 10,000.
    assert!(dom.contains("data-turn=\"0:9999\""));
    assert!(dom.contains("show 1 more turn (1 left)"));
    assert!(!dom.contains("data-turn=\"0:10000\""));
}

#[test]
fn chromium_shows_the_children_of_a_turn_cut_short() {
    let Some(browser) = support::external::chromium() else {
        return;
    };
    // The root's turn 1 started a child, and the trace ends before that turn's line.
    let text = [
        r#"{"event":"start","agent":"0","depth":0,"question":"Q","messages":[]}"#,
        r#"{"event":"start","agent":"0.1","depth":1,"question":"sub","messages":[]}"#,
        r#"{"event":"turn","agent":"0.1","depth":1,"turn":1,"reply":"r","code_blocks":["print(1)"],"outputs":[{"block":1,"status":"ok","output":"1\n","error":null,"elapsed_ms":1}],"feedback":"f"}"#,
        r#"{"event":"turn","agent":"0.1","dep"#,
    ]
    .join("\n");
    let trace = Trace::parse(&text).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let page_path = dir.path().join("cut.html");
    std::fs::write(&page_path, html(&trace, "cut.jsonl")).unwrap();
    let url = format!("file://{}#all", page_path.display());
    let dom = headless(browser, &dir.path().join("profile"), &url, &["--dump-dom"]);
    assert!(dom.contains("<div id=\"errors\"></div>"));
    assert!(dom.contains("turn 1 · in progress · agents started so far"));
    assert!(dom.contains("data-turn=\"0.1:1\""));
    assert!(dom.contains("partial last line"));
    assert!(dom.contains("No final answer: the run is still going, or was cut short."));
}
