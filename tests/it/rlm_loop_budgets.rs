//! Budgets end to end: tokens, calls and wall time are shared by every agent of a run.

use crate::support;

use std::time::Duration;

use rlm_registry::rlm::{BudgetExceeded, Budgets, RlmError};
use support::openai_server::{Behavior, OpenAiServer};
use support::rlm_loop::*;

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
