//! E004: the documented parameters are exactly the real ones.

use super::super::context::{Definition, FileContext};
use super::super::diagnostic::{Code, Diagnostic};
use super::super::doc::ParsedDoc;

/// Reports real parameters without `@param`, and `@param`s naming no parameter.
pub(crate) fn check(ctx: &mut FileContext<'_>, def: &Definition<'_>, doc: &ParsedDoc<'_>) {
    let parameters = def.parameters();
    for (name, span) in &parameters {
        if doc.params.iter().any(|p| p.name == name) {
            continue;
        }
        let example = if name == "..." {
            "---@param ... any Extra arguments".to_string()
        } else {
            format!("---@param {name} <type> <description>")
        };
        let diagnostic = Diagnostic::at(
            Code::ParamMismatch,
            ctx.file,
            ctx.source,
            span.clone(),
            format!("parameter `{name}` of `{}` is not documented", def.name),
        )
        .with_help(format!("add `{example}` to the doc comment"));
        ctx.report(diagnostic);
    }
    for param in &doc.params {
        if parameters.iter().any(|(name, _)| name == param.name) {
            continue;
        }
        let real: Vec<&str> = parameters.iter().map(|(n, _)| n.as_str()).collect();
        let diagnostic = Diagnostic::at(
            Code::ParamMismatch,
            ctx.file,
            ctx.source,
            param.span.clone(),
            format!(
                "`@param {}` names no parameter of `{}`",
                param.name, def.name
            ),
        )
        .with_help(if real.is_empty() {
            format!("`{}` takes no parameters: remove this line", def.name)
        } else {
            format!("the parameters are: {}", real.join(", "))
        });
        ctx.report(diagnostic);
    }
}
