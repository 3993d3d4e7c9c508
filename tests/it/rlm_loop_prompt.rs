//! What the system prompt tells the model end to end: the context's description, the
//! functions listed compactly (the default), in full, or as `PromptMode::Auto` decides,
//! and the size of the default prompt.

use crate::support;

use std::sync::Arc;

use rlm_registry::Registry;
use rlm_registry::rlm::{AUTO_COMPACT_ABOVE_TOKENS, Context, PromptMode, Rlm};
use support::openai_server::{Behavior, OpenAiServer};
use support::rlm_loop::*;

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
                "\ncount_vowels(text)  -- Counts the vowels of a text (a, e, i, o, u, either case).\n"
            ),
            "{who}: {system}"
        );
        assert!(
            system.contains("\nconvert_record_002(record, strict?)  -- Converts ledger record 2"),
            "{who}: {system}"
        );
        // No full doc at all, the built-ins' included: help prints them on demand.
        assert!(!system.contains("---@param"), "{who}: {system}");
        assert!(
            !system.contains("The text whose vowels are counted"),
            "{who}"
        );
        assert!(system.contains(COMPACT_MARKER), "{who}: {system}");
        for builtin in [
            "\nfn_search(query, opts?)  -- Searches the functions for a task, best match first.\n",
            "\nhelp(name?)  -- Returns the documentation of a built-in or registry function",
            "\nllm_query(prompt, opts?)  -- Asks a sub-model one question and returns its answer.\n",
        ] {
            assert!(system.contains(builtin), "{who}: {builtin}");
        }
    }
    assert!(system_prompt_of(&bodies, 1).contains("sub-agent at depth 1"));

    // The default is the compact listing; full lists every function with its doc.
    let server = OpenAiServer::always(lua("FINAL('x')"));
    Rlm::new(Arc::new(client(&server)), registry.clone(), 10)
        .run("Q", None)
        .unwrap();
    let system = system_prompt_of(&bodies_of(&server), 0);
    assert!(
        system.contains(registry.compact_prompt().trim_end()),
        "{system}"
    );
    let server = OpenAiServer::always(lua("FINAL('x')"));
    rlm_listing(&server, &registry, PromptMode::Full)
        .run("Q", None)
        .unwrap();
    let system = system_prompt_of(&bodies_of(&server), 0);
    assert!(
        system.contains("---@param text string The text whose vowels are counted"),
        "{system}"
    );
    assert!(system.contains(registry.system_prompt().trim_end()));
    assert!(system.contains("function fn_search(query, opts) end"));
    assert!(!system.contains(COMPACT_MARKER));
}

/// What only the compact registry listing says.
const COMPACT_MARKER: &str = "`fn_search(\"what you need\")` finds functions";

#[test]
fn auto_goes_compact_on_a_large_registry_only() {
    let large = registry_of(200);
    let full_tokens = rlm_registry::tokens::count(large.system_prompt());
    assert!(
        full_tokens > AUTO_COMPACT_ABOVE_TOKENS,
        "the test registry must be large: {full_tokens} tokens"
    );
    let small = registry_of(2);
    let compact_marker = COMPACT_MARKER;
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
fn the_baked_registry_is_listed_in_full_under_the_auto_mode() {
    let registry = Registry::baked();
    let listing = rlm_registry::tokens::count(registry.system_prompt());
    assert!(
        !PromptMode::auto().is_compact_for(registry),
        "the baked listing is {listing} tokens, over the auto threshold of {AUTO_COMPACT_ABOVE_TOKENS}"
    );
}

/// An RLM over the baked registry that only builds prompts.
fn baked(mode: PromptMode) -> Rlm {
    let server = OpenAiServer::always(Behavior::status(500));
    Rlm::new(Arc::new(client(&server)), Registry::baked().clone(), 10).prompt_mode(mode)
}

/// The default system prompt of `rlm ask` with the baked registry fits a small model's
/// window with room to work: at most 3,000 tokens, the REPL's rules at most 1,200 of
/// them; the full listing stays available and is much larger.
#[test]
fn the_default_prompt_of_the_baked_registry_is_at_most_3000_tokens() {
    use rlm_registry::tokens::count;
    let default = baked(PromptMode::default());
    for context in [None, Some(Context::from("one line\nanother line\n"))] {
        let whole = count(&default.system_prompt(context.as_ref()));
        assert!(whole <= 3_000, "the default prompt is {whole} tokens");
        let rules = default.prompt_parts(context.as_ref());
        let rules = rules.iter().find(|part| part.name == "rules").unwrap();
        assert!(
            count(&rules.text) <= 1_200,
            "the rules are {} tokens",
            count(&rules.text)
        );
    }
    let full = count(&baked(PromptMode::Full).system_prompt(None));
    let compact = count(&baked(PromptMode::Compact).system_prompt(None));
    assert!(full > 2 * compact, "full {full}, compact {compact}");
}
