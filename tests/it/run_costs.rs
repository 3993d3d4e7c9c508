//! `budget()`, the cost budget (`--max-cost`: the server's `usage.cost`, a price table),
//! the call cache under a budget, and a run's cancellation, against the scripted server.

use crate::support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use rlm_registry::environment::Interrupt;
use rlm_registry::llm::{CallCache, Cost, Price};
use rlm_registry::rlm::trajectory::Record;
use rlm_registry::rlm::{BudgetExceeded, Budgets, RlmError};
use serde_json::json;
use support::openai_server::{Behavior, OpenAiServer};
use support::rlm_loop::*;

/// A reply with code and a `usage` holding `cost`, as OpenRouter reports it.
fn lua_costing(code: &str, cost: serde_json::Value) -> Behavior {
    Behavior::Completion {
        message: json!({"role": "assistant", "content": format!("```lua\n{code}\n```")}),
        finish_reason: "stop".to_string(),
        usage: json!({"prompt_tokens": 10, "completion_tokens": 5, "cost": cost}),
    }
}

fn usd(amount: f64) -> Cost {
    Cost::from_usd(amount).unwrap()
}

/// What each turn's code printed, from the feedback of the requests that followed.
fn printed(server: &OpenAiServer) -> Vec<String> {
    bodies(server).iter().skip(1).map(last_message).collect()
}

const SHOW_BUDGET: &str = "local b = budget()\nprint('left', b.tokens, b.calls, b.iterations, b.cost, b.depth, b.max_depth, b.seconds > 500 and b.seconds <= 600)";

#[test]
fn budget_tells_the_code_what_is_left_after_spending() {
    let server = OpenAiServer::start(
        vec![lua(SHOW_BUDGET), lua(SHOW_BUDGET)],
        lua("FINAL('done')"),
    );
    let report = rlm(&server, 10)
        .budgets(
            Budgets::default()
                .with_total_tokens(100_000)
                .with_llm_calls(10)
                .with_wall_time(Duration::from_secs(600))
                .with_max_cost(usd(1.0)),
        )
        // 10 prompt tokens at $1/M and 5 completion tokens at $2/M: $0.00002 a call.
        .price(Price::new(1.0, 2.0).unwrap())
        .run_report("Q", None, None);
    assert_eq!(report.result.as_deref().ok(), Some("done"));
    let printed = printed(&server);
    assert!(
        printed[0].contains("left\t99985\t9\t9\t0.99998\t0\t1\ttrue"),
        "{}",
        printed[0]
    );
    assert!(
        printed[1].contains("left\t99970\t8\t8\t0.99996\t0\t1\ttrue"),
        "{}",
        printed[1]
    );
    assert_eq!(report.usage.total().cost, usd(0.00006));
    let system = messages(&bodies(&server)[0])[0]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(system.contains("`budget()` tells what is left"), "{system}");
}

#[test]
fn budget_is_nil_where_unlimited_and_counts_a_childs_depth() {
    let server = OpenAiServer::start(
        vec![
            lua(
                "print('root', budget().tokens, budget().cost, budget().iterations)\nprint(rlm_query('sub'))",
            ),
            lua("FINAL(budget().depth .. '/' .. budget().max_depth .. ' ' .. budget().iterations)"),
        ],
        lua("FINAL('done')"),
    );
    let report = rlm(&server, 4).max_depth(2).run_report("Q", None, None);
    assert_eq!(report.result.as_deref().ok(), Some("done"));
    let bodies = bodies(&server);
    let root_feedback = last_message(&bodies[2]);
    assert!(
        root_feedback.contains("root\tnil\tnil\t3"),
        "{root_feedback}"
    );
    assert!(root_feedback.contains("1/2 3"), "{root_feedback}");
    let system = messages(&bodies[0])[0]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        !system.contains("`budget()` tells"),
        "no budget, no line in the prompt"
    );
}

#[test]
fn budget_outside_a_run_reports_what_the_environment_knows() {
    use rlm_registry::Registry;
    use rlm_registry::environment::Environment;
    let plain = Environment::builder(Registry::empty()).build().unwrap();
    let out = plain
        .execute("local b = budget() print(b.tokens, b.calls, b.cost, b.iterations, b.depth)")
        .unwrap();
    assert_eq!(out.output, "nil\tnil\tnil\tnil\t0\n");
    let budgeted = Environment::builder(Registry::empty())
        .token_budget(500)
        .build()
        .unwrap();
    let out = budgeted.execute("print(budget().tokens)").unwrap();
    assert_eq!(out.output, "500\n");
}

#[test]
fn max_cost_with_the_servers_cost_stops_the_run_once_spent() {
    let server = OpenAiServer::always(lua_costing("print('more')", json!(0.4)));
    let report = rlm(&server, 10)
        .budgets(Budgets::default().with_max_cost(usd(1.0)))
        .run_report("Q", None, None);
    match &report.result {
        Err(error @ RlmError::Budget(BudgetExceeded::Cost { limit, spent })) => {
            assert_eq!((*limit, *spent), (usd(1.0), usd(1.2)));
            let message = error.to_string();
            assert!(
                message.starts_with("the run's cost budget is spent: $1.2000 of $1.0000 spent")
                    && message.contains("--max-cost"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
    // Without a price nothing is reserved: each call is checked against what was spent.
    assert_eq!(server.request_count(), 3);
    assert_eq!(report.usage.total().cost, usd(1.2));
    assert!(
        report.usage.to_string().contains("$1.2000"),
        "{}",
        report.usage
    );
}

#[test]
fn a_cost_that_is_not_a_number_falls_back_to_the_price_table() {
    let server = OpenAiServer::start(
        vec![
            lua_costing("print(1)", json!("0.4")),
            lua_costing("print(2)", json!(-3)),
        ],
        lua_costing("FINAL('done')", json!(null)),
    );
    let report = rlm(&server, 10)
        .price(Price::new(1_000.0, 0.0).unwrap())
        .run_report("Q", None, None);
    assert_eq!(report.result.as_deref().ok(), Some("done"));
    // 10 prompt tokens at $1,000/M, three times: the strings and negatives are ignored.
    assert_eq!(report.usage.total().cost, usd(0.03));
}

#[test]
fn a_cost_that_cannot_be_known_stops_a_cost_budget_naming_the_price_table() {
    let server = OpenAiServer::always(lua("print('more')"));
    let report = rlm(&server, 10)
        .budgets(Budgets::default().with_max_cost(usd(1.0)))
        .run_report("Q", None, None);
    match &report.result {
        Err(error @ RlmError::Budget(BudgetExceeded::CostUnknown { model, .. })) => {
            assert_eq!(model, "test-model");
            assert!(
                error.to_string().contains("[prices.\"test-model\"]"),
                "{error}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(server.request_count(), 1);
}

/// The root's first turn: ten slow sub-calls at once.
const TEN_AT_ONCE: &str = "local items = {}\nfor i = 1, 10 do items[i] = i end\n\
    local r, e = parallel_map(items, function() return llm_query('piece') end, {concurrency = 10})\n\
    local n, err = 0, nil\nfor i = 1, 10 do if r[i] then n = n + 1 else err = e[i] end end\n\
    print('answered', n, err)";

#[test]
fn max_cost_with_a_price_table_reserves_under_parallel_map_and_never_goes_over() {
    let server = OpenAiServer::start(
        vec![lua(TEN_AT_ONCE)],
        Behavior::ByPrompt(vec![
            (
                "piece".to_string(),
                Behavior::reply("ok").after(Duration::from_millis(300)),
            ),
            ("Output".to_string(), lua("FINAL('done')")),
        ]),
    );
    // $100/M output tokens: a sub-call's worst case is 1,024 reply tokens, $0.1024; what
    // it spends is 5 tokens. Room for three at once beside the first turn.
    let cap = usd(0.35);
    let report = rlm(&server, 3)
        .budgets(Budgets::default().with_max_cost(cap))
        .price(Price::new(0.0, 100.0).unwrap())
        .run_report("Q", None, None);
    assert_eq!(
        report.result.as_deref().ok(),
        Some("done"),
        "{:?}",
        report.result
    );
    assert!(report.usage.total().cost <= cap);
    let feedback = last_message(bodies(&server).last().unwrap());
    // Three at once; one that reserved after those were answered may have gone too.
    let answered: usize = feedback
        .split("answered\t")
        .nth(1)
        .and_then(|rest| rest.split('\t').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!((3..10).contains(&answered), "{feedback}");
    assert!(
        feedback.contains("not sent: the run's cost budget has") && feedback.contains("--max-cost"),
        "{feedback}"
    );
    assert!(server.max_in_flight() <= 3, "{}", server.max_in_flight());
}

#[test]
fn the_trace_holds_each_turns_and_sub_calls_cost_and_the_runs() {
    let server = OpenAiServer::start(
        vec![
            lua_costing("print(llm_query('sub'))", json!(0.25)),
            lua_costing("sub answer", json!(0.125)),
        ],
        lua_costing("FINAL('done')", json!(0.5)),
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.jsonl");
    let report = rlm(&server, 5)
        .trace_file(&path)
        .unwrap()
        .run_report("Q", None, None);
    assert_eq!(report.result.as_deref().ok(), Some("done"));
    let text = std::fs::read_to_string(&path).unwrap();
    let turns: Vec<serde_json::Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .filter(|line: &serde_json::Value| line["event"] == "turn")
        .collect();
    assert_eq!(turns[0]["cost"], 0.25);
    assert_eq!(turns[0]["outputs"][0]["sub_calls"][0]["cost"], 0.125);
    assert_eq!(turns[0]["run_cost"], 0.375);
    assert_eq!(turns[1]["run_cost"], 0.875);
    for line in text.lines() {
        serde_json::from_str::<Record>(line).unwrap();
    }
}

#[test]
fn a_cached_call_is_answered_under_a_budget_too_small_for_a_fresh_one() {
    let dir = tempfile::tempdir().unwrap();
    let cache = || Arc::new(CallCache::open(dir.path().join("cache.sqlite")));
    let server = OpenAiServer::start(
        vec![
            lua("print(llm_query('sub'))"),
            Behavior::reply("sub answer"),
        ],
        lua("FINAL('done')"),
    );
    // A budget in both runs, so that both prompts mention `budget()` alike.
    let fresh = rlm(&server, 5)
        .cache(cache())
        .budgets(Budgets::default().with_total_tokens(1_000_000))
        .run_report("Q", None, None);
    assert_eq!(fresh.result.as_deref().ok(), Some("done"));
    assert_eq!(server.request_count(), 3);

    // 20 tokens: not enough for one fresh call's worst case (the prompt and 1,024).
    let cached = rlm(&server, 5)
        .cache(cache())
        .budgets(
            Budgets::default()
                .with_total_tokens(20)
                .with_max_cost(usd(0.0)),
        )
        .run_report("Q", None, None);
    assert_eq!(
        cached.result.as_deref().ok(),
        Some("done"),
        "{:?}",
        cached.result
    );
    assert_eq!(
        server.request_count(),
        3,
        "every answer came from the cache"
    );
    let usage = cached.usage.total();
    assert_eq!(
        (usage.calls, usage.cached_calls, usage.total_tokens()),
        (0, 3, 0)
    );
}

#[test]
fn a_run_cancelled_mid_block_stops_within_a_second_and_its_trace_parses() {
    let server = OpenAiServer::start(
        vec![lua("print('turn 1')"), lua("while true do end")],
        lua("FINAL('never')"),
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.jsonl");
    let cancel = Interrupt::new();
    let rlm = rlm(&server, 5)
        .cancel_on(cancel.clone())
        .trace_file(&path)
        .unwrap();
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(500));
        let at = Instant::now();
        cancel.interrupt();
        at
    });
    let report = rlm.run_report("Q", None, None);
    let stopped = Instant::now();
    let cancelled_at = stopper.join().unwrap();
    assert!(
        matches!(report.result, Err(RlmError::Interrupted)),
        "{:?}",
        report.result
    );
    assert!(stopped - cancelled_at < Duration::from_secs(1));
    let text = std::fs::read_to_string(&path).unwrap();
    let records: Vec<Record> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let turns = records
        .iter()
        .filter(|r| matches!(r, Record::Turn(_)))
        .count();
    assert_eq!(turns, 1, "the cut turn is not written: {text}");
    assert_eq!(server.request_count(), 2);
}

#[test]
fn a_run_cancelled_during_a_slow_model_call_gives_it_up_at_once() {
    let server = OpenAiServer::start(
        vec![
            lua("print('turn 1')"),
            lua("print(2)").after(Duration::from_secs(5)),
        ],
        lua("FINAL('never')"),
    );
    let cancel = Interrupt::new();
    let rlm = rlm(&server, 5).cancel_on(cancel.clone());
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(400));
        cancel.interrupt();
    });
    let started = Instant::now();
    let report = rlm.run_report("Q", None, None);
    stopper.join().unwrap();
    assert!(
        matches!(report.result, Err(RlmError::Interrupted)),
        "{:?}",
        report.result
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(report.turns, 1, "the first turn was whole");
}

#[test]
fn a_run_cancelled_before_it_starts_sends_nothing() {
    let server = OpenAiServer::always(lua("FINAL('never')"));
    let cancel = Interrupt::new();
    cancel.interrupt();
    let report = rlm(&server, 5)
        .cancel_on(cancel)
        .run_report("Q", None, None);
    assert!(matches!(report.result, Err(RlmError::Interrupted)));
    assert_eq!(server.request_count(), 0);
}

#[test]
fn a_replay_of_a_run_under_a_cost_budget_spends_the_recorded_costs_again() {
    use rlm_registry::rlm::Replay;
    let server = OpenAiServer::always(lua_costing("print('more')", json!(0.4)));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.jsonl");
    let report = rlm(&server, 10)
        .budgets(Budgets::default().with_max_cost(usd(1.0)))
        .trace_file(&path)
        .unwrap()
        .run_report("Q", None, None);
    assert!(matches!(
        report.result,
        Err(RlmError::Budget(BudgetExceeded::Cost { .. }))
    ));
    let replayed = Replay::from_file(&path).unwrap().run().unwrap();
    assert!(replayed.is_identical(), "{:?}", replayed.divergence);
    assert_eq!(
        replayed.turns, 4,
        "three answered, the fourth refused as recorded"
    );
}
