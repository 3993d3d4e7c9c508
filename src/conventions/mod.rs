//! The function conventions: what a registry `.lua` file may contain, and what
//! is extracted from it.
//!
//! This module is shared, byte for byte, by the library and by `build.rs` (which
//! includes it with `#[path]`), so a file that fails the build fails `from_paths` with the
//! same diagnostics, and vice versa.
//!
//! [`check_file`] validates one file and extracts its exposed [`Function`]s. Loading whole
//! directories, precedence between them and `from_map` are the registry's job.
//!
//! ```
//! use rlm_registry::conventions::{check_file, Code};
//!
//! let ok = check_file("ok.lua", "--- Says hi.\n---@return string\nfunction hi() return 'hi' end\n");
//! assert!(ok.diagnostics.is_empty());
//! assert_eq!(ok.functions[0].name(), "hi");
//!
//! let bad = check_file("bad.lua", "function hi(name) return 'hi' end\nprint('loaded')\n");
//! let codes: Vec<Code> = bad.diagnostics.iter().map(|d| d.code).collect();
//! assert_eq!(codes, [Code::MissingDoc, Code::SideEffect]);
//! ```
//!
//! # Where things are
//!
//! - `analyze`: the walk over a parsed file, finding the definitions; `rules/` the rules
//!   it runs, one module per family of error codes, each with its tests; `context`: what
//!   the walk hands the rules.
//! - `doc`: reading doc comments; `function`: the extracted [`Function`]; [`lua_type`]:
//!   the one LuaLS type grammar, read by the doc reader, the tool schemas and host
//!   functions.
//! - `lexer`: the one cut of Lua source into code, strings and comments, read by the
//!   parse guard, by the examples' `-->` split and by the environment's Python-habit hints.
//! - Every full_moon parse (a file, an example's chunk) goes through `parse_guarded`,
//!   which first refuses what would make full_moon panic (`bare_backtick`) or overflow
//!   its stack (`depth`).
//! - [`builtins`]: the one table of built-ins, from which the names rule E008 reserves
//!   are derived (`names`); [`examples`]: the runnable examples of doc comments, which
//!   rule E012 compiles and `rlm test` runs; [`diagnostic`]: the codes and their
//!   rustc-style rendering.

mod analyze;
mod bare_backtick;
pub mod builtins;
mod context;
mod depth;
pub mod diagnostic;
mod doc;
pub mod examples;
mod function;
pub(crate) mod lexer;
pub mod lua_type;
mod names;
mod rules;

use std::borrow::Cow;

use full_moon::LuaVersion;

pub use diagnostic::{Code, Diagnostic, Severity, render};
pub use doc::documented_params;
pub use function::{Function, Param, Return, Text};
pub use names::{
    ANSWER_GLOBAL, AnswerProtocol, CONTEXT_GLOBAL, LUA_GLOBALS, REMOVED_GLOBALS, RESERVED_GLOBALS,
    TEXT_PRIMITIVES_GLOBAL, is_lua_name, reserved_kind,
};

use context::{Definition, FileContext};
use doc::DocBlock;

/// The result of checking one file: its exposed functions (in file order) and every
/// diagnostic, sorted by position. The functions are meaningful only when no diagnostic
/// is an error.
#[derive(Debug, Default)]
pub struct FileCheck {
    /// Exposed functions, in the order they are defined. `dir` and `chunk` are unset.
    pub functions: Vec<Function>,
    /// Every violation found, sorted by position.
    pub diagnostics: Vec<Diagnostic>,
}

/// Checks one Lua file against every convention and extracts its exposed functions.
///
/// `file` is only used to label diagnostics. Never panics and never overflows the
/// stack, whatever `source` holds.
pub fn check_file(file: &str, source: &str) -> FileCheck {
    check_files(&[(file, source)]).pop().unwrap_or_default()
}

/// Checks several files; equivalent to calling [`check_file`] on each, but parses them
/// all on one thread.
pub fn check_files(files: &[(&str, &str)]) -> Vec<FileCheck> {
    let checked = on_parser_stack(|| {
        files
            .iter()
            .map(|(file, source)| check_guarded(file, source))
            .collect()
    });
    checked.unwrap_or_else(|error| {
        let message = format!("could not check the file: no thread for the parser ({error})");
        files
            .iter()
            .map(|(file, _)| FileCheck {
                functions: Vec::new(),
                diagnostics: vec![Diagnostic::whole_file(
                    Code::Unreadable,
                    file,
                    message.clone(),
                )],
            })
            .collect()
    })
}

/// Stack for the parsing thread: full_moon recurses once or more per nesting level, and
/// `depth` caps the levels at `MAX_NESTING`, which this stack holds with a wide margin
/// even in unoptimised builds (tested in `tests/it/conventions.rs`). Only the pages a parse
/// touches are ever committed.
const PARSER_STACK_BYTES: usize = 256 * 1024 * 1024;

fn on_parser_stack<T: Send>(work: impl FnOnce() -> T + Send) -> std::io::Result<T> {
    std::thread::scope(|scope| {
        let handle = std::thread::Builder::new()
            .name("rlm-lua-parser".into())
            .stack_size(PARSER_STACK_BYTES)
            .spawn_scoped(scope, work)?;
        // `check_guarded` catches panics per file, so the thread itself ends normally.
        Ok(handle
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
    })
}

/// A panic inside the parser (a bug there, such as full_moon#359) becomes an E001 for
/// that file instead of unwinding into the caller.
fn check_guarded(file: &str, source: &str) -> FileCheck {
    let checked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        check_on_current_stack(file, source)
    }));
    checked.unwrap_or_else(|_| {
        let message = "the Lua parser failed on this file; please report it with the file attached";
        FileCheck {
            functions: Vec::new(),
            diagnostics: vec![Diagnostic::whole_file(Code::Syntax, file, message)],
        }
    })
}

fn check_on_current_stack(file: &str, source: &str) -> FileCheck {
    let mut ctx = FileContext {
        file,
        source,
        diagnostics: Vec::new(),
    };
    let functions = extract(&mut ctx);
    let mut diagnostics = ctx.diagnostics;
    diagnostics.sort_by_key(|d| (d.span.start, d.code));
    FileCheck {
        functions,
        diagnostics,
    }
}

/// What full_moon must not be handed: a backtick outside strings and comments (its
/// lexer panics on one) or nesting deeper than its recursion survives.
pub(crate) enum Unparsable {
    /// The byte offset of the backtick.
    Backtick(usize),
    TooDeep(depth::TooDeep),
}

/// Parses Lua 5.4 source with full_moon, once the source is known to be safe to hand it:
/// every parse of the conventions goes through here (a file, an example's chunk).
pub(crate) fn parse_guarded(source: &str) -> Result<full_moon::ast::AstResult, Unparsable> {
    if let Some(offset) = bare_backtick::first_bare_backtick(source) {
        return Err(Unparsable::Backtick(offset));
    }
    depth::check_nesting(source).map_err(Unparsable::TooDeep)?;
    Ok(full_moon::parse_fallible(source, LuaVersion::lua54()))
}

fn extract(ctx: &mut FileContext<'_>) -> Vec<Function> {
    let parsed = match parse_guarded(ctx.source) {
        Ok(parsed) => parsed,
        Err(Unparsable::Backtick(offset)) => {
            rules::syntax::unexpected_backtick(ctx, offset);
            return Vec::new();
        }
        Err(Unparsable::TooDeep(too_deep)) => {
            rules::syntax::too_deep(ctx, too_deep);
            return Vec::new();
        }
    };
    if !parsed.errors().is_empty() {
        rules::syntax::parse_errors(ctx, parsed.errors());
        return Vec::new();
    }
    let ast = parsed.ast();
    let definitions = analyze::top_level(ast, ctx);
    rules::scope::nested_globals(ctx, ast);
    rules::duplicates::check(ctx, &definitions);
    definitions
        .iter()
        .filter_map(|def| check_definition(ctx, def))
        .collect()
}

/// Runs the per-function rules and builds the [`Function`] if it has a doc comment.
fn check_definition(ctx: &mut FileContext<'_>, def: &Definition<'_>) -> Option<Function> {
    rules::reserved::check(ctx, def);
    let block = rules::doc_comment::require_doc(ctx, def)?;
    let parsed = doc::parse(&block);
    rules::doc_comment::require_description(ctx, def, &block, &parsed.description);
    rules::params::check(ctx, def, &parsed);
    rules::returns::check(ctx, def, &parsed);
    rules::examples::check(ctx, def, &block);
    Some(to_function(ctx, def, &block, parsed))
}

fn to_function(
    ctx: &FileContext<'_>,
    def: &Definition<'_>,
    block: &DocBlock<'_>,
    parsed: doc::ParsedDoc<'_>,
) -> Function {
    let params = def
        .parameters()
        .into_iter()
        .filter_map(|(name, _)| {
            let documented = parsed.params.iter().find(|p| p.name == name)?;
            Some(Param {
                name: Cow::Owned(name),
                ty: Cow::Owned(documented.ty.clone()),
                optional: documented.optional,
                description: Cow::Owned(documented.description.clone()),
            })
        })
        .collect::<Vec<_>>();
    let returns = parsed
        .returns
        .into_iter()
        .map(|r| Return {
            ty: Cow::Owned(r.ty),
            name: Cow::Owned(r.name),
            description: Cow::Owned(r.description),
        })
        .collect::<Vec<_>>();
    let (line, _) = diagnostic::line_column(ctx.source, def.span.start);
    Function {
        name: Cow::Owned(def.name.clone()),
        doc: Cow::Owned(block.text()),
        description: Cow::Owned(parsed.description),
        params: Cow::Owned(params),
        returns: Cow::Owned(returns),
        tags: Cow::Owned(parsed.tags.into_iter().map(Cow::Owned).collect()),
        source: Cow::Owned(ctx.source[def.span.clone()].to_string()),
        file: Cow::Owned(ctx.file.to_string()),
        dir: Cow::Borrowed(""),
        line: u32::try_from(line).unwrap_or(u32::MAX),
        chunk: 0,
    }
}
