//! `rlm meta`: editor support. A LuaLS `---@meta` file declares what the sandbox defines
//! that no file in the workspace does (the built-ins, the enabled providers' functions,
//! the baked registry's functions, `context`), and a `.luarc.json` points the language
//! server (VS Code's Lua extension, Neovim's lua_ls, EmmyLua) at it.

use std::path::{Path, PathBuf};

use rlm_registry::catalog::Catalog;
use rlm_registry::conventions::builtins::BUILTIN_VALUES;
use serde_json::json;

use super::{EXIT_USAGE, Output};

/// The meta file's directory, relative to the output directory.
const META_DIR: &str = "rlm-meta";
const META_FILE: &str = "rlm.lua";

/// Writes `DIR/rlm-meta/rlm.lua` and `DIR/.luarc.json`.
pub(super) fn write(catalog: &Catalog, paths: &[PathBuf], out: &Path) -> Output {
    let meta = meta_file(catalog, paths);
    let luarc = luarc(paths, out);
    let written = std::fs::create_dir_all(out.join(META_DIR))
        .and_then(|()| std::fs::write(out.join(META_DIR).join(META_FILE), meta))
        .and_then(|()| std::fs::write(out.join(".luarc.json"), luarc));
    match written {
        Ok(()) => Output::success(format!(
            "wrote {} and {}\n",
            out.join(META_DIR).join(META_FILE).display(),
            out.join(".luarc.json").display()
        )),
        Err(error) => Output::failure(
            EXIT_USAGE,
            format!("error: cannot write to {}: {error}\n", out.display()),
        ),
    }
}

/// The `---@meta` file: one declaration per function the sandbox defines that the
/// workspace's own files do not (those in `paths` are read from their files).
fn meta_file(catalog: &Catalog, paths: &[PathBuf]) -> String {
    let mut out = String::from(
        "---@meta rlm\n-- Written by `rlm meta`: what the rlm sandbox defines. Do not edit; run `rlm meta` again instead.\n\n--- The context the agent works on (nil when there is none).\n---@type string?\ncontext = nil\n\n--- Rust primitives behind the library's text and chunking functions (internal: call those instead).\n---@type table<string, function>\n_text_primitives = {}\n",
    );
    let in_workspace = |dir: &str| paths.iter().any(|p| Path::new(dir) == p.as_path());
    let mut tables: Vec<&str> = Vec::new();
    for callable in catalog.functions() {
        // A built-in table (`re`) is declared once, before its first member, with the values
        // it holds besides functions (`json.null`) as fields.
        if let Some((table, _)) = callable.function.name().split_once('.')
            && !tables.contains(&table)
        {
            tables.push(table);
            out.push_str(&format!("\n---@class rlm.{table}\n"));
            for value in BUILTIN_VALUES {
                let (holder, field) = value.table_and_field();
                if holder == table {
                    out.push_str(&format!(
                        "---@field {field} {} {}\n",
                        value.lua_type, value.doc
                    ));
                }
            }
            out.push_str(&format!("{table} = {{}}\n"));
        }
        let function = callable.function;
        if !callable.is_host() && in_workspace(function.dir()) {
            continue;
        }
        out.push('\n');
        out.push_str(&function.declaration());
        out.push('\n');
    }
    out
}

/// `.luarc.json`: Lua 5.4, the libraries the sandbox removes disabled, the meta folder as
/// a library, and registry functions allowed to be lower-case globals. Registry
/// directories inside `out` are the workspace, checked as they are edited; those outside
/// it become libraries, so that their functions are known (libraries are not checked).
fn luarc(paths: &[PathBuf], out: &Path) -> String {
    let mut library = vec![META_DIR.to_string()];
    library.extend(
        paths
            .iter()
            .filter(|p| !is_inside(p, out))
            .map(|p| absolute(p).display().to_string()),
    );
    let config = json!({
        "$schema": "https://raw.githubusercontent.com/LuaLS/vscode-lua/master/setting/schema.json",
        "runtime.version": "Lua 5.4",
        "runtime.builtin": {
            "io": "disable",
            "debug": "disable",
            "package": "disable",
        },
        "workspace.library": library,
        "workspace.checkThirdParty": false,
        "diagnostics.disable": ["lowercase-global"],
    });
    let mut text = serde_json::to_string_pretty(&config).unwrap_or_else(|_| config.to_string());
    text.push('\n');
    text
}

fn absolute(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

fn is_inside(path: &Path, dir: &Path) -> bool {
    absolute(path).starts_with(absolute(dir))
}
