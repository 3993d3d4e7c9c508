//! The function conventions through the public loading API: the bad fixtures against
//! their expected rendering, then the accepted forms (good fixtures) and the inputs no
//! fixture file can hold.
//!
//! Every `tests/fixtures/bad/E00x_*.lua` sits beside `E00x_*.stderr`, the whole report
//! its load renders: exactly what `rlm check --no-baked --path <file>` prints (see
//! `support/bad_fixtures.rs`). The comparison is of the whole text. To add a case, add
//! the `.lua` file and run
//!
//! ```text
//! RLM_BLESS=1 cargo test --test it -- conventions::
//! ```
//!
//! which writes (or rewrites) every `.stderr` file from the current rendering instead of
//! comparing; review the diff before committing it. E011 concerns `Registry::from_map`
//! keys: an `E011_*.lua` fixture names its key on its first line, `-- from_map key: a`.

use crate::support;

use std::path::Path;

use rlm_registry::conventions::{Code, Severity, check_file};
use rlm_registry::{LoadError, Registry};

use support::bad_fixtures;

fn fixture(path: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(path)
        .display()
        .to_string()
}

fn load_error(path: &str) -> LoadError {
    Registry::from_paths([fixture(path)]).expect_err("the fixture must fail to load")
}

#[test]
fn bad_fixtures_render_as_their_stderr_files() {
    let mismatches: Vec<String> = bad_fixtures::cases()
        .iter()
        .filter_map(|case| case.check(&case.rendered()).err())
        .collect();
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n\n"));
}

#[test]
fn every_bad_fixture_fails_with_the_code_in_its_name_only() {
    for case in bad_fixtures::cases() {
        let error = case.load_error();
        let codes: Vec<&str> = error.errors().map(|d| d.code.as_str()).collect();
        assert!(!codes.is_empty(), "{}", case.lua.display());
        assert!(
            codes.iter().all(|code| *code == case.code()),
            "{}: {codes:?}",
            case.lua.display()
        );
    }
}

#[test]
fn every_error_code_has_a_bad_fixture() {
    let names = bad_fixtures::file_names();
    for code in Code::ALL {
        if code.severity() != Severity::Error {
            continue;
        }
        let prefix = format!("{code}_");
        assert!(
            names
                .iter()
                .any(|n| n.starts_with(&prefix) && n.ends_with(".lua")),
            "no {}/{prefix}*.lua",
            bad_fixtures::DIR
        );
    }
}

#[test]
fn every_bad_fixture_has_a_stderr_file_and_every_stderr_file_a_fixture() {
    if bad_fixtures::blessing() {
        return;
    }
    let names = bad_fixtures::file_names();
    for name in &names {
        let twin = match name.rsplit_once('.') {
            Some((stem, "lua")) => format!("{stem}.stderr"),
            Some((stem, "stderr")) => format!("{stem}.lua"),
            _ => panic!(
                "{} holds only .lua and .stderr files: {name}",
                bad_fixtures::DIR
            ),
        };
        assert!(
            bad_fixtures::path(&twin).exists(),
            "{name} has no {twin} (RLM_BLESS=1 writes the .stderr files)"
        );
    }
}

#[test]
fn e001_deep_nesting_is_a_diagnostic_not_a_crash() {
    let deep = format!("x = {}1{}", "(".repeat(100_000), ")".repeat(100_000));
    let check = check_file("deep.lua", &deep);
    assert_eq!(check.diagnostics.len(), 1);
    assert_eq!(check.diagnostics[0].code, Code::Syntax);
    assert!(
        check.diagnostics[0].message.contains("nested"),
        "{}",
        check.diagnostics[0].message
    );
}

#[test]
fn nesting_just_under_the_limit_parses_without_overflowing() {
    // The worst constructs full_moon recurses on, each just under the nesting limit,
    // checked on the test's own small thread stack: the parser runs on its own stack.
    let n = 990;
    let cases = [
        format!("local x = {}1{}", "(".repeat(n), ")".repeat(n)),
        format!("local x = {}1", "~".repeat(n)),
        format!("local x = {}1", "not ".repeat(n)),
        format!("local x = 1{}", " .. 1".repeat(n)),
        format!("local x = {}1{}", "{".repeat(n), "}".repeat(n)),
        format!("local x = {}1{}", "a[".repeat(n), "]".repeat(n)),
        format!(
            "local function f() {}{} end",
            "do ".repeat(n),
            "end ".repeat(n)
        ),
        format!(
            "local function f() {}{} end",
            "if x then ".repeat(n),
            "end ".repeat(n)
        ),
    ];
    for case in cases {
        let check = check_file("deep.lua", &case);
        assert!(
            check.diagnostics.is_empty(),
            "{:?}: {:?}",
            &case[..24],
            check.diagnostics
        );
    }
}

#[test]
fn e001_bare_backtick_is_a_diagnostic_not_a_panic() {
    // full_moon 3.0 panics on this input (upstream #359); found by the fuzz target.
    let check = check_file("tick.lua", "J`");
    assert_eq!(check.diagnostics.len(), 1);
    assert_eq!(
        (check.diagnostics[0].code, check.diagnostics[0].column),
        (Code::Syntax, 2)
    );
}

#[test]
fn e010_invalid_utf8_points_at_the_bad_byte() {
    // The rendering shows no snippet of a file that is not text, so the position is
    // checked here rather than in the fixture's `.stderr`.
    let found: Vec<_> = load_error("bad/E010_not_utf8.lua")
        .errors()
        .map(|d| (d.code.as_str(), d.line, d.column))
        .collect();
    assert_eq!(found, [("E010", 1, 21)]);
}

#[test]
fn e010_missing_directory() {
    let error = Registry::from_paths([fixture("does-not-exist")]).unwrap_err();
    assert_eq!(error.diagnostics()[0].code, Code::Unreadable);
    assert!(error.diagnostics()[0].message.contains("does-not-exist"));
}

#[test]
fn every_diagnostic_has_a_help_line() {
    for case in bad_fixtures::cases() {
        for d in case.load_error().diagnostics() {
            assert!(d.help.is_some(), "{} has no help", d);
        }
    }
}

#[test]
fn violations_in_several_files_are_reported_together() {
    let error = load_error("multi");
    let found: Vec<_> = error
        .errors()
        .map(|d| {
            (
                Path::new(&d.file)
                    .file_name()
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .to_string(),
                d.code.as_str(),
                d.line,
            )
        })
        .collect();
    assert_eq!(
        found,
        [
            ("one.lua".to_string(), "E002", 1),
            ("one.lua".to_string(), "E004", 5),
            ("two.lua".to_string(), "E005", 3),
            ("two.lua".to_string(), "E007", 5),
        ]
    );
    let rendered = error.render(false);
    assert!(
        rendered.contains("4 convention violations in 2 files"),
        "{rendered}"
    );
}

#[test]
fn several_violations_in_one_file_are_reported_together() {
    let source = "function a(x) return x end\nprint(1)\n--- B.\nfunction b(y) end\n";
    let codes: Vec<_> = check_file("f.lua", source)
        .diagnostics
        .iter()
        .map(|d| d.code.as_str())
        .collect();
    assert_eq!(codes, ["E002", "E007", "E004"]);
}

#[test]
fn luals_forms_optional_and_varargs_are_accepted() {
    let registry = Registry::from_paths([fixture("good/luals.lua")]).unwrap();
    let join = registry.get("join_all").unwrap();
    assert_eq!(join.signature(), "join_all(sep, ...)");
    assert_eq!(join.params()[1].ty(), "string");
    let pad = registry
        .get("pad_left")
        .expect("`name = function` form is exposed");
    let optional: Vec<_> = pad
        .params()
        .iter()
        .map(|p| (p.name(), p.optional()))
        .collect();
    assert_eq!(optional, [("text", false), ("width", true), ("fill", true)]);
    assert_eq!(pad.returns()[0].ty(), "string");
    assert!(registry.get("noop").unwrap().returns().is_empty());
}

#[test]
fn luals_return_names_are_kept_apart_from_the_description() {
    let registry = Registry::from_paths([fixture("good/luals.lua")]).unwrap();
    let joined = &registry.get("join_all").unwrap().returns()[0];
    assert_eq!(
        (joined.ty(), joined.name(), joined.description()),
        ("string", Some("joined"), "The joined text")
    );
    // The baked library carries the names too (it is compared whole with `from_paths`
    // in tests/it/registry.rs).
    let baked = Registry::baked();
    if let Some(chunker) = baked.get("chunk_by_lines") {
        let chunks = &chunker.returns()[0];
        assert_eq!(
            (chunks.ty(), chunks.name(), chunks.description()),
            ("string[]", Some("chunks"), "The chunks, in order")
        );
    }
}

#[test]
fn ldoc_forms_are_accepted() {
    let registry = Registry::from_paths([fixture("good/ldoc.lua")]).unwrap();
    let repeat = registry.get("repeat_word").unwrap();
    assert_eq!(
        repeat.description(),
        "Repeats a word.\nLDoc style: the summary on a `---` line, tags on `--` lines."
    );
    assert_eq!(
        (repeat.params()[1].ty(), repeat.params()[1].optional()),
        ("integer", true)
    );
    assert_eq!(repeat.returns()[0].ty(), "string");
    assert_eq!(
        repeat.returns()[0].name(),
        None,
        "LDoc returns have no name"
    );
    let reverse = registry.get("reverse_text").unwrap();
    assert_eq!(reverse.params()[0].description(), "the string");
    assert_eq!(reverse.returns()[0].description(), "the reversed string");
    assert_eq!(reverse.returns()[0].name(), None);
}

#[test]
fn local_tables_methods_and_private_helpers_are_not_exposed() {
    let registry = Registry::from_paths([fixture("good/local_table.lua")]).unwrap();
    let names: Vec<_> = registry.iter_functions().map(|(name, _)| name).collect();
    assert_eq!(names, ["word_stats"]);
}

#[test]
fn nested_directories_are_searched_recursively_in_sorted_order() {
    let registry = Registry::from_paths([fixture("good")]).unwrap();
    let files: Vec<_> = registry
        .chunks()
        .iter()
        .map(|c| c.file().rsplit("good/").next().unwrap().to_string())
        .collect();
    assert_eq!(
        files,
        [
            "ldoc.lua",
            "local_table.lua",
            "luals.lua",
            "nested/deeper/inner.lua"
        ]
    );
    assert_eq!(
        registry.get("from_nested_dir").unwrap().dir(),
        fixture("good")
    );
}

#[test]
fn extracted_function_keeps_doc_source_file_and_line() {
    let registry = Registry::from_paths([fixture("good/luals.lua")]).unwrap();
    let join = registry.get("join_all").unwrap();
    assert!(
        join.doc()
            .starts_with("--- Joins strings with a separator.\n---@param sep string")
    );
    assert!(join.source().starts_with("function join_all(sep, ...)"));
    assert!(join.source().ends_with("end"));
    assert_eq!(join.line(), 7);
    assert!(join.file().ends_with("good/luals.lua"));
}

#[test]
fn relative_paths_stay_relative_in_diagnostics() {
    // Integration tests run in the crate root.
    let error = Registry::from_paths(["tests/fixtures/bad/E003_no_description.lua"]).unwrap_err();
    assert_eq!(
        error.diagnostics()[0].file,
        "tests/fixtures/bad/E003_no_description.lua"
    );
}

#[test]
fn hostile_inputs_never_panic() {
    let inputs = [
        "",
        "\u{feff}",
        "#!/usr/bin/lua\n--- X.\nfunction x() end",
        "--[[ unterminated",
        "\"unterminated",
        "function",
        "--- doc\n",
        "---\nfunction f() end",
        "---@param\nfunction f(a) end",
        "---@param ?\nfunction f(a) end",
        "--- D.\n---@return\nfunction f() return 1 end",
        "--- D.\n---@param a table<string,\nfunction f(a) end",
        "local a <const> = 1\nlocal b <close> = nil",
        "goto x\n::x::",
        "x = \"\\u{110000}\"",
        "🙂🙂🙂 = 1",
        "J`",
        "--- Doc.\nfunction f() return `x` end",
    ];
    for input in inputs {
        let _ = check_file("h.lua", input);
        let _ = Registry::from_map([("f", input)]);
    }
}
