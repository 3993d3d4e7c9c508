//! The RLM loop end to end, against the scripted OpenAI-compatible server over real HTTP:
//! what the model is sent, what it gets back, and how runs end.

mod support;

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rlm_registry::Registry;
use rlm_registry::environment::Limits;
use rlm_registry::llm::{LlmClient, LlmConfig, LlmError};
use rlm_registry::rlm::{
    AUTO_COMPACT_ABOVE_TOKENS, BudgetExceeded, Budgets, Context, PromptMode, Rlm, RlmError,
};
use serde_json::Value;
use support::openai_server::{Behavior, OpenAiServer};

fn client(server: &OpenAiServer) -> LlmClient {
    let config = LlmConfig::new(server.base_url(), "test-model")
        .with_max_retries(1)
        .with_backoff(Duration::from_millis(1), Duration::from_millis(5))
        .with_timeout(Duration::from_secs(10));
    LlmClient::new(config).unwrap()
}

fn rlm(server: &OpenAiServer, max_iterations: u32) -> Rlm {
    Rlm::new(
        Arc::new(client(server)),
        Registry::baked().clone(),
        max_iterations,
    )
}

fn lua(code: &str) -> Behavior {
    Behavior::reply(&format!("```lua\n{code}\n```"))
}

/// The JSON bodies the server received, in order.
fn bodies(server: &OpenAiServer) -> Vec<Value> {
    server
        .requests()
        .iter()
        .map(|r| r.json().expect("a JSON body"))
        .collect()
}

/// [`bodies`], where a local variable shadows it.
fn bodies_of(server: &OpenAiServer) -> Vec<Value> {
    bodies(server)
}

/// The messages of a request body.
fn messages(body: &Value) -> &Vec<Value> {
    body["messages"].as_array().unwrap()
}

/// The content of the last message of a request body (the feedback of the last turn).
fn last_message(body: &Value) -> String {
    messages(body).last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string()
}

/// A writer the test can read afterwards.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Shared {
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }

    /// The trace's lines, each parsed as JSON.
    fn events(&self) -> Vec<Value> {
        events_of(&self.text())
    }
}

/// Every line of a JSONL trace, parsed.
fn events_of(trace: &str) -> Vec<Value> {
    trace
        .lines()
        .map(|line| serde_json::from_str(line).expect("each line is JSON"))
        .collect()
}

/// The `turn` events of a trace, without the agents' `start` lines.
fn turns(events: &[Value]) -> Vec<&Value> {
    events.iter().filter(|e| e["event"] == "turn").collect()
}

/// The conversation `agent` sent to the model at `turn`, rebuilt from the trace alone:
/// its `start` messages, then each earlier turn's reply and feedback.
fn conversation(events: &[Value], agent: &str, turn: u64) -> Vec<Value> {
    let of_agent = |e: &&Value| e["agent"] == agent;
    let start = events
        .iter()
        .filter(of_agent)
        .find(|e| e["event"] == "start")
        .expect("a start line for every agent");
    let mut messages = start["messages"].as_array().unwrap().clone();
    for earlier in events
        .iter()
        .filter(of_agent)
        .filter(|e| e["event"] == "turn")
    {
        if earlier["turn"].as_u64().unwrap() >= turn {
            break;
        }
        messages.push(serde_json::json!({"role": "assistant", "content": earlier["reply"]}));
        messages.push(serde_json::json!({"role": "user", "content": earlier["feedback"]}));
    }
    messages
}

#[test]
fn a_multi_turn_run_reaches_a_final_answer() {
    let server = OpenAiServer::start(
        vec![
            lua("n = line_count(context)\nprint('lines', n)"),
            lua("FINAL('There are ' .. n .. ' lines')"),
        ],
        Behavior::status(500),
    );
    let answer = rlm(&server, 10)
        .run("How many lines?", Some(Context::from("a\nb\nc\n")))
        .unwrap();
    assert_eq!(answer.text, "There are 3 lines");
    assert_eq!(answer.turns, 2);
    let bodies = bodies(&server);
    assert_eq!(bodies.len(), 2);
    // Turn 1: the system prompt and the question.
    let first = messages(&bodies[0]);
    assert_eq!(first.len(), 2);
    assert_eq!(first[0]["role"], "system");
    let system = first[0]["content"].as_str().unwrap();
    assert!(system.contains("`context` is a string of 6 bytes: 3 lines"));
    assert!(system.contains("function llm_query(prompt) end"));
    assert!(system.contains("function re.find(text, pattern, init, flags) end"));
    assert!(system.contains(Registry::baked().system_prompt().trim_end()));
    assert!(
        first[1]["content"]
            .as_str()
            .unwrap()
            .starts_with("How many lines?")
    );
    // Turn 2: the reply and its output were appended.
    let second = messages(&bodies[1]);
    assert_eq!(second.len(), 4);
    assert_eq!(second[2]["role"], "assistant");
    assert!(
        second[2]["content"]
            .as_str()
            .unwrap()
            .contains("line_count")
    );
    assert_eq!(last_message(&bodies[1]), "Output of block 1:\nlines\t3\n");
    let usage = answer.usage.total();
    assert_eq!((usage.calls, usage.total_tokens()), (2, 30));
}

#[test]
fn final_var_answers_with_a_variable() {
    let server = OpenAiServer::start(
        vec![lua(
            "local words = word_count(context)\nanswer = 'words: ' .. words\nFINAL_VAR('answer')",
        )],
        Behavior::status(500),
    );
    let answer = rlm(&server, 10)
        .run("Count the words", Some(Context::from("one two three")))
        .unwrap();
    assert_eq!(answer.text, "words: 3");
    assert_eq!(answer.turns, 1);
}

#[test]
fn every_block_runs_in_order_and_unlabeled_lua_fences_count() {
    let server = OpenAiServer::start(
        vec![
            Behavior::reply(
                "First:\n```lua\nx = 20\n```\nThen:\n```\nx = x + 1\nprint(x)\n```\n```text\nnot code\n```",
            ),
            lua("FINAL(x * 2)"),
        ],
        Behavior::status(500),
    );
    let answer = rlm(&server, 10).run("Compute", None).unwrap();
    assert_eq!(answer.text, "42");
    let feedback = last_message(&bodies(&server)[1]);
    assert!(
        feedback.contains("Block 1 ran and printed nothing"),
        "{feedback}"
    );
    assert!(feedback.contains("Output of block 2:\n21\n"), "{feedback}");
    assert!(
        feedback.contains("a ```text block was not run"),
        "{feedback}"
    );
}

#[test]
fn a_final_in_plain_text_is_accepted() {
    let server = OpenAiServer::start(
        vec![Behavior::reply(
            "I can tell without code.\n\nFINAL(\"forty-two\")",
        )],
        Behavior::status(500),
    );
    let answer = rlm(&server, 10).run("What?", None).unwrap();
    assert_eq!(answer.text, "forty-two");
    assert_eq!(server.request_count(), 1);

    // FINAL(name) with a variable of the session answers with its value; FINAL_VAR too.
    let server = OpenAiServer::start(
        vec![
            lua("result = 6 * 7"),
            Behavior::reply("The code worked.\nFINAL(result)"),
        ],
        Behavior::status(500),
    );
    assert_eq!(rlm(&server, 10).run("What?", None).unwrap().text, "42");
    let server = OpenAiServer::start(
        vec![Behavior::reply("```lua\ntotal = 5\n```\nFINAL_VAR(total)")],
        Behavior::status(500),
    );
    assert_eq!(rlm(&server, 10).run("What?", None).unwrap().text, "5");
}

#[test]
fn a_reply_without_code_gets_one_reminder() {
    let server = OpenAiServer::start(
        vec![
            Behavior::reply("Let me think about the context first."),
            lua("FINAL('ok')"),
        ],
        Behavior::status(500),
    );
    assert_eq!(rlm(&server, 10).run("Q", None).unwrap().text, "ok");
    let reminder = last_message(&bodies(&server)[1]);
    assert!(reminder.contains("no ```lua code block"), "{reminder}");
    assert!(reminder.contains("only reminder"), "{reminder}");

    // Twice in a row ends the run.
    let server = OpenAiServer::always(Behavior::reply("Hmm, interesting."));
    match rlm(&server, 10).run("Q", None) {
        Err(error @ RlmError::NoCode { .. }) => {
            assert!(error.to_string().contains("Hmm, interesting."), "{error}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(server.request_count(), 2);
}

#[test]
fn a_lua_error_goes_back_with_its_line_and_the_run_recovers() {
    let server = OpenAiServer::start(
        vec![
            lua("print('before')\nlocal t = nil\nprint(t.field)\nprint('after')"),
            lua("FINAL('recovered')"),
        ],
        Behavior::status(500),
    );
    let answer = rlm(&server, 10).run("Q", None).unwrap();
    assert_eq!(answer.text, "recovered");
    let feedback = last_message(&bodies(&server)[1]);
    assert!(
        feedback
            .starts_with("Block 1 failed with a Lua error on line 3: attempt to index a nil value"),
        "{feedback}"
    );
    assert!(feedback.contains("  3 | print(t.field)"), "{feedback}");
    assert!(
        feedback.contains("Output before the error:\nbefore\n"),
        "{feedback}"
    );
}

#[test]
fn an_unknown_function_gets_a_did_you_mean() {
    let server = OpenAiServer::start(
        vec![
            lua("print(word_cout(context))"),
            lua("FINAL(word_count(context))"),
        ],
        Behavior::status(500),
    );
    let answer = rlm(&server, 10)
        .run("Words?", Some(Context::from("a b")))
        .unwrap();
    assert_eq!(answer.text, "2");
    let feedback = last_message(&bodies(&server)[1]);
    assert!(
        feedback.contains("`word_cout` is not a function here"),
        "{feedback}"
    );
    assert!(
        feedback.contains("Did you mean `word_count`?"),
        "{feedback}"
    );
}

#[test]
fn a_limit_hit_goes_back_as_text_and_later_blocks_do_not_run() {
    let server = OpenAiServer::start(
        vec![
            Behavior::reply(
                "```lua\nkept = 1\nwhile true do end\n```\n```lua\nprint('never')\n```",
            ),
            lua("FINAL(kept)"),
        ],
        Behavior::status(500),
    );
    let limits = Limits {
        time: Duration::from_millis(100),
        ..Limits::default()
    };
    let answer = rlm(&server, 10).limits(limits).run("Q", None).unwrap();
    assert_eq!(answer.text, "1", "variables survive the limit");
    let feedback = last_message(&bodies(&server)[1]);
    assert!(
        feedback.starts_with("Block 1 hit the time limit"),
        "{feedback}"
    );
    assert!(feedback.contains("Block 2 was not run"), "{feedback}");
}

#[test]
fn long_output_is_truncated_with_a_note() {
    let server = OpenAiServer::start(
        vec![lua("print(string.rep('x', 1000))"), lua("FINAL('done')")],
        Behavior::status(500),
    );
    rlm(&server, 10).output_bytes(100).run("Q", None).unwrap();
    let feedback = last_message(&bodies(&server)[1]);
    assert!(
        feedback.contains(&format!("{}\n[... 901 more bytes cut", "x".repeat(100))),
        "{feedback}"
    );
}

#[cfg(feature = "cli")] // tracing-subscriber comes with the `cli` feature
#[test]
fn the_iteration_cap_ends_the_run_with_warnings_from_turn_5() {
    let server = OpenAiServer::always(lua("print('still looking')"));
    let logs = Shared::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let result = tracing::subscriber::with_default(subscriber, || rlm(&server, 6).run("Q", None));
    match result {
        Err(error @ RlmError::IterationLimit { max_iterations: 6 }) => {
            assert_eq!(
                error.to_string(),
                "iteration limit reached: no final answer after 6 turns"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(server.request_count(), 6);
    let logs = logs.text();
    assert!(!logs.contains("turn 4 of 6"), "{logs}");
    assert!(logs.contains("WARN"), "{logs}");
    assert!(logs.contains("RLM turn 5 of 6"), "{logs}");
    assert!(logs.contains("RLM turn 6 of 6"), "{logs}");
    // The model is told when the end is near.
    assert!(last_message(&bodies(&server)[5]).contains("1 turn left"));

    let default =
        Rlm::with_default_iterations(Arc::new(client(&server)), Registry::baked().clone());
    assert_eq!(default.max_iterations(), 10);
}

#[test]
fn too_many_consecutive_errors_end_the_run() {
    let server = OpenAiServer::always(lua("error('nope')"));
    match rlm(&server, 10).max_consecutive_errors(2).run("Q", None) {
        Err(RlmError::ConsecutiveErrors { count, last_error }) => {
            assert_eq!(count, 2);
            assert!(last_error.contains("nope"), "{last_error}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(server.request_count(), 2);

    // A good turn in between resets the count.
    let server = OpenAiServer::start(
        vec![
            lua("error('a')"),
            lua("print(1)"),
            lua("error('b')"),
            lua("FINAL('ok')"),
        ],
        Behavior::status(500),
    );
    let answer = rlm(&server, 10).max_consecutive_errors(2).run("Q", None);
    assert_eq!(answer.unwrap().text, "ok");
}

#[test]
fn rlm_query_runs_a_child_agent_one_level_deeper() {
    let server = OpenAiServer::start(
        vec![
            // Root, turn 1: hand a sub-task to a child.
            lua("local a = rlm_query('Count the lines', 'x\\ny\\n')\nprint('child said', a)"),
            // The child, its own loop: one turn.
            lua("FINAL(line_count(context) .. ' lines')"),
            // Root, turn 2.
            lua("FINAL('the child found 2')"),
        ],
        Behavior::status(500),
    );
    let answer = rlm(&server, 10)
        .run("Q", Some(Context::from("root context")))
        .unwrap();
    assert_eq!(answer.text, "the child found 2");
    let bodies = bodies(&server);
    assert_eq!(bodies.len(), 3);
    let child = messages(&bodies[1]);
    assert_eq!(child.len(), 2, "the child starts its own conversation");
    let system = child[0]["content"].as_str().unwrap();
    assert!(system.contains("sub-agent at depth 1 of 1"), "{system}");
    assert!(
        system.contains("`context` is a string of 4 bytes: 2 lines"),
        "{system}"
    );
    assert!(
        child[1]["content"]
            .as_str()
            .unwrap()
            .starts_with("Count the lines")
    );
    assert_eq!(
        last_message(&bodies[2]),
        "Output of block 1:\nchild said\t2 lines\n"
    );
    // Usage per depth: the root's two turns, the child's one.
    assert_eq!(answer.usage.by_depth.len(), 2);
    assert_eq!(answer.usage.by_depth[0].calls, 2);
    assert_eq!(answer.usage.by_depth[1].calls, 1);
    assert_eq!(answer.usage.total().calls, 3);
    assert!(
        answer
            .usage
            .to_string()
            .contains("depth 1  1 call, 10 prompt")
    );
}

#[test]
fn at_the_depth_limit_rlm_query_is_out_of_scope_and_the_model_recovers() {
    let server = OpenAiServer::start(
        vec![
            lua("print(rlm_query('Sub-task'))"),
            // The child at depth 1 (the limit) may not start a child: the call is
            // refused, naming the scope, and the child recovers with llm_query.
            lua("local r = rlm_query('Inner question', 'inner context')"),
            lua("FINAL('child got: ' .. llm_query('Inner question'))"),
            Behavior::reply("inner answer"),
            lua("FINAL('done')"),
        ],
        Behavior::status(500),
    );
    let answer = rlm(&server, 10).run("Q", None).unwrap();
    assert_eq!(answer.text, "done");
    let bodies = bodies(&server);
    assert_eq!(bodies.len(), 5);
    let child_prompt = messages(&bodies[1])[0]["content"].as_str().unwrap();
    assert!(child_prompt.contains("You are at the depth limit"));
    assert!(!child_prompt.contains("function rlm_query("));
    assert!(!child_prompt.contains("function ask_user("));
    let refusal = last_message(&bodies[2]);
    assert!(refusal.contains("rlm_query is not available"), "{refusal}");
    assert!(refusal.contains("`agent` scope"), "{refusal}");
    assert_eq!(
        messages(&bodies[3]).len(),
        1,
        "a plain call: no system prompt"
    );
    assert_eq!(
        last_message(&bodies[4]),
        "Output of block 1:\nchild got: inner answer\n"
    );
    // The root (depth 0, below the limit) had both the agent and the user scopes.
    let root_prompt = messages(&bodies[0])[0]["content"].as_str().unwrap();
    assert!(root_prompt.contains("function rlm_query("));
    assert!(root_prompt.contains("function ask_user("));

    // With max_depth 0 the root itself may not start children.
    let server = OpenAiServer::start(
        vec![lua("print(rlm_query('Sub'))"), lua("FINAL('x')")],
        Behavior::status(500),
    );
    rlm(&server, 10).max_depth(0).run("Q", None).unwrap();
    let bodies = bodies_of(&server);
    assert_eq!(bodies.len(), 2, "no sub-call was made");
    assert!(last_message(&bodies[1]).contains("`agent` scope"));
}

#[test]
fn children_nest_down_to_max_depth_and_run_batched() {
    let server = OpenAiServer::start(
        vec![
            lua("print(rlm_query('a'))"),
            lua("FINAL('child: ' .. rlm_query('b'))"),
            lua("FINAL('grandchild')"),
            lua("FINAL('done')"),
        ],
        Behavior::status(500),
    );
    let trace = Shared::default();
    let answer = rlm(&server, 10)
        .max_depth(2)
        .trace(trace.clone())
        .run("Q", None)
        .unwrap();
    assert_eq!(answer.text, "done");
    let bodies = bodies(&server);
    let system = messages(&bodies[2])[0]["content"].as_str().unwrap();
    assert!(system.contains("sub-agent at depth 2 of 2"), "{system}");
    assert_eq!(
        last_message(&bodies[3]),
        "Output of block 1:\nchild: grandchild\n"
    );
    let calls: Vec<u64> = answer.usage.by_depth.iter().map(|u| u.calls).collect();
    assert_eq!(calls, [2, 1, 1]);
    let events = trace.events();
    let agents: Vec<&str> = turns(&events)
        .iter()
        .map(|e| e["agent"].as_str().unwrap())
        .collect();
    assert_eq!(agents, ["0.1.1", "0.1", "0", "0"]);
    // Each agent's start line comes before anything it does.
    let starts: Vec<&str> = events
        .iter()
        .filter(|e| e["event"] == "start")
        .map(|e| e["agent"].as_str().unwrap())
        .collect();
    assert_eq!(starts, ["0", "0.1", "0.1.1"]);

    // rlm_query_batched: children on threads, answers in order.
    let server = OpenAiServer::start(
        vec![lua(
            "local a = rlm_query_batched({'p1', 'p2', 'p3'}, {'a', 'bb', 'ccc'})\nprint(table.concat(a, ','))",
        )],
        lua("FINAL(#context)"),
    );
    let answer = rlm(&server, 10)
        .run("Q", Some(Context::from("xxxx")))
        .unwrap();
    assert_eq!(answer.text, "4");
    assert_eq!(
        last_message(&bodies_of(&server)[4]),
        "Output of block 1:\n1,2,3\n"
    );
    assert_eq!(answer.usage.by_depth[1].calls, 3);
}

#[test]
fn a_failing_child_is_an_error_the_parent_sees() {
    let server = OpenAiServer::start(
        vec![
            lua("print(pcall(rlm_query, 'Sub-task'))"),
            // The child never answers: its iteration cap (2) ends it.
            lua("print('child looking')"),
            lua("print('child still looking')"),
            lua("FINAL('parent went on')"),
        ],
        Behavior::status(500),
    );
    let answer = rlm(&server, 2).run("Q", None).unwrap();
    assert_eq!(answer.text, "parent went on");
    let feedback = last_message(&bodies(&server)[3]);
    assert!(feedback.contains("false"), "{feedback}");
    assert!(
        feedback.contains("child agent 0.1 failed: iteration limit reached"),
        "{feedback}"
    );
}

#[test]
fn budgets_are_shared_by_the_whole_run() {
    // Tokens: 15 per call; with 20 allowed, the third call is refused.
    let server = OpenAiServer::always(lua("print('more')"));
    match rlm(&server, 10)
        .budgets(Budgets::default().with_total_tokens(20))
        .run("Q", None)
    {
        Err(RlmError::Budget(BudgetExceeded::Tokens {
            limit: 20,
            used: 30,
        })) => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(server.request_count(), 2);

    // Calls: llm_query in the code counts too, and is refused once the budget is spent.
    let server = OpenAiServer::start(
        vec![
            lua("print(llm_query('a'))\nprint(pcall(llm_query, 'b'))"),
            Behavior::reply("sub answer"),
        ],
        lua("FINAL('never')"),
    );
    let report = rlm(&server, 10)
        .budgets(Budgets::default().with_llm_calls(2))
        .run_report("Q", None, None);
    match &report.result {
        Err(error @ RlmError::Budget(BudgetExceeded::LlmCalls { limit: 2 })) => {
            assert_eq!(
                error.to_string(),
                "LLM call budget exhausted: all 2 calls made"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(server.request_count(), 2);
    assert_eq!(report.usage.total().calls, 2);
    assert_eq!(report.turns, 2);

    // Wall time.
    let server = OpenAiServer::always(lua("print(1)").after(Duration::from_millis(60)));
    let result = rlm(&server, 10)
        .budgets(Budgets::default().with_wall_time(Duration::from_millis(100)))
        .run("Q", None);
    assert!(
        matches!(
            result,
            Err(RlmError::Budget(BudgetExceeded::WallTime { .. }))
        ),
        "{result:?}"
    );
    assert!((1..=2).contains(&server.request_count()));
}

#[test]
fn a_budget_spent_by_a_child_stops_the_parent() {
    let server = OpenAiServer::start(
        vec![
            lua("print(pcall(rlm_query, 'Sub-task'))"),
            lua("print('child turn 1')"),
        ],
        lua("print('anything')"),
    );
    let report = rlm(&server, 10)
        .budgets(Budgets::default().with_llm_calls(2))
        .run_report("Q", None, None);
    assert!(
        matches!(
            report.result,
            Err(RlmError::Budget(BudgetExceeded::LlmCalls { .. }))
        ),
        "{:?}",
        report.result
    );
    assert_eq!(server.request_count(), 2);
    assert_eq!(report.usage.by_depth[0].calls, 1);
    assert_eq!(report.usage.by_depth[1].calls, 1);
}

#[test]
fn an_llm_server_that_fails_mid_run_is_an_llm_error() {
    let server = OpenAiServer::start(vec![lua("x = 1")], Behavior::status(503));
    let report = rlm(&server, 10).run_report("Q", None, None);
    match &report.result {
        Err(RlmError::Llm(error @ LlmError::Status { status: 503, .. })) => {
            assert_eq!(error.attempts(), 2, "one retry");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(report.turns, 2);
    assert_eq!(report.usage.total().calls, 2);
    assert_eq!(report.usage.total().failed_calls, 1);

    let server = OpenAiServer::start(vec![lua("x = 1")], Behavior::Garbage("<html>".into()));
    let result = rlm(&server, 10).run("Q", None);
    assert!(
        matches!(
            result,
            Err(RlmError::Llm(LlmError::MalformedResponse { .. }))
        ),
        "{result:?}"
    );
}

#[test]
fn the_trace_has_one_json_line_per_turn_of_every_agent() {
    let server = OpenAiServer::start(
        vec![
            lua("print(rlm_query('Sub-task'))"),
            lua("FINAL('from the child')"),
            Behavior::reply("```lua\nprint(nope())\n```"),
            lua("FINAL('done')"),
        ],
        Behavior::status(500),
    );
    let trace = Shared::default();
    let live = Shared::default();
    rlm(&server, 10)
        .trace(trace.clone())
        .live_view(live.clone())
        .run("Q", Some(Context::from("ctx")))
        .unwrap();
    let events = trace.events();
    // Order of writing: each agent's start, then its turns; root turn 1 ends after its
    // child's turn.
    let ids: Vec<(&str, &str, u64, u64)> = events
        .iter()
        .map(|l| {
            (
                l["event"].as_str().unwrap(),
                l["agent"].as_str().unwrap(),
                l["depth"].as_u64().unwrap(),
                l["turn"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(
        ids,
        [
            ("start", "0", 0, 0),
            ("start", "0.1", 1, 0),
            ("turn", "0.1", 1, 1),
            ("turn", "0", 0, 1),
            ("turn", "0", 0, 2),
            ("turn", "0", 0, 3),
        ]
    );
    let (root_start, child_start) = (&events[0], &events[1]);
    assert_eq!(root_start["question"], "Q");
    assert_eq!(root_start["messages"].as_array().unwrap().len(), 2);
    assert_eq!(root_start["messages"][0]["role"], "system");
    assert_eq!(root_start["messages"][1]["role"], "user");
    assert_eq!(child_start["question"], "Sub-task");
    assert!(
        child_start["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("sub-agent at depth 1")
    );
    let lines = turns(&events);
    let child = lines[0];
    assert_eq!(child["final"], "from the child");
    assert_eq!(child["messages_sent"], 2);
    let first = lines[1];
    assert_eq!(first["messages_sent"], 2);
    assert!(first.get("messages").is_none(), "turns carry no messages");
    assert_eq!(first["reply"], "```lua\nprint(rlm_query('Sub-task'))\n```");
    assert_eq!(first["code_blocks"][0], "print(rlm_query('Sub-task'))\n");
    assert_eq!(first["outputs"][0]["status"], "ok");
    assert_eq!(first["outputs"][0]["output"], "from the child\n");
    assert_eq!(first["feedback"], "Output of block 1:\nfrom the child\n");
    assert_eq!(first["final"], Value::Null);
    assert_eq!(first["prompt_tokens"], 10);
    assert_eq!(first["completion_tokens"], 5);
    assert_eq!(first["run_tokens"], 30);
    assert!(first["elapsed_ms"].as_u64().is_some() && first["llm_ms"].as_u64().is_some());
    let error = lines[2];
    assert_eq!(error["outputs"][0]["status"], "error");
    assert!(
        error["outputs"][0]["error"]
            .as_str()
            .unwrap()
            .contains("nope")
    );
    assert_eq!(error["messages_sent"], 4);
    assert_eq!(lines[3]["final"], "done");
    assert_eq!(lines[3]["feedback"], Value::Null);
    // Children's conversations are rebuilt like the root's, from their own lines.
    let bodies = bodies(&server);
    assert_eq!(&conversation(&events, "0.1", 1), messages(&bodies[1]));
    assert_eq!(&conversation(&events, "0", 3), messages(&bodies[3]));

    let live = live.text();
    assert!(
        live.contains("turn 1/10 · 1 block · 15 chars out · 30 tokens"),
        "{live}"
    );
    assert!(
        live.contains("    [agent 0.1] turn 1/10 · 1 block · 0 chars out · FINAL · 30 tokens"),
        "{live}"
    );
    assert!(live.contains("  │ print(rlm_query('Sub-task'))"), "{live}");
    assert!(live.contains("error in block 1"), "{live}");
    assert!(
        live.contains("  ✗ input:1: attempt to call a nil value (global 'nope')"),
        "{live}"
    );
}

#[test]
fn the_trace_grows_linearly_and_the_conversation_can_be_rebuilt_from_it() {
    let replies: Vec<String> = (1..=5)
        .map(|n| format!("print('marker {n} of the run', #context)"))
        .collect();
    let mut script: Vec<Behavior> = replies.iter().map(|code| lua(code)).collect();
    script.push(lua("FINAL('the end')"));
    let server = OpenAiServer::start(script, Behavior::status(500));
    let trace = Shared::default();
    let answer = rlm(&server, 10)
        .trace(trace.clone())
        .run("Q", Some(Context::from("ctx")))
        .unwrap();
    assert_eq!(answer.turns, 6);
    let text = trace.text();
    let events = events_of(&text);

    // One line per event: the start, then each turn once.
    let kinds: Vec<(&str, u64)> = events
        .iter()
        .map(|e| {
            (
                e["event"].as_str().unwrap(),
                e["turn"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("start", 0),
            ("turn", 1),
            ("turn", 2),
            ("turn", 3),
            ("turn", 4),
            ("turn", 5),
            ("turn", 6)
        ]
    );

    // No line repeats what an earlier line said: the system prompt is on the start line
    // only, and turn N does not carry turn 1's reply.
    let lines: Vec<&str> = text.lines().collect();
    let system = events[0]["messages"][0]["content"].as_str().unwrap();
    let system_marker =
        serde_json::to_string(&system.chars().take(200).collect::<String>()).unwrap();
    let system_marker = system_marker.trim_matches('"');
    assert!(lines[0].contains(system_marker));
    for (n, line) in lines.iter().enumerate().skip(1) {
        assert!(
            !line.contains(system_marker),
            "line {n} repeats the system prompt"
        );
        if n > 1 {
            assert!(
                !line.contains("marker 1 of the run"),
                "line {n} repeats turn 1's reply: {line}"
            );
        }
    }
    // So every turn line is about as long as the first: the trace grows linearly.
    let turn_lengths: Vec<usize> = lines[1..6].iter().map(|l| l.len()).collect();
    let (shortest, longest) = (
        *turn_lengths.iter().min().unwrap(),
        *turn_lengths.iter().max().unwrap(),
    );
    assert!(
        longest < shortest + 100,
        "turn lines grow with the run: {turn_lengths:?}"
    );
    assert!(text.len() < lines[0].len() + 6 * (longest + 1));

    // The conversation of every turn, rebuilt from the trace alone, is what the model got.
    let bodies = bodies(&server);
    assert_eq!(bodies.len(), 6);
    for (i, body) in bodies.iter().enumerate() {
        let turn = i as u64 + 1;
        let rebuilt = conversation(&events, "0", turn);
        assert_eq!(&rebuilt, messages(body), "turn {turn}");
        assert_eq!(
            events[i + 1]["messages_sent"].as_u64().unwrap() as usize,
            rebuilt.len()
        );
    }
}

#[test]
fn the_trace_records_why_a_run_failed() {
    let server = OpenAiServer::start(vec![lua("x = 1")], Behavior::status(400));
    let trace = Shared::default();
    let result = rlm(&server, 10).trace(trace.clone()).run("Q", None);
    assert!(matches!(result, Err(RlmError::Llm(_))));
    let text = trace.text();
    let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(last["turn"], 2);
    assert_eq!(last["reply"], Value::Null);
    assert!(
        last["error"].as_str().unwrap().contains("HTTP 400"),
        "{last}"
    );
}

#[test]
fn chunked_contexts_are_described_and_loaded_as_arrays() {
    let server = OpenAiServer::start(
        vec![lua("FINAL(#context .. ' ' .. context[2])")],
        Behavior::status(500),
    );
    let answer = rlm(&server, 10)
        .run("Q", Some(Context::from(vec!["first doc", "second"])))
        .unwrap();
    assert_eq!(answer.text, "2 second");
    let system = messages(&bodies(&server)[0])[0]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        system.contains("an array (a Lua table) of 2 strings, 15 bytes in total. Chunk sizes in bytes: [1] 9, [2] 6."),
        "{system}"
    );
}

/// The system prompt of the `i`-th request the server received.
fn system_prompt_of(bodies: &[Value], i: usize) -> String {
    let first = &messages(&bodies[i])[0];
    assert_eq!(first["role"], "system");
    first["content"].as_str().unwrap().to_string()
}

/// The registry's section of a system prompt (the last one): the built-ins before it
/// have `---@param` lines of their own.
fn registry_section(system: &str) -> &str {
    let start = system
        .find("## Registry functions")
        .expect("a registry section");
    &system[start..]
}

/// A function with a distinctive doc: its `---@param` line must not reach a compact prompt.
const COUNT_VOWELS: &str = "--- Counts the vowels of a text (a, e, i, o, u, either case).\n---@param text string The text whose vowels are counted\n---@return integer count How many vowels\nfunction count_vowels(text) local _, n = text:gsub('[aeiouAEIOU]', '') return n end";

/// `count_vowels` and `n` generated functions with long docs (about 70 tokens each): a
/// registry "of many functions".
fn registry_of(n: usize) -> Registry {
    let mut map: Vec<(String, String)> = (0..n)
        .map(|i| {
            let name = format!("convert_record_{i:03}");
            let source = format!(
                "--- Converts ledger record {i} into the archival format of the quarterly audit, keeping every field's order and its original spelling.\n---@param record table The ledger record to convert, as read from the journal\n---@param strict? boolean Refuse records with missing fields instead of filling them in\n---@return table converted The record in the archival format\nfunction {name}(record, strict) return record end"
            );
            (name, source)
        })
        .collect();
    map.push(("count_vowels".to_string(), COUNT_VOWELS.to_string()));
    Registry::from_map(map).unwrap()
}

/// An RLM over `registry` listed in `mode`.
fn rlm_listing(server: &OpenAiServer, registry: &Registry, mode: PromptMode) -> Rlm {
    Rlm::new(Arc::new(client(server)), registry.clone(), 10).prompt_mode(mode)
}

#[test]
fn the_compact_prompt_lists_names_and_summaries_and_points_to_fn_search() {
    let registry = registry_of(3);
    let server = OpenAiServer::start(
        vec![
            // Root, turn 1: a child, to see that it inherits the mode.
            lua("print(rlm_query('Sub-task'))"),
            lua("FINAL('from the child')"),
            lua("FINAL('done')"),
        ],
        Behavior::status(500),
    );
    let answer = rlm_listing(&server, &registry, PromptMode::Compact)
        .run("Q", None)
        .unwrap();
    assert_eq!(answer.text, "done");
    let bodies = bodies(&server);
    assert_eq!(bodies.len(), 3);
    for (i, who) in [(0, "root"), (1, "child")] {
        let system = system_prompt_of(&bodies, i);
        assert!(
            system.contains(
                "- `count_vowels(text)`: Counts the vowels of a text (a, e, i, o, u, either case)."
            ),
            "{who}: {system}"
        );
        assert!(
            system.contains("- `convert_record_002(record, strict?)`: Converts ledger record 2"),
            "{who}: {system}"
        );
        let listing = registry_section(&system);
        assert!(!listing.contains("---@param"), "{who}: {listing}");
        assert!(
            !system.contains("The text whose vowels are counted"),
            "{who}"
        );
        assert!(
            system.contains("call `fn_search(query)`"),
            "{who}: {system}"
        );
        // The built-ins stay documented in full: that is how the model discovers the rest.
        assert!(
            system.contains("function fn_search(query, opts) end"),
            "{who}"
        );
        assert!(
            system.contains("function help(name) end"),
            "{who}: {system}"
        );
        assert!(system.contains("function llm_query(prompt) end"), "{who}");
    }
    assert!(system_prompt_of(&bodies, 1).contains("sub-agent at depth 1"));

    // The default lists every function in full.
    let server = OpenAiServer::always(lua("FINAL('x')"));
    Rlm::new(Arc::new(client(&server)), registry.clone(), 10)
        .run("Q", None)
        .unwrap();
    let system = system_prompt_of(&bodies_of(&server), 0);
    assert!(
        system.contains("---@param text string The text whose vowels are counted"),
        "{system}"
    );
    assert!(system.contains(registry.system_prompt().trim_end()));
    assert!(!system.contains("call `fn_search(query)`"));
}

#[test]
fn auto_goes_compact_on_a_large_registry_only() {
    let large = registry_of(200);
    let full_tokens = rlm_registry::tokens::count(large.system_prompt());
    assert!(
        full_tokens > AUTO_COMPACT_ABOVE_TOKENS,
        "the test registry must be large: {full_tokens} tokens"
    );
    let small = registry_of(2);
    let compact_marker = "call `fn_search(query)`";
    for (registry, compact) in [(&large, true), (&small, false)] {
        let server = OpenAiServer::start(
            vec![lua("print(rlm_query('Sub-task'))"), lua("FINAL('child')")],
            lua("FINAL('root')"),
        );
        let rlm = rlm_listing(&server, registry, PromptMode::auto());
        assert_eq!(
            rlm.system_prompt(None).contains(compact_marker),
            compact,
            "{} functions",
            registry.len()
        );
        assert_eq!(rlm.run("Q", None).unwrap().text, "root");
        let bodies = bodies(&server);
        // The root's first request, then its child's: the child inherits the decision.
        for i in [0, 1] {
            let system = system_prompt_of(&bodies, i);
            assert_eq!(system.contains(compact_marker), compact, "request {i}");
            assert_eq!(
                system.contains("---@param record table"),
                !compact,
                "request {i}"
            );
        }
    }
    // The threshold is the auto mode's own.
    let server = OpenAiServer::always(lua("FINAL('x')"));
    let tiny = PromptMode::Auto {
        max_full_tokens: 10,
    };
    rlm_listing(&server, &small, tiny).run("Q", None).unwrap();
    assert!(system_prompt_of(&bodies_of(&server), 0).contains(compact_marker));
}

#[test]
fn in_compact_mode_fn_search_and_help_tell_the_model_what_it_needs() {
    let registry = registry_of(200);
    let server = OpenAiServer::start(
        vec![
            lua(
                "local hits = fn_search('how many vowels are in a text')\nfor _, h in ipairs(hits) do print(h.name, h.signature, h.summary) end\nprint(help(hits[1].name))",
            ),
            lua("FINAL(count_vowels('Banana split'))"),
        ],
        Behavior::status(500),
    );
    let answer = rlm_listing(&server, &registry, PromptMode::Compact)
        .run("How many vowels are in 'Banana split'?", None)
        .unwrap();
    assert_eq!(answer.text, "4");
    let feedback = last_message(&bodies(&server)[1]);
    assert!(
        feedback.starts_with(
            "Output of block 1:\ncount_vowels\tcount_vowels(text)\tCounts the vowels of a text (a, e, i, o, u, either case).\n"
        ),
        "{feedback}"
    );
    // help: the full doc that the compact prompt left out.
    assert!(
        feedback.contains(
            "---@param text string The text whose vowels are counted\n---@return integer count How many vowels\nfunction count_vowels(text) end"
        ),
        "{feedback}"
    );
}

#[test]
fn the_rlm_is_shareable_and_its_errors_are_sendable() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Rlm>();
    send_sync::<RlmError>();
}

#[cfg(feature = "cli")]
mod cli {
    use std::process::{Command, Output};

    use super::*;

    fn rlm_ask(server: &OpenAiServer, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_rlm"))
            .arg("ask")
            .args(args)
            .args(["--base-url", &server.base_url(), "--model", "test-model"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .env_remove("RLM_API_KEY")
            .env_remove("OPENAI_API_KEY")
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
            "error: LLM call budget exhausted: all 1 calls made\n"
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
        let compact =
            system_of(&[&["Q", "-q", "--prompt-mode", "compact"][..], &fixtures].concat());
        assert!(
            compact.contains("- `reverse_text(s)`: Reverses a string."),
            "{compact}"
        );
        assert!(compact.contains("call `fn_search(query)`"), "{compact}");
        assert!(!registry_section(&compact).contains("@param"), "{compact}");
        for args in [&["Q", "-q"][..], &["Q", "-q", "--prompt-mode", "full"]] {
            let full = system_of(&[args, &fixtures].concat());
            assert!(
                full.contains("---@param width? integer The width"),
                "{full}"
            );
            assert!(!full.contains("call `fn_search(query)`"), "{full}");
        }
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
