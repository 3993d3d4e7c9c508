//! The integration tests: one binary, one module per feature, so the crate and its
//! dependencies are linked once. A module needing a feature is compiled only with it
//! (`cargo test --all-features` runs them all); shared helpers are in `support/`.

mod support;

#[cfg(feature = "cli")]
mod acp;
#[cfg(feature = "cli")]
mod acp_client;
#[cfg(feature = "cli")]
mod answer_protocol;
mod build_script;
#[cfg(feature = "runtime")]
mod builtins;
#[cfg(feature = "cli")]
mod cache;
#[cfg(feature = "cli")]
mod cache_redis;
#[cfg(feature = "cli")]
mod cache_single_flight;
#[cfg(feature = "cli")]
mod cli;
#[cfg(feature = "cli")]
mod cli_docs;
#[cfg(feature = "runtime")]
mod compaction;
#[cfg(feature = "runtime")]
mod config;
#[cfg(feature = "runtime")]
mod context;
#[cfg(feature = "cli")]
mod context_config;
#[cfg(feature = "runtime")]
mod context_window;
mod conventions;
#[cfg(feature = "cli")]
mod corpus;
#[cfg(feature = "cli")]
mod corpus_formats;
#[cfg(all(feature = "runtime", feature = "text", feature = "chunking"))]
mod corpus_library;
#[cfg(feature = "runtime")]
mod csv;
mod docs_links;
#[cfg(feature = "cli")]
mod editor;
#[cfg(feature = "runtime")]
mod environment;
#[cfg(feature = "cli")]
mod eval;
#[cfg(feature = "cli")]
mod eval_shard;
#[cfg(feature = "runtime")]
mod fidelity;
#[cfg(feature = "runtime")]
mod grep;
#[cfg(feature = "runtime")]
mod images;
#[cfg(feature = "cli")]
mod journal;
#[cfg(feature = "runtime")]
mod json;
#[cfg(feature = "cli")]
mod json_mapping;
mod layers;
#[cfg(feature = "runtime")]
mod llm_client;
#[cfg(feature = "runtime")]
mod lua_json_properties;
#[cfg(all(feature = "text", feature = "chunking"))]
mod lua_library;
#[cfg(feature = "cli")]
mod memory_peak;
#[cfg(feature = "runtime")]
mod parallel;
#[cfg(feature = "runtime")]
mod patterns;
#[cfg(feature = "runtime")]
mod providers;
#[cfg(feature = "runtime")]
mod providers_files;
#[cfg(feature = "runtime")]
mod providers_shell;
#[cfg(all(feature = "cli", feature = "serve"))]
mod python_habits;
#[cfg(feature = "runtime")]
mod reasoning;
#[cfg(feature = "cli")]
mod recorded_runs;
mod registry;
#[cfg(feature = "cli")]
mod replay;
#[cfg(feature = "cli")]
mod resume;
#[cfg(feature = "cli")]
mod resume_effects;
#[cfg(feature = "runtime")]
mod rlm_loop;
#[cfg(feature = "runtime")]
mod rlm_loop_agents;
#[cfg(feature = "runtime")]
mod rlm_loop_budgets;
#[cfg(feature = "runtime")]
mod rlm_loop_cli;
#[cfg(feature = "runtime")]
mod rlm_loop_prompt;
#[cfg(feature = "runtime")]
mod rlm_loop_trace;
#[cfg(feature = "cli")]
mod rlm_test;
mod room_sizes;
#[cfg(feature = "runtime")]
mod run_costs;
#[cfg(feature = "cli")]
mod run_costs_cli;
#[cfg(feature = "runtime")]
mod sandbox;
#[cfg(feature = "cli")]
mod search;
#[cfg(feature = "cli")]
mod search_modes;
#[cfg(feature = "cli")]
mod search_modes_cli;
#[cfg(feature = "cli")]
mod search_modes_lua;
#[cfg(feature = "cli")]
mod serve_cli;
#[cfg(feature = "cli")]
mod serve_context;
#[cfg(feature = "cli")]
mod serve_features;
#[cfg(feature = "cli")]
mod serve_json_api;
#[cfg(feature = "cli")]
mod serve_mcp;
#[cfg(feature = "cli")]
mod serve_security;
#[cfg(feature = "cli")]
mod serve_sessions;
#[cfg(all(feature = "serve", feature = "cli"))]
mod serve_state_dir;
#[cfg(feature = "cli")]
mod serve_stress;
#[cfg(feature = "cli")]
mod server_window;
#[cfg(feature = "cli")]
mod setup;
#[cfg(feature = "runtime")]
mod tool_calls;
#[cfg(feature = "runtime")]
mod tool_dispatch;
#[cfg(feature = "runtime")]
mod tool_export;
#[cfg(feature = "runtime")]
mod tool_schema;
#[cfg(feature = "cli")]
mod trace_export;
#[cfg(feature = "cli")]
mod trace_html;
#[cfg(feature = "cli")]
mod trace_properties;
#[cfg(feature = "cli")]
mod trace_show;
#[cfg(feature = "runtime")]
mod typed_answers;
