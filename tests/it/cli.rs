//! The `rlm` command line: output formats and exit codes.
#![cfg(feature = "cli")]

use crate::support;

use std::process::Output;

use serde_json::Value;
use support::cli::{fed, llm_args, rlm, rlm_command, stderr, stdout};

fn json(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).expect("stdout is JSON")
}

fn keys(value: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> = value
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort();
    keys
}

#[test]
fn check_passes_on_good_directories_with_exit_0() {
    let out = rlm(&["check", "--no-baked", "--path", "tests/fixtures/good"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("ok: 7 functions checked"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn check_json_is_exactly_the_documented_object() {
    let out = rlm(&[
        "check",
        "--no-baked",
        "--path",
        "tests/fixtures/bad/E004_param_mismatch.lua",
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let report = json(&out);
    assert_eq!(keys(&report), ["diagnostics", "functions", "ok"]);
    assert_eq!(report["ok"], false);
    let function = &report["functions"][0];
    assert_eq!(keys(function), ["file", "line", "name"]);
    assert_eq!(function["name"], "add");
    assert_eq!(
        function["file"],
        "tests/fixtures/bad/E004_param_mismatch.lua"
    );
    assert_eq!(function["line"], 5);
    let diagnostic = &report["diagnostics"][0];
    assert_eq!(
        keys(diagnostic),
        ["code", "column", "file", "line", "message", "severity"]
    );
    assert_eq!(diagnostic["code"], "E004");
    assert_eq!(diagnostic["severity"], "error");
    assert_eq!(
        diagnostic["file"],
        "tests/fixtures/bad/E004_param_mismatch.lua"
    );
    assert_eq!(
        (diagnostic["line"].as_u64(), diagnostic["column"].as_u64()),
        (Some(3), Some(11))
    );
}

#[test]
fn check_reports_overrides_as_notes_and_still_passes() {
    let out = rlm(&[
        "check",
        "--no-baked",
        "--path",
        "tests/fixtures/layers/base",
        "--path",
        "tests/fixtures/layers/override",
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let report = json(&out);
    assert_eq!(report["ok"], true);
    assert_eq!(report["diagnostics"][0]["code"], "N001");
    assert_eq!(report["diagnostics"][0]["severity"], "note");
    assert_eq!(report["functions"].as_array().unwrap().len(), 3);
}

#[test]
fn check_human_output_is_rustc_style() {
    let out = rlm(&["check", "--no-baked", "--path", "tests/fixtures/multi"]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(
        text.contains("error[E002]: exposed function `no_doc_one`"),
        "{text}"
    );
    assert!(
        text.contains("--> tests/fixtures/multi/one.lua:1:1"),
        "{text}"
    );
    assert!(
        text.contains("--> tests/fixtures/multi/two.lua:5:1"),
        "{text}"
    );
    assert!(text.contains("= help:"), "{text}");
    assert!(text.contains("^"), "{text}");
    assert!(
        text.contains("4 convention violations in 2 files"),
        "{text}"
    );
}

#[test]
fn check_prints_each_bad_fixture_exactly_as_its_stderr_file() {
    // The `.stderr` files are written by tests/it/conventions.rs (RLM_BLESS=1); `rlm check`
    // must print the same text, so they show what a user sees.
    for case in support::bad_fixtures::cases() {
        if case.map_key.is_some() {
            continue; // loaded with `Registry::from_map`, which the CLI does not use
        }
        let lua = case.lua.to_str().unwrap();
        let out = rlm(&["check", "--no-baked", "--path", lua]);
        assert_eq!(out.status.code(), Some(1), "{lua}");
        let expected = std::fs::read_to_string(&case.stderr).unwrap();
        assert_eq!(stdout(&out), expected, "{lua}");
    }
}

#[test]
fn check_of_an_unreadable_path_exits_2() {
    let out = rlm(&["check", "--path", "no/such/dir"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("no/such/dir"));
}

#[test]
fn usage_errors_exit_2() {
    assert_eq!(rlm(&["check", "--format", "yaml"]).status.code(), Some(2));
    assert_eq!(rlm(&["frobnicate"]).status.code(), Some(2));
}

#[test]
fn check_of_the_baked_registry_passes() {
    let out = rlm(&["check"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
}

#[test]
fn list_json_describes_each_function() {
    let out = rlm(&["list", "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let list = json(&out);
    let grep = list
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "grep")
        .expect("grep is baked");
    assert_eq!(grep["signature"], "grep(text, pattern, context?, plain?)");
    assert_eq!(grep["params"][0]["name"], "text");
    assert_eq!(grep["params"][0]["type"], "string|table");
    assert_eq!(grep["params"][2]["optional"], true);
    assert_eq!(grep["returns"][0]["type"], "table[]");
    assert_eq!(grep["returns"][0]["name"], "matches");
    assert_eq!(
        grep["returns"][0]["description"],
        "The matching lines, in order"
    );
}

#[test]
fn list_layers_paths_on_the_baked_registry_and_no_baked_leaves_it_out() {
    let layered = stdout(&rlm(&["list", "--path", "tests/fixtures/layers/base"]));
    assert!(
        layered.contains("greet(name)") && layered.contains("grep("),
        "{layered}"
    );
    let alone = stdout(&rlm(&[
        "list",
        "--no-baked",
        "--path",
        "tests/fixtures/layers/base",
    ]));
    assert!(
        alone.contains("greet(name)") && !alone.contains("grep("),
        "{alone}"
    );
    assert_eq!(stdout(&rlm(&["list", "--no-baked"])), "");
}

#[test]
fn show_prints_doc_and_source_of_the_winner() {
    let out = rlm(&[
        "show",
        "greet",
        "--no-baked",
        "--path",
        "tests/fixtures/layers/base",
        "--path",
        "tests/fixtures/layers/override",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    assert!(
        text.contains("tests/fixtures/layers/override/greeting.lua:4"),
        "{text}"
    );
    assert!(text.contains("--- Greets someone, loudly"), "{text}");
    assert!(
        text.contains("return \"HELLO \" .. string.upper(name)"),
        "{text}"
    );
}

#[test]
fn show_of_an_unknown_name_exits_1_with_a_suggestion() {
    let out = rlm(&["show", "grep_txt"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("did you mean `grep_text`?"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn prompt_prints_the_baked_listing_exactly_in_each_mode() {
    let baked = rlm_registry::Registry::baked();
    for (args, expected) in [
        (&["prompt"][..], baked.compact_prompt()),
        (&["prompt", "--compact"], baked.compact_prompt()),
        (
            &["prompt", "--prompt-mode", "compact"],
            baked.compact_prompt(),
        ),
        (
            &["prompt", "--prompt-mode", "full"],
            baked.system_prompt().to_string(),
        ),
    ] {
        let out = rlm(args);
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        assert_eq!(stdout(&out), expected, "{args:?}");
    }
    let out = rlm(&["prompt", "--compact", "--prompt-mode", "full"]);
    assert_eq!(out.status.code(), Some(2), "the two contradict");
}

#[test]
fn prompt_compact_prints_signatures_summaries_and_the_way_to_look_up() {
    let out = rlm(&["prompt", "--no-baked", "--path", "tests/fixtures/good"]);
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    assert!(text.starts_with("## Registry functions\n"), "{text}");
    assert!(text.contains("`fn_search(\"what you need\")`"), "{text}");
    assert!(text.contains("`help(\"name\")`"), "{text}");
    let listed: Vec<&str> = text.lines().filter(|l| l.contains("  -- ")).collect();
    assert_eq!(listed.len(), 7, "{text}");
    assert!(
        listed.contains(&"reverse_text(s)  -- Reverses a string."),
        "{text}"
    );
    assert!(
        listed.contains(&"pad_left(text, width?, fill?)  -- Pads text on the left to a width.")
    );
    // Only summaries: none of the documentation the full prompt carries.
    assert!(!text.contains("@param"), "{text}");
    let full = stdout(&rlm(&[
        "prompt",
        "--prompt-mode",
        "full",
        "--no-baked",
        "--path",
        "tests/fixtures/good",
    ]));
    assert!(
        full.contains("---@param width? integer The width"),
        "{full}"
    );
    assert!(text.len() < full.len());

    // Nothing to list, nothing printed, in either mode.
    for mode in ["compact", "full"] {
        let out = rlm(&["prompt", "--prompt-mode", mode, "--no-baked"]);
        assert_eq!((out.status.code(), stdout(&out)), (Some(0), String::new()));
    }
}

/// `rlm prompt --tokens`: a Markdown table of the whole system prompt's parts, whose
/// figures are the library's own counts.
#[test]
fn prompt_tokens_prints_the_size_of_each_part() {
    use rlm_registry::tokens::count;
    let out = rlm(&["prompt", "--tokens"]);
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    assert!(
        text.contains("compact listing, 48 registry functions"),
        "{text}"
    );
    let row = |name: &str| -> u64 {
        let line = text
            .lines()
            .find(|line| line.starts_with(&format!("| {name} |")))
            .unwrap_or_else(|| panic!("no row {name}: {text}"));
        line.split('|')
            .nth(2)
            .unwrap()
            .trim()
            .trim_matches('*')
            .replace(',', "")
            .parse()
            .unwrap()
    };
    for part in [
        "rules",
        "context",
        "role",
        "built-in functions",
        "registry functions",
    ] {
        assert!(row(part) > 0, "{part}");
    }
    let listing = count(rlm_registry::Registry::baked().compact_prompt().trim_end());
    assert_eq!(row("registry functions") as usize, listing);
    assert!(row("**whole**") <= 3_000, "{text}");
    let full = stdout(&rlm(&["prompt", "--tokens", "--prompt-mode", "full"]));
    assert!(full.contains("full listing"), "{full}");
    let without = stdout(&rlm(&["prompt", "--tokens", "--no-baked"]));
    assert!(!without.contains("| registry functions |"), "{without}");
}

#[test]
fn commands_on_a_bad_path_print_diagnostics_and_exit_1() {
    let out = rlm(&["list", "--path", "tests/fixtures/bad/E002_missing_doc.lua"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("error[E002]"));
}

#[test]
fn exec_prints_captured_output_with_the_context() {
    let out = rlm(&[
        "exec",
        "print(line_count(context))",
        "--context",
        "tests/fixtures/layers/base/greeting.lua",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "27\n");
}

#[test]
fn exec_lua_error_goes_to_stderr_with_exit_1() {
    let out = rlm(&["exec", "print('partial')\nerror('boom')"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stdout(&out), "partial\n");
    assert!(stderr(&out).contains("input:2: boom"), "{}", stderr(&out));
}

#[test]
fn exec_limit_hit_exits_1_with_the_limit_named() {
    let out = rlm(&["exec", "while true do end", "--time-limit", "0.2"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("time limit exceeded"),
        "{}",
        stderr(&out)
    );
    let out = rlm(&[
        "exec",
        "local s = 'x' while true do s = s .. s end",
        "--memory-limit",
        "32",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("memory limit exceeded"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn run_reads_a_file_or_standard_input() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("s.lua");
    std::fs::write(&script, "print(word_count('a b c'))").unwrap();
    let out = rlm(&["run", script.to_str().unwrap()]);
    assert_eq!((out.status.code(), stdout(&out).as_str()), (Some(0), "3\n"));

    let mut run_stdin = rlm_command();
    run_stdin.args(["run", "-"]);
    let out = fed(run_stdin, b"print(head('a\\nb\\nc', 2))");
    assert_eq!(stdout(&out), "a\nb\n");
}

#[test]
fn run_of_a_missing_file_or_context_exits_2() {
    assert_eq!(rlm(&["run", "no/such.lua"]).status.code(), Some(2));
    assert_eq!(
        rlm(&["exec", "print(1)", "--context", "no/such.txt"])
            .status
            .code(),
        Some(2)
    );
    assert_eq!(
        rlm(&["exec", "print(1)", "--time-limit", "0"])
            .status
            .code(),
        Some(2)
    );
}

#[test]
fn exec_llm_query_uses_the_base_url_and_model_flags() {
    let server = support::openai_server::OpenAiServer::always(
        support::openai_server::Behavior::reply("from the server"),
    );
    let out = rlm_command()
        .args(["exec", "print(llm_query('hi'))"])
        .args(llm_args(&server.base_url(), "tiny"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "from the server\n");
    assert_eq!(server.requests()[0].json().unwrap()["model"], "tiny");
}

#[test]
fn ask_user_without_a_terminal_fails_clearly_and_notify_goes_to_stderr() {
    // `output()` gives the child no terminal: its standard input is the null device.
    let out = rlm(&["exec", "notify_user('hello') ask_user('name?')"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("[rlm] hello"), "{err}");
    assert!(err.contains("no terminal to ask on"), "{err}");
}

#[test]
fn providers_lists_every_provider_with_its_state_and_scopes() {
    let out = rlm(&["providers", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let list = json(&out);
    let find = |name: &str| {
        list.as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("{name} missing"))
            .clone()
    };
    assert_eq!(find("core")["enabled"], true);
    assert_eq!(find("user")["functions"][0]["scope"], "user");
    assert_eq!(find("agent")["functions"][0]["name"], "rlm_query");
    for opt_in in ["store", "files", "shell"] {
        assert_eq!(find(opt_in)["enabled"], false, "{opt_in}");
    }
    let text = stdout(&rlm(&["providers"]));
    assert!(text.contains("user (enabled)"), "{text}");
    assert!(text.contains("    ask_user  [user]"), "{text}");
}

#[test]
fn meta_declares_json_null_as_a_field_of_the_json_table() {
    let dir = tempfile::tempdir().unwrap();
    let out = rlm(&["meta", "--out", dir.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let meta = std::fs::read_to_string(dir.path().join("rlm-meta/rlm.lua")).unwrap();
    assert!(
        meta.contains("---@class rlm.json\n---@field null userdata The JSON null"),
        "{meta}"
    );
    assert!(meta.contains("function csv.parse(text, opts) end"));
}

#[test]
fn list_all_and_show_include_the_builtins() {
    let all = stdout(&rlm(&["list", "--all", "--no-baked"]));
    assert!(all.contains("llm_query(prompt, opts?)"), "{all}");
    assert!(all.contains("[provider:user]"), "{all}");
    let listed = json(&rlm(&["list", "--all", "--json", "--no-baked"]));
    let ask = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "ask_user")
        .unwrap();
    assert_eq!(ask["id"], "builtin:ask_user");
    assert_eq!(ask["scope"], "user");
    let shown = rlm(&["show", "builtin:token_count"]);
    assert!(shown.status.success());
    assert!(stdout(&shown).contains("function token_count(text) end"));
    let tools = json(&rlm(&["tools", "--all", "--no-baked"]));
    assert!(
        tools
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["function"]["name"] == "token_count")
    );
}

#[test]
fn search_finds_builtins() {
    let out = json(&rlm(&["search", "ask the human user a question", "--json"]));
    assert_eq!(out["results"][0]["id"], "builtin:ask_user", "{out}");
}

#[test]
fn meta_writes_a_luals_definition_file_and_luarc() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().to_str().unwrap();
    let out = rlm(&["meta", "--out", out_dir, "--path", "examples/lua"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let meta = std::fs::read_to_string(dir.path().join("rlm-meta/rlm.lua")).unwrap();
    assert!(meta.starts_with("---@meta"));
    assert!(meta.contains("---@type string?\ncontext = nil"));
    // Built-ins and the baked registry are declared; files of --path dirs are not
    // (the editor reads them as library files).
    assert!(meta.contains("function llm_query(prompt, opts) end"));
    assert!(meta.contains("function ask_user(question) end"));
    assert!(meta.contains("function word_count("));
    let luarc: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join(".luarc.json")).unwrap())
            .unwrap();
    assert_eq!(luarc["runtime.version"], "Lua 5.4");
    let library: Vec<&str> = luarc["workspace.library"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    // examples/lua lies outside the output directory: a library, so its functions are known.
    assert_eq!(library[0], "rlm-meta");
    assert!(library[1].ends_with("examples/lua"), "{library:?}");
    // The `re` built-in table is declared, then its members.
    let table = meta.find("re = {}").expect("re declared");
    assert!(table < meta.find("function re.find(").expect("re.find declared"));
    // Every declaration in the meta file passes the conventions (it is valid LuaLS),
    // except the file-level rules: E006 (members of the global `re`), E007, E008.
    let check = rlm_registry::conventions::check_file("rlm.lua", &meta);
    let errors: Vec<_> = check
        .diagnostics
        .iter()
        .filter(|d| !["E006", "E007", "E008"].contains(&d.code.as_str()))
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
}

#[test]
fn meta_into_an_unwritable_place_is_a_usage_error() {
    let file = tempfile::NamedTempFile::new().unwrap();
    let out = rlm(&["meta", "--out", file.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("cannot write"), "{}", stderr(&out));
}

#[test]
fn run_accepts_source_that_is_not_utf8_and_writes_the_bytes_printed() {
    let dir = std::env::temp_dir().join(format!("rlm-latin1-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("latin1.lua");
    std::fs::write(&file, b"print('caf\xe9', #'\xe9t\xe9', '\\200')").unwrap();
    let out = rlm(&["run", file.to_str().unwrap()]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(out.stdout, b"caf\xe9\t3\t\xc8\n");
}

#[test]
fn exec_writes_the_bytes_printed() {
    let out = rlm(&["exec", "print('\\200')"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(out.stdout, b"\xc8\n");
}

#[test]
fn exec_accepts_code_that_is_not_utf8_on_the_command_line() {
    use std::os::unix::ffi::OsStrExt;
    let code = std::ffi::OsStr::from_bytes(b"print('caf\xe9', #'\xe9t\xe9')");
    let out = rlm_command().arg("exec").arg(code).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(out.stdout, b"caf\xe9\t3\n");
}

/// The README's first command: the main job, with no LLM server.
#[test]
fn the_readme_main_job_runs_and_its_examples_pass() {
    let out = rlm(&[
        "run",
        "examples/log_report.lua",
        "--context",
        "examples/server.log",
        "--path",
        "examples/lua",
    ]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(text.starts_with("lines:\t201\twords:\t833\n"), "{text}");
    assert!(
        text.contains("ERROR\t27\n\nerrors by service:\n  gateway\t10\n"),
        "{text}"
    );
    assert!(stderr(&out).is_empty(), "{}", stderr(&out));
    let examples = rlm(&["test", "--path", "examples/lua"]);
    assert_eq!(examples.status.code(), Some(0), "{}", stdout(&examples));
}

#[test]
fn exec_loads_a_context_file_larger_than_the_memory_limit() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("big.log");
    std::fs::write(&file, "0123456789abcdef".repeat(256 * 1024)).unwrap(); // 4 MiB
    let out = rlm(&[
        "exec",
        "--memory-limit",
        "1",
        "--context",
        file.to_str().unwrap(),
        "print(#context, context:sub(-4))",
    ]);
    assert_eq!(
        (out.status.code(), stdout(&out).as_str()),
        (Some(0), "4194304\tcdef\n"),
        "{}",
        stderr(&out)
    );
}
