//! `rlm check`: validate directories, report rustc-style or as JSON.

use std::io::IsTerminal;

use rlm_registry::{Diagnostic, Function};
use serde_json::json;

use super::{EXIT_VIOLATIONS, Format, Output, SourceArgs};

/// What a check found: the functions it loaded and every diagnostic.
struct Outcome {
    functions: Vec<Function>,
    diagnostics: Vec<Diagnostic>,
    rendered: String,
    ok: bool,
}

pub(super) fn run(source: &SourceArgs, format: Format) -> Output {
    if let Some(missing) = source.missing_paths_error() {
        return missing;
    }
    let color = format == Format::Human && std::io::stdout().is_terminal();
    let outcome = check(source, color);
    let stdout = match format {
        Format::Human => outcome.rendered.clone(),
        Format::Json => format!("{}\n", to_json(&outcome)),
    };
    let code = if outcome.ok { 0 } else { EXIT_VIOLATIONS };
    Output {
        stdout: stdout.into(),
        stderr: String::new(),
        code,
    }
}

fn check(source: &SourceArgs, color: bool) -> Outcome {
    let base = source.base();
    // With paths, report what they define; with none, the base itself is what is checked.
    let first_checked_chunk = if source.paths.is_empty() {
        0
    } else {
        base.chunks().len()
    };
    let checked = |functions: &[Function]| -> Vec<Function> {
        functions
            .iter()
            .filter(|f| f.chunk() >= first_checked_chunk)
            .cloned()
            .collect()
    };
    match source.load() {
        Ok(registry) => {
            let notes: Vec<Diagnostic> = registry
                .notes()
                .into_iter()
                .skip(base.overrides().len())
                .collect();
            let mut rendered =
                rlm_registry::conventions::render(&notes, |f| registry.source_of(f), color);
            let functions = checked(registry.functions());
            rendered.push_str(&format!(
                "ok: {} function{} checked, no violations\n",
                functions.len(),
                if functions.len() == 1 { "" } else { "s" }
            ));
            Outcome {
                functions,
                diagnostics: notes,
                rendered,
                ok: true,
            }
        }
        Err(error) => Outcome {
            functions: checked(error.functions()),
            diagnostics: error.diagnostics().to_vec(),
            rendered: format!("{}\n", error.render(color)),
            ok: false,
        },
    }
}

/// What `rlm check --format json` prints: the object `docs/conventions.md` documents.
fn to_json(outcome: &Outcome) -> serde_json::Value {
    let functions: Vec<_> = outcome
        .functions
        .iter()
        .map(|f| json!({"name": f.name(), "file": f.file(), "line": f.line()}))
        .collect();
    let diagnostics: Vec<_> = outcome
        .diagnostics
        .iter()
        .map(|d| {
            json!({
                "code": d.code.as_str(),
                "severity": d.severity.as_str(),
                "message": d.message,
                "file": d.file,
                "line": d.line,
                "column": d.column,
            })
        })
        .collect();
    json!({"ok": outcome.ok, "functions": functions, "diagnostics": diagnostics})
}
