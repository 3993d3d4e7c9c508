//! The LLM search modes (balanced: BM25 then an LLM rerank; accurate: LLM query expansion,
//! BM25, rerank) in the library, against the real loopback OpenAI-compatible test server:
//! the model's order is applied, a model that fails or answers nonsense gives the fast
//! order with the reason, filters and confidence hold. `fn_search` in Lua is tested in
//! `search_modes_lua.rs`, `rlm search --mode` in `search_modes_cli.rs`.

use crate::support;

use std::time::Duration;

use rlm_registry::Registry;
use rlm_registry::llm::{LlmClient, LlmConfig};
use rlm_registry::search::llm_modes::{LlmSearch, candidate_count, search_with_llm};
use rlm_registry::search::{FunctionSearch, SearchMode, SearchOptions, SearchResult};
use serde_json::Value;
use support::openai_server::{Behavior, OpenAiServer};
use support::search_modes::{client, text_registry};

fn names(results: &[SearchResult]) -> Vec<&str> {
    results.iter().map(|r| r.name.as_str()).collect()
}

fn options(max_results: usize) -> SearchOptions {
    SearchOptions {
        max_results,
        ..SearchOptions::default()
    }
}

fn search(
    server: &OpenAiServer,
    registry: &Registry,
    query: &str,
    opts: &SearchOptions,
    mode: SearchMode,
) -> LlmSearch {
    search_with_llm(registry, &client(server), query, opts, mode)
}

/// The request bodies the server received.
fn bodies(server: &OpenAiServer) -> Vec<Value> {
    server
        .requests()
        .iter()
        .map(|r| r.json().expect("JSON body"))
        .collect()
}

/// The user message of a request body.
fn user_prompt(body: &Value) -> &str {
    body["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .expect("a user message")
}

fn assert_confidence_monotonic(results: &[SearchResult]) {
    for r in results {
        assert!(
            (0.0..=1.0).contains(&r.confidence),
            "{}: {}",
            r.name,
            r.confidence
        );
    }
    for pair in results.windows(2) {
        assert!(
            pair[0].confidence >= pair[1].confidence,
            "{} ({}) above {} ({})",
            pair[0].name,
            pair[0].confidence,
            pair[1].name,
            pair[1].confidence
        );
    }
}

#[test]
fn balanced_reorders_as_the_model_says_with_one_deterministic_request() {
    let registry = text_registry();
    let fast = registry.search("text", &options(5));
    assert_eq!(fast.len(), 5);
    // The model's order, the reverse of BM25's: every candidate named.
    let mut wanted: Vec<&str> = names(&fast);
    wanted.reverse();
    let server = OpenAiServer::always(Behavior::reply(&serde_json::to_string(&wanted).unwrap()));
    let found = search(
        &server,
        &registry,
        "text",
        &options(5),
        SearchMode::Balanced,
    );

    assert_eq!(names(&found.results), wanted);
    assert_eq!(found.fallback, None);
    assert_eq!(found.mode, SearchMode::Balanced);
    assert!(found.expanded_terms.is_empty());
    let bodies = bodies(&server);
    assert_eq!(bodies.len(), 1, "balanced makes one call");
    assert_eq!(bodies[0]["temperature"], 0.0);
    assert_eq!(bodies[0]["model"], "rank-model");
    let prompt = user_prompt(&bodies[0]);
    assert!(prompt.contains("Task: text"), "{prompt}");
    // Every candidate, numbered in BM25 order, with its signature and summary.
    for (i, r) in fast.iter().enumerate() {
        let line = format!("{}. {}: {}", i + 1, r.signature, r.summary);
        assert!(prompt.contains(&line), "{line} not in {prompt}");
    }
    for r in &found.results {
        assert!(
            r.signals.iter().any(|s| s.signal_type == "llm_rerank"),
            "{}",
            r.name
        );
        assert!(
            r.match_reason.starts_with("LLM rerank: #"),
            "{}",
            r.match_reason
        );
    }
    assert_confidence_monotonic(&found.results);
}

#[test]
fn candidates_the_model_omits_follow_in_bm25_order_and_rank_below_its_picks() {
    let registry = text_registry();
    let fast = names(&registry.search("text", &options(5)))
        .into_iter()
        .map(str::to_string)
        .collect::<Vec<_>>();
    // Two picks, in prose and a fence, with an unknown name and a repeat.
    let answer = format!(
        "Sure! The best matches:\n```json\n[\"no_such_function\", \"{}\", \"{}\", \"{}\"]\n```\nHope this helps.",
        fast[3], fast[1], fast[3]
    );
    let server = OpenAiServer::always(Behavior::reply(&answer));
    let found = search(
        &server,
        &registry,
        "text",
        &options(5),
        SearchMode::Balanced,
    );

    let mut expected = vec![fast[3].clone(), fast[1].clone()];
    expected.extend(
        fast.iter()
            .filter(|n| **n != fast[3] && **n != fast[1])
            .cloned(),
    );
    assert_eq!(names(&found.results), expected);
    assert_eq!(found.fallback, None);
    let omitted = &found.results[2];
    assert!(
        omitted.match_reason.contains("left out"),
        "{}",
        omitted.match_reason
    );
    let rerank = omitted
        .signals
        .iter()
        .find(|s| s.signal_type == "llm_rerank")
        .unwrap();
    assert_eq!(rerank.weight, 0.0);
    assert!(found.results[1].confidence > omitted.confidence);
    assert_confidence_monotonic(&found.results);
}

#[test]
fn candidate_numbers_and_decorated_names_are_understood() {
    let registry = text_registry();
    let fast = registry.search("count", &options(5));
    assert_eq!(fast.len(), 3);
    let third = fast[2].name.clone();
    let second = format!("lua:{}", fast[1].signature.to_uppercase());
    let server = OpenAiServer::always(Behavior::reply(&format!("[3, \"{second}\"]")));
    let found = search(
        &server,
        &registry,
        "count",
        &options(5),
        SearchMode::Balanced,
    );
    assert_eq!(
        names(&found.results),
        [third.as_str(), fast[1].name.as_str(), fast[0].name.as_str()]
    );
}

#[test]
fn an_unparseable_answer_gives_the_fast_order_and_says_why() {
    let registry = text_registry();
    for answer in [
        "I think word_count is best.",
        "",
        "[\"unterminated",
        "[\"nothing\", \"we\", \"know\"]",
    ] {
        let server = OpenAiServer::always(Behavior::reply(answer));
        let found = search(
            &server,
            &registry,
            "text",
            &options(3),
            SearchMode::Balanced,
        );
        assert_eq!(
            found.results,
            registry.search("text", &options(3)),
            "{answer:?}"
        );
        let reason = found
            .fallback
            .unwrap_or_else(|| panic!("no fallback for {answer:?}"));
        assert!(reason.starts_with("the model's ranking"), "{reason}");
        assert!(!reason.contains('\n'), "{reason}");
        assert_eq!(server.request_count(), 1);
    }
}

#[test]
fn a_failing_server_gives_the_fast_order_and_says_why() {
    let registry = text_registry();
    for behavior in [
        Behavior::status(500),
        Behavior::Garbage("<html>oops".into()),
        Behavior::Drop,
    ] {
        let server = OpenAiServer::always(behavior.clone());
        for mode in [SearchMode::Balanced, SearchMode::Accurate] {
            let found = search(&server, &registry, "count", &options(2), mode);
            assert_eq!(
                found.results,
                registry.search("count", &options(2)),
                "{behavior:?} {mode:?}"
            );
            let reason = found.fallback.expect("a fallback reason");
            assert!(reason.starts_with("the LLM call failed"), "{reason}");
            if matches!(behavior, Behavior::Status { .. }) {
                assert!(reason.contains("500"), "{reason}");
            }
            assert!(found.expanded_terms.is_empty());
        }
    }
    // Accurate mode does not try the failing server a second time for the rerank: one
    // call, retried once, then the fast order.
    let server = OpenAiServer::always(Behavior::status(500));
    let found = search(
        &server,
        &registry,
        "count",
        &options(2),
        SearchMode::Accurate,
    );
    assert_eq!(server.request_count(), 2);
    assert_eq!(found.expansion_fallback, found.fallback);
}

#[test]
fn a_server_that_is_not_there_gives_the_fast_order() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let config = LlmConfig::new(format!("http://127.0.0.1:{port}/v1"), "m")
        .with_max_retries(0)
        .with_timeout(Duration::from_secs(2));
    let llm = LlmClient::new(config).unwrap();
    let registry = text_registry();
    let found = search_with_llm(&registry, &llm, "text", &options(5), SearchMode::Balanced);
    assert_eq!(found.results, registry.search("text", &options(5)));
    assert!(found.fallback.unwrap().starts_with("the LLM call failed"));
}

#[test]
fn accurate_expansion_finds_what_the_bare_query_cannot() {
    let registry = text_registry();
    let query = "measure essay length";
    assert!(
        registry.search(query, &options(5)).is_empty(),
        "the bare query must find nothing"
    );
    let server = OpenAiServer::start(
        vec![
            Behavior::reply("```json\n[\"measure essay length\", \"word count\", \"words\"]\n```"),
            Behavior::reply("[\"word_count\"]"),
        ],
        Behavior::status(500),
    );
    let found = search(&server, &registry, query, &options(3), SearchMode::Accurate);

    assert_eq!(found.fallback, None);
    assert_eq!(found.expansion_fallback, None);
    // The query itself is not an expansion.
    assert_eq!(found.expanded_terms, ["word count", "words"]);
    assert_eq!(found.results[0].name, "word_count");
    let top = &found.results[0];
    let expansion = top
        .signals
        .iter()
        .find(|s| s.signal_type == "query_expansion")
        .expect("a query_expansion signal");
    assert_eq!(expansion.terms, ["word count"]);
    assert!(top.signals.iter().any(|s| s.signal_type == "llm_rerank"));
    assert!(
        top.match_reason.contains("via expansion `word count`"),
        "{}",
        top.match_reason
    );
    assert_confidence_monotonic(&found.results);

    let bodies = bodies(&server);
    assert_eq!(bodies.len(), 2, "expansion, then rerank");
    assert!(user_prompt(&bodies[0]).contains(query));
    assert!(user_prompt(&bodies[1]).contains("word_count(text)"));
    assert!(bodies.iter().all(|b| b["temperature"] == 0.0));
}

#[test]
fn accurate_with_an_unparseable_expansion_searches_the_query_alone_then_reranks() {
    let registry = text_registry();
    let fast = registry.search("count", &options(5));
    let server = OpenAiServer::start(
        vec![
            Behavior::reply("Synonyms: tally, number"),
            Behavior::reply(&format!("[\"{}\"]", fast[2].name)),
        ],
        Behavior::status(500),
    );
    let found = search(
        &server,
        &registry,
        "count",
        &options(5),
        SearchMode::Accurate,
    );
    assert!(found.expanded_terms.is_empty());
    assert!(
        found
            .expansion_fallback
            .unwrap()
            .contains("not a JSON array")
    );
    assert_eq!(found.fallback, None);
    assert_eq!(found.results[0].name, fast[2].name);
    assert_eq!(found.results.len(), fast.len());
    assert_eq!(server.request_count(), 2);
}

#[test]
fn accurate_with_an_unparseable_ranking_keeps_the_fast_results_first() {
    let registry = text_registry();
    // The query alone fills the results: exactly the fast ones, the expansion unused.
    let server = OpenAiServer::start(
        vec![
            Behavior::reply("[\"reverse\", \"upper-case\"]"),
            Behavior::reply("no idea"),
        ],
        Behavior::status(500),
    );
    let found = search(
        &server,
        &registry,
        "count",
        &options(2),
        SearchMode::Accurate,
    );
    assert_eq!(found.results, registry.search("count", &options(2)));
    assert_eq!(found.expanded_terms, ["reverse", "upper-case"]);
    assert!(found.fallback.unwrap().contains("not a JSON array"));
    // The rerank was offered the expansion's finds as well.
    let bodies = bodies(&server);
    assert!(user_prompt(&bodies[1]).contains("reverse_text(text)"));
    assert!(user_prompt(&bodies[1]).contains("shout(text)"));

    // The query alone finds too few: the fast results, then the expansion's finds.
    let fast = registry.search("reverse characters", &options(4));
    assert_eq!(names(&fast), ["reverse_text", "char_count"]);
    let server = OpenAiServer::start(
        vec![
            Behavior::reply("[\"upper-case\"]"),
            Behavior::reply("[\"nothing_known\"]"),
        ],
        Behavior::status(500),
    );
    let found = search(
        &server,
        &registry,
        "reverse characters",
        &options(4),
        SearchMode::Accurate,
    );
    assert_eq!(
        names(&found.results),
        ["reverse_text", "char_count", "shout"]
    );
    assert_eq!(found.results[..2], fast[..]);
    assert!(
        found
            .fallback
            .unwrap()
            .contains("names none of the candidates")
    );
    assert_confidence_monotonic(&found.results);
}

#[test]
fn filters_hold_after_rerank_and_expansion() {
    let registry = text_registry();
    let analyze = SearchOptions {
        capability: Some("analyze".into()),
        ..options(5)
    };
    let fast = registry.search("text", &analyze);
    assert!(fast.len() >= 2 && fast.len() < 5, "{:?}", names(&fast));
    let last = fast.last().unwrap().name.clone();
    // The model names functions without the capability (first) and expands towards
    // them: they stay out.
    let server = OpenAiServer::start(
        vec![
            Behavior::reply("[\"shout\", \"upper-case\", \"reverse\"]"),
            Behavior::reply(&format!("[\"shout\", \"reverse_text\", \"{last}\"]")),
        ],
        Behavior::status(500),
    );
    let found = search(&server, &registry, "text", &analyze, SearchMode::Accurate);
    assert_eq!(found.fallback, None);
    assert_eq!(found.expanded_terms, ["shout", "upper-case", "reverse"]);
    assert_eq!(found.results.len(), fast.len());
    for r in &found.results {
        assert!(
            r.capabilities.iter().any(|c| c == "analyze"),
            "{} has no analyze",
            r.name
        );
    }
    assert_eq!(found.results[0].name, last);
    // Without the filter, the same expansion does bring them in.
    assert!(
        registry
            .search("reverse", &options(5))
            .iter()
            .any(|r| r.name == "reverse_text")
    );

    // Source directories: two, the model prefers a function of the other one.
    let dirs = tempfile::tempdir().unwrap();
    for (dir, name) in [("first", "alpha_text"), ("second", "beta_text")] {
        let path = dirs.path().join(dir);
        std::fs::create_dir(&path).unwrap();
        std::fs::write(
            path.join(format!("{name}.lua")),
            format!("--- Trims a text.\n---@param text string The text\n---@return string\nfunction {name}(text) return text end\n"),
        )
        .unwrap();
    }
    let registry =
        Registry::from_paths([dirs.path().join("first"), dirs.path().join("second")]).unwrap();
    let second = SearchOptions {
        source: Some("second".into()),
        ..options(5)
    };
    let server = OpenAiServer::always(Behavior::reply("[\"alpha_text\", \"beta_text\"]"));
    for mode in [SearchMode::Balanced, SearchMode::Accurate] {
        let found = search(&server, &registry, "trim text", &second, mode);
        assert_eq!(names(&found.results), ["beta_text"], "{mode:?}");
    }
}

#[test]
fn confidence_stays_monotonic_when_the_model_promotes_a_weak_match() {
    let registry = text_registry();
    let fast = registry.search("characters of a text", &options(5));
    assert!(fast.len() >= 3);
    let weakest = fast.last().unwrap().name.clone();
    let strongest = fast[0].name.clone();
    // The weakest first, then the strongest: blended, the second would show more
    // confidence than the first; it is capped instead.
    let server = OpenAiServer::always(Behavior::reply(&format!(
        "[\"{weakest}\", \"{strongest}\"]"
    )));
    let found = search(
        &server,
        &registry,
        "characters of a text",
        &options(5),
        SearchMode::Balanced,
    );
    assert_eq!(
        names(&found.results)[..2],
        [weakest.as_str(), strongest.as_str()]
    );
    assert_confidence_monotonic(&found.results);
    assert_eq!(found.results[1].confidence, found.results[0].confidence);
    // The model's pick is trusted: it is at least as confident as BM25 was of it.
    let bm25 = fast.last().unwrap().confidence;
    assert!(
        found.results[0].confidence >= bm25,
        "{} < {bm25}",
        found.results[0].confidence
    );
    // BM25's score is kept as it was.
    assert_eq!(found.results[0].score, fast.last().unwrap().score);
}

#[test]
fn the_reranker_sees_a_wider_candidate_set_and_the_results_are_cut_to_max_results() {
    let many: Vec<(String, String)> = (0..30)
        .map(|i| {
            let name = format!("text_tool_{i:02}");
            let source = format!("--- Processes a text, variant {i}.\n---@param text string The text\n---@return string\nfunction {name}(text) return text end");
            (name, source)
        })
        .collect();
    let registry = Registry::from_map(many).unwrap();
    // The model picks the BM25 candidate ranked last of the pool.
    let pool = registry.search("text", &options(candidate_count(2)));
    assert_eq!(pool.len(), 20);
    let last = pool.last().unwrap().name.clone();
    let server = OpenAiServer::always(Behavior::reply(&format!("[\"{last}\"]")));
    let found = search(
        &server,
        &registry,
        "text",
        &options(2),
        SearchMode::Balanced,
    );
    assert_eq!(found.results.len(), 2);
    assert_eq!(found.results[0].name, last);
    assert_eq!(found.results[1].name, pool[0].name);
    let prompt = bodies(&server)[0].clone();
    let prompt = user_prompt(&prompt);
    assert!(prompt.contains("20. "), "{prompt}");
    assert!(!prompt.contains("21. "), "{prompt}");
}

#[test]
fn nothing_to_order_sends_nothing() {
    let registry = text_registry();
    let server = OpenAiServer::always(Behavior::reply("[]"));
    // No candidate, one candidate, no results wanted: no call.
    for (query, max) in [("zzzz", 5), ("shout", 5), ("text", 0)] {
        let found = search(
            &server,
            &registry,
            query,
            &options(max),
            SearchMode::Balanced,
        );
        assert_eq!(found.results, registry.search(query, &options(max)));
        assert_eq!(found.fallback, None);
    }
    // Fast mode never calls.
    let found = search(&server, &registry, "text", &options(5), SearchMode::Fast);
    assert_eq!(found, LlmSearch::fast(&registry, "text", &options(5)));
    assert_eq!(server.request_count(), 0);
}

#[test]
fn the_outcome_serializes_with_mode_and_fallback() {
    let registry = text_registry();
    let server = OpenAiServer::always(Behavior::reply("no"));
    let found = search(
        &server,
        &registry,
        "count",
        &options(2),
        SearchMode::Balanced,
    );
    let json = serde_json::to_value(&found).unwrap();
    assert_eq!(json["query"], "count");
    assert_eq!(json["mode"], "balanced");
    assert!(
        json["fallback"]
            .as_str()
            .unwrap()
            .contains("not a JSON array")
    );
    assert_eq!(json["results"].as_array().unwrap().len(), 2);
}
