//! Discovery: ranking on labelled paraphrased queries, exact names first,
//! monotonic confidence, capability tags and filters, sources, lookup, `fn_search` and
//! `rlm search`.

use crate::support::corpus;

use rlm_registry::Registry;
use rlm_registry::search::{FunctionSearch, SearchOptions, capabilities};

fn names(registry: &Registry, query: &str, k: usize) -> Vec<String> {
    let options = SearchOptions {
        max_results: k,
        ..SearchOptions::default()
    };
    registry
        .search(query, &options)
        .into_iter()
        .map(|r| r.name)
        .collect()
}

/// Paraphrased queries over the baked library, each with the function it means.
#[cfg(all(feature = "text", feature = "chunking", feature = "recursive"))]
const BAKED_LABELLED: &[(&str, &str)] = &[
    ("how many words are in a text", "word_count"),
    ("number of characters in a string", "char_count"),
    ("split the text into its lines", "lines"),
    ("how many lines does the text have", "line_count"),
    ("the first n lines", "head"),
    ("last lines of the text", "tail"),
    ("lines between two line numbers", "line_range"),
    ("find the lines matching a pattern with context", "grep"),
    ("grep output as printable text", "grep_text"),
    ("every position of a substring", "find_all"),
    ("break the text into chunks of n lines", "chunk_by_lines"),
    (
        "chunks of at most n bytes without cutting characters",
        "chunk_by_size",
    ),
    ("split on a separator into paragraphs", "chunk_by_separator"),
    ("ask the same question about every chunk", "map_chunks"),
    (
        "answer a question about a text too large for one call",
        "map_reduce",
    ),
    ("which chunks are relevant to a question", "find_in_chunks"),
];

#[cfg(all(feature = "text", feature = "chunking", feature = "recursive"))]
#[test]
fn paraphrased_queries_find_the_baked_functions() {
    let registry = Registry::baked();
    let mut top1 = 0;
    let mut top3 = 0;
    for (query, expected) in BAKED_LABELLED {
        let found = names(registry, query, 3);
        top1 += usize::from(found.first().map(String::as_str) == Some(*expected));
        top3 += usize::from(found.iter().any(|n| n == expected));
        assert!(
            found.iter().any(|n| n == expected),
            "`{query}`: expected {expected} in the top 3, got {found:?}"
        );
    }
    let n = BAKED_LABELLED.len();
    assert_eq!(top3, n);
    assert!(top1 * 10 >= n * 8, "top-1 {top1}/{n}");
}

#[test]
fn paraphrased_queries_find_the_generated_functions() {
    let generated = corpus::corpus();
    assert!(generated.len() >= 1000);
    let registry =
        Registry::from_map(generated.iter().map(|g| (g.name.clone(), g.source.clone()))).unwrap();
    let labelled = corpus::labelled(&generated);
    let hits = labelled
        .iter()
        .filter(|(query, expected)| names(&registry, query, 5).contains(expected))
        .count();
    assert!(
        hits * 100 >= labelled.len() * 95,
        "recall@5 {hits}/{}",
        labelled.len()
    );
}

#[test]
fn an_exact_name_ranks_first() {
    let generated = corpus::corpus();
    let registry =
        Registry::from_map(generated.iter().map(|g| (g.name.clone(), g.source.clone()))).unwrap();
    for g in generated.iter().step_by(11) {
        assert_eq!(
            names(&registry, &g.name, 1),
            std::slice::from_ref(&g.name),
            "{}",
            g.name
        );
    }
    for function in Registry::baked().functions() {
        let found = names(Registry::baked(), function.name(), 1);
        assert_eq!(found, [function.name()]);
    }
    // Written as words or in camelCase it is still the name.
    let hits = Registry::baked().search("word count", &SearchOptions::default());
    if let Some(first) = hits.first() {
        assert_eq!(first.name, "word_count");
        assert!(first.match_reason.starts_with("exact name"));
        assert_eq!(first.signals[0].signal_type, "exact_name");
    }
}

#[test]
fn confidence_is_in_range_and_never_increases_down_the_ranking() {
    let generated = corpus::corpus();
    let registry =
        Registry::from_map(generated.iter().map(|g| (g.name.clone(), g.source.clone()))).unwrap();
    let options = SearchOptions {
        max_results: 50,
        ..SearchOptions::default()
    };
    let mut queries: Vec<String> = corpus::labelled(&generated)
        .into_iter()
        .map(|(q, _)| q)
        .collect();
    queries.extend(["csv", "parse_csv_fast", "x", "web", "quickly many"].map(String::from));
    for query in &queries {
        let results = registry.search(query, &options);
        for pair in results.windows(2) {
            assert!(pair[0].score >= pair[1].score, "{query}");
            assert!(pair[0].confidence >= pair[1].confidence, "{query}");
        }
        for r in &results {
            assert!(
                r.confidence > 0.0 && r.confidence < 1.0,
                "{query}: {}",
                r.confidence
            );
            assert!(!r.signals.is_empty() && !r.match_reason.is_empty());
        }
    }
    assert!(registry.search("zzzz qqqq", &options).is_empty());
    assert!(registry.search("", &options).is_empty());
}

const TAGGED: &[(&str, &str)] = &[
    (
        "post_alert",
        "--- Posts a message to the team channel.\n---@tag notification\n---@param text string The message\nfunction post_alert(text) end",
    ),
    (
        "plot_series",
        "--- Draws a line chart of a series of numbers.\n---@param values number[] The series\n---@return string svg The chart\nfunction plot_series(values) return '' end",
    ),
    (
        "read_config",
        "--- Reads a configuration file from disk.\n---@tag config, FILE_IO\n---@param path string The file\n---@return string text Its content\nfunction read_config(path) return '' end",
    ),
];

#[test]
fn explicit_and_automatic_capabilities() {
    let registry = Registry::from_map(TAGGED.iter().copied()).unwrap();
    assert_eq!(registry.get("post_alert").unwrap().tags(), ["notification"]);
    assert_eq!(
        registry.get("read_config").unwrap().tags(),
        ["config", "file_io"]
    );
    let caps = registry.capabilities_of(registry.get("plot_series").unwrap());
    assert!(caps.contains(&"visualization".to_string()), "{caps:?}");
    // Explicit tags come first and are not repeated by the automatic ones.
    let caps = registry.capabilities_of(registry.get("read_config").unwrap());
    assert_eq!(caps.iter().filter(|c| *c == "file_io").count(), 1);
    assert_eq!(&caps[..2], ["config", "file_io"]);
    assert_eq!(capabilities::all().count(), 16);

    let with = |c: &str| -> Vec<&str> {
        registry
            .with_capability(c, None)
            .iter()
            .map(|f| f.name())
            .collect()
    };
    assert_eq!(with("notification"), ["post_alert"]);
    assert_eq!(with("Visualization"), ["plot_series"]);
    assert_eq!(with("config"), ["read_config"]);
    assert!(with("kubernetes").is_empty());
}

#[test]
fn search_filters_by_capability_and_source() {
    let registry = Registry::from_map(TAGGED.iter().copied()).unwrap();
    let options = SearchOptions {
        capability: Some("notification".into()),
        ..SearchOptions::default()
    };
    let found: Vec<String> = registry
        .search("message chart file", &options)
        .into_iter()
        .map(|r| r.name)
        .collect();
    assert_eq!(found, ["post_alert"]);
    let options = SearchOptions {
        source: Some("elsewhere".into()),
        ..SearchOptions::default()
    };
    assert!(registry.search("message", &options).is_empty());
    let options = SearchOptions {
        source: Some("<map>".into()),
        ..SearchOptions::default()
    };
    assert_eq!(registry.search("message", &options)[0].name, "post_alert");
}

#[cfg(all(feature = "text", feature = "chunking", feature = "recursive"))]
#[test]
fn sources_lookup_and_baked_tags() {
    let registry = Registry::baked();
    let sources = registry.sources();
    let dirs: Vec<&str> = sources.iter().map(|s| s.dir.as_str()).collect();
    let optional = [
        (cfg!(feature = "collections"), "lua/collections"),
        (cfg!(feature = "statistics"), "lua/statistics"),
        (cfg!(feature = "strings"), "lua/strings"),
        (cfg!(feature = "time"), "lua/time"),
    ];
    let expected: Vec<&str> = ["lua/text", "lua/chunking", "lua/recursive"]
        .into_iter()
        .chain(optional.iter().filter(|(on, _)| *on).map(|(_, dir)| *dir))
        .collect();
    assert_eq!(dirs, expected);
    assert_eq!(
        sources.iter().map(|s| s.functions).sum::<usize>(),
        registry.len()
    );
    assert_eq!(registry.get("grep").unwrap().tags(), ["search"]);
    let catalog = rlm_registry::catalog::Catalog::new(
        registry.clone(),
        std::sync::Arc::new(rlm_registry::providers::Providers::builtin()),
        rlm_registry::providers::AgentScope::TOP,
    );
    assert!(
        catalog
            .lookup("lua:grep")
            .is_some_and(|f| f.function.name() == "grep")
    );
    assert!(
        catalog
            .lookup("builtin:fn_search")
            .is_some_and(|f| f.is_builtin())
    );
    assert!(catalog.lookup("builtin:grep").is_none());
    assert!(catalog.lookup("lua:llm_query").is_none());
    let search_only: Vec<&str> = registry
        .with_capability("search", Some("lua/text"))
        .iter()
        .map(|f| f.name())
        .collect();
    assert!(search_only.contains(&"grep"), "{search_only:?}");
    assert!(
        registry
            .with_capability("search", Some("lua/chunking"))
            .iter()
            .all(|f| f.dir() == "lua/chunking")
    );
    let compact = registry.compact_prompt();
    assert!(compact.contains("fn_search(\"") && compact.contains("\ngrep(text, pattern"));
}

#[test]
fn the_baked_index_is_computed_at_build_time_and_equals_a_runtime_build() {
    let registry = Registry::baked();
    let built = rlm_registry::search::Index::build(registry.functions());
    assert!(registry.index() == &built);
    // Baked means a static: every call hands out the same index, never a new build.
    assert!(std::ptr::eq(registry.index(), registry.index()));
    let loaded = Registry::from_paths(
        registry
            .sources()
            .iter()
            .map(|s| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(&s.dir)),
    )
    .unwrap();
    let query = "split text into chunks";
    let baked: Vec<(String, f64)> = registry
        .search(query, &SearchOptions::default())
        .into_iter()
        .map(|r| (r.name, r.score))
        .collect();
    let runtime: Vec<(String, f64)> = loaded
        .search(query, &SearchOptions::default())
        .into_iter()
        .map(|r| (r.name, r.score))
        .collect();
    assert_eq!(baked, runtime);
}

/// The full ranking of `query`: every match, best first.
fn full_ranking(registry: &Registry, query: &str) -> Vec<rlm_registry::search::SearchResult> {
    let options = SearchOptions {
        max_results: usize::MAX,
        ..SearchOptions::default()
    };
    registry.search(query, &options)
}

#[test]
fn top_k_is_the_head_of_the_full_ranking_sorted_by_score_then_name() {
    let generated = corpus::corpus();
    let registry =
        Registry::from_map(generated.iter().map(|g| (g.name.clone(), g.source.clone()))).unwrap();
    // Rare words (few postings) and common ones (every function) take different paths
    // through the engine; both must rank the same way.
    for query in [
        "tally csv",
        "interpret",
        "the input",
        "shrink calendar days quickly",
        "combine many at once rejecting bad input",
        "wordthatmatchesnothing",
    ] {
        let all = full_ranking(&registry, query);
        assert!(
            all.windows(2)
                .all(|w| w[0].score > w[1].score
                    || (w[0].score == w[1].score && w[0].name < w[1].name)),
            "`{query}`: not sorted by score, then name"
        );
        for k in [1, 3, 5, 17] {
            let options = SearchOptions {
                max_results: k,
                ..SearchOptions::default()
            };
            let top: Vec<String> = registry
                .search(query, &options)
                .into_iter()
                .map(|r| r.name)
                .collect();
            let head: Vec<String> = all.iter().take(k).map(|r| r.name.clone()).collect();
            assert_eq!(top, head, "`{query}` k={k}");
        }
    }
    assert_eq!(full_ranking(&registry, "interpret").len(), 51);
    assert!(full_ranking(&registry, "wordthatmatchesnothing").is_empty());
}

#[test]
fn hits_rank_exactly_like_explained_results() {
    let generated = corpus::corpus();
    let registry =
        Registry::from_map(generated.iter().map(|g| (g.name.clone(), g.source.clone()))).unwrap();
    let filtered = SearchOptions {
        max_results: 8,
        capability: Some("http".to_string()),
        source: None,
    };
    for options in [SearchOptions::default(), filtered] {
        for (query, _) in corpus::labelled(&generated).iter().take(40) {
            let hits = rlm_registry::search::search_hits(&registry, query, &options);
            let results = registry.search(query, &options);
            assert_eq!(hits.len(), results.len(), "`{query}`");
            for (hit, result) in hits.iter().zip(&results) {
                assert_eq!(hit.function.name(), result.name);
                assert_eq!(hit.signature, result.signature);
                assert_eq!(hit.summary, result.summary);
                assert_eq!(hit.score, result.score);
                assert_eq!(hit.confidence, result.confidence);
            }
        }
    }
}

#[cfg(feature = "text")]
#[test]
fn fn_search_in_lua() {
    use rlm_registry::environment::{Environment, Limits};
    let env = Environment::new(Registry::baked().clone(), Limits::default()).unwrap();
    let out = env
        .execute(
            r#"local r = fn_search("how many words in a text", {max_results = 2})
print(#r, r[1].name, r[1].signature, r[1].summary ~= "", r[1].confidence > 0 and r[1].confidence <= 1)
print(#fn_search("lines", {capability = "visualization"}))
print(help("fn_search"):sub(1, 4))"#,
        )
        .unwrap();
    assert_eq!(
        out.output,
        "2\tword_count\tword_count(text)\ttrue\ttrue\n0\n--- \n"
    );
}

#[cfg(feature = "cli")]
mod cli {
    use crate::support::cli::{fed, rlm, rlm_command};

    #[test]
    fn batch_mode_answers_one_json_line_per_query_in_order() {
        let mut batch = rlm_command();
        batch.args(["search", "--queries", "-", "--max-results", "2"]);
        let out = fed(batch, b"grep\n\nzzzz\nchunk_by_size\n");
        assert!(out.status.success());
        let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let queries: Vec<&str> = lines.iter().map(|l| l["query"].as_str().unwrap()).collect();
        assert_eq!(queries, ["grep", "", "zzzz", "chunk_by_size"]);
        assert_eq!(lines[0]["results"][0]["id"], "lua:grep");
        assert_eq!(lines[1]["results"].as_array().unwrap().len(), 0);
        assert_eq!(lines[3]["results"][0]["name"], "chunk_by_size");
    }

    #[test]
    fn one_query_as_json_with_confidence_reason_and_signals() {
        let out = rlm(&["search", "count words", "--json", "--capability", "analyze"]);
        assert!(out.status.success());
        let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(value["results"][0]["name"], "word_count");
        let r = &value["results"][0];
        for key in [
            "confidence",
            "match_reason",
            "signals",
            "capabilities",
            "signature",
        ] {
            assert!(!r[key].is_null(), "{key}");
        }
        let out = rlm(&["search", "x", "--mode", "fastest"]);
        assert_eq!(out.status.code(), Some(2));
    }
}
