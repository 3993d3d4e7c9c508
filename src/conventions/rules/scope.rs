//! E006: every exposed name is reachable as a global defined at the top level.
//!
//! Two ways to break it: defining a function into a table that is not file-local
//! (`function utils.trim()` where `utils` is some global), and defining a global function
//! inside another function or block, where it only appears once that code runs.

use std::collections::HashSet;

use full_moon::ast::{self, Ast, Expression, Parameter, Stmt, Var};
use full_moon::visitors::Visitor;

use super::super::context::{FileContext, first_line, node_span, token_span};
use super::super::diagnostic::{Code, Diagnostic};

/// `function a.b()` / `a:b()` / `a.b = function` where `a` is not a file-local table.
pub(crate) fn method_on_global_table(
    ctx: &mut FileContext<'_>,
    target: &str,
    root: &str,
    stmt: &Stmt,
) {
    let diagnostic = Diagnostic::at(
        Code::Inaccessible,
        ctx.file,
        ctx.source,
        first_line(ctx.source, node_span(stmt)),
        format!("`{target}` is defined on `{root}`, which is not a file-local table"),
    )
    .with_help(format!(
        "declare `local {root} = {{}}` above it to keep it private, or define a global function with a plain name"
    ));
    ctx.report(diagnostic);
}

/// Global functions defined anywhere below the top level.
pub(crate) fn nested_globals(ctx: &mut FileContext<'_>, ast: &Ast) {
    let mut visitor = NestedGlobals {
        scopes: Vec::new(),
        pending: Vec::new(),
        found: Vec::new(),
    };
    visitor.visit_ast(ast);
    for (name, span) in visitor.found {
        let diagnostic = Diagnostic::at(
            Code::Inaccessible,
            ctx.file,
            ctx.source,
            span,
            format!("global function `{name}` is defined below the top level"),
        )
        .with_help(format!(
            "move `{name}` to the top level of the file with its own doc comment, or declare it `local`"
        ));
        ctx.report(diagnostic);
    }
}

/// Tracks block scopes and their locals; the first block visited is the file itself.
struct NestedGlobals {
    scopes: Vec<HashSet<String>>,
    /// Names (parameters, loop variables) that belong to the next block opened.
    pending: Vec<String>,
    found: Vec<(String, std::ops::Range<usize>)>,
}

impl NestedGlobals {
    fn is_local(&self, name: &str) -> bool {
        self.scopes.iter().any(|s| s.contains(name))
    }

    fn declare(&mut self, name: String) {
        if let Some(scope) = self.scopes.last_mut() {
            scope.insert(name);
        }
    }

    fn nested(&self) -> bool {
        self.scopes.len() > 1
    }
}

impl Visitor for NestedGlobals {
    fn visit_block(&mut self, _: &ast::Block) {
        self.scopes.push(self.pending.drain(..).collect());
    }

    fn visit_block_end(&mut self, _: &ast::Block) {
        self.scopes.pop();
    }

    fn visit_function_body(&mut self, body: &ast::FunctionBody) {
        for parameter in body.parameters() {
            if let Parameter::Name(name) = parameter {
                self.pending.push(name.token().to_string());
            }
        }
    }

    fn visit_numeric_for(&mut self, node: &ast::NumericFor) {
        self.pending.push(node.index_variable().token().to_string());
    }

    fn visit_generic_for(&mut self, node: &ast::GenericFor) {
        self.pending
            .extend(node.names().iter().map(|n| n.token().to_string()));
    }

    fn visit_local_function(&mut self, node: &ast::LocalFunction) {
        self.declare(node.name().token().to_string());
    }

    fn visit_local_assignment(&mut self, node: &ast::LocalAssignment) {
        for name in node.names() {
            self.declare(name.token().to_string());
        }
    }

    fn visit_function_declaration(&mut self, node: &ast::FunctionDeclaration) {
        let names: Vec<_> = node.name().names().iter().collect();
        if self.nested() && names.len() == 1 && node.name().method_name().is_none() {
            let name = names[0].token().to_string();
            if !self.is_local(&name) {
                self.found.push((name, token_span(names[0])));
            }
        }
    }

    fn visit_assignment(&mut self, node: &ast::Assignment) {
        if !self.nested() {
            return;
        }
        for (var, value) in node.variables().iter().zip(node.expressions().iter()) {
            if let (Var::Name(name), Expression::Function(_)) = (var, value) {
                let name_text = name.token().to_string();
                if !self.is_local(&name_text) {
                    self.found.push((name_text, token_span(name)));
                }
            }
        }
    }
}
