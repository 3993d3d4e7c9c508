//! E009: one file defines each exposed name once.

use std::collections::HashMap;

use super::super::context::{Definition, FileContext};
use super::super::diagnostic::{Code, Diagnostic, line_column};

pub(crate) fn check(ctx: &mut FileContext<'_>, definitions: &[Definition<'_>]) {
    let mut first_seen: HashMap<&str, usize> = HashMap::new();
    for def in definitions {
        let Some(&first) = first_seen.get(def.name.as_str()) else {
            first_seen.insert(&def.name, def.span.start);
            continue;
        };
        let (line, _) = line_column(ctx.source, first);
        let diagnostic = Diagnostic::at(
            Code::Duplicate,
            ctx.file,
            ctx.source,
            def.name_span.clone(),
            format!(
                "`{}` is defined twice in this file (first on line {line})",
                def.name
            ),
        )
        .with_help("remove or rename one of the definitions");
        ctx.report(diagnostic);
    }
}
