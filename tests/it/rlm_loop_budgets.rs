//! Budgets end to end: tokens, calls and wall time are shared by every agent of a run.

use crate::support;

use std::time::Duration;

use rlm_registry::llm::DEFAULT_REPLY_RESERVE;
use rlm_registry::rlm::{BudgetExceeded, Budgets, RlmError};
use rlm_registry::tokens;
use support::openai_server::{Behavior, OpenAiServer};
use support::rlm_loop::*;

#[test]
fn budgets_are_shared_by_the_whole_run() {
    // Tokens: a call reserves its worst case (the prompt and 1,024 for the reply) before
    // it is sent; with 20 allowed, the first one does not fit and nothing is sent.
    let server = OpenAiServer::always(lua("print('more')"));
    match rlm(&server, 10)
        .budgets(Budgets::default().with_total_tokens(20))
        .run("Q", None)
    {
        Err(RlmError::Budget(BudgetExceeded::TokensWouldExceed {
            limit: 20,
            left: 20,
            needed,
        })) => assert!(needed > 1_024, "{needed}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(server.request_count(), 0);

    // A server that reports more than the worst case (here 100,000 tokens for one call)
    // spends the budget: the next call is refused, the spending reported.
    let server = OpenAiServer::always(Behavior::reply_with_usage(
        "```lua\nprint('more')\n```",
        100_000,
        5,
    ));
    match rlm(&server, 10)
        .budgets(Budgets::default().with_total_tokens(20_000))
        .run("Q", None)
    {
        Err(RlmError::Budget(BudgetExceeded::Tokens {
            limit: 20_000,
            used: 100_005,
        })) => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(server.request_count(), 1);

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
                "the run's model-call budget is spent: all 2 calls made (it is set by --max-llm-calls, `max_llm_calls` in [budgets] of rlm.toml or Python)"
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

/// The root's first turn: fifty sub-calls at once; it prints how many were answered and
/// the last one's error.
const FIFTY_AT_ONCE: &str = "local items = {}\nfor i = 1, 50 do items[i] = i end\n\
    local r, e = parallel_map(items, function() return llm_query('sub') end, {concurrency = 50})\n\
    local n = 0\nfor i = 1, 50 do if r[i] then n = n + 1 end end\nprint(n, e[50])";

/// The worst case of `llm_query(prompt)`: its prompt as one message, and the reply's
/// reserve when the request sets no `max_tokens`.
fn worst_case(prompt: &str) -> u64 {
    tokens::count_chat([prompt]) as u64 + DEFAULT_REPLY_RESERVE
}

/// How many of the requests the server received were `llm_query(prompt)`.
fn sub_calls(server: &OpenAiServer, prompt: &str) -> usize {
    bodies(server)
        .iter()
        .filter(|body| messages(body).len() == 1 && last_message(body) == prompt)
        .count()
}

#[test]
fn fifty_parallel_calls_with_ten_calls_worth_of_tokens_left_send_ten() {
    let server = OpenAiServer::start(vec![lua(FIFTY_AT_ONCE)], lua("FINAL('done')"));
    // The first turn spends 15 tokens (the server's usage); then there is room for ten
    // sub-calls' worst cases and half of another.
    let budget = 15 + 10 * worst_case("sub") + worst_case("sub") / 2;
    let report = rlm(&server, 3)
        .budgets(Budgets::default().with_total_tokens(budget))
        .run_report("Q", None, None);
    assert_eq!(
        report.result.as_deref().ok(),
        Some("done"),
        "{:?}",
        report.result
    );
    assert_eq!(sub_calls(&server, "sub"), 10);
    assert!(report.usage.total().total_tokens() <= budget);
    let feedback = last_message(bodies(&server).last().unwrap());
    assert!(feedback.contains("10\t"), "{feedback}");
    assert!(
        feedback.contains("not sent: the run's token budget has")
            && feedback.contains("set by --max-tokens"),
        "{feedback}"
    );
}

#[test]
fn fifty_parallel_calls_with_ten_calls_left_send_ten() {
    let server = OpenAiServer::start(vec![lua(FIFTY_AT_ONCE)], lua("FINAL('done')"));
    // The first turn, then ten calls left: the sub-calls take them all, so the run ends
    // at the next turn.
    let report = rlm(&server, 3)
        .budgets(Budgets::default().with_llm_calls(11))
        .run_report("Q", None, None);
    assert!(
        matches!(
            report.result,
            Err(RlmError::Budget(BudgetExceeded::LlmCalls { limit: 11 }))
        ),
        "{:?}",
        report.result
    );
    assert_eq!(sub_calls(&server, "sub"), 10);
    assert_eq!(server.request_count(), 11);
    assert_eq!(report.usage.total().calls, 11);
}
