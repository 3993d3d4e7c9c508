//! The built-ins as providers, derived from the one built-ins table
//! ([`conventions::builtins::BUILTINS`](crate::conventions::builtins::BUILTINS)): one
//! provider per [`BuiltinProvider`], each function with the table's doc and scope, run by
//! the environment (the handler only carries the [`BuiltinId`](crate::conventions::builtins::BuiltinId)).

use super::HostFunction;
use super::host::HostHandler;
use crate::conventions::builtins::BuiltinProvider;

/// The built-in providers `which` with their functions, in the order given.
pub(super) fn providers(
    which: &[BuiltinProvider],
) -> Vec<(&'static str, &'static str, Vec<HostFunction>)> {
    which
        .iter()
        .map(|&provider| {
            let functions = provider
                .functions()
                .map(|builtin| {
                    HostFunction::new(
                        builtin.name,
                        builtin.doc_comment(),
                        HostHandler::Builtin(builtin.id),
                    )
                    .scope(builtin.scope)
                })
                .collect();
            (provider.name(), provider.description(), functions)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::conventions::builtins::{BUILTINS, BuiltinProvider};

    #[test]
    fn the_builtin_docs_pass_the_conventions() {
        let set = super::super::Providers::builtin();
        let offered = BUILTINS
            .iter()
            .filter(|b| BuiltinProvider::ALL.contains(&b.provider));
        assert_eq!(set.iter().count(), offered.clone().count());
        for builtin in offered {
            let info = set.get(builtin.name).expect(builtin.name);
            assert_eq!(info.function().declaration(), builtin.doc);
            assert_eq!(info.scope(), builtin.scope);
            assert_eq!(info.provider(), builtin.provider.name());
        }
    }
}
