//! Editor support, checked with a real headless language server: `rlm meta` output plus
//! the crate's `lua/` must give no undefined globals, and a misuse of a built-in must
//! be caught through the meta file's annotations.
//!
//! The checker is `emmylua_check` (crates.io; it reads `.luarc.json` and `---@meta`
//! files as lua-language-server does, which cannot be installed from the registries
//! this project builds from). `.ci/run` installs it and sets `RLM_EMMYLUA_CHECK`; without
//! it the test says it skipped, or fails under `RLM_REQUIRE_TOOLS=1` (as in CI).
#![cfg(feature = "cli")]

use crate::support;

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// Copies `lua/` into a fresh workspace and writes the editor files there.
fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for entry in walkdir::WalkDir::new(root.join("lua")) {
        let entry = entry.unwrap();
        let target = dir.path().join(entry.path().strip_prefix(root).unwrap());
        if entry.file_type().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
    let out = support::cli::rlm_in(
        dir.path(),
        &[
            "meta",
            "--out",
            ".",
            "--no-baked",
            "--path",
            "lua/text",
            "--path",
            "lua/chunking",
            "--path",
            "lua/recursive",
        ],
    );
    assert!(out.status.success(), "{}", support::cli::stderr(&out));
    dir
}

/// `(file name, code)` of every diagnostic the checker reports.
fn diagnostics(checker: &str, dir: &Path) -> Vec<(String, String, String)> {
    let out = Command::new(checker)
        .args([".", "-f", "json"])
        .current_dir(dir)
        .output()
        .expect("the checker runs");
    let text = String::from_utf8_lossy(&out.stdout);
    let start = text.find('[').expect("JSON output");
    let files: Value = serde_json::from_str(&text[start..]).expect("JSON output");
    let mut found = Vec::new();
    for file in files.as_array().unwrap() {
        let name = file["file"].as_str().unwrap_or_default();
        let name = Path::new(name)
            .file_name()
            .unwrap()
            .to_string_lossy()
            .to_string();
        for d in file["diagnostics"].as_array().into_iter().flatten() {
            found.push((
                name.clone(),
                d["code"].as_str().unwrap_or_default().to_string(),
                d["message"].as_str().unwrap_or_default().to_string(),
            ));
        }
    }
    found
}

#[test]
fn the_meta_file_makes_every_sandbox_global_known_to_a_real_language_server() {
    let Some(checker) = support::external::emmylua_check() else {
        return;
    };
    let dir = workspace();
    let found = diagnostics(&checker, dir.path());
    let undefined: Vec<_> = found
        .iter()
        .filter(|(_, code, _)| code == "undefined-global")
        .collect();
    assert!(undefined.is_empty(), "{undefined:?}");

    // Misuses of built-ins are caught through their annotations; so is a typo.
    std::fs::write(
        dir.path().join("lua/text/misuse.lua"),
        "local function f()\n  return token_count(), llm_query('a', {}, 'b'), not_a_function()\nend\nreturn f\n",
    )
    .unwrap();
    let found = diagnostics(&checker, dir.path());
    let in_misuse: Vec<&str> = found
        .iter()
        .filter(|(file, _, _)| file == "misuse.lua")
        .map(|(_, code, _)| code.as_str())
        .collect();
    for expected in [
        "missing-parameter",
        "redundant-parameter",
        "undefined-global",
    ] {
        assert!(in_misuse.contains(&expected), "{expected}: {in_misuse:?}");
    }

    // Without the meta file, the built-ins the library uses are unknown: the file matters.
    std::fs::remove_dir_all(dir.path().join("rlm-meta")).unwrap();
    let found = diagnostics(&checker, dir.path());
    assert!(
        found
            .iter()
            .any(|(_, code, message)| code == "undefined-global" && message.contains("llm_query")),
        "{found:?}"
    );
}
