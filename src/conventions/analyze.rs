//! The walk over one parsed file: which top-level statements define exposed functions,
//! which are private, and which break the conventions. The per-rule checks live in
//! [`rules`]; this module only finds what they look at.

use std::collections::HashSet;
use std::ops::Range;

use full_moon::ast::{Ast, Expression, FunctionBody, LastStmt, Stmt, Var};
use full_moon::node::Node;
use full_moon::tokenizer::TokenReference;

use super::context::{Definition, FileContext};
use super::context::{node_span, token_span};
use super::rules;

/// Classifies every top-level statement: exposed definitions are returned, private ones
/// are accepted silently, and anything else is reported (E006, E007).
pub(crate) fn top_level<'a>(ast: &'a Ast, ctx: &mut FileContext<'_>) -> Vec<Definition<'a>> {
    let mut locals: HashSet<String> = HashSet::new();
    let mut exposed = Vec::new();
    for stmt in ast.nodes().stmts() {
        match stmt {
            Stmt::LocalFunction(local) => {
                locals.insert(local.name().token().to_string());
            }
            Stmt::LocalAssignment(local) => {
                locals.extend(local.names().iter().map(|n| n.token().to_string()));
            }
            Stmt::FunctionDeclaration(declaration) => {
                let name = declaration.name();
                let parts: Vec<&TokenReference> = name.names().iter().collect();
                let root = parts[0].token().to_string();
                if parts.len() == 1 && name.method_name().is_none() {
                    if !locals.contains(&root) {
                        exposed.push(definition(ctx, stmt, parts[0], declaration.body()));
                    }
                } else if !locals.contains(&root) {
                    rules::scope::method_on_global_table(ctx, &name.to_string(), &root, stmt);
                }
            }
            Stmt::Assignment(assignment) => {
                if let Some((name_token, body)) = single_function_assignment(assignment) {
                    if !locals.contains(&name_token.token().to_string()) {
                        exposed.push(definition(ctx, stmt, name_token, body));
                    }
                    continue;
                }
                check_assignment_targets(ctx, assignment, &locals, stmt);
            }
            other => rules::side_effects::statement(ctx, other),
        }
    }
    if let Some(LastStmt::Return(ret)) = ast.nodes().last_stmt() {
        rules::side_effects::top_level_return(ctx, ret);
    }
    exposed
}

/// `name = function(...) ... end`: the name token and the function body.
fn single_function_assignment(
    assignment: &full_moon::ast::Assignment,
) -> Option<(&TokenReference, &FunctionBody)> {
    let vars = assignment.variables();
    let exprs = assignment.expressions();
    if vars.len() != 1 || exprs.len() != 1 {
        return None;
    }
    match (vars.iter().next()?, exprs.iter().next()?) {
        (Var::Name(name), Expression::Function(function)) => Some((name, function.body())),
        _ => None,
    }
}

/// Assignments are allowed into file-local variables and fields of file-local tables.
fn check_assignment_targets(
    ctx: &mut FileContext<'_>,
    assignment: &full_moon::ast::Assignment,
    locals: &HashSet<String>,
    stmt: &Stmt,
) {
    let assigns_function = assignment
        .expressions()
        .iter()
        .any(|e| matches!(e, Expression::Function(_)));
    for var in assignment.variables() {
        let root = match var {
            Var::Name(name) => Some(name.token().to_string()),
            Var::Expression(expression) => match expression.prefix() {
                full_moon::ast::Prefix::Name(name) => Some(name.token().to_string()),
                _ => None,
            },
            #[allow(unreachable_patterns)]
            _ => None,
        };
        if root.as_ref().is_some_and(|r| locals.contains(r)) {
            continue;
        }
        let target = var.to_string().trim().to_string();
        match (var, &root) {
            (Var::Expression(_), Some(root)) if assigns_function => {
                rules::scope::method_on_global_table(ctx, &target, root, stmt);
            }
            _ => rules::side_effects::global_assignment(ctx, &target, node_span(var)),
        }
        return;
    }
}

fn definition<'a>(
    ctx: &FileContext<'_>,
    stmt: &'a Stmt,
    name: &TokenReference,
    body: &'a FunctionBody,
) -> Definition<'a> {
    let span = node_span(stmt);
    Definition {
        name: name.token().to_string(),
        name_span: token_span(name),
        leading: leading_trivia(ctx.source, stmt, span.start),
        span,
        body,
    }
}

/// The byte range of the comments and whitespace before a statement's first token.
fn leading_trivia(source: &str, stmt: &Stmt, start: usize) -> Range<usize> {
    let first = stmt.tokens().next();
    let trivia_start = first
        .and_then(|t| t.leading_trivia().next())
        .map_or(start, |t| t.start_position().bytes());
    trivia_start.min(start).min(source.len())..start
}
