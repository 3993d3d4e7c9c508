//! The conventions of SPEC §2, one test per error code (bad fixtures) and per accepted
//! form (good fixtures), through the public loading API.

use std::path::Path;

use rlm_registry::conventions::{Code, check_file};
use rlm_registry::{LoadError, Registry};

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

/// (code, line, column) of every error, in report order.
fn errors(path: &str) -> Vec<(&'static str, usize, usize)> {
    load_error(path)
        .errors()
        .map(|d| (d.code.as_str(), d.line, d.column))
        .collect()
}

#[test]
fn e001_reports_every_syntax_error_with_position() {
    let found = errors("bad/E001_syntax.lua");
    assert!(found.len() >= 2, "{found:?}");
    assert!(
        found.iter().all(|(code, _, _)| *code == "E001"),
        "{found:?}"
    );
    assert_eq!(found[0], ("E001", 2, 3));
    assert!(
        found.iter().any(|&(_, line, _)| line == 4),
        "the second error, on line 4, is reported too: {found:?}"
    );
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
fn e002_needs_a_triple_dash_comment_directly_above() {
    assert_eq!(
        errors("bad/E002_missing_doc.lua"),
        [("E002", 2, 1), ("E002", 7, 1)]
    );
}

#[test]
fn e003_doc_without_description() {
    assert_eq!(errors("bad/E003_no_description.lua"), [("E003", 1, 1)]);
}

#[test]
fn e004_undocumented_parameter_and_param_naming_nothing() {
    let error = load_error("bad/E004_param_mismatch.lua");
    let found: Vec<_> = error
        .errors()
        .map(|d| (d.code.as_str(), d.line, d.column))
        .collect();
    assert_eq!(found, [("E004", 3, 11), ("E004", 5, 17)]);
    let messages: Vec<_> = error.errors().map(|d| d.message.as_str()).collect();
    assert!(
        messages[0].contains("`@param c` names no parameter"),
        "{messages:?}"
    );
    assert!(messages[1].contains("parameter `b`"), "{messages:?}");
}

#[test]
fn e005_returned_value_without_return_tag() {
    assert_eq!(errors("bad/E005_missing_return.lua"), [("E005", 5, 5)]);
}

#[test]
fn e006_method_on_global_table_and_nested_global() {
    assert_eq!(
        errors("bad/E006_inaccessible.lua"),
        [("E006", 2, 1), ("E006", 8, 12)]
    );
}

#[test]
fn e007_every_kind_of_top_level_side_effect() {
    let error = load_error("bad/E007_side_effect.lua");
    let found: Vec<_> = error.errors().map(|d| (d.code.as_str(), d.line)).collect();
    assert_eq!(found, [("E007", 1), ("E007", 2), ("E007", 3), ("E007", 10)]);
    assert!(error.errors().any(|d| d.message.contains("`counter`")));
    assert!(error.errors().any(|d| d.message.contains("`return`")));
}

#[test]
fn e008_builtin_and_standard_global_names() {
    let error = load_error("bad/E008_reserved.lua");
    let messages: Vec<_> = error
        .errors()
        .map(|d| (d.code.as_str(), d.message.clone()))
        .collect();
    assert_eq!(messages.len(), 2);
    assert!(messages[0].1.contains("`llm_query`") && messages[0].1.contains("built-in"));
    assert!(messages[1].1.contains("`pairs`") && messages[1].1.contains("standard global"));
}

#[test]
fn e009_same_name_twice_in_one_file_is_an_error_not_an_override() {
    let error = load_error("bad/E009_duplicate.lua");
    let found: Vec<_> = error
        .diagnostics()
        .iter()
        .map(|d| (d.code.as_str(), d.line, d.column))
        .collect();
    assert_eq!(found, [("E009", 6, 10)]);
    assert!(error.diagnostics()[0].message.contains("first on line 2"));
}

#[test]
fn e010_invalid_utf8_points_at_the_bad_byte() {
    assert_eq!(errors("bad/E010_not_utf8.lua"), [("E010", 1, 21)]);
}

#[test]
fn e010_missing_directory() {
    let error = Registry::from_paths([fixture("does-not-exist")]).unwrap_err();
    assert_eq!(error.diagnostics()[0].code, Code::Unreadable);
    assert!(error.diagnostics()[0].message.contains("does-not-exist"));
}

#[test]
fn e011_map_key_must_name_the_defined_function() {
    let wrong_name = Registry::from_map([("a", "--- B.\nfunction b() end")]).unwrap_err();
    assert_eq!(wrong_name.diagnostics()[0].code, Code::MapKeyMismatch);
    assert!(wrong_name.diagnostics()[0].message.contains("defines `b`"));

    let two = "--- A.\nfunction a() end\n--- C.\nfunction c() end";
    let err = Registry::from_map([("a", two)]).unwrap_err();
    assert_eq!(err.diagnostics()[0].code, Code::MapKeyMismatch);

    let none = Registry::from_map([("a", "local x = 1")]).unwrap_err();
    assert!(
        none.diagnostics()[0]
            .message
            .contains("defines no exposed function")
    );
}

#[test]
fn every_diagnostic_has_a_help_line() {
    for file in std::fs::read_dir(fixture("bad")).unwrap() {
        let path = file.unwrap().path();
        let error = Registry::from_paths([&path]).unwrap_err();
        for d in error.diagnostics() {
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
    // in tests/registry.rs).
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
fn rendering_is_rustc_style() {
    let rendered = Registry::from_paths(["tests/fixtures/bad/E004_param_mismatch.lua"])
        .unwrap_err()
        .render(false);
    let expected_head = "error[E004]: `@param c` names no parameter of `add`\n --> tests/fixtures/bad/E004_param_mismatch.lua:3:11\n";
    assert!(rendered.starts_with(expected_head), "{rendered}");
    assert!(
        rendered.contains("3 | ---@param c number Not a parameter\n  |           ^"),
        "{rendered}"
    );
    assert!(
        rendered.contains("= help: the parameters are: a, b"),
        "{rendered}"
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
