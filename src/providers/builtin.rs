//! The built-ins as providers: which provider and scope each belongs to. Their docs are
//! [`conventions::builtins::DOCS`](crate::conventions::builtins::DOCS); their code is
//! the environment's ([`environment::builtins`](crate::environment::builtins)).

use super::host::HostHandler;
use super::{HostFunction, Scope};
use crate::conventions::builtins::DOCS;

/// `(provider, description, scope, functions)` for every built-in provider, in the order
/// the prompt lists them.
const GROUPS: &[(&str, &str, Scope, &[&str])] = &[
    (
        "core",
        "Output, the final answer, tokens, the session's variables and discovery: every agent has them.",
        Scope::Core,
        &[
            "print",
            "FINAL",
            "FINAL_VAR",
            "token_count",
            "token_truncate",
            "token_split",
            "token_budget",
            "store_list",
            "store_summarize",
            "fn_search",
            "help",
        ],
    ),
    (
        "re",
        "Regular expressions in Python/PCRE syntax on the regex crate: linear time, byte offsets as string.sub takes them.",
        Scope::Core,
        &[
            "re.find",
            "re.match",
            "re.gmatch",
            "re.find_all",
            "re.count",
            "re.split",
            "re.gsub",
            "re.replace",
        ],
    ),
    (
        "llm",
        "Sub-model calls on pieces of the context.",
        Scope::Core,
        &["llm_query", "llm_query_batched"],
    ),
    (
        "agent",
        "Child agents with a REPL of their own; only where a child may still be started.",
        Scope::Agent,
        &["rlm_query", "rlm_query_batched"],
    ),
    (
        "user",
        "The human user as a function; top-level agent only.",
        Scope::User,
        &["ask_user", "notify_user"],
    ),
];

/// The built-in providers with their functions.
pub(super) fn providers() -> Vec<(&'static str, &'static str, Vec<HostFunction>)> {
    GROUPS
        .iter()
        .map(|&(name, description, scope, functions)| {
            let functions = functions
                .iter()
                .filter_map(|&function| {
                    let doc = DOCS.iter().find(|d| d.name == function)?;
                    let comment = doc_comment(doc.doc);
                    Some(HostFunction::new(function, comment, HostHandler::Builtin).scope(scope))
                })
                .collect();
            (name, description, functions)
        })
        .collect()
}

/// The doc comment of a built-in's documentation, without its declaration line.
fn doc_comment(doc: &'static str) -> &'static str {
    match doc.rfind("\nfunction ") {
        Some(end) => &doc[..end],
        None => doc,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_belongs_to_exactly_one_provider() {
        for doc in DOCS {
            let owners = GROUPS.iter().filter(|g| g.3.contains(&doc.name)).count();
            assert_eq!(owners, 1, "{}", doc.name);
        }
        let listed: usize = GROUPS.iter().map(|g| g.3.len()).sum();
        assert_eq!(listed, DOCS.len());
    }

    #[test]
    fn the_builtin_docs_pass_the_conventions() {
        let set = super::super::Providers::builtin();
        assert_eq!(set.iter().count(), DOCS.len());
        for doc in DOCS {
            let info = set.get(doc.name).expect(doc.name);
            assert_eq!(info.function().declaration(), doc.doc);
        }
    }
}
