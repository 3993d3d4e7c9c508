//! Child agents end to end: `rlm_query` runs an agent one level deeper, down to the
//! depth limit, and a failing child is an error its parent's code sees.

use crate::support;

use rlm_registry::rlm::Context;
use support::openai_server::{Behavior, OpenAiServer};
use support::rlm_loop::*;

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
    assert!(!child_prompt.contains("\nrlm_query("));
    assert!(!child_prompt.contains("\nask_user("));
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
    assert!(root_prompt.contains("\nrlm_query(prompt, context?, opts?)  -- "));
    assert!(root_prompt.contains("\nask_user(question)  -- "));

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
