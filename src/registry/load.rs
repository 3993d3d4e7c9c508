//! Loading: files from directories or a map → checked functions → one registry, with
//! precedence (later wins) and the records the environment needs for load-order
//! semantics.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::Path;

use walkdir::WalkDir;

use super::{Chunk, LoadError, Override, Registry, prompt};
use crate::conventions::examples::is_test_file;
use crate::conventions::{Code, Diagnostic, Function, Severity, check_files};

/// One Lua source to load: which directory it came from, its name, its text.
pub(crate) struct Input {
    pub dir: String,
    pub file: String,
    pub source: String,
}

/// Reads every `.lua` file but test files (`*_test.lua`) under `paths`, in order: each directory recursively, in
/// sorted path order. A path may also name a single `.lua` file. Problems become E010.
pub(crate) fn read_paths<P: AsRef<Path>>(
    paths: impl IntoIterator<Item = P>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<Input> {
    let mut inputs = Vec::new();
    for path in paths {
        let root = path.as_ref();
        let dir = root.display().to_string();
        if let Err(error) = std::fs::metadata(root) {
            diagnostics.push(unreadable(&dir, &format!("cannot read `{dir}`: {error}")));
            continue;
        }
        let walk = WalkDir::new(root).follow_links(true).sort_by_file_name();
        for entry in walk {
            let entry = match entry {
                Ok(entry) => entry,
                Err(error) => {
                    let at = error
                        .path()
                        .map_or(dir.clone(), |p| p.display().to_string());
                    diagnostics.push(unreadable(&at, &format!("cannot read `{at}`: {error}")));
                    continue;
                }
            };
            let is_lua =
                entry.path().extension().is_some_and(|e| e == "lua") && !is_test_file(entry.path());
            if entry.file_type().is_file() && is_lua {
                let file = entry.path().display().to_string();
                if let Some(source) = read_utf8(entry.path(), &file, diagnostics) {
                    inputs.push(Input {
                        dir: dir.clone(),
                        file,
                        source,
                    });
                }
            }
        }
    }
    inputs
}

fn read_utf8(path: &Path, file: &str, diagnostics: &mut Vec<Diagnostic>) -> Option<String> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(error) => {
            diagnostics.push(unreadable(file, &format!("cannot read `{file}`: {error}")));
            return None;
        }
    };
    match String::from_utf8(bytes) {
        Ok(source) => Some(source),
        Err(error) => {
            let valid = error.utf8_error().valid_up_to();
            let prefix = String::from_utf8_lossy(&error.as_bytes()[..valid]).into_owned();
            let diagnostic = Diagnostic::at(
                Code::Unreadable,
                file,
                &prefix,
                valid..valid,
                format!("`{file}` is not valid UTF-8 (invalid byte at offset {valid})"),
            )
            .with_help("save the file as UTF-8");
            diagnostics.push(diagnostic);
            None
        }
    }
}

fn unreadable(file: &str, message: &str) -> Diagnostic {
    Diagnostic::whole_file(Code::Unreadable, file, message)
        .with_help("check that the path exists and is readable")
}

/// `from_map` entries as inputs, sorted by key so the result does not depend on map order.
pub(crate) fn map_inputs<K: AsRef<str>, V: AsRef<str>>(
    map: impl IntoIterator<Item = (K, V)>,
) -> Vec<(String, Input)> {
    let mut entries: Vec<(String, Input)> = map
        .into_iter()
        .map(|(key, source)| {
            let key = key.as_ref().to_string();
            let input = Input {
                dir: "<map>".to_string(),
                file: format!("<map:{key}>"),
                source: source.as_ref().to_string(),
            };
            (key, input)
        })
        .collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    entries
}

/// E011: a `from_map` definition must define exactly the function its key names.
pub(crate) fn check_map_key(
    key: &str,
    input: &Input,
    functions: &[Function],
) -> Option<Diagnostic> {
    let names: Vec<&str> = functions.iter().map(|f| f.name()).collect();
    if names == [key] {
        return None;
    }
    let found = if names.is_empty() {
        "defines no exposed function".to_string()
    } else {
        format!("defines `{}`", names.join("`, `"))
    };
    let diagnostic = Diagnostic::at(
        Code::MapKeyMismatch,
        &input.file,
        &input.source,
        0..0,
        format!(
            "map key `{key}` must name the single function its definition defines, but it {found}"
        ),
    )
    .with_help(format!(
        "use the key of the function, or define exactly one function `{key}`"
    ));
    Some(diagnostic)
}

/// Checks every input, then assembles the registry on top of `base`. `diagnostics` holds
/// problems found earlier (unreadable files); `check_extra` adds per-input checks (E011).
pub(crate) fn load(
    base: Option<&Registry>,
    inputs: Vec<Input>,
    mut diagnostics: Vec<Diagnostic>,
    check_extra: impl Fn(usize, &Input, &[Function]) -> Option<Diagnostic>,
) -> Result<Registry, LoadError> {
    let files: Vec<(&str, &str)> = inputs
        .iter()
        .map(|i| (i.file.as_str(), i.source.as_str()))
        .collect();
    let checked = check_files(&files);
    let mut chunks = Vec::with_capacity(inputs.len());
    for (index, (input, file_check)) in inputs.into_iter().zip(checked).enumerate() {
        diagnostics.extend(file_check.diagnostics);
        diagnostics.extend(check_extra(index, &input, &file_check.functions));
        let functions = file_check
            .functions
            .into_iter()
            .map(|mut f| {
                f.dir = Cow::Owned(input.dir.clone());
                f.chunk = u32::try_from(index).unwrap_or(u32::MAX);
                f
            })
            .collect();
        chunks.push((chunk_of(input), functions));
    }
    let registry = assemble(base, chunks);
    diagnostics.extend(registry.notes());
    if diagnostics.iter().any(|d| d.severity == Severity::Error) {
        return Err(LoadError::new(diagnostics, registry));
    }
    Ok(registry)
}

fn chunk_of(input: Input) -> Chunk {
    Chunk {
        file: Cow::Owned(input.file),
        dir: Cow::Owned(input.dir),
        source: Cow::Owned(input.source),
    }
}

/// Builds a registry: `base` (if any) first, then `new_chunks` in load order. A name
/// defined again later replaces the earlier definition, and the replacement is recorded.
pub(crate) fn assemble(
    base: Option<&Registry>,
    new_chunks: Vec<(Chunk, Vec<Function>)>,
) -> Registry {
    let mut chunks: Vec<Chunk> = base.map_or_else(Vec::new, |b| b.chunks.to_vec());
    let mut overrides: Vec<Override> = base.map_or_else(Vec::new, |b| b.overrides.to_vec());
    let mut winners: HashMap<String, Function> = base
        .map_or(&[][..], |b| &b.functions[..])
        .iter()
        .map(|f| (f.name().to_string(), f.clone()))
        .collect();
    let offset = u32::try_from(chunks.len()).unwrap_or(u32::MAX);
    for (chunk, functions) in new_chunks {
        chunks.push(chunk);
        for mut function in functions {
            function.chunk += offset;
            let previous = winners.get(function.name());
            // Two definitions in one file are an E009, not an override.
            if let Some(previous) = previous.filter(|p| p.chunk != function.chunk) {
                overrides.push(Override {
                    name: Cow::Owned(function.name().to_string()),
                    winner_file: function.file.clone(),
                    winner_line: function.line,
                    overridden_file: previous.file.clone(),
                    overridden_line: previous.line,
                });
            }
            winners.insert(function.name().to_string(), function);
        }
    }
    let mut functions: Vec<Function> = winners.into_values().collect();
    functions.sort_by(|a, b| a.name().cmp(b.name()));
    let prompt = prompt::render(&functions);
    let registry = Registry {
        functions: Cow::Owned(functions),
        chunks: Cow::Owned(chunks),
        overrides: Cow::Owned(overrides),
        prompt: Cow::Owned(prompt),
        search: super::IndexCell::new(None),
        tools: super::ToolCells::new(),
    };
    // Built while loading, so that the first search pays nothing.
    registry.index();
    registry
}
